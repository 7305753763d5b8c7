"""Fitting the scheduler runtime forecaster: :func:`fit_scheduler_model` ``(history) -> SchedulerModel``.

The rules (targets, censoring, quantiles, calibration, the censored-run P90 raise, the fallback)
are described in :mod:`forecasters.scheduler`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from domain.conformal import conformal_upper
from domain.records import ACTIVE_STATES, UNCENSORED_END_STATES, is_censored
from forecasters.errors import InputError
from forecasters.frames import require_columns
from forecasters.jobs.fitting import DEFAULT_PARAMS, lightgbm_module, train_booster
from forecasters.scheduler.features import (
    FEATURE_INPUTS,
    GROUP_FEATURES,
    RECENT_KEYS,
    REQUESTED_TYPES,
    FeatureSpec,
    RecentRuns,
    check_timezone,
    choose_annotation_keys,
    choose_levels,
    limit_hours,
    numeric_column,
    parse_annotations,
    run_end_ns,
    submit_times,
    text_values,
)
from forecasters.scheduler.model import (
    MODE_FALLBACK,
    MODE_LIGHTGBM,
    QUANTILES,
    SchedulerModel,
    input_values,
    unraised_log_quantiles,
)
from forecasters.scheduler.type_history import TypeHistory, type_history

#: Below this many target runs the model is the per-user/global quantile fallback.
MIN_TARGETS = 30
#: Boosting rounds of each quantile booster when the history is too small to choose them (no calibration slice).
ROUNDS = 200
#: Round counts the calibration slice chooses among (:func:`choose_groups_and_rounds`): a coarse
#: grid, so that the choice follows the trend of the held-out error, not its round-to-round noise.
ROUND_GRID: tuple[int, ...] = (100, 200, 400, 800, 1600, 3200)
#: LightGBM parameters: the job forecasters' (:data:`forecasters.jobs.fitting.DEFAULT_PARAMS`: one
#: thread, deterministic, 63 bins) with smaller trees and a slower rate for a few thousand noisy
#: scheduler rows (the quantile objective's gradients are signs: many small steps).
#: ``min_data_in_leaf`` 20 and the rate were chosen on four rolling time-ordered folds inside the
#: training part of the Alibaba openb pods (``benchmarks/forecast_jobs_real.py``), never on its test part;
#: ``num_leaves`` 7 and the grid's top (3,200 rounds: at 800 the held-out error was still falling) on its
#: ``--split calibration`` (trained on the first 60 % of the pods, scored on the next 20 %), both pod lists:
#: MAE ratio 0.926 / 0.927 against 0.938 / 0.930 with 15 leaves and 800 rounds (leaves 4-31, rates 0.03-0.1,
#: bagging, feature fraction 0.7, L2 10 and a 6,400-round grid tried; none lower on both).
PARAMS: dict[str, Any] = {**DEFAULT_PARAMS, "objective": "quantile", "num_leaves": 7, "min_data_in_leaf": 20,
                          "learning_rate": 0.03}
#: Optional feature groups the calibration slice chooses among (always with ``hardware``/``prior``
#: when the history has them): none, ``calendar``, ``recent``, both. The first within one standard
#: error of the lowest score wins (:func:`choose_groups_and_rounds`), so a group is added only when it
#: lowers the held-out error by more than its noise.
CHOSEN_GROUPS: tuple[tuple[str, ...], ...] = ((), ("calendar",), ("recent",), ("calendar", "recent"))
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

    ``tau >= 0.5``: the ``ceil((n + 1) tau)``-th smallest score (:func:`domain.conformal.conformal_upper`), so ``q + shift`` covers a new run
    with probability >= ``tau`` (Romano, Patterson and Candès 2019, "Conformalized quantile
    regression", one-sided); ``tau < 0.5``: the ``floor((n + 1) tau)``-th smallest (at most
    ``tau`` below). Ranks are clamped to ``[1, n]``.
    """
    if tau >= 0.5:
        return conformal_upper(scores, tau)
    s = np.sort(np.asarray(scores, dtype=float))
    n = len(s)
    return float(s[min(max(math.floor((n + 1) * tau), 1), n) - 1])


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


