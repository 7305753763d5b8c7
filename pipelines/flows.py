"""Prefect 3 flows: ``train_forecasters``, ``plan``, ``benchmark``, ``run_all`` and ``whatif`` (DESIGN §7).

Each flow does read -> stage -> write -> track and nothing else:

- **read** and **write** through :mod:`pipelines.catalog` (shipped data, model store, run folder);
- **stages** are the plain functions of :mod:`pipelines.stages`, one per ``@task``; tasks of one flow
  run in the same process and pass in-memory values (frames, profiles, models, the validated
  ``Problem`` and ``Plan``), never file paths, so nothing is cached (``NO_CACHE``);
- **track** with :mod:`pipelines.tracking` (MLflow).

Conventions (``docs/STACK.md`` and Prefect's own examples):

- Tasks that can hang carry ``timeout_seconds`` (case C26): the solve, and the nightly training
  (run one after the other in the flow's thread). HiGHS has its own time limit; the task timeout
  (``Settings.solve_timeout_s``, larger) is the guard for anything else that hangs. A timed-out task
  fails its flow run (state Failed, never Running). Prefect enforces a sync task's timeout with
  SIGALRM when the flow runs in the main thread (a sleep or a blocking call is interrupted); in a
  worker thread it can only inject an exception between Python bytecodes, so flows carry no
  flow-level timeout (it would move them off the main thread) and the parallel training inside
  ``run_all`` has none.
- Retries only on steps whose failure is transient: MLflow logging (SQLite "database is locked").
  Training, solving and verifying are deterministic and never retried.
- The MLflow store is initialised once, before any fan-out (:func:`pipelines.tracking.store.init_store`).
- Outputs are built in a temporary run folder and published atomically with a ``latest`` pointer
  (:mod:`pipelines.io.run_folder`); a failed or killed run leaves the previous one intact.
- The run shows what it did (:mod:`pipelines.observe`): flows and tasks log at INFO through Prefect's run
  logger (run folder, status, objective, headline numbers, the age of the inputs; the terminal shows only
  warnings), each plan publishes a markdown summary and a table of estimated starts, each retraining a
  table of metrics against baselines with the champion version (Prefect artifacts).

Settings come from :func:`pipelines.config.load_settings` (environment) in every flow and task, so a
served deployment and the tests configure paths and the tracking URI through the environment.

(Over 400 lines on purpose: one small documented ``@task`` per stage next to the four flows that wire
them, so each flow reads in one place; the work itself is in the stages.)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.config import Settings, apply_env_defaults, load_settings

apply_env_defaults()  # before prefect is imported (config.py)

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.runtime import flow_run  # noqa: E402

from domain.kinds import JOB_KINDS  # noqa: E402
from optimizer.plan import Plan  # noqa: E402
from optimizer.problem import Problem  # noqa: E402
from pipelines import bench, model_store, observe, scheduler_models  # noqa: E402
from pipelines.catalog import Catalog, RunCatalog, read_problem_file  # noqa: E402
from pipelines.errors import InputError  # noqa: E402
from pipelines.io.run_folder import LATEST, RunFolder  # noqa: E402
from pipelines.io.slots import slot_start  # noqa: E402
from pipelines.report import build_report_table, write_risk_report  # noqa: E402
from pipelines.report.forecast_plots import plot_profile  # noqa: E402
from pipelines.schedules import claim_local_day, local_day  # noqa: E402
from pipelines.stages import cluster as cluster_stage  # noqa: E402
from pipelines.stages import commands as commands_stage  # noqa: E402
from pipelines.stages import models as model_stage  # noqa: E402
from pipelines.stages import outputs, realtime  # noqa: E402
from pipelines.stages import problem as problem_stage  # noqa: E402
from pipelines.stages import queue as queue_stage  # noqa: E402
from pipelines.stages import solve as solve_stage  # noqa: E402
from pipelines.stages.problem import ClusterShape  # noqa: E402
from pipelines.stages.realtime import IngestedTraffic, ProfileFit  # noqa: E402
from pipelines.tracking import forecast_runs  # noqa: E402
from pipelines.tracking import models as tracking_models  # noqa: E402
from pipelines.tracking import runs as tracking_runs  # noqa: E402
from pipelines.tracking import store as tracking_store  # noqa: E402
from pipelines.workspace.config import ServiceSettings  # noqa: E402
from pipelines.workspace.ingest import WorkspaceData, read_source, workspace_data  # noqa: E402
from pipelines.workspace.ingest import ingest as run_ingest  # noqa: E402
from pipelines.workspace.load import Workspace, load_workspace  # noqa: E402

log = observe.run_logger  # the current flow's or task's logger (INFO reaches the Prefect run page)

# ---------------------------------------------------------------- progress hook

ProgressHook = Callable[[str, str], None]
_progress: ProgressHook | None = None


def set_progress(hook: ProgressHook | None) -> None:
    """Install a callback ``hook(stage, event)`` (event ``start``/``done``/``failed``) used by the CLI's bars."""
    global _progress
    _progress = hook


