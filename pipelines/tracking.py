"""MLflow tracking for gpuplan: one experiment per forecaster, one for plans, one for benchmarks.

All MLflow code of the pipelines is here: the store (:func:`init_store`), one generic run
(:func:`log_run`), and one function per kind of run: a real-time profile (:func:`log_profile_run`),
a trained job forecaster (:func:`log_job_model_run`, which logs the model with :func:`log_job_model`),
a published plan (:func:`log_plan_run`) and a benchmark (:func:`log_benchmark_run`).

The tracking URI is always explicit (from :class:`pipelines.config.Settings`, case C28); the
store is initialised once, before any fan-out (:func:`init_store`), because several processes
creating the schema of a new SQLite database at once race on migration (case C26). Each
experiment gets an explicit artifact location under ``settings.artifact_root`` so nothing is
written to ``./mlruns`` of the current directory.

SQLite concurrency: :func:`init_store` switches the database to WAL journaling (readers do not
block the writer; persistent in the file) and MLflow 3 sets ``PRAGMA busy_timeout = 20000``
(20 s) on every session it opens (``mlflow/store/db/utils.py``), so concurrent writers wait
instead of failing with "database is locked".

Logging goes through :class:`mlflow.MlflowClient` with explicit run ids (thread-safe, no
global active run), except model logging, which needs MLflow's fluent API. Job forecasters are
logged through one path, :func:`log_job_model` (lightgbm flavour + registered pyfunc, one
pip-requirement list :func:`model_pip_requirements`).

(Over 400 lines on purpose: it is the one module that holds MLflow code, one function per kind of run.)
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import pickle
import posixpath
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import lightgbm
import numpy as np
import pandas as pd
import pyarrow

from forecasters.jobs import predict as job_predict
from pipelines import job_models
from pipelines.catalog import MODEL_RUN_FILES
from pipelines.config import Settings
from pipelines.errors import InputError
from pipelines.io.run_folder import file_lock
from pipelines.report.plots import plot_pred_vs_actual

# mlflow is imported inside the functions that use it, not here: ``import mlflow`` costs ~1.0 s on the
# 2-core machine (measured: pandas alone 0.49 s, pandas + mlflow 1.47 s), and `gpuplan predict` imports
# this module (through pipelines.model_store) but logs nothing when the saved model exists.

#: experiment key -> experiment name
EXPERIMENTS: dict[str, str] = {
    "training": "gpuplan-forecaster-training",
    "quantization": "gpuplan-forecaster-quantization",
    "batch_inference": "gpuplan-forecaster-batch_inference",
    "realtime": "gpuplan-forecaster-realtime",
    "scheduler": "gpuplan-forecaster-scheduler",
    "plans": "gpuplan-plans",
    "benchmarks": "gpuplan-benchmarks",
}

def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, or None for any other scheme."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri[len("sqlite:///"):].split("?", 1)[0])


def _client(settings: Settings):
    from mlflow import MlflowClient  # lazily: import cost, see the top of the module

    return MlflowClient(tracking_uri=settings.tracking_uri, registry_uri=settings.tracking_uri)


def _init_lock(settings: Settings):
    settings.mlruns_dir.mkdir(parents=True, exist_ok=True)
    db = sqlite_path(settings.tracking_uri)
    return file_lock((db.parent if db is not None else settings.mlruns_dir) / ".init.lock")


class StoreError(InputError):
    """The MLflow store cannot be used (old schema, locked, read-only, missing folder): one line with the fix."""


def store_error(settings: Settings, exc: BaseException) -> StoreError:
    """The one-line :class:`StoreError` for an exception raised while opening or writing the MLflow store.

    Recognised: an out-of-date schema (MLflow's "Detected out-of-date database schema": the exact
    ``mlflow db upgrade`` command of this environment), a locked database, a read-only database or
    folder, a missing folder; anything else is named with its first line.
    """
    uri = settings.tracking_uri
    text = " ".join(str(exc).split())
    low = text.lower()
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    db = sqlite_path(uri)
    if "out-of-date database schema" in low or "alembic" in low and "revision" in low:
        return StoreError(f"MLflow store {uri} has an older database schema than the installed MLflow: back up "
                          f"{db or 'the database'}, then run '{mlflow_bin} db upgrade {uri}'")
    if "database is locked" in low:
        return StoreError(f"MLflow store {uri} is locked by another process: wait for it to finish (or stop it) "
                          f"and retry")
    if "readonly" in low or "read-only" in low or isinstance(exc, PermissionError):
        return StoreError(f"MLflow store {uri} is read-only ({text[:120]}): make {db or 'it'} and its folder "
                          f"writable, or set GPUPLAN_TRACKING_URI to a writable store")
    if "unable to open database file" in low or isinstance(exc, FileNotFoundError):
        where = db.parent if db is not None else uri
        return StoreError(f"MLflow store {uri} cannot be opened: folder {where} is missing or not writable; create "
                          f"it or set GPUPLAN_TRACKING_URI")
    return StoreError(f"MLflow store {uri} cannot be used: {type(exc).__name__}: {text[:200]}")


def init_store(settings: Settings) -> dict[str, str]:
    """Create the tracking database (schema), WAL mode and every experiment; idempotent.

    Call once per process tree before starting concurrent work. Also sets the process-wide
    tracking and registry URIs to ``settings.tracking_uri``.

    Returns:
        experiment key -> experiment id.

    Raises:
        StoreError: the store cannot be used (:func:`store_error`: one line naming the store and the fix).
    """
    try:
        _preflight_sqlite(settings)
        return _init_store(settings)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - the store boundary: one line, never a traceback
        raise store_error(settings, exc) from None


def _preflight_sqlite(settings: Settings) -> None:
    """Open a SQLite store directly first (2 s timeout): MLflow retries a failing engine for ~100 s before it gives up.

    Raises the :mod:`sqlite3` error of a path that is a folder, a file that is not a database, a
    database locked by another writer or read-only; a missing database is fine (MLflow creates it).
    """
    db = sqlite_path(settings.tracking_uri)
    if db is None:
        return
    if db.exists() and not db.is_file():
        raise sqlite3.OperationalError("unable to open database file (the path is a folder)")
    if not db.exists():
        return
    con = sqlite3.connect(db, timeout=2)
    try:
        con.execute("PRAGMA schema_version").fetchone()
        con.execute("BEGIN IMMEDIATE")  # needs the write lock: a locked or read-only database fails here
        con.execute("ROLLBACK")
    finally:
        con.close()


def _init_store(settings: Settings) -> dict[str, str]:
    import mlflow  # lazily: import cost, see the top of the module

    mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_registry_uri(settings.tracking_uri)
    with _init_lock(settings):
        client = _client(settings)  # creates/migrates the schema for a new SQLite file
        ids: dict[str, str] = {}
        for key, name in EXPERIMENTS.items():
            exp = client.get_experiment_by_name(name)
            if exp is None:
                location = (settings.artifact_root / name).resolve()
                location.mkdir(parents=True, exist_ok=True)
                ids[key] = client.create_experiment(name, artifact_location=location.as_uri())
            else:
                ids[key] = exp.experiment_id
        db = sqlite_path(settings.tracking_uri)
        if db is not None:
            con = sqlite3.connect(db, timeout=20)
            try:
                con.execute("PRAGMA journal_mode=WAL")
            finally:
                con.close()
    return ids


def _clean_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in metrics.items():
        if v is None or isinstance(v, bool):
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out[k] = f
    return out


#: A parameter value that is a list (or tuple) longer than this is logged as a JSON artifact
#: ``params/<key>.json`` instead (a parameter is one short setting; MLflow caps values at 6,000 characters).
MAX_PARAM_ITEMS = 20


def split_params(params: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """``(params, long_lists)``: values as text (None dropped), and list values of more than :data:`MAX_PARAM_ITEMS` items.

    A long list keeps a short parameter naming where it went: ``"<n> values: params/<key>.json"``.
    """
    short: dict[str, str] = {}
    lists: dict[str, Any] = {}
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)) and len(v) > MAX_PARAM_ITEMS:
            lists[k] = list(v)
            short[k] = f"{len(v)} values: params/{k}.json"
        else:
            short[k] = str(v)[:6000]
    return short, lists


def log_run(
    settings: Settings,
    experiment: str,
    run_name: str,
    *,
    params: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
    artifacts: Mapping[str, Path] | None = None,
    metric_steps: Mapping[str, Sequence[float]] | None = None,
    status: str = "FINISHED",
) -> str:
    """Create one finished MLflow run in ``EXPERIMENTS[experiment]`` and return its run id.

    Args:
        settings: where the store is (``tracking_uri``).
        experiment: a key of :data:`EXPERIMENTS`.
        run_name: the run's name (:func:`run_name`).
        params: logged as strings; None values skipped; a list longer than :data:`MAX_PARAM_ITEMS` goes to
            the artifact ``params/<key>.json`` (:func:`split_params`).
        metrics: numeric values; None, NaN, inf and non-numeric values are skipped (MLflow
            refuses NaN in SQLite stores).
        artifacts: artifact path inside the run (``plots/gantt.png``) -> local file; the file is
            stored under the key's folder with its own name.
        metric_steps: metric name -> values logged as one metric history, step 0, 1, ... (a curve in
            the UI, e.g. a cross-validation loss per boosting round); non-finite values skipped.
        tags: run tags.
        status: terminal status, ``FINISHED`` or ``FAILED``.

    Raises:
        KeyError: unknown experiment key.
    """
    from mlflow.entities import Metric, Param  # lazily: import cost, see the top of the module

    client = _client(settings)
    exp = client.get_experiment_by_name(EXPERIMENTS[experiment])
    exp_id = exp.experiment_id if exp is not None else init_store(settings)[experiment]
    run = client.create_run(exp_id, run_name=run_name, tags=dict(tags or {}))
    rid = run.info.run_id
    try:
        now_ms = int(time.time() * 1000)
        m = [Metric(k, v, now_ms, 0) for k, v in _clean_metrics(metrics or {}).items()]
        for key, values in (metric_steps or {}).items():
            m += [Metric(key, float(v), now_ms, i) for i, v in enumerate(values)
                  if v is not None and math.isfinite(float(v))]
        short, lists = split_params(params or {})
        p = [Param(k, v) for k, v in short.items()]
        for i in range(0, max(len(m), len(p)), 100):
            client.log_batch(rid, metrics=m[i:i + 100], params=p[i:i + 100])
        if lists:
            with tempfile.TemporaryDirectory() as td:
                for key, values in lists.items():
                    f = Path(td) / f"{key}.json"
                    f.write_text(json.dumps(values))
                    client.log_artifact(rid, str(f), artifact_path="params")
        for key, path in (artifacts or {}).items():
            client.log_artifact(rid, str(path), artifact_path=posixpath.dirname(key) or None)
    except BaseException:
        client.set_terminated(rid, status="FAILED")
        raise
    client.set_terminated(rid, status=status)
    return rid


def _cut_text(ts: Any) -> str:
    """A cut-off instant as text: ``2025-03-14`` at midnight UTC, else ``2025-03-16 15:00Z``."""
    t = pd.Timestamp(ts)
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    return t.strftime("%Y-%m-%d") if (t.hour, t.minute, t.second) == (0, 0, 0) else t.strftime("%Y-%m-%d %H:%MZ")


def run_name(kind: str, cutoff: Any, subject: str | None = None, on: datetime | None = None) -> str:
    """An MLflow run name: kind, what it is about, data cut-off and the date it ran (UTC).

    ``run_name("realtime", "2025-03-14T00:00Z", on=...)`` -> ``"realtime cutoff=2025-03-14 2026-12-01"``;
    ``run_name("profile", ts, "m-small")`` -> ``"profile m-small cutoff=2025-03-16 15:00Z 2026-12-01"``.
    ``cutoff``: the newest data the run used (None: left out); ``on``: default now.
    """
    day = (pd.Timestamp(on) if on is not None else pd.Timestamp.now(tz="UTC")).strftime("%Y-%m-%d")
    parts = [kind] + ([subject] if subject else []) + ([f"cutoff={_cut_text(cutoff)}"] if cutoff is not None else [])
    return " ".join([*parts, day])


def run_link(settings: Settings, run_id: str) -> dict[str, Any]:
    """Where an MLflow run is: ``{"run_id", "experiment", "tracking_uri", "url"}``.

    ``url`` is the run's page in the MLflow UI at ``settings.mlflow_ui_url``
    (``<ui>/#/experiments/<experiment id>/runs/<run id>``, the MLflow UI's route), None without a UI URL.
    """
    run = _client(settings).get_run(run_id)
    exp = _client(settings).get_experiment(run.info.experiment_id)
    url = (f"{settings.mlflow_ui_url}/#/experiments/{run.info.experiment_id}/runs/{run_id}"
           if settings.mlflow_ui_url else None)
    return {"run_id": run_id, "experiment": exp.name, "tracking_uri": settings.tracking_uri, "url": url}


_QUIET_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_mlflow() -> Iterator[None]:
    """Silence MLflow's INFO/WARNING chatter and its registration prints (stderr) for the CLI bars."""
    with _QUIET_LOCK:  # redirect_stderr is process-wide: one model logging at a time
        logger = logging.getLogger("mlflow")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                yield
        finally:
            logger.setLevel(level)


def model_pip_requirements() -> list[str]:
    """The pip requirements of every logged model: the installed versions, pinned.

    Pinned because the pyfunc forecaster is unpickled by reference and the boosters are LightGBM
    text models: the versions they were logged (and checked) with are the ones known to load
    them. Given explicitly, ``log_model`` skips its ~10 s requirement inference (docs/STACK.md).
    """
    import mlflow  # lazily: import cost, see the top of the module

    return [
        f"lightgbm=={lightgbm.__version__}",
        f"pandas=={pd.__version__}",
        f"numpy=={np.__version__}",
        f"pyarrow=={pyarrow.__version__}",
        f"mlflow=={mlflow.__version__}",
    ]


def registered_model_name(kind: str) -> str:
    """Name of the registered forecaster of ``kind`` (``gpuplan-<kind>-forecaster``)."""
    return f"gpuplan-{kind}-forecaster"


def log_job_model(
    settings: Settings,
    run_id: str,
    model: Any,
    example_jobs: Any,
    *,
    alias: str = "champion",
    description: str | None = None,
    version_tags: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Log a job forecaster to ``run_id``, register it and point ``alias`` at it (case C11).

    The one model-logging path: the main job's training (:func:`log_job_model_run` from
    :func:`pipelines.model_store.train_or_load`, run by ``gpuplan run``, the nightly flow and
    ``gpuplan predict`` when no model is saved) calls it. Logged:

    * ``duration_lgbm``, ``gpus_lgbm``: the two boosters in the **lightgbm flavour**, unchanged,
      so ``mlflow.lightgbm.load_model`` gives back a booster whose stored category lists
      (``pandas_categorical``) are the model's fixed level lists; it takes the forecaster's design
      matrix (``model.design_matrix``, ``category`` columns; the GPU booster its first
      ``booster.feature_name()`` columns). Signature: the design matrix with
      categoricals as strings (MLflow has no category type, docs/STACK.md). No input example:
      MLflow validates one through the generic pyfunc, which cannot cast strings to categories.
    * ``forecaster``: the whole forecaster as a **pyfunc**
      (:class:`pipelines.job_models.JobModelPyfunc`), the registered, servable model: input
      ``job_id`` + the raw feature columns with categoricals as plain strings (as parsed from
      JSON), output the prediction frame of ``forecasters.jobs.predict`` (``flags`` joined with
      ``;``). Signature and input example (``example_jobs``, at most 5 rows).

    The forecaster is registered as a new version of :func:`registered_model_name` with ``alias``
    pointed at it (aliases, not the deprecated stages), the version's ``description`` and its tags
    ``version_tags`` (the holdout metrics, :func:`holdout_tags`); ``mlflow.pyfunc.load_model(
    "models:/gpuplan-<kind>-forecaster@champion")`` serves it. Before registering, the logged
    pyfunc is reloaded and must reproduce the in-memory predictions on the example (1e-9 h).

    Args:
        settings: where the store and registry are (``tracking_uri``).
        run_id: an existing run (e.g. from :func:`log_run`); reopened and finished again.
        model: a fitted :class:`forecasters.jobs.JobModel`.
        example_jobs: ``(n >= 1, ...)`` jobs with the kind's raw feature columns (``job_id``
            optional); the first 5 rows are used.
        alias: registry alias pointed at the new version.
        description: the new version's description in the registry (None: none).
        version_tags: the new version's tags (the holdout metrics, :func:`holdout_tags`); values as text.

    Returns:
        ``{"run_id", "duration_uri", "gpus_uri", "pyfunc_uri", "registered_name", "version"}``.

    Raises:
        ValueError: the reloaded pyfunc does not reproduce the forecaster's predictions.
    """
    import mlflow  # lazily: import cost, see the top of the module
    import mlflow.lightgbm
    import mlflow.pyfunc
    from mlflow.models import infer_signature

    mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_registry_uri(settings.tracking_uri)
    raw = job_models.raw_feature_frame(model, example_jobs.head(5))
    design = model.design_matrix(raw.drop(columns="job_id"))
    design_str = design.copy()
    for c in model.spec.categorical:
        design_str[c] = design_str[c].astype(object).astype(str)
    expected = job_models.pyfunc_output(job_predict(model, raw))
    reqs = model_pip_requirements()
    name = registered_model_name(model.kind)
    uris: dict[str, str] = {"run_id": run_id}
    with _quiet_mlflow(), mlflow.start_run(run_id=run_id):
        for key, booster in (("duration", model.duration_booster), ("gpus", model.gpus_booster)):
            cols = list(booster.feature_name())  # the GPU booster takes a prefix of the design matrix
            sig = infer_signature(design_str[cols], booster.predict(design[cols]))
            info = mlflow.lightgbm.log_model(booster, name=f"{key}_lgbm", signature=sig, pip_requirements=reqs)
            uris[f"{key}_uri"] = info.model_uri
        with tempfile.TemporaryDirectory() as td:
            saved = job_models.save_model(model, Path(td) / "job_model")
            info = mlflow.pyfunc.log_model(
                name="forecaster",
                python_model=job_models.JobModelPyfunc(),
                artifacts={"job_model": str(saved)},
                signature=infer_signature(raw, expected),
                input_example=raw,
                pip_requirements=reqs,
            )
        uris["pyfunc_uri"] = info.model_uri
        got = mlflow.pyfunc.load_model(info.model_uri).predict(raw)
        for col in ("duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred"):
            if not np.allclose(got[col].to_numpy(float), expected[col].to_numpy(float), rtol=0, atol=1e-9):
                raise ValueError(f"{name}: the logged pyfunc does not reproduce {col} of the forecaster")
        mv = mlflow.register_model(info.model_uri, name, tags=_tag_values(version_tags or {}))
    describe_version(settings, name, str(mv.version), description)
    _client(settings).set_registered_model_alias(name, alias, mv.version)
    return {**uris, "registered_name": name, "version": str(mv.version)}


def _tag_values(tags: Mapping[str, Any]) -> dict[str, str]:
    """Tag values as text (floats to 6 significant digits); None dropped."""
    return {k: (f"{v:.6g}" if isinstance(v, float) else str(v)) for k, v in tags.items() if v is not None}


def holdout_tags(metrics: Mapping[str, Any], prefix: str = "holdout.") -> dict[str, float]:
    """Registry version tags of holdout metrics: finite numbers of ``metrics`` (flat) as ``<prefix><name>``."""
    return {f"{prefix}{k}": float(v) for k, v in _clean_metrics(metrics).items()}


def describe_version(settings: Settings, name: str, version: str, description: str | None) -> None:
    """Set a registered model version's description (``MlflowClient.update_model_version``); None: nothing."""
    if description:
        _client(settings).update_model_version(name, version, description=description)


