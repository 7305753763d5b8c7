"""Benchmark metrics of DESIGN §6.3, computed on the truth from a :class:`SimResult`.

Definitions (window = the scenario's ``n_steps`` steps of ``step_h`` hours; N GPUs):

- ``utilization_pct`` = 100 x (batch GPU-hours run + real-time GPU-hours that served actual
  demand, i.e. sum over services and steps of ``min(allocated, actual) x step_h``) / (N x window
  hours). Reserved-but-idle GPUs are not utilised. Batch work later lost to a node failure still
  counts (the GPUs were busy).
- ``value`` = sum over batch GPU-hours executed inside the window of the job's priority ``p_j``
  (undiscounted; partial runs of jobs still running at the window end count). Work lost to a node
  failure (the killed run, no checkpoint) is *not* value: it produced nothing; nor, with preemption (issue 30),
  the work since the last checkpoint of a stopped or killed run and a requeued run's restart steps.
- ``jobs_completed`` (finished inside the window) of ``jobs_total`` (jobs arriving inside the
  window).
- ``rt_unmet_gpu_h`` = sum of ``max(0, actual - allocated) x step_h``; ``rt_sla_pct`` = 100 x
  served / actual demand GPU-hours (100 when there is no demand). A service with per-type capacity
  (issue 26) counts as "allocated" the demand GPUs its GPUs serve (``SimResult.service_served``, demand in GPUs
  of its slowest type), and its utilised GPU-hours are its GPUs x ``min(1, actual / served)``.
- Wait time (hours) = first start - arrival; a job never started in the window is counted with
  its censored wait ``window end - arrival`` (so a planner that never starts a job is not
  rewarded for it). Percentiles: numpy's linear interpolation. ``wait_by_priority``: P50/P95 per
  priority class.
- ``solve_s_p50``/``solve_s_max`` over the fresh plans (steps where the previous plan was followed
  are not solves); ``gap_max`` the largest MILP relative gap reported (None for heuristics).
- ``time_limited_solves``: fresh MILP plans whose solve stopped on a limit (work or time) before
  proving the gap; ``wall_clock_limited_solves``: those where a solve behind the plan stopped on
  the wall clock (:attr:`optimizer.plan.Plan.wall_clock_limited`) — such a row may not repeat.
  Neither is a bench.csv column (DESIGN §7.1); ``bench.md``/``bench.json`` report them.
- ``preempted_gpu_h`` (issue 30): GPU-hours lost to surge preemption (:attr:`SimResult.preempted_gpu_h`: per stop,
  the work since the last checkpoint plus the restart, x GPUs); ``stops``: stops over all jobs; ``stops_max_per_job``:
  the most stops of any one job. Columns of bench.csv only in a run with a preemptible share above 0
  (:data:`pipelines.bench.tables.PREEMPT_COLUMNS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import overload

from optimizer.simulate import SimResult

#: The bench.csv columns, in order (DESIGN §7.1).
CSV_COLUMNS: tuple[str, ...] = (
    "scenario",
    "planner",
    "utilization_pct",
    "value",
    "jobs_completed",
    "jobs_total",
    "rt_unmet_gpu_h",
    "rt_sla_pct",
    "wait_p50_h",
    "wait_p95_h",
    "solve_s_p50",
    "solve_s_max",
    "gap_max",
)

#: Columns that measure wall-clock time and therefore differ between identical runs.
TIMING_COLUMNS: tuple[str, ...] = ("solve_s_p50", "solve_s_max")


@dataclass(frozen=True)
class Metrics:
    """The metrics of one (scenario, planner) simulation; see the module docstring."""

    scenario: str
    planner: str
    utilization_pct: float
    value: float
    jobs_completed: int
    jobs_total: int
    rt_unmet_gpu_h: float
    rt_sla_pct: float
    wait_p50_h: float | None
    wait_p95_h: float | None
    solve_s_p50: float | None
    solve_s_max: float | None
    gap_max: float | None
    batch_gpu_h: float
    rt_served_gpu_h: float
    rt_demand_gpu_h: float
    lost_gpu_h: float
    wait_by_priority: dict[str, tuple[float | None, float | None]]
    replans: int
    verified_plans: int
    violations: int
    stale_plans: int
    time_limited_solves: int
    wall_clock_limited_solves: int = 0
    surge_replans: int = 0
    preempted_gpu_h: float = 0.0
    stops: int = 0
    stops_max_per_job: int = 0

    def row(self) -> dict[str, object]:
        """The bench.csv row: exactly :data:`CSV_COLUMNS`."""
        d = asdict(self)
        return {c: d[c] for c in CSV_COLUMNS}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values``.

    Linear interpolation between order statistics (numpy's default); None for an empty sequence.
    """
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def job_waits_h(res: SimResult) -> dict[str, float]:
    """Wait in hours per job (first start - arrival, censored at the window end)."""
    out = {}
    for jid, r in res.jobs.items():
        if r.arrival_step >= res.n_steps:
            continue
        start = r.first_start_step if r.first_start_step is not None else res.n_steps
        out[jid] = (start - r.arrival_step) * res.step_h
    return out


