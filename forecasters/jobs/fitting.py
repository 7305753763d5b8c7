"""Fitting a job forecaster: :func:`fit` ``(kind, history) -> JobModel``.

Both boosters learn corrections to the physics priors (:mod:`forecasters.jobs.priors`); the
out-of-fold errors on the training rows pick the duration booster's number of rounds and give
the residual quantiles (see :mod:`forecasters.jobs`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.frames import describe_unknown, normalise_features, require_columns, row_label, show
from forecasters.jobs.baselines import baseline_stats
from forecasters.jobs.features import design_frame
from forecasters.jobs.model import JobModel, gpus_log2_from
from forecasters.jobs.priors import GPU_PRIOR, offset_log_h, stack
from forecasters.schema import TARGET_DURATION, TARGET_GPUS, spec_for

#: LightGBM parameters (small data: a few thousand rows). ``num_threads`` 1 and ``deterministic``
#: make fits reproducible and cheap on a shared 2-core machine.
DEFAULT_PARAMS: dict[str, Any] = {
    "objective": "regression",
    "learning_rate": 0.08,
    "max_bin": 63,
    "num_leaves": 31,
    "min_data_in_leaf": 10,
    "feature_fraction": 0.9,
    "lambda_l2": 1.0,
    "max_cat_to_onehot": 16,
    "cat_smooth": 5.0,
    "min_data_per_group": 10,
    "num_threads": 1,
    "deterministic": True,
    "force_row_wise": True,
    "verbose": -1,
    "seed": 0,
}
DEFAULT_ROUNDS = 400
GPU_ROUNDS = 150  # at most; never more than the duration model's rounds
OOF_FOLDS = 3


def lightgbm_module() -> ModuleType:
    """The ``lightgbm`` module, imported on first use.

    A local import on purpose: ``import lightgbm`` costs ~0.9 s (measured with ``python -X importtime``
    after numpy and pandas), and only fitting needs it; importing :mod:`forecasters.jobs` for
    predictions with a loaded model, or for its constants, does not pay it.
    """
    import lightgbm

    return lightgbm


def train_booster(
    x: pd.DataFrame,
    y: np.ndarray,
    params: dict[str, Any],
    rounds: int,
    valid: tuple[pd.DataFrame, np.ndarray] | None = None,
) -> Any:
    """Train ``rounds`` LightGBM rounds; with ``valid``, return ``(booster, valid L2 per round (rounds,))``."""
    lgb = lightgbm_module()
    cats = [c for c in x.columns if isinstance(x[c].dtype, pd.CategoricalDtype)]
    ds = lgb.Dataset(x, label=y, categorical_feature=cats, free_raw_data=False)
    if valid is None:
        return lgb.train(params, ds, num_boost_round=rounds)
    vs = lgb.Dataset(valid[0], label=valid[1], categorical_feature=cats, reference=ds, free_raw_data=False)
    record: dict[str, Any] = {}
    booster = lgb.train(
        {**params, "metric": "l2"},
        ds,
        num_boost_round=rounds,
        valid_sets=[vs],
        valid_names=["valid"],
        callbacks=[lgb.record_evaluation(record)],
    )
    return booster, np.asarray(record["valid"]["l2"], dtype=float)


def clean_history(kind: str, history: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Drop rows with non-positive or missing duration; return ``(rows kept, count dropped)``.

    Raises:
        InputError: no ``duration_h``/``gpus_used`` column, or a duration that is not a number
            (row and value named).
    """
    require_columns(history, (TARGET_DURATION, TARGET_GPUS), f"{kind} history")
    try:
        dur = pd.to_numeric(history[TARGET_DURATION].astype(object), errors="raise").to_numpy(dtype=float)
    except (TypeError, ValueError):
        bad = pd.to_numeric(history[TARGET_DURATION].astype(object), errors="coerce").isna() & history[
            TARGET_DURATION
        ].notna()
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(
            f"{row_label(history, i)}, column {TARGET_DURATION!r}: value {show(history[TARGET_DURATION].iloc[i])} is not a number"
        ) from None
    keep = np.isfinite(dur) & (dur > 0)
    return history.loc[keep].reset_index(drop=True), int((~keep).sum())


def _target_gpus_log2(history: pd.DataFrame) -> np.ndarray:
    """``log2(gpus_used)`` of each history row ``(n,)``; refuses a value that is not a power of two >= 1."""
    g = pd.to_numeric(history[TARGET_GPUS].astype(object), errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(g) | (g < 1) | (np.log2(np.maximum(g, 1)) % 1 != 0))
    if bad.size:
        i = int(bad[0])
        raise InputError(
            f"{row_label(history, i)}, column {TARGET_GPUS!r}: value {show(history[TARGET_GPUS].iloc[i])} "
            "is not a power of two >= 1"
        )
    return np.log2(g)


