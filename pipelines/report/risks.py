"""Risk maths of the risk report of a horizon plan (DESIGN §6.4), as one long table.

Built from the verified plan, the problem it solved, the forecasts and the measured calibration:

- **real-time coverage** (:mod:`pipelines.report.calibration`): the measured P90 coverage per
  service and hour band (``rt_calibration``), P(demand > plan) per service and step
  (``rt_exceedance``), and steps planned below the P90 forecast (``coverage_risk``; empty when the
  plan meets the P90, as it normally does).
- **idle windows** (:func:`idle_windows`): runs of steps with at least one node's GPUs idle
  (:data:`IDLE_MIN_GPUS` = ``gpus_per_node`` unless given) lasting at least :data:`IDLE_MIN_H`
  hours; each with its least, most and total idle GPUs and the largest aligned block that stays
  free of batch work throughout.
- **jobs at risk** (:func:`jobs_outlook`): queued jobs not started inside the horizon, and jobs whose
  P90 finish is after their deadline (the rule: :func:`deadline_miss`, also the what-if's). Every duration is the forecast **at the size the plan chose**
  (:func:`planned_durations_h`); the deadline is the real instant (``deadline_at``), shown to the
  second and compared as is (the problem's ``deadline_step`` is rounded up to a step).
- **queue ETA**: every queued job's planned start and end, or why it is not started, with the reason
  it waits (:mod:`pipelines.report.waits`).
- **long holders**: batch jobs holding at least one node's GPUs for more than
  :data:`pipelines.report.waits.LONG_HOLD_H` hours.
- **queue outlook**: per step, jobs waiting and GPUs by use.

The parquet is one long table with a ``section`` column (schema :data:`REPORT_COLUMNS`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pipelines.report.basics import (
    REPORT_COLUMNS,
    ReportInputs,
    clock,
    frame,
    hours_text,
    idle_per_step,
    instant,
    plural,
    step_ts,
    up_gpus,
    usage,
)
from pipelines.report.calibration import Z90, calibrate, calibration_rows, exceed_probability
from pipelines.report.planview import PlanView, plan_view
from pipelines.report.stops import stop_rows
from pipelines.report.waits import block_text, cannot_fit, is_long_holder, size_text, wait_reason

__all__ = [
    "IDLE_MIN_H", "REPORT_COLUMNS", "Z90", "DeadlineMiss", "ReportInputs", "build_report_table", "coverage_risks",
    "deadline_instant", "deadline_miss", "exceed_probability", "idle_windows", "jobs_outlook", "long_holders", "planned_durations_h",
    "plural", "queue_outlook", "size_text", "usage", "wait_reason",
]

#: An idle window lasts at least this long (hours) ...
IDLE_MIN_H = 1.0
#: ... with at least this many GPUs idle at every step (None: one node's GPUs, ``gpus_per_node``).
IDLE_MIN_GPUS: int | None = None


def coverage_risks(inp: ReportInputs) -> pd.DataFrame:
    """Service steps where the plan allocates fewer GPUs than the P90 demand forecast (``coverage_risk``).

    ``shortfall_gpus`` = ceil(P90 − planned); ``probability`` = P(demand > plan) (normal
    approximation between the P50 and P90 GPU forecasts, :func:`exceed_probability`); ``reason`` says
    whether the idle GPUs at that step could cover it or only breaking a batch block could.
    """
    problem, plan = inp.problem, inp.plan
    N = up_gpus(problem)
    batch, rt, grid = usage(problem, plan)
    free = N - batch - rt
    d = inp.demand.set_index(["service", "step"])
    rows = []
    for svc in inp.service_names():
        alloc = plan.service_gpus.get(svc, ())
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
            rows.append({"section": "coverage_risk", "service": svc, "step": t, "start_ts": step_ts(inp, t),
                         "gpus": int(a), "shortfall_gpus": short,
                         "probability": round(exceed_probability(a, p50, p90), 4), "value": p90, "reason": reason})
    return frame(rows)


def idle_windows(inp: ReportInputs, min_h: float = IDLE_MIN_H, min_gpus: int | None = IDLE_MIN_GPUS) -> pd.DataFrame:
    """Idle windows that matter (``idle_window`` rows; the rule is in the module docstring).

    A window is a maximal run of steps with at least ``min_gpus`` GPUs idle (default one node's GPUs)
    lasting at least ``min_h`` hours. ``gpus`` = the fewest idle GPUs in it (always available),
    ``value`` = its idle GPU-hours, ``count`` = its steps; ``reason`` gives the range and the largest
    aligned block free of batch work throughout (the biggest job that could use it).
    """
    problem = inp.problem
    idle = idle_per_step(inp)
    g_min = int(min_gpus) if min_gpus is not None else int(problem.cluster.gpus_per_node)
    n_min = max(1, math.ceil(min_h / inp.step_h - 1e-9))
    grid = np.array(inp.plan.owner_grid(problem.n_gpus, problem.horizon_steps), dtype=object) != ""
    down = list(getattr(problem, "down_gpus", ()) or ())
    rows = []
    H, t = problem.horizon_steps, 0
    while t < H:
        if idle[t] < g_min:
            t += 1
            continue
        u = t
        while u + 1 < H and idle[u + 1] >= g_min:
            u += 1
        if u - t + 1 >= n_min:
            lo, hi = int(idle[t:u + 1].min()), int(idle[t:u + 1].max())
            busy = grid[t:u + 1].any(axis=0)
            busy[down] = True
            block = _largest_block(busy, lo)
            gpu_h = float(idle[t:u + 1].sum() * inp.step_h)
            rng = plural(lo, "GPU") if lo == hi else f"{lo}–{hi} GPUs"
            rows.append({"section": "idle_window", "start_step": t, "end_step": u + 1, "start_ts": step_ts(inp, t),
                         "end_ts": step_ts(inp, u + 1), "gpus": lo, "count": u - t + 1, "value": round(gpu_h, 3),
                         "reason": f"{rng} idle for {hours_text((u - t + 1) * inp.step_h)} ({gpu_h:g} GPU-h); "
                                   f"an aligned block of {plural(block, 'GPU')} stays free of batch work throughout"})
        t = u + 1
    return frame(rows)


def _largest_block(busy: np.ndarray, limit: int) -> int:
    """Largest power of two ``s <= limit`` with an aligned block of ``s`` GPUs not ``busy`` (0 when none)."""
    s = 1 << max(0, int(limit).bit_length() - 1) if limit >= 1 else 0
    while s >= 1:
        if len(busy) % s == 0 and (~busy.reshape(-1, s).any(axis=1)).any():
            return s
        s //= 2
    return 0


def planned_durations_h(inp: ReportInputs, job: Any, gpus: int, info: pd.Series | None) -> tuple[dict[str, float], str]:
    """Duration quantiles (hours) of ``job`` at ``gpus`` GPUs, and where they come from.

    - ``gpus`` is the job's first (requested) size, or the job has no other sizes: its forecast row
      (``duration_p10_h/p50_h/p90_h``);
    - another size with the three quantiles in the row's ``size_options``: those (the forecaster at
      that size, :func:`pipelines.stages.models.forecast_jobs`);
    - another size whose option has only ``duration_h`` (older files): that duration scaled by the
      requested size's P10/P90 ÷ P50 ratios, said in the source text;
    - no forecast row (a plan of a given problem file): the problem's duration at that size for all three.

    Returns ``({"p10", "p50", "p90"}, source)``; source ``"forecast"``, ``"forecast at N GPUs"``,
    ``"scaled from the requested size"`` or ``"problem file"``.
    """
    size = next((z for z in job.sizes if int(z.gpus) == int(gpus)), job.sizes[0])
    from_problem = size.duration_steps * inp.step_h
    if info is None or pd.isna(info.get("duration_p90_h")):
        return {"p10": from_problem, "p50": from_problem, "p90": from_problem}, "problem file"
    base = {q: float(info[f"duration_{q}_h"]) if pd.notna(info.get(f"duration_{q}_h")) else float(info["duration_p90_h"])
            for q in ("p10", "p50", "p90")}
    if int(gpus) == int(job.sizes[0].gpus):
        return base, "forecast"
    opts = info.get("size_options")
    options = json.loads(opts) if isinstance(opts, str) and opts else []
    opt = next((o for o in options if int(o.get("gpus", -1)) == int(gpus)), None)
    if opt is not None and all(f"duration_{q}_h" in opt for q in ("p10", "p50", "p90")):
        return {q: float(opt[f"duration_{q}_h"]) for q in ("p10", "p50", "p90")}, f"forecast at {gpus} GPUs"
    p50_at = float(opt["duration_h"]) if opt is not None else from_problem
    scale = {q: base[q] / base["p50"] if base["p50"] > 0 else 1.0 for q in ("p10", "p50", "p90")}
    return {q: p50_at * scale[q] for q in ("p10", "p50", "p90")}, "scaled from the requested size"


#: The forecaster's flag of a job whose quantiles it raised to one step (:func:`forecasters.jobs.steps.clip_to_step`).
FLAG_CLIPPED = "clipped_min_duration"


def quantiles_text(q: dict[str, float], source: str, info: pd.Series | None, step_h: float) -> str:
    """``"P50 2.00 h, P90 3.00 h"`` of :func:`planned_durations_h`'s quantiles (hours), as the risk report says them.

    A quantile the forecaster raised to one step (the job's ``flags`` hold :data:`FLAG_CLIPPED`; the source is
    its own forecast) reads ``< 1 step``, not the step's length: its raw value is not kept, and ``P50 0.50 h,
    P90 0.50 h`` read as a forecast without spread. Once, after the last quantile: what the plan and the
    finish times use, ``(each planned as one step, 0.50 h)``.
    """
    clipped = (source == "forecast" and info is not None
               and FLAG_CLIPPED in str(info.get("flags") or "").split(","))
    low = {k: clipped and q[k] <= step_h + 1e-9 for k in ("p50", "p90")}
    text = ", ".join(f"{k.upper()} < 1 step" if low[k] else f"{k.upper()} {q[k]:.2f} h" for k in ("p50", "p90"))
    return text + (f" (each under one step planned as one step, {step_h:.2f} h)" if any(low.values()) else "")


def deadline_instant(inp: ReportInputs, job: Any, info: pd.Series | None) -> pd.Timestamp | None:
    """The job's real deadline: ``deadline_at`` (or ``deadline_ts``) of its row, else its ``deadline_step``.

    The row's instant is the truth (to the second); the problem's step is rounded up, so it is used
    only for a plan of a given problem file (no row or no instant there).
    """
    if info is not None:
        for col in ("deadline_at", "deadline_ts"):
            v = info.get(col)
            if v is not None and not pd.isna(v):
                return pd.Timestamp(v).tz_convert("UTC") if pd.Timestamp(v).tzinfo else pd.Timestamp(v, tz="UTC")
    if job.deadline_step is not None:
        return step_ts(inp, job.deadline_step)
    return None


@dataclass(frozen=True)
class DeadlineMiss:
    """A queued job the plan does not finish by its deadline at P90: the one jobs-at-risk rule's verdict.

    Attributes:
        deadline: the real deadline (:func:`deadline_instant`, UTC).
        p90_end / p50_end: the P90 / P50 finish at the planned start and size (None: not started in
            the horizon).
        durations_h: ``{"p10", "p50", "p90"}`` hours at the planned size (:func:`planned_durations_h`;
            empty when not started); ``source``: where they come from.
    """

    deadline: pd.Timestamp
    p90_end: pd.Timestamp | None = None
    p50_end: pd.Timestamp | None = None
    durations_h: dict[str, float] = field(default_factory=dict)
    source: str = ""


def deadline_miss(inp: ReportInputs, job: Any, start_step: int | None, gpus: int,
                  info: pd.Series | None) -> DeadlineMiss | None:
    """The jobs-at-risk rule: a queued job with a deadline is at risk when it misses it at P90.

    Missing it: it does not start in the horizon (``start_step`` None), or its P90 finish at the PLANNED
    size (``gpus``) is after its deadline.

    Used by the risk report (:func:`jobs_outlook`) and the what-if (``jobs_missing_deadline``,
    :func:`pipelines.stages.whatif.deadline_misses`). Durations: :func:`planned_durations_h`; the deadline:
    :func:`deadline_instant` (to the second). Returns None when the job has no deadline or meets it.
    """
    deadline = deadline_instant(inp, job, info)
    if deadline is None:
        return None
    if start_step is None:
        return DeadlineMiss(deadline)
    q, source = planned_durations_h(inp, job, int(gpus), info)
    start = step_ts(inp, start_step)
    p90_end = start + pd.Timedelta(hours=q["p90"])
    if not p90_end > deadline:
        return None
    return DeadlineMiss(deadline, p90_end, start + pd.Timedelta(hours=q["p50"]), q, source)


def _rows_by_id(jobs: pd.DataFrame) -> dict[str, pd.Series]:
    return {str(r["job_id"]): r for _, r in jobs.iterrows()} if len(jobs) else {}


def jobs_outlook(inp: ReportInputs, view: PlanView | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(queue ETA rows for every queued job, job-at-risk rows); the rules are in the module docstring.

    ETA rows: ``start_ts``/``end_ts`` the planned (P50) start and end, ``gpus`` the planned size
    (smallest allowed when not started), ``value`` the priority, ``deadline_ts``, ``reason`` why it
    waits. At-risk rows: ``end_ts`` the P90 finish at the planned size, ``deadline_ts``, ``reason``.
    """
    problem, plan = inp.problem, inp.plan
    view = view if view is not None else plan_view(inp)
    horizon_end = step_ts(inp, problem.horizon_steps)
    rows = _rows_by_id(inp.jobs)
    eta, risk = [], []
    for job in problem.jobs:
        a = plan.job(job.job_id)
        info = rows.get(job.job_id)
        reason = wait_reason(inp, job, a.start_step, view)
        deadline = deadline_instant(inp, job, info)
        base = {"job_id": job.job_id, "kind": job.kind, "value": float(job.priority), "deadline_ts": deadline}
        if a.start_step is not None:
            start, end = step_ts(inp, a.start_step), step_ts(inp, a.end_step)
            eta.append({**base, "section": "queue_eta", "start_step": a.start_step, "end_step": a.end_step,
                        "start_ts": start, "end_ts": end, "gpus": a.gpus, "reason": reason})
            miss = deadline_miss(inp, job, a.start_step, int(a.gpus), info)
            if miss is not None and miss.p90_end is not None:
                p90_end, p50_end, q, source = miss.p90_end, miss.p50_end, miss.durations_h, miss.source
                assert p50_end is not None
                late = (p90_end - deadline) / pd.Timedelta(hours=1)
                risk.append({**base, "section": "job_at_risk", "start_step": a.start_step, "start_ts": start,
                             "end_ts": p90_end, "gpus": a.gpus, "probability": None,
                             "reason": f"P90 finish {instant(p90_end)} is {hours_text(late)} after its deadline "
                                       f"{instant(deadline)} (on {plural(int(a.gpus), 'GPU')}, the planned size: "
                                       f"{quantiles_text(q, source, info, inp.step_h)}, {source}; P50 end "
                                       f"{instant(p50_end)}{' also late' if p50_end > deadline else ''}); {reason}"})
        else:
            s_min = min(int(z.gpus) for z in job.sizes)
            never = cannot_fit(inp, view, job)
            when = "never in this plan" if never else f"after the {hours_text(problem.horizon_steps * inp.step_h)} " \
                f"horizon (not before {clock(horizon_end)})"
            eta.append({**base, "section": "queue_eta", "start_ts": None if never else horizon_end, "gpus": s_min,
                        "reason": f"{when}: {reason}"})
            late = "" if deadline is None or deadline > horizon_end else \
                f"; its deadline {instant(deadline)} is inside the horizon"
            risk.append({**base, "section": "job_at_risk", "gpus": s_min,
                         "reason": f"{reason}{late}" if never else
                         f"not started within the horizon{late}: {reason}"})
    return frame(eta), frame(risk)


