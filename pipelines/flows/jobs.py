"""The one seam of a plan: where its traffic, queue, job histories and job forecasters come from.

:func:`job_source` picks the side of the workspace (:func:`pipelines.config.settings.job_side`) once; both
sides answer the same four questions, so the plan, the re-plan and the nightly retraining have one path:

- :meth:`inputs`: the services, the hourly traffic and the plan start (a store side ingests its
  exports first and checks their age on a re-plan);
- :meth:`start_models` / :meth:`forecast`: the job forecasters, then the queue with duration
  quantiles (:data:`pipelines.io.schemas.JOB_FORECASTS`) and its table;
- :meth:`retrain`: the nightly refit of the side's forecasters;
- :meth:`traffic_samples`: the traffic the nightly real-time backtest reads.

``shipped`` (:class:`ShippedJobs`): the shipped files (traffic CSVs, the generated LLM job histories, the
Alibaba openb trace as the queue; one LightGBM forecaster per job kind). ``store``
(:class:`StoreJobs`): an operator's exports, ingested into the workspace's store (the
scheduler-history forecaster).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from domain.kinds import JOB_KINDS
from pipelines.catalog import Catalog
from pipelines.config.settings import Settings, job_side
from pipelines.flows import observe, retrain_rows
from pipelines.flows.progress import Stage
from pipelines.flows.tasks import ingest_sources, ingest_traffic
from pipelines.io.slots import slot_start
from pipelines.models import jobs as job_forecasters
from pipelines.models import scheduler as scheduler_forecaster
from pipelines.stages import models as model_stage
from pipelines.stages import realtime
from pipelines.stages import traffic as traffic_stage
from pipelines.stages.queue import shipped as shipped_queue
from pipelines.stages.queue import store as store_queue
from pipelines.stages.realtime import IngestedTraffic
from pipelines.tracking import models as tracking_models
from pipelines.tracking import runs as tracking_runs
from pipelines.workspace.config import ServiceSettings
from pipelines.workspace.ingest import WorkspaceData, read_source, workspace_data
from pipelines.workspace.load import Workspace

log = observe.run_logger


@dataclass(frozen=True)
class PlanInputs:
    """What a plan starts from: services, stored records (None on the shipped side), hourly traffic, start."""

    services: list[ServiceSettings]
    data: WorkspaceData | None
    ingested: IngestedTraffic
    start: datetime


@dataclass(frozen=True)
class QueueForecast:
    """The planned queue: job forecasts, the queue table, and what the report names.

    ``notes``: the store side's ``queue_notes.json`` (counts, the model); ``users``: job id -> user for
    the commands file (store side only); ``models``: the forecasters named in the summary.
    """

    jobs: pd.DataFrame
    queue: pd.DataFrame
    models: dict[str, Any]
    notes: dict[str, Any] | None = None
    users: dict[str, str] | None = None


def hourly_raw(ws: Workspace, services: list[ServiceSettings], samples: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each service's hourly raw rows from traffic samples (``[sources.traffic] units``)."""
    return traffic_stage.hourly_traffic(samples, services, ws.source("traffic").units)


@task(name="train-or-load", cache_policy=NO_CACHE)
def train_or_load(settings: Settings, kind: str, retrain: bool = False) -> Any:
    """:func:`pipelines.models.jobs.train_or_load`: the current ``kind`` forecaster.

    Trained, saved and logged to MLflow when missing or ``retrain``.
    """
    with Stage(f"forecaster {kind}"):
        model = job_forecasters.train_or_load(settings, kind, retrain=retrain, notify=log().info)
    v = job_forecasters.model_version(settings, kind)
    log().info("%s forecaster: %s version %s (alias %s, MLflow run %s)", kind, v.get("name"), v.get("version"),
               v.get("alias"), v.get("run_id"))
    return model


@task(name="build-queue", cache_policy=NO_CACHE)
def build_queue(settings: Settings, pods: pd.DataFrame, start: datetime) -> dict[str, pd.DataFrame]:
    """:func:`pipelines.stages.queue.shipped.build_queue`: real-trace pods + generated LLM jobs at ``start``."""
    return shipped_queue.build_queue(pods, settings.seed, start)


