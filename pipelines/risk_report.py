"""The risk report of a horizon plan (DESIGN §6.4): a parquet table and a Markdown page with plots.

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
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
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


def _usage(problem: Any, plan: Any) -> tuple[np.ndarray, np.ndarray, list[list[str]]]:
    """(batch GPUs per step (H,), real-time GPUs per step (H,), owner grid (H, N))."""
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
    batch, rt, grid = _usage(problem, plan)
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
    batch, rt, _ = _usage(problem, plan)
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
    """The GPU count a job needs, in words: ``"8 GPUs"``, or ``"4–8 GPUs (smallest allowed size 4)"``
    for a job with several allowed sizes (the wait reasons test the smallest one)."""
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
    batch, rt, grid = _usage(problem, plan)
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
    batch, rt, grid = _usage(problem, plan)
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


# ---------------------------------------------------------------- plots


#: pyplot and matplotlib's mathtext parser (log-axis tick labels) are not thread-safe; every
#: plot in the pipelines is drawn under this lock (tasks may run in Prefect's thread pool).
PLOT_LOCK = threading.RLock()


def _serialized(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with PLOT_LOCK:
            return fn(*args, **kwargs)

    return wrapper


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


KIND_COLORS = {"training": "#1f77b4", "quantization": "#ff7f0e", "batch_inference": "#2ca02c",
               "realtime": "#d62728", "idle": "#f0f0f0"}


def display_grid(problem: Any, plan: Any) -> list[list[str]]:
    """Owner per step and GPU for display: batch jobs on their blocks, then each service's
    counted GPUs on the highest free GPUs (services are counted, not placed), ``""`` idle.
    Shape (horizon_steps, n_gpus)."""
    grid = [list(r) for r in plan.owner_grid(problem.n_gpus, problem.horizon_steps)]
    down = set(getattr(problem, "down_gpus", ()) or ())
    for t, row in enumerate(grid):
        for g in down:
            row[g] = "down"
        free = [g for g, o in reversed(list(enumerate(row))) if not o]  # services from the top GPU down
        i = 0
        for svc, alloc in plan.service_gpus.items():
            for _ in range(int(alloc[t])):
                if i < len(free):
                    row[free[i]] = f"service:{svc}"
                    i += 1
    return grid


@_serialized
def plot_gantt(problem: Any, plan: Any, kinds: Mapping[str, str], path: Path, start_ts: datetime) -> Path:
    """Gantt-style chart: GPUs (y) × steps (x); batch blocks coloured by kind and labelled,
    real-time GPUs red, idle light grey."""
    plt = _plt()
    from matplotlib.patches import Patch, Rectangle

    H, N = problem.horizon_steps, problem.n_gpus
    grid = display_grid(problem, plan)
    fig, ax = plt.subplots(figsize=(14, max(4, N * 0.12)))
    for t in range(H):
        for g in range(N):
            o = grid[t][g]
            if o.startswith("service:"):
                c = KIND_COLORS["realtime"]
            elif o == "down":
                c = "black"
            elif o:
                c = KIND_COLORS.get(kinds.get(o, ""), "#9467bd")
            else:
                continue
            ax.add_patch(Rectangle((t, g), 1, 1, color=c, lw=0, alpha=0.85))
    for a in plan.assignments:
        if a.start_step is None:
            continue
        ax.add_patch(Rectangle((a.start_step, a.block_offset), min(H, a.end_step) - a.start_step, a.gpus,
                               fill=False, ec="black", lw=0.6))
        if a.gpus >= 2 and min(H, a.end_step) - a.start_step >= 3:
            ax.text(a.start_step + 0.2, a.block_offset + a.gpus / 2, a.job_id, fontsize=6, va="center")
    ax.set_xlim(0, H)
    ax.set_ylim(0, N)
    ax.set_xlabel(f"step ({problem.cluster.step_minutes} min) from {start_ts:%Y-%m-%d %H:%M}Z")
    ax.set_ylabel("GPU")
    ax.set_title(f"plan ({plan.planner}, {plan.status})")
    ax.legend(handles=[Patch(color=c, label=k) for k, c in KIND_COLORS.items()], loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


@_serialized
def plot_demand(inp: ReportInputs, path: Path) -> Path:
    """Per service: P50 and P90 GPU demand forecast, the planned GPUs, and coverage-risk steps."""
    plt = _plt()
    svcs = list(inp.plan.service_gpus)
    fig, axes = plt.subplots(max(1, len(svcs)), 1, figsize=(11, 2.8 * max(1, len(svcs))), squeeze=False)
    for ax, svc in zip(axes[:, 0], svcs):
        d = inp.demand[inp.demand["service"] == svc].sort_values("step")
        x = d["step"].to_numpy()
        ax.fill_between(x, d["demand_gpus_p50"], d["demand_gpus_p90"], step="post", alpha=0.3, label="P50–P90 demand")
        ax.step(x, d["demand_gpus_p50"], where="post", lw=1, label="P50 demand")
        ax.step(np.arange(len(inp.plan.service_gpus[svc])), inp.plan.service_gpus[svc], where="post", color="black",
                lw=1.5, label="planned GPUs")
        status = inp.rt_status.get(svc, ("ok", ""))[0]
        ax.set_title(f"{svc} (profile status: {status})", fontsize=9)
        ax.set_ylabel("GPUs")
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


@_serialized
def plot_bands(bands: pd.DataFrame, path: Path) -> Path:
    """Forecast against actual: per service, actual traffic with the P50 line and P50–P90 band."""
    plt = _plt()
    svcs = sorted(bands["service"].unique())
    fig, axes = plt.subplots(max(1, len(svcs)), 1, figsize=(11, 2.8 * max(1, len(svcs))), squeeze=False)
    for ax, svc in zip(axes[:, 0], svcs):
        b = bands[bands["service"] == svc].sort_values("ts")
        ax.fill_between(b["ts"], b["p50"], b["p90"], alpha=0.3, label="P50–P90 forecast")
        ax.plot(b["ts"], b["p50"], lw=1, label="P50 forecast")
        ax.plot(b["ts"], b["actual"], color="black", lw=1, label="actual")
        ax.set_title(svc, fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


@_serialized
def plot_outlook(outlook: pd.DataFrame, rt: np.ndarray, n_gpus: int, path: Path) -> Path:
    """Queue outlook: GPUs used by batch work and real-time per step, and jobs still waiting."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(11, 3.2))
    x = outlook["step"].to_numpy(dtype=int)
    batch = outlook["gpus"].to_numpy(dtype=float)
    ax.stackplot(x, batch, rt[: len(x)], labels=["batch GPUs", "real-time GPUs"],
                 colors=[KIND_COLORS["training"], KIND_COLORS["realtime"]], alpha=0.7, step="post")
    ax.axhline(n_gpus, color="grey", ls="--", lw=1)
    ax.set_ylabel("GPUs")
    ax2 = ax.twinx()
    ax2.step(x, outlook["value"], where="post", color="black", label="jobs waiting")
    ax2.set_ylabel("jobs waiting")
    ax.legend(loc="upper left", fontsize=7)
    ax2.legend(loc="upper right", fontsize=7)
    ax.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- page


