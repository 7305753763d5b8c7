"""Why a queued job waits (DESIGN §6.4 "wait reasons"), judged at the job's own earliest feasible step.

Rules, in order (each a sentence of :func:`wait_reason`):

1. **Starts at release**: nothing to explain.
2. **Cannot fit**: its smallest size is more than the GPUs that are up, or more than the GPUs up
   minus the real-time minimum ``X`` = the fewest GPUs the services need at any step of the horizon
   (each service's need: its P90 demand within its band, moving by at most its swap cap from its
   current GPUs, :func:`optimizer.capacity.service_need`): "cannot fit on this cluster while
   real-time minimum is X".
3. **Earliest feasible step** ``e``: the first step from its release at which the job could run its
   whole duration (at some allowed size) if it were the only queued job: running jobs' blocks,
   down GPUs and the services' need leave enough GPUs, and an aligned block of that size free of
   running jobs, at every step of the run. None in the horizon: the running jobs and real-time need
   that leave no room, even alone.
4. At ``e`` in the plan (sizes: the planned size, else the size of rule 3):
   - **GPUs free vs needed**: idle GPUs at ``e`` against the size; the aligned block it needs (its
     planned block, else the block whose holders end first) and every batch job holding it, with the
     time it ends (four named, then "and N others"); a holder of at least one node's GPUs for more
     than :data:`LONG_HOLD_H` hours is flagged "long holder". When real-time holds GPUs above its
     demand the text says how many are the swap cap's (services can change by at most ``swap_cap``
     GPUs per step) and how many the plan's spare. When the block's batch holders leave before the
     job starts, what keeps it waiting from then (:func:`_after_block_frees`).
   - **Waits although enough GPUs are idle**: *fragmentation* (no aligned block free at ``e``, or none
     free for the whole run), *room taken later in its run* (real-time rising, jobs starting), the
     *starvation guard* (EASY's reservation for an earlier job, DESIGN §5), or, with room for the whole
     run, the planner's own choice (a baseline's queue order; the MILP's gap tolerance).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from optimizer.verify import max_wait_violations
from pipelines.report.basics import ReportInputs, clock, hours_text, plural, step_ts
from pipelines.report.planview import PlanView, plan_view

#: A holder of at least one node's GPUs for longer than this (hours, from its start or the plan start)
#: is flagged "long holder".
LONG_HOLD_H = 24.0
#: Holders named in a wait reason before "and N others".
MAX_HOLDERS_NAMED = 4
#: Planners that keep a queue order of their own (``optimizer.baselines``).
BASELINE_PLANNERS = ("fifo", "easy", "easy_backfill", "priority", "priority_backfill")


def size_text(job: Any) -> str:
    """The GPU count a job needs, in words.

    ``"8 GPUs"``, or ``"4–8 GPUs (smallest allowed size 4)"`` for a job with several allowed sizes.
    """
    sizes = sorted({s.gpus for s in job.sizes})
    if len(sizes) == 1:
        return plural(sizes[0], "GPU")
    return f"{sizes[0]}–{sizes[-1]} GPUs (smallest allowed size {sizes[0]})"


def is_long_holder(view: PlanView, job_id: str, step_h: float) -> bool:
    """True when ``job_id`` holds at least one node's GPUs for more than :data:`LONG_HOLD_H` hours."""
    held_h = (view.end[job_id] - max(0, view.start[job_id])) * step_h
    return view.gpus[job_id] >= view.gpn and held_h > LONG_HOLD_H


def holder_text(inp: ReportInputs, view: PlanView, job_id: str, gpus_in_block: int | None = None) -> str:
    """``"qbat-00005 (8 GPUs until 2025-03-16 19:00Z)"``, with ``"long holder, 6.2 days"`` when flagged."""
    g = view.gpus[job_id] if gpus_in_block is None else gpus_in_block
    txt = f"{job_id} ({plural(g, 'GPU')}{' of its ' + str(view.gpus[job_id]) if g != view.gpus[job_id] else ''}"
    txt += f" until {clock(step_ts(inp, view.end[job_id]))}"
    if is_long_holder(view, job_id, inp.step_h):
        txt += f"; long holder, {hours_text((view.end[job_id] - max(0, view.start[job_id])) * inp.step_h)}"
    return txt + ")"


