"""Risk maths of the risk report of a horizon plan (DESIGN §6.4): a parquet table and a Markdown page with plots.

Built from the verified plan, the problem it solved, and the forecast quantiles:

- **coverage risks**: service steps where the planned GPUs are below the P90 demand forecast
  (``shortfall_gpus`` = P90 − planned), with the probability that demand exceeds the plan
  (``probability``, normal approximation between the P50 and P90 GPU-demand quantiles:
  σ = (P90 − P50) / 1.2816, z₀.₉ = 1.2816) and whether the free GPUs at that step could cover
  it or only breaking a batch block could (``reason``).
- **idle windows**: maximal runs of steps with the same number of GPUs left free by the plan
  (start, end, GPUs, GPU-hours).
- **jobs at risk**: queued jobs not started inside the horizon, and jobs whose P90 finish is
  after their deadline, with the reason (blocking jobs, real-time demand, fragmentation).
- **queue ETA**: every queued job's estimated start (or "after the horizon") and why it waits.
- **queue outlook**: per step, jobs waiting/running and GPUs by use.

The parquet is one long table with a ``section`` column (schema :data:`REPORT_COLUMNS`).

Plots: :mod:`pipelines.report.plots`; the page: :mod:`pipelines.report.page`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

Z90 = 1.2815515655446004  # standard normal 0.9 quantile

REPORT_COLUMNS: dict[str, str] = {
    "section": "str",  # coverage_risk | idle_window | job_at_risk | queue_eta | queue_outlook
    "service": "str",
    "job_id": "str",
    "kind": "str",
    "step": "Int64",
    "start_step": "Int64",
    "end_step": "Int64",
    "start_ts": "datetime64[us, UTC]",
    "end_ts": "datetime64[us, UTC]",
    "gpus": "Int64",
    "shortfall_gpus": "Int64",
    "probability": "float64",
    "value": "float64",
    "reason": "str",
}


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report reads.

    Attributes:
        problem: the ``optimizer.problem.Problem`` that was planned (its ``demand_gpus`` are
            the quantile the planner used, P90 by default).
        plan: the verified ``optimizer.plan.Plan``.
        start_ts: UTC time of step 0 (aware).
        jobs: one row per queued or running job: ``job_id, kind, priority, state``,
            ``duration_p10_h, duration_p50_h, duration_p90_h, gpus_pred`` and optional
            ``deadline_ts`` (aware UTC or NaT).
        demand: one row per service and step: ``service, step, demand_gpus_p50,
            demand_gpus_p90``.
        bands: optional forecast-against-actual frame ``service, ts, actual, p50, p90``
            (traffic units) for the recent past.
        rt_status: service -> (status ``ok``/``degraded``, message) of its real-time profile.
        time_limit_s: the solver's time limit, quoted when the plan is not proven optimal.
    """

    problem: Any
    plan: Any
    start_ts: datetime
    jobs: pd.DataFrame
    demand: pd.DataFrame
    bands: pd.DataFrame | None = None
    rt_status: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    time_limit_s: float | None = None