def md_table(df: pd.DataFrame, columns: Sequence[str], max_rows: int = 60) -> str:
    """A GitHub Markdown table of ``columns`` (first ``max_rows`` rows; a note when cut)."""
    if df.empty:
        return "_none_\n"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for _, r in df.head(max_rows).iterrows():
        cells = []
        for c in columns:
            v = r[c]
            if v is None or (not isinstance(v, str) and pd.isna(v)):
                cells.append("")
            elif isinstance(v, pd.Timestamp):
                cells.append(v.strftime("%Y-%m-%d %H:%M") + "Z")
            elif isinstance(v, float):
                cells.append(f"{v:.3g}")
            else:
                cells.append(str(v).replace("|", "/"))
        lines.append("| " + " | ".join(cells) + " |")
    if len(df) > max_rows:
        lines.append(f"\n_{len(df) - max_rows} more rows in risk_report.parquet_")
    return "\n".join(lines) + "\n"


def status_text(plan: Any, mip_rel_gap: float | None) -> str:
    """The solve status in words, with the gap in percent.

    ``optimal`` with a positive gap reads ``optimal within the 0.1 % gap tolerance (gap 0.07 %)``:
    HiGHS stops when the relative gap (bound − objective) / objective is below ``mip_rel_gap``,
    so "optimal" means "within that tolerance", not "no better plan exists".
    """
    gap = None if plan.gap is None else float(plan.gap)
    gap_txt = "n/a" if gap is None else f"{_pct(gap)} %"
    if plan.status == "optimal":
        if gap is None or gap <= 1e-9:
            return "**optimal** (gap 0 %)" if gap is not None else "**optimal**"
        tol = f"the {_pct(mip_rel_gap)} % gap tolerance" if mip_rel_gap else "the solver's gap tolerance"
        return f"**optimal** within {tol} (gap {gap_txt})"
    return f"**{plan.status}** (gap {gap_txt})"