def names_text(items: Sequence[str], limit: int = MAX_HOLDERS_NAMED) -> str:
    """``"a, b, c and d"``; beyond ``limit`` items: ``"a, b, c, d and 3 others"``."""
    items = list(items)
    if not items:
        return "nothing"
    if len(items) <= limit:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    rest = len(items) - limit
    return ", ".join(items[:limit]) + f" and {rest} other{'s' if rest > 1 else ''}"


def _block_holders(view: PlanView, t: int, o: int, s: int, exclude: str) -> list[tuple[str, int]]:
    """Batch jobs holding GPUs of block ``[o, o+s)`` at step ``t`` (id, GPUs in the block), latest end first."""
    counts = view.occupancy.holders(range(t, t + 1), o, s, exclude=exclude)
    return sorted(counts.items(), key=lambda kv: (-view.end[kv[0]], -kv[1], kv[0]))


def free_blocks(view: PlanView, t0: int, t1: int, s: int, exclude: str, fixed_only: bool = False) -> list[int]:
    """Offsets of aligned ``s``-GPU blocks free during steps ``[t0, t1)`` (own cells of ``exclude`` free)."""
    if s > view.N or t1 <= t0:
        return []
    if fixed_only:
        busy = view.fixed[t0:t1]
    else:
        own = view.ids.index(exclude) if exclude in view.ids else -3
        busy = (view.owner[t0:t1] != -1) & (view.owner[t0:t1] != own)
    free = ~busy.reshape(t1 - t0, view.N // s, s).any(axis=2).any(axis=0)
    return [int(b) * s for b in np.flatnonzero(free)]


def own_gpus(view: PlanView, job_id: str, t: int) -> int:
    """GPUs ``job_id`` itself holds at step ``t`` in the plan (0 when it does not run then)."""
    if job_id not in view.start:
        return 0
    return view.gpus[job_id] if view.start[job_id] <= t < view.end[job_id] else 0


def earliest_alone(inp: ReportInputs, view: PlanView, job: Any) -> tuple[int, Any] | None:
    """(step, size) of rule 3 of the module docstring: the earliest step the job could run alone; None."""
    r = max(0, int(job.release_step))
    cap = view.n_up - view.running_gpus - view.need.sum(axis=0)
    best: tuple[int, Any] | None = None
    for size in sorted(job.sizes, key=lambda z: z.gpus):
        s, d = int(size.gpus), int(size.duration_steps)
        if s > view.N:
            continue
        for t in range(r, view.H if best is None else min(view.H, best[0])):
            t1 = min(view.H, t + d)
            if (cap[t:t1] >= s).all() and free_blocks(view, t, t1, s, job.job_id, fixed_only=True):
                best = (t, size)
                break
    return best


def cannot_fit(inp: ReportInputs, view: PlanView, job: Any) -> str | None:
    """Rule 2 of the module docstring: the sentence for a job that can never fit, else None."""
    s_min = min(int(z.gpus) for z in job.sizes)
    if s_min > view.n_up:
        return f"cannot fit on this cluster: needs {size_text(job)}, {plural(view.n_up, 'GPU')} are up"
    rt_min = int(view.need.sum(axis=0).min()) if view.need.size else 0
    if s_min > view.n_up - rt_min:
        band_min = sum(int(s.min_gpus) for s in inp.problem.services)
        return (f"cannot fit on this cluster while real-time minimum is {rt_min} GPUs: needs {size_text(job)}, "
                f"{plural(view.n_up, 'GPU')} are up and the real-time services need at least {rt_min} at every "
                f"step of the horizon (P90 demand within band and swap cap; band minimums alone {band_min}), "
                f"so at most {view.n_up - rt_min} are ever free for batch work")
    return None


def _rt_above_demand(inp: ReportInputs, view: PlanView, t: int) -> tuple[int, int]:
    """(GPUs real-time holds above its demand because of the swap cap, spare GPUs above its need) at ``t``."""
    need = int(view.need[:, t].sum()) if view.need.size else 0
    floor = int(view.demand_floor[:, t].sum()) if view.demand_floor.size else 0
    return max(0, need - floor), max(0, int(view.rt[t]) - need)


def _no_room_alone(inp: ReportInputs, view: PlanView, job: Any) -> str:
    r = max(0, int(job.release_step))
    cap = view.n_up - view.running_gpus - view.need.sum(axis=0)
    best = int(cap[r:].max()) if r < view.H else 0
    holders = sorted(view.running, key=lambda j: (-view.end[j], j))
    held = names_text([holder_text(inp, view, j) for j in holders]) if holders else "no running job"
    return (f"no room in this horizon even with no other queued job: needs {size_text(job)} for its whole run, "
            f"at most {best} GPUs are ever left by running jobs ({held}) and real-time need "
            f"(up to {plural(int(view.need.sum(axis=0).max()) if view.need.size else 0, 'GPU')})")


def _guard_text(inp: ReportInputs, view: PlanView, job: Any, t: int, s: int, d: int, o: int) -> str | None:
    """The starvation guard's reservation that would be broken by starting ``job`` at ``t`` (DESIGN §5), or None.

    Exact: the plan with the job moved to ``[t, t + d)`` on block ``o`` is checked by
    :func:`optimizer.verify.max_wait_violations`; the reserved job is the one the first new violation names.
    """
    W = getattr(inp.problem.settings, "max_wait_steps", None)
    if W is None:
        return None
    plan = inp.plan
    moved = [a if a.job_id != job.job_id else replace(a, start_step=t, end_step=t + d, block_offset=o, gpus=s)
             for a in plan.assignments]
    if not any(a.job_id == job.job_id for a in plan.assignments):
        return None
    before = set(max_wait_violations(plan, inp.problem))
    after = [v for v in max_wait_violations(replace(plan, assignments=tuple(moved)), inp.problem) if v not in before]
    if not after:
        return None
    m = re.search(r"runs while '([^']+)', reserved since step (\d+)", after[0])
    if not m:
        return f"starting it then would break the starvation guard (max_wait_steps={W})"
    h = inp.problem.job(m.group(1))
    return (f"the starvation guard reserves room for {h.job_id} (queued since {clock(step_ts(inp, h.release_step))}, "
            f"protected after max_wait_steps={W}): starting it then would delay {h.job_id}")


def type_nodes(problem: Any) -> list[tuple[str, str, int, int, tuple[int, ...]]]:
    """The nodes of a typed cluster as ``(name, gpu_type, first GPU, GPUs, down local GPUs)``, layout order; [] untyped."""
    c = problem.cluster
    if not getattr(c, "typed", False):
        return []
    return [(n.name, n.gpu_type, int(o), int(n.gpus), tuple(n.down)) for o, n in zip(c.node_offsets, c.nodes, strict=True)]


def type_wait_text(inp: ReportInputs, view: PlanView, job: Any, start_step: int | None) -> str | None:
    """The GPU-type sentence of a type-constrained job that waits (typed cluster, ``job.gpu_types`` set), else None.

    At its release step ``r``: ``"needs S × A or B: all K A/B nodes busy until <t>"`` (``t`` the first step a node
    of an eligible type has ``S`` GPUs free of batch work; ``"for the whole horizon"`` when none has),
    or ``"F of G A GPUs free of batch work at <r>"`` when one has them at ``r``; then each other type with GPUs
    free of batch work at ``r``: ``"N T4 free of batch work but not eligible"``. Real-time GPUs are counted on
    the cluster, not placed on a type, so "free of batch work" is the most a type-level sentence can say.
    """
    nodes = type_nodes(inp.problem)
    if not nodes or not job.gpu_types:
        return None
    s = min(int(z.gpus) for z in job.sizes)
    r = min(max(0, int(job.release_step)), view.H - 1)
    elig = [(o, g, down) for _, ty, o, g, down in nodes if ty in job.gpu_types]
    names = " or ".join(job.gpu_types)

    def free(t: int, o: int, g: int, down: tuple[int, ...]) -> int:
        return _node_free_of_batch(view, job.job_id, t, o, g, down)

    first = next((t for t in range(r, view.H) if any(free(t, o, g, d) >= s for o, g, d in elig)), None)
    n_elig = sum(g - len(d) for _, g, d in elig)
    if first == r:
        txt = (f"needs {s} × {names}: {sum(free(r, o, g, d) for o, g, d in elig)} of {n_elig} {names} GPUs "
               f"free of batch work at {clock(step_ts(inp, r))}")
    else:
        until = "for the whole horizon" if first is None else f"until {clock(step_ts(inp, first))}"
        txt = f"needs {s} × {names}: all {plural(len(elig), f'{names} node')} busy {until}"
    others: dict[str, int] = {}
    for _, ty, o, g, down in nodes:
        if ty not in job.gpu_types:
            others[ty] = others.get(ty, 0) + free(r, o, g, down)
    idle = [f"{n} {ty or 'untyped'}" for ty, n in others.items() if n > 0]
    if idle:
        txt += f"; {', '.join(idle)} free of batch work but not eligible"
    return txt


def _node_free_of_batch(view: PlanView, job_id: str, t: int, o: int, g: int, down: tuple[int, ...]) -> int:
    """GPUs of the node at offset ``o`` (``g`` GPUs, ``down`` local GPUs) free of batch work at step ``t`` (``job_id``'s own cells free)."""
    own = view.ids.index(job_id) if job_id in view.ids else -3
    cells = view.owner[t, o:o + g]
    return int(sum(1 for k, c in enumerate(cells) if k not in down and c in (-1, own)))


def eligible_free_of_batch(inp: ReportInputs, view: PlanView, job: Any, t: int) -> int | None:
    """The most GPUs free of batch work on one node of ``job``'s eligible types at step ``t``.

    None when the cluster is untyped or the job may run on any type (then cluster-wide counts describe it).
    """
    nodes = type_nodes(inp.problem)
    if not nodes or not job.gpu_types:
        return None
    return max((_node_free_of_batch(view, job.job_id, t, o, g, down)
                for _, ty, o, g, down in nodes if ty in job.gpu_types), default=0)


def type_utilization(inp: ReportInputs) -> list[tuple[str, int, float]]:
    """Batch utilisation per GPU type of a typed cluster: ``(type, GPUs up, batch GPU-h)``, layout order; [] untyped.

    Batch GPU-hours are the plan's cells held by jobs on that type's GPUs over the horizon; real-time is
    counted on the whole cluster, not per type (the plan does not place it on GPUs).
    """
    nodes = type_nodes(inp.problem)
    if not nodes:
        return []
    view = plan_view(inp)
    out: dict[str, list[float]] = {}
    for _, ty, o, g, down in nodes:
        cells = view.owner[:, o:o + g]
        up = [k for k in range(g) if k not in down]
        acc = out.setdefault(ty, [0, 0.0])
        acc[0] += len(up)
        acc[1] += float((cells[:, up] >= 0).sum()) * inp.step_h
    return [(ty, int(n), h) for ty, (n, h) in out.items()]


def wait_reason(inp: ReportInputs, job: Any, start_step: int | None, view: PlanView | None = None) -> str:
    """Why queued ``job`` (planned to start at ``start_step``, None: not in the horizon) does not start at release.

    The rules of the module docstring; ``"starts at release"`` when it does. ``view``: a
    :func:`plan_view` of ``inp`` (built when None). On a typed cluster a type-constrained job's sentence
    starts with its types (:func:`type_wait_text`).
    """
    if start_step is not None and start_step <= job.release_step:
        return "starts at release"
    view = view if view is not None else plan_view(inp)
    typed = type_wait_text(inp, view, job, start_step)
    reason = _untyped_reason(inp, job, start_step, view)
    return reason if typed is None else f"{typed}; {reason}"


def _untyped_reason(inp: ReportInputs, job: Any, start_step: int | None, view: PlanView) -> str:
    """:func:`wait_reason` without the GPU-type sentence."""
    never = cannot_fit(inp, view, job)
    if never:
        return never
    alone = earliest_alone(inp, view, job)
    if alone is None:
        return _no_room_alone(inp, view, job)
    e, size_alone = alone
    if start_step is not None and start_step == e:
        return ("starts at its earliest feasible step; one step earlier, "
                + _before_feasible(inp, view, job, e, int(size_alone.gpus), int(size_alone.duration_steps)))
    if start_step is not None:
        s = view.gpus[job.job_id]
        d = next((int(z.duration_steps) for z in job.sizes if int(z.gpus) == s), int(size_alone.duration_steps))
    else:
        s, d = int(size_alone.gpus), int(size_alone.duration_steps)
    return _blocked_at(inp, view, job, start_step, e, s, d)


def _caps(inp: ReportInputs) -> str:
    """``"at most 2 GPUs per step"`` (``"at most 4/8 GPUs per step"`` for several services, in their order)."""
    return "at most " + "/".join(str(int(x.swap_cap_gpus)) for x in inp.problem.services) + " GPUs per step"


def _before_feasible(inp: ReportInputs, view: PlanView, job: Any, e: int, s: int, d: int) -> str:
    """What keeps a job from starting one step before its earliest feasible step ``e`` (running jobs, real-time need)."""
    t = max(int(job.release_step), e - 1, 0)
    cap = view.n_up - view.running_gpus - (view.need.sum(axis=0) if view.need.size else 0)
    tau = next((u for u in range(t, min(view.H, t + d)) if cap[u] < s), t)
    need = int(view.need[:, tau].sum()) if view.need.size else 0
    swap, _ = _rt_above_demand(inp, view, tau)
    run = sorted((j for j in view.running if view.start[j] <= tau < view.end[j]), key=lambda j: (-view.end[j], j))
    where = f"at {clock(step_ts(inp, tau))}" + ("" if tau == t else f", inside a run started at {clock(step_ts(inp, t))},")
    txt = (f"{where} running jobs and real-time need leave {int(cap[tau])} of {plural(view.n_up, 'GPU')} "
           f"(needs {s}): ")
    if run:
        txt += f"running {names_text([holder_text(inp, view, j) for j in run])}; "
    txt += f"real-time needs {need}"
    if swap:
        txt += f", {swap} of them above its demand because of the swap cap ({_caps(inp)})"
    return txt


def block_text(inp: ReportInputs, view: PlanView, o: int, s: int) -> str:
    """``"GPUs 8-15 on node-01"`` (``"GPU 3 on node-00"``, ``"GPUs 0-15 on node-00..node-01"``).

    On a typed cluster the nodes are those of the problem's layout (largest node first,
    :meth:`optimizer.problem.Cluster.node_of`), not ``gpus_per_node`` slices of the node names.
    """
    c = inp.problem.cluster
    if c.typed:
        ks = list(dict.fromkeys(k for g in range(o, o + s) if (k := c.node_of(g)) is not None))
        named = [c.nodes[k].name for k in ks] or ["padding"]
        node = named[0] if len(named) == 1 else f"{named[0]}..{named[-1]}"
        return f"GPU {o} on {node}" if s == 1 else f"GPUs {o}-{o + s - 1} on {node}"
    first, last = o // view.gpn, (o + s - 1) // view.gpn
    names = list(inp.node_names) if inp.node_names and len(inp.node_names) >= last + 1 else None
    node = (names[first] if names else f"node-{first:02d}") if first == last else (
        f"{names[first]}..{names[last]}" if names else f"node-{first:02d}..node-{last:02d}")
    return f"GPU {o} on {node}" if s == 1 else f"GPUs {o}-{o + s - 1} on {node}"


def _overlap(view: PlanView, job_id: str, o: int, s: int) -> int:
    b, g = view.offset[job_id], view.gpus[job_id]
    return max(0, min(o + s, b + g) - max(o, b))


def _block_chain(view: PlanView, t0: int, t1: int, o: int, s: int, exclude: str) -> list[str]:
    """Batch jobs holding any GPU of block ``[o, o+s)`` during steps ``[t0, t1)``, latest end first."""
    found = view.occupancy.holders(range(t0, t1), o, s, exclude=exclude)
    return sorted(found, key=lambda j: (-view.end[j], -view.start[j], j))


def _after_block_frees(inp: ReportInputs, view: PlanView, jid: str, chain: Sequence[str], e: int, start: int | None,
                       s: int, d: int) -> str:
    """What keeps a job waiting after its block's batch holders have left and before it starts.

    The window is ``[max(e + 1, last end of the chain), start)``; empty (or no start): ``""``. Else
    ``"; from <t> until it starts at <start>, <room> (real-time holds R GPUs | R1–R2 GPUs; batch jobs
    that start in between: ...)"``, where ``<room>`` is the first that holds: no step has ``s`` GPUs
    idle ("at most M of N GPUs are idle at any step"); no step starts ``d`` steps with ``s`` idle
    ("... but never for its whole run"); no aligned block stays free for them ("fragmented"); else
    "room for its whole run from <u>: the planner's choice". So a block that frees early is not read
    as the reason the job waits longer.
    """
    if start is None:
        return ""
    t0 = max(e + 1, max((min(view.end[h], start) for h in chain), default=e + 1))
    if t0 >= start:
        return ""
    H = view.H

    def idle(u: int) -> int:
        return int(view.idle[u]) + own_gpus(view, jid, u)

    rt = view.rt[t0:start]
    rt_txt = plural(int(rt.min()), "GPU") if rt.min() == rt.max() else f"{int(rt.min())}–{int(rt.max())} GPUs"
    starters = sorted((j for j in view.ids if j != jid and j not in view.running and t0 <= view.start[j] < start),
                      key=lambda j: (view.start[j], j))
    why = f"real-time holds {rt_txt}"
    if starters:
        why += f"; batch jobs that start in between: {names_text(starters)}"
    most = max(idle(u) for u in range(t0, start))
    runs = [u for u in range(t0, start) if all(idle(v) >= s for v in range(u, min(H, u + d)))]
    if most < s:
        room = f"at most {most} of {plural(view.n_up, 'GPU')} are idle at any step"
    elif not runs:
        room = f"{s} or more GPUs are idle at some steps but never for its whole {hours_text(d * inp.step_h)} run"
    else:
        u = next((u for u in runs if free_blocks(view, u, min(H, u + d), s, jid)), None)
        room = (f"enough GPUs are idle for its whole run from {clock(step_ts(inp, runs[0]))} but fragmented: no "
                f"aligned {s}-GPU block stays free" if u is None else
                f"room for its whole run from {clock(step_ts(inp, u))}: the planner's choice")
    return f"; from {clock(step_ts(inp, t0))} until it starts at {clock(step_ts(inp, start))}, {room} ({why})"


def _blocked_at(inp: ReportInputs, view: PlanView, job: Any, start: int | None, e: int, s: int, d: int) -> str:
    """Rule 4 of the module docstring at the earliest feasible step ``e`` (size ``s``, ``d`` steps)."""
    jid = job.job_id
    idle_e = int(view.idle[e]) + own_gpus(view, jid, e)
    if start is not None:
        o = inp.plan.job(jid).block_offset
    else:
        offsets = range(0, view.N - s + 1, s)
        o = min(offsets, key=lambda b: (max((view.end[h] for h, _ in _block_holders(view, e, b, s, jid)),
                                            default=-1), b))
    chain: list[str] = []
    if start is not None and start > e:
        chain = _block_chain(view, e, start, o, s, jid)
        held_by = ("until it starts it is held by " + names_text([holder_text(inp, view, h, _overlap(view, h, o, s))
                                                                   for h in chain])) if chain else \
            "no batch job holds it until it starts"
    else:
        holders = _block_holders(view, e, o, s, jid)
        held_by = ("the first to free up, held by " + names_text([holder_text(inp, view, h, g) for h, g in holders])
                   ) if holders else "free of batch work"
    head = (f"at {clock(step_ts(inp, e))}, its earliest feasible step, {idle_e} of {plural(view.n_up, 'GPU')} "
            f"are idle and it needs {s} (aligned block {block_text(inp, view, o, s)}; {held_by})")
    if idle_e < s:
        swap, spare = _rt_above_demand(inp, view, e)
        named = set(chain) if start is not None and start > e else {h for h, _ in _block_holders(view, e, o, s, jid)}
        others = [h for h, _ in _block_holders(view, e, 0, view.N, jid) if h not in named]
        txt = head
        if others:
            txt += (f"; elsewhere batch jobs hold {plural(sum(view.gpus[h] for h in others), 'GPU')} then: "
                    f"{names_text([holder_text(inp, view, h) for h in others])}")
        txt += f"; real-time holds {plural(int(view.rt[e]), 'GPU')}"
        after = _after_block_frees(inp, view, jid, chain, e, start, s, d)
        # a type-constrained job whose eligible nodes are full of batch work would not fit if real-time shrank:
        # real-time is counted on the whole cluster, and the GPUs it would free need not be of the job's types
        elig = eligible_free_of_batch(inp, view, job, e)
        if swap + spare and idle_e + swap + spare >= s and (elig is None or elig >= s):
            parts = []
            if swap:
                parts.append(f"{swap} above its demand because of the swap cap ({_caps(inp)})")
            if spare:
                parts.append(f"{spare} spare above its need")
            fit = ("with real-time at its need it would fit (the plan's choice)" if idle_e + spare >= s else
                   "it would fit if the services could shrink faster (swap cap)")
            txt += f", of which {' and '.join(parts)}: {fit}"
        return txt + after
    later = f"the plan starts it at {clock(step_ts(inp, start))}" if start is not None else \
        "the plan does not start it in the horizon"
    if not free_blocks(view, e, e + 1, s, jid):
        return (f"{head}: enough GPUs idle but fragmented, no aligned {s}-GPU block is free at "
                f"{clock(step_ts(inp, e))}; {later}")
    t1 = min(view.H, e + d)
    for tau in range(e + 1, t1):
        left = int(view.idle[tau]) + own_gpus(view, jid, tau)
        if left < s:
            causes = []
            if view.rt[tau] > view.rt[e]:
                causes.append(f"real-time rises to {view.rt[tau]} GPUs")
            starters = sorted(j for j in view.ids if j != jid and e < view.start[j] <= tau)
            if starters:
                causes.append(f"{names_text(starters)} start{'s' if len(starters) == 1 else ''} by then")
            return (f"{head}: enough GPUs idle at {clock(step_ts(inp, e))}, but not for its "
                    f"{hours_text(d * inp.step_h)} run: at {clock(step_ts(inp, tau))} only {left} would be idle"
                    f"{' (' + '; '.join(causes) + ')' if causes else ''}; {later}")
    if not free_blocks(view, e, t1, s, jid):
        return (f"{head}: enough GPUs idle for its whole run but fragmented: no aligned {s}-GPU block stays free "
                f"for its {hours_text(d * inp.step_h)}; {later}")
    guard = _guard_text(inp, view, job, e, s, d, free_blocks(view, e, t1, s, jid)[0])
    if guard:
        return f"{head}: room for its whole run, but {guard}; {later}"
    plan = inp.plan
    if str(plan.planner) in BASELINE_PLANNERS:
        why = f"the {plan.planner} baseline's queue rule keeps it behind earlier or higher-priority jobs"
    else:
        gap = "n/a" if plan.gap is None else f"{100 * float(plan.gap):.2g} %"
        why = f"not required by capacity: the planner's choice (MILP objective, gap {gap})"
    return f"{head}: room for its whole run from then, yet {later}: {why}"


#: The groups of the page's "Waiting jobs by reason" (key -> what the group's jobs wait for), in the page's order;
#: :func:`wait_group` puts a waiting job in one of them by the rules of the module docstring.
WAIT_GROUPS: dict[str, str] = {
    "never": "never fits: its smallest size is more than the GPUs up minus the real-time minimum",
    "no_room": "no room in the horizon even with no other queued job (running jobs and real-time need)",
    "running": "waits for running jobs and the real-time need to leave room (starts at its earliest feasible step)",
    "busy": "its aligned block is held by batch jobs planned before it",
    "fragmented": "enough GPUs idle but no aligned block free for its run (fragmentation)",
    "short_run": "room at its earliest feasible step, but not for its whole run",
    "guard": "the starvation guard reserves room for an earlier job",
    "choice": "room for its whole run: the planner's choice",
}


def wait_group(inp: ReportInputs, job: Any, start_step: int | None, view: PlanView | None = None,
               reason: str | None = None) -> tuple[str, list[str]] | None:
    """The :data:`WAIT_GROUPS` key of a waiting job and the jobs it waits for (ids, latest end first).

    None when the job starts at release. ``reason``: its :func:`wait_reason` (computed when None); the
    rules are those of :func:`wait_reason`, so the group agrees with the job's sentence. Holders: for
    ``busy`` the batch jobs holding its aligned block from its earliest feasible step until it starts
    (at that step when it does not start); for ``running`` / ``no_room`` the running jobs in its way.
    """
    if start_step is not None and start_step <= job.release_step:
        return None
    view = view if view is not None else plan_view(inp)
    reason = reason if reason is not None else wait_reason(inp, job, start_step, view)
    if cannot_fit(inp, view, job):
        return "never", []
    alone = earliest_alone(inp, view, job)
    if alone is None:
        return "no_room", sorted(view.running, key=lambda j: (-view.end[j], j))
    e, size_alone = alone
    if start_step is not None and start_step == e:
        t = max(int(job.release_step), e - 1, 0)
        run = sorted((j for j in view.running if view.start[j] <= t < view.end[j]), key=lambda j: (-view.end[j], j))
        return "running", run
    jid = job.job_id
    s = view.gpus[jid] if start_step is not None else int(size_alone.gpus)
    if int(view.idle[e]) + own_gpus(view, jid, e) < s:
        if start_step is not None:
            o = inp.plan.job(jid).block_offset
            holders = _block_chain(view, e, start_step, o, s, jid) if start_step > e else []
        else:
            offsets = range(0, view.N - s + 1, s)
            o = min(offsets, key=lambda b: (max((view.end[h] for h, _ in _block_holders(view, e, b, s, jid)),
                                                default=-1), b))
            holders = [h for h, _ in _block_holders(view, e, o, s, jid)]
        return "busy", holders
    if "but fragmented" in reason:
        return "fragmented", []
    if ", but not for its" in reason:
        return "short_run", []
    if "starvation guard" in reason:
        return "guard", []
    return "choice", []
