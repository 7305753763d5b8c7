"""The plan's outputs: tables, risk report, commands and summary into the run folder; MLflow; Prefect artifacts."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from optimizer.plan import Plan
from optimizer.problem import Problem
from pipelines.catalog import RunCatalog
from pipelines.config.settings import Settings
from pipelines.flows import observe
from pipelines.flows.jobs import PlanInputs, QueueForecast
from pipelines.flows.progress import Stage
from pipelines.report import build_report_table, write_risk_report
from pipelines.report.basics import INPUT_AGE_WARN_H
from pipelines.report.risks import ReportInputs
from pipelines.stages import commands as commands_stage
from pipelines.stages import outputs
from pipelines.stages.realtime import RealtimeForecastFit
from pipelines.tracking import runs as tracking_runs
from pipelines.workspace.load import Workspace

log = observe.run_logger


def _report_inputs(ws: Workspace, problem: Problem, plan: Plan, start: datetime, queue: QueueForecast | None,
                   demand: object, fit: RealtimeForecastFit | None) -> ReportInputs:
    """The report's inputs: the plan's forecasts when it has them, else the problem's own demand and jobs."""
    if queue is None or fit is None:
        return outputs.report_inputs(problem, plan, start)
    return outputs.report_inputs(problem, plan, start, queue.jobs, demand, fit.bands, fit.status,
                                 services=ws.services(), rt_selection=fit.selection, models=queue.models,
                                 node_names=ws.cluster.node_names, unplannable=unplannable_jobs(ws, queue.notes))


def unplannable_jobs(ws: Workspace, notes: dict | None) -> list[tuple[str, str]]:
    """``(job_id, why)`` of the queued jobs the store side left out of the problem.

    They are ``queue_notes.json``'s ``dropped_no_eligible_type``: they ask only for GPU types no node of the
    cluster has (:func:`pipelines.stages.queue.store.forecast_cluster_queue`).
    """
    dropped = (notes or {}).get("dropped_no_eligible_type") or []
    types = ", ".join(sorted({str(s.gpu_type) for s in ws.cluster.node_specs.values()}))
    return [(str(j), f"it asks only for GPU types no node of this cluster has (the cluster's: {types}); add nodes of "
                     "a type it accepts, or change its request") for j in dropped]


@task(name="write-outputs", cache_policy=NO_CACHE)
def write_outputs(settings: Settings, ws: Workspace, run: RunCatalog, run_name: str, problem: Problem, plan: Plan,
                  start: datetime, queue: QueueForecast | None = None, demand: object = None,
                  fit: RealtimeForecastFit | None = None) -> dict[str, str]:
    """Plan tables, risk report (:mod:`pipelines.report`), commands and summary into the run folder.

    Returns file name -> path. Without ``queue`` (a plan of a given problem file) the report uses the
    problem's own demand and jobs (:func:`pipelines.stages.outputs.report_inputs`).
    """
    with Stage("plan + risk report"):
        cluster = ws.cluster
        tables = run.save("plan_tables", outputs.plan_tables(problem, plan, start, cluster.node_names))
        paths = {tables.name: tables}
        inp = _report_inputs(ws, problem, plan, start, queue, demand, fit)
        report_table = build_report_table(inp)  # once per run: the report and the summary's headline
        paths.update(write_risk_report(run.folder, inp, run_name, report_table,  # what-if lines name the published folder
                                       run_folder=run.folder.parent / run_name))
        if queue is not None and queue.users is not None:
            paths.update(write_commands(settings, ws, run, run_name, queue, start, plan.stops,
                                        outputs.running_nodes(problem, cluster.node_names)))
        doc = outputs.summary(run_name, start, problem, plan, inp.demand, inp.rt_status, report=inp,
                              report_table=report_table)
        if queue is not None:
            doc["models"] = queue.models
        doc["cluster"] = {"workspace": str(settings.workspace_dir), "nodes": cluster.node_names,
                          "gpus_per_node": cluster.node_gpus, "n_gpus": cluster.n_gpus}
        if not cluster.homogeneous:  # nodes of several sizes or types: gpus_per_node is only the largest node's
            doc["cluster"]["node_gpus"] = cluster.node_sizes
            doc["cluster"]["node_gpu_types"] = {n: str(spec.gpu_type) for n, spec in cluster.node_specs.items()}
        summary_path = run.save("summary", doc)
        paths[summary_path.name] = summary_path
    report = run.load("risk_report_table") if run.exists("risk_report_table") else None
    log().info("headline: %s", "; ".join(f"{k} {v}" for k, v in observe.headline_rows(run.load("summary"), report)))
    log().info("wrote %d files into %s", len(paths), run.folder)
    return {k: str(v) for k, v in paths.items()}