def _pct(frac: float) -> str:
    """A fraction as a short percentage number (2 decimals, trailing zeros cut; 1 significant
    digit below 0.01 %): 0.0007 -> ``"0.07"``, 0.001 -> ``"0.1"``, 0.0125 -> ``"1.25"``, 1e-5 -> ``"0.001"``."""
    v = frac * 100
    if 0 < abs(v) < 0.01:
        return f"{v:.1g}"
    return f"{v:.2f}".rstrip("0").rstrip(".")


#: Plain-words explanation of a degraded real-time profile, keyed by the start of the message that
#: :func:`forecasters.realtime.fit_profile` gives (C03 history rule).
_SHORT_WEEKLY = "weekly seasonality needs more than"


def explain_rt_status(status: str, message: str) -> str | None:
    """What a real-time profile status means for the operator, in plain words (``None`` when ok).

    A ``"degraded"`` profile from a history of 168..336 hourly points (the shipped ServeGen series
    are exactly 336 h) has its weekly shape fitted without a second week to confirm it; below 168
    points there is no weekly shape at all. Other degraded causes get a generic explanation.
    """
    if status == "ok":
        return None
    if status == "given":
        return None
    if _SHORT_WEEKLY in message:
        import re

        got = re.search(r"got (\d+)", message)
        n_txt = f"{got.group(1)} hourly points" if got else "too few hourly points"
        if "NOT estimated" in message:
            return (f"The traffic history has {n_txt}, less than one full week, so the forecast knows only "
                    "the daily pattern: weekday/weekend differences are missing and the P90 may be too low "
                    "on busy weekdays. Keep extra real-time headroom (a higher `min_gpus`) for this service "
                    "and give at least three weeks of hourly traffic.")
        return (f"The traffic history has {n_txt} (two weeks or less), so the weekly pattern (each hour of "
                "the week) is in effect fitted from one week only, with no second week to confirm it. Anything "
                "unusual in that week (a holiday, an outage, a launch) is repeated in the forecast for the same "
                "hour of the week, and the P90 band does not allow for it. For the operator: check the demand "
                "plot against what you expect for these weekdays, keep extra real-time headroom (a higher "
                "`min_gpus`) if that week was not typical, and give more than 336 hourly points (three weeks "
                "or more) to clear this status.")
    return ("The forecast for this service is less reliable than usual (see the message); keep extra "
            "real-time headroom for it and check the forecast-against-actual plot.")