def _fit_boosters(x: pd.DataFrame, y_log: np.ndarray, params: dict[str, Any],
                  rounds: int = ROUNDS) -> tuple[Any, Any, Any]:
    """LightGBM quantile boosters at P10, P50, P90 of ``y_log`` (``(n,)`` log hours), ``rounds`` rounds each."""
    b10, b50, b90 = (train_booster(x, y_log, {**params, "alpha": a}, rounds) for a in QUANTILES)
    return b10, b50, b90


def mae_curve_h(x: pd.DataFrame, y_log: np.ndarray, x_val: pd.DataFrame, y_val_log: np.ndarray,
                params: dict[str, Any], rounds: int) -> tuple[np.ndarray, Any]:
    """``(MAE in hours (rounds,), booster)``: the P50 booster's error on ``(x_val, y_val_log)`` after each round.

    The booster (objective ``quantile``, alpha 0.5, on log hours) is fitted on ``(x, y_log)``; its
    error is measured in hours, the unit plans are made in (a P50 in log hours is the P50 in
    hours, but the errors that matter are the long runs'). The booster is returned for the
    per-run errors at a chosen round (``booster.predict(x_val, num_iteration=r)``).
    """
    lgb = lightgbm_module()
    cats = [c for c in x.columns if isinstance(x[c].dtype, pd.CategoricalDtype)]
    ds = lgb.Dataset(x, label=y_log, categorical_feature=cats, free_raw_data=False)
    vs = lgb.Dataset(x_val, label=y_val_log, categorical_feature=cats, reference=ds, free_raw_data=False)
    y_val_h = np.exp(np.asarray(y_val_log, dtype=float))

    def mae_h(preds: np.ndarray, _data: Any) -> tuple[str, float, bool]:
        return "mae_h", float(np.mean(np.abs(y_val_h - np.exp(preds)))), False

    record: dict[str, Any] = {}
    booster = lgb.train({**params, "alpha": 0.5, "metric": "None"}, ds, num_boost_round=rounds, valid_sets=[vs],
                        valid_names=["valid"], feval=mae_h, callbacks=[lgb.record_evaluation(record)])
    return np.asarray(record["valid"]["mae_h"], dtype=float), booster


def choose_groups_and_rounds(
    raw: dict[str, np.ndarray], n: int, spec_of: Any, y_log: np.ndarray, fit_rows: np.ndarray, cal_rows: np.ndarray,
    params: dict[str, Any],
) -> tuple[tuple[str, ...], int, dict[str, Any]]:
    """``(groups, rounds, report)``: the optional feature groups and round count chosen on held-out MAE.

    For each of :data:`CHOSEN_GROUPS`, the P50 booster is fitted on ``fit_rows`` (the earliest runs)
    and scored at each round count of :data:`ROUND_GRID` on ``cal_rows`` (the latest) by
    :func:`mae_curve_h`; each candidate's MAE is that at its best round count. The groups chosen
    are the first listed (fewer groups first) whose MAE is within one standard error of the lowest
    (the one-standard-error rule, Hastie, Tibshirani and Friedman, *The Elements of Statistical
    Learning*, 2nd ed., §7.10: the standard error is ``std(|error|) / sqrt(n)`` of the lowest
    candidate's per-run absolute errors in hours), so a group is added only when it lowers the
    held-out error by more than its noise; their best round count goes with them (the first on a
    tie). ``spec_of(groups)`` gives the :class:`FeatureSpec` of a choice and ``raw`` the raw values
    of the ``n`` target runs (:meth:`FeatureSpec.raw`). ``report``: ``{"candidates": {"+".join(groups)
    or "base": {"mae_h", "rounds", "mae_h_by_rounds"}}, "best", "se_h", "chosen", "rounds"}``.
    """
    found: list[tuple[float, tuple[str, ...], int, float]] = []
    report: dict[str, Any] = {"candidates": {}}
    y_val_h = np.exp(np.asarray(y_log[cal_rows], dtype=float))
    for groups in CHOSEN_GROUPS:
        x, _ = spec_of(groups).design_from_raw(raw, n)
        x_val = x.iloc[cal_rows]
        curve, booster = mae_curve_h(x.iloc[fit_rows], y_log[fit_rows], x_val, y_log[cal_rows], params,
                                     max(ROUND_GRID))
        at = [float(curve[r - 1]) for r in ROUND_GRID]
        k = int(np.argmin(at))
        errors = np.abs(y_val_h - np.exp(booster.predict(x_val, num_iteration=ROUND_GRID[k])))
        se = float(np.std(errors, ddof=1) / math.sqrt(len(errors))) if len(errors) > 1 else 0.0
        report["candidates"]["+".join(groups) or "base"] = {"mae_h": at[k], "rounds": ROUND_GRID[k],
                                                            "mae_h_by_rounds": dict(zip(map(str, ROUND_GRID), at))}
        found.append((at[k], groups, ROUND_GRID[k], se))
    lowest = min(found, key=lambda f: f[0])
    chosen = next(f for f in found if f[0] <= lowest[0] + lowest[3])
    report["best"] = "+".join(lowest[1]) or "base"
    report["se_h"] = lowest[3]
    report["chosen"] = "+".join(chosen[1]) or "base"
    report["rounds"] = chosen[2]
    return chosen[1], chosen[2], report