def fit(
    kind: str,
    history: pd.DataFrame,
    *,
    params: dict[str, Any] | None = None,
    num_rounds: int | None = None,
    oof_folds: int | None = None,
    seed: int = 0,
) -> JobModel:
    """Fit the duration and GPU-count forecasters of ``kind`` on a history frame.

    Args:
        kind: ``training``, ``quantization`` or ``batch_inference``.
        history: ``(n, ...)`` one row per finished job: the kind's features, ``duration_h`` (hours)
            and ``gpus_used``. Extra columns are ignored; the input is not modified.
        params: LightGBM parameter overrides (e.g. ``{"num_threads": 2}``).
        num_rounds: at most this many boosting rounds of the duration correction (default
            :data:`DEFAULT_ROUNDS`); the count used is the one with the least out-of-fold squared
            log error on the training rows (``info["duration_rounds"]``).
        oof_folds: folds for the out-of-fold residual quantiles (>= 2; default :data:`OOF_FOLDS`).
        seed: seed of LightGBM and of the fold assignment.

    Raises:
        InputError: unknown kind; missing column; non-numeric value (row and column named); an
            unknown category level; a ``gpus_used`` that is not a power of two; fewer than 20 usable rows.
    """
    spec = spec_for(kind)
    num_rounds = DEFAULT_ROUNDS if num_rounds is None else int(num_rounds)
    oof_folds = OOF_FOLDS if oof_folds is None else int(oof_folds)
    kept, n_excluded = clean_history(kind, history)
    if len(kept) < 20:
        raise InputError(f"{kind} history has {len(kept)} usable rows (duration_h > 0); need at least 20")
    feats, issues = normalise_features(kept, spec)
    if issues.unknown:
        only_unknown = type(issues)(unknown=issues.unknown, unknown_values=issues.unknown_values)
        raise InputError(f"{kind} history: " + describe_unknown(only_unknown, kept, spec.categorical))
    y_h = kept[TARGET_DURATION].to_numpy(dtype=float)
    y = np.log(y_h)
    g2 = _target_gpus_log2(kept)
    x = design_frame(feats, kind)
    p = {**DEFAULT_PARAMS, "seed": seed, **(params or {})}

    floor = bool(np.all(g2 >= np.log2(np.maximum(x["gpus_requested"].to_numpy(), 1.0)) - 1e-9))

    def gpus_of(booster, xx: pd.DataFrame) -> np.ndarray:
        return gpus_log2_from(booster, xx, floor)

    g_resid = g2 - x[GPU_PRIOR].to_numpy()  # the GPU booster learns the correction to the memory prior

    n_folds = max(int(oof_folds), 2)
    rng = np.random.default_rng(seed)
    folds = rng.permutation(len(x)) % n_folds
    # out-of-fold GPU predictions feed the duration model as they will at predict time
    oof_g = np.empty(len(x))
    for k in range(n_folds):
        tr, te = folds != k, folds == k
        oof_g[te] = gpus_of(train_booster(x.loc[tr], g_resid[tr], p, min(GPU_ROUNDS, num_rounds)), x.loc[te])
    gpu_booster = train_booster(x, g_resid, p, min(GPU_ROUNDS, num_rounds))
    xs = stack(x, kind, oof_g)
    # K-fold on the training rows: the out-of-fold squared error of the correction after each
    # round picks the number of rounds (few when the prior is already right, many when the
    # history shows a bias), and the out-of-fold residuals at that round give the quantiles.
    fold_fits = []
    sq_err = np.zeros(num_rounds)
    for k in range(n_folds):
        tr, te = folds != k, folds == k
        xte = stack(x.loc[te], kind, gpus_of(gpu_booster, x.loc[te]))
        b, l2 = train_booster(
            xs.loc[tr], y[tr] - offset_log_h(xs.loc[tr]), p, num_rounds, valid=(xte, y[te] - offset_log_h(xte))
        )
        sq_err += l2 * te.sum()
        fold_fits.append((b, xte, te))
    rounds = int(np.argmin(sq_err)) + 1
    oof = np.empty(len(x))
    for b, xte, te in fold_fits:
        oof[te] = b.predict(xte, num_iteration=rounds) + offset_log_h(xte)
    q10, q50, q90 = (float(v) for v in np.quantile(y - oof, [0.1, 0.5, 0.9]))
    dur_booster = train_booster(xs, y - offset_log_h(xs), p, rounds)
    info = {
        "n_train": int(len(kept)),
        "n_excluded_nonpositive": n_excluded,
        "n_missing_category": {c: int(m.sum()) for c, m in issues.missing.items()},
        "gpu_types_seen": sorted(str(v) for v in feats["gpu_type"].dropna().astype(object).unique()),
        "gpus_floor_at_requested": floor,
        "num_rounds": int(num_rounds),
        "duration_rounds": rounds,
        "oof_mse_log_by_round": [float(v) for v in sq_err / len(x)],
        "oof_folds": int(max(int(oof_folds), 2)),
        "params": p,
        "lightgbm_version": lightgbm_module().__version__,
        "pandas_version": pd.__version__,
    }
    return JobModel(
        kind=kind,
        levels={c: tuple(v) for c, v in spec.categorical.items()},
        levels_version=spec.levels_version,
        duration_booster=dur_booster,
        gpus_booster=gpu_booster,
        residual_quantiles_log=(q10, q50, q90),
        baseline=baseline_stats(kind, spec, feats, y_h),
        info=info,
    )