class _Stage:
    """Report a stage's start and end to the progress hook."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        if _progress is not None:
            _progress(self.name, "start")

    def __exit__(self, *exc: object) -> None:
        if _progress is not None:
            _progress(self.name, "done" if exc[0] is None else "failed")


def cluster_shape(s: Settings) -> ClusterShape:
    """The planned cluster and solver budget of the settings."""
    return ClusterShape(n_gpus=s.n_gpus, gpus_per_node=s.gpus_per_node, step_minutes=s.step_minutes,
                        horizon_steps=s.horizon_steps, time_limit_s=s.solve_time_limit_s)


@dataclass(frozen=True)
class Forecasts:
    """What the forecasting tasks hand to the plan and the outputs (all in memory)."""

    jobs: pd.DataFrame
    demand: pd.DataFrame
    fit: ProfileFit
    users: dict[str, str] | None = None  # an operator's workspace: job id -> user (commands file)


# ---------------------------------------------------------------- tasks (one stage each)


@task(name="ingest-traffic", cache_policy=NO_CACHE)
def ingest_traffic(services: list[ServiceSettings], raw: dict[str, pd.DataFrame]) -> IngestedTraffic:
    """:func:`pipelines.stages.realtime.ingest_traffic`: hourly UTC traffic, gaps imputed, outliers flagged."""
    with _Stage("ingest traffic"):
        out = realtime.ingest_traffic(services, raw)
    for name, d in out.diagnostics.items():
        rows = out.frame[out.frame["service"] == name]
        log().info("traffic %s: %d hours %s .. %s UTC; imputed hours %d, outlier hours %d%s", name, len(rows),
                   f"{rows['ts'].min():%Y-%m-%d %H:%M}", f"{rows['ts'].max():%Y-%m-%d %H:%M}", len(d.get("imputed", [])),
                   len(d.get("outliers", [])), f"; {d['message']}" if d.get("message") else "")
    return out


@task(name="train-or-load", cache_policy=NO_CACHE)
def train_or_load(kind: str, retrain: bool = False) -> Any:
    """:func:`pipelines.model_store.train_or_load`: the current ``kind`` forecaster.

    Trained, saved and logged to MLflow when missing or ``retrain``.
    """
    s = load_settings()
    with _Stage(f"forecaster {kind}"):
        model = model_store.train_or_load(s, kind, retrain=retrain, notify=log().info)
    v = model_store.model_version(s, kind)
    log().info("%s forecaster: %s version %s (alias %s, MLflow run %s)", kind, v.get("name"), v.get("version"),
               v.get("alias"), v.get("run_id"))
    return model


@task(name="fit-profiles", cache_policy=NO_CACHE)
def fit_profiles(services: list[ServiceSettings], traffic: pd.DataFrame, as_of: datetime,
                 diagnostics: dict | None = None) -> ProfileFit:
    """:func:`pipelines.stages.realtime.fit_profiles`: forecasts up to ``as_of`` (chosen by backtest), last-day bands."""
    with _Stage("real-time profiles"):
        fit = realtime.fit_profiles(services, traffic, as_of, diagnostics)
    units = {svc.service: svc.units for svc in services}
    for name, m in fit.metrics.items():
        weights = ", ".join(f"{c} {v.get('weight', 0):.2f}" for c, v in fit.selection.get(name, {})
                            .get("candidates", {}).items())
        log().info("real-time %s: status %s; last day 24 h ahead: MAE %s %s, P90 coverage %.2f; weights: %s%s",
                   name, fit.status[name][0], f"{m['band_mae']:,.0f}", units.get(name, ""), m["band_p90_coverage"],
                   weights or "n/a", f" ({fit.status[name][1]})" if fit.status[name][1] else "")
    return fit


@task(name="log-profiles", retries=2, retry_delay_seconds=3, cache_policy=NO_CACHE)
def log_profiles(run: RunCatalog, fit: ProfileFit, as_of: datetime) -> list[str]:
    """Draw each service's profile plot into the run folder and log its profile run; returns the run ids.

    Retried: SQLite lock contention is transient.
    """
    s = load_settings()
    ids = []
    for name, prof in fit.profiles.items():
        png = run.png_target("profile_plot", service=name)
        plot_profile(name, prof, realtime.profile_outlook(prof, as_of), fit.bands[fit.bands["service"] == name],
                     as_of, png)
        ids.append(forecast_runs.log_profile_run(s, name, prof, fit.metrics[name], as_of, png,
                                            selection=fit.selection.get(name)))
        log().info("real-time %s: MLflow run %s (experiment %s)", name, ids[-1], tracking_store.EXPERIMENTS["realtime"])
    return ids


@task(name="build-queue", cache_policy=NO_CACHE)
def build_queue(pods: pd.DataFrame, start: datetime) -> dict[str, pd.DataFrame]:
    """:func:`pipelines.stages.queue.build_queue`: real-trace pods + generated LLM jobs at ``start``."""
    return queue_stage.build_queue(pods, load_settings().seed, start)


@task(name="forecast-jobs", cache_policy=NO_CACHE)
def forecast_jobs(models: dict[str, Any], queue: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """:func:`pipelines.stages.models.forecast_queue`: duration quantiles and GPUs per job."""
    return model_stage.forecast_queue(models, queue, load_settings().step_minutes)


@task(name="demand", cache_policy=NO_CACHE)
def demand(services: list[ServiceSettings], fit: ProfileFit, traffic: pd.DataFrame, start: datetime) -> pd.DataFrame:
    """:func:`pipelines.stages.realtime.demand_frame`: GPU demand per service and step."""
    s = load_settings()
    return realtime.demand_frame(services, fit.profiles, traffic, start, s.step_minutes, s.horizon_steps)


@task(name="build-problem", cache_policy=NO_CACHE)
def build_problem(services: list[ServiceSettings], jobs: pd.DataFrame, demand_: pd.DataFrame,
                  start: datetime) -> Problem:
    """:func:`pipelines.stages.problem.build_problem`: the validated optimizer problem."""
    return problem_stage.build_problem(cluster_shape(load_settings()), services, jobs, demand_, start)


@task(name="solve", cache_policy=NO_CACHE)
def solve(problem: Problem, planner: str) -> Plan:
    """:func:`pipelines.stages.solve.solve`: plan the problem with ``planner``.

    Raises:
        RuntimeError: the solver ended without any valid plan (C13 b).
    """
    with _Stage(f"solve ({planner})"):
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


@task(name="write-outputs", cache_policy=NO_CACHE)
def write_outputs(run: RunCatalog, run_name: str, problem: Problem, plan: Plan, start: datetime,
                  forecasts: Forecasts | None) -> dict[str, str]:
    """Plan tables, risk report (:mod:`pipelines.report`) and summary into the run folder.

    Returns file name -> path. Without ``forecasts`` (a plan of a given problem file) the report uses the
    problem's own demand and jobs (:func:`pipelines.stages.outputs.report_inputs`).
    """
    with _Stage("plan + risk report"):
        cluster = load_workspace(load_settings().workspace_dir).config.cluster
        tables = run.save("plan_tables", outputs.plan_tables(problem, plan, start, cluster.node_names))
        paths = {tables.name: tables}
        models = None
        if run.exists("queue_notes"):
            models = {"scheduler": run.load("queue_notes").get("model")}
        elif forecasts is not None:  # the demo: the three saved job forecasters
            models = {k: model_store.model_version(load_settings(), k) for k in JOB_KINDS}
        if forecasts is not None:  # the report's headline names the models; its coverage risk needs the services
            inp = outputs.report_inputs(problem, plan, start, forecasts.jobs, forecasts.demand, forecasts.fit.bands,
                                        forecasts.fit.status, services=load_workspace(load_settings().workspace_dir)
                                        .services(), rt_selection=forecasts.fit.selection, models=models,
                                        node_names=cluster.node_names)
        else:
            inp = outputs.report_inputs(problem, plan, start)
        report_table = build_report_table(inp)  # once per run: the report and the summary's headline
        paths.update(write_risk_report(run.folder, inp, run_name, report_table))
        if forecasts is not None and forecasts.users is not None:
            ws = load_workspace(load_settings().workspace_dir)
            paths.update(_write_commands(run, run_name, ws, tables, forecasts, start))
        doc = outputs.summary(run_name, start, problem, plan, inp.demand, inp.rt_status, report=inp,
                              report_table=report_table)
        if models is not None:
            doc["models"] = models
        doc["cluster"] = {"workspace": str(load_settings().workspace_dir), "nodes": cluster.node_names,
                          "gpus_per_node": cluster.node_gpus, "n_gpus": cluster.n_gpus}
        summary_path = run.save("summary", doc)
        paths[summary_path.name] = summary_path
    report = run.load("risk_report_table") if run.exists("risk_report_table") else None
    log().info("headline: %s", "; ".join(f"{k} {v}" for k, v in observe.headline_rows(run.load("summary"), report)))
    log().info("wrote %d files into %s", len(paths), run.folder)
    return {k: str(v) for k, v in paths.items()}


def _write_commands(run: RunCatalog, run_name: str, ws: Workspace, tables_path: Path, forecasts: Forecasts,
                    start: datetime) -> dict[str, Path]:
    """``commands.sh`` and ``commands.tsv`` of a workspace's plan (:mod:`pipelines.stages.commands`)."""
    s = load_settings()
    tables = run.load("plan_tables")
    fmt = ws.source("queue").format
    dialect = "slurm" if fmt.startswith("slurm") else "kueue" if fmt == "kueue-json" else "table"
    tz = ws.config.cluster.timezone
    table = commands_stage.commands_table(tables, forecasts.jobs, start, s.step_minutes, s.replan_every_min, tz)
    text = commands_stage.commands_text(table, tables, forecasts.users or {}, dialect, run_name, start,
                                        s.replan_every_min, s.step_minutes, tz)
    a = run.save("commands", text)
    b = run.save("commands_table", table.to_csv(sep="\t", index=False))
    return {a.name: a, b.name: b}