def history_ranges(targets: pd.DataFrame, annotation_keys: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """Input -> ``(min, max)`` of the target runs' finite values (:attr:`forecasters.scheduler.SchedulerModel.ranges`).

    Inputs: ``gpus``, ``time_limit_h`` and each numeric annotation key; one without a finite value
    is left out.
    """
    values = input_values(targets, ("gpus", "time_limit_h", *annotation_keys))
    return {k: (float(np.min(v[np.isfinite(v)])), float(np.max(v[np.isfinite(v)])))
            for k, v in values.items() if np.isfinite(v).any()}


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
    gpus_t = np.nan_to_num(numeric_column(targets, "gpus"), nan=0.0).astype(np.int64)
    gpu_q = {int(g): _quantiles_h(y_h[gpus_t == g]) for g in np.unique(gpus_t)}
    params = {**PARAMS, "seed": seed}
    calibration: dict[str, Any] = {"n": 0, "shift_p10_log": 0.0, "shift_p90_log": 0.0, "coverage_p90_before": None}
    selection: dict[str, Any] = {}
    rounds = 0
    if n_t < MIN_TARGETS:
        mode, reason = MODE_FALLBACK, f"{n_t} target runs < {MIN_TARGETS}: per-user (else global) quantiles"
        spec = FeatureSpec(timezone=timezone)
        boosters = None
    else:
        mode, reason = MODE_LIGHTGBM, None
        numeric_keys, categorical_keys = choose_annotation_keys(parse_annotations(targets))
        y_log = np.log(y_h)
        probe = FeatureSpec(timezone=timezone, numeric_annotations=numeric_keys,
                            categorical_annotations=categorical_keys, groups=tuple(GROUP_FEATURES), requested=True)
        raw0 = probe.raw(targets)
        recent = RecentRuns.build({k: raw0[k] for k in RECENT_KEYS}, run_end_ns(targets), y_log)
        raw = FeatureSpec(timezone=timezone, numeric_annotations=numeric_keys, categorical_annotations=categorical_keys,
                          recent=recent).raw(targets)
        levels = {c: choose_levels(raw[c]) for c in probe.categoricals}
        requested = bool(levels[REQUESTED_TYPES])
        if not requested:
            del levels[REQUESTED_TYPES]
        fixed = tuple(g for g, col in (("hardware", "gpu_log_peak_tflops"), ("prior", "prior_log_h"))
                      if np.isfinite(raw[col]).any())

        def spec_of(extra: tuple[str, ...]) -> FeatureSpec:
            groups = tuple(g for g in GROUP_FEATURES if g in fixed or g in extra)
            return FeatureSpec(timezone=timezone, levels=levels, numeric_annotations=numeric_keys,
                               categorical_annotations=categorical_keys, groups=groups,
                               recent=recent if "recent" in groups else None, requested=requested)

        n_cal = int(math.floor(CALIBRATION_FRACTION * n_t))
        if n_cal >= MIN_CALIBRATION_RUNS:
            order = np.argsort(submit_times(targets).to_numpy(), kind="stable")
            fit_rows, cal_rows = order[: n_t - n_cal], order[n_t - n_cal:]
            extra, rounds, selection = choose_groups_and_rounds(raw, n_t, spec_of, y_log, fit_rows, cal_rows, params)
            spec = spec_of(extra)
            x, _ = spec.design_from_raw(raw, n_t)
            early = _fit_boosters(x.iloc[fit_rows], y_log[fit_rows], params, rounds)
            x_cal = x.iloc[cal_rows]
            s10 = y_log[cal_rows] - early[0].predict(x_cal)
            s90 = y_log[cal_rows] - early[2].predict(x_cal)
            calibration = {
                "n": int(n_cal),
                "shift_p10_log": conformal_shift(s10, QUANTILES[0]),
                "shift_p90_log": conformal_shift(s90, QUANTILES[2]),
                "coverage_p90_before": float(np.mean(s90 <= 0)),
            }
        else:
            extra, rounds = ("calendar", "recent"), ROUNDS
            selection = {"candidates": {}, "chosen": "calendar+recent", "rounds": rounds,
                         "note": f"calibration slice {n_cal} < {MIN_CALIBRATION_RUNS} runs: every group, {ROUNDS} rounds"}
            spec = spec_of(extra)
            x, _ = spec.design_from_raw(raw, n_t)
        boosters = _fit_boosters(x, y_log, params, rounds)
    model = SchedulerModel(
        mode=mode,
        spec=spec,
        boosters=boosters,
        shifts_log=(calibration["shift_p10_log"], calibration["shift_p90_log"]),
        p90_raise_log={},
        user_quantiles_h=user_q,
        global_quantiles_h=global_q,
        runtimes_h=np.sort(np.asarray(y_h, dtype=float)),
        ranges=history_ranges(targets, spec.numeric_annotations),
        gpu_quantiles_h=gpu_q,
        types=type_history(targets, np.log(y_h)),
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
    types = model.types if model.types is not None else TypeHistory()
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
        "rounds": rounds,
        "feature_selection": selection,
        "lightgbm_version": lightgbm_module().__version__ if boosters is not None else None,
        "timezone": timezone,
        "gpu_types": {"runs": types.runs, "measured_speed": types.speed_ratios(), "multi_type_kinds": types.support},
    }
    return model


def _count(values: np.ndarray) -> dict[str, int]:
    """Value -> occurrences, sorted by value."""
    return {str(k): int(v) for k, v in sorted(pd.Series(values, dtype=object).value_counts().items())}


def refresh_recent(model: SchedulerModel, history: pd.DataFrame) -> SchedulerModel:
    """``model`` whose ``recent`` features read the finished runs of ``history`` (no refit).

    The boosters stay as fitted; only the table of finished runs per user, account and job-name
    token (:class:`forecasters.scheduler.features.RecentRuns`) is rebuilt from ``history``'s target
    runs (:func:`run_buckets`), e.g. the store at planning time, which holds runs that ended since
    the nightly fit. Leakage-free whatever ``history`` holds: a job's features only read runs that
    ended before its submit time. A model without the ``recent`` group is returned unchanged.

    Raises:
        InputError: a missing column or an unparsable value in ``history`` (row named).
    """
    if model.boosters is None or "recent" not in model.spec.groups:
        return model
    require_columns(history, FIT_INPUTS, "scheduler history")
    h = history.reset_index(drop=True)
    targets = h.loc[run_buckets(h) == TARGET].reset_index(drop=True)
    probe = FeatureSpec(timezone=model.spec.timezone)
    raw = probe.raw(targets)
    recent = RecentRuns.build({k: raw[k] for k in RECENT_KEYS}, run_end_ns(targets), np.log(target_hours(targets)))
    return replace(model, spec=replace(model.spec, recent=recent))
