"""Physics priors of the job forecasters: the noise-free estimates the boosters correct.

* GPU count: :func:`log2_gpus_physics`, ``log2`` of the kind's ``gpus_used`` (``max(gpus_requested,
  memory-driven minimum)``, the memory models of :mod:`forecasters.workloads`), design column
  :data:`GPU_PRIOR`.
* Duration: :func:`log_analytic_h`, ``log`` of the kind's ``analytic_duration_h`` at the predicted
  GPU count, stacked into the design matrix with that count (:data:`STACKED_FEATURES`,
  :func:`stack`) and used as the boosting offset (:func:`offset_log_h`).

Rows with a missing category (legacy history rows, case C11) get the median over every known level.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import ModuleType

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.schema import GENERATED_GPU_TYPES, KindSpec, spec_for
from forecasters.workloads import kind_module

#: Design column holding the physics prior of the GPU count: ``log2`` of the kind's ``gpus_used``
#: (``max(gpus_requested, memory-driven minimum)``, the memory models of :mod:`forecasters.workloads`).
GPU_PRIOR = "log2_gpus_physics"
#: Features stacked from the GPU-count model into the duration model: the predicted log2 GPU count
#: and the physics prior, ``log`` of the kind's noise-free analytic duration (hours) at that count
#: (jobs whose memory forces more GPUs than requested run on more GPUs, hence faster). The second
#: is also the boosting offset (:func:`offset_log_h`).
STACKED_FEATURES = ("log2_gpus_pred", "log_analytic_h_at_pred_gpus")
#: Bounds (hours) of the analytic prior before its log is taken: keeps the offset finite for
#: degenerate inputs (e.g. a job with almost no work) without touching any realistic job.
ANALYTIC_CLIP_H = (1e-6, 1e6)


#: Levels a missing category is pooled over, where not every level of the contract: a missing
#: ``gpu_type`` is pooled over the generated histories' types (not P100 ... MI300X, never drawn there).
POOL_LEVELS: dict[str, tuple[str, ...]] = {"gpu_type": GENERATED_GPU_TYPES}

#: ``compute(physics_module, plain_features) -> (n,)``: one prior per row (see :func:`_physics_prior`).
PriorFn = Callable[[ModuleType, pd.DataFrame], np.ndarray]


def stack(x: pd.DataFrame, kind: str, g_log2: np.ndarray) -> pd.DataFrame:
    """The duration design matrix: ``x`` plus the :data:`STACKED_FEATURES` columns (a copy).

    Args:
        x: ``(n, k)`` design frame of :func:`forecasters.jobs.features.design_frame`.
        kind: job kind.
        g_log2: ``(n,)`` log2 GPU counts of the GPU model (out-of-fold at fit time).

    Returns:
        ``(n, k + 2)`` frame: ``log2_gpus_pred`` (= ``g_log2``) and ``log_analytic_h_at_pred_gpus``
        (:func:`log_analytic_h` at that count, the boosting offset).

    Raises:
        InputError: the analytic estimate is not a number for a row (see :func:`log_analytic_h`).
    """
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


def plain_features(feats: pd.DataFrame, spec: KindSpec) -> pd.DataFrame:
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

    The analytic estimate (DESIGN §4.1-4.3; ``analytic_duration_h`` of
    :mod:`forecasters.workloads.training`, :mod:`~forecasters.workloads.quantization`,
    :mod:`~forecasters.workloads.batch_inference`, public constants cited there) itself runs a job on ``max(requested, memory-driven minimum)`` GPUs, so the prior is
    evaluated at ``max(2**g_log2, memory minimum)``. Each row depends only on its own features.

    Args:
        kind: job kind.
        feats: ``(n, ...)`` normalised features (:func:`forecasters.frames.normalise_features`).
        g_log2: ``(n,)`` predicted log2 GPU counts.

    Returns:
        float array ``(n,)``, log hours, from an estimate clipped to :data:`ANALYTIC_CLIP_H`. A row
        with a missing category (legacy history rows, case C11) gets the median over every known
        level (every combination when several columns are missing; ``gpu_type``: over
        :data:`POOL_LEVELS`).

    Raises:
        InputError: the estimate is not a number for a row (row named), e.g. ``model_params_b`` 0.
    """

    def log_h(mod: ModuleType, frame: pd.DataFrame) -> np.ndarray:
        return np.log(np.clip(np.asarray(mod.analytic_duration_h(frame), dtype=float), *ANALYTIC_CLIP_H))

    return _physics_prior(kind, feats, log_h, "analytic duration estimate", np.exp2(np.asarray(g_log2, dtype=float)))


def log2_gpus_physics(kind: str, feats: pd.DataFrame) -> np.ndarray:
    """GPU-count prior ``(n,)``: ``log2`` of the kind's ``gpus_used`` (``max(requested, memory minimum)``).

    The memory models (and their sources) are in the docstrings of :mod:`forecasters.workloads`. Missing
    categories are pooled as in :func:`log_analytic_h` (median over the known levels).

    Raises:
        InputError: the prior is not a number for a row (row named).
    """

    def log2_g(mod: ModuleType, frame: pd.DataFrame) -> np.ndarray:
        return np.log2(np.maximum(np.asarray(mod.gpus_used(frame), dtype=float), 1.0))

    return _physics_prior(kind, feats, log2_g, "memory-driven GPU count", None)


def _physics_prior(
    kind: str, feats: pd.DataFrame, compute: PriorFn, what: str, gpus_requested: np.ndarray | None
) -> np.ndarray:
    """``compute(module, plain_frame) -> (n,)`` per row; rows with missing categories pooled by the median."""
    spec = spec_for(kind)
    mod = kind_module(kind)
    plain = plain_features(feats, spec).reset_index(drop=True)
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
            combos = list(itertools.product(*(POOL_LEVELS.get(c, spec.categorical[c]) for c in cols)))
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
