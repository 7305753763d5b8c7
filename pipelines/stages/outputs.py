"""Outputs stage: the plan as tables, the PLANNED metrics, the report inputs and the run summary.

The metrics here are *planned* figures over the horizon, computed from the forecasts the planner was
given; they are named ``planned_*`` where :mod:`optimizer.metrics` has a *realised* metric of the same
meaning (measured by the simulator against actual demand and durations).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from optimizer.plan import Plan
from optimizer.problem import Problem
from pipelines.report.grid import display_grid
from pipelines.report.numbers import PLANNED_METRICS, headline, planned_metrics
from pipelines.report.risks import ReportInputs, build_report_table
from pipelines.report.stops import stop_records

__all__ = ["PLANNED_METRICS", "demand_from_problem", "forecasts_table", "gpu_nodes", "jobs_from_problem",
           "node_of_gpu", "plan_tables", "planned_metrics", "report_inputs", "running_nodes", "summary"]

def node_of_gpu(n_gpus: int, gpus_per_node: int, node_names: Sequence[str] | None = None) -> list[str]:
    """The node name of each GPU index (node ``i`` holds GPUs ``i*gpus_per_node ...``); ``node-XX`` without names."""
    n_nodes = max(1, n_gpus // gpus_per_node)
    names = list(node_names) if node_names and len(node_names) == n_nodes else [f"node-{i:02d}" for i in range(n_nodes)]
    return [names[min(g // gpus_per_node, n_nodes - 1)] for g in range(n_gpus)]


def gpu_nodes(problem: Problem, node_names: Sequence[str] | None = None) -> list[str]:
    """The node name of each of the problem's GPUs, ``(n_gpus,)``.

    The typed layout's (``padding`` past the last node), else :func:`node_of_gpu` of ``node_names``.
    """
    c = problem.cluster
    if c.typed:  # the typed layout (largest node first, padded to a power of two)
        return [c.nodes[k].name if k is not None else "padding" for k in (c.node_of(g) for g in range(c.n_gpus))]
    return node_of_gpu(c.n_gpus, c.gpus_per_node, node_names)


def running_nodes(problem: Problem, node_names: Sequence[str] | None = None) -> dict[str, str]:
    """Running job id -> the nodes of the GPU block it holds in the problem (``,``-joined, in GPU order).

    What a stop frees (issue 30): the stopped job's block as the problem holds it (:func:`gpu_nodes`).
    """
    nodes = gpu_nodes(problem, node_names)
    return {r.job_id: ",".join(dict.fromkeys(nodes[r.block_offset:r.block_offset + r.gpus])) for r in problem.running}


def plan_tables(problem: Problem, plan: Plan, start: datetime, node_names: Sequence[str] | None = None) -> pd.DataFrame:
    """``plan.parquet`` of DESIGN §3 as one long table with a ``row_type`` column (:data:`pipelines.io.schemas.PLAN_TABLES`).

    - ``job``: ``job_id, kind, start_step, end_step, block_offset, gpus, running`` (None fields
      when not started in the horizon);
    - ``service_step``: ``service, step, ts, gpus``;
    - ``gpu_step``: ``step, ts, gpu, owner`` (job id, ``service:<name>``, ``down`` or ``""`` idle)
      and ``owner_type`` (``job``/``service``/``down``/``idle``); services are on the GPUs of
      the core's GPU-level plan, the one the verifier checks against each swap cap
      (:func:`pipelines.report.grid.display_grid`, :func:`optimizer.placement.service_placement`).

    ``ts`` is the UTC start of the step, step 0 at ``start``. ``node`` (job and gpu_step rows) names
    the node of the GPU (a job: of its block's GPUs, ``,``-joined when the block spans nodes), from
    ``node_names`` (the workspace's ``[cluster]``). On a typed cluster (problem version 2) ``node`` is the
    node of the problem's layout (``padding`` for a GPU past the last node) and ``gpu_type`` (job and
    gpu_step rows) its type.
    """
    c = problem.cluster
    types: list[str] | None = None
    nodes = gpu_nodes(problem, node_names)
    if c.typed:  # the typed layout (largest node first, padded to a power of two): its type per GPU
        types = [c.nodes[k].gpu_type if k is not None else "" for k in (c.node_of(g) for g in range(c.n_gpus))]
    step = pd.Timedelta(minutes=problem.cluster.step_minutes)
    t0 = pd.Timestamp(start)
    kinds = {j.job_id: j.kind for j in problem.jobs} | {r.job_id: r.kind for r in problem.running}
    rows: list[dict[str, Any]] = []
    for a in plan.assignments:
        rows.append({"row_type": "job", "job_id": a.job_id, "kind": kinds.get(a.job_id, ""),
                     "start_step": a.start_step, "end_step": a.end_step, "block_offset": a.block_offset,
                     "gpus": a.gpus, "running": a.running,
                     "node": None if a.block_offset is None else
                     ",".join(dict.fromkeys(nodes[a.block_offset:a.block_offset + a.gpus])),
                     **({} if types is None else {"gpu_type": None if a.block_offset is None else
                                                  ",".join(dict.fromkeys(types[a.block_offset:a.block_offset + a.gpus]))})})
    for svc, gpus in plan.service_gpus.items():
        for t, g in enumerate(gpus):
            rows.append({"row_type": "service_step", "service": svc, "step": t, "ts": t0 + t * step, "gpus": int(g)})
    for t, row in enumerate(display_grid(problem, plan)):
        for g, owner in enumerate(row):
            otype = ("idle" if not owner else "service" if owner.startswith("service:")
                     else "down" if owner == "down" else "job")
            rows.append({"row_type": "gpu_step", "step": t, "ts": t0 + t * step, "gpu": g, "owner": owner,
                         "owner_type": otype, "node": nodes[g], **({} if types is None else {"gpu_type": types[g]})})
    df = pd.DataFrame(rows)
    for col in ("job_id", "kind", "start_step", "end_step", "block_offset", "gpus", "running", "service", "owner",
                "owner_type", "node"):
        if col not in df:  # a plan with no job (or no service) rows still has every column
            df[col] = None
    for col in ("start_step", "end_step", "block_offset", "gpus", "step", "gpu"):
        df[col] = df[col].astype("Int64")
    df["running"] = df["running"].astype("boolean")
    df["ts"] = pd.to_datetime(df["ts"], utc=True)
    for col in ("job_id", "kind", "service", "owner", "owner_type", "node") + (("gpu_type",) if types else ()):
        df[col] = df[col].astype("str").where(df[col].notna(), None)
    return df


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
                  rt_status: Mapping[str, Sequence[str]] | None = None, *, services: Sequence[Any] = (),
                  rt_selection: Mapping[str, Mapping[str, Any]] | None = None,
                  models: Mapping[str, Any] | None = None, node_names: Sequence[str] | None = None,
                  written_at: datetime | None = None,
                  unplannable: Sequence[tuple[str, str]] = ()) -> ReportInputs:
    """The risk report's inputs (:class:`pipelines.report.ReportInputs`).

    Without forecasts (a plan of a given problem file) the report uses the problem's demand as both
    quantiles (:func:`demand_from_problem`), its jobs (:func:`jobs_from_problem`), no
    forecast-against-actual band and the status ``given`` for every service.

    Keyword arguments (all optional): ``services`` (the :class:`pipelines.workspace.config.ServiceSettings`:
    hour bands on each service's clock and the measured P(demand > plan)), ``rt_selection``
    (:attr:`pipelines.stages.realtime.RealtimeForecastFit.selection`), ``models`` (the job forecasters' versions,
    ``summary.json``'s ``models``), ``node_names`` (the cluster's), ``written_at`` (default now, UTC),
    ``unplannable`` (:attr:`pipelines.report.ReportInputs.unplannable`).
    """
    status = ({k: (str(v[0]), str(v[1])) for k, v in rt_status.items()} if rt_status is not None else
              {s.service: ("given", "demand from the problem file") for s in problem.services})
    return ReportInputs(problem=problem, plan=plan, start_ts=start,
                        jobs=jobs if jobs is not None else jobs_from_problem(problem),
                        demand=demand if demand is not None else demand_from_problem(problem),
                        bands=bands, rt_status=status, time_limit_s=problem.settings.time_limit_s,
                        services=tuple(services), rt_selection=dict(rt_selection or {}), models=models,
                        node_names=None if node_names is None else list(node_names),
                        written_at=written_at or datetime.now(UTC), unplannable=tuple(unplannable))


def summary(run_name: str, start: datetime, problem: Problem, plan: Plan, demand: pd.DataFrame,
            rt_status: Mapping[str, Sequence[str]], report: ReportInputs | None = None,
            report_table: pd.DataFrame | None = None) -> dict[str, Any]:
    """``summary.json`` of a run.

    Plan start, planner, status, objective, bound, gap, solve time,
    model size, violations, real-time profile status and :func:`planned_metrics` (key ``metrics``);
    with ``report`` (the risk report's inputs) also the report's headline (key ``headline``,
    :func:`pipelines.report.headline`) from ``report_table`` (the run's
    :func:`pipelines.report.risks.build_report_table` of ``report``; built here when None). Always ``stops``
    (issue 30): the running jobs the plan stops at step 0 (:func:`pipelines.report.stops.stop_records`: job, kind,
    priority, GPUs, lost steps, ``lost_gpu_h``, shortfall, reason), ``[]`` when none.
    """
    doc = plan.to_dict()  # non-finite objective/bound/gap are null there: summary.json stays strict JSON
    out = {"run": run_name, "plan_start": start.isoformat(), "planner": plan.planner, "status": plan.status,
           "source": None if plan.source is None else str(plan.source),
           "proven_optimal": plan.proven_optimal, "fallback": plan.fallback,
           "objective": doc["objective"], "bound": doc["bound"], "mip_gap": doc["gap"], "solve_s": plan.solve_s,
           "model": plan.model, "violations": list(plan.violations), "rt_status": {k: list(v) for k, v in rt_status.items()},
           "metrics": planned_metrics(problem, plan, demand)}
    if report is not None:
        table = build_report_table(report) if report_table is None else report_table
        out["headline"] = headline(report, table)
        out["stops"] = stop_records(report, table)
    else:
        out["stops"] = stop_records(report_inputs(problem, plan, start, demand=demand))
    return out


def forecasts_table(jobs: pd.DataFrame, demand: pd.DataFrame) -> pd.DataFrame:
    """``forecasts.parquet`` of DESIGN §3 (:data:`pipelines.io.schemas.FORECASTS`).

    One row per job
    (``entity = job``) and one per service and step (``entity = service_step``).
    """
    fj = jobs[["job_id", "kind", "duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred"]].assign(
        entity="job")
    fs = demand[["service", "step", "ts", "traffic_p50", "traffic_p90", "demand_gpus_p50", "demand_gpus_p90"]].assign(
        entity="service_step")
    return pd.concat([fj, fs], ignore_index=True)
