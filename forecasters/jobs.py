"""Job forecasters (training, quantization, batch inference): one interface, LightGBM models.

Public API (pure: no files, MLflow or Prefect):

* :func:`fit` ``(kind, history) -> JobModel``
* :func:`predict` ``(model, jobs) -> DataFrame[job_id, duration_p10_h, duration_p50_h, duration_p90_h,
  gpus_pred, flags]`` (hours; ``gpus_pred`` a power of two; ``flags`` a list of strings)
* :func:`predict_for_sizes` ``(model, jobs, sizes)``: the same per allowed GPU count (for the MILP)
* :func:`evaluate` ``(model, holdout) -> dict`` in the JSON shape of ``gpuplan train --json``
* :func:`time_split`, :func:`duration_steps`, :func:`clip_to_step`
* feature lists :data:`FEATURES` (per kind) and fixed, versioned level lists stored in the model.

Model. Both targets are physics-informed residual models: LightGBM learns, from the history, the
correction to a noise-free physics prior computed from the job's own features, and the raw
boosters return only that correction (add the prior, a column of the design matrix).
GPU count: the prior is the kind's memory model, ``log2(gpus_used)`` of the per-kind module
(``max(gpus_requested, memory-driven minimum)``, column :data:`GPU_PRIOR`); LightGBM regression
learns ``log2(gpus_used) - prior``; the sum is rounded to a power of two (and never below
``gpus_requested`` when no job in the history ran on fewer GPUs than it requested).
Duration: physics-informed residual boosting. The prior is the kind's noise-free analytic
duration (DESIGN §4.1-4.3: ``analytic_duration_h`` of the per-kind modules, public constants
cited there) at the predicted GPU count; LightGBM (L2) learns the correction
``log(duration_h) - log(prior)`` from the history (equivalent to boosting with the prior as
``init_score``; fitted on the residual label so the boosting also starts from its mean). On the
generated histories the prior is unbiased and the correction stays small; on an operator's real
history the prior is biased (other MFU, overheads, interconnect, software) and the boosting
corrects it where the history shows it. Inputs of the correction: the kind's contract features
(categoricals native, with the fixed level lists of :mod:`forecasters.schema`), scale features
derived from them (:data:`DERIVED_FEATURES`: public rules of thumb such as ~6 N D FLOPs for a full
update and ~4 N D for adapters over the GPU type's datasheet peak, ~16 bytes of state per trained
parameter), and the GPU model's prediction (out-of-fold at fit time) with the prior itself
(:data:`STACKED_FEATURES`). The raw duration booster returns the correction only; add
:func:`offset_log_h` of its design matrix. Quantiles: a calibrated
residual model, i.e. the 10th/50th/90th percentiles of out-of-fold log residuals (K-fold on the
training rows) added to the point forecast, so P10 <= P50 <= P90 always. The same out-of-fold
errors choose the number of boosting rounds of the duration correction (at most ``num_rounds``):
on a history that the prior already explains (the generated ones) that is a round or a few, and
the model is the prior plus a constant; where the history disagrees with the prior, more rounds.
A training row with a missing category gets, as its priors, the median over the known levels.

Training rows with ``duration_h <= 0`` (failed at launch) or missing are excluded and counted in
``model.info["n_excluded_nonpositive"]`` (case C21). Missing categorical values in history (legacy
rows, case C11) are kept as LightGBM's missing branch and counted; unknown levels are refused.
At predict time a missing or unknown category is refused with a message naming the column, value,
row and known levels (case C09), unless ``on_unseen="fallback"``: then the job is predicted under
every known level of the offending column(s), P10 = min, P50 = median, P90 = max, GPUs = max, and
flagged ``unseen_category``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from forecasters import metrics as M
from forecasters.errors import InputError
from forecasters.frames import describe_unknown, normalise_features, require_columns, row_label, show
from forecasters.generators import kind_module
from forecasters.hardware import BANDWIDTH_BPS, MEMORY_GB, PEAK_BF16_FLOPS
from forecasters.schema import (
    JOB_ID,
    KINDS,
    SPECS,
    TARGET_DURATION,
    TARGET_GPUS,
    KindSpec,
    spec_for,
)

FEATURES: dict[str, tuple[str, ...]] = {k: SPECS[k].features for k in KINDS}
FLAG_UNSEEN = "unseen_category"
FLAG_CLIPPED = "clipped_min_duration"
PREDICTION_COLUMNS = ("job_id", "duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred", "flags")

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


def _log(x: pd.Series | np.ndarray) -> np.ndarray:
    return np.log(np.maximum(np.asarray(x, dtype=float), 1e-9))


def _gpu_const(table: dict[str, float], gpu_type: pd.Series) -> np.ndarray:
    """Per-row constant of the GPU type; NaN where the category is missing."""
    return gpu_type.astype(object).map(table).to_numpy(dtype=float)


def _derived_training(f: pd.DataFrame) -> dict[str, np.ndarray]:
    work = _log(f["model_params_b"]) + _log(f["dataset_tokens_m"]) + _log(f["epochs"])
    variant = f["training_variant"].astype(object)
    mean_len = f["dataset_tokens_m"].to_numpy() * 1e6 / np.maximum(f["dataset_examples"].to_numpy(), 1.0)
    # DESIGN §4.1: ~6 N D FLOPs for a full update, ~4 N D when only adapters train
    k = np.where(variant.isin(("lora", "qlora", "dora", "ia3", "prefix_tuning", "adapter")).to_numpy(), 4.0, 6.0)
    flops = np.log(k) + work + np.log(1e15)
    # memory proxies (ZeRO paper, Rajbhandari et al. 2020): ~16 bytes per trained parameter with
    # mixed-precision Adam; frozen weights at their precision (2 bytes bf16/fp16, 1 int8, ~0.5 nf4)
    wbytes = f["precision"].astype(object).map({"bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "int8": 1.0, "nf4": 0.5})
    trained = f["model_params_b"].to_numpy() * f["trainable_params_pct"].to_numpy() / 100.0
    state_gb = f["model_params_b"].to_numpy() * wbytes.to_numpy(dtype=float) + 14.0 * trained
    mem_gb = f["gpu_type"].astype(object).map(MEMORY_GB).to_numpy(dtype=float)
    return {
        "log_state_gb_per_requested_gpu": _log(state_gb) - _log(f["gpus_requested"]),
        "log2_state_over_gpu_memory": np.log2(np.maximum(state_gb, 1e-9) / mem_gb),
        "log_compute": work,
        "log_compute_per_gpu": work - _log(f["gpus_requested"]),
        "log_flops_time_s": flops - _log(f["gpus_requested"]) - np.log(_gpu_const(PEAK_BF16_FLOPS, f["gpu_type"])),
        "log_tokens_total": _log(f["dataset_tokens_m"]) + _log(f["epochs"]),
        "mean_example_tokens": mean_len,
        "log_seq_over_example": _log(f["seq_len"].to_numpy() / mean_len),
        "log_micro_batch_tokens": _log(f["micro_batch_size"].to_numpy() * np.minimum(f["seq_len"].to_numpy(), mean_len)),
    }


def _derived_quantization(f: pd.DataFrame) -> dict[str, np.ndarray]:
    tokens = f["calibration_samples"].to_numpy() * f["calibration_seq_len"].to_numpy()
    peak = np.log(_gpu_const(PEAK_BF16_FLOPS, f["gpu_type"]))
    return {
        "log_calibration_time_proxy": _log(f["model_params_b"]) + _log(tokens + 1.0) - peak,
        "log_solve_time_proxy": _log(f["model_params_b"]) + _log(f["hidden_size"]) - peak,
        "log_pass_time_proxy": _log(f["model_params_b"]) - np.log(_gpu_const(BANDWIDTH_BPS, f["gpu_type"])),
        "log_calibration_work": _log(f["model_params_b"]) + _log(tokens + 1.0),
        "log_params_x_hidden": _log(f["model_params_b"]) + _log(f["hidden_size"]),
        "log_params_per_gpu": _log(f["model_params_b"]) - _log(f["gpus_requested"]),
    }


def _derived_batch(f: pd.DataFrame) -> dict[str, np.ndarray]:
    reqs = f["num_requests"].to_numpy()
    tin = f["mean_input_tokens"].to_numpy()
    tout = f["mean_output_tokens"].to_numpy()
    per_gpu = _log(f["model_params_b"]) - _log(f["gpus_requested"])
    bw = np.log(_gpu_const(BANDWIDTH_BPS, f["gpu_type"]))
    peak = np.log(_gpu_const(PEAK_BF16_FLOPS, f["gpu_type"]))
    return {
        "log_decode_time_proxy": per_gpu + _log(reqs * tout) - _log(f["max_batch_size"]) - bw,
        "log_prefill_time_proxy": per_gpu + _log(reqs * tin) - peak,
        "log_tokens_total": _log(reqs * (tin + tout)),
        "log_decode_work_per_gpu": per_gpu + _log(reqs * tout),
        "log_prefill_work_per_gpu": per_gpu + _log(reqs * tin),
        "log_output_tokens_total": _log(reqs * tout),
    }


DERIVED: dict[str, Callable[[pd.DataFrame], dict[str, np.ndarray]]] = {
    "training": _derived_training,
    "quantization": _derived_quantization,
    "batch_inference": _derived_batch,
}
#: Names of the derived scale features per kind (all computed from the contract features).
DERIVED_FEATURES: dict[str, tuple[str, ...]] = {
    k: tuple(
        fn(pd.DataFrame({c: (["a100_40gb"] if c == "gpu_type" else np.ones(1)) for c in SPECS[k].features})).keys()
    )
    for k, fn in DERIVED.items()
}


@dataclass
class JobModel:
    """A fitted job forecaster.

    Attributes:
        kind: job kind.
        levels: column -> fixed level list the model was trained with (stored with the model).
        levels_version: version tag of those lists (:data:`forecasters.schema.LEVELS_VERSION`).
        duration_booster: LightGBM booster predicting the correction ``log(duration_h) - offset_log_h``
            (add :func:`offset_log_h` of the design matrix for the log point forecast).
        gpus_booster: LightGBM booster predicting ``log2(gpus_used)``.
        residual_quantiles_log: ``(q10, q50, q90)`` of out-of-fold log residuals.
        baseline: per-group median durations (``"group_medians"``, ``"global_median"``) and, for
            batch inference, median throughputs per (size class, GPU type) in tokens per hour.
        info: training facts (``n_train``, ``n_excluded_nonpositive``, ``n_missing_category``,
            library versions, parameters).
    """

    kind: str
    levels: dict[str, tuple[str, ...]]
    levels_version: str
    duration_booster: Any
    gpus_booster: Any
    residual_quantiles_log: tuple[float, float, float]
    baseline: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> KindSpec:
        """The kind's feature contract."""
        return spec_for(self.kind)

    @property
    def model_features(self) -> tuple[str, ...]:
        """Columns of the duration design matrix: contract, derived, GPU prior, then stacked GPU features."""
        return (*self.spec.features, *DERIVED_FEATURES[self.kind], GPU_PRIOR, *STACKED_FEATURES)

    def design_matrix(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Validated duration-booster input ``(n, len(model_features))``; refuses unknown/missing categories.

        This is the frame the raw duration booster (LightGBM flavour, ``Booster(model_file=...)``)
        takes; the GPU booster takes its first ``len(model_features) - 2`` columns. Both raw boosters
        return corrections to a physics prior held in the design matrix:
        ``log(duration_h) = duration_booster + design["log_analytic_h_at_pred_gpus"]``
        (:func:`offset_log_h`) and ``log2(gpus) = rint(gpus_booster + design["log2_gpus_physics"])``
        floored at the request (:func:`gpus_log2_from`).
        """
        feats, issues = normalise_features(jobs, self.spec, self.levels)
        if issues.missing or issues.unknown:
            raise InputError(describe_unknown(issues, jobs, self.levels))
        x = _design(feats, self.kind)
        return _stack(x, self.kind, self._gpus_log2(x))

    def _gpus_log2(self, x: pd.DataFrame) -> np.ndarray:
        """Predicted log2 GPU count (whole numbers), floored at the request when the history allows it."""
        return gpus_log2_from(self.gpus_booster, x, bool(self.info.get("gpus_floor_at_requested")))


#: Design column holding the physics prior of the GPU count: ``log2`` of the kind's ``gpus_used``
#: (``max(gpus_requested, memory-driven minimum)``, the memory models of the per-kind modules).
GPU_PRIOR = "log2_gpus_physics"


def gpus_log2_from(booster, x: pd.DataFrame, floor_at_requested: bool) -> np.ndarray:
    """Predicted log2 GPU counts ``(n,)`` (whole numbers in [0, 10]) from the GPU booster's correction.

    ``rint(booster.predict(x) + x["log2_gpus_physics"])``, raised to ``log2(gpus_requested)`` when
    ``floor_at_requested`` (no job in the history ran on fewer GPUs than it requested).
    """
    g = np.clip(np.rint(booster.predict(x) + x[GPU_PRIOR].to_numpy(dtype=float)), 0, 10)
    if floor_at_requested:
        g = np.maximum(g, np.log2(np.maximum(x["gpus_requested"].to_numpy(dtype=float), 1.0)))
    return g


#: Features stacked from the GPU-count model into the duration model: the predicted log2 GPU count
#: and the physics prior, ``log`` of the kind's noise-free analytic duration (hours) at that count
#: (jobs whose memory forces more GPUs than requested run on more GPUs, hence faster). The second
#: is also the boosting offset (:func:`offset_log_h`).
STACKED_FEATURES = ("log2_gpus_pred", "log_analytic_h_at_pred_gpus")
#: Bounds (hours) of the analytic prior before its log is taken: keeps the offset finite for
#: degenerate inputs (e.g. a job with almost no work) without touching any realistic job.
ANALYTIC_CLIP_H = (1e-6, 1e6)


def _stack(x: pd.DataFrame, kind: str, g_log2: np.ndarray) -> pd.DataFrame:
    out = x.copy()
    out["log2_gpus_pred"] = np.asarray(g_log2, dtype=float)
    out["log_analytic_h_at_pred_gpus"] = log_analytic_h(kind, x, out["log2_gpus_pred"].to_numpy())
    return out


def offset_log_h(xs: pd.DataFrame) -> np.ndarray:
    """Boosting offset ``(n,)`` in log hours of a stacked design matrix: its ``log_analytic_h_at_pred_gpus``.

    The duration booster is trained with this as ``init_score`` and returns only the correction:
    ``log(duration_h) = duration_booster.predict(xs) + offset_log_h(xs)``.
    """
    return xs["log_analytic_h_at_pred_gpus"].to_numpy(dtype=float)


def _plain_features(feats: pd.DataFrame, spec: KindSpec) -> pd.DataFrame:
    """Normalised features as plain numpy-backed columns (object strings, floats, bools) for the physics modules."""
    out = pd.DataFrame(index=feats.index)
    for c in spec.features:
        if c in spec.categorical:
            out[c] = feats[c].astype(object).to_numpy()
        elif c in spec.boolean:
            out[c] = feats[c].to_numpy() > 0.5
        else:
            out[c] = feats[c].to_numpy()
    return out


def log_analytic_h(kind: str, feats: pd.DataFrame, g_log2: np.ndarray) -> np.ndarray:
    """Physics prior ``(n,)``: log of the kind's noise-free ``analytic_duration_h`` at ``2**g_log2`` requested GPUs.

    The analytic estimate (DESIGN §4.1-4.3; ``analytic_duration_h`` of :mod:`forecasters.training`,
    :mod:`forecasters.quantization`, :mod:`forecasters.batch_inference`, public constants cited
    there) itself runs a job on ``max(requested, memory-driven minimum)`` GPUs, so the prior is
    evaluated at ``max(2**g_log2, memory minimum)``. Each row depends only on its own features.

    Args:
        kind: job kind.
        feats: ``(n, ...)`` normalised features (:func:`forecasters.frames.normalise_features`).
        g_log2: ``(n,)`` predicted log2 GPU counts.

    Returns:
        float array ``(n,)``, log hours, from an estimate clipped to :data:`ANALYTIC_CLIP_H`. A row
        with a missing category (legacy history rows, case C11) gets the median over every known
        level (every combination when several columns are missing).

    Raises:
        InputError: the estimate is not a number for a row (row named), e.g. ``model_params_b`` 0.
    """

    def log_h(mod, frame: pd.DataFrame) -> np.ndarray:
        return np.log(np.clip(np.asarray(mod.analytic_duration_h(frame), dtype=float), *ANALYTIC_CLIP_H))

    return _physics_prior(kind, feats, log_h, "analytic duration estimate", np.exp2(np.asarray(g_log2, dtype=float)))


def log2_gpus_physics(kind: str, feats: pd.DataFrame) -> np.ndarray:
    """GPU-count prior ``(n,)``: ``log2`` of the kind's ``gpus_used`` (``max(requested, memory minimum)``).

    The memory models (and their sources) are in the per-kind modules' docstrings. Missing
    categories are pooled as in :func:`log_analytic_h` (median over the known levels).

    Raises:
        InputError: the prior is not a number for a row (row named).
    """

    def log2_g(mod, frame: pd.DataFrame) -> np.ndarray:
        return np.log2(np.maximum(np.asarray(mod.gpus_used(frame), dtype=float), 1.0))

    return _physics_prior(kind, feats, log2_g, "memory-driven GPU count", None)


def _physics_prior(kind: str, feats: pd.DataFrame, compute, what: str, gpus_requested) -> np.ndarray:
    """``compute(module, plain_frame) -> (n,)`` per row; rows with missing categories pooled by the median."""
    spec = spec_for(kind)
    mod = kind_module(kind)
    plain = _plain_features(feats, spec).reset_index(drop=True)
    if gpus_requested is not None:
        plain["gpus_requested"] = gpus_requested
    cats = list(spec.categorical)
    miss = plain[cats].isna().to_numpy()
    out = np.full(len(plain), np.nan)
    complete = ~miss.any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # degenerate rows are named below
        if complete.any():
            out[complete] = compute(mod, plain.loc[complete].reset_index(drop=True))
        for pattern in sorted({tuple(r) for r in miss[~complete]}):
            rows = np.flatnonzero((miss == np.array(pattern)).all(axis=1))
            cols = [c for c, m in zip(cats, pattern) if m]
            combos = list(itertools.product(*(spec.categorical[c] for c in cols)))
            expanded = plain.iloc[np.repeat(rows, len(combos))].reset_index(drop=True)
            for j, c in enumerate(cols):
                expanded[c] = np.tile(np.array([combo[j] for combo in combos], dtype=object), len(rows))
            out[rows] = np.median(compute(mod, expanded).reshape(len(rows), len(combos)), axis=1)
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        raise InputError(
            f"row {int(bad[0])}: the {what} of this {kind} job is not a number; check its numeric "
            f"features ({', '.join(c for c in spec.features if c not in spec.categorical)})"
        )
    return out


def _design(feats: pd.DataFrame, kind: str) -> pd.DataFrame:
    out = feats.copy()
    for name, values in DERIVED[kind](feats).items():
        out[name] = np.asarray(values, dtype=float)
    out[GPU_PRIOR] = log2_gpus_physics(kind, feats)
    return out


def _train_booster(
    x: pd.DataFrame,
    y: np.ndarray,
    params: dict[str, Any],
    rounds: int,
    valid: tuple[pd.DataFrame, np.ndarray] | None = None,
):
    """Train ``rounds`` LightGBM rounds; with ``valid``, return ``(booster, valid L2 per round (rounds,))``."""
    import lightgbm as lgb

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


def _clean_history(kind: str, history: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Drop rows with non-positive or missing duration; return (rows kept, count dropped)."""
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


def _gpus_log2(history: pd.DataFrame) -> np.ndarray:
    g = pd.to_numeric(history[TARGET_GPUS].astype(object), errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(g) | (g < 1) | (np.log2(np.maximum(g, 1)) % 1 != 0))
    if bad.size:
        i = int(bad[0])
        raise InputError(
            f"{row_label(history, i)}, column {TARGET_GPUS!r}: value {show(history[TARGET_GPUS].iloc[i])} "
            "is not a power of two >= 1"
        )
    return np.log2(g)


def _baseline_stats(kind: str, spec: KindSpec, feats: pd.DataFrame, y_h: np.ndarray) -> dict[str, Any]:
    groups = feats[spec.group_col].astype(object).to_numpy()
    frame = pd.DataFrame({"g": groups, "y": y_h})
    med = frame.dropna(subset=["g"]).groupby("g", observed=True)["y"].median()
    out: dict[str, Any] = {
        "group_col": spec.group_col,
        "group_medians": {str(k): float(v) for k, v in med.items()},
        "global_median": float(np.median(y_h)),
    }
    if kind == "batch_inference":
        from forecasters.batch_inference import size_class

        tokens = feats["num_requests"].to_numpy() * (feats["mean_input_tokens"].to_numpy() + feats["mean_output_tokens"].to_numpy())
        thr = tokens / y_h
        key = [f"{c}|{g}" for c, g in zip(size_class(feats["model_params_b"].to_numpy()), feats["gpu_type"].astype(object))]
        tf = pd.DataFrame({"k": key, "t": thr})
        out["throughput_medians_tok_per_h"] = {str(k): float(v) for k, v in tf.groupby("k")["t"].median().items()}
        out["throughput_global_median_tok_per_h"] = float(np.median(thr))
    return out


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
    kept, n_excluded = _clean_history(kind, history)
    if len(kept) < 20:
        raise InputError(f"{kind} history has {len(kept)} usable rows (duration_h > 0); need at least 20")
    feats, issues = normalise_features(kept, spec)
    if issues.unknown:
        only_unknown = type(issues)(unknown=issues.unknown, unknown_values=issues.unknown_values)
        raise InputError(f"{kind} history: " + describe_unknown(only_unknown, kept, spec.categorical))
    y_h = kept[TARGET_DURATION].to_numpy(dtype=float)
    y = np.log(y_h)
    g2 = _gpus_log2(kept)
    x = _design(feats, kind)
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
        oof_g[te] = gpus_of(_train_booster(x.loc[tr], g_resid[tr], p, min(GPU_ROUNDS, num_rounds)), x.loc[te])
    gpu_booster = _train_booster(x, g_resid, p, min(GPU_ROUNDS, num_rounds))
    xs = _stack(x, kind, oof_g)
    # K-fold on the training rows: the out-of-fold squared error of the correction after each
    # round picks the number of rounds (few when the prior is already right, many when the
    # history shows a bias), and the out-of-fold residuals at that round give the quantiles.
    fold_fits = []
    sq_err = np.zeros(num_rounds)
    for k in range(n_folds):
        tr, te = folds != k, folds == k
        xte = _stack(x.loc[te], kind, gpus_of(gpu_booster, x.loc[te]))
        b, l2 = _train_booster(
            xs.loc[tr], y[tr] - offset_log_h(xs.loc[tr]), p, num_rounds, valid=(xte, y[te] - offset_log_h(xte))
        )
        sq_err += l2 * te.sum()
        fold_fits.append((b, xte, te))
    rounds = int(np.argmin(sq_err)) + 1
    oof = np.empty(len(x))
    for b, xte, te in fold_fits:
        oof[te] = b.predict(xte, num_iteration=rounds) + offset_log_h(xte)
    q10, q50, q90 = (float(v) for v in np.quantile(y - oof, [0.1, 0.5, 0.9]))
    dur_booster = _train_booster(xs, y - offset_log_h(xs), p, rounds)
    import lightgbm as lgb

    info = {
        "n_train": int(len(kept)),
        "n_excluded_nonpositive": n_excluded,
        "n_missing_category": {c: int(m.sum()) for c, m in issues.missing.items()},
        "gpus_floor_at_requested": floor,
        "num_rounds": int(num_rounds),
        "duration_rounds": rounds,
        "oof_mse_log_by_round": [float(v) for v in sq_err / len(x)],
        "oof_folds": int(max(int(oof_folds), 2)),
        "params": p,
        "lightgbm_version": lgb.__version__,
        "pandas_version": pd.__version__,
    }
    return JobModel(
        kind=kind,
        levels={c: tuple(v) for c, v in spec.categorical.items()},
        levels_version=spec.levels_version,
        duration_booster=dur_booster,
        gpus_booster=gpu_booster,
        residual_quantiles_log=(q10, q50, q90),
        baseline=_baseline_stats(kind, spec, feats, y_h),
        info=info,
    )


def _raw_predict(model: JobModel, x: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    g = model._gpus_log2(x)
    xs = _stack(x, model.kind, g)
    mu = model.duration_booster.predict(xs) + offset_log_h(xs)
    q10, q50, q90 = model.residual_quantiles_log
    return np.exp(mu + q10), np.exp(mu + q50), np.exp(mu + q90), (2**g).astype(np.int64)


def _job_ids(jobs: pd.DataFrame) -> list[str]:
    if JOB_ID in jobs.columns:
        return [str(v) for v in jobs[JOB_ID].tolist()]
    return [str(i) for i in range(len(jobs))]


def predict(
    model: JobModel,
    jobs: pd.DataFrame,
    *,
    on_unseen: str = "error",
    step_minutes: float | None = None,
) -> pd.DataFrame:
    """Duration quantiles and GPU count per job.

    Args:
        model: a fitted :class:`JobModel`.
        jobs: ``(n, ...)`` the kind's features (any dtypes, any category order), optional ``job_id``.
        on_unseen: ``"error"`` (default) refuses a missing/unknown category; ``"fallback"`` predicts
            the job pooled over every known level and flags it ``unseen_category``.
        step_minutes: when given, quantiles shorter than one planning step are raised to one step
            and the job is flagged ``clipped_min_duration`` (case C21).

    Returns:
        ``(n, 6)`` frame: ``job_id`` (str, the input's, or the row position), ``duration_p10_h``,
        ``duration_p50_h``, ``duration_p90_h`` (hours, non-decreasing), ``gpus_pred`` (int, power
        of two), ``flags`` (list of str). Each row depends only on that job's own features.

    Raises:
        InputError: missing feature column; non-numeric value; missing/unknown category when
            ``on_unseen="error"``; an invalid ``on_unseen``.
    """
    if on_unseen not in ("error", "fallback"):
        raise InputError(f"on_unseen must be 'error' or 'fallback', got {on_unseen!r}")
    feats, issues = normalise_features(jobs, model.spec, model.levels)
    bad_rows = issues.any_row(len(feats))
    if bad_rows.any() and on_unseen == "error":
        raise InputError(describe_unknown(issues, jobs, model.levels))
    feats, rounded = round_requests_pow2(feats, jobs)
    x = _design(feats, model.kind)
    p10, p50, p90, gpus = _raw_predict(model, x)
    flags: list[list[str]] = [[FLAG_REQUEST_ROUNDED] if r else [] for r in rounded]
    for i in np.flatnonzero(bad_rows):
        p10[i], p50[i], p90[i], gpus[i] = _pooled(model, feats.iloc[[i]], issues, int(i))
        flags[i].append(FLAG_UNSEEN)
    out = pd.DataFrame(
        {
            "job_id": _job_ids(jobs),
            "duration_p10_h": p10,
            "duration_p50_h": p50,
            "duration_p90_h": p90,
            "gpus_pred": gpus,
            "flags": flags,
        }
    )
    return out if step_minutes is None else clip_to_step(out, step_minutes)


#: Flag of a job whose ``gpus_requested`` was not a power of two and was rounded up (case C22).
FLAG_REQUEST_ROUNDED = "gpus_requested_rounded_up"


def round_requests_pow2(feats: pd.DataFrame, jobs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Round ``gpus_requested`` up to the next power of two (case C22; DESIGN §4.1 feature 16).

    Tensor parallelism and the buddy block layout need power-of-two GPU counts, so a request of
    3 is planned as 4 and 6 as 8; values are rounded to 1e-6 before the ceiling so that
    8.0000001 stays 8. The forecast is made at the rounded count.

    Args:
        feats: ``(n, k)`` canonical features from :func:`normalise_features` (float64 numerics).
        jobs: the caller's frame, for naming rows in errors.

    Returns:
        ``(features, rounded)``: features with ``gpus_requested`` replaced, and an ``(n,)`` bool
        array marking the rows that changed.

    Raises:
        InputError: a request below 1 GPU (row and value named).
    """
    req = feats["gpus_requested"].to_numpy(dtype=float)
    low = np.flatnonzero(req < 1)
    if low.size:
        i = int(low[0])
        raise InputError(f"{row_label(jobs, i)}, column 'gpus_requested': value {show(req[i])} must be >= 1")
    pow2 = 2.0 ** np.ceil(np.log2(np.round(req, 6)))
    rounded = pow2 != req
    if rounded.any():
        feats = feats.assign(gpus_requested=pow2)
    return feats, rounded


def predict_for_sizes(model: JobModel, jobs: pd.DataFrame, sizes, **kwargs) -> pd.DataFrame:
    """Forecast every job at each allowed GPU count (DESIGN §5: ``d_{j,s}`` per size ``s``).

    Args:
        model: a fitted :class:`JobModel`.
        jobs: ``(n, ...)`` jobs with the kind's features (``gpus_requested`` is overridden).
        sizes: GPU counts to try, powers of two >= 1.
        **kwargs: passed to :func:`predict` (``on_unseen``, ``step_minutes``).

    Returns:
        ``(n * len(sizes), 8)`` frame, job-major: ``job_id``, ``gpus`` (the size), the three
        duration quantiles, ``gpus_pred`` (what the job would actually need at that request; more
        than ``gpus`` when its memory does not fit), ``fits`` (``gpus_pred <= gpus``), ``flags``.

    Raises:
        InputError: a size that is not a power of two >= 1, plus everything :func:`predict` raises.
    """
    sizes = [int(s) for s in sizes]
    bad = [s for s in sizes if s < 1 or (s & (s - 1)) != 0]
    if not sizes or bad:
        raise InputError(f"sizes must be powers of two >= 1, got {sizes!r}")
    parts = []
    for s in sizes:
        p = predict(model, jobs.assign(gpus_requested=s), **kwargs)
        p.insert(1, "gpus", s)
        p["_pos"] = np.arange(len(p))
        parts.append(p)
    out = pd.concat(parts, ignore_index=True).sort_values(["_pos", "gpus"], kind="stable")
    out["fits"] = out["gpus_pred"] <= out["gpus"]
    cols = ["job_id", "gpus", "duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred", "fits", "flags"]
    return out[cols].reset_index(drop=True)


def _pooled(model: JobModel, row: pd.DataFrame, issues, i: int) -> tuple[float, float, float, int]:
    """Fallback for one job: predict under every combination of known levels of its bad columns."""
    bad_cols = [c for c, m in (*issues.missing.items(), *issues.unknown.items()) if m[i]]
    variants = [row.reset_index(drop=True)]
    for col in dict.fromkeys(bad_cols):
        expanded = []
        for v in variants:
            for level in model.levels[col]:
                w = v.copy()
                w[col] = pd.Categorical([level], categories=list(model.levels[col]))
                expanded.append(w)
        variants = expanded
    x = _design(pd.concat(variants, ignore_index=True), model.kind)
    p10, p50, p90, g = _raw_predict(model, x)
    return float(p10.min()), float(np.median(p50)), float(p90.max()), int(g.max())


def _step_h(step_minutes: float) -> float:
    if not np.isfinite(step_minutes) or step_minutes <= 0:
        raise InputError(f"step_minutes must be > 0, got {step_minutes!r}")
    return float(step_minutes) / 60.0


def duration_steps(hours, step_minutes: float = 30.0) -> np.ndarray:
    """Whole planning steps for durations: ``ceil(hours * 60 / step_minutes)``, at least 1.

    Args:
        hours: scalar or ``(n,)`` durations in hours (zero, negative or NaN allowed: they become 1 step).
        step_minutes: planning step in minutes (> 0).

    Returns:
        int64 array of the input's shape (a 0-d array for a scalar). Example: -0.4 h and 0.2 h at
        30-minute steps are both exactly 1 step; 0.51 h is 2 steps.
    """
    step_h = _step_h(step_minutes)
    h = np.asarray(hours, dtype=float)
    steps = np.ceil(np.round(h / step_h, 9))
    steps = np.where(np.isfinite(steps), steps, 1.0)
    return np.maximum(steps, 1.0).astype(np.int64)


def clip_to_step(predictions: pd.DataFrame, step_minutes: float = 30.0) -> pd.DataFrame:
    """Copy of a prediction frame with every quantile raised to at least one step, flagged ``clipped_min_duration``."""
    step_h = _step_h(step_minutes)
    out = predictions.copy()
    flags = [list(f) for f in out["flags"]] if "flags" in out.columns else [[] for _ in range(len(out))]
    for col in ("duration_p10_h", "duration_p50_h", "duration_p90_h"):
        v = out[col].to_numpy(dtype=float)
        low = ~(v >= step_h)
        for i in np.flatnonzero(low):
            if FLAG_CLIPPED not in flags[i]:
                flags[i].append(FLAG_CLIPPED)
        out[col] = np.where(low, step_h, v)
    out["flags"] = flags
    return out


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


def baseline_group_median(model: JobModel, jobs: pd.DataFrame) -> np.ndarray:
    """Per-variant (per-method, per-engine) median duration from training, hours ``(n,)``; global median if unseen."""
    spec = model.spec
    feats, _ = normalise_features(jobs, spec, model.levels)
    med = model.baseline["group_medians"]
    g = feats[spec.group_col].astype(object).to_numpy()
    return np.array([med.get(str(v), model.baseline["global_median"]) for v in g], dtype=float)


def baseline_throughput(model: JobModel, jobs: pd.DataFrame) -> np.ndarray:
    """Batch inference §4.3 baseline: tokens / median throughput per (size class, GPU type), hours ``(n,)``."""
    from forecasters.batch_inference import size_class

    if model.kind != "batch_inference":
        raise InputError(f"the throughput baseline is for batch_inference, not {model.kind}")
    feats, _ = normalise_features(jobs, model.spec, model.levels)
    tokens = feats["num_requests"].to_numpy() * (feats["mean_input_tokens"].to_numpy() + feats["mean_output_tokens"].to_numpy())
    med = model.baseline["throughput_medians_tok_per_h"]
    glob = model.baseline["throughput_global_median_tok_per_h"]
    keys = [f"{c}|{g}" for c, g in zip(size_class(feats["model_params_b"].to_numpy()), feats["gpu_type"].astype(object))]
    return tokens / np.array([med.get(k, glob) for k in keys], dtype=float)


def _point_metrics(y: np.ndarray, yhat: np.ndarray) -> dict[str, float]:
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
    kept, _ = _clean_history(model.kind, holdout)
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
    if model.kind == "batch_inference":
        baselines["throughput_median"] = _point_metrics(y, baseline_throughput(model, kept))
    return {
        "kind": model.kind,
        "n_train": int(model.info["n_train"]),
        "n_test": int(len(kept)),
        "metrics": metrics,
        "baselines": baselines,
    }


def _plain(model: JobModel, jobs: pd.DataFrame) -> pd.DataFrame:
    """Features as plain numpy-backed columns (strings, floats) for the analytic formulas."""
    feats, _ = normalise_features(jobs, model.spec, model.levels)
    return _plain_features(feats, model.spec)