@task(name="log-plan", retries=2, retry_delay_seconds=3, cache_policy=NO_CACHE)
def log_plan(run_dir: str, run_name: str, planner: str) -> str:
    """Log one published run folder to the ``plans`` experiment; return the run id.

    Reads the folder's summary and real-time metrics through the catalog and calls
    :func:`pipelines.tracking.runs.log_plan_run`. Retried: SQLite lock contention is transient.
    """
    s = load_settings()
    with _Stage("mlflow"):
        run = RunCatalog(Path(run_dir))
        rt_metrics = run.load("rt_metrics") if run.exists("rt_metrics") else None
        units = {svc.service: svc.units for svc in load_workspace(s.workspace_dir).services()}
        rid = tracking_runs.log_plan_run(s, Path(run_dir), run_name, planner, run.load("summary"), rt_metrics,
                                    run.artifacts(), units=units)
    link = tracking_runs.run_link(s, rid)
    log().info("MLflow run %s in experiment %s (%s)%s", rid, link["experiment"], s.tracking_uri,
               f": {link['url']}" if link["url"] else "")
    return rid


@task(name="publish-plan", retries=2, retry_delay_seconds=3, cache_policy=NO_CACHE)
def publish_plan(run_dir: str, mlflow_run_id: str | None, workspace: str) -> list[str]:
    """The plan run's Prefect artifacts: a markdown summary and a table of estimated starts; returns their keys.

    Read from the published folder (``summary.json``, ``risk_report.parquet``; :mod:`pipelines.observe`).
    Keys ``plan-summary-<workspace>`` and ``estimated-starts-<workspace>`` (one history per workspace).
    """
    s = load_settings()
    run = RunCatalog(Path(run_dir))
    summary = run.load("summary")
    report = run.load("risk_report_table") if run.exists("risk_report_table") else None
    link = tracking_runs.run_link(s, mlflow_run_id) if mlflow_run_id else {}
    md_key, table_key = observe.artifact_key("plan-summary", workspace), observe.artifact_key("estimated-starts", workspace)
    observe.publish_markdown(md_key, observe.plan_markdown(summary, report, Path(run_dir), link),
                             f"Plan {summary['run']}: headline, jobs at risk, where the run folder and MLflow run are")
    starts = observe.starts_rows(report)
    observe.publish_table(table_key, starts, f"Estimated start of every queued job, plan {summary['run']} "
                                             f"(UTC; {len(starts)} jobs)")
    log().info("published Prefect artifacts %s and %s", md_key, table_key)
    return [md_key, table_key]


