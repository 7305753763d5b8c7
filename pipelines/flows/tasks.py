"""The plan's ``@task`` s, one stage each: traffic, real-time forecasts, demand, problem, solve, verify.

Every task gets the run's :class:`pipelines.config.settings.Settings` (and the loaded workspace where it
needs one) as parameters: nothing reads the environment or ``gpuplan.toml`` again. Tasks of one flow run
in the same process and pass in-memory values, never file paths, so nothing is cached (``NO_CACHE``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from optimizer.plan import Plan
from optimizer.problem import Cluster, Problem
from pipelines.catalog import RunCatalog
from pipelines.config.settings import Settings
from pipelines.flows import observe
from pipelines.flows.progress import Stage
from pipelines.report.forecast_plots import plot_profile
from pipelines.stages import outputs, realtime
from pipelines.stages import problem as problem_stage
from pipelines.stages import solve as solve_stage
from pipelines.stages.realtime import IngestedTraffic, RealtimeForecastFit
from pipelines.tracking import forecast_runs as forecast_runs
from pipelines.tracking import store as tracking_store
from pipelines.workspace.config import ServiceSettings
from pipelines.workspace.ingest import ingest as run_ingest
from pipelines.workspace.load import Workspace

log = observe.run_logger  # the current flow's or task's logger (INFO reaches the Prefect run page)


def cluster_shape(s: Settings) -> Cluster:
    """The planned cluster and clock of the settings (:class:`optimizer.problem.Cluster`)."""
    return Cluster(n_gpus=s.n_gpus, gpus_per_node=s.gpus_per_node, step_minutes=s.step_minutes,
                   horizon_steps=s.horizon_steps)


@task(name="ingest-sources", cache_policy=NO_CACHE)
def ingest_sources(ws: Workspace) -> dict[str, Any]:
    """:func:`pipelines.workspace.ingest.ingest`: the workspace's exports into its store (idempotent)."""
    with Stage("ingest sources"):
        return run_ingest(ws)


@task(name="ingest-traffic", cache_policy=NO_CACHE)
def ingest_traffic(services: list[ServiceSettings], raw: dict[str, pd.DataFrame]) -> IngestedTraffic:
    """:func:`pipelines.stages.realtime.ingest_traffic`: hourly UTC traffic, gaps imputed, outliers flagged."""
    with Stage("ingest traffic"):
        out = realtime.ingest_traffic(services, raw)
    for name, d in out.diagnostics.items():
        rows = out.frame[out.frame["service"] == name]
        log().info("traffic %s: %d hours %s .. %s UTC; imputed hours %d, outlier hours %d%s", name, len(rows),
                   f"{rows['ts'].min():%Y-%m-%d %H:%M}", f"{rows['ts'].max():%Y-%m-%d %H:%M}", len(d.get("imputed", [])),
                   len(d.get("outliers", [])), f"; {d['message']}" if d.get("message") else "")
    return out


@task(name="fit-profiles", cache_policy=NO_CACHE)
def fit_realtime_forecasts(services: list[ServiceSettings], traffic: pd.DataFrame, as_of: datetime,
                           diagnostics: dict | None = None) -> RealtimeForecastFit:
    """:func:`pipelines.stages.realtime.fit_realtime_forecasts`: forecasts up to ``as_of`` (chosen by backtest), last-day bands."""
    with Stage("real-time forecast"):
        fit = realtime.fit_realtime_forecasts(services, traffic, as_of, diagnostics)
    units = {svc.service: svc.units for svc in services}
    for name, m in fit.metrics.items():
        weights = ", ".join(f"{c} {v.get('weight', 0):.2f}" for c, v in fit.selection.get(name, {})
                            .get("candidates", {}).items())
        log().info("real-time %s: status %s; last day 24 h ahead: MAE %s %s, P90 coverage %.2f; weights: %s%s",
                   name, fit.status[name][0], f"{m['band_mae']:,.0f}", units.get(name, ""), m["band_p90_coverage"],
                   weights or "n/a", f" ({fit.status[name][1]})" if fit.status[name][1] else "")
    return fit


@task(name="log-profiles", retries=2, retry_delay_seconds=3, cache_policy=NO_CACHE)
def log_realtime_forecasts(settings: Settings, run: RunCatalog, fit: RealtimeForecastFit, as_of: datetime) -> list[str]:
    """Draw each service's profile plot into the run folder and log its profile run; returns the run ids.

    Retried: SQLite lock contention is transient.
    """
    ids = []
    for name, prof in fit.profiles.items():
        png = run.png_target("profile_plot", service=name)
        plot_profile(name, prof, realtime.profile_outlook(prof, as_of), fit.bands[fit.bands["service"] == name],
                     as_of, png)
        ids.append(forecast_runs.log_realtime_forecast_run(settings, name, prof, fit.metrics[name], as_of, png,
                                            selection=fit.selection.get(name)))
        log().info("real-time %s: MLflow run %s (experiment %s)", name, ids[-1], tracking_store.experiment_name(settings, "realtime"))
    return ids


