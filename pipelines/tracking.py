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
global active run), except model logging, which needs MLflow's fluent API.
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

#: pip requirements given to ``log_model`` (inference of them costs ~10 s in a subprocess, docs/STACK.md)
MODEL_PIP_REQUIREMENTS: tuple[str, ...] = ("lightgbm>=4.6,<5", "pandas>=2.2", "numpy>=2.0")


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


def log_lightgbm_model(
    settings: Settings,
    run_id: str,
    booster: Any,
    design: Any,
    registered_name: str,
    alias: str = "champion",
) -> str:
    """Log a LightGBM booster (lightgbm flavour, signature + input example) to ``run_id``,
    register it as a new version of ``registered_name`` and point ``alias`` at it (aliases,
    not the deprecated stages).

    MLflow signatures have no categorical type (a ``category`` column breaks inference,
    docs/STACK.md), so the logged copy takes categoricals as their **integer codes in the model's
    fixed level list** (code ``k`` = ``levels[col][k]``): the copy's ``pandas_categorical`` is
    cleared and the example/signature are the numeric design matrix. The copy predicts exactly
    what the original predicts on the same rows (checked here; ValueError otherwise).

    Args:
        booster: a ``lightgbm.Booster`` trained on a frame with ``category`` columns (or none).
        design: a few rows of the booster's input frame (``category`` dtypes allowed).

    Returns:
        the registered model version (string).
    """
    import lightgbm as lgb
    import mlflow
    import mlflow.lightgbm
    import numpy as np
    from mlflow.models import infer_signature

    mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_registry_uri(settings.tracking_uri)
    names = list(booster.feature_name())
    if set(names) <= set(design.columns):
        design = design[names]  # a booster may take a prefix/subset of the design matrix
    example = design.copy()
    for col in example.columns:
        if str(example[col].dtype) == "category":
            example[col] = example[col].cat.codes.astype("float64").where(example[col].notna())
        else:
            example[col] = example[col].astype("float64")
    copy = lgb.Booster(model_str=booster.model_to_string())
    copy.pandas_categorical = None
    pred = copy.predict(example)
    if not np.allclose(pred, booster.predict(design), rtol=1e-9, atol=1e-12):
        raise ValueError(f"{registered_name}: the integer-coded copy does not reproduce the booster")
    with _quiet_mlflow(), mlflow.start_run(run_id=run_id):
        info = mlflow.lightgbm.log_model(
            copy,
            name="model",
            signature=infer_signature(example, pred),
            input_example=example,
            pip_requirements=list(MODEL_PIP_REQUIREMENTS),
        )
        mv = mlflow.register_model(info.model_uri, registered_name)
    _client(settings).set_registered_model_alias(registered_name, alias, mv.version)
    return str(mv.version)


def finished_runs(settings: Settings, experiment: str) -> list[Any]:
    """Finished runs of one experiment (newest first)."""
    client = _client(settings)
    exp = client.get_experiment_by_name(EXPERIMENTS[experiment])
    if exp is None:
        return []
    return [r for r in client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])
            if r.info.status == "FINISHED"]
