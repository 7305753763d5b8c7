"""From forecast hours to the planner's grid: whole steps, one-step minimum, power-of-two requests.

* :func:`duration_steps`: hours -> whole planning steps (the one rule of
  :func:`domain.hours_to_steps_array`; NaN -> 1 step).
* :func:`clip_to_step`: raise quantiles shorter than one step to one step (case C21).
* :func:`round_requests_pow2`: round ``gpus_requested`` up to a power of two (case C22).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from domain import hours_to_steps_array
from domain.units import pow2_ceil_array
from forecasters.errors import InputError
from forecasters.frames import row_label, show

#: Flag of a prediction whose quantile was shorter than one planning step and was raised to one (case C21).
FLAG_CLIPPED = "clipped_min_duration"
#: Flag of a job whose ``gpus_requested`` was not a power of two and was rounded up (case C22).
FLAG_REQUEST_ROUNDED = "gpus_requested_rounded_up"


def round_requests_pow2(feats: pd.DataFrame, jobs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Round ``gpus_requested`` up to the next power of two (case C22; DESIGN §4.1 feature 16).

    Tensor parallelism and the buddy block layout need power-of-two GPU counts, so a request of
    3 is planned as 4 and 6 as 8; values are rounded to 1e-6 before the ceiling so that
    8.0000001 stays 8 (:func:`domain.units.pow2_ceil_array`). The forecast is made at the rounded count.

    Args:
        feats: ``(n, k)`` canonical features from :func:`forecasters.frames.normalise_features`
            (float64 numerics).
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
    pow2 = pow2_ceil_array(req).astype(float)
    rounded = pow2 != req
    if rounded.any():
        feats = feats.assign(gpus_requested=pow2)
    return feats, rounded


def _step_h(step_minutes: float) -> float:
    """One planning step in hours; refuses a ``step_minutes`` that is not a number > 0."""
    if not np.isfinite(step_minutes) or step_minutes <= 0:
        raise InputError(f"step_minutes must be > 0, got {step_minutes!r}")
    return float(step_minutes) / 60.0


def duration_steps(hours: npt.ArrayLike, step_minutes: float = 30.0) -> npt.NDArray[np.int64]:
    """Whole planning steps for durations: ``ceil(hours * 60 / step_minutes)``, at least 1.

    The one rule of :func:`domain.hours_to_steps_array` (the ratio rounded to 6 digits before the
    ceiling), with a NaN or infinite duration given 1 step.

    Args:
        hours: scalar or ``(n,)`` durations in hours (zero, negative or NaN allowed: they become 1 step).
        step_minutes: planning step in minutes (> 0).

    Returns:
        int64 array of the input's shape (a 0-d array for a scalar). Example: -0.4 h and 0.2 h at
        30-minute steps are both exactly 1 step; 0.51 h is 2 steps.

    Raises:
        InputError: ``step_minutes`` is not a number > 0.
    """
    return np.asarray(hours_to_steps_array(hours, step_minutes, nonfinite_steps=1), dtype=np.int64)


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
