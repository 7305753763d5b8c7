"""Fitting the scheduler runtime forecaster: :func:`fit_scheduler_model` ``(history) -> SchedulerModel``.

The rules (targets, censoring, quantiles, calibration, the censored-run P90 raise, the fallback)
are described in :mod:`forecasters.scheduler`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from domain.records import ACTIVE_STATES, UNCENSORED_END_STATES, is_censored
from forecasters.errors import InputError
from forecasters.frames import require_columns
from forecasters.jobs.fitting import DEFAULT_PARAMS, lightgbm_module, train_booster
from forecasters.scheduler.features import (
    FEATURE_INPUTS,
    FeatureSpec,
    check_timezone,
    choose_annotation_keys,
    choose_levels,
    limit_hours,
    numeric_column,
    parse_annotations,
    submit_times,
    text_values,
)
from forecasters.scheduler.model import (
    MODE_FALLBACK,
    MODE_LIGHTGBM,
    QUANTILES,
    SchedulerModel,
    unraised_log_quantiles,
)

#: Below this many target runs the model is the per-user/global quantile fallback.
MIN_TARGETS = 30
#: Boosting rounds of each quantile booster.
ROUNDS = 200
#: LightGBM parameters: the job forecasters' (:data:`forecasters.jobs.fitting.DEFAULT_PARAMS`: one
#: thread, deterministic, 63 bins) with smaller trees for a few thousand noisy scheduler rows.
PARAMS: dict[str, Any] = {**DEFAULT_PARAMS, "objective": "quantile", "num_leaves": 15, "min_data_in_leaf": 10,
                          "learning_rate": 0.05}
#: Share of the target runs, the latest by submit time, that calibrates P10/P90 (split conformal).
CALIBRATION_FRACTION = 0.2
#: The calibration is skipped (shifts 0) when that slice has fewer runs than this.
MIN_CALIBRATION_RUNS = 50
#: Share of a user's runs allowed above the P90 (the censored-run check).
P90_EXCEEDANCE = 1.0 - QUANTILES[2]
#: A user's P90 is checked against censored runs only with at least this many runs (targets + censored).
MIN_USER_RUNS = 5
#: Columns :func:`fit_scheduler_model` reads.
FIT_INPUTS: tuple[str, ...] = (*FEATURE_INPUTS, "state", "elapsed_s")

#: Buckets of :func:`run_buckets`.
TARGET, CENSORED, ACTIVE, NOT_STARTED, NO_RUNTIME = "target", "censored", "active", "not_started", "no_runtime"


def run_buckets(history: pd.DataFrame) -> np.ndarray:
    """What each record is to the forecaster, ``(n,)`` object array of bucket names.

    * ``target``: ended in :data:`domain.records.UNCENSORED_END_STATES` (completed, failed,
      timeout, out_of_memory) with ``elapsed_s > 0``, and not marked ``censored``;
    * ``censored``: started and ended by an outside event (:func:`domain.records.is_censored`:
      cancelled after start, preempted, node failure), or marked ``censored`` by its adapter;
    * ``active``: pending or running;
    * ``no_runtime``: an uncensored end state without a positive ``elapsed_s``;
    * ``not_started``: ended without starting (cancelled while pending) or ``unknown`` and never started.

    A row started when ``started_at`` (if the column exists) is known or ``elapsed_s > 0``.

    Raises:
        InputError: no ``state``/``elapsed_s`` column, or an ``elapsed_s`` that is not a number.
    """
    require_columns(history, ("state", "elapsed_s"), "job records")
    state = history["state"].astype(object).to_numpy()
    elapsed = numeric_column(history, "elapsed_s")
    positive = np.isfinite(elapsed) & (elapsed > 0)
    started = positive.copy()
    if "started_at" in history.columns:
        started |= pd.to_datetime(history["started_at"], utc=True).notna().to_numpy()
    marked = np.zeros(len(history), dtype=bool)
    if "censored" in history.columns:
        marked = history["censored"].fillna(False).astype(bool).to_numpy()
    out = np.full(len(history), NOT_STARTED, dtype=object)
    for i, (s, st) in enumerate(zip(state.tolist(), started.tolist())):
        if s in ACTIVE_STATES:
            out[i] = ACTIVE
        elif marked[i] or is_censored(str(s), st):
            out[i] = CENSORED
        elif s in UNCENSORED_END_STATES:
            out[i] = TARGET if positive[i] else NO_RUNTIME
    return out


def target_hours(runs: pd.DataFrame) -> np.ndarray:
    """Runtime target of each run ``(n,)`` in hours: ``min(elapsed_s, time_limit_s) / 3600``.

    Elapsed beyond the limit is Slurm's grace after it (``sbatch(1)`` ``--time``: at the limit each
    task gets SIGTERM, then SIGKILL ``KillWait`` seconds later, and ``OverTimeLimit`` may let the
    job run longer), not run time a plan can use: a TIMEOUT run counts at its limit (at its
    elapsed when that is at most the limit). No limit (:func:`limit_hours` NaN): the elapsed.
    """
    elapsed_h = numeric_column(runs, "elapsed_s") / 3600.0
    limit_h = limit_hours(runs)
    return np.where(np.isfinite(limit_h), np.minimum(elapsed_h, limit_h), elapsed_h)


def conformal_shift(scores: np.ndarray, tau: float) -> float:
    """Split-conformal shift of a ``tau`` quantile from calibration scores ``log(y) - q_tau`` ``(n,)``.

    ``tau >= 0.5``: the ``ceil((n + 1) tau)``-th smallest score, so ``q + shift`` covers a new run
    with probability >= ``tau`` (Romano, Patterson and Candès 2019, "Conformalized quantile
    regression", one-sided); ``tau < 0.5``: the ``floor((n + 1) tau)``-th smallest (at most
    ``tau`` below). Ranks are clamped to ``[1, n]``.
    """
    s = np.sort(np.asarray(scores, dtype=float))
    n = len(s)
    k = math.ceil((n + 1) * tau) if tau >= 0.5 else math.floor((n + 1) * tau)
    return float(s[min(max(k, 1), n) - 1])


def censored_p90_raise(
    users: np.ndarray,
    value_h: np.ndarray,
    p90_h: np.ndarray,
    limit_h: np.ndarray,
    censored: np.ndarray,
) -> dict[str, float]:
    """User -> log factor raising that user's P90 so that its runs known to exceed it are at most 10 %.

    Args:
        users: ``(n,)`` user of each run (str or None; None is skipped).
        value_h: ``(n,)`` runtime of a target run, elapsed of a censored one (a lower bound), hours.
        p90_h: ``(n,)`` the model's P90 of each run before the cap (hours).
        limit_h: ``(n,)`` time limit (hours; NaN when unlimited).
        censored: ``(n,)`` True for censored runs.

    A run is known to exceed its P90 when its value is above the capped P90 and below its limit (a
    run at its limit is covered: the scheduler ends it there). For a user with at least
    :data:`MIN_USER_RUNS` runs and at least one *censored* run known to exceed, with ``m =
    floor(0.1 n_user)`` and ``d_i = log(value_i / p90_i)`` of the exceeding runs: when more than
    ``m`` exceed, the raise is the ``(m + 1)``-th largest ``d_i``, after which at most ``m`` runs are
    above ``p90 * exp(raise)``. A censored run's true runtime is at least its elapsed, so this
    count of exceedances is a lower bound: the raise is the least one the history proves necessary.
    """
    cap = np.where(np.isfinite(limit_h), np.minimum(p90_h, limit_h), p90_h)
    exceed = (value_h > cap) & ~(np.isfinite(limit_h) & (value_h >= limit_h))
    need = np.where(exceed, np.log(value_h / p90_h), -np.inf)
    out: dict[str, float] = {}
    frame = pd.DataFrame({"u": users, "need": need, "exc": exceed, "cens": censored & exceed})
    for user, g in frame.dropna(subset=["u"]).groupby("u", sort=True):
        if len(g) < MIN_USER_RUNS or not g["cens"].any():
            continue
        m = int(math.floor(P90_EXCEEDANCE * len(g) + 1e-9))
        d = np.sort(g.loc[g["exc"], "need"].to_numpy())[::-1]
        if len(d) > m and d[m] > 0:
            out[str(user)] = float(d[m])
    return out


def _quantiles_h(y_h: np.ndarray) -> tuple[float, float, float]:
    """``(p10, p50, p90)`` of ``y_h`` (numpy's linear interpolation)."""
    q = np.quantile(y_h, QUANTILES)
    return float(q[0]), float(q[1]), float(q[2])


def _fit_boosters(x: pd.DataFrame, y_log: np.ndarray, params: dict[str, Any]) -> tuple[Any, Any, Any]:
    """LightGBM quantile boosters at P10, P50, P90 of ``y_log`` (``(n,)`` log hours)."""
    b10, b50, b90 = (train_booster(x, y_log, {**params, "alpha": a}, ROUNDS) for a in QUANTILES)
    return b10, b50, b90


def fit_scheduler_model(history: pd.DataFrame, timezone: str = "UTC", seed: int = 0) -> SchedulerModel:
    """Fit the runtime forecaster on a scheduler history of job records.

    Args:
        history: ``(n, ...)`` job records (:data:`domain.records.JOB_RECORD` columns; at least
            :data:`FIT_INPUTS`, optionally ``started_at`` and ``censored``), any order, any states.
            Only ``target`` runs (:func:`run_buckets`) train; ``censored`` runs check the P90.
        timezone: IANA time zone of the cluster (submit hour and weekday features).
        seed: LightGBM seed.

    Returns:
        A :class:`SchedulerModel`; ``model.info`` is the fit report: ``mode``, ``fallback_reason``
        (or None), ``n_rows``, ``n_targets``, ``n_targets_by_state``, ``n_censored``,
        ``n_censored_by_state``, ``n_active``, ``n_not_started``, ``n_no_runtime``,
        ``n_targets_clipped_to_limit``, ``n_targets_without_limit``, ``censored_use``,
        ``p90_raised_users``, ``calibration`` (``n``, shifts, P90 coverage before the shift),
        ``features``, ``n_levels``, ``params``, ``rounds``, ``lightgbm_version``.

    Raises:
        InputError: a missing column; an unparsable value (row named); an unknown time zone; no
            target run at all.
    """
    require_columns(history, FIT_INPUTS, "scheduler history")
    check_timezone(timezone)
    h = history.reset_index(drop=True)
    FeatureSpec(timezone=timezone).raw(h)  # validates every row's inputs, whatever its state
    bucket = run_buckets(h)
    targets = h.loc[bucket == TARGET].reset_index(drop=True)
    n_t = len(targets)
    if n_t == 0:
        raise InputError("scheduler history has no finished uncensored run with elapsed_s > 0 "
                         f"(states {', '.join(UNCENSORED_END_STATES)}); cannot fit a runtime model")
    y_h = target_hours(targets)
    users = text_values(targets["user"])
    by_user = pd.Series(y_h).groupby(pd.Series(users, dtype=object), sort=True)
    user_q = {str(u): _quantiles_h(g.to_numpy()) for u, g in by_user}
    global_q = _quantiles_h(y_h)
    params = {**PARAMS, "seed": seed}
    calibration: dict[str, Any] = {"n": 0, "shift_p10_log": 0.0, "shift_p90_log": 0.0, "coverage_p90_before": None}
    if n_t < MIN_TARGETS:
        mode, reason = MODE_FALLBACK, f"{n_t} target runs < {MIN_TARGETS}: per-user (else global) quantiles"
        spec = FeatureSpec(timezone=timezone)
        boosters = None
    else:
        mode, reason = MODE_LIGHTGBM, None
        numeric_keys, categorical_keys = choose_annotation_keys(parse_annotations(targets))
        spec = FeatureSpec(timezone=timezone, numeric_annotations=numeric_keys,
                           categorical_annotations=categorical_keys)
        raw = spec.raw(targets)
        spec = FeatureSpec(timezone=timezone, levels={c: choose_levels(raw[c]) for c in spec.categoricals},
                           numeric_annotations=numeric_keys, categorical_annotations=categorical_keys)
        x, _ = spec.design(targets)
        y_log = np.log(y_h)
        n_cal = int(math.floor(CALIBRATION_FRACTION * n_t))
        if n_cal >= MIN_CALIBRATION_RUNS:
            order = np.argsort(submit_times(targets).to_numpy(), kind="stable")
            fit_rows, cal_rows = order[: n_t - n_cal], order[n_t - n_cal:]
            early = _fit_boosters(x.iloc[fit_rows], y_log[fit_rows], params)
            x_cal = x.iloc[cal_rows]
            s10 = y_log[cal_rows] - early[0].predict(x_cal)
            s90 = y_log[cal_rows] - early[2].predict(x_cal)
            calibration = {
                "n": int(n_cal),
                "shift_p10_log": conformal_shift(s10, QUANTILES[0]),
                "shift_p90_log": conformal_shift(s90, QUANTILES[2]),
                "coverage_p90_before": float(np.mean(s90 <= 0)),
            }
        boosters = _fit_boosters(x, y_log, params)
    model = SchedulerModel(
        mode=mode,
        spec=spec,
        boosters=boosters,
        shifts_log=(calibration["shift_p10_log"], calibration["shift_p90_log"]),
        p90_raise_log={},
        user_quantiles_h=user_q,
        global_quantiles_h=global_q,
        runtimes_h=np.sort(np.asarray(y_h, dtype=float)),
    )
    runs_mask = (bucket == TARGET) | ((bucket == CENSORED) & (numeric_column(h, "elapsed_s") > 0))
    runs = h.loc[runs_mask].reset_index(drop=True)
    is_cens = bucket[runs_mask] == CENSORED
    value_h = np.where(is_cens, numeric_column(runs, "elapsed_s") / 3600.0, target_hours(runs))
    if is_cens.any():
        q_log, _ = unraised_log_quantiles(model, runs)
        model.p90_raise_log = censored_p90_raise(
            text_values(runs["user"]), value_h, np.exp(q_log[:, 2]),
            limit_hours(runs), is_cens,
        )
    states = h["state"].astype(object).to_numpy()
    limit_t = limit_hours(targets)
    elapsed_t = numeric_column(targets, "elapsed_s") / 3600.0
    model.info = {
        "mode": mode,
        "fallback_reason": reason,
        "min_targets": MIN_TARGETS,
        "n_rows": int(len(h)),
        "n_targets": int(n_t),
        "n_targets_by_state": _count(states[bucket == TARGET]),
        "n_censored": int((bucket == CENSORED).sum()),
        "n_censored_by_state": _count(states[bucket == CENSORED]),
        "n_active": int((bucket == ACTIVE).sum()),
        "n_not_started": int((bucket == NOT_STARTED).sum()),
        "n_no_runtime": int((bucket == NO_RUNTIME).sum()),
        "n_targets_clipped_to_limit": int(np.sum(np.isfinite(limit_t) & (elapsed_t > limit_t))),
        "n_targets_without_limit": int(np.sum(~np.isfinite(limit_t))),
        "censored_use": "excluded from the targets; checked against each user's P90, raised where the "
                        "user's censored runs prove more than 10 % of its runs above it",
        "p90_raised_users": len(model.p90_raise_log),
        "calibration": calibration,
        "features": list(spec.features),
        "n_levels": {c: len(v) for c, v in spec.levels.items()},
        "params": params if boosters is not None else None,
        "rounds": ROUNDS if boosters is not None else 0,
        "lightgbm_version": lightgbm_module().__version__ if boosters is not None else None,
        "timezone": timezone,
    }
    return model


def _count(values: np.ndarray) -> dict[str, int]:
    """Value -> occurrences, sorted by value."""
    return {str(k): int(v) for k, v in sorted(pd.Series(values, dtype=object).value_counts().items())}
