"""Holdout evaluation of a job forecaster: time split, metrics, baselines (``gpuplan train --json``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from domain import JobKind
from forecasters import metrics as M
from forecasters.errors import InputError
from forecasters.frames import normalise_features, require_columns, row_label
from forecasters.jobs.baselines import baseline_group_median, baseline_throughput
from forecasters.jobs.fitting import clean_history
from forecasters.jobs.model import JobModel, predict
from forecasters.jobs.priors import plain_features
from forecasters.schema import TARGET_DURATION
from forecasters.workloads import kind_module


def time_split(history: pd.DataFrame, test_fraction: float = 0.2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split by submission time: the earliest ``1 - test_fraction`` of jobs to fit, the rest to test.

    Every training job is submitted no later than every test job (ties stay on one side).

    Raises:
        InputError: no ``submitted_at`` column, missing timestamps, or a fraction outside (0, 1).
    """
    if not 0.0 < test_fraction < 1.0:
        raise InputError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    require_columns(history, ("submitted_at",), "history")
    ts = pd.to_datetime(history["submitted_at"], utc=True)
    if ts.isna().any():
        i = int(np.flatnonzero(ts.isna().to_numpy())[0])
        raise InputError(f"{row_label(history, i)}, column 'submitted_at': missing timestamp")
    order = np.argsort(ts.to_numpy(), kind="stable")
    h = history.iloc[order].reset_index(drop=True)
    ts_sorted = ts.iloc[order].reset_index(drop=True)
    cut_ts = ts_sorted.iloc[int(np.floor(len(h) * (1.0 - test_fraction)))]
    train_mask = (ts_sorted < cut_ts).to_numpy()
    return h.loc[train_mask].reset_index(drop=True), h.loc[~train_mask].reset_index(drop=True)


def _point_metrics(y: np.ndarray, yhat: np.ndarray) -> dict[str, float]:
    """``{"mae_h", "mape"}`` of point forecasts ``yhat`` against durations ``y`` (hours, ``(n,)``)."""
    return {"mae_h": M.mae(y, yhat), "mape": M.mape(y, yhat)}


def evaluate(model: JobModel, holdout: pd.DataFrame) -> dict[str, Any]:
    """Metrics of ``model`` and its baselines on ``holdout`` (rows with ``duration_h <= 0`` excluded).

    Returns the document printed by ``gpuplan train --json``::

        {"kind", "n_train", "n_test",
         "metrics": {"mae_h", "mape", "median_ape", "pinball_p10", "pinball_p90", "coverage_p10_p90"},
         "baselines": {"per_variant_median": {"mae_h", "mape"}, "analytic": {"mae_h", "mape"}}}

    Hours for ``mae_h`` and pinball losses; fractions for the rest. Batch inference adds
    ``baselines["throughput_median"]`` (the §4.3 baseline). Holdout rows with a category unknown
    to the model are refused (InputError), as in :func:`predict`.
    """
    kept, _ = clean_history(model.kind, holdout)
    if len(kept) == 0:
        raise InputError(f"{model.kind} holdout has no rows with duration_h > 0")
    y = kept[TARGET_DURATION].to_numpy(dtype=float)
    pred = predict(model, kept, on_unseen="error")
    p10, p50, p90 = (pred[c].to_numpy() for c in ("duration_p10_h", "duration_p50_h", "duration_p90_h"))
    metrics = {
        "mae_h": M.mae(y, p50),
        "mape": M.mape(y, p50),
        "median_ape": M.median_ape(y, p50),
        "pinball_p10": M.pinball(y, p10, 0.1),
        "pinball_p90": M.pinball(y, p90, 0.9),
        "coverage_p10_p90": M.coverage(y, p10, p90),
    }
    baselines = {
        "per_variant_median": _point_metrics(y, baseline_group_median(model, kept)),
        "analytic": _point_metrics(y, kind_module(model.kind).analytic_duration_h(_plain(model, kept))),
    }
    if model.kind == JobKind.BATCH_INFERENCE:
        baselines["throughput_median"] = _point_metrics(y, baseline_throughput(model, kept))
    return {
        "kind": model.kind,
        "n_train": int(model.info["n_train"]),
        "n_test": int(len(kept)),
        "metrics": metrics,
        "baselines": baselines,
    }


def analytic_baseline_h(model: JobModel, jobs: pd.DataFrame) -> np.ndarray:
    """The analytic (physics) baseline's duration ``(n,)`` hours for each row of ``jobs`` (``baselines["analytic"]``).

    Raises:
        InputError: a category unknown to ``model`` (as :func:`predict`).
    """
    return np.asarray(kind_module(model.kind).analytic_duration_h(_plain(model, jobs)), dtype=float)


def _plain(model: JobModel, jobs: pd.DataFrame) -> pd.DataFrame:
    """Features as plain numpy-backed columns (strings, floats) for the analytic formulas."""
    feats, _ = normalise_features(jobs, model.spec, model.levels)
    return plain_features(feats, model.spec)