def compute(res: SimResult) -> Metrics:
    """Metrics of one simulation (see the module docstring for every definition)."""
    h = res.step_h
    window_gpu_h = res.n_gpus * res.n_steps * h
    batch_gpu_h = sum(sum(v) for v in res.batch_gpus.values()) * h
    served = demand = unmet = busy_rt = 0.0
    for s, alloc in res.service_gpus.items():
        held = res.service_served.get(s, alloc)  # per-type capacity: the demand GPUs its GPUs serve (issue 26)
        for a, n, d in zip(held, alloc, res.service_demand[s], strict=True):
            served += min(a, d) * h
            demand += d * h
            unmet += max(0, d - a) * h
            busy_rt += (min(a, d) if s not in res.service_served else n * min(1.0, d / a) if a > 0 else 0.0) * h
    value = sum(r.priority * (r.run_gpu_steps - r.lost_gpu_steps) * h for r in res.jobs.values())
    lost = sum(r.lost_gpu_steps for r in res.jobs.values()) * h
    waits = job_waits_h(res)
    by_p: dict[str, tuple[float | None, float | None]] = {}
    for p in sorted({res.jobs[j].priority for j in waits}):
        w = [waits[j] for j in waits if res.jobs[j].priority == p]
        by_p[f"{p:g}"] = (_r(percentile(w, 50)), _r(percentile(w, 95)))
    solves = [r for r in res.replans if r.replanned]
    solve_s = [r.solve_s for r in solves]
    gaps = [r.gap for r in solves if r.gap is not None and math.isfinite(r.gap)]
    return Metrics(
        scenario=res.scenario,
        planner=res.planner,
        utilization_pct=_r(100.0 * (batch_gpu_h + busy_rt) / window_gpu_h if window_gpu_h else 0.0),
        value=_r(value),
        jobs_completed=sum(1 for r in res.jobs.values() if r.completed),
        jobs_total=sum(1 for r in res.jobs.values() if r.arrival_step < res.n_steps),
        rt_unmet_gpu_h=_r(unmet),
        rt_sla_pct=_r(100.0 * served / demand if demand > 0 else 100.0),
        wait_p50_h=_r(percentile(list(waits.values()), 50)),
        wait_p95_h=_r(percentile(list(waits.values()), 95)),
        solve_s_p50=_r(percentile(solve_s, 50)),
        solve_s_max=_r(max(solve_s) if solve_s else None),
        gap_max=_r(max(gaps) if gaps else None, 6),
        batch_gpu_h=_r(batch_gpu_h),
        rt_served_gpu_h=_r(served),
        rt_demand_gpu_h=_r(demand),
        lost_gpu_h=_r(lost),
        wait_by_priority=by_p,
        replans=len(solves),
        verified_plans=res.verified_plans,
        violations=res.violations,
        stale_plans=res.stale_plans,
        time_limited_solves=sum(1 for r in solves if r.status == "time_limit" and r.source != "fallback"),
        wall_clock_limited_solves=sum(1 for r in solves if r.wall_clock_limited),
        surge_replans=res.surge_replans,
        preempted_gpu_h=_r(res.preempted_gpu_h),
        stops=sum(res.stops_per_job.values()),
        stops_max_per_job=max(res.stops_per_job.values(), default=0),
    )


@overload
def _r(x: float, nd: int = 4) -> float: ...
@overload
def _r(x: None, nd: int = 4) -> None: ...
@overload
def _r(x: float | None, nd: int = 4) -> float | None: ...
def _r(x: float | None, nd: int = 4) -> float | None:
    """Round for stable output (4 decimals; None passes through)."""
    return None if x is None else round(float(x), nd)


def type_utilization(res: SimResult) -> dict[str, float]:
    """Utilisation per GPU type of a typed scenario (issue 26), percent; ``{}`` for an untyped one.

    ``100 x (batch GPU-hours on type + real-time GPU-hours served on type) / (GPUs of type x window
    hours)``, where a service's served GPUs of a step (``min(allocated, actual)``, as in
    ``utilization_pct``) are shared among types in proportion to where its replicas sat
    (:attr:`SimResult.type_service_gpus`). Summed over types, weighted by each type's GPUs, it gives
    ``utilization_pct``.
    """
    if not res.type_gpus:
        return {}
    h = res.step_h
    out = {}
    for ty, n in res.type_gpus.items():
        busy = sum(res.type_batch_gpus[ty]) * h
        for s, by_type in res.type_service_gpus.items():
            for t, (a, d) in enumerate(zip(res.service_gpus[s], res.service_demand[s], strict=True)):
                if a > 0:
                    busy += min(a, d) * by_type[ty][t] / a * h
        out[ty] = _r(100.0 * busy / (n * res.n_steps * h)) if n else 0.0
    return out