def _publish_plan(run_dir: str, mlflow_run_id: str | None, workspace: str) -> None:
    """:func:`publish_plan`; a failure after its retries is a warning: the plan itself is already published."""
    try:
        publish_plan(run_dir, mlflow_run_id, workspace)
    except Exception as exc:  # noqa: BLE001 - the plan is published; only its artifacts are missing
        log().warning("Prefect artifacts of %s not published: %s", run_dir, exc)


def _log_inputs(inp: WorkspaceInputs, now: datetime) -> None:
    """Log the plan start and the age of the inputs (traffic, queue export) at the plan start and now."""
    traffic_end = pd.to_datetime(inp.ingested.frame["ts"], utc=True).max() if len(inp.ingested.frame) else None
    snap = inp.data.snapshot_at if inp.data is not None else None
    for line in observe.inputs_age_lines(inp.start, traffic_end, now, snap,
                                         inp.data.snapshot_file if inp.data is not None else None):
        log().info("inputs: %s", line)


# ---------------------------------------------------------------- flow helpers


def _use_workspace(workspace: str | None) -> Workspace:
    """Point this process at ``workspace`` (``$GPUPLAN_WORKSPACE``, read by every task's settings) and load it.

    A flow run is one process (``gpuplan run``, or a served deployment's subprocess), so the
    variable holds for all its tasks. None keeps the current one (else the shipped demo).
    """
    if workspace:
        os.environ["GPUPLAN_WORKSPACE"] = str(Path(workspace).expanduser().resolve())
    return load_workspace(load_settings().workspace_dir)


@dataclass(frozen=True)
class WorkspaceInputs:
    """What a plan of a workspace starts from: services, stored records (None for the demo), hourly traffic, start."""

    services: list[ServiceSettings]
    data: WorkspaceData | None
    ingested: IngestedTraffic
    start: datetime


def _workspace_inputs(ws: Workspace, when: datetime, replan: bool) -> WorkspaceInputs:
    """Ingest (an operator's workspace), read the records, the hourly traffic and the plan start.

    The demo: the shipped traffic; the plan starts at ``when`` floored to the step, but not after the
    first hour past the shipped traffic. An operator's workspace: its sources are ingested
    (:func:`pipelines.workspace.ingest.ingest`, idempotent), then the plan starts at the newest queue export
    (floored to the step). A re-plan (``replan``) first checks that export and the traffic are at most
    ``[replan] max_input_age_min`` old at ``when`` (:func:`pipelines.stages.cluster.check_fresh`: a
    stale input fails the run, the previous plan stays); ``gpuplan run`` plans what it has, from the
    export's time but not after the end of the traffic.

    Raises:
        pipelines.stages.cluster.StaleInputError: a re-plan with a stale queue export or traffic.
    """
    s = load_settings()
    services = ws.services()
    if ws.is_demo:
        ingested = ingest_traffic(services, _workspace_traffic(ws, services, None))
        start = min(slot_start(when, s.step_minutes), realtime.plan_start(ingested.frame))
        return WorkspaceInputs(services, None, ingested, start)
    with _Stage("ingest sources"):
        ingest_sources(ws)
    data = workspace_data(ws)
    cluster_stage.check_services_have_traffic(data.traffic, services, ws.source("traffic").service_label)
    ingested = ingest_traffic(services, _workspace_traffic(ws, services, data))
    samples = data.traffic["ts"]
    traffic_end = pd.Timestamp(samples.max()) if len(samples) else pd.Timestamp(realtime.plan_start(ingested.frame))
    if replan:
        cluster_stage.check_fresh(data.snapshot_at, data.snapshot_file, traffic_end, when,
                                  ws.config.replan.max_input_age_min)
    taken = pd.Timestamp(data.snapshot_at) if data.snapshot_at is not None else pd.Timestamp(when)
    if not replan:
        taken = min(taken, traffic_end)
    start = slot_start(taken.to_pydatetime(), s.step_minutes)
    return WorkspaceInputs(services, data, ingested, start)


@task(name="ingest-sources", cache_policy=NO_CACHE)
def ingest_sources(ws: Workspace) -> dict[str, Any]:
    """:func:`pipelines.workspace.ingest.ingest`: the workspace's exports into its store (idempotent)."""
    return run_ingest(ws)


def _workspace_traffic(ws: Workspace, services: list[ServiceSettings],
                       data: WorkspaceData | None) -> dict[str, pd.DataFrame]:
    """Each service's hourly raw rows: from the store (``data``) or the traffic source's files."""
    samples = data.traffic if data is not None else read_source(ws, "traffic").records
    return cluster_stage.hourly_traffic(samples, services, ws.source("traffic").units)


def _scheduled_time(scheduled_at: datetime | None) -> datetime:
    """The run's scheduled time: explicit, else Prefect's scheduled start, else now (UTC)."""
    if scheduled_at is not None:
        return scheduled_at if scheduled_at.tzinfo else scheduled_at.replace(tzinfo=UTC)
    try:
        ts = flow_run.scheduled_start_time
        if ts is not None:
            return datetime.fromtimestamp(ts.timestamp(), tz=UTC)
    except Exception:  # noqa: BLE001 - outside a flow run
        pass
    return datetime.now(UTC)


def _write_realtime(run: RunCatalog, ingested: IngestedTraffic | None, fit: ProfileFit | None) -> None:
    """Write the real-time datasets (traffic, ingest diagnostics; bands, status, metrics)."""
    if ingested is not None:
        run.save("traffic", ingested.frame)
        run.save("ingest", ingested.diagnostics)
    if fit is not None:
        run.save("bands", fit.bands)
        run.save("rt_status", fit.status)
        run.save("rt_metrics", fit.metrics)