def write_commands(settings: Settings, ws: Workspace, run: RunCatalog, run_name: str, queue: QueueForecast,
                   start: datetime, stops: tuple[tuple[str, int], ...] = (),
                   stop_nodes: dict[str, str] | None = None) -> dict[str, Path]:
    """``commands.sh`` and ``commands.tsv`` of a workspace's plan (:mod:`pipelines.stages.commands`).

    ``stops``: the plan's ``Plan.stops`` (issue 30): a requeue (Slurm) or eviction (Kueue) line each;
    ``stop_nodes``: running job id -> its nodes (:func:`pipelines.stages.outputs.running_nodes`).
    """
    s = settings
    tables = run.load("plan_tables")
    fmt = ws.source("queue").format
    dialect = "slurm" if fmt.startswith("slurm") else "kueue" if fmt == "kueue-json" else "table"
    tz = ws.config.cluster.timezone
    table = commands_stage.commands_table(tables, queue.jobs, start, s.step_minutes, s.replan_every_min, tz, stops,
                                          stop_nodes)
    jobs = queue.jobs
    marked = jobs["preemptible"].fillna(False).astype(bool) if "preemptible" in jobs.columns else None
    n_marked = {st: 0 if marked is None else int((marked & (jobs["state"] == st)).sum()) for st in ("running", "queued")}
    text = commands_stage.commands_text(table, tables, queue.users or {}, dialect, run_name, start,
                                        s.replan_every_min, s.step_minutes, tz, preemptible_running=n_marked["running"],
                                        preemptible_queued=n_marked["queued"])
    a = run.save("commands", text)
    b = run.save("commands_table", table.to_csv(sep="\t", index=False))
    return {a.name: a, b.name: b}


@task(name="log-plan", retries=2, retry_delay_seconds=3, cache_policy=NO_CACHE)
def log_plan(settings: Settings, ws: Workspace, run_dir: str, run_name: str, planner: str) -> str:
    """Log one published run folder to the ``plans`` experiment; return the run id.

    Reads the folder's summary and real-time metrics through the catalog and calls
    :func:`pipelines.tracking.runs.log_plan_run`. Retried: SQLite lock contention is transient.
    """
    s = settings
    with Stage("mlflow"):
        run = RunCatalog(Path(run_dir))
        rt_metrics = run.load("rt_metrics") if run.exists("rt_metrics") else None
        units = {svc.service: svc.units for svc in ws.services()}
        rid = tracking_runs.log_plan_run(s, Path(run_dir), run_name, planner, run.load("summary"), rt_metrics,
                                    run.artifacts(), units=units)
    link = tracking_runs.run_link(s, rid)
    log().info("MLflow run %s in experiment %s (%s)%s", rid, link["experiment"], s.tracking_uri,
               f": {link['url']}" if link["url"] else "")
    return rid


@task(name="publish-plan", retries=2, retry_delay_seconds=3, cache_policy=NO_CACHE)
def publish_plan(settings: Settings, run_dir: str, mlflow_run_id: str | None, workspace: str) -> list[str]:
    """The plan run's Prefect artifacts: a markdown summary and a table of estimated starts; returns their keys.

    Read from the published folder (``summary.json``, ``risk_report.parquet``; :mod:`pipelines.flows.observe`).
    Keys ``plan-summary-<workspace>`` and ``estimated-starts-<workspace>`` (one history per workspace).
    """
    run = RunCatalog(Path(run_dir))
    summary = run.load("summary")
    report = run.load("risk_report_table") if run.exists("risk_report_table") else None
    link = tracking_runs.run_link(settings, mlflow_run_id) if mlflow_run_id else {}
    md_key, table_key = observe.artifact_key("plan-summary", workspace), observe.artifact_key("estimated-starts", workspace)
    observe.publish_markdown(md_key, observe.plan_markdown(summary, report, Path(run_dir), link),
                             f"Plan {summary['run']}: headline, jobs at risk, where the run folder and MLflow run are")
    starts = observe.starts_rows(report, stops=summary.get("stops"))
    observe.publish_table(table_key, starts, f"Estimated start of every queued job, plan {summary['run']} "
                                             f"(UTC; {len(starts)} jobs)")
    log().info("published Prefect artifacts %s and %s", md_key, table_key)
    return [md_key, table_key]


def publish_plan_or_warn(settings: Settings, run_dir: str, mlflow_run_id: str | None, workspace: str) -> None:
    """:func:`publish_plan`; a failure after its retries is a warning: the plan itself is already published."""
    try:
        publish_plan(settings, run_dir, mlflow_run_id, workspace)
    except Exception as exc:  # noqa: BLE001 - the plan is published; only its artifacts are missing
        log().warning("Prefect artifacts of %s not published: %s", run_dir, exc)


def log_inputs(inp: PlanInputs, now: datetime) -> None:
    """Log the plan start and the age of the inputs (traffic, queue export) at the plan start and now."""
    import pandas as pd

    traffic_end = pd.to_datetime(inp.ingested.frame["ts"], utc=True).max() if len(inp.ingested.frame) else None
    snap = inp.data.snapshot_at if inp.data is not None else None
    for line in observe.inputs_age_lines(inp.start, traffic_end, now, snap,
                                         inp.data.snapshot_file if inp.data is not None else None):
        log().info("inputs: %s", line)
    # what is known before the queue is read; the risk report's "newest input" also counts job submissions
    read = [(pd.Timestamp(t), what) for t, what in ((traffic_end, "the traffic's newest hour"),
                                                    (snap, "the queue export")) if t is not None]
    if read:
        newest, what = max(read, key=lambda r: r[0])
        age_h = (pd.Timestamp(now) - newest).total_seconds() / 3600
        if age_h > INPUT_AGE_WARN_H:  # once per run: the run page shows a WARNING, not only an INFO line
            shipped = "shipped data: " if inp.data is None else ""
            log().warning("%sinputs %s h old: the newest input (%s, %s) is older than the limit of %g h; this plan "
                          "is built from stale data%s", shipped, f"{age_h:,.0f}", observe.fmt_ts(newest), what,
                          INPUT_AGE_WARN_H, " (the demo plans from the 2025 data it ships)" if shipped else "")