def render_page(inp: ReportInputs, table: pd.DataFrame, plots: Mapping[str, str], run_name: str) -> str:
    """The Markdown page (plots referenced by relative file name).

    Sections in order, each table under its own ``##`` heading and each plot right after the
    section it illustrates: summary and real-time profiles, coverage risks (+ demand plot),
    forecast against actual (plot), idle windows, jobs at risk, estimated starts, queue outlook
    (+ plot), plan Gantt chart. The objective and bound are both rounded to 2 decimals.
    """
    plan = inp.plan
    sec = {s: table[table["section"] == s] for s in ("coverage_risk", "idle_window", "job_at_risk",
                                                     "queue_eta", "queue_outlook")}

    def plot(key: str, alt: str) -> list[str]:
        return [f"![{alt}]({plots[key]})", ""] if key in plots else []

    out = [f"# Risk report — {run_name}", "",
           f"Horizon: {inp.problem.horizon_steps} steps × {inp.problem.cluster.step_minutes} min from "
           f"{inp.start_ts:%Y-%m-%d %H:%M}Z, {plural(inp.problem.n_gpus, 'GPU')}.", ""]
    settings = getattr(inp.problem, "settings", None)
    tol = getattr(settings, "mip_rel_gap", None)
    bound = "n/a" if plan.bound is None else f"{plan.bound:.2f}"
    gap = "n/a" if plan.gap is None else f"{_pct(plan.gap)} %"
    out.append(f"Plan: planner `{plan.planner}`, status {status_text(plan, tol)}, objective "
               f"{plan.objective:.2f}, bound {bound}, solve {plan.solve_s:.1f} s.")
    if plan.status == "time_limit":
        lim = f" after {inp.time_limit_s:g} s" if inp.time_limit_s else ""
        out.append(f"\n> **Not proven optimal**: the solver stopped on its time limit{lim} with this incumbent "
                   f"(gap {gap}).")
    if plan.fallback or plan.status == "fallback":
        out.append(f"\n> **Fallback plan**: the MILP did not return a plan ({plan.message}); this is the best "
                   f"baseline plan.")
    out.append("\nReal-time profiles:\n")
    for svc, (status, msg) in inp.rt_status.items():
        flag = "**DEGRADED** — " if status not in ("ok", "given") else ""
        out.append(f"- `{svc}`: {flag}{status}{(': ' + msg) if msg else ''}")
        why = explain_rt_status(status, msg or "")
        if why:
            out.append(f"  - What this means: {why}")
    out += ["", "## Coverage risks", "",
            "Steps where the planned GPUs are below the P90 demand forecast; probability that demand "
            "exceeds the plan.", "",
            md_table(sec["coverage_risk"], ["service", "step", "start_ts", "gpus", "shortfall_gpus",
                                            "probability", "reason"])]
    out += plot("demand", "Demand bands: P50–P90 GPU demand forecast and planned GPUs per service")
    if "bands" in plots:
        out += ["## Forecast against actual", ""] + plot("bands", "Forecast against actual traffic")
    out += ["## Idle windows", "",
            md_table(sec["idle_window"], ["start_ts", "end_ts", "start_step", "end_step", "gpus", "value"]).replace(
                "| value |", "| GPU-hours |"),
            "## Jobs at risk", "",
            "Finish times here are P90 (pessimistic) duration forecasts; the next table gives planned ends.", "",
            md_table(sec["job_at_risk"], ["job_id", "kind", "gpus", "start_ts", "end_ts", "reason"]).replace(
                "| end_ts |", "| p90_finish_ts |"),
            "## Estimated start of every queued job", "",
            md_table(sec["queue_eta"].sort_values("start_ts", kind="stable"),
                     ["job_id", "kind", "value", "gpus", "start_ts", "end_ts", "reason"], max_rows=200).replace(
                "| value |", "| priority |").replace("| end_ts |", "| planned_end_ts |"),
            "## Queue outlook", ""]
    q = sec["queue_outlook"]
    if len(q):
        every = q.iloc[:: max(1, len(q) // 12)]
        out.append(md_table(every, ["step", "start_ts", "gpus", "value", "reason"]).replace(
            "| gpus | value |", "| batch GPUs | jobs waiting |"))
    else:
        out.append("_none_\n")
    out += plot("outlook", "Queue outlook: GPUs by use and jobs waiting per step")
    if "gantt" in plots:
        out += ["## Plan (Gantt)", ""] + plot("gantt", "Plan: GPUs by step, batch blocks by kind, real-time in red")
    return "\n".join(out).rstrip("\n") + "\n"


def write_risk_report(folder: Path, inp: ReportInputs, run_name: str) -> dict[str, Path]:
    """Write ``risk_report.parquet``, the PNG plots and ``risk_report.md`` into ``folder``.

    Each file is written atomically. Returns name -> path.
    """
    from pipelines.atomic import atomic_path, atomic_write_text

    folder = Path(folder)
    table = build_report_table(inp)
    paths: dict[str, Path] = {}
    with atomic_path(folder / "risk_report.parquet") as tmp:
        table.to_parquet(tmp, index=False)
    paths["risk_report.parquet"] = folder / "risk_report.parquet"
    kinds = {j.job_id: j.kind for j in inp.problem.jobs}
    kinds.update({r.job_id: r.kind for r in inp.problem.running})
    plots: dict[str, str] = {}
    _, rt, _ = _usage(inp.problem, inp.plan)
    for key, fn in (("gantt", lambda p: plot_gantt(inp.problem, inp.plan, kinds, p, inp.start_ts)),
                    ("demand", lambda p: plot_demand(inp, p)),
                    ("outlook", lambda p: plot_outlook(table[table["section"] == "queue_outlook"], rt,
                                                       inp.problem.n_gpus, p)),
                    ("bands", (lambda p: plot_bands(inp.bands, p)) if inp.bands is not None and len(inp.bands)
                     else None)):
        if fn is None:
            continue
        name = f"{key}.png"
        with atomic_path(folder / name) as tmp_png:  # the temporary name keeps ".png" for savefig
            fn(tmp_png)
        paths[name] = folder / name
        plots[key] = name
    atomic_write_text(folder / "risk_report.md", render_page(inp, table, plots, run_name))
    paths["risk_report.md"] = folder / "risk_report.md"
    return paths