def long_holders(inp: ReportInputs, view: PlanView | None = None) -> pd.DataFrame:
    """Long holders (``long_holder`` rows).

    Batch jobs (queued or running) holding at least one node's GPUs for more than
    :data:`pipelines.report.waits.LONG_HOLD_H` hours (from their start, or the plan start when running);
    ``value`` the hours held.
    """
    view = view if view is not None else plan_view(inp)
    kinds = {j.job_id: j.kind for j in inp.problem.jobs} | {r.job_id: r.kind for r in inp.problem.running}
    rows = []
    for jid in sorted(view.ids, key=lambda j: (-view.end[j], j)):
        if not is_long_holder(view, jid, inp.step_h):
            continue
        held_h = (view.end[jid] - max(0, view.start[jid])) * inp.step_h
        rows.append({"section": "long_holder", "job_id": jid, "kind": kinds.get(jid, ""),
                     "start_step": view.start[jid], "end_step": view.end[jid],
                     "start_ts": step_ts(inp, max(0, view.start[jid])), "end_ts": step_ts(inp, view.end[jid]),
                     "gpus": view.gpus[jid], "value": held_h,
                     "reason": f"{'running; ' if jid in view.running else ''}holds {plural(view.gpus[jid], 'GPU')} "
                               f"({block_text(inp, view, view.offset[jid], view.gpus[jid])}) for {hours_text(held_h)}, "
                               f"until {clock(step_ts(inp, view.end[jid]))}"})
    return frame(rows)


