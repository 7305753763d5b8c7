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

__all__ = ["evaluate_scheduler_model", "forecast_metrics", "history_as_of", "time_split", "time_split_as_of"]


def history_as_of(records: pd.DataFrame, cut: pd.Timestamp) -> pd.DataFrame:
    """The records submitted before ``cut`` as a scheduler export at ``cut`` shows them (a copy).

    A record that started by ``cut`` but ended after it is ``running`` (no end, no elapsed: not a
    target); one that started after ``cut`` is ``pending`` (no start). Others are unchanged. Needs
    ``submitted_at``; ``started_at``/``ended_at`` when present (else records are kept as given).
    """
    c = pd.Timestamp(cut)
    c = c.tz_localize("UTC") if c.tzinfo is None else c.tz_convert("UTC")
    sub = pd.to_datetime(records["submitted_at"], utc=True)
    out = records.loc[(sub < c).to_numpy()].reset_index(drop=True).copy()
    if "ended_at" not in out.columns:
        return out
    start = (pd.to_datetime(out["started_at"], utc=True) if "started_at" in out.columns
             else pd.Series(pd.NaT, index=out.index, dtype="datetime64[ns, UTC]"))
    end = pd.to_datetime(out["ended_at"], utc=True)
    later_end = (end > c).to_numpy()
    later_start = (start > c).to_numpy()
    running = later_end & ~later_start & start.notna().to_numpy()
    pending = later_end & (later_start | start.isna().to_numpy())
    out.loc[running, "state"] = "running"
    out.loc[pending, "state"] = "pending"
    out.loc[later_end, "ended_at"] = pd.NaT
    out.loc[later_end, "elapsed_s"] = np.nan
    if "started_at" in out.columns:
        out.loc[pending, "started_at"] = pd.NaT
    if "censored" in out.columns:
        out.loc[later_end, "censored"] = False
    return out


