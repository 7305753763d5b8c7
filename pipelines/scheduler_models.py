"""The scheduler-history forecaster of a workspace: its model folder, the MLflow pyfunc, the gated nightly retraining.

- The workspace's current model (the ``champion``) is ``<models_dir>/scheduler``: ``model.pkl``
  (:class:`forecasters.scheduler.SchedulerModel`, pickled; LightGBM boosters pickle whole) and
  ``meta.json`` (registered ``version``, ``cutoff``, ``history_rows``, ``reason``), swapped in
  atomically (:func:`pipelines.atomic.atomic_dir`). Plans use it; before the first nightly run a
  plan fits one on the spot (and says so).
- :func:`nightly_fit` is the gated retraining (:mod:`pipelines.stages.retrain`): train on the store up to
  the cut-off, score against the champion on the same holdout, log to MLflow, register a version,
  move ``champion`` only when the gate says so (else ``challenger``), record why.
"""

from __future__ import annotations

import json
import pickle
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines import strict_json
from pipelines.atomic import atomic_dir
from pipelines.config import Settings
from pipelines.errors import InputError
from pipelines.lazy import lazy_class
from pipelines.stages import retrain
from pipelines.store import Store
from pipelines.workspace import Workspace

FOLDER = "scheduler"
MODEL_FILE = "model.pkl"
META_FILE = "meta.json"


def model_path(settings: Settings) -> Path:
    """The workspace's champion model folder: ``<models_dir>/scheduler``."""
    return settings.models_dir / FOLDER


def save_champion(settings: Settings, model: Any, meta: dict[str, Any]) -> Path:
    """Write ``model`` and ``meta`` as the champion (atomic folder swap); returns the folder."""
    path = model_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(path) as tmp:
        (tmp / MODEL_FILE).write_bytes(pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL))
        (tmp / META_FILE).write_text(json.dumps(meta, indent=1, default=str))
    return path


def load_champion(settings: Settings) -> tuple[Any, dict[str, Any]] | None:
    """``(model, meta)`` of the champion, or None when there is none (or it cannot be read)."""
    path = model_path(settings)
    try:
        model = pickle.loads((path / MODEL_FILE).read_bytes())
        meta = strict_json.loads((path / META_FILE).read_text(), str(path / META_FILE))
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, InputError):
        return None
    return model, meta


def _evaluate(model: Any, holdout: pd.DataFrame) -> dict[str, Any] | None:
    from forecasters.scheduler import evaluate_scheduler_model

    try:
        return evaluate_scheduler_model(model, holdout)
    except InputError:  # no finished run in the holdout
        return None


def nightly_fit(settings: Settings, ws: Workspace, cutoff: datetime) -> tuple[Any, dict[str, Any]]:
    """Retrain the workspace's forecaster on its store up to ``cutoff`` and gate it (module docstring).

    Returns ``(model, doc)``: the version to register (fitted on the whole history up to the
    cut-off) and ``{"cutoff", "history_rows", "train_rows", "holdout_rows", "promoted", "reason",
    "candidate", "champion", "champion_version_before"}`` (candidate/champion: their holdout
    evaluations or None). The caller logs and registers it (:func:`pipelines.tracking.log_scheduler_model_run`)
    and, when promoted, saves it as the champion (:func:`save_champion`).

    Raises:
        InputError: the store holds no finished run before ``cutoff`` to train on.
    """
    from forecasters.scheduler import fit_scheduler_model

    tz, cfg = ws.config.cluster.timezone, ws.config.retrain
    upto, train, holdout = retrain.split_at_cutoff(Store(ws.store_dir).jobs(), cutoff, cfg.holdout_days)
    try:
        candidate = fit_scheduler_model(train, timezone=tz, seed=settings.seed)
    except InputError:  # nothing before the holdout to learn from
        candidate = None
    cand_eval = _evaluate(candidate, holdout) if candidate is not None else None
    current = load_champion(settings)
    champ_eval = _evaluate(current[0], holdout) if current is not None else None
    promote, reason = retrain.gate(cand_eval, champ_eval, cfg.min_holdout_runs)
    final = fit_scheduler_model(upto, timezone=tz, seed=settings.seed)
    doc = {"cutoff": pd.Timestamp(cutoff).isoformat(), "history_rows": len(upto), "train_rows": len(train),
           "holdout_rows": len(holdout), "promoted": promote, "reason": reason, "candidate": cand_eval,
           "champion": champ_eval, "champion_version_before": None if current is None else current[1].get("version")}
    return final, doc


def _make_pyfunc_class() -> type:
    import mlflow.pyfunc

    class SchedulerModelPyfunc(mlflow.pyfunc.PythonModel):
        """MLflow pyfunc around a pickled scheduler forecaster: job records in, runtime quantiles out."""

        def load_context(self, context):  # noqa: D401 - mlflow hook
            self._model = pickle.loads(Path(context.artifacts["model"]).read_bytes())

        def predict(self, context, model_input, params=None):  # noqa: D401 - mlflow hook
            from forecasters.scheduler import predict_runtime

            frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
            return predict_runtime(self._model, frame)

    SchedulerModelPyfunc.__module__ = __name__
    SchedulerModelPyfunc.__qualname__ = "SchedulerModelPyfunc"
    return SchedulerModelPyfunc


#: Module ``__getattr__``: :class:`SchedulerModelPyfunc` is built on first use (:func:`pipelines.lazy.lazy_class`).
__getattr__ = lazy_class("SchedulerModelPyfunc", _make_pyfunc_class)
