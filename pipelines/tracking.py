"""MLflow tracking for gpuplan: one experiment per forecaster, one for plans, one for benchmarks.

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
"""

from __future__ import annotations

import contextlib
import math
import posixpath
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pipelines.config import Settings
from pipelines.run_folder import file_lock

#: experiment key -> experiment name
EXPERIMENTS: dict[str, str] = {
    "training": "gpuplan-forecaster-training",
    "quantization": "gpuplan-forecaster-quantization",
    "batch_inference": "gpuplan-forecaster-batch_inference",
    "realtime": "gpuplan-forecaster-realtime",
    "plans": "gpuplan-plans",
    "benchmarks": "gpuplan-benchmarks",
}

def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, or None for any other scheme."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri[len("sqlite:///"):].split("?", 1)[0])


def _client(settings: Settings):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=settings.tracking_uri, registry_uri=settings.tracking_uri)


def _init_lock(settings: Settings):
    settings.mlruns_dir.mkdir(parents=True, exist_ok=True)
    db = sqlite_path(settings.tracking_uri)
    return file_lock((db.parent if db is not None else settings.mlruns_dir) / ".init.lock")


def init_store(settings: Settings) -> dict[str, str]:
    """Create the tracking database (schema), WAL mode and every experiment; idempotent.

    Call once per process tree before starting concurrent work. Also sets the process-wide
    tracking and registry URIs to ``settings.tracking_uri``.

    Returns:
        experiment key -> experiment id.
    """
    import mlflow

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


def log_run(
    settings: Settings,
    experiment: str,
    run_name: str,
    *,
    params: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
    artifacts: Mapping[str, Path] | None = None,
    status: str = "FINISHED",
) -> str:
    """Create one finished MLflow run in ``EXPERIMENTS[experiment]`` and return its run id.

    Args:
        experiment: a key of :data:`EXPERIMENTS`.
        params: logged as strings; None values skipped.
        metrics: numeric values; None, NaN, inf and non-numeric values are skipped (MLflow
            refuses NaN in SQLite stores).
        artifacts: artifact path inside the run (``plots/gantt.png``) -> local file; the file is
            stored under the key's folder with its own name.
        status: terminal status, ``FINISHED`` or ``FAILED``.

    Raises:
        KeyError: unknown experiment key.
    """
    from mlflow.entities import Metric, Param

    client = _client(settings)
    exp = client.get_experiment_by_name(EXPERIMENTS[experiment])
    exp_id = exp.experiment_id if exp is not None else init_store(settings)[experiment]
    run = client.create_run(exp_id, run_name=run_name, tags=dict(tags or {}))
    rid = run.info.run_id
    try:
        now_ms = int(time.time() * 1000)
        m = [Metric(k, v, now_ms, 0) for k, v in _clean_metrics(metrics or {}).items()]
        p = [Param(k, str(v)[:6000]) for k, v in (params or {}).items() if v is not None]
        for i in range(0, max(len(m), len(p)), 100):
            client.log_batch(rid, metrics=m[i:i + 100], params=p[i:i + 100])
        for key, path in (artifacts or {}).items():
            client.log_artifact(rid, str(path), artifact_path=posixpath.dirname(key) or None)
    except BaseException:
        client.set_terminated(rid, status="FAILED")
        raise
    client.set_terminated(rid, status=status)
    return rid


_QUIET_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_mlflow() -> Iterator[None]:
    """Silence MLflow's INFO/WARNING chatter and its registration prints (stderr) for the CLI bars."""
    import io
    import logging

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
    import lightgbm
    import mlflow
    import numpy as np
    import pandas as pd
    import pyarrow

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
) -> dict[str, str]:
    """Log a job forecaster to ``run_id``, register it and point ``alias`` at it (case C11).

    The one model-logging path: the main job's training (:func:`pipelines.queue.train_or_load`,
    run by ``gpuplan run`` and the nightly flow) calls it. Logged:

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
    pointed at it (aliases, not the deprecated stages); ``mlflow.pyfunc.load_model(
    "models:/gpuplan-<kind>-forecaster@champion")`` serves it. Before registering, the logged
    pyfunc is reloaded and must reproduce the in-memory predictions on the example (1e-9 h).

    Args:
        run_id: an existing run (e.g. from :func:`log_run`); reopened and finished again.
        model: a fitted :class:`forecasters.jobs.JobModel`.
        example_jobs: ``(n >= 1, ...)`` jobs with the kind's raw feature columns (``job_id``
            optional); the first 5 rows are used.
        alias: registry alias pointed at the new version.

    Returns:
        ``{"run_id", "duration_uri", "gpus_uri", "pyfunc_uri", "registered_name", "version"}``.

    Raises:
        ValueError: the reloaded pyfunc does not reproduce the forecaster's predictions.
    """
    import tempfile

    import mlflow
    import mlflow.lightgbm
    import mlflow.pyfunc
    import numpy as np
    from mlflow.models import infer_signature

    from forecasters.jobs import predict as job_predict
    from pipelines import job_models

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
        mv = mlflow.register_model(info.model_uri, name)
    _client(settings).set_registered_model_alias(name, alias, mv.version)
    return {**uris, "registered_name": name, "version": str(mv.version)}


def finished_runs(settings: Settings, experiment: str) -> list[Any]:
    """Finished runs of one experiment (newest first)."""
    client = _client(settings)
    exp = client.get_experiment_by_name(EXPERIMENTS[experiment])
    if exp is None:
        return []
    return [r for r in client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])
            if r.info.status == "FINISHED"]
