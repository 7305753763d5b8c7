"""What-if on a published run folder (issue 14): edit its problem, re-plan, verify, explain the difference.

``gpuplan whatif RUN_FOLDER`` and the Prefect flow ``whatif`` (:func:`pipelines.flows.whatif.whatif_flow`)
both call :func:`run_whatif`. A run folder of ``gpuplan run`` or the replan deployment holds all
that is needed to re-plan exactly (:data:`pipelines.catalog.RUN_DATASETS`):

- ``problem.json``: the problem the run solved, in the optimizer's own file form (DESIGN §3.1),
  including its planner settings (``time_limit_s``, ``mip_rel_gap``, ``milp_method``, ...): the
  what-if re-plans with those settings, so with the same solver budget;
- ``plan.json``: the published, verified plan (the *base*; verified again here);
- ``summary.json``: the planner, the plan start (step 0) and the node names;
- ``demand.parquet`` (P50 and P90 GPUs per service and step) and ``jobs.parquet`` (each job's
  P50 duration, used when a running job must restart).

The edits are :class:`optimizer.whatif.WhatIf` (rules and order in :mod:`optimizer.whatif`); a
running job on a failed node or GPU is lost and requeued to restart from scratch with its
full P50 duration at its current size. The re-plan uses the run's planner (``milp``), warm-started
from the base plan wherever the verifier still accepts it on the edited problem (as a replan warm
starts from the previous plan, DESIGN §6.1), and passes the independent verifier
(:func:`pipelines.stages.solve.check_plan`) like every plan.

Nothing is written to the run folder: the result is a document (:func:`run_whatif`), printed by the
command and published as artifacts by the flow (its text: :mod:`pipelines.report.whatif`; the option
parsers: :mod:`pipelines.stages.whatif_inputs`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from domain.units import ROUND_DIGITS, hours_to_steps
from optimizer.plan import Plan
from optimizer.problem import Node, Problem
from optimizer.verify import verify
from optimizer.whatif import (
    WhatIf,
    apply_whatif,
    explain,
    grown_cluster,
    tie_break,
    typed_nodes_to_add,
    warm_start,
    why_waiting,
)
from pipelines.catalog import RunCatalog
from pipelines.io.errors import InputError
from pipelines.report.basics import ReportInputs
from pipelines.report.risks import deadline_miss
from pipelines.report.stops import gpu_h_lost
from pipelines.stages import solve as solve_stage
from pipelines.stages.models import DURATION_QUANTILE
from pipelines.stages.outputs import demand_from_problem, node_of_gpu, planned_metrics
from pipelines.stages.whatif_inputs import job_entry, parse_add_gpus, parse_assignment, parse_gpu_ranges

#: Keys of each side (``base``, ``whatif``) of the document; ``delta`` holds the numeric ones.
SIDE_KEYS = ("status", "source", "verified", "objective", "planned_value", "planned_utilization_pct",
             "rt_covered_p90_pct", "rt_covered_p50_pct", "planned_rt_unmet_gpu_h", "jobs_started", "jobs_waiting",
             "jobs_total", "jobs_missing_deadline", "idle_gpu_h", "gpus_up", "solve_s")

#: Name of the i-th node added by ``--add-gpus`` (nodes of the cluster's ``gpus_per_node``).
ADDED_NODE = "added-{i:02d}"


@dataclass(frozen=True)
class BaseRun:
    """What a what-if starts from: a published run folder, read and verified.

    Attributes:
        folder: the run folder (``runs/latest`` resolved); name: its name.
        problem / plan: the solved problem and the published plan (verified again on load).
        start: the plan start (UTC, step 0); planner: the planner it used.
        nodes: node names of the base cluster, GPU ``i`` on node ``i // gpus_per_node``.
        demand: P50/P90 GPUs per service and step (:data:`pipelines.io.schemas.DEMAND`; the problem's own
            demand as both when the folder has none).
        full_steps: job id -> its full P50 duration in steps at its planned size (running jobs' restart).
        jobs: the run's ``jobs.parquet`` (forecast quantiles per size, ``deadline_at``), or None.
    """

    folder: Path
    name: str
    problem: Problem
    plan: Plan
    start: datetime
    planner: str
    nodes: list[str]
    demand: pd.DataFrame
    full_steps: dict[str, int]
    jobs: pd.DataFrame | None = None


def load_base(folder: Path) -> BaseRun:
    """Read a run folder (``runs/latest`` or ``runs/<slot>_<id>``) and verify its plan.

    Raises:
        InputError: not a folder, or no ``problem.json``, ``plan.json`` or ``summary.json`` in it (not
            a run folder of ``gpuplan run``), or its plan fails the verifier.
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise InputError(f"RUN_FOLDER {folder}: no such folder (give a run folder such as runs/latest)")
    run = RunCatalog(folder.resolve())
    for name in ("problem", "plan", "summary"):
        if not run.exists(name):
            latest = folder / "latest"  # the folder of the run folders, given for one of them
            hint = (f"; it holds run folders: give one, such as {os.path.normpath(latest)}"
                    if (latest / run.dataset(name).filename).exists() else "")
            raise InputError(f"RUN_FOLDER {folder}: no {run.dataset(name).filename} in it "
                             f"(not a run folder written by 'gpuplan run' or the replan deployment){hint}")
    problem = run.load_problem()
    plan = run.load_plan()
    bad = verify(plan, problem)
    if bad:
        raise InputError(f"RUN_FOLDER {folder}: its plan.json fails the verifier on its problem.json: {bad[0]}")
    summary = run.load("summary")
    start = pd.Timestamp(summary["plan_start"])
    start = (start.tz_localize("UTC") if start.tzinfo is None else start.tz_convert("UTC")).to_pydatetime()
    nodes = node_of_gpu(problem.n_gpus, problem.cluster.gpus_per_node, (summary.get("cluster") or {}).get("nodes"))
    node_names = list(dict.fromkeys(nodes))
    demand = _base_demand(run, problem)
    full: dict[str, int] = {}
    jobs = None
    if run.exists("jobs"):
        jobs = run.load("jobs")
        col = f"duration_{DURATION_QUANTILE}_h"
        for jid, h in zip(jobs["job_id"].astype(str), jobs[col]):
            if pd.notna(h) and float(h) > 0:
                full[jid] = hours_to_steps(float(h), problem.cluster.step_minutes)
    return BaseRun(folder.resolve(), folder.resolve().name, problem, plan, start,
                   str(summary.get("planner") or plan.planner or "milp"), node_names, demand, full, jobs)


def _base_demand(run: RunCatalog, problem: Problem) -> pd.DataFrame:
    """The run's demand.parquet when it matches the problem's services and horizon, else the problem's demand."""
    own = demand_from_problem(problem)
    if not run.exists("demand"):
        return own
    d = run.load("demand")
    names = {s.service for s in problem.services}
    if set(d["service"].astype(str)) != names or len(d) != len(own):
        return own
    return d[["service", "step", "demand_gpus_p50", "demand_gpus_p90"]].reset_index(drop=True)





def build_whatif(base: BaseRun, *, add_gpus: int | str = 0, drain_nodes: Sequence[str] = (),
                 fail_gpus: Sequence[str] = (), cancel: Sequence[str] = (), priority: Sequence[str] = (),
                 demand_scale: Sequence[str] = (), add_jobs: Iterable[Mapping[str, Any]] = (),
                 fail_nodes: Sequence[str] = ()) -> WhatIf:
    """The :class:`optimizer.whatif.WhatIf` of the command's options, node names resolved.

    ``drain_nodes``: node names (the base's, or ``added-00``... of ``add_gpus``) drained as Slurm drains
    (running jobs finish there, nothing new starts; case 022); ``fail_nodes``: node names that fail (their
    running jobs are lost and requeued: Slurm's DOWN); ``fail_gpus``:
    ranges for :func:`parse_gpu_ranges`; ``priority`` ``JOB=P`` and ``demand_scale`` ``SERVICE=F``
    texts (:func:`parse_assignment`); ``add_jobs``: job entries (:func:`job_entry` form).

    Raises:
        InputError: an unknown node, a malformed range or assignment, a negative ``add_gpus``, or
            a job listed twice in one option.

    ``add_gpus``: N, or ``"TYPE:N"`` on a typed cluster (issue 26): N GPUs of TYPE (a planned type, or an
    export's name of one, :func:`cluster_type`: ``V100M32`` for ``v100_32gb``) as nodes of that type's
    usual size (:func:`optimizer.whatif.typed_nodes_to_add`), named ``added-00``...; the node names of
    ``drain_nodes`` and ``fail_nodes`` are then resolved in the cluster with those nodes added.
    """
    if isinstance(add_gpus, bool):
        raise InputError(f"--add-gpus {add_gpus!r}: expected a whole number of GPUs >= 0")
    gpu_type, n_add = parse_add_gpus(add_gpus)
    cluster = base.problem.cluster
    add_nodes: tuple[Node, ...] = ()
    if gpu_type is not None:
        add_nodes = typed_nodes_to_add(cluster, cluster_type(cluster.gpu_types, gpu_type), n_add, ADDED_NODE)
        n_add = 0
    elif cluster.typed and n_add:
        raise InputError(f"--add-gpus {n_add}: the run's cluster has GPU types ({', '.join(cluster.gpu_types)}); "
                         "give --add-gpus TYPE:N")
    gpn = cluster.gpus_per_node
    spans: dict[str, tuple[int, ...]] = {}
    if cluster.typed:
        grown = grown_cluster(cluster, add_nodes)
        for o, nd in zip(grown.node_offsets, grown.nodes, strict=True):
            spans[nd.name] = tuple(range(o, o + nd.gpus))
    else:
        names = list(base.nodes) + [ADDED_NODE.format(i=i) for i in range(math.ceil(n_add / gpn))]
        for i, name in enumerate(names):
            spans.setdefault(name, tuple(range(i * gpn, (i + 1) * gpn)))
    nodes = list(spans)
    groups: list[tuple[str, tuple[int, ...]]] = []
    drains: list[tuple[str, tuple[int, ...]]] = []
    for option, names_given, verb, into in (("--drain-node", drain_nodes, "drained", drains),
                                            ("--fail-node", fail_nodes, "failed", groups)):
        for name in names_given:
            if name not in spans:
                raise InputError(f"{option} {name}: no node {name!r} in the run (nodes: {_list(nodes)})")
            into.append((f"{name} {verb}", spans[name]))
    physical = (sum(len(v) for v in spans.values()) if add_nodes else base.problem.n_gpus + n_add)
    for text in fail_gpus:
        gpus = parse_gpu_ranges(text)
        bad = next((g for g in gpus if g >= physical), None)
        if bad is not None:
            raise InputError(f"--fail-gpus {text}: GPU {bad} is outside the cluster of {physical} GPUs "
                             f"(0-{physical - 1})")
        groups.append((f"GPUs {text.strip()} failed", gpus))
    prio = [parse_assignment(t, "--priority", "JOB") for t in priority]
    scale = [parse_assignment(t, "--demand-scale", "SERVICE") for t in demand_scale]
    for label, pairs in (("--priority", prio), ("--demand-scale", scale)):
        names = [n for n, _ in pairs]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise InputError(f"{label}: {dup} is given twice")
    step = base.problem.cluster.step_minutes
    jobs = tuple(job_entry(e, step, "--add-job") for e in add_jobs)
    return WhatIf(add_gpus=n_add, add_nodes=add_nodes, fail_groups=tuple(groups), drain_groups=tuple(drains), cancel=tuple(dict.fromkeys(cancel)),
                  priority=tuple(prio), demand_scale=tuple(scale), add_jobs=jobs, restart_steps=dict(base.full_steps))


def cluster_type(types: Sequence[str], name: str) -> str:
    """The run's planned type that ``name`` (of ``--add-gpus TYPE:N``) means.

    Itself, a case-insensitive match, or the type its export name matches
    (:class:`pipelines.workspace.gpu_types.GpuTypeTable` without aliases: ``V100M32`` -> ``v100_32gb``);
    ``name`` unchanged when none is in ``types`` (:func:`optimizer.whatif.typed_nodes_to_add` then refuses it,
    listing the types).
    """
    from pipelines.workspace.gpu_types import GpuTypeTable

    lower = {t.lower(): t for t in types}
    if name in types or name.lower() in lower:
        return lower.get(name.lower(), name)
    got = GpuTypeTable().resolve(name)
    return got if got in types else name


def _list(xs: Sequence[str], k: int = 12) -> str:
    return ", ".join(xs[:k]) + (f" and {len(xs) - k} more" if len(xs) > k else "")


def scaled_demand(demand: pd.DataFrame, scale: Mapping[str, float]) -> pd.DataFrame:
    """``demand`` with each scaled service's P50 and P90 GPUs as ``ceil(round(d × f, 6))`` (:mod:`optimizer.whatif`)."""
    d = demand.copy()
    for name, f in scale.items():
        rows = d["service"] == name
        for col in ("demand_gpus_p50", "demand_gpus_p90"):
            d.loc[rows, col] = [int(math.ceil(round(float(x) * f, ROUND_DIGITS))) for x in d.loc[rows, col]]
    return d


def deadline_misses(problem: Problem, plan: Plan, jobs: pd.DataFrame | None, start: datetime) -> dict[str, dict]:
    """Queued jobs with a deadline whose P90 finish at their PLANNED size is after it (or that do not start).

    The risk report's rule (:func:`pipelines.report.risks.deadline_miss`: P90 at the planned size,
    the deadline to the second). Returns job id ->
    ``{"deadline_at", "p90_finish_at"}`` (ISO 8601 UTC; ``p90_finish_at`` None: not started in the horizon).
    """
    inp = ReportInputs(problem=problem, plan=plan, start_ts=start,
                       jobs=jobs if jobs is not None else pd.DataFrame(), demand=pd.DataFrame())
    rows = {str(r["job_id"]): r for _, r in jobs.iterrows()} if jobs is not None and len(jobs) else {}
    starts = {a.job_id: a for a in plan.assignments}
    out: dict[str, dict] = {}
    for job in problem.jobs:
        a = starts.get(job.job_id)
        start_step = None if a is None else a.start_step
        gpus = 0 if a is None or start_step is None else int(a.gpus)
        miss = deadline_miss(inp, job, start_step, gpus, rows.get(job.job_id))
        if miss is not None:
            out[job.job_id] = {"deadline_at": miss.deadline.strftime("%Y-%m-%dT%H:%M:%SZ"),
                               "p90_finish_at": None if miss.p90_end is None
                               else miss.p90_end.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return out


def side(problem: Problem, plan: Plan, demand: pd.DataFrame) -> dict[str, Any]:
    """One side (``base`` or ``whatif``) of the document: the plan's planned figures (:data:`SIDE_KEYS`).

    ``planned_*``, ``jobs_*`` and ``idle_gpu_h`` are :func:`pipelines.stages.outputs.planned_metrics`
    (GPUs up = the cluster's minus down GPUs); ``rt_covered_p90_pct`` / ``rt_covered_p50_pct`` =
    100 × Σ min(planned, demand) / Σ demand over services and steps (100 without demand);
    ``objective`` the DESIGN §5 objective of the plan; ``verified`` True (only verified plans get here).
    """
    m = planned_metrics(problem, plan, demand)
    cov = {}
    for q in ("p90", "p50"):
        got = want = 0.0
        for svc, gpus in plan.service_gpus.items():
            dd = demand[demand["service"] == svc].sort_values("step")[f"demand_gpus_{q}"].to_numpy(float)
            got += sum(min(float(a), float(b)) for a, b in zip(gpus, dd))
            want += float(dd.sum())
        cov[q] = 100.0 * got / want if want > 0 else 100.0
    doc = plan.to_dict()
    return {"status": str(plan.status), "source": None if plan.source is None else str(plan.source), "verified": True,
            "objective": doc["objective"], "planned_value": m["planned_value"],
            "planned_utilization_pct": m["planned_utilization_pct"], "rt_covered_p90_pct": cov["p90"],
            "rt_covered_p50_pct": cov["p50"], "planned_rt_unmet_gpu_h": m["planned_rt_unmet_gpu_h"],
            "jobs_started": int(m["jobs_started"]), "jobs_waiting": int(m["jobs_total"] - m["jobs_started"]),
            "jobs_total": int(m["jobs_total"]), "idle_gpu_h": m["idle_gpu_h"],
            "gpus_up": problem.n_gpus - len(problem.down_gpus), "solve_s": plan.solve_s}


def buys_lines(problem: Problem, plan: Plan, b: dict[str, Any], n: dict[str, Any], delta: dict[str, Any],
               changed: int = 0, k: int = 3, newly_missing: Sequence[str] = ()) -> list[str]:
    """The what-if's first lines: what the change buys (value, jobs started, idle GPU-h) and why waiting jobs wait.

    ``b``/``n``: the base and what-if sides (:func:`side`), ``delta`` their difference, ``changed`` the jobs
    listed as changed (with none and no value change the line says the change buys nothing). When the count of
    jobs missing their deadline (P90 finish) changes, the first line says so, naming ``newly_missing`` (the
    jobs that meet it in the base and miss it in the what-if): a gain that costs a deadline is not a plain gain.
    The waiting jobs of
    ``plan`` (queued in ``problem``, not started) are explained by :func:`optimizer.whatif.why_waiting`, the
    first ``k`` by job id, then a count of the rest.
    """
    dv = delta.get("planned_value") or 0.0
    pct = "" if not b.get("planned_value") else f" ({dv / b['planned_value']:+.1%})"
    same = abs(dv) < 0.05
    tail = (" (nothing: the plan is the base's)" if same and not changed else
            f" (no planned value: {changed} job{'s' if changed != 1 else ''} change{'' if changed != 1 else 's'}, "
            "e.g. start earlier, for the same priority x GPU-h)"
            if same else "")
    idle = delta.get("idle_gpu_h") or 0.0
    L = [f"the change buys: plan value {dv:+,.1f}{pct}, jobs started {delta.get('jobs_started', 0):+d}; "
         f"idle GPU-h {idle:+,.1f}" + (" (GPUs the plan leaves unused: a cost, not a gain)" if idle > 0.05 else "")
         + tail]
    mb, mn = b.get("jobs_missing_deadline"), n.get("jobs_missing_deadline")
    if mb is not None and mn is not None and mb != mn:
        L[0] += f"; jobs missing their deadline (P90) {mb} -> {mn}"
        if newly_missing:
            L[0] += f", now missing: {_list(list(newly_missing))}"
    queued = {j.job_id for j in problem.jobs}
    waiting = sorted(a.job_id for a in plan.assignments if not a.started and a.job_id in queued)
    for jid in waiting[:k]:
        L.append(f"{jid} still waits: {why_waiting(problem, plan, jid)}")
    if len(waiting) > k:
        L.append(f"... and {len(waiting) - k} more jobs wait")
    return L


def stops_line(base_plan: Plan, plan: Plan, gpus: Mapping[str, int], step_h: float) -> str:
    """``"stops at step 0: base 1 (P2, 2 GPU-h lost), what-if 0"``: the running jobs each plan stops (issue 30).

    With more than one stop in a plan its part ends with the total: ``2 (P1, 1 GPU-h lost, P2, 2 GPU-h lost; 3 GPU-h
    lost in all)``.

    ``gpus``: job id -> GPUs of the base problem's running jobs; ``step_h``: hours per step.
    """
    def one(pl: Plan) -> str:
        if not pl.stops:
            return "0"
        lost = [(j, n * gpus.get(j, 0) * step_h) for j, n in pl.stops]
        each = ", ".join(f"{j}, {gpu_h_lost(x)}" for j, x in lost)
        total = f"; {gpu_h_lost(sum(x for _, x in lost))} in all" if len(lost) > 1 else ""
        return f"{len(lost)} ({each}{total})"

    return f"stops at step 0: base {one(base_plan)}, what-if {one(plan)}"


def run_whatif(base: BaseRun, w: WhatIf, time_limit_s: float | None = None) -> dict[str, Any]:
    """Apply ``w`` to the base run, re-plan (same planner and settings), verify and compare.

    ``time_limit_s`` (``gpuplan whatif --time-limit``): re-plan with this limit instead of the run's, and so
    with the deterministic work budget it gives (DESIGN §5); the base plan stays the published one. A
    what-if plan that is not proven optimal gets a note saying so with the planner's reason. The re-plan's
    answer goes through :func:`optimizer.whatif.tie_break`: every job whose move the change did not need (the
    difference is within ``mip_rel_gap``, the standard both plans are solved to) keeps its base start and
    block, and a note counts them. ``summary`` (the first lines, :func:`buys_lines`): what the change buys in
    value, jobs started and idle GPU-h, and why each waiting job still waits.

    Returns ``{"summary", "run", "run_folder", "plan_start", "planner", "time_limit_s", "changes", "base",
    "whatif", "delta", "jobs", "notes"}``: ``base``/``whatif`` as :func:`side`; ``delta`` = what-if
    minus base for every numeric key of a side; ``jobs`` one row per job whose start, size or block
    changed or that an edit touched: ``{"job_id", "start_ts_base", "start_ts_whatif", "reason",
    "change", "delta_h", "start_step_base", "start_step_whatif", "gpus_base", "gpus_whatif",
    "nodes_base", "nodes_whatif", "stopped_base", "stopped_whatif", ...}`` (ISO 8601 UTC times; None when
    not started within the horizon; a requeued job's base start is None: it was running; ``stopped_*``: the
    plan stops the running job at step 0, issue 30: a new stop's ``change`` is ``stopped``, a stop of the base
    the what-if no longer makes ``unstopped`` (the job keeps running), a stop in both ``still_stopped``, listed
    even when nothing else of it changed). With a stop in either plan the summary's second line counts them
    (:func:`stops_line`).

    Raises:
        InputError: an edit names an unknown job, node or service, or makes an invalid problem;
            no valid plan exists (:func:`optimizer.planners.plan`).
        RuntimeError: the solver ended without a plan, or the plan fails the verifier.
    """
    applied = apply_whatif(base.problem, w)
    p = applied.problem
    if time_limit_s is not None:
        if not (math.isfinite(float(time_limit_s)) and float(time_limit_s) > 0):
            raise InputError(f"--time-limit must be a positive number of seconds; got {time_limit_s}")
        p = dataclasses.replace(p, settings=dataclasses.replace(p.settings, time_limit_s=float(time_limit_s)))
    # typed nodes added re-lay the GPUs out (largest node first): warm_start carries the base blocks to the new
    # layout (same node, same local GPUs), so the warm start and the tie-break work as without added nodes
    carried = warm_start(base.plan, applied)
    plan = solve_stage.solve(p, base.planner, warm_start=carried)
    # tie-break (issue 29): every job the change did not need to move keeps its base start and block
    kept_base: tuple[str, ...] = ()
    if carried is not None:
        plan, kept_base = tie_break(plan, carried, p)
    solve_stage.check_plan(p, plan)  # the independent verifier, as for every plan
    step = timedelta(minutes=p.cluster.step_minutes)
    gpn = p.cluster.gpus_per_node
    nodes = list(base.nodes) + [ADDED_NODE.format(i=i) for i in range(math.ceil(w.add_gpus / gpn))]

    def ts(t: int | None) -> str | None:
        return None if t is None else (base.start + t * step).strftime("%Y-%m-%dT%H:%M:%SZ")

    def clock(t: int) -> str:
        return (base.start + t * step).strftime("%m-%d %H:%MZ")

    def node_names(offset: int, gpus: int, layout: Problem = p) -> str:
        if layout.cluster.typed:
            c = layout.cluster
            ks = list(dict.fromkeys(k for g in range(offset, offset + gpus) if (k := c.node_of(g)) is not None))
            typed_names = [c.nodes[k].name for k in ks]
            return ",".join(typed_names) if len(typed_names) <= 2 else f"{typed_names[0]}..{typed_names[-1]}"
        first, last = offset // gpn, (offset + gpus - 1) // gpn
        names = [nodes[i] if i < len(nodes) else f"node-{i:02d}" for i in range(first, last + 1)]
        return ",".join(names) if len(names) <= 2 else f"{names[0]}..{names[-1]}"

    def where(offset: int, gpus: int) -> str:
        return f"{node_names(offset, gpus)} GPUs [{offset}, {offset + gpus})"

    changes = explain(base.problem, base.plan, applied, plan, when=clock, where=where)
    demand_new = scaled_demand(base.demand, applied.scaled)
    b = side(base.problem, base.plan, base.demand)
    n = side(p, plan, demand_new)
    miss_b = deadline_misses(base.problem, base.plan, base.jobs, base.start)
    miss_n = deadline_misses(p, plan, base.jobs, base.start)
    b["jobs_missing_deadline"], n["jobs_missing_deadline"] = len(miss_b), len(miss_n)
    delta = {k: n[k] - b[k] for k in SIDE_KEYS if isinstance(b[k], (int, float)) and not isinstance(b[k], bool)
             and isinstance(n[k], (int, float)) and b[k] is not None and n[k] is not None}
    jobs = []
    stopped_b, stopped_n = dict(base.plan.stops), dict(plan.stops)
    held = {r.job_id: r.gpus for r in base.problem.running}
    h = p.cluster.step_minutes / 60.0

    def cost(jid: str, lost: int) -> str:  # the one wording of a stop's cost (pipelines.report.stops.gpu_h_lost)
        g = held.get(jid, 0)
        return f"loses {lost} step(s) on {g} GPU(s): {gpu_h_lost(lost * g * h)}"

    def still(jid: str) -> str:  # a stop in both plans
        return f"still stopped at step 0 (requeued) in both plans; {cost(jid, stopped_n[jid])}"

    listed_ids = {c.job_id for c in changes}
    both = [jid for jid in stopped_b if jid in stopped_n and jid not in listed_ids]
    for c in changes:
        d = c.delta_steps
        kind, reason = c.kind, c.reason
        if c.job_id in stopped_n and c.job_id not in stopped_b:  # issue 30: a stop, not a job that never started
            kind = "stopped"
            reason = (f"stopped at step 0 (requeued): preemptible, and real-time demand at step 0 exceeds the GPUs "
                      f"no running job holds; {cost(c.job_id, stopped_n[c.job_id])}")
        elif c.job_id in stopped_b and c.job_id not in stopped_n:  # the base stopped it, the what-if keeps it
            kind = "unstopped"
            others = [j for j in stopped_n if j != c.job_id]
            # a running job kept running: why it is not stopped, not why a queued job starts (the stop rule, DESIGN §5)
            why = (f"the what-if covers the real-time shortfall at step 0 by stopping {', '.join(others)} instead"
                   if others else "in the what-if, real-time demand at step 0 fits the GPUs no running job holds")
            reason = (f"no longer stopped: keeps running on its GPUs (the base plan stopped it at step 0: "
                      f"{cost(c.job_id, stopped_b[c.job_id])}); why: {why}")
        elif c.job_id in stopped_b and c.job_id in stopped_n:
            kind, reason = "still_stopped", f"{still(c.job_id)}; {reason}"
        jobs.append({"job_id": c.job_id, "start_ts_base": ts(c.start_base), "start_ts_whatif": ts(c.start_whatif),
                     "reason": reason, "change": kind,
                     "stopped_base": c.job_id in stopped_b, "stopped_whatif": c.job_id in stopped_n,
                     "delta_h": None if d is None else d * p.cluster.step_minutes / 60.0,
                     "start_step_base": c.start_base, "start_step_whatif": c.start_whatif,
                     "gpus_base": None if c.block_base is None else c.block_base[1],
                     "gpus_whatif": None if c.block_whatif is None else c.block_whatif[1],
                     "nodes_base": None if c.block_base is None else node_names(
                         *c.block_base, layout=p if applied.layout else base.problem),
                     "nodes_whatif": None if c.block_whatif is None else node_names(*c.block_whatif),
                     "deadline_at": (miss_n.get(c.job_id) or miss_b.get(c.job_id) or {}).get("deadline_at"),
                     "misses_deadline_base": c.job_id in miss_b, "misses_deadline_whatif": c.job_id in miss_n,
                     "p90_finish_whatif": (miss_n.get(c.job_id) or {}).get("p90_finish_at")})
    for jid in both:  # a stop in both plans is not a change of the plan, but the operator must still see it
        jobs.append({"job_id": jid, "start_ts_base": None, "start_ts_whatif": None, "change": "still_stopped",
                     "reason": still(jid),
                     "stopped_base": True, "stopped_whatif": True, "delta_h": None, "start_step_base": None,
                     "start_step_whatif": None, "gpus_base": held.get(jid), "gpus_whatif": held.get(jid),
                     "nodes_base": None, "nodes_whatif": None, "deadline_at": None, "misses_deadline_base": False,
                     "misses_deadline_whatif": False, "p90_finish_whatif": None})
    notes = list(plan.notes)
    if kept_base:
        notes.append(f"tie-break: {len(kept_base)} jobs the re-plan had moved at no gain keep their base start and "
                     f"block ({_list(list(kept_base))})")
    if str(plan.status) != "optimal" and plan.planner == "milp":  # a heuristic's plan is never proven optimal
        notes.append(f"the what-if plan is not proven optimal (status {plan.status}"
                     + (f": {plan.message}" if plan.message else "") + "); a job it leaves waiting or starts late may "
                     "still fit earlier: ask again with a larger --time-limit")
    listed = {j["job_id"] for j in jobs}
    for jid in sorted(set(miss_n) - set(miss_b)):
        m = miss_n[jid]
        fin = "does not start in the horizon" if m["p90_finish_at"] is None else f"P90 finish {m['p90_finish_at']}"
        notes.append(f"{jid} now misses its deadline {m['deadline_at']}: {fin}" + ("" if jid in listed else
                                                                                  " (start unchanged)"))
    if w.add_gpus and p.n_gpus > applied.physical_gpus:
        notes.append(f"{applied.physical_gpus} GPUs are planned as a {p.n_gpus}-GPU model with GPUs "
                     f"{applied.physical_gpus}..{p.n_gpus - 1} down (blocks are aligned powers of two)")
    if applied.requeued:
        notes.append("running jobs on lost GPUs are requeued to restart from scratch with their full P50 duration "
                     "(no checkpoint assumed): " + ", ".join(applied.requeued))
    changed = sum(1 for j in jobs if j["change"] != "still_stopped")
    summary = buys_lines(p, plan, b, n, delta, changed=changed, newly_missing=sorted(set(miss_n) - set(miss_b)))
    if stopped_b or stopped_n:  # issue 30: how many running jobs each plan stops, second line
        summary.insert(1, stops_line(base.plan, plan, held, h))
    return {"summary": summary, "run": base.name, "run_folder": str(base.folder), "plan_start": ts(0),
            "planner": base.planner,
            "time_limit_s": p.settings.time_limit_s, "step_minutes": p.cluster.step_minutes,
            "changes": w.describe(), "base": b, "whatif": n, "delta": delta, "jobs": jobs, "notes": notes}
