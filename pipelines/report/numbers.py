"""The numbers an operator looks for first: planned metrics and the risk report's headline.

:func:`planned_metrics` (the planned figures of DESIGN §6.3, ``summary.json``'s ``metrics``) and
:func:`headline` (the page's first table and ``summary.json``'s ``headline``, a plain JSON-ready dict
that the Prefect summary artifact is built from).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from pipelines.report.basics import ReportInputs, clock, step_ts
from pipelines.report.calibration import calibrate
from pipelines.report.risks import build_report_table
from pipelines.report.waits import type_utilization

#: Keys of :func:`planned_metrics`, in order.
PLANNED_METRICS = ("planned_utilization_pct", "planned_value", "jobs_started", "jobs_total", "planned_rt_unmet_gpu_h",
                   "planned_rt_sla_pct", "idle_gpu_h", "rt_margin_gpu_h")


def planned_metrics(problem: Any, plan: Any, demand: pd.DataFrame) -> dict[str, float]:
    """Planned figures of the DESIGN §6.3 metrics over the horizon (forecasts, not actuals).

    ``planned_utilization_pct`` = 100 × (batch GPU-h + Σ min(planned, P50 demand) GPU-h) / (N × horizon h);
    ``planned_value`` = Σ over planned batch GPU-hours inside the horizon of the job's priority;
    ``planned_rt_unmet_gpu_h`` and ``planned_rt_sla_pct`` against the P90 demand the planner was given
    (``demand``'s ``demand_gpus_p90``); ``jobs_started`` (queued jobs given a start) / ``jobs_total``
    (queued jobs); ``idle_gpu_h`` (GPU-hours planned for neither); ``rt_margin_gpu_h`` = Σ max(planned −
    P50 demand, 0) GPU-h, the real-time GPUs planned above the P50 demand (the margin toward the P90). N is the
    GPUs up: the cluster's minus its ``down_gpus``; utilisation × N × horizon + ``rt_margin_gpu_h`` +
    ``idle_gpu_h`` = N × horizon GPU-h.
    """
    H, N = problem.horizon_steps, problem.n_gpus - len(problem.down_gpus)
    step_h = problem.cluster.step_minutes / 60.0
    prio = {j.job_id: j.priority for j in problem.jobs} | {r.job_id: r.priority for r in problem.running}
    batch_h = value = 0.0
    for a in plan.assignments:
        if a.start_step is None:
            continue
        steps = max(0, min(H, a.end_step) - a.start_step)
        batch_h += a.gpus * steps * step_h
        value += prio.get(a.job_id, 0.0) * a.gpus * steps * step_h
    served_h = unmet_h = dem_h = 0.0
    for svc, gpus in plan.service_gpus.items():
        d = demand[demand["service"] == svc].sort_values("step")
        p50 = d["demand_gpus_p50"].to_numpy(float)[:H]
        p90 = d["demand_gpus_p90"].to_numpy(float)[:H]
        a = np.asarray(gpus[:H], dtype=float)
        served_h += float(np.minimum(a, p50).sum()) * step_h
        unmet_h += float(np.maximum(p90 - a, 0).sum()) * step_h
        dem_h += float(p90.sum()) * step_h
    rt_h = sum(float(np.sum(g[:H])) for g in plan.service_gpus.values()) * step_h
    started = sum(1 for a in plan.assignments if a.start_step is not None and not a.running)
    return {
        "planned_utilization_pct": 100.0 * (batch_h + served_h) / (N * H * step_h),
        "planned_value": value,
        "jobs_started": float(started),
        "jobs_total": float(len(problem.jobs)),
        "planned_rt_unmet_gpu_h": unmet_h,
        "planned_rt_sla_pct": 100.0 * (1 - unmet_h / dem_h) if dem_h > 0 else 100.0,
        "idle_gpu_h": N * H * step_h - batch_h - rt_h,
        "rt_margin_gpu_h": rt_h - served_h,
    }


def _covered_pct(plan: Any, demand: pd.DataFrame, col: str, H: int) -> float:
    """100 × Σ min(planned, demand) / Σ demand over services and steps (100 without demand)."""
    got = tot = 0.0
    for svc, gpus in plan.service_gpus.items():
        d = demand[demand["service"] == svc].sort_values("step")[col].to_numpy(float)[:H]
        a = np.asarray(gpus[:len(d)], dtype=float)
        got += float(np.minimum(a, d).sum())
        tot += float(d.sum())
    return 100.0 * got / tot if tot > 0 else 100.0


def _newest_inputs(inp: ReportInputs) -> dict[str, pd.Timestamp]:
    """Newest time of each input the report can see: traffic hour (bands) and job submission."""
    out: dict[str, pd.Timestamp] = {}
    if inp.bands is not None and len(inp.bands):
        out["traffic_hour"] = pd.Timestamp(pd.to_datetime(inp.bands["ts"], utc=True).max())
    if "submitted_at" in inp.jobs.columns and inp.jobs["submitted_at"].notna().any():
        out["job_submitted"] = pd.Timestamp(pd.to_datetime(inp.jobs["submitted_at"], utc=True).max())
    return out


def _models(inp: ReportInputs) -> dict[str, Any]:
    """Which models forecast: job forecasters (name, version, alias) and each service's real-time method."""
    jobs = {}
    for kind, m in (inp.models or {}).items():
        if isinstance(m, dict):
            jobs[kind] = {k: m.get(k) for k in ("name", "version", "alias", "note") if m.get(k) is not None}
    rt = {}
    for svc in inp.service_names():
        sel = inp.rt_selection.get(svc) or {}
        weights = {c: round(float(v.get("weight", 0.0)), 3) for c, v in (sel.get("candidates") or {}).items()
                   if float(v.get("weight", 0.0)) > 0}
        status = inp.rt_status.get(svc, ("", ""))[0]
        rt[svc] = {"rule": sel.get("rule"), "weights": weights, "status": status} if sel else {"status": status}
    return {"jobs": jobs, "realtime": rt}


def headline(inp: ReportInputs, table: pd.DataFrame | None = None, calibration: list[Any] | None = None,
             now: datetime | None = None) -> dict[str, Any]:
    """The page's headline as a plain JSON-ready dict (also ``summary.json``'s ``headline``).

    Args:
        inp: the report's inputs.
        table: :func:`pipelines.report.build_report_table` of ``inp`` (built when None).
        calibration: :func:`pipelines.report.calibration.calibrate` of ``inp`` (computed when None).
        now: the time the input age is measured at (default ``inp.written_at``, else the wall clock).

    Keys: ``plan_start`` (ISO UTC), ``horizon_h``, ``n_gpus``, ``planned_utilization_pct``,
    ``rt_covered_p50_pct`` / ``rt_covered_p90_pct`` (planned GPU-hours over demand GPU-hours, capped
    per step), ``rt_services`` (per service: ``recent_p90_coverage``, ``recent_hours``,
    ``hours_above_p90``, ``below_target``, ``max_p_exceed``, ``expected_h_over_plan``),
    ``rt_coverage_target``, ``rt_below_target`` (services flagged), ``jobs_queued``,
    ``jobs_start_now`` (at step 0), ``jobs_start_later``, ``jobs_waiting`` (not started in the
    horizon), ``jobs_at_risk``, ``idle_gpu_h``, ``rt_margin_gpu_h`` (real-time GPU-h planned above the P50
    demand), ``up_gpu_h`` (GPUs up × horizon hours: the utilisation's denominator), ``idle_windows`` (count, rule
    :func:`pipelines.report.risks.idle_windows`), ``idle_window_gpu_h``, ``inputs`` (per input, ``traffic_hour`` and
    ``job_submitted``: its newest time ``ts`` and its age in hours at the plan start and now),
    ``newest_input`` (``{"what", "ts"}``, the newest of them) with ``input_age_h_at_plan_start`` and
    ``input_age_h_now``, ``models`` (``{"jobs": kind -> {name, version, alias}, "realtime": service ->
    {rule, weights, status}}``), ``horizon_end``; on a typed cluster also ``gpu_types``: per GPU type in layout
    order ``{"gpu_type", "gpus" (up), "batch_gpu_h", "batch_utilization_pct"}`` (the plan's batch GPU-hours on
    that type's GPUs over the horizon, :func:`pipelines.report.waits.type_utilization`; real-time is not placed
    by type), absent on an untyped one.
    """
    problem, plan = inp.problem, inp.plan
    H = problem.horizon_steps
    cal = calibration if calibration is not None else calibrate(inp)
    if table is None:
        table = build_report_table(inp)
    metrics = planned_metrics(problem, plan, inp.demand)
    starts = [plan.job(j.job_id).start_step for j in problem.jobs]
    risk = table[table["section"] == "job_at_risk"]
    idle = table[table["section"] == "idle_window"]
    newest = _newest_inputs(inp)
    what, ts = (max(newest.items(), key=lambda kv: kv[1]) if newest else (None, None))
    now_ts = pd.Timestamp(now or inp.written_at or datetime.now(UTC))
    start = pd.Timestamp(inp.start_ts)
    rt_services = {c.service: {
        "recent_p90_coverage": None if c.coverage is None else round(float(c.coverage), 4),
        "recent_hours": c.hours, "hours_above_p90": c.above_h, "below_target": bool(c.flagged),
        "max_p_exceed": round(float(np.max(c.exceed)) if len(c.exceed) else 0.0, 4),
        "expected_h_over_plan": round(c.expected_hours_over(inp.step_h), 2), "method": c.method} for c in cal}
    out = {
        "plan_start": start.isoformat(),
        "horizon_h": H * inp.step_h,
        "n_gpus": int(problem.n_gpus),
        "planned_utilization_pct": round(metrics["planned_utilization_pct"], 2),
        "rt_covered_p50_pct": round(_covered_pct(plan, inp.demand, "demand_gpus_p50", H), 2),
        "rt_covered_p90_pct": round(_covered_pct(plan, inp.demand, "demand_gpus_p90", H), 2),
        "rt_coverage_target": cal[0].target if cal else None,
        "rt_services": rt_services,
        "rt_below_target": [c.service for c in cal if c.flagged],
        "jobs_queued": len(problem.jobs),
        "jobs_start_now": sum(1 for s in starts if s == 0),
        "jobs_start_later": sum(1 for s in starts if s is not None and s > 0),
        "jobs_waiting": sum(1 for s in starts if s is None),
        "jobs_at_risk": int(risk["job_id"].nunique()),
        "jobs_running": len(problem.running),
        "idle_gpu_h": round(metrics["idle_gpu_h"], 2),
        "rt_margin_gpu_h": round(metrics["rt_margin_gpu_h"], 2),
        "up_gpu_h": round((problem.n_gpus - len(problem.down_gpus)) * H * inp.step_h, 2),
        "idle_windows": len(idle),
        "idle_window_gpu_h": round(float(idle["value"].sum()), 2) if len(idle) else 0.0,
        "inputs": {k: {"ts": clock(v), "age_h_at_plan_start": round((start - v) / pd.Timedelta(hours=1), 2),
                       "age_h_now": round((now_ts - v) / pd.Timedelta(hours=1), 2)} for k, v in newest.items()},
        "newest_input": None if ts is None else {"what": what, "ts": clock(ts)},
        "input_age_h_at_plan_start": None if ts is None else round((start - ts) / pd.Timedelta(hours=1), 2),
        "input_age_h_now": None if ts is None else round((now_ts - ts) / pd.Timedelta(hours=1), 2),
        "models": _models(inp),
        "horizon_end": clock(step_ts(inp, H)),
    }
    types = type_utilization(inp)
    if types:
        out["gpu_types"] = [{"gpu_type": ty, "gpus": n, "batch_gpu_h": round(h, 2),
                             "batch_utilization_pct": round(100 * h / (n * H * inp.step_h), 2) if n else None}
                            for ty, n, h in types]
    return out
