"""Inputs of the job forecasters: the feature contract, derived scale features, the design matrix.

* :data:`FEATURES`: the contract features per kind (:mod:`forecasters.schema`).
* :data:`DERIVED_FEATURES`: scale features computed from them (public rules of thumb such as
  ~6 N D FLOPs for a full update and ~4 N D for adapters over the GPU type's datasheet peak,
  ~16 bytes of state per trained parameter), per kind (:data:`DERIVED`).
* :func:`design_frame`: contract + derived features + the GPU-count prior (:data:`GPU_PRIOR`),
  the input of the GPU booster; :func:`forecasters.jobs.priors.stack` adds the stacked duration
  features.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from domain import JOB_KINDS
from forecasters.jobs.priors import GPU_PRIOR, log2_gpus_physics
from forecasters.schema import SPECS
from forecasters.workloads.hardware import BANDWIDTH_BPS, MEMORY_GB, PEAK_BF16_FLOPS

#: The contract features of each kind, in model order (:mod:`forecasters.schema`).
FEATURES: dict[str, tuple[str, ...]] = {k: SPECS[k].features for k in JOB_KINDS}


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


#: Derived scale features per kind: ``fn(normalised features (n, k)) -> {name: (n,) float array}``.
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


def design_frame(feats: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The GPU booster's input: contract features, :data:`DERIVED_FEATURES` and :data:`GPU_PRIOR`.

    Args:
        feats: ``(n, k)`` normalised features (:func:`forecasters.frames.normalise_features`).
        kind: job kind.

    Returns:
        ``(n, k + len(DERIVED_FEATURES[kind]) + 1)`` frame (a copy); derived columns float64.

    Raises:
        InputError: the GPU-count prior is not a number for a row (see
            :func:`forecasters.jobs.priors.log2_gpus_physics`).
    """
    out = feats.copy()
    for name, values in DERIVED[kind](feats).items():
        out[name] = np.asarray(values, dtype=float)
    out[GPU_PRIOR] = log2_gpus_physics(kind, feats)
    return out