def queue_outlook(inp: ReportInputs) -> pd.DataFrame:
    """The queue per step (``queue_outlook`` rows).

    ``gpus`` batch GPUs, ``value`` queued jobs released and still waiting, ``reason``
    ``"running=R rt=G idle=I"``.
    """
    problem, plan = inp.problem, inp.plan
    N = up_gpus(problem)
    batch, rt, grid = usage(problem, plan)
    starts = {a.job_id: a.start_step for a in plan.assignments}
    rows = []
    for t in range(problem.horizon_steps):
        waiting = sum(1 for j in problem.jobs
                      if j.release_step <= t and (starts.get(j.job_id) is None or starts[j.job_id] > t))
        running = len({o for o in grid[t] if o})
        rows.append({"section": "queue_outlook", "step": t, "start_ts": step_ts(inp, t), "gpus": int(batch[t]),
                     "value": float(waiting), "reason": f"running={running} rt={int(rt[t])} idle={int(N - batch[t] - rt[t])}"})
    return frame(rows)


def build_report_table(inp: ReportInputs) -> pd.DataFrame:
    """The whole risk report as one long table (:data:`REPORT_COLUMNS`)."""
    view = plan_view(inp)
    eta, risk = jobs_outlook(inp, view)
    parts = [calibration_rows(inp, calibrate(inp)), coverage_risks(inp), idle_windows(inp), risk, eta,
             long_holders(inp, view), queue_outlook(inp), stop_rows(inp)]
    parts = [p for p in parts if len(p)]
    if not parts:
        return frame([])
    return pd.concat(parts, ignore_index=True)