@task(name="forecast-jobs", cache_policy=NO_CACHE)
def forecast_jobs(settings: Settings, models: dict[str, Any], queue: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """:func:`pipelines.stages.models.forecast_queue`: duration quantiles and GPUs per job."""
    return model_stage.forecast_queue(models, queue, settings.step_minutes)


@task(name="forecast-cluster-queue", cache_policy=NO_CACHE)
def forecast_cluster_queue(settings: Settings, ws: Workspace, data: WorkspaceData,
                           start: datetime) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`pipelines.stages.queue.store.forecast_cluster_queue`: the workspace's queue with forecasts."""
    champion = scheduler_forecaster.load_champion(settings)
    model = None if champion is None else champion[0]
    jobs, notes = store_queue.forecast_cluster_queue(data.history, data.queue, ws, start, settings.step_minutes,
                                                       settings.seed, model=model)
    notes["from_store"] = data.from_store
    for jid in notes.get("dropped_no_eligible_type") or []:
        log().warning("job %s asks only for GPU types no node of this cluster has: not planned (listed first in "
                      "the risk report's What to do first)", jid)
    for line in notes.get("preemption_errors") or []:  # a job's bad gpuplan.checkpoint= etc. (issue 30)
        log().warning("%s", line)
    if data.snapshot_note:
        notes["export_clock"] = data.snapshot_note
    name = tracking_models.scheduler_model_name(ws)
    notes["model"] = ({"name": name, "version": champion[1].get("version"), "alias": "champion",
                       "cutoff": champion[1].get("cutoff")} if champion is not None else
                      {"name": name, "version": None, "alias": None,
                       "note": "no champion yet (no nightly retraining): fitted at plan time"})
    return jobs, notes


@task(name="nightly-scheduler", cache_policy=NO_CACHE)
def nightly_scheduler(settings: Settings, ws: Workspace, cutoff: datetime) -> dict[str, Any]:
    """A workspace's gated nightly retraining (:func:`pipelines.models.scheduler.nightly_fit`), logged and registered.

    Returns the retraining document plus ``version`` (the new registered version) and
    ``champion_version`` (the champion after this night).
    """
    with Stage("nightly retraining"):
        model, doc = scheduler_forecaster.nightly_fit(settings, ws, cutoff)
        version = tracking_models.register_nightly(settings, ws, model, doc)
    return {**doc, "version": version, "champion_version": version if doc["promoted"] else doc["champion_version_before"]}


class ShippedJobs:
    """The shipped side: traffic from ``[sources.traffic]``'s files, the trace queue, one forecaster per job kind."""

    def __init__(self, settings: Settings, ws: Workspace):
        self.settings, self.ws = settings, ws
        self._models: dict[str, Any] = {}

    def inputs(self, when: datetime, replan: bool = False, ingest: bool = True) -> PlanInputs:
        """The shipped traffic; the plan starts at ``when`` floored to the step, not after the first hour past it."""
        services = self.ws.services()
        ingested = ingest_traffic(services, hourly_raw(self.ws, services, self.traffic_samples()))
        start = min(slot_start(when, self.settings.step_minutes), realtime.plan_start(ingested.frame))
        return PlanInputs(services, None, ingested, start)

    def traffic_samples(self) -> pd.DataFrame:
        """The traffic samples of the source files (``service``, ``ts``, ``value``)."""
        return read_source(self.ws, "traffic").records

    def start_models(self, retrain: bool = False) -> list[Any]:
        """Train or load the three job forecasters in Prefect's thread pool, beside the flow's own work; their futures.

        The tasks overlap the flow's thread (ingest, the realtime fit), not each other: LightGBM's
        native work is one kind at a time (:data:`pipelines.models.jobs.LIGHTGBM_LOCK`).

        No task timeout here: Prefect cannot interrupt a worker thread, and a flow-level timeout would
        move the flow off the main thread, where the solve task's alarm-based ``timeout_seconds`` works;
        training is bounded by LightGBM's fixed number of rounds.
        """
        self._models = {k: train_or_load.submit(self.settings, k, retrain=retrain) for k in JOB_KINDS}
        return list(self._models.values())

    def forecast(self, inputs: PlanInputs) -> QueueForecast:
        """The trace queue at the plan start with each job's duration quantiles and GPUs."""
        models = {k: f.result() for k, f in self._models.items()}
        queue = build_queue(self.settings, Catalog(self.settings).trace_pods(), inputs.start)
        jobs = forecast_jobs(self.settings, models, queue)
        return QueueForecast(jobs, shipped_queue.queue_table(queue),
                             {k: job_forecasters.model_version(self.settings, k) for k in JOB_KINDS})

    def retrain(self, when: datetime, kinds: list[str] | None) -> tuple[dict[str, Any], list[dict], list[str]]:
        """Refit each job forecaster of ``kinds`` (None: all); returns ``(out, metric rows, notes)``."""
        s, rows, models = self.settings, [], {}
        for kind in [k for k in (kinds or JOB_KINDS) if k in JOB_KINDS]:
            train_or_load.with_options(timeout_seconds=s.train_timeout_s)(s, kind, retrain=True)
            models[kind] = str(Catalog(s).model_path(kind))
            v = job_forecasters.model_version(s, kind)
            doc = retrain_rows.unflatten(tracking_runs.run_metrics(s, v["run_id"])) if v.get("run_id") else {}
            rows += retrain_rows.job_model_rows(kind, doc, v)
        return {"models": models}, rows, []


class StoreJobs:
    """The store side: an operator's exports ingested into the store, the scheduler-history forecaster."""

    def __init__(self, settings: Settings, ws: Workspace):
        self.settings, self.ws = settings, ws

    def inputs(self, when: datetime, replan: bool = False, ingest: bool = True) -> PlanInputs:
        """Ingest (unless ``ingest`` is False: the caller did), read the store; the plan starts at the newest export.

        Floored to the step. A re-plan (``replan``) first checks that export and the traffic are at most
        ``[replan] max_input_age_min`` old at ``when`` (:func:`pipelines.stages.queue.store.check_fresh`);
        ``gpuplan run`` plans what it has, from the export's time but not after the end of the traffic.

        Raises:
            pipelines.stages.queue.store.StaleInputError: a re-plan with a stale queue export or traffic.
        """
        ws, services = self.ws, self.ws.services()
        if ingest:
            ingest_sources(ws)
        data = workspace_data(ws)
        traffic_stage.check_services_have_traffic(data.traffic, services, ws.source("traffic").service_label)
        ingested = ingest_traffic(services, hourly_raw(ws, services, data.traffic))
        samples = data.traffic["ts"]
        traffic_end = pd.Timestamp(samples.max()) if len(samples) else pd.Timestamp(realtime.plan_start(ingested.frame))
        if replan:
            store_queue.check_fresh(data.snapshot_at, data.snapshot_file, traffic_end, when,
                                      ws.config.replan.max_input_age_min)
        taken = pd.Timestamp(data.snapshot_at) if data.snapshot_at is not None else pd.Timestamp(when)
        if not replan:
            taken = min(taken, traffic_end)
        return PlanInputs(services, data, ingested, slot_start(taken.to_pydatetime(), self.settings.step_minutes))

    def traffic_samples(self) -> pd.DataFrame:
        """The stored traffic samples (else the sources parsed now)."""
        return workspace_data(self.ws).traffic

    def start_models(self, retrain: bool = False) -> list[Any]:
        """Nothing ahead of the plan: the champion is loaded (or a model fitted) with the queue; no future."""
        return []

    def forecast(self, inputs: PlanInputs) -> QueueForecast:
        """The stored queue with the scheduler-history forecaster's quantiles (``queue_notes`` say which model)."""
        data = inputs.data if inputs.data is not None else workspace_data(self.ws)
        jobs, notes = forecast_cluster_queue(self.settings, self.ws, data, inputs.start)
        users = {str(j): (u if isinstance(u, str) else "") for j, u in zip(data.queue["job_id"], data.queue["user"])}
        return QueueForecast(jobs, store_queue.queue_table(jobs, data.queue), {"scheduler": notes.get("model")},
                             notes, users)

    def retrain(self, when: datetime, kinds: list[str] | None) -> tuple[dict[str, Any], list[dict], list[str]]:
        """Ingest, then the gated nightly refit of the scheduler-history forecaster; ``(out, metric rows, notes)``."""
        s, ws = self.settings, self.ws
        ingest_sources(ws)
        out: dict[str, Any] = {}
        rows: list[dict] = []
        notes: list[str] = []
        if kinds is None or "scheduler" in kinds:
            res = nightly_scheduler.with_options(timeout_seconds=s.train_timeout_s)(s, ws, when)
            out.update({"models": {"scheduler": str(scheduler_forecaster.model_path(s))}, **res})
            rows += retrain_rows.scheduler_rows(res, res.get("version"))
            notes.append(f"scheduler: {res.get('reason')}")
        out.setdefault("models", {})
        return out, rows, notes


#: The job sides by :func:`pipelines.config.settings.job_side`.
JOB_SOURCES: dict[str, type[ShippedJobs] | type[StoreJobs]] = {"shipped": ShippedJobs, "store": StoreJobs}


def job_source(settings: Settings, ws: Workspace) -> ShippedJobs | StoreJobs:
    """The side of ``ws`` (module docstring), with the run's settings."""
    return JOB_SOURCES[job_side(ws)](settings, ws)
