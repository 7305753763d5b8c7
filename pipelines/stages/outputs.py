"""Outputs stage: the plan as tables, the PLANNED metrics, the report inputs and the run summary.

The metrics here are *planned* figures over the horizon, computed from the forecasts the planner was
given; they are named ``planned_*`` where :mod:`optimizer.metrics` has a *realised* metric of the same
meaning (measured by the simulator against actual demand and durations).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from optimizer.plan import Plan
from optimizer.problem import Problem
from pipelines.report.grid import display_grid
from pipelines.report.risks import ReportInputs
from pipelines.stages.realtime import DEMAND_QUANTILE

#: Keys of :func:`planned_metrics`, in order.
PLANNED_METRICS = ("planned_utilization_pct", "planned_value", "jobs_started", "jobs_total", "planned_rt_unmet_gpu_h",
                   "planned_rt_sla_pct", "idle_gpu_h")


def node_of_gpu(n_gpus: int, gpus_per_node: int, node_names: Sequence[str] | None = None) -> list[str]:
    """The node name of each GPU index (node ``i`` holds GPUs ``i*gpus_per_node ...``); ``node-XX`` without names."""
    n_nodes = max(1, n_gpus // gpus_per_node)
    names = list(node_names) if node_names and len(node_names) == n_nodes else [f"node-{i:02d}" for i in range(n_nodes)]
    return [names[min(g // gpus_per_node, n_nodes - 1)] for g in range(n_gpus)]


def plan_tables(problem: Problem, plan: Plan, start: datetime, node_names: Sequence[str] | None = None) -> pd.DataFrame:
    """``plan.parquet`` of DESIGN §3 as one long table with a ``row_type`` column (:data:`pipelines.schemas.PLAN_TABLES`).

    - ``job``: ``job_id, kind, start_step, end_step, block_offset, gpus, running`` (None fields
      when not started in the horizon);
    - ``service_step``: ``service, step, ts, gpus``;
    - ``gpu_step``: ``step, ts, gpu, owner`` (job id, ``service:<name>``, ``down`` or ``""`` idle)
      and ``owner_type`` (``job``/``service``/``down``/``idle``); services are counted by the
      model, so they are shown on the highest GPUs left free by batch blocks.

    ``ts`` is the UTC start of the step, step 0 at ``start``. ``node`` (job and gpu_step rows) names
    the node of the GPU (a job: of its block's GPUs, ``,``-joined when the block spans nodes), from
    ``node_names`` (the workspace's ``[cluster]``).
    """
    nodes = node_of_gpu(problem.cluster.n_gpus, problem.cluster.gpus_per_node, node_names)
    step = pd.Timedelta(minutes=problem.cluster.step_minutes)
    t0 = pd.Timestamp(start)
    kinds = {j.job_id: j.kind for j in problem.jobs} | {r.job_id: r.kind for r in problem.running}
    rows: list[dict[str, Any]] = []
    for a in plan.assignments:
        rows.append({"row_type": "job", "job_id": a.job_id, "kind": kinds.get(a.job_id, ""),
                     "start_step": a.start_step, "end_step": a.end_step, "block_offset": a.block_offset,
                     "gpus": a.gpus, "running": a.running,
                     "node": None if a.block_offset is None else
                     ",".join(dict.fromkeys(nodes[a.block_offset:a.block_offset + a.gpus]))})
    for svc, gpus in plan.service_gpus.items():
        for t, g in enumerate(gpus):
            rows.append({"row_type": "service_step", "service": svc, "step": t, "ts": t0 + t * step, "gpus": int(g)})
    for t, row in enumerate(display_grid(problem, plan)):
        for g, owner in enumerate(row):
            otype = ("idle" if not owner else "service" if owner.startswith("service:")
                     else "down" if owner == "down" else "job")
            rows.append({"row_type": "gpu_step", "step": t, "ts": t0 + t * step, "gpu": g, "owner": owner,
                         "owner_type": otype, "node": nodes[g]})
    df = pd.DataFrame(rows)
    for col in ("start_step", "end_step", "block_offset", "gpus", "step", "gpu"):
        df[col] = df[col].astype("Int64")
    df["running"] = df["running"].astype("boolean")
    df["ts"] = pd.to_datetime(df["ts"], utc=True)
    for col in ("job_id", "kind", "service", "owner", "owner_type", "node"):
        df[col] = df[col].astype("str").where(df[col].notna(), None)
    return df


def planned_metrics(problem: Problem, plan: Plan, demand: pd.DataFrame) -> dict[str, float]:
    """Planned figures of the DESIGN §6.3 metrics over the horizon (forecasts, not actuals).

    ``planned_utilization_pct`` = 100 × (batch GPU-h + Σ min(planned, P50 demand) GPU-h) / (N × horizon h);
    ``planned_value`` = Σ over planned batch GPU-hours inside the horizon of the job's priority;
    ``planned_rt_unmet_gpu_h`` and ``planned_rt_sla_pct`` against the P90 demand the planner was given;
    ``jobs_started`` (queued jobs given a start) / ``jobs_total`` (queued jobs); ``idle_gpu_h``
    (GPU-hours planned for neither). N is the GPUs up: the cluster's minus its ``down_gpus``.
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
        p90 = d[f"demand_gpus_{DEMAND_QUANTILE}"].to_numpy(float)[:H]
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
    }


def demand_from_problem(problem: Problem) -> pd.DataFrame:
    """Demand rows of a given problem file (no forecasts): its demand as both P50 and P90."""
    return pd.DataFrame([{"service": s.service, "step": t, "demand_gpus_p50": d, "demand_gpus_p90": d}
                         for s in problem.services for t, d in enumerate(s.demand_gpus)])


def jobs_from_problem(problem: Problem) -> pd.DataFrame:
    """Job rows of a given problem file (no forecasts): queued, P90 duration = the planned duration."""
    return pd.DataFrame([{"job_id": j.job_id, "kind": j.kind, "priority": j.priority, "state": "queued",
                          "duration_p90_h": j.requested.duration_steps * problem.cluster.step_minutes / 60}
                         for j in problem.jobs])


def report_inputs(problem: Problem, plan: Plan, start: datetime, jobs: pd.DataFrame | None = None,
                  demand: pd.DataFrame | None = None, bands: pd.DataFrame | None = None,
                  rt_status: Mapping[str, Sequence[str]] | None = None) -> ReportInputs:
    """The risk report's inputs (:class:`pipelines.report.ReportInputs`).

    Without forecasts (a plan of a given problem file) the report uses the problem's demand as both
    quantiles (:func:`demand_from_problem`), its jobs (:func:`jobs_from_problem`), no
    forecast-against-actual band and the status ``given`` for every service.
    """
    status = ({k: (str(v[0]), str(v[1])) for k, v in rt_status.items()} if rt_status is not None else
              {s.service: ("given", "demand from the problem file") for s in problem.services})
    return ReportInputs(problem=problem, plan=plan, start_ts=start,
                        jobs=jobs if jobs is not None else jobs_from_problem(problem),
                        demand=demand if demand is not None else demand_from_problem(problem),
                        bands=bands, rt_status=status, time_limit_s=problem.settings.time_limit_s)


def summary(run_name: str, start: datetime, problem: Problem, plan: Plan, demand: pd.DataFrame,
            rt_status: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """``summary.json`` of a run.

    Plan start, planner, status, objective, bound, gap, solve time,
    model size, violations, real-time profile status and :func:`planned_metrics` (key ``metrics``).
    """
    doc = plan.to_dict()  # non-finite objective/bound/gap are null there: summary.json stays strict JSON
    return {"run": run_name, "plan_start": start.isoformat(), "planner": plan.planner, "status": plan.status,
            "source": None if plan.source is None else str(plan.source),
            "proven_optimal": plan.proven_optimal, "fallback": plan.fallback,
            "objective": doc["objective"], "bound": doc["bound"], "mip_gap": doc["gap"], "solve_s": plan.solve_s,
            "model": plan.model, "violations": list(plan.violations), "rt_status": {k: list(v) for k, v in rt_status.items()},
            "metrics": planned_metrics(problem, plan, demand)}


def forecasts_table(jobs: pd.DataFrame, demand: pd.DataFrame) -> pd.DataFrame:
    """``forecasts.parquet`` of DESIGN §3 (:data:`pipelines.schemas.FORECASTS`).

    One row per job
    (``entity = job``) and one per service and step (``entity = service_step``).
    """
    fj = jobs[["job_id", "kind", "duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred"]].assign(
        entity="job")
    fs = demand[["service", "step", "ts", "traffic_p50", "traffic_p90", "demand_gpus_p50", "demand_gpus_p90"]].assign(
        entity="service_step")
    return pd.concat([fj, fs], ignore_index=True)