def _forecast_and_build(catalog: Catalog, run: RunCatalog, services: list[ServiceSettings], models: dict[str, Any],
                        fit: ProfileFit, traffic: pd.DataFrame, start: datetime) -> tuple[Problem, Forecasts]:
    """Queue -> job forecasts + demand -> the problem; writes queue, jobs, demand, forecasts, problem."""
    with _Stage("queue + forecasts"):
        queue = build_queue(catalog.trace_pods(), start)
        jobs = forecast_jobs(models, queue)
        dem = demand(services, fit, traffic, start)
        problem = build_problem(services, jobs, dem, start)
        run.save("jobs", jobs)
        run.save("demand", dem)
        run.save_problem(problem)
        run.save("queue", queue_stage.queue_table(queue))
        run.save("forecasts", outputs.forecasts_table(jobs, dem))
    return problem, Forecasts(jobs, dem, fit)


@task(name="forecast-cluster-queue", cache_policy=NO_CACHE)
def forecast_cluster_queue(ws: Workspace, data: WorkspaceData, start: datetime) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`pipelines.stages.cluster.forecast_cluster_queue`: the workspace's queue with forecasts."""
    s = load_settings()
    champion = scheduler_models.load_champion(s)
    model = None if champion is None else champion[0]
    jobs, notes = cluster_stage.forecast_cluster_queue(data.history, data.queue, ws, start, s.step_minutes, s.seed,
                                                       model=model)
    notes["from_store"] = data.from_store
    notes["model"] = ({"name": tracking_models.scheduler_model_name(ws.root), "version": champion[1].get("version"),
                       "alias": "champion", "cutoff": champion[1].get("cutoff")} if champion is not None else
                      {"name": tracking_models.scheduler_model_name(ws.root), "version": None,
                       "alias": None, "note": "no champion yet (no nightly retraining): fitted at plan time"})
    return jobs, notes


def _cluster_forecast_and_build(ws: Workspace, run: RunCatalog, services: list[ServiceSettings], fit: ProfileFit,
                                traffic: pd.DataFrame, start: datetime,
                                data: WorkspaceData | None) -> tuple[Problem, Forecasts]:
    """An operator's workspace: stored queue -> forecasts + demand -> the problem (writes as :func:`_forecast_and_build`)."""
    with _Stage("queue + forecasts"):
        data = data if data is not None else workspace_data(ws)
        jobs, notes = forecast_cluster_queue(ws, data, start)
        run.save("queue_notes", notes)
        dem = demand(services, fit, traffic, start)
        problem = build_problem(services, jobs, dem, start)
        run.save("jobs", jobs)
        run.save("demand", dem)
        run.save_problem(problem)
        run.save("queue", cluster_stage.queue_table(jobs, data.queue))
        run.save("forecasts", outputs.forecasts_table(jobs, dem))
    users = {str(j): (u if isinstance(u, str) else "") for j, u in zip(data.queue["job_id"], data.queue["user"])}
    return problem, Forecasts(jobs, dem, fit, users)


def _plan_into(rf: RunFolder, run: RunCatalog, problem: Problem, planner: str, start: datetime,
               forecasts: Forecasts | None) -> dict[str, Any]:
    """Solve (task timeout), write the plan, verify, write the outputs."""
    s = load_settings()
    plan = solve.with_options(timeout_seconds=s.solve_timeout_s)(problem, planner)
    status = verify_plan(problem, plan)  # verified before anything of it is written
    run.save_plan(plan)
    outs = write_outputs(run, rf.name, problem, plan, start, forecasts)
    return {"status": status, "source": None if plan.source is None else str(plan.source),
            "fallback": plan.fallback, "outputs": outs}


# ---------------------------------------------------------------- flows


@flow(name="plan", log_prints=False)
def plan_flow(problem_path: str | None = None, planner: str = "milp", out_dir: str | None = None,
              scheduled_at: datetime | None = None, workspace: str | None = None) -> dict[str, Any]:
    """Re-plan once: build the current problem (or read ``problem_path``), solve, verify, publish.

    The run folder is labelled by the UTC slot of the scheduled time (a late catch-up run keeps
    its own slot and never moves ``latest`` back, case C25). Without ``problem_path`` the plan
    starts at the scheduled time or at the end of the available traffic data, whichever is
    earlier (the shipped data ends in 2025). Logs one run to the ``plans`` experiment after the
    folder is published.

    Returns ``{"run_dir", "slot", "latest_moved", "status", "mlflow_run_id"}``.
    """
    ws = _use_workspace(workspace)
    s = load_settings()
    tracking_store.init_store(s)
    catalog = Catalog(s)
    when = _scheduled_time(scheduled_at)
    out = Path(out_dir) if out_dir else s.runs_dir / "replan"
    rf = RunFolder.begin(out, when, step_minutes=s.step_minutes)
    log().info("replan of workspace %s (%d GPUs) for the slot of %s; building in %s", ws.root, s.n_gpus,
               f"{when:%Y-%m-%d %H:%MZ}", rf.tmp_path)
    try:
        run = catalog.run(rf.tmp_path)
        forecasts: Forecasts | None = None
        if problem_path is None:
            # plan from the newest data available: the shipped traffic ends before "now"
            inp = _workspace_inputs(ws, when, replan=True)
            _log_inputs(inp, datetime.now(UTC))
            services, ingested, start = inp.services, inp.ingested, inp.start
            _write_realtime(run, ingested, None)
            fit = fit_profiles(services, ingested.frame, start, ingested.diagnostics)
            _write_realtime(run, None, fit)
            if ws.is_demo:
                models = {k: train_or_load(k) for k in JOB_KINDS}
                problem, forecasts = _forecast_and_build(catalog, run, services, models, fit, ingested.frame, start)
            else:
                problem, forecasts = _cluster_forecast_and_build(ws, run, services, fit, ingested.frame, start,
                                                                 inp.data)
        else:
            problem = read_problem_file(Path(problem_path))
            run.save_problem(problem)
            start = datetime.now(UTC).replace(second=0, microsecond=0)
            log().info("inputs: problem file %s (%d jobs, %d running, %d services); plan starts now, %s",
                       problem_path, len(problem.jobs), len(problem.running), len(problem.services),
                       f"{start:%Y-%m-%d %H:%MZ}")
        res = _plan_into(rf, run, problem, planner, start, forecasts)
        info, moved = rf.commit()
    except BaseException:
        rf.abort()
        raise
    log().info("published run folder %s (status %s, verified)%s", info.path, res["status"],
               "; latest moved to it" if moved else "; latest NOT moved: a newer slot is published")
    rid = log_plan(str(info.path), info.path.name, planner)
    _publish_plan(str(info.path), rid, str(ws.root))
    return {"run_dir": str(info.path), "slot": info.slot, "latest_moved": moved, "status": res["status"], "source": res["source"], "fallback": res["fallback"],
            "mlflow_run_id": rid}