def plural(n: int, word: str) -> str:
    """``"1 GPU"``, ``"2 GPUs"``, ``"0 GPUs"``: a count with its noun pluralised (English ``s``)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _steps_span(a: int, b: int) -> str:
    return f"step {a}" if a == b else f"steps {a}-{b}"


def _norm_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def exceed_probability(alloc: float, p50: float, p90: float) -> float:
    """P(demand > alloc) for a demand with median ``p50`` and 0.9-quantile ``p90`` (normal).

    Degenerate band (p90 <= p50): 1 when alloc < p50, else 0.
    """
    sigma = (p90 - p50) / Z90
    if sigma <= 0:
        return 1.0 if alloc < p50 else 0.0
    return _norm_sf((alloc - p50) / sigma)


def usage(problem: Any, plan: Any) -> tuple[np.ndarray, np.ndarray, list[list[str]]]:
    """GPUs in use per step: (batch GPUs (H,), real-time GPUs (H,), owner grid (H, N)).

    The grid is ``plan.owner_grid(n_gpus, horizon_steps)`` (job id per GPU and step, ``""`` free).
    """
    H, N = problem.horizon_steps, problem.n_gpus
    grid = plan.owner_grid(N, H)
    batch = np.array([sum(1 for o in row if o) for row in grid], dtype=int)
    rt = np.zeros(H, dtype=int)
    for gpus in plan.service_gpus.values():
        rt += np.asarray(gpus[:H], dtype=int)
    return batch, rt, grid


def coverage_risks(inp: ReportInputs) -> pd.DataFrame:
    """Service steps where the plan allocates fewer GPUs than the P90 demand forecast."""
    problem, plan = inp.problem, inp.plan
    N = problem.n_gpus - len(getattr(problem, "down_gpus", ()) or ())
    batch, rt, grid = usage(problem, plan)
    free = N - batch - rt
    d = inp.demand.set_index(["service", "step"])
    rows = []
    for svc, alloc in plan.service_gpus.items():
        for t, a in enumerate(alloc[: problem.horizon_steps]):
            if (svc, t) not in d.index:
                continue
            p50 = float(d.loc[(svc, t), "demand_gpus_p50"])
            p90 = float(d.loc[(svc, t), "demand_gpus_p90"])
            short = int(math.ceil(p90 - a))
            if short <= 0:
                continue
            blockers = sorted({o for o in grid[t] if o})
            if free[t] >= short:
                reason = (f"{plural(short, 'GPU')} short of P90 but {int(free[t])} free: covered by re-planning "
                          "within the swap cap")
            else:
                reason = (f"P90 needs {plural(short, 'more GPU')}, only {int(free[t])} free: meeting it would break "
                          f"a batch block ({', '.join(blockers[:5]) or 'none'})")
            rows.append({"section": "coverage_risk", "service": svc, "step": t,
                         "start_ts": inp.start_ts + timedelta(minutes=t * problem.cluster.step_minutes),
                         "gpus": int(a), "shortfall_gpus": short,
                         "probability": round(exceed_probability(a, p50, p90), 4),
                         "value": p90, "reason": reason})
    return _frame(rows)


def idle_windows(inp: ReportInputs, min_steps: int = 1) -> pd.DataFrame:
    """Maximal runs of steps with the same number (>= 1) of GPUs left idle by the plan."""
    problem, plan = inp.problem, inp.plan
    N = problem.n_gpus - len(getattr(problem, "down_gpus", ()) or ())
    batch, rt, _ = usage(problem, plan)
    idle = N - batch - rt
    step_h = problem.cluster.step_minutes / 60.0
    rows = []
    t = 0
    H = problem.horizon_steps
    while t < H:
        if idle[t] <= 0:
            t += 1
            continue
        u = t
        while u + 1 < H and idle[u + 1] == idle[t]:
            u += 1
        if u - t + 1 >= min_steps:
            rows.append({"section": "idle_window", "start_step": t, "end_step": u + 1,
                         "start_ts": inp.start_ts + timedelta(minutes=t * problem.cluster.step_minutes),
                         "end_ts": inp.start_ts + timedelta(minutes=(u + 1) * problem.cluster.step_minutes),
                         "gpus": int(idle[t]), "value": round(idle[t] * (u - t + 1) * step_h, 3),
                         "reason": f"{plural(int(idle[t]), 'GPU')} free for {(u - t + 1) * step_h:g} h"})
        t = u + 1
    return _frame(rows)


def _has_aligned_block(row: Sequence[str], size: int) -> bool:
    return any(all(not row[g] for g in range(o, o + size)) for o in range(0, len(row) - size + 1, size))


def size_text(job: Any) -> str:
    """The GPU count a job needs, in words.

    ``"8 GPUs"``, or ``"4–8 GPUs (smallest allowed size 4)"`` for a job with several allowed sizes
    (the wait reasons test the smallest one).
    """
    sizes = sorted({s.gpus for s in job.sizes})
    if len(sizes) == 1:
        return plural(sizes[0], "GPU")
    return f"{sizes[0]}–{sizes[-1]} GPUs (smallest allowed size {sizes[0]})"


def wait_reason(inp: ReportInputs, job: Any, start_step: int | None) -> str:
    """Why a queued job does not start at its release step (jobs or demand blocking it).

    The capacity test uses the job's smallest allowed size (even that did not fit); the text
    says so for a job with several sizes (:func:`size_text`).
    """
    problem, plan = inp.problem, inp.plan
    H = problem.horizon_steps
    N = problem.n_gpus - len(getattr(problem, "down_gpus", ()) or ())
    batch, rt, grid = usage(problem, plan)
    r = min(job.release_step, H - 1)
    if start_step is not None and start_step <= job.release_step:
        return "starts at release"
    size = min(s.gpus for s in job.sizes)
    last = (start_step if start_step is not None else H)
    cap_steps = [t for t in range(r, last) if N - batch[t] - rt[t] < size]
    if cap_steps:
        holders: dict[str, tuple[int, int, int]] = {}  # job -> (gpus, first step, last step)
        for t in cap_steps:
            counts: dict[str, int] = {}
            for o in grid[t]:
                if o:
                    counts[o] = counts.get(o, 0) + 1
            for j, g in counts.items():
                g0, a0, _ = holders.get(j, (g, t, t))
                holders[j] = (max(g0, g), min(a0, t), t)
        top = sorted(holders.items(), key=lambda kv: (-kv[1][0], kv[0]))[:4]
        jobs_txt = ", ".join(f"{j} ({plural(g, 'GPU')}, {_steps_span(a, b)})"
                             for j, (g, a, b) in top) or "no batch job"
        t = cap_steps[0]
        return (f"needs {size_text(job)}; only {int(N - batch[t] - rt[t])} free at step {t} "
                f"({plural(len(cap_steps), 'blocked step')}): held by {jobs_txt} and real-time demand "
                f"(up to {plural(int(max(rt[u] for u in cap_steps)), 'GPU')})")
    frag = [t for t in range(r, last) if not _has_aligned_block(grid[t], size)]
    if frag:
        return (f"needs an aligned block of {plural(size, 'GPU')}"
                f"{'' if len({z.gpus for z in job.sizes}) == 1 else ' (its smallest allowed size)'}; free GPUs fragmented "
                f"at step {frag[0]}")
    ahead = [a.job_id for a in plan.assignments
             if a.start_step is not None and not a.running and r <= a.start_step < last
             and a.job_id != job.job_id]
    ahead_txt = ", ".join(ahead[:5]) if ahead else "none"
    return f"ordered after higher-value work starting earlier ({ahead_txt}); real-time swap cap / demand later"


def jobs_outlook(inp: ReportInputs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(queue ETA rows for every queued job, job-at-risk rows)."""
    problem, plan = inp.problem, inp.plan
    step_min = problem.cluster.step_minutes
    H = problem.horizon_steps
    horizon_end = inp.start_ts + timedelta(minutes=H * step_min)
    jobs = inp.jobs.set_index("job_id")
    eta, risk = [], []
    for job in problem.jobs:
        a = plan.job(job.job_id)
        info = jobs.loc[job.job_id] if job.job_id in jobs.index else None
        kind = job.kind
        reason = wait_reason(inp, job, a.start_step)
        if a.start_step is not None:
            start = inp.start_ts + timedelta(minutes=a.start_step * step_min)
            end = inp.start_ts + timedelta(minutes=a.end_step * step_min)
            eta.append({"section": "queue_eta", "job_id": job.job_id, "kind": kind, "start_step": a.start_step,
                        "end_step": a.end_step, "start_ts": start, "end_ts": end, "gpus": a.gpus,
                        "value": float(job.priority), "reason": reason})
            p90_h = float(info["duration_p90_h"]) if info is not None else None
            if job.deadline_step is not None and p90_h is not None:
                p90_end = start + timedelta(hours=p90_h)
                deadline = inp.start_ts + timedelta(minutes=job.deadline_step * step_min)
                if p90_end > deadline:
                    risk.append({"section": "job_at_risk", "job_id": job.job_id, "kind": kind,
                                 "start_step": a.start_step, "start_ts": start, "end_ts": p90_end, "gpus": a.gpus,
                                 "value": float(job.priority),
                                 "reason": f"P90 finish {p90_end:%Y-%m-%d %H:%M}Z after deadline "
                                           f"{deadline:%Y-%m-%d %H:%M}Z; {reason}"})
        else:
            eta.append({"section": "queue_eta", "job_id": job.job_id, "kind": kind, "start_ts": horizon_end,
                        "gpus": min(s.gpus for s in job.sizes), "value": float(job.priority),
                        "reason": f"after the 24 h horizon (not before {horizon_end:%Y-%m-%d %H:%M}Z): {reason}"})
            risk.append({"section": "job_at_risk", "job_id": job.job_id, "kind": kind,
                         "gpus": min(s.gpus for s in job.sizes), "value": float(job.priority),
                         "reason": f"not started within the horizon: {reason}"})
    return _frame(eta), _frame(risk)


