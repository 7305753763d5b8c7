"""The baselines a job forecaster is compared with (DESIGN §4.1-4.3).

* per-variant median duration (per training variant, quantization method, serving engine):
  :func:`baseline_group_median`;
* batch inference (§4.3): tokens / median throughput per (model-size class, GPU type):
  :func:`baseline_throughput`.

:func:`baseline_stats` computes the medians at fit time (stored in ``JobModel.baseline``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from domain import JobKind
from forecasters.errors import InputError
from forecasters.frames import normalise_features
from forecasters.jobs.model import JobModel
from forecasters.schema import KindSpec
from forecasters.workloads.batch_inference import size_class


def _tokens(feats: pd.DataFrame) -> np.ndarray:
    """Total tokens of each batch-inference job ``(n,)``: requests x (input + output tokens)."""
    return feats["num_requests"].to_numpy() * (feats["mean_input_tokens"].to_numpy() + feats["mean_output_tokens"].to_numpy())


def _throughput_keys(feats: pd.DataFrame) -> list[str]:
    """``"<size class>|<gpu type>"`` of each batch-inference job, the throughput baseline's groups."""
    return [f"{c}|{g}" for c, g in zip(size_class(feats["model_params_b"].to_numpy()), feats["gpu_type"].astype(object))]


def baseline_stats(kind: str, spec: KindSpec, feats: pd.DataFrame, y_h: np.ndarray) -> dict[str, Any]:
    """The medians the baselines need, computed on the training rows (stored as ``JobModel.baseline``).

    Args:
        kind: job kind.
        spec: its feature contract (``group_col`` names the per-variant column).
        feats: ``(n, k)`` normalised training features.
        y_h: ``(n,)`` their durations in hours (> 0).

    Returns:
        ``{"group_col", "group_medians": {level: hours}, "global_median": hours}``; batch inference
        adds ``"throughput_medians_tok_per_h": {"<size class>|<gpu type>": tokens/h}`` and
        ``"throughput_global_median_tok_per_h"``.
    """
    groups = feats[spec.group_col].astype(object).to_numpy()
    frame = pd.DataFrame({"g": groups, "y": y_h})
    med = frame.dropna(subset=["g"]).groupby("g", observed=True)["y"].median()
    out: dict[str, Any] = {
        "group_col": spec.group_col,
        "group_medians": {str(k): float(v) for k, v in med.items()},
        "global_median": float(np.median(y_h)),
    }
    if kind == JobKind.BATCH_INFERENCE:
        thr = _tokens(feats) / y_h
        key = _throughput_keys(feats)
        tf = pd.DataFrame({"k": key, "t": thr})
        out["throughput_medians_tok_per_h"] = {str(k): float(v) for k, v in tf.groupby("k")["t"].median().items()}
        out["throughput_global_median_tok_per_h"] = float(np.median(thr))
    return out


def baseline_group_median(model: JobModel, jobs: pd.DataFrame) -> np.ndarray:
    """Per-variant (per-method, per-engine) median duration from training, hours ``(n,)``; global median if unseen."""
    spec = model.spec
    feats, _ = normalise_features(jobs, spec, model.levels)
    med = model.baseline["group_medians"]
    g = feats[spec.group_col].astype(object).to_numpy()
    return np.array([med.get(str(v), model.baseline["global_median"]) for v in g], dtype=float)


def baseline_throughput(model: JobModel, jobs: pd.DataFrame) -> np.ndarray:
    """Batch inference §4.3 baseline: tokens / median throughput per (size class, GPU type), hours ``(n,)``."""
    if model.kind != JobKind.BATCH_INFERENCE:
        raise InputError(f"the throughput baseline is for batch_inference, not {model.kind}")
    feats, _ = normalise_features(jobs, model.spec, model.levels)
    med = model.baseline["throughput_medians_tok_per_h"]
    glob = model.baseline["throughput_global_median_tok_per_h"]
    return _tokens(feats) / np.array([med.get(k, glob) for k in _throughput_keys(feats)], dtype=float)