@flow(name="train_forecasters", log_prints=False)
def train_forecasters(scheduled_at: datetime | None = None, kinds: list[str] | None = None,
                      force: bool = False, workspace: str | None = None) -> dict[str, Any]:
    """Nightly retraining: refit the job forecasters and measure the real-time forecast's accuracy.

    Each job forecaster is logged to MLflow and registered with the ``champion`` alias (an operator's
    workspace: its scheduler-history forecaster, gated against the champion). The real-time forecasts
    are refitted on the trailing window at every planning run (DESIGN §4.4); the nightly run measures
    them: the rolling-origin backtest of every service (MAE, MASE against seasonal naive 168 h and naive
    24 h, P90 coverage) is logged as one ``realtime cutoff=...`` run with its forecast-against-actual plot
    (:func:`nightly_realtime`). ``kinds``: which of the job kinds (``scheduler`` for a workspace) and
    ``realtime`` to run; None: all.

    The run publishes a table artifact of every metric against its baselines, with the version now
    champion, and a short markdown (``retrain-metrics-<workspace>``, ``retrain-summary-<workspace>``).

    One run per local day of ``Settings.nightly_timezone``: a second scheduled run for a local
    day that already retrained (possible around a DST change) is skipped, unless ``force``.

    ``workspace``: whose model store (default ``$GPUPLAN_WORKSPACE``, else the demo's).

    Returns ``{"local_day", "skipped", "models": {kind: model folder}, "realtime_run_id"}`` (and a workspace's
    retraining document).
    """
    ws = _use_workspace(workspace)
    s = load_settings()
    tracking_store.init_store(s)
    catalog = Catalog(s)
    when = _scheduled_time(scheduled_at)
    day = local_day(when, s.nightly_timezone)
    if not force and not claim_local_day(catalog.nightly_marker(), day):
        log().info("retraining of local day %s (%s) already done: skipped", day, s.nightly_timezone)
        return {"local_day": day.isoformat(), "skipped": True, "models": {}}
    log().info("retraining of workspace %s for local day %s (%s), data up to %s", ws.root, day, s.nightly_timezone,
               f"{when:%Y-%m-%d %H:%MZ}")
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    out: dict[str, Any] = {"local_day": day.isoformat(), "skipped": False}
    if not ws.is_demo:
        with _Stage("ingest sources"):
            ingest_sources(ws)
        if kinds is None or "scheduler" in kinds:
            res = nightly_scheduler.with_options(timeout_seconds=s.train_timeout_s)(ws, when)
            out.update({"models": {"scheduler": str(scheduler_models.model_path(s))}, **res})
            rows += observe.scheduler_rows(res, res.get("version"))
            notes.append(f"scheduler: {res.get('reason')}")
        out.setdefault("models", {})
    else:
        models = {}
        for kind in [k for k in (kinds or JOB_KINDS) if k in JOB_KINDS]:
            train_or_load.with_options(timeout_seconds=s.train_timeout_s)(kind, retrain=True)
            models[kind] = str(catalog.model_path(kind))
            v = model_store.model_version(s, kind)
            doc = observe.unflatten(tracking_runs.run_metrics(s, v["run_id"])) if v.get("run_id") else {}
            rows += observe.job_model_rows(kind, doc, v)
        out["models"] = models
    if kinds is None or "realtime" in kinds:
        rt = nightly_realtime(ws)
        out["realtime_run_id"] = rt.get("run_id")
        rows += rt["rows"]
        notes += rt["notes"]
    _publish_retrain(day.isoformat(), rows, notes, str(ws.root))
    return out


@task(name="nightly-realtime", cache_policy=NO_CACHE)
def nightly_realtime(ws: Workspace) -> dict[str, Any]:
    """The real-time forecast's rolling-origin backtest on the workspace's traffic, logged to MLflow.

    :func:`pipelines.stages.realtime.backtest_report` (7 daily origins, 24 h ahead, each refitted on the
    hours before it) on every service, logged by :func:`pipelines.tracking.forecast_runs.log_realtime_backtest`. A history
    too short for one origin is a warning, not a failure (the job forecasters are still retrained).

    Returns ``{"run_id" (None when skipped), "rows" (:func:`pipelines.observe.realtime_rows`), "notes"}``.
    """
    s = load_settings()
    services = ws.services()
    data = None if ws.is_demo else workspace_data(ws)
    hours: dict[str, pd.DataFrame] = {}
    with _Stage("real-time backtest"):
        try:
            doc = realtime.backtest_report(services, _workspace_traffic(ws, services, data), hours_out=hours)
        except (InputError, ValueError) as exc:
            log().warning("real-time backtest skipped: %s", exc)
            return {"run_id": None, "rows": [], "notes": [f"real-time backtest skipped: {exc}"]}
        rid = forecast_runs.log_realtime_backtest(s, doc, hours)
    for name, d in doc["services"].items():
        m = d["metrics"]
        log().info("real-time %s backtest (%d origins, %d hours up to %s): MAE %s %s, MASE vs seasonal naive 168 h "
                   "%s, vs naive 24 h %s, P90 coverage %.2f", name, d["n_days"], d["n_hours"], observe.fmt_ts(d["cutoff"]),
                   f"{m['mae']:,.0f}", d["units"], observe.fmt_value(m["mase_snaive168"]),
                   observe.fmt_value(m["mase_naive24"]), m["p90_coverage"])
    link = tracking_runs.run_link(s, rid)
    log().info("real-time accuracy: MLflow run %s%s", rid, f" ({link['url']})" if link["url"] else "")
    return {"run_id": rid, "rows": observe.realtime_rows(doc, None), "notes": [f"real-time accuracy: MLflow run {rid}"]}