@task(name="demand", cache_policy=NO_CACHE)
def demand(settings: Settings, services: list[ServiceSettings], fit: RealtimeForecastFit, traffic: pd.DataFrame,
           start: datetime) -> pd.DataFrame:
    """:func:`pipelines.stages.realtime.demand_frame`: GPU demand per service and step."""
    return realtime.demand_frame(services, fit.profiles, traffic, start, settings.step_minutes, settings.horizon_steps)


@task(name="build-problem", cache_policy=NO_CACHE)
def build_problem(settings: Settings, services: list[ServiceSettings], jobs: pd.DataFrame, demand_: pd.DataFrame,
                  start: datetime, ws: Workspace | None = None) -> Problem:
    """:func:`pipelines.stages.problem.build_problem`: the validated optimizer problem.

    With ``ws`` whose cluster is typed (:attr:`pipelines.workspace.config.ClusterConfig.typed`), the typed
    cluster (:func:`typed_cluster`) instead of the settings' shape.
    """
    cluster = cluster_shape(settings)
    names: list[str] = []
    if ws is not None and ws.cluster.typed:
        cluster, names = typed_cluster(settings, ws), ws.cluster.node_names
    for line in problem_stage.passed_deadlines(jobs, start):  # planned without a deadline: said, not hidden
        log().warning("%s before the plan start %s: planned without a deadline", line, observe.fmt_ts(start))
    return problem_stage.build_problem(cluster, services, jobs, demand_, start,
                                       time_limit_s=settings.solve_time_limit_s, node_names=names)


def typed_cluster(s: Settings, ws: Workspace) -> Cluster:
    """The workspace's typed cluster (every node with its matched type, domain and down GPUs) and the settings' clock.

    Types are the names :mod:`pipelines.workspace.gpu_types` matches (the inventory's are matched at
    ingest); a down node has all its GPUs down.
    """
    from optimizer.problem import Node
    from pipelines.workspace.gpu_types import GpuTypeTable

    table = GpuTypeTable(ws.config.gpu_types)
    nodes = [Node(name=name, gpus=spec.gpus, gpu_type=table.resolve(spec.gpu_type) or str(spec.gpu_type),
                  domain=spec.domain or "", down=tuple(range(spec.gpus)) if spec.down else ())
             for name, spec in ws.cluster.node_specs.items()]
    return Cluster(n_gpus=0, step_minutes=s.step_minutes, horizon_steps=s.horizon_steps, nodes=tuple(nodes))


@task(name="solve", cache_policy=NO_CACHE)
def solve(problem: Problem, planner: str) -> Plan:
    """:func:`pipelines.stages.solve.solve`: plan the problem with ``planner``.

    Raises:
        RuntimeError: the solver ended without any valid plan (C13 b).
    """
    with Stage(f"solve ({planner})"):
        plan = solve_stage.solve(problem, planner)
    d = plan.to_dict()
    log().info("solve (%s): status %s, plan from %s%s; objective %s, bound %s, gap %s, %.1f s; %d jobs, %d running, "
               "%d GPUs", planner, plan.status, plan.source, " (FALLBACK)" if plan.fallback else "",
               observe.fmt_value(d["objective"]), observe.fmt_value(d["bound"]),
               "n/a" if d["gap"] is None else f"{100 * d['gap']:.2f} %", plan.solve_s, len(problem.jobs),
               len(problem.running), problem.n_gpus)
    return plan


@task(name="verify", cache_policy=NO_CACHE)
def verify_plan(problem: Problem, plan: Plan) -> str:
    """:func:`pipelines.stages.solve.check_plan`: the independent verifier; returns the plan status.

    Raises:
        RuntimeError: any violation, or status ``no_solution`` (C13 b).
    """
    status = solve_stage.check_plan(problem, plan)
    log().info("verified: %d assignments, no violation; status %s", len(plan.assignments), status)
    return status


def write_realtime(run: RunCatalog, ingested: IngestedTraffic | None, fit: RealtimeForecastFit | None) -> None:
    """Write the real-time datasets (traffic, ingest diagnostics; bands, status, metrics)."""
    if ingested is not None:
        run.save("traffic", ingested.frame)
        run.save("ingest", ingested.diagnostics)
    if fit is not None:
        run.save("bands", fit.bands)
        run.save("rt_status", fit.status)
        run.save("rt_metrics", fit.metrics)


def forecasts_files(run: RunCatalog, jobs: pd.DataFrame, dem: pd.DataFrame, problem: Problem,
                    queue: pd.DataFrame) -> None:
    """Write what the plan was built from: jobs, demand, the problem, the queue table and the forecasts table."""
    run.save("jobs", jobs)
    run.save("demand", dem)
    run.save_problem(problem)
    run.save("queue", queue)
    run.save("forecasts", outputs.forecasts_table(jobs, dem))