def alias_version(settings: Settings, name: str, alias: str) -> str | None:
    """The version (text) a registered model's ``alias`` points at, or None when it has none."""
    try:
        return str(_client(settings).get_model_version_by_alias(name, alias).version)
    except Exception:  # noqa: BLE001 - MLflow raises a RestException for a missing alias or model
        return None


def finished_runs(settings: Settings, experiment: str) -> list[Any]:
    """Finished runs of one experiment (newest first)."""
    client = _client(settings)
    exp = client.get_experiment_by_name(EXPERIMENTS[experiment])
    if exp is None:
        return []
    return [r for r in client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])
            if r.info.status == "FINISHED"]


def run_metrics(settings: Settings, run_id: str) -> dict[str, float]:
    """The latest value of every metric of one MLflow run (flat names, as logged)."""
    return dict(_client(settings).get_run(run_id).data.metrics)


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dict -> flat ``a.b.c`` keys (metrics of a run)."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def units_slug(units: str) -> str:
    """Units as a metric-name part: ``"requests/h"`` -> ``"requests_per_h"`` (letters, digits, ``_``)."""
    slug = units.strip().replace("/", "_per_")
    return "".join(c if c.isalnum() or c == "_" else "_" for c in slug).strip("_") or "units"


def selection_metrics(selection: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
    """Params and metrics of a real-time choice by backtest (:attr:`pipelines.stages.realtime.ProfileFit.selection`).

    Params: ``selection.rule``, ``selection.candidates`` (comma-joined), ``selection.failed`` (candidate:
    reason), ``hourly.kind`` (``combination`` or ``persistence``), ``hourly.read_flagged``, ``p90.kind``.
    Metrics (``<u>`` = :func:`units_slug` of ``units``): ``cand.<name>.mae_<u>`` (the candidate's day-ahead
    backtest MAE), ``cand.<name>.weight``, ``selection.n_inner_origins``, ``selection.n_scored_h``,
    ``hourly.rho``, ``hourly.coef.<feature>`` (the hourly change model's coefficients),
    ``hourly.weight.<model>`` (its combination weights), ``hourly.mae_<u>`` / ``hourly.persistence_mae_<u>`` /
    ``hourly.day_ahead_mae_<u>`` (one-hour-ahead backtest MAE of the hourly mode, of persistence, of the
    day-ahead P50), ``p90.q_band<k>`` (the conformal quantile per hour band: a ratio to P50, or traffic units
    when the kind is additive), ``p90.alpha`` (the miss rate it is taken at, after the adaptive update),
    ``hourly.q90``. A selection record without a key logs nothing for it (``hourly.w``: the anchor weight of
    records written before the hourly change model).
    """
    u = units_slug(str(selection.get("units", "traffic/h")))
    cands = selection.get("candidates", {})
    hourly = selection.get("hourly", {})
    params = {"selection.rule": selection.get("rule"), "selection.candidates": ",".join(cands),
              "selection.failed": "; ".join(f"{k}: {v}" for k, v in selection.get("failed", {}).items()) or None,
              "hourly.kind": hourly.get("kind"), "p90.kind": selection.get("p90", {}).get("kind")}
    if "read_flagged" in hourly:
        params["hourly.read_flagged"] = bool(hourly["read_flagged"])
    metrics: dict[str, float] = {"selection.n_inner_origins": selection.get("n_inner_origins"),
                                 "selection.n_scored_h": selection.get("n_scored_h")}
    for name, c in cands.items():
        metrics[f"cand.{name}.mae_{u}"] = c.get("mae")
        metrics[f"cand.{name}.weight"] = c.get("weight")
    metrics.update({"hourly.w": hourly.get("w"), "hourly.rho": hourly.get("rho"), "hourly.q90": hourly.get("q90"),
                    f"hourly.mae_{u}": hourly.get("mae_hourly"),
                    f"hourly.persistence_mae_{u}": hourly.get("mae_persistence"),
                    f"hourly.day_ahead_mae_{u}": hourly.get("mae_day_ahead")})
    for k, q in enumerate(selection.get("p90", {}).get("bands", [])):
        metrics[f"p90.q_band{k}"] = q
    metrics["p90.alpha"] = selection.get("p90", {}).get("alpha")
    for f, b in hourly.get("coef", {}).items():
        metrics[f"hourly.coef.{f}"] = b
    for m, v in hourly.get("weights", {}).items():
        metrics[f"hourly.weight.{m}"] = v
    return params, {k: v for k, v in metrics.items() if v is not None}


def log_profile_run(settings: Settings, service: str, profile: Any, metrics: Mapping[str, Any], as_of: datetime,
                    png: Path, selection: Mapping[str, Any] | None = None) -> str:
    """Log one service's real-time forecast to the ``realtime`` experiment; returns the run id.

    Params: service, method, status, timezone, components, ``as_of``, and with ``selection`` the choice
    by backtest (:func:`selection_metrics`). Metrics: the band metrics of
    :class:`pipelines.stages.realtime.ProfileFit` and, with ``selection``, each candidate's backtest
    score and weight and the hourly mode's scores (:func:`selection_metrics`). Artifact: the profile
    plot ``png``.
    """
    params = {"service": service, "method": profile.method, "status": profile.status,
              "timezone": profile.timezone, "components": ",".join(profile.components),
              "as_of": as_of.isoformat()}
    all_metrics = band_metrics(metrics, (selection or {}).get("units", "traffic/h"))
    if selection:
        sel_params, sel_metrics = selection_metrics(selection)
        params.update(sel_params)
        all_metrics.update(sel_metrics)
    cutoff = pd.Timestamp(as_of) - pd.Timedelta(hours=1)  # the newest hour the forecast read
    return log_run(settings, "realtime", run_name("profile", cutoff, service), params=params, metrics=all_metrics,
                   artifacts={f"plots/{png.name}": png}, tags={"gpuplan.stage": "profile", "gpuplan.service": service})


#: Band metric of :class:`pipelines.stages.realtime.ProfileFit` -> its MLflow name (``{u}``: the units slug).
BAND_METRIC_NAMES = {"band_mae": "band_mae_{u}", "band_mape": "band_mape_frac",
                     "band_p90_coverage": "band_p90_coverage_frac", "level_factor": "level_factor_ratio",
                     "history_hours": "history_h"}


def band_metrics(metrics: Mapping[str, Any], units: str) -> dict[str, Any]:
    """A service's last-day band metrics with units in their names (:data:`BAND_METRIC_NAMES`).

    ``band_mae`` -> ``band_mae_<units slug>`` (:func:`units_slug`: ``requests/h`` -> ``requests_per_h``),
    ``band_mape`` -> ``band_mape_frac``, ``band_p90_coverage`` -> ``band_p90_coverage_frac``; other keys kept.
    """
    u = units_slug(units)
    return {BAND_METRIC_NAMES.get(k, k).format(u=u): v for k, v in metrics.items()}


def _ratio_metrics(prefix: str, m: Mapping[str, Any], u: str) -> dict[str, Any]:
    """One backtest variant's metrics with units in their names (``mae_<u>``, ``*_ratio``, ``*_frac``)."""
    return {f"{prefix}mae_{u}": m.get("mae"), f"{prefix}mase_snaive168_ratio": m.get("mase_snaive168"),
            f"{prefix}mase_naive24_ratio": m.get("mase_naive24"),
            f"{prefix}mase_persistence_ratio": m.get("mase_persistence"), f"{prefix}mape_frac": m.get("mape"),
            f"{prefix}p90_coverage_frac": m.get("p90_coverage")}


def realtime_backtest_metrics(doc: Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of the real-time rolling-origin backtest (:func:`pipelines.stages.realtime.backtest_report`).

    Per service ``s`` with units slug ``u`` (:func:`units_slug`: ``requests/h`` -> ``requests_per_h``):
    ``rt.<s>.mae_<u>``, ``rt.<s>.mase_snaive168_ratio``, ``rt.<s>.mase_naive24_ratio``,
    ``rt.<s>.mase_persistence_ratio``, ``rt.<s>.mape_frac``, ``rt.<s>.p90_coverage_frac`` (the day-ahead
    P50/P90); the same under ``rt.<s>.hourly.`` (one hour ahead); ``rt.<s>.baseline.<b>.mae_<u>`` (seasonal
    naive 168 h, naive 24 h, persistence on the same hours); ``rt.<s>.cand.<c>.mae_<u>`` and
    ``rt.<s>.cand.<c>.mase_naive24_ratio`` (each candidate), ``rt.<s>.weight.<c>``; ``rt.<s>.n_scored_h``,
    ``rt.<s>.n_origins``, ``rt.<s>.masked_h``. A MASE whose baseline error is 0 (None) is left out.
    """
    out: dict[str, Any] = {}
    for svc, d in (doc.get("services") or {}).items():
        u, p = units_slug(str(d.get("units", "traffic/h"))), f"rt.{svc}."
        out.update(_ratio_metrics(p, d.get("metrics") or {}, u))
        out.update(_ratio_metrics(f"{p}hourly.", d.get("hourly_recal") or {}, u))
        for b, m in (d.get("baselines") or {}).items():
            out[f"{p}baseline.{b}.mae_{u}"] = m.get("mae")
        for c, m in (d.get("candidates") or {}).items():
            out[f"{p}cand.{c}.mae_{u}"] = m.get("mae")
            out[f"{p}cand.{c}.mase_naive24_ratio"] = m.get("mase_naive24")
            out[f"{p}cand.{c}.mase_snaive168_ratio"] = m.get("mase_snaive168")
        for c, w in (d.get("weights") or {}).items():
            out[f"{p}weight.{c}"] = w
        out.update({f"{p}n_scored_h": d.get("n_hours"), f"{p}n_origins": d.get("n_days"),
                    f"{p}masked_h": d.get("masked_hours")})
    return _clean_metrics(out)


def log_realtime_backtest(settings: Settings, doc: Mapping[str, Any], hours: Mapping[str, pd.DataFrame] | None = None,
                          stage: str = "nightly", on: datetime | None = None) -> str:
    """Log the real-time rolling-origin backtest of every service as one run of the ``realtime`` experiment.

    One run per retraining (the nightly flow, ``gpuplan train --kind realtime``), named
    ``realtime cutoff=<newest traffic hour> <date>`` (:func:`run_name`). Metrics:
    :func:`realtime_backtest_metrics`. Params per service: status, units, method, first and last origin,
    horizon; ``cutoff``. Artifacts: the document ``backtest/realtime_backtest.json`` and, with ``hours``
    (:func:`pipelines.stages.realtime.backtest_report`'s ``hours_out``), the forecast-against-actual plot
    ``plots/backtest_realtime.png`` (:func:`pipelines.report.backtest_plot.plot_backtest`). Tag ``gpuplan.stage`` =
    ``stage``. Returns the run id.
    """
    from pipelines.report.backtest_plot import plot_backtest

    svcs = doc.get("services") or {}
    cutoffs = [d["cutoff"] for d in svcs.values() if d.get("cutoff")]
    cutoff = max(cutoffs, key=pd.Timestamp) if cutoffs else None
    params: dict[str, Any] = {"services": ",".join(svcs), "cutoff": cutoff}
    for svc, d in svcs.items():
        origins = d.get("origins") or []
        params.update({f"rt.{svc}.status": d.get("status"), f"rt.{svc}.units": d.get("units"),
                       f"rt.{svc}.method": d.get("method"), f"rt.{svc}.horizon_h": d.get("horizon_h"),
                       f"rt.{svc}.origins": f"{origins[0]} .. {origins[-1]}" if origins else None})
    with tempfile.TemporaryDirectory() as td:
        js = Path(td) / "realtime_backtest.json"
        js.write_text(json.dumps(doc, indent=1, default=str))
        arts = {"backtest/realtime_backtest.json": js}
        if hours:
            png = Path(td) / "backtest_realtime.png"
            plot_backtest(hours, {k: str(d.get("units", "traffic/h")) for k, d in svcs.items()}, png)
            arts["plots/backtest_realtime.png"] = png
        return log_run(settings, "realtime", run_name("realtime", cutoff, on=on), params=params,
                       metrics=realtime_backtest_metrics(doc), artifacts=arts,
                       tags={"gpuplan.stage": stage, "gpuplan.kind": "realtime",
                             "mlflow.note.content": realtime_backtest_note(doc)})


def realtime_backtest_note(doc: Mapping[str, Any]) -> str:
    """The run's description (MLflow's ``mlflow.note.content`` tag, shown as "Description"): one line per service.

    ``<service>: day-ahead MAE <mae> <units> = <r168> x seasonal naive 168 h, <r24> x naive 24 h; P90 coverage
    <c> over <n> hours (<k> daily origins up to <cutoff>)``.
    """
    def r(v: Any) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    lines = ["Rolling-origin backtest of the real-time forecast (24 h ahead, each origin refitted on the hours "
             "before it):", ""]
    for svc, d in (doc.get("services") or {}).items():
        m = d.get("metrics") or {}
        lines.append(f"- {svc}: day-ahead MAE {m.get('mae', float('nan')):,.0f} {d.get('units')} = "
                     f"{r(m.get('mase_snaive168'))} x seasonal naive 168 h, {r(m.get('mase_naive24'))} x naive 24 h; "
                     f"P90 coverage {r(m.get('p90_coverage'))} over {d.get('n_hours')} hours ({d.get('n_days')} daily "
                     f"origins up to {d.get('cutoff')})")
    return "\n".join(lines)


def log_job_model_run(settings: Settings, kind: str, model: Any, doc: Mapping[str, Any], test: pd.DataFrame,
                      held_out: tuple[pd.DataFrame, np.ndarray, np.ndarray], source: str,
                      alias: str = "champion") -> str:
    """Log a trained ``kind`` forecaster to its experiment; returns the run id.

    Params: kind, history path (``source``), level-list version, train/test sizes, model info.
    Metrics: the evaluation document ``doc`` flattened (:func:`flatten`). Artifacts: the
    predicted-vs-actual plot of the held-out jobs (``held_out`` = predictions, actual hours, ok mask;
    :func:`pipelines.stages.models.held_out`) and the level lists; then the model itself
    (:func:`log_job_model`, with the first test jobs as input example).
    """
    pred, actual, ok = held_out
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / MODEL_RUN_FILES["pred_vs_actual_plot"].format(kind=kind)
        plot_pred_vs_actual(kind, pred, actual, ok, dict(doc), png)
        levels = Path(tmp) / MODEL_RUN_FILES["levels"]
        levels.write_text(json.dumps({"levels_version": model.levels_version, "levels": model.levels}))
        params = {"kind": kind, "history": source, "levels_version": model.levels_version,
                  "n_train": doc.get("n_train"), "n_test": doc.get("n_test"),
                  **{f"info.{k}": v for k, v in model.info.items() if not isinstance(v, dict)}}
        curve = model.info.get("oof_mse_log_by_round")
        cutoff = _data_cutoff(test)
        rid = log_run(settings, kind, run_name(kind, cutoff), params={**params, "cutoff": cutoff},
                      metrics=flatten(doc), artifacts={f"plots/{png.name}": png, "model_meta/levels.json": levels},
                      metric_steps={"cv.oof_mse_log": curve} if isinstance(curve, (list, tuple)) else None,
                      tags={"gpuplan.stage": "train", "gpuplan.kind": kind})
    m = doc.get("metrics") or {}
    description = (f"{kind} duration forecaster (LightGBM, P10/P50/P90 hours and GPUs), trained on the "
                   f"{doc.get('n_train')} earliest jobs of {Path(source).name} up to {cutoff or 'n/a'}; held out: the "
                   f"{doc.get('n_test')} latest. Holdout MAE {m.get('mae_h', float('nan')):.3f} h; baselines "
                   + ", ".join(f"{b} {v.get('mae_h', float('nan')):.3f} h" for b, v in (doc.get("baselines") or {}).items())
                   + f". MLflow run {rid}.")
    tags = {**holdout_tags(m), **holdout_tags({f"{b}.mae_h": v.get("mae_h") for b, v in
                                               (doc.get("baselines") or {}).items()}, "holdout.baseline."),
            "holdout.n_jobs": doc.get("n_test"), "cutoff": cutoff}
    log_job_model(settings, rid, model, test.head(5), alias=alias, description=description, version_tags=tags)
    return rid


def _data_cutoff(frame: pd.DataFrame) -> str | None:
    """The newest ``submitted_at`` of ``frame`` (ISO, UTC), None without that column or any value."""
    if "submitted_at" not in frame or frame.empty:
        return None
    t = pd.to_datetime(frame["submitted_at"], utc=True).max()
    return None if pd.isna(t) else t.isoformat()


def scheduler_model_name(workspace: Path) -> str:
    """Registered name of a workspace's scheduler forecaster: ``gpuplan-scheduler-<folder name>``."""
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(workspace).name) or "workspace"
    return f"gpuplan-scheduler-{slug}"


def log_scheduler_model_run(settings: Settings, ws: Any, model: Any, doc: Mapping[str, Any], alias: str) -> str:
    """Log one nightly retraining of a workspace's scheduler forecaster; register it; point ``alias`` at it.

    Run in the ``scheduler`` experiment: params (workspace, cut-off, promoted, reason, the champion
    version before), metrics (history/train/holdout rows, the candidate's and the champion's holdout
    evaluations, flattened), the model as a pyfunc (:mod:`pipelines.scheduler_models`) registered as a
    new version of :func:`scheduler_model_name` with ``alias`` (``champion`` or ``challenger``).

    Returns the registered version (text).
    """
    import mlflow  # lazily: import cost, see the top of the module
    import mlflow.pyfunc

    from pipelines import scheduler_models

    params = {"workspace": str(ws.root), "cutoff": doc.get("cutoff"), "promoted": doc.get("promoted"),
              "reason": doc.get("reason"), "alias": alias, "champion_version_before": doc.get("champion_version_before"),
              "mode": getattr(model, "mode", None)}
    metrics = {k: doc.get(k) for k in ("history_rows", "train_rows", "holdout_rows")}
    for key in ("candidate", "champion"):
        if doc.get(key):
            metrics.update(flatten(doc[key], f"{key}."))
    rid = log_run(settings, "scheduler", run_name("scheduler", doc.get("cutoff"), Path(ws.root).name), params=params,
                  metrics=metrics, tags={"gpuplan.stage": "nightly", "gpuplan.workspace": str(ws.root)})
    mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_registry_uri(settings.tracking_uri)
    name = scheduler_model_name(ws.root)
    with tempfile.TemporaryDirectory() as td, _quiet_mlflow(), mlflow.start_run(run_id=rid):
        pkl = Path(td) / scheduler_models.MODEL_FILE
        pkl.write_bytes(pickle.dumps(model))
        info = mlflow.pyfunc.log_model(name="forecaster", python_model=scheduler_models.SchedulerModelPyfunc(),
                                       artifacts={"model": str(pkl)}, pip_requirements=model_pip_requirements())
        cand = (doc.get("candidate") or {}).get("metrics") or {}
        champ = (doc.get("champion") or {}).get("metrics") or {}
        tags = {**holdout_tags(cand), **holdout_tags(champ, "holdout.champion_before."),
                "cutoff": doc.get("cutoff"), "promoted": doc.get("promoted")}
        mv = mlflow.register_model(info.model_uri, name, tags=_tag_values(tags))
    describe_version(settings, name, str(mv.version), (
        f"Scheduler-history runtime forecaster of {ws.root} (P50/P90 hours per job), trained on "
        f"{doc.get('history_rows')} records up to {doc.get('cutoff')}; holdout {doc.get('holdout_rows')} runs"
        + (f", MAE {cand['mae_h']:.3f} h, pinball P90 {cand.get('pinball_p90_h', float('nan')):.3f} h" if "mae_h" in cand
           else "") + f". {alias}: {doc.get('reason')}. MLflow run {rid}."))
    _client(settings).set_registered_model_alias(name, alias, mv.version)
    return str(mv.version)


def log_plan_run(settings: Settings, run_dir: Path, folder_name: str, planner: str, summary: Mapping[str, Any],
                 rt_metrics: Mapping[str, Mapping[str, Any]] | None, artifacts: Mapping[str, Path],
                 units: Mapping[str, str] | None = None) -> str:
    """Log a published run folder to the ``plans`` experiment; returns the MLflow run id.

    Run name ``plan <workspace> cutoff=<plan start> <date>`` (:func:`run_name`; the inputs end at the plan
    start); the folder's name is the tag ``gpuplan.run_folder``.
    Params: planner, status, plan start, fallback, run folder, model size, real-time profile status.
    Metrics: the summary's planned metrics (:func:`pipelines.stages.outputs.planned_metrics`),
    ``objective``, ``bound``, ``mip_gap`` (fraction), ``solve_s``, ``proven_optimal`` (0/1), and the
    real-time band metrics as ``<service>.<metric>`` with units (:func:`band_metrics`; ``units``: service ->
    traffic units). Artifacts: ``artifacts`` (artifact path -> file;
    :meth:`pipelines.catalog.RunCatalog.artifacts`: Gantt chart, demand bands, risk report, plan tables,
    problem, summary; and ``report/risk_report.html`` when the folder has it).
    """
    metrics = dict(summary["metrics"])
    metrics.update({"objective": summary["objective"], "bound": summary["bound"], "mip_gap": summary["mip_gap"],
                    "solve_s": summary["solve_s"], "proven_optimal": 1.0 if summary["proven_optimal"] else 0.0})
    for svc, m in (rt_metrics or {}).items():
        metrics.update({f"{svc}.{k}": v for k, v in band_metrics(m, (units or {}).get(svc, "traffic/h")).items()})
    model = summary.get("model") or {}
    params = {"planner": planner, "status": summary["status"], "plan_start": summary["plan_start"],
              "fallback": summary["fallback"], "run_dir": str(run_dir),
              **{f"model_{k}": v for k, v in model.items()}}
    params.update({f"rt_status.{k}": v[0] for k, v in summary["rt_status"].items()})
    for kind, m in (summary.get("models") or {}).items():  # which forecaster versions made the forecasts
        params.update({f"forecaster.{kind}.{k}": v for k, v in (m or {}).items()})
    cluster = summary.get("cluster") or {}
    if cluster:
        params.update({"workspace": cluster.get("workspace"), "n_gpus": cluster.get("n_gpus")})
    arts = dict(artifacts)
    html = Path(run_dir) / "risk_report.html"
    if html.is_file():
        arts.setdefault("report/risk_report.html", html)
    ws = Path(str(cluster.get("workspace") or "demo")).name
    return log_run(settings, "plans", run_name("plan", summary["plan_start"], ws), params=params, metrics=metrics,
                   tags={"gpuplan.status": summary["status"], "gpuplan.run_folder": folder_name}, artifacts=arts)


def log_benchmark_run(settings: Settings, scenario: str, quick: bool, out: Path, cfg: Any, res: Any,
                      files: Sequence[str]) -> str:
    """Log one benchmark (:mod:`pipelines.bench`) to the ``benchmarks`` experiment; returns the run id.

    Params: scenarios, planners, seed, quick, solver budget, replan interval, output folder. Metrics:
    ``wall_s``, ``verified_plans``, ``violations`` and ``<scenario>.<planner>.<bench.csv column>``.
    Artifacts: the written ``files`` (bench.csv, bench.md, plots) under ``bench/``.
    """
    metrics: dict[str, Any] = {"wall_s": res.wall_s, "verified_plans": res.verified_plans,
                               "violations": res.violations}
    for m in res.metrics:
        row = m.row()
        for k, v in row.items():
            if k not in ("scenario", "planner"):
                metrics[f"{row['scenario']}.{row['planner']}.{k}"] = v
    params = {"scenarios": ",".join(cfg.scenarios), "planners": ",".join(cfg.planners), "seed": cfg.seed,
              "quick": cfg.quick, "time_limit_s": cfg.time_limit_s, "mip_rel_gap": cfg.mip_rel_gap,
              "replan_every_steps": cfg.replan_every_steps, "out_dir": str(out)}
    artifacts = {f"bench/{f}": Path(out) / f for f in files if (Path(out) / f).is_file()}
    return log_run(settings, "benchmarks", f"bench-{scenario}{'-quick' if quick else ''}", params=params,
                   metrics=metrics, artifacts=artifacts, tags={"gpuplan.stage": "benchmark"})