@task(name="publish-retrain", retries=2, retry_delay_seconds=3, cache_policy=NO_CACHE)
def publish_retrain(local_day: str, rows: list[dict[str, Any]], notes: list[str], workspace: str) -> list[str]:
    """The retraining run's Prefect artifacts: the metrics table and a markdown of the champions; returns their keys."""
    table_key = observe.artifact_key("retrain-metrics", workspace)
    md_key = observe.artifact_key("retrain-summary", workspace)
    observe.publish_table(table_key, rows, f"Retraining {local_day}: holdout / backtest metrics of each forecaster "
                                           "beside its baselines; version and alias (champion)")
    observe.publish_markdown(md_key, observe.retrain_markdown(local_day, rows, notes), f"Retraining {local_day}")
    log().info("published Prefect artifacts %s and %s", table_key, md_key)
    return [table_key, md_key]


def _publish_retrain(local_day: str, rows: list[dict[str, Any]], notes: list[str], workspace: str) -> None:
    """:func:`publish_retrain`; a failure after its retries is a warning (the models are registered)."""
    try:
        publish_retrain(local_day, rows, notes, workspace)
    except Exception as exc:  # noqa: BLE001 - the models are trained and registered; only the artifacts are missing
        log().warning("Prefect artifacts of the retraining of %s not published: %s", local_day, exc)


@task(name="nightly-scheduler", cache_policy=NO_CACHE)
def nightly_scheduler(ws: Workspace, cutoff: datetime) -> dict[str, Any]:
    """A workspace's gated nightly retraining (:func:`pipelines.scheduler_models.nightly_fit`), logged and registered.

    Returns the retraining document plus ``version`` (the new registered version) and
    ``champion_version`` (the champion after this night).
    """
    s = load_settings()
    with _Stage("nightly retraining"):
        model, doc = scheduler_models.nightly_fit(s, ws, cutoff)
        version = tracking_models.log_scheduler_model_run(s, ws, model, doc,
                                                   alias="champion" if doc["promoted"] else "challenger")
        if doc["promoted"]:
            scheduler_models.save_champion(s, model, {"version": version, "cutoff": doc["cutoff"],
                                                      "history_rows": doc["history_rows"], "reason": doc["reason"]})
    return {**doc, "version": version, "champion_version": version if doc["promoted"] else doc["champion_version_before"]}


def run_benchmark(settings: Settings, scenario: str, quick: bool, out: Path) -> dict[str, Any]:
    """Run the rolling-horizon benchmark (:mod:`pipelines.bench`, ``docs/benchmark.md``).

    Writes its
    outputs into ``out`` and log one run to the ``benchmarks`` experiment
    (:func:`pipelines.tracking.runs.log_benchmark_run`).

    Returns ``{"out_dir", "mlflow_run_id", "wall_s", "verified_plans", "violations"}``.
    """
    cfg = bench.BenchConfig(scenarios=bench.parse_scenarios(scenario), quick=quick, seed=settings.seed)
    res = bench.run_bench(cfg)
    files = bench.write_outputs(res, out)
    rid = tracking_runs.log_benchmark_run(settings, scenario, quick, out, cfg, res, files)
    return {"out_dir": str(out), "mlflow_run_id": rid, "wall_s": round(res.wall_s, 1),
            "verified_plans": res.verified_plans, "violations": res.violations}


@flow(name="benchmark", log_prints=False)
def benchmark(scenario: str = "all", quick: bool = True, out_dir: str | None = None) -> dict[str, Any]:
    """Run the rolling-horizon benchmark (:func:`run_benchmark`) and log it.

    Logged to the ``benchmarks``
    experiment. Returns ``{"out_dir", "mlflow_run_id", "wall_s", "verified_plans", "violations"}``.
    """
    s = load_settings()
    tracking_store.init_store(s)
    out = Path(out_dir) if out_dir else s.runs_dir / "bench"
    with _Stage("benchmark"):
        return run_benchmark(s, scenario, quick, out)


