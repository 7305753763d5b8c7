"""Holdout evaluation of the scheduler runtime forecaster against an operator's naive forecasts.

:func:`time_split` is :func:`forecasters.jobs.evaluation.time_split` (by ``submitted_at``, which
every job record has).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from forecasters import metrics as M
from forecasters.errors import InputError
from forecasters.jobs.evaluation import time_split
from forecasters.scheduler.features import limit_hours, numeric_column, text_values
from forecasters.scheduler.fitting import CENSORED, FIT_INPUTS, TARGET, run_buckets
from forecasters.scheduler.model import SchedulerModel, predict_runtime

__all__ = ["evaluate_scheduler_model", "forecast_metrics", "time_split"]


def forecast_metrics(y_h: np.ndarray, p50_h: np.ndarray, p90_h: np.ndarray) -> dict[str, float | int]:
    """Accuracy of a P50/P90 forecast against runtimes ``y_h`` (all ``(n,)``, hours, n > 0).

    Returns ``{"n", "mae_h", "median_ae_h", "pinball_p50_h", "pinball_p90_h", "coverage_p90"}``:
    absolute errors of the P50, pinball losses (:func:`forecasters.metrics.pinball`, hours) and the
    share of runs at most the P90. A point forecast is scored as both its P50 and its P90.
    """
    return {
        "n": int(len(y_h)),
        "mae_h": M.mae(y_h, p50_h),
        "median_ae_h": M.median_ae(y_h, p50_h),
        "pinball_p50_h": M.pinball(y_h, p50_h, 0.5),
        "pinball_p90_h": M.pinball(y_h, p90_h, 0.9),
        "coverage_p90": float(np.mean(np.asarray(y_h) <= np.asarray(p90_h))),
    }


def evaluate_scheduler_model(model: SchedulerModel, holdout: pd.DataFrame) -> dict[str, Any]:
    """Metrics of ``model`` and of three naive forecasts on the holdout's target runs.

    The truth is each target run's ``elapsed_s / 3600`` (targets as in
    :func:`forecasters.scheduler.fitting.run_buckets`; holdout jobs are predicted as not started).
    Baselines, each a point forecast scored by :func:`forecast_metrics`:

    * ``time_limit``: the requested limit (what a backfilling scheduler plans with), on the runs
      that have one; ``model_on_same_runs`` gives the model's metrics on those same runs;
    * ``per_user_median``: the user's median training runtime, else the global one;
    * ``global_median``: the median training runtime.

    Returns:
        ``{"mode", "n_train", "n_test", "n_test_censored", "test_censored_over_p90", "metrics",
        "baselines": {"time_limit", "per_user_median", "global_median"}}``. ``test_censored_over_p90``
        counts censored holdout runs whose elapsed (a lower bound) already exceeds their P90.

    Raises:
        InputError: a missing column, or no target run in the holdout.
    """
    bucket = run_buckets(holdout)
    h = holdout.reset_index(drop=True)
    runs = h.loc[bucket == TARGET].reset_index(drop=True)
    if len(runs) == 0:
        raise InputError("holdout has no finished uncensored run with elapsed_s > 0 to evaluate on")
    missing = [c for c in FIT_INPUTS if c not in runs.columns]
    if missing:
        raise InputError(f"holdout: missing column(s) {', '.join(missing)}")
    y = numeric_column(runs, "elapsed_s") / 3600.0
    pred = predict_runtime(model, runs)
    p50, p90 = pred["duration_p50_h"].to_numpy(), pred["duration_p90_h"].to_numpy()
    limit = limit_hours(runs)
    has = np.isfinite(limit)
    user_med = model.user_medians_h
    per_user = np.array([user_med.get(u, model.global_median_h) if u is not None else model.global_median_h
                         for u in text_values(runs["user"]).tolist()], dtype=float)
    glob = np.full(len(y), model.global_median_h)
    baselines: dict[str, Any] = {
        "time_limit": ({**forecast_metrics(y[has], limit[has], limit[has]),
                        "model_on_same_runs": forecast_metrics(y[has], p50[has], p90[has])}
                       if has.any() else {"n": 0}),
        "per_user_median": forecast_metrics(y, per_user, per_user),
        "global_median": forecast_metrics(y, glob, glob),
    }
    cens = h.loc[bucket == CENSORED].reset_index(drop=True)
    cens_elapsed = numeric_column(cens, "elapsed_s") / 3600.0 if len(cens) else np.zeros(0)
    over = 0
    if len(cens):
        cp90 = predict_runtime(model, cens)["duration_p90_h"]
        over = int(np.sum(cens_elapsed > cp90.to_numpy()))
    return {
        "mode": model.mode,
        "n_train": int(model.info.get("n_targets", 0)),
        "n_test": int(len(runs)),
        "n_test_censored": int(len(cens)),
        "test_censored_over_p90": over,
        "metrics": forecast_metrics(y, p50, p90),
        "baselines": baselines,
    }
