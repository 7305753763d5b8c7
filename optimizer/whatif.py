"""What-if edits of a planning problem and the explanation of how a re-plan differs (issue 14).

Pure: a :class:`Problem` and a :class:`WhatIf` in, a new :class:`Problem` out (:func:`apply_whatif`);
two plans in, one :class:`JobChange` per job whose start or block changed, with its reason out
(:func:`explain`). The shell (``pipelines.stages.whatif``) reads the run folder, names nodes,
solves and verifies.

Edits, applied in this order (so GPUs added can be failed, and a requeued job cancelled):

1. ``add_gpus`` N: N GPUs appended after the last one (new nodes of ``gpus_per_node``). A cluster's
   GPU count is a power of two in the model (aligned buddy blocks, DESIGN §5), so the cluster grows
   to the next power of two and the padding GPUs are *down* for the whole horizon (``down_gpus``,
   case C24): 64 + 16 GPUs is a 128-GPU model with GPUs 80..127 down. Every block stays aligned,
   and no job is placed on a GPU that does not exist.
2. ``drain_groups`` (a Slurm drain, case 022): the GPUs take no new work for the whole horizon, but a
   running job on them keeps its block until its planned end (Slurm's DRAINING: running jobs finish,
   nothing new starts). They become down GPUs and the running jobs stay running on them.
   ``fail_groups``: GPUs lost for the whole horizon (a failed node, failed GPUs: Slurm's DOWN), each group
   with a label for the reasons (``"node-03 failed"``). They become down GPUs. A running job whose block
   touches one is **lost and requeued**: it leaves ``running`` and joins the queue (release step 0,
   its current size) with the duration in ``restart_steps`` (the shell gives the job's full
   forecast duration: Slurm's requeue and a Kubernetes pod rescheduled after a node drain restart
   the job's command from the beginning; whether the job resumes from a checkpoint is the job's own
   business, unknown to the planner, so the restart is planned pessimistically, from scratch),
   else its remaining steps.
3. ``cancel``: the queued or running job leaves the problem (a running job frees its block at step 0).
4. ``priority``: a queued or running job's priority is replaced.
5. ``demand_scale``: a service's GPU demand per step becomes ``ceil(round(d × f, 6))`` (the
   P90 GPUs the plan used, scaled; its committed ``current_gpus`` stays).
6. ``add_jobs``: problem-file job entries (DESIGN §3.1) joining the queue.

On a typed cluster (``cluster.nodes``, issue 26) GPUs are added as typed nodes instead (``add_nodes``,
``--add-gpus TYPE:N``; :func:`typed_nodes_to_add` sizes them): they join the node list, the layout is laid
out again largest node first (:func:`grown_cluster`), and every running job, down GPU and failed or drained
GPU keeps its node and local GPU (its index is moved to the new layout by :func:`layout_map`); the
fail and drain groups are given in the new layout. Plain ``add_gpus`` is refused on a typed cluster.

Every refusal is an :class:`optimizer.errors.InputError` naming the option and the value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from domain.units import ROUND_DIGITS, pow2_ceil
from optimizer.errors import InputError
from optimizer.objective import job_reward, objective_value
from optimizer.occupancy import Occupancy
from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Cluster, Node, Problem
from optimizer.solver import mip_gap
from optimizer.verify import verify


@dataclass(frozen=True)
class WhatIf:
    """The edits of one what-if (module docstring gives their order and rules).

    Attributes:
        add_gpus: GPUs to add (>= 0).
        fail_groups: ``(label, gpu indices)`` per failed node or range, indices of the cluster after
            ``add_gpus``: their running jobs are lost and requeued.
        drain_groups: ``(label, gpu indices)`` per drained node: no new start there, running jobs finish.
        cancel: job ids to remove.
        priority: ``(job id, new priority)`` pairs.
        demand_scale: ``(service, factor >= 0)`` pairs.
        add_jobs: problem-file job entries (dicts) to queue.
        restart_steps: job id -> steps a requeued running job needs when restarted (default: its
            remaining steps).
    """

    add_gpus: int = 0
    fail_groups: tuple[tuple[str, tuple[int, ...]], ...] = ()
    cancel: tuple[str, ...] = ()
    priority: tuple[tuple[str, float], ...] = ()
    demand_scale: tuple[tuple[str, float], ...] = ()
    add_jobs: tuple[Mapping[str, Any], ...] = ()
    restart_steps: Mapping[str, int] = field(default_factory=dict)
    drain_groups: tuple[tuple[str, tuple[int, ...]], ...] = ()
    add_nodes: tuple[Node, ...] = ()

    def describe(self) -> list[str]:
        """One phrase per edit, in the order applied (``"+16 GPUs"``, ``"node-03 drained"``, ...)."""
        out = [f"+{self.add_gpus} GPUs"] if self.add_gpus else []
        if self.add_nodes:
            by: dict[str, int] = {}
            for n in self.add_nodes:
                by[n.gpu_type] = by.get(n.gpu_type, 0) + n.gpus
            out += [f"+{g} {t} GPUs" for t, g in by.items()]
        out += [label for label, _ in self.drain_groups]
        out += [label for label, _ in self.fail_groups]
        out += [f"cancel {j}" for j in self.cancel]
        out += [f"priority {j} = {p:g}" for j, p in self.priority]
        out += [f"demand {s} x{f:g}" for s, f in self.demand_scale]
        out += [f"add job {j.get('job_id')}" for j in self.add_jobs]
        return out


@dataclass(frozen=True)
class Applied:
    """A what-if applied to a problem.

    Attributes:
        problem: the edited, validated problem.
        physical_gpus: GPUs that exist after the edit (``n_gpus`` before padding; the base cluster's
            GPUs are ``0 .. base N - 1``, added ones follow).
        requeued: job id -> why it was requeued (``"was running on GPUs [8, 16); node-01 drained"``).
        down_label: GPU index -> label of the group that took it down (failed or drained GPUs only).
        cancelled / added: job ids; priority: job id -> (old, new); scaled: service -> factor.
        added_gpu_ids: the GPUs of the typed nodes added (indices of the new layout; ``()`` otherwise).
        layout: base GPU index -> its index in the edited problem when typed nodes were added and the GPUs were
            laid out again (:func:`layout_map`); ``{}`` when the layout is the base's.
    """

    problem: Problem
    physical_gpus: int
    requeued: dict[str, str]
    down_label: dict[int, str]
    cancelled: tuple[str, ...]
    added: tuple[str, ...]
    priority: dict[str, tuple[float, float]]
    scaled: dict[str, float]
    added_gpu_ids: tuple[int, ...] = ()
    layout: Mapping[int, int] = field(default_factory=dict)


def in_layout(plan: Plan, layout: Mapping[int, int], n_gpus: int) -> Plan:
    """``plan`` with every block moved to the edited problem's layout (``layout``: :attr:`Applied.layout`).

    A block keeps its node and local GPUs (a block lies on one node's consecutive GPUs, which stay
    consecutive: :func:`layout_map`); ``n_gpus`` is the new layout's size. ``plan`` itself when ``layout`` is empty.
    """
    if not layout:
        return plan
    moved = tuple(a if a.block_offset is None else replace(a, block_offset=layout[a.block_offset])
                  for a in plan.assignments)
    return replace(plan, assignments=moved, n_gpus=n_gpus)


def gpu_range(offset: int, gpus: int) -> str:
    """A block as a half-open GPU range, ``GPUs [8, 16)`` (the convention of every plan text)."""
    return f"GPUs [{offset}, {offset + gpus})"


def typed_nodes_to_add(cluster: Cluster, gpu_type: str, n_gpus: int, name: str = "added-{i:02d}",
                       first: int = 0) -> tuple[Node, ...]:
    """Nodes for ``--add-gpus TYPE:N`` on a typed cluster: N GPUs of ``gpu_type``.

    The type's usual node size in ``cluster`` is its most common one (ties: the larger); N that size
    divides gives N / size such nodes, otherwise a power-of-two N gives one node of N GPUs. Nodes are
    named ``name.format(i=first + k)``.

    Raises:
        InputError: an untyped cluster, a type no node has (the types are listed), N below 1, or an N that
            is neither a multiple of the usual size nor a power of two.
    """
    w = f"--add-gpus {gpu_type}:{n_gpus}"
    if not cluster.typed:
        raise InputError(f"{w}: the run's cluster has no GPU types; give --add-gpus N")
    sizes = [nd.gpus for nd in cluster.nodes if nd.gpu_type == gpu_type]
    if not sizes:
        raise InputError(f"{w}: no node of type {gpu_type!r} in the run (types: {', '.join(cluster.gpu_types)})")
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, int) or n_gpus < 1:
        raise InputError(f"{w}: expected a whole number of GPUs >= 1")
    usual = max(set(sizes), key=lambda g: (sizes.count(g), g))
    if n_gpus % usual == 0:
        return tuple(Node(name.format(i=first + k), usual, gpu_type) for k in range(n_gpus // usual))
    if n_gpus & (n_gpus - 1) == 0:
        return (Node(name.format(i=first), n_gpus, gpu_type),)
    raise InputError(f"{w}: {gpu_type} nodes have {usual} GPUs; give a multiple of {usual} "
                     "or a power of two (one node of that many GPUs)")


def grown_cluster(cluster: Cluster, add_nodes: Sequence[Node]) -> Cluster:
    """The typed ``cluster`` with ``add_nodes`` added (laid out again largest first; names must be new)."""
    if not add_nodes:
        return cluster
    return Cluster(n_gpus=0, step_minutes=cluster.step_minutes, horizon_steps=cluster.horizon_steps,
                   nodes=(*cluster.nodes, *add_nodes), gpu_speed=cluster.gpu_speed)


def layout_map(old: Cluster, new: Cluster) -> dict[int, int]:
    """Old GPU index -> new GPU index of every node GPU of ``old`` (same node name, same local GPU)."""
    at = {n.name: o for o, n in zip(new.node_offsets, new.nodes, strict=True)}
    return {o + i: at[n.name] + i for o, n in zip(old.node_offsets, old.nodes, strict=True) for i in range(n.gpus)}


def apply_whatif(problem: Problem, w: WhatIf) -> Applied:
    """Apply the edits of ``w`` to ``problem`` (module docstring); the result is validated.

    Raises:
        InputError: a negative ``add_gpus``; a GPU outside the cluster; an unknown job id (cancel,
            priority) or service (demand scale); a non-positive priority; a negative or non-finite
            factor; an added job whose id exists; any problem rule the edited problem breaks (named
            by :meth:`optimizer.problem.Problem.from_dict`).
    """
    d = problem.to_dict()
    n0 = problem.n_gpus
    if isinstance(w.add_gpus, bool) or not isinstance(w.add_gpus, int) or w.add_gpus < 0:
        raise InputError(f"--add-gpus {w.add_gpus!r}: expected a whole number of GPUs >= 0")
    physical = n0 + w.add_gpus
    down = set(problem.down_gpus)
    m: dict[int, int] = {}
    if problem.cluster.typed and w.add_gpus:
        raise InputError(f"--add-gpus {w.add_gpus}: the run's cluster has GPU types "
                         f"({', '.join(problem.cluster.gpu_types)}); give --add-gpus TYPE:N")
    if w.add_nodes:
        if not problem.cluster.typed:
            raise InputError("--add-gpus TYPE:N: the run's cluster has no GPU types; give --add-gpus N")
        new = grown_cluster(problem.cluster, w.add_nodes)
        m = layout_map(problem.cluster, new)
        physical = sum(n.gpus for n in new.nodes)
        down = {m[g] for g in problem.down_gpus if g in m}
        d["cluster"]["nodes"] = [{"name": n.name, "gpus": n.gpus, "gpu_type": n.gpu_type}
                                 | ({"domain": n.domain} if n.domain else {}) | ({"down": list(n.down)} if n.down else {})
                                 for n in new.nodes]
        for r in d["running"]:
            r["block_offset"] = m[r["block_offset"]]
    elif w.add_gpus:
        size = pow2_ceil(physical)
        d["cluster"]["n_gpus"] = size
        down |= set(range(physical, size))
    down_label: dict[int, str] = {}
    failed: set[int] = set()
    for groups, lost in ((w.fail_groups, True), (w.drain_groups, False)):
        for label, gpus in groups:
            for g in gpus:
                if not 0 <= g < physical:
                    raise InputError(f"{label}: GPU {g} is outside the cluster of {physical} GPUs (0..{physical - 1})")
                down_label.setdefault(g, label)
                if lost:
                    failed.add(g)
    down |= set(down_label)
    d["down_gpus"] = sorted(down)

    requeued: dict[str, str] = {}
    keep_running = []
    for r in d["running"]:
        hit = sorted(set(range(r["block_offset"], r["block_offset"] + r["gpus"])) & failed)
        if not hit:  # untouched, or on a drained node: it keeps its block until its planned end
            keep_running.append(r)
            continue
        labels = ", ".join(dict.fromkeys(down_label[g] for g in hit))
        steps = int(w.restart_steps.get(r["job_id"], max(1, r["remaining_steps"])))
        requeued[r["job_id"]] = (f"was running on {gpu_range(r['block_offset'], r['gpus'])} ({labels}): lost, "
                                 f"requeued to restart from scratch ({steps} step{'s' if steps != 1 else ''})")
        d["jobs"].append({"job_id": r["job_id"], "kind": r["kind"], "priority": r["priority"], "release_step": 0,
                          "gpus": r["gpus"], "duration_steps": steps})
    d["running"] = keep_running

    known = {j["job_id"] for j in d["jobs"]} | {r["job_id"] for r in d["running"]}
    for jid in w.cancel:
        if jid not in known:
            raise InputError(f"--cancel {jid}: no queued or running job {jid!r} in the run ({_some(known)})")
    d["jobs"] = [j for j in d["jobs"] if j["job_id"] not in w.cancel]
    d["running"] = [r for r in d["running"] if r["job_id"] not in w.cancel]

    prio: dict[str, tuple[float, float]] = {}
    entries = {e["job_id"]: e for e in d["jobs"] + d["running"]}
    for jid, p in w.priority:
        if jid not in entries:
            why = " (it is cancelled)" if jid in w.cancel else ""
            raise InputError(f"--priority {jid}={p:g}: no queued or running job {jid!r} in the run{why} ({_some(known)})")
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not math.isfinite(p) or p <= 0:
            raise InputError(f"--priority {jid}={p!r}: the priority must be a number > 0")
        prio[jid] = (float(entries[jid]["priority"]), float(p))
        entries[jid]["priority"] = float(p)

    services = {s["service"]: s for s in d["services"]}
    scaled: dict[str, float] = {}
    for name, f in w.demand_scale:
        if name not in services:
            raise InputError(f"--demand-scale {name}={f:g}: no service {name!r} in the run "
                             f"(services: {', '.join(services) or 'none'})")
        if not isinstance(f, (int, float)) or isinstance(f, bool) or not math.isfinite(f) or f < 0:
            raise InputError(f"--demand-scale {name}={f!r}: the factor must be a finite number >= 0")
        services[name]["demand_gpus"] = [int(math.ceil(round(x * f, ROUND_DIGITS))) for x in services[name]["demand_gpus"]]
        scaled[name] = float(f)

    added = []
    for e in w.add_jobs:
        if not isinstance(e, Mapping):
            raise InputError(f"--add-job: a job must be a JSON object (problem-file job entry); got {type(e).__name__}")
        new_id = str(e.get("job_id"))
        if new_id in known:
            raise InputError(f"--add-job: job_id {new_id!r} is already in the run; give the new job another id")
        d["jobs"].append(dict(e))
        added.append(new_id)
        known.add(new_id)
    added_ids: tuple[int, ...] = ()
    if w.add_nodes:
        at = {n.name: o for o, n in zip(new.node_offsets, new.nodes, strict=True)}
        added_ids = tuple(sorted(at[n.name] + i for n in w.add_nodes for i in range(n.gpus)))
    return Applied(Problem.from_dict(d), physical, requeued, down_label, tuple(w.cancel), tuple(added), prio, scaled,
                   added_ids, m if w.add_nodes else {})


def _some(ids: set[str], k: int = 4) -> str:
    s = sorted(ids)
    return f"{len(s)} jobs, e.g. {', '.join(s[:k])}" if s else "no jobs"


def warm_start(base: Plan, applied: Applied) -> Plan:
    """The base plan carried onto the edited problem, for the MILP's warm start.

    Jobs cancelled are dropped; jobs requeued or added, and queued jobs whose base block touches a
    GPU now down, are left unstarted; a running job keeps its block. The MILP uses it only if the
    verifier accepts it on the new problem (:func:`optimizer.planners.plan`), so a what-if that keeps
    the base plan feasible (added GPUs, a priority change) never plans below the base's objective
    (its objective is recomputed with the new priorities). Typed nodes added lay the GPUs out again: the
    base blocks are carried to the new layout first (:func:`in_layout`).
    """
    p = applied.problem
    base = in_layout(base, applied.layout, p.n_gpus)
    down = set(p.down_gpus)
    ids = {j.job_id for j in p.jobs} | {r.job_id for r in p.running}
    out = []
    for a in base.assignments:
        if a.job_id not in ids:
            continue
        fresh = a.job_id in applied.requeued or a.job_id in applied.added
        hits = a.block_offset is not None and a.gpus is not None and bool(
            down & set(range(a.block_offset, a.block_offset + a.gpus)))
        if fresh or hits:
            out.append(JobAssignment(a.job_id, None, None, None, None))
        else:
            out.append(a)
    seen = {a.job_id for a in out}
    out += [JobAssignment(jid, None, None, None, None) for jid in sorted(ids - seen)]
    return Plan(planner=base.planner, status="feasible", assignments=tuple(out), service_gpus=dict(base.service_gpus),
                objective=0.0, bound=None, gap=None, solve_s=0.0, model=None, n_gpus=p.n_gpus,
                horizon_steps=p.horizon_steps)


@dataclass(frozen=True)
class JobChange:
    """How one job's plan differs between the base and the what-if.

    Steps are plan steps (None: not started within the horizon, or not in that problem). ``reason``
    is one sentence: the edit that touched the job, and what held or freed its GPUs.
    """

    job_id: str
    start_base: int | None
    start_whatif: int | None
    block_base: tuple[int, int] | None  # (offset, gpus)
    block_whatif: tuple[int, int] | None
    reason: str
    kind: str  # "cancelled", "added", "requeued", "earlier", "later", "moved", "unchanged"

    @property
    def delta_steps(self) -> int | None:
        """What-if start minus base start, in steps (None when either is not started)."""
        if self.start_base is None or self.start_whatif is None:
            return None
        return self.start_whatif - self.start_base


def _block(a: JobAssignment | None) -> tuple[int, int] | None:
    if a is None or a.start_step is None or a.block_offset is None or a.gpus is None:
        return None
    return (a.block_offset, a.gpus)


def _names(ids: Sequence[str], describe: Callable[[str], str], k: int = 3) -> str:
    shown = [describe(i) for i in ids[:k]]
    n = len(ids) - k
    more = f" and {n} other{'s' if n > 1 else ''}" if n > 0 else ""
    return ", ".join(shown) + more


def _rt_used(plan: Plan, h: int) -> list[int]:
    out = [0] * h
    for gpus in plan.service_gpus.values():
        for t, x in enumerate(gpus[:h]):
            out[t] += int(x)
    return out


def _batch_used(plan: Plan, h: int) -> list[int]:
    out = [0] * h
    for a in plan.assignments:
        if a.start_step is None or a.end_step is None or a.gpus is None:
            continue
        for t in range(max(0, a.start_step), min(h, a.end_step)):
            out[t] += a.gpus
    return out


def _smallest_size(problem: Problem, job_id: str, default: int) -> int:
    """The smallest allowed size of a queued job of ``problem`` (``default`` when it is not queued there)."""
    for j in problem.jobs:
        if j.job_id == job_id:
            return min(x.gpus for x in j.sizes)
    return default


def _fits_somewhere(problem: Problem, gpus: int) -> bool:
    """True when some aligned block of ``gpus`` GPUs has no down GPU."""
    down = set(problem.down_gpus)
    return any(not down.intersection(range(o, o + gpus)) for o in range(0, problem.n_gpus - gpus + 1, gpus))


def explain(base_problem: Problem, base_plan: Plan, applied: Applied, new_plan: Plan,
            when: Callable[[int], str] | None = None,
            where: Callable[[int, int], str] | None = None) -> list[JobChange]:
    """One :class:`JobChange` per job whose start, size or block differs, or that an edit touched.

    Reasons (first that applies, then what held or freed the GPUs):

    - cancelled / added / requeued (the edit) / priority changed (old -> new);
    - earlier: the GPUs of its new block over the steps it gained were, in the base plan, held by
      the jobs named (cancelled ones "freed"), or they are added GPUs; with no holder, the base plan
      had fewer free GPUs than it needs at a step (real-time GPUs counted), else the re-plan simply
      preferred it (the base had room: an equally valid alternative the solver now picks);
    - later / not started: its base block over the steps it lost is, in the what-if, down (the
      group's label), or held by the jobs named (added, requeued or re-prioritised ones say so);
      with no holder, fewer GPUs are free than it needs at a step (real-time demand scaled, GPUs
      down), else the re-plan preferred other work;
    - same start, other block: moved off GPUs now down, or re-packed.

    ``when(step)`` formats a step (default ``step 5``); ``where(offset, gpus)`` a block (default
    :func:`gpu_range`). When typed nodes were added (``applied.layout``) both plans' blocks are in the new
    layout (the base's carried by :func:`in_layout`), so ``block_base`` of a change is too. Returned in the order: touched jobs, then by start change (earliest gain first).
    """
    when = when or (lambda t: f"step {t}")
    where = where or gpu_range
    p_new = applied.problem
    H = p_new.horizon_steps
    # typed nodes added lay the GPUs out again: the base blocks are compared in the new layout (same node, same
    # local GPUs), never as raw base indices (which name other GPUs there)
    base_plan = in_layout(base_plan, applied.layout, p_new.n_gpus)
    n_base_layout = p_new.n_gpus if applied.layout else base_problem.n_gpus
    base_a = {a.job_id: a for a in base_plan.assignments}
    new_a = {a.job_id: a for a in new_plan.assignments}
    occ_base = Occupancy.of(base_plan, n_base_layout, H)
    occ_new = Occupancy.of(new_plan, p_new.n_gpus, H)
    up_base = base_problem.n_gpus - len(base_problem.down_gpus)
    up_new = p_new.n_gpus - len(p_new.down_gpus)
    free_base = [up_base - b - r for b, r in zip(_batch_used(base_plan, H), _rt_used(base_plan, H))]
    free_new = [up_new - b - r for b, r in zip(_batch_used(new_plan, H), _rt_used(new_plan, H))]
    rt_base, rt_new = _rt_used(base_plan, H), _rt_used(new_plan, H)
    new_down = set(p_new.down_gpus) - {applied.layout.get(g, g) for g in base_problem.down_gpus}
    added_gpus = (set(applied.added_gpu_ids) if applied.added_gpu_ids
                  else set(range(base_problem.n_gpus, applied.physical_gpus)))

    def start(a: JobAssignment | None) -> int | None:
        return None if a is None else a.start_step

    def in_new(jid: str) -> str:
        a = new_a.get(jid)
        if jid in applied.cancelled:
            return f"{jid} (cancelled)"
        if a is None or a.start_step is None:
            return f"{jid} (now not started)"
        b = base_a.get(jid)
        if b is not None and b.start_step == a.start_step:
            blk = _block(a)
            return jid if blk is None or _block(b) == blk else f"{jid} (moved to {where(*blk)})"
        return f"{jid} (now at {when(a.start_step)})"

    def in_base(jid: str) -> str:
        if jid in applied.added:
            return f"added job {jid}"
        if jid in applied.requeued:
            return f"requeued job {jid}"
        if jid in applied.priority:
            old, new = applied.priority[jid]
            return f"{jid} (priority {old:g} -> {new:g})"
        a, b = base_a.get(jid), new_a.get(jid)
        if a is not None and b is not None and a.start_step is not None and a.start_step != b.start_step:
            return f"{jid} (moved from {when(a.start_step)})"
        blk = _block(a)
        if blk is not None and b is not None and blk != _block(b):
            return f"{jid} (moved from {where(*blk)})"
        return jid

    def short_at(free: list[int], steps: range, need: int) -> int | None:
        """The first step of ``steps`` with fewer than ``need`` GPUs free, or None."""
        return next((t for t in steps if t < H and free[t] < need), None)

    out: list[JobChange] = []
    for jid in list(dict.fromkeys(list(base_a) + list(new_a))):
        a_b, a_n = base_a.get(jid), new_a.get(jid)
        s_b, s_n = start(a_b), start(a_n)
        blk_b, blk_n = _block(a_b), _block(a_n)
        parts: list[str] = []
        kind = ""
        if jid in applied.cancelled:
            kind = "cancelled"
            parts.append("cancelled" + (f": frees {where(*blk_b)} from {when(s_b)}" if blk_b and s_b is not None else ""))
            out.append(JobChange(jid, s_b, None, blk_b, None, "; ".join(parts), kind))
            continue
        if jid in applied.added:
            kind = "added"
            parts.append("added")
        if jid in applied.requeued:
            kind = "requeued"
            parts.append(applied.requeued[jid])
            s_b = None  # its base "start" was the running block; the restart is what counts
        if jid in applied.priority:
            old, new = applied.priority[jid]
            parts.append(f"priority {old:g} -> {new:g}")
        if (s_b, blk_b) == (s_n, blk_n) and not parts:
            continue
        gain: list[str] = []
        if s_n is not None and blk_n is not None and (s_b is None or s_n < s_b) and kind not in ("added", "requeued"):
            kind = kind or "earlier"
            a = a_n
            assert a is not None and a.end_step is not None
            steps = range(s_n, min(a.end_step, s_b if s_b is not None else H, H))
            holders = list(occ_base.holders(steps, *blk_n, exclude=jid))
            on_added = sorted(added_gpus & set(range(blk_n[0], blk_n[0] + blk_n[1])))
            if on_added:  # named as ``where`` names blocks: with the run's nodes, the added node's name first
                at = where(on_added[0], on_added[-1] + 1 - on_added[0])
                gain.append(f"runs on added {at}" if at.startswith("GPUs") else f"runs on added GPUs: {at}")
            freed = [h for h in holders if h in applied.cancelled]
            others = [h for h in holders if h not in applied.cancelled]
            if freed:
                gain.append(f"freed by cancelled {', '.join(freed)}")
            if others:
                gain.append(f"its block {where(*blk_n)} from {when(s_n)} was held in the base plan by "
                            f"{_names(others, in_new)}")
            if not gain:
                t = short_at(free_base, steps, blk_n[1])
                if t is not None:
                    more = (f"; real-time now takes {rt_base[t] - rt_new[t]} GPUs fewer there"
                            if rt_new[t] < rt_base[t] else "")
                    if up_new > up_base:
                        more += f"; {up_new} GPUs are up instead of {up_base}"
                    gain.append(f"the base plan had {max(0, free_base[t])} GPUs free at {when(t)}, it needs "
                                f"{blk_n[1]}{more}")
                else:
                    gain.append("its slot was free in the base plan too: the re-plan prefers it (equal-value "
                                "alternatives are not unique)")
            parts.append(("starts earlier: " if s_b is not None else "now starts: ") + "; ".join(gain))
        elif s_b is not None and blk_b is not None and (s_n is None or s_n > s_b):
            kind = kind or "later"
            a = a_b
            assert a is not None and a.end_step is not None
            steps = range(s_b, min(a.end_step, s_n if s_n is not None else H, H))
            lost = sorted(new_down & set(range(blk_b[0], blk_b[0] + blk_b[1])))
            need = _smallest_size(p_new, jid, blk_b[1])
            holders = list(occ_new.holders(steps, *blk_b, exclude=jid))
            if s_n is None and not _fits_somewhere(p_new, need):
                gain.append(f"no aligned block of {need} GPUs is fully up any more ({up_new} GPUs up)")
                holders = []
            if lost:
                labels = ", ".join(dict.fromkeys(applied.down_label.get(g, "down") for g in lost))
                gain.append(f"its base block {where(*blk_b)} is down ({labels})")
                holders = []
            if holders:
                gain.append(f"its base block {where(*blk_b)} from {when(s_b)} is now held by "
                            f"{_names(holders, in_base)}")
            if not gain:
                t = short_at(free_new, steps, blk_b[1])
                if t is not None:
                    more = (f"; real-time takes {rt_new[t] - rt_base[t]} GPUs more there"
                            if rt_new[t] > rt_base[t] else "")
                    if up_new < up_base:
                        more += f"; {up_new} GPUs are up instead of {up_base}"
                    gain.append(f"only {max(0, free_new[t])} GPUs are free at {when(t)}, it needs {blk_b[1]}{more}")
                else:
                    gain.append("the re-plan prefers other work in its slot (equal-value alternatives are not "
                                "unique)")
            parts.append(("starts later: " if s_n is not None else "no longer starts within the horizon: ")
                         + "; ".join(gain))
        elif s_b is not None and s_n == s_b and blk_b != blk_n and blk_b is not None and blk_n is not None:
            kind = kind or "moved"
            lost = sorted(new_down & set(range(blk_b[0], blk_b[0] + blk_b[1])))
            if lost:
                labels = ", ".join(dict.fromkeys(applied.down_label.get(g, "down") for g in lost))
                parts.append(f"same start, moved off {where(*blk_b)} ({labels}) to {where(*blk_n)}")
            else:
                parts.append(f"same start, re-packed from {where(*blk_b)} to {where(*blk_n)}")
        elif kind in ("added", "requeued"):
            need = _smallest_size(p_new, jid, 1)
            if s_n is None and not _fits_somewhere(p_new, need):
                parts.append(f"cannot start: no aligned block of {need} GPUs is fully up ({up_new} GPUs up)")
            elif s_n is None:
                parts.append("not started within the horizon")
            else:
                assert blk_n is not None
                parts.append(f"starts at {when(s_n)} on {where(*blk_n)}")
        else:
            kind = kind or "unchanged"
            if s_n is None:
                parts.append("not started within the horizon in either plan")
            else:
                parts.append("start unchanged")
        out.append(JobChange(jid, s_b, s_n, blk_b, blk_n, "; ".join(parts), kind))

    order = {"cancelled": 0, "requeued": 1, "added": 2}

    def key(c: JobChange) -> tuple[int, float, str]:
        d = c.delta_steps
        rank = order.get(c.kind, 3)
        gain = float(d) if d is not None else (-1e9 if c.start_whatif is not None else 1e9)
        return (rank, gain, c.job_id)

    return sorted(out, key=key)


def prefer_base(new: Plan, carried: Plan, problem: Problem, max_passes: int = 3) -> tuple[Plan, tuple[str, ...]]:
    """``new`` with every job put back on its base start and block where that costs nothing: the what-if's tie-break.

    ``new``: the what-if's plan of ``problem``; ``carried``: the base plan carried onto ``problem``
    (:func:`warm_start`). A solver stopped inside its gap, or one of several equally good plans, moves
    jobs the change did not need to move (issue 29: +16 idle GPUs listed 4 jobs later and 11 re-packed).
    The jobs whose base assignment started and whose ``new`` one starts later, not at all, or on another
    block are put back on their base assignments, first all together, then (what is left) one at a
    time in plan order, each step kept when the plan still verifies (:func:`optimizer.verify.verify`)
    and its objective does not drop (1e-9 relative); the single-job passes repeat up to ``max_passes``
    times while a pass keeps one. Returns the plan (objective
    recomputed, gap against ``new``'s bound) and the job ids put back, sorted.
    """
    base_of = {a.job_id: a for a in carried.assignments if a.started and not a.running}

    def moved(a: JobAssignment) -> bool:  # started in the base, and now later, not at all or on another block
        b = base_of.get(a.job_id)
        return b is not None and not a.running and a != b and not (
            a.start_step is not None and b.start_step is not None and a.start_step < b.start_step)

    cur = new
    cur_obj = objective_value(cur, problem)
    back: set[str] = set()
    # first all at once (two jobs that swapped blocks only go back together), then one job at a time
    joint = replace(cur, assignments=tuple(base_of[a.job_id] if moved(a) else a for a in cur.assignments))
    joint_obj = objective_value(joint, problem)
    if joint_obj >= cur_obj - 1e-9 * max(1.0, abs(cur_obj)) and not verify(joint, problem):
        back = {a.job_id for a in cur.assignments if moved(a)}
        cur, cur_obj = joint, joint_obj
    for _ in range(max_passes):
        kept = False
        for i, a in enumerate(cur.assignments):
            if not moved(a):
                continue  # unchanged, or the change let it start earlier: what the what-if buys
            b = base_of[a.job_id]
            cand = replace(cur, assignments=cur.assignments[:i] + (b,) + cur.assignments[i + 1:])
            obj = objective_value(cand, problem)
            if obj < cur_obj - 1e-9 * max(1.0, abs(cur_obj)) or verify(cand, problem):
                continue
            cur, cur_obj, kept = cand, obj, True
            back.add(a.job_id)
        if not kept:
            break
    if not back:
        return new, ()
    gap = mip_gap(cur_obj, new.bound) if new.bound is not None and new.bound >= cur_obj else new.gap
    return replace(cur, objective=cur_obj, gap=gap), tuple(sorted(back))


def why_waiting(problem: Problem, plan: Plan, job_id: str) -> str:
    """Why the queued job ``job_id`` is not started in ``plan`` of ``problem``: one phrase, from the plan's free GPUs.

    Free GPUs at step t = GPUs up - real-time GPUs - batch GPUs of ``plan``. For each allowed size
    (gpus g, duration d) and start t from its release: the job fits by count when every step of
    [t, min(t + d, horizon)) has g free; it fits in place when, besides, one aligned g-GPU block has
    no job and no down GPU over those steps. The phrase names the first reason that holds: more GPUs
    than are up; no d-step window with g free (with the most free in any such window); free by count
    but never as one aligned block (fragmentation); or the step where it would fit (the plan, not
    proven optimal, left it there). Raises KeyError when ``job_id`` is not a queued job of ``problem``.

    A type-constrained job on a typed cluster (``job.gpu_types``) counts only the GPUs of nodes of its
    types, and its blocks lie inside one such node; real-time is counted on the whole cluster, not placed,
    so its free GPUs at t are at most the cluster's.
    """
    job = next((j for j in problem.jobs if j.job_id == job_id), None)
    if job is None:
        raise KeyError(job_id)
    h, n = problem.horizon_steps, problem.n_gpus
    down = set(problem.down_gpus)
    rt, bu = _rt_used(plan, h), _batch_used(plan, h)
    grid = plan.owner_grid(n, h)
    free = [n - len(down) - rt[t] - bu[t] for t in range(h)]
    c = problem.cluster
    if c.typed and job.gpu_types:
        nodes = [(o, nd.gpus) for o, nd in zip(c.node_offsets, c.nodes, strict=True) if job.eligible(nd.gpu_type)]
        mine = [x for o, g in nodes for x in range(o, o + g) if x not in down]
        up, of = len(mine), f" of its types ({' or '.join(job.gpu_types)})"
        free = [min(free[t], up - sum(1 for x in mine if grid[t][x] != "")) for t in range(h)]
    else:
        nodes, up, of = [(0, n)], n - len(down), ""
    options = sorted(job.sizes, key=lambda o: o.gpus)
    if all(o.gpus > up for o in options):
        return f"needs {options[0].gpus} GPU{'s' if options[0].gpus != 1 else ''}{of}; only {up} {'are' if up != 1 else 'is'} up"
    best_free, by_count = 0, None
    for o in options:
        g, d = o.gpus, o.duration_steps
        for t in range(job.release_step, h):
            span = range(t, min(h, t + d))
            m = min(free[s] for s in span)
            best_free = max(best_free, m)
            if m < g:
                continue
            by_count = by_count or (t, g)
            for first, size in nodes:
                for off in range(first, first + size - g + 1, g):
                    blk = range(off, off + g)
                    if not down.intersection(blk) and all(grid[s][x] == "" for s in span for x in blk):
                        return (f"an aligned {g}-GPU block is free from step {t}: the plan (not proven optimal) left "
                                "it waiting")
    if by_count is not None:
        t, g = by_count
        return f"{g} GPUs{of} are free at once from step {t} but never as one aligned {g}-GPU block (fragmentation)"
    o = options[0]
    return (f"no {o.duration_steps}-step window from its release (step {job.release_step}) has {o.gpus} GPUs{of} "
            f"free (at most {best_free} free in any window for a size it allows; real-time and other jobs hold the "
            "rest)")


#: Most jobs whose assignment differs between the what-if's plan and the base carried over for which
#: :func:`tie_break` builds the plan up from the base (each move is one verification).
TIE_BREAK_MAX_MOVES = 300
#: Most placements :func:`insert_where_free` verifies for one job (best reward first) before it gives up.
INSERT_MAX_TRIES = 64


def insert_where_free(plan: Plan, problem: Problem, job_id: str) -> Plan | None:
    """``plan`` with the queued job ``job_id`` started where it fits the plan as it is; None when it fits nowhere.

    No other job moves: the candidates are, for every size of the job and every aligned block (inside one node of
    an eligible type on a typed cluster, the run lasting :meth:`~optimizer.problem.Job.duration_on` that type),
    the earliest start from its release at which the block's GPUs hold no job and are not down, and as many GPUs
    are held by neither real-time nor batch work, at every step of the run inside the horizon
    (``plan.owner_grid``; a later start of the same block earns no more, the decay per step being <= 1). They are tried in order of reward
    (:func:`optimizer.objective.job_reward`, highest first: with a decay per step, the earliest start of the
    largest size) and the first that passes the verifier (real-time capacity, the swap cap) is kept; at most
    :data:`INSERT_MAX_TRIES` are verified. For one size with a decay per step below 1 this is the earliest
    start with a free aligned block, lowest block first: where the risk report's "fits the plan as it is"
    puts a smaller size (``pipelines.report.actions.smaller_size``, on the report's view of the plan).

    Raises:
        KeyError: ``job_id`` is not a queued job of ``problem`` or has no assignment row in ``plan``.
    """
    job = next((j for j in problem.jobs if j.job_id == job_id), None)
    idx = next((i for i, a in enumerate(plan.assignments) if a.job_id == job_id), None)
    if job is None or idx is None:
        raise KeyError(job_id)
    h, n, c = problem.horizon_steps, problem.n_gpus, problem.cluster
    grid = plan.owner_grid(n, h)
    down = set(problem.down_gpus)
    rt, batch = _rt_used(plan, h), _batch_used(plan, h)
    room = [n - len(down) - rt[t] - batch[t] for t in range(h)]  # GPUs up that neither real-time nor batch holds
    if c.typed:
        spans = [(o, nd.gpus, nd.gpu_type) for o, nd in zip(c.node_offsets, c.nodes, strict=True)
                 if job.eligible(nd.gpu_type)]
    else:
        spans = [(0, n, "")]
    cands: list[tuple[float, int, int, int, int]] = []
    for s in job.sizes:
        for first, size, gtype in spans:
            d = job.duration_on(s, gtype, c) if c.typed else s.duration_steps
            for off in range(first, first + size - s.gpus + 1, s.gpus):
                blk = range(off, off + s.gpus)
                if down.intersection(blk):
                    continue
                for t in range(job.release_step, h):  # the earliest free start of each block: its best reward
                    span = range(t, min(h, t + d))
                    if all(room[u] >= s.gpus for u in span) and all(grid[u][x] == "" for u in span for x in blk):
                        cands.append((job_reward(job, s.gpus, t, problem, gtype), -t, off, s.gpus, d))
                        break
    cands.sort(key=lambda x: (-x[0], -x[1], x[2]))
    for _, neg_t, off, g, d in cands[:INSERT_MAX_TRIES]:
        t = -neg_t
        a = JobAssignment(job_id, t, t + d, off, g)
        cand = replace(plan, assignments=plan.assignments[:idx] + (a,) + plan.assignments[idx + 1:])
        if not verify(cand, problem):
            return cand
    return None


def tie_break(new: Plan, carried: Plan, problem: Problem) -> tuple[Plan, tuple[str, ...]]:
    """The what-if's answer: the plan closest to the base among those as good as ``new`` to the solve's standard.

    ``new``: the what-if's plan of ``problem`` (solved to ``settings.mip_rel_gap``); ``carried``: the base plan
    carried onto ``problem`` (:func:`warm_start`). When ``carried`` verifies on ``problem``, it is the start:
    ``new``'s service allocation is taken, each job ``new`` starts and ``carried`` does not (an added job, one
    the change unblocked) is put where it fits ``carried`` as it is (:func:`insert_where_free`, no other job
    moved), and then, one job at a time in plan order, ``new``'s assignment of a job
    that differs is taken, each step kept when the plan still verifies and its objective rises (up to 3 passes; at most
    :data:`TIE_BREAK_MAX_MOVES` differing jobs). If that plan's objective is within ``mip_rel_gap`` of
    ``new``'s (the difference is inside the tolerance both plans were solved to) it is the answer: every
    other move of ``new`` was solver slack, not needed by the change. Otherwise :func:`prefer_base` puts
    back what it can into ``new``. Returns the plan (objective recomputed, gap against ``new``'s bound, ``new``'s
    status) and the ids of the jobs kept on their base assignment
    that ``new`` had moved, sorted.
    """
    gap_tol = problem.settings.mip_rel_gap
    new_obj = objective_value(new, problem)
    by_job = {a.job_id: a for a in carried.assignments}
    diff = [a for a in new.assignments if by_job.get(a.job_id) != a]
    if not diff or len(diff) > TIE_BREAK_MAX_MOVES or verify(carried, problem):
        return prefer_base(new, carried, problem)
    cur = replace(carried, planner=new.planner, status=new.status, source=new.source, model=new.model,
                  bound=new.bound, solve_s=new.solve_s, message=new.message, notes=new.notes,
                  solver_status=new.solver_status, wall_clock_limited=new.wall_clock_limited)
    cur_obj = objective_value(cur, problem)

    def better(cand: Plan) -> float | None:
        obj = objective_value(cand, problem)
        return obj if obj > cur_obj + 1e-9 * max(1.0, abs(cur_obj)) and not verify(cand, problem) else None

    if dict(new.service_gpus) != dict(cur.service_gpus):
        cand = replace(cur, service_gpus=dict(new.service_gpus))
        if (obj := better(cand)) is not None:
            cur, cur_obj = cand, obj
    # a job ``new`` starts that the base does not (an added job, one the change unblocked) goes where it fits
    # the plan as it is, no other job moved: the placement the risk report suggests (issue 29)
    started_now = {a.job_id for a in cur.assignments if a.started}
    queued = {j.job_id for j in problem.jobs}
    for a in diff:
        if a.started and not a.running and a.job_id not in started_now and a.job_id in queued:
            ins = insert_where_free(cur, problem, a.job_id)
            if ins is not None and (obj := better(ins)) is not None:
                cur, cur_obj = ins, obj
    for _ in range(3):
        took = False
        for a in diff:
            idx = next(i for i, x in enumerate(cur.assignments) if x.job_id == a.job_id)
            if cur.assignments[idx] == a:
                continue
            cand = replace(cur, assignments=cur.assignments[:idx] + (a,) + cur.assignments[idx + 1:])
            if (obj := better(cand)) is not None:
                cur, cur_obj, took = cand, obj, True
        if not took:
            break
    if cur_obj < new_obj - gap_tol * max(1.0, abs(new_obj)):
        return prefer_base(new, carried, problem)
    gap = mip_gap(cur_obj, new.bound) if new.bound is not None and new.bound >= cur_obj else None
    now = {a.job_id: a for a in cur.assignments}
    back = tuple(sorted(a.job_id for a in diff if a.job_id in by_job and now.get(a.job_id) == by_job[a.job_id]))
    return replace(cur, objective=cur_obj, gap=gap), back