def queue_outlook(inp: ReportInputs) -> pd.DataFrame:
    """Per step: jobs waiting (``value``), batch GPUs (``gpus``), real-time GPUs in ``shortfall_gpus``-free form.

    Columns used: ``step, start_ts, gpus`` (batch GPUs), ``value`` (queued jobs still
    waiting), ``reason`` (``"running=R rt=G idle=I"``).
    """
    problem, plan = inp.problem, inp.plan
    N = problem.n_gpus - len(getattr(problem, "down_gpus", ()) or ())
    batch, rt, grid = usage(problem, plan)
    rows = []
    for t in range(problem.horizon_steps):
        waiting = sum(1 for j in problem.jobs
                      if j.release_step <= t and (plan.job(j.job_id).start_step is None
                                                  or plan.job(j.job_id).start_step > t))
        running = len({o for o in grid[t] if o})
        rows.append({"section": "queue_outlook", "step": t,
                     "start_ts": inp.start_ts + timedelta(minutes=t * problem.cluster.step_minutes),
                     "gpus": int(batch[t]), "value": float(waiting),
                     "reason": f"running={running} rt={int(rt[t])} idle={int(N - batch[t] - rt[t])}"})
    return _frame(rows)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(REPORT_COLUMNS))
    for col, dtype in REPORT_COLUMNS.items():
        if dtype.startswith("datetime"):
            df[col] = pd.to_datetime(df[col], utc=True).astype(dtype)
        else:
            df[col] = df[col].astype(dtype)
    return df


def build_report_table(inp: ReportInputs) -> pd.DataFrame:
    """The whole risk report as one long table (:data:`REPORT_COLUMNS`)."""
    eta, risk = jobs_outlook(inp)
    parts = [coverage_risks(inp), idle_windows(inp), risk, eta, queue_outlook(inp)]
    parts = [p for p in parts if len(p)]
    if not parts:
        return _frame([])
    return pd.concat(parts, ignore_index=True)