@flow(name="run_all", log_prints=False)
def run_all(out_dir: str | None = None, retrain: bool = False, planner: str = "milp",
            workspace: str | None = None) -> dict[str, Any]:
    """The main job on the shipped real data (DESIGN §7.1, ``gpuplan run``).

    ingest traffic -> train or load the job forecasters -> fit the real-time profiles -> build
    the queue and forecasts -> plan 24 h (MILP) -> verify -> write the run folder atomically ->
    move ``latest`` -> log to MLflow.

    The plan starts at :func:`pipelines.stages.realtime.plan_start` (the first hour after the shipped
    traffic; the last shipped day is the actual the forecast is shown against), or now when that
    is earlier. ``workspace``: the operator's workspace (default ``$GPUPLAN_WORKSPACE``, else the
    shipped demo): its cluster, services, traffic and queue (:mod:`pipelines.workspace`); the demo
    trains the three LLM job forecasters, an operator's workspace the scheduler-history forecaster.

    Returns ``{"run_dir", "latest", "latest_moved", "status", "mlflow_run_id", "tracking_uri",
    "outputs", "wall_s"}``.
    """
    t0 = time.monotonic()
    ws = _use_workspace(workspace)
    s = load_settings()
    tracking_store.init_store(s)
    catalog = Catalog(s)
    out = Path(out_dir) if out_dir else s.runs_dir
    now = datetime.now(UTC)
    log().info("gpuplan run of workspace %s (%d GPUs, %d nodes) into %s", ws.root, s.n_gpus,
               len(ws.config.cluster.node_names), out)
    inp = _workspace_inputs(ws, now, replan=False)
    _log_inputs(inp, now)
    services, ingested, start = inp.services, inp.ingested, inp.start
    rf = RunFolder.begin(out, start, step_minutes=s.step_minutes)
    try:
        run = catalog.run(rf.tmp_path)
        _write_realtime(run, ingested, None)
        # independent work in Prefect's thread pool (LightGBM and numpy release the GIL)
        # (no task timeout here: Prefect cannot interrupt a worker thread, and a flow-level
        # timeout would move the flow off the main thread, where the solve task's alarm-based
        # timeout_seconds works; training is bounded by LightGBM's fixed number of rounds)
        futures = {k: train_or_load.submit(k, retrain=retrain) for k in (JOB_KINDS if ws.is_demo else ())}
        fit = fit_profiles.submit(services, ingested.frame, start, ingested.diagnostics).result()
        _write_realtime(run, None, fit)
        logged = log_profiles.submit(run, fit, start)
        models = {k: f.result() for k, f in futures.items()}
        if ws.is_demo:
            problem, forecasts = _forecast_and_build(catalog, run, services, models, fit, ingested.frame, start)
        else:
            problem, forecasts = _cluster_forecast_and_build(ws, run, services, fit, ingested.frame, start, inp.data)
        res = _plan_into(rf, run, problem, planner, start, forecasts)
        logged.result()
        info, moved = rf.commit()
    except BaseException:
        rf.abort()
        raise
    log().info("published run folder %s (status %s, verified)%s", info.path, res["status"],
               "; latest moved to it" if moved else "; latest NOT moved: a newer slot is published")
    rid = log_plan(str(info.path), info.path.name, planner)
    _publish_plan(str(info.path), rid, str(ws.root))
    return {"run_dir": str(info.path), "latest": str(out / LATEST), "latest_moved": moved,
            "status": res["status"], "source": res["source"], "fallback": res["fallback"], "mlflow_run_id": rid, "tracking_uri": s.tracking_uri,
            "workspace": str(ws.root), "n_gpus": s.n_gpus, "nodes": ws.config.cluster.node_names,
            "outputs": {k: str(info.path / Path(v).name) for k, v in res["outputs"].items()},
            "wall_s": round(time.monotonic() - t0, 1)}


# ---------------------------------------------------------------- what-if (issue 14)


def default_whatif_folder(s: Settings) -> Path:
    """The run folder a what-if starts from when none is given: the replan deployment's ``latest``, else ``gpuplan run``'s."""
    replan = s.runs_dir / "replan" / LATEST
    return replan if replan.exists() else s.runs_dir / LATEST


@task(name="whatif-replan", cache_policy=NO_CACHE)
def whatif_replan(run_folder: str, add_gpus: int, drain_nodes: list[str], fail_gpus: list[str],
                  add_jobs: list[dict[str, Any]], cancel: list[str], priority: list[str],
                  demand_scale: list[str]) -> dict[str, Any]:
    """:func:`pipelines.stages.whatif.run_whatif` on ``run_folder``: the edited problem re-planned, verified, compared."""
    from pipelines.stages import whatif as wi

    base = wi.load_base(Path(run_folder))
    w = wi.build_whatif(base, add_gpus=add_gpus, drain_nodes=drain_nodes, fail_gpus=fail_gpus, cancel=cancel,
                        priority=priority, demand_scale=demand_scale, add_jobs=add_jobs)
    return wi.run_whatif(base, w)


@flow(name="whatif", log_prints=False)
def whatif_flow(run_folder: str | None = None, add_gpus: int = 0, drain_nodes: list[str] | None = None,
                fail_gpus: list[str] | None = None, add_jobs: list[dict[str, Any]] | None = None,
                cancel: list[str] | None = None, priority: dict[str, float] | None = None,
                demand_scale: dict[str, float] | None = None) -> dict[str, Any]:
    """``gpuplan whatif`` as a flow (run it from the UI with Custom run): re-plan a run folder with changes.

    Parameters as the command's options: ``run_folder`` (default :func:`default_whatif_folder`),
    ``add_gpus``, ``drain_nodes`` (node names), ``fail_gpus`` (ranges such as ``"8-15"``), ``add_jobs``
    (problem-file job entries, ``duration_h`` allowed), ``cancel`` (job ids), ``priority`` (job id ->
    priority), ``demand_scale`` (service -> factor). Publishes a markdown artifact ``whatif`` (the
    comparison and every job that moved, with its reason) and a table artifact ``whatif-jobs``
    (:func:`pipelines.report.whatif.render_markdown`); nothing is written to the run folder.

    Returns the document of :func:`pipelines.stages.whatif.run_whatif`.
    """
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from pipelines.report import whatif as wi_text

    s = load_settings()
    folder = str(Path(run_folder).expanduser() if run_folder else default_whatif_folder(s))
    timed = whatif_replan.with_options(timeout_seconds=s.solve_timeout_s)
    doc = timed(folder, int(add_gpus), list(drain_nodes or []), list(fail_gpus or []), list(add_jobs or []),
                list(cancel or []), [f"{k}={v}" for k, v in (priority or {}).items()],
                [f"{k}={v}" for k, v in (demand_scale or {}).items()])
    changes = ", ".join(doc["changes"]) or "no change"
    create_markdown_artifact(markdown=wi_text.render_markdown(doc), key="whatif",
                             description=f"What-if on {doc['run']}: {changes}")
    rows = [{k: j[k] for k in ("job_id", "start_ts_base", "start_ts_whatif", "delta_h", "change", "reason")}
            for j in doc["jobs"]]
    create_table_artifact(table=rows or [{"job_id": "", "reason": "no job's plan changed"}], key="whatif-jobs",
                          description=f"Jobs whose start or GPUs changed ({changes})")
    return doc