def time_split_as_of(records: pd.DataFrame, test_fraction: float = 0.2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(history at the cut, holdout)``: :func:`time_split`'s cut, the training part by :func:`history_as_of`.

    The cut is the submit time of the first held-out record (the latest ``test_fraction`` by
    submit time); the holdout keeps every record as given (their final outcome is the truth).

    Raises:
        InputError: as :func:`time_split`.
    """
    train, holdout = time_split(records, test_fraction)
    if holdout.empty:
        return train, holdout
    cut = pd.to_datetime(holdout["submitted_at"], utc=True).min()
    return history_as_of(records, cut), holdout


def forecast_metrics(y_h: np.ndarray, p50_h: np.ndarray, p90_h: np.ndarray,
                     p10_h: np.ndarray | None = None) -> dict[str, Any]:
    """Accuracy of a P50/P90 (and P10) forecast against runtimes ``y_h`` (all ``(n,)``, hours, n > 0).

    Returns ``{"n", "mae_h", "median_ae_h", "pinball_p50_h", "pinball_p90_h", "coverage_p90"}``:
    absolute errors of the P50, pinball losses (:func:`forecasters.metrics.pinball`, hours) and the
    share of runs at most the P90; with ``p10_h`` also ``coverage_p10_p90`` (share in
    ``[P10, P90]``) and ``width_ratio_p90_p10`` (its 10th, 50th and 90th percentiles over the
    jobs: how much the interval width varies). A point forecast is scored as both its P50 and its P90.
    ``p50_spread_q90_q10``: the 90th over the 10th percentile of the P50s (1.0: one duration for every
    job, i.e. the forecast does not tell the jobs apart).
    """
    out: dict[str, Any] = {
        "n": int(len(y_h)),
        "mae_h": M.mae(y_h, p50_h),
        "median_ae_h": M.median_ae(y_h, p50_h),
        "pinball_p50_h": M.pinball(y_h, p50_h, 0.5),
        "pinball_p90_h": M.pinball(y_h, p90_h, 0.9),
        "coverage_p90": float(np.mean(np.asarray(y_h) <= np.asarray(p90_h))),
    }
    q10, q90 = np.quantile(np.broadcast_to(np.asarray(p50_h, dtype=float), np.shape(y_h)), (0.1, 0.9))
    out["p50_spread_q90_q10"] = float(q90 / q10) if q10 > 0 else float("inf")
    if p10_h is not None:
        y, lo, hi = np.asarray(y_h), np.asarray(p10_h), np.asarray(p90_h)
        out["coverage_p10_p90"] = float(np.mean((y >= lo) & (y <= hi)))
        ratio = hi / np.maximum(lo, 1e-12)
        out["width_ratio_p90_p10"] = [float(v) for v in np.quantile(ratio, (0.1, 0.5, 0.9))]
    return out


def evaluate_scheduler_model(model: SchedulerModel, holdout: pd.DataFrame) -> dict[str, Any]:
    """Metrics of ``model`` and of three naive forecasts on the holdout's target runs.

    The truth is each target run's ``elapsed_s / 3600`` (targets as in
    :func:`forecasters.scheduler.fitting.run_buckets`; holdout jobs are predicted as not started).
    Baselines, each a point forecast scored by :func:`forecast_metrics`:

    * ``time_limit``: the requested limit (what a backfilling scheduler plans with), on the runs
      that have one; ``model_on_same_runs`` gives the model's metrics on those same runs;
    * ``per_user_median``: the user's median training runtime, else the global one (``{"n": 0,
      "note"}`` when the holdout has no user);
    * ``per_gpu_count_median``: the median training runtime of the same GPU count, else the global
      one (P10/P90: the same runs' 10th/90th percentiles);
    * ``global_median``: the median training runtime.

    The model's ``metrics`` include the P10-P90 coverage and the spread of its width
    (:func:`forecast_metrics` with ``p10_h``).

    Returns:
        ``{"mode", "n_train", "n_test", "n_test_censored", "test_censored_over_p90", "metrics",
        "baselines": {"time_limit", "per_user_median", "per_gpu_count_median", "global_median"},
        "mae_ratio": {baseline: model MAE / its MAE}}``. ``test_censored_over_p90``
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
    p10, p50, p90 = (pred[c].to_numpy() for c in ("duration_p10_h", "duration_p50_h", "duration_p90_h"))
    limit = limit_hours(runs)
    has = np.isfinite(limit)
    user_med = model.user_medians_h
    per_user = np.array([user_med.get(u, model.global_median_h) if u is not None else model.global_median_h
                         for u in text_values(runs["user"]).tolist()], dtype=float)
    glob = np.full(len(y), model.global_median_h)
    gq = getattr(model, "gpu_quantiles_h", {}) or {}
    gpus = np.nan_to_num(numeric_column(runs, "gpus"), nan=0.0).astype(np.int64)
    per_gpu = np.array([gq.get(int(g), model.global_quantiles_h) for g in gpus], dtype=float).reshape(len(y), 3)
    has_user = np.array([u is not None for u in text_values(runs["user"]).tolist()], dtype=bool)
    baselines: dict[str, Any] = {
        "time_limit": ({**forecast_metrics(y[has], limit[has], limit[has]),
                        "model_on_same_runs": forecast_metrics(y[has], p50[has], p90[has])}
                       if has.any() else {"n": 0}),
        "per_user_median": (forecast_metrics(y, per_user, per_user) if has_user.any()
                            else {"n": 0, "note": "the holdout has no user"}),
        "per_gpu_count_median": forecast_metrics(y, per_gpu[:, 1], per_gpu[:, 2], per_gpu[:, 0]),
        "global_median": forecast_metrics(y, glob, glob),
    }
    metrics = forecast_metrics(y, p50, p90, p10)
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
        "metrics": metrics,
        "baselines": baselines,
        "mae_ratio": {k: metrics["mae_h"] / b["mae_h"] for k, b in baselines.items()
                      if b.get("mae_h") and "model_on_same_runs" not in b},
    }
