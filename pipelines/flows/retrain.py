"""The nightly retraining flow: refit the side's job forecasters, backtest the real-time forecast, publish the metrics."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from pipelines.catalog import Catalog
from pipelines.config.settings import Settings
from pipelines.flows import observe, retrain_rows
from pipelines.flows.jobs import ShippedJobs, StoreJobs, hourly_raw, job_source
from pipelines.flows.plan import scheduled_time, workspace_settings
from pipelines.flows.progress import Stage
from pipelines.flows.schedules import claim_local_day, local_day
from pipelines.io.errors import InputError
from pipelines.stages import realtime
from pipelines.tracking import forecast_runs as forecast_runs
from pipelines.tracking import runs as tracking_runs
from pipelines.tracking import store as tracking_store
from pipelines.workspace.load import Workspace

log = observe.run_logger


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
    observe.quiet_bad_input_tracebacks()
    ws, s = workspace_settings(workspace)
    tracking_store.init_store(s)
    when = scheduled_time(scheduled_at)
    day = local_day(when, s.nightly_timezone)
    if not force and not claim_local_day(Catalog(s).nightly_marker(), day):
        log().info("retraining of local day %s (%s) already done: skipped", day, s.nightly_timezone)
        return {"local_day": day.isoformat(), "skipped": True, "models": {}}
    log().info("retraining of workspace %s for local day %s (%s), data up to %s", ws.root, day, s.nightly_timezone,
               f"{when:%Y-%m-%d %H:%MZ}")
    jobs_side = job_source(s, ws)
    res, rows, notes = jobs_side.retrain(when, kinds)
    out: dict[str, Any] = {"local_day": day.isoformat(), "skipped": False, **res}
    if kinds is None or "realtime" in kinds:
        rt = nightly_realtime(s, ws, jobs_side)
        out["realtime_run_id"] = rt.get("run_id")
        rows += rt["rows"]
        notes += rt["notes"]
    publish_retrain_or_warn(day.isoformat(), rows, notes, str(ws.root))
    return out


@task(name="nightly-realtime", cache_policy=NO_CACHE)
def nightly_realtime(settings: Settings, ws: Workspace, jobs_side: ShippedJobs | StoreJobs) -> dict[str, Any]:
    """The real-time forecast's rolling-origin backtest on the workspace's traffic, logged to MLflow.

    :func:`pipelines.stages.realtime.backtest_report` (7 daily origins, 24 h ahead, each refitted on the
    hours before it) on every service, logged by :func:`pipelines.tracking.forecast_runs.log_realtime_backtest`. A history
    too short for one origin is a warning, not a failure (the job forecasters are still retrained).

    Returns ``{"run_id" (None when skipped), "rows" (:func:`pipelines.flows.retrain_rows.realtime_rows`), "notes"}``.
    """
    services = ws.services()
    hours: dict = {}
    with Stage("real-time backtest"):
        try:
            doc = realtime.backtest_report(services, hourly_raw(ws, services, jobs_side.traffic_samples()),
                                           hours_out=hours)
        except (InputError, ValueError) as exc:
            log().warning("real-time backtest skipped: %s", exc)
            return {"run_id": None, "rows": [], "notes": [f"real-time backtest skipped: {exc}"]}
        rid = forecast_runs.log_realtime_backtest(settings, doc, hours)
    for name, d in doc["services"].items():
        m = d["metrics"]
        log().info("real-time %s backtest (%d origins, %d hours up to %s): MAE %s %s, MAE ratio vs seasonal naive "
                   "168 h %s, vs naive 24 h %s, P90 coverage over the backtest hours %.2f", name, d["n_days"], d["n_hours"], observe.fmt_ts(d["cutoff"]),
                   f"{m['mae']:,.0f}", d["units"], observe.fmt_value(m["mase_snaive168"]),
                   observe.fmt_value(m["mase_naive24"]), m["p90_coverage"])
    link = tracking_runs.run_link(settings, rid)
    log().info("real-time accuracy: MLflow run %s%s", rid, f" ({link['url']})" if link["url"] else "")
    return {"run_id": rid, "rows": retrain_rows.realtime_rows(doc, None), "notes": [f"real-time accuracy: MLflow run {rid}"]}


@task(name="publish-retrain", retries=2, retry_delay_seconds=3, cache_policy=NO_CACHE)
def publish_retrain(local_day: str, rows: list[dict[str, Any]], notes: list[str], workspace: str) -> list[str]:
    """The retraining run's Prefect artifacts: the metrics table and a markdown of the champions; returns their keys."""
    table_key = observe.artifact_key("retrain-metrics", workspace)
    md_key = observe.artifact_key("retrain-summary", workspace)
    observe.publish_table(table_key, rows, f"Retraining {local_day}: holdout / backtest metrics of each forecaster "
                                           "beside its baselines; version and alias (champion)")
    observe.publish_markdown(md_key, retrain_rows.retrain_markdown(local_day, rows, notes), f"Retraining {local_day}")
    log().info("published Prefect artifacts %s and %s", table_key, md_key)
    return [table_key, md_key]


def publish_retrain_or_warn(local_day: str, rows: list[dict[str, Any]], notes: list[str], workspace: str) -> None:
    """:func:`publish_retrain`; a failure after its retries is a warning (the models are registered)."""
    try:
        publish_retrain(local_day, rows, notes, workspace)
    except Exception as exc:  # noqa: BLE001 - the models are trained and registered; only the artifacts are missing
        log().warning("Prefect artifacts of the retraining of %s not published: %s", local_day, exc)
