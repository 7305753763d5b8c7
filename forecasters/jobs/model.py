"""The fitted job forecaster (:class:`JobModel`) and its predictions.

* :func:`predict` ``(model, jobs)``: duration quantiles (hours) and the power-of-two GPU count per job.
* :func:`predict_for_sizes` ``(model, jobs, sizes)``: the same at each allowed GPU count (for the MILP).
* :func:`gpus_log2_from`: the GPU booster's correction plus the memory prior, rounded.

Fitting is in :mod:`forecasters.jobs.fitting`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.frames import CategoryIssues, describe_unknown, normalise_features
from forecasters.jobs.features import DERIVED_FEATURES, design_frame
from forecasters.jobs.priors import GPU_PRIOR, STACKED_FEATURES, offset_log_h, stack
from forecasters.jobs.steps import FLAG_REQUEST_ROUNDED, clip_to_step, round_requests_pow2
from forecasters.schema import JOB_ID, KindSpec, spec_for

#: Flag of a job predicted under every known level of a missing/unknown category (``on_unseen="fallback"``).
FLAG_UNSEEN = "unseen_category"
#: Flag of a job whose ``gpu_type`` is known (:data:`domain.gpus.GPU_TABLE`) but absent from the
#: model's training history: its physics features use that type's datasheet figures, the booster's
#: correction was learned on other types (an extrapolation).
FLAG_GPU_OUTSIDE_HISTORY = "gpu_type_outside_history"
#: Columns of :func:`predict`'s frame.
PREDICTION_COLUMNS = ("job_id", "duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred", "flags")


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
        x = design_frame(feats, self.kind)
        return stack(x, self.kind, self._gpus_log2(x))

    def _gpus_log2(self, x: pd.DataFrame) -> np.ndarray:
        """Predicted log2 GPU count (whole numbers), floored at the request when the history allows it."""
        return gpus_log2_from(self.gpus_booster, x, bool(self.info.get("gpus_floor_at_requested")))


def gpus_log2_from(booster: Any, x: pd.DataFrame, floor_at_requested: bool) -> np.ndarray:
    """Predicted log2 GPU counts ``(n,)`` (whole numbers in [0, 10]) from the GPU booster's correction.

    ``rint(booster.predict(x) + x["log2_gpus_physics"])``, raised to ``log2(gpus_requested)`` when
    ``floor_at_requested`` (no job in the history ran on fewer GPUs than it requested).
    """
    g = np.clip(np.rint(booster.predict(x) + x[GPU_PRIOR].to_numpy(dtype=float)), 0, 10)
    if floor_at_requested:
        g = np.maximum(g, np.log2(np.maximum(x["gpus_requested"].to_numpy(dtype=float), 1.0)))
    return g


def _raw_predict(model: JobModel, x: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(p10, p50, p90, gpus)`` per row of a design frame ``x`` (hours; int64 powers of two)."""
    g = model._gpus_log2(x)
    xs = stack(x, model.kind, g)
    mu = model.duration_booster.predict(xs) + offset_log_h(xs)
    q10, q50, q90 = model.residual_quantiles_log
    return np.exp(mu + q10), np.exp(mu + q50), np.exp(mu + q90), (2**g).astype(np.int64)


def _job_ids(jobs: pd.DataFrame) -> list[str]:
    """``job_id`` of each row as str, or the row position when the frame has none."""
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
            the job pooled over every known level (``gpu_type``: the types of the training history)
            and flags it ``unseen_category``.
        step_minutes: when given, quantiles shorter than one planning step are raised to one step
            and the job is flagged ``clipped_min_duration`` (case C21).

    Returns:
        ``(n, 6)`` frame: ``job_id`` (str, the input's, or the row position), ``duration_p10_h``,
        ``duration_p50_h``, ``duration_p90_h`` (hours, non-decreasing), ``gpus_pred`` (int, power
        of two), ``flags`` (list of str: ``gpus_requested_rounded_up``, ``unseen_category``,
        :data:`FLAG_GPU_OUTSIDE_HISTORY`, ``clipped_min_duration``). Each row depends only on that
        job's own features.

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
    x = design_frame(feats, model.kind)
    p10, p50, p90, gpus = _raw_predict(model, x)
    flags: list[list[str]] = [[FLAG_REQUEST_ROUNDED] if r else [] for r in rounded]
    seen = model.info.get("gpu_types_seen")
    if seen is not None:
        gpu = feats["gpu_type"].astype(object).to_numpy()
        for i in np.flatnonzero([v is not None and v == v and v not in seen for v in gpu]):
            flags[i].append(FLAG_GPU_OUTSIDE_HISTORY)
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


def predict_for_sizes(model: JobModel, jobs: pd.DataFrame, sizes: Iterable[int], **kwargs: Any) -> pd.DataFrame:
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
    size_list = [int(s) for s in sizes]
    bad = [s for s in size_list if s < 1 or (s & (s - 1)) != 0]
    if not size_list or bad:
        raise InputError(f"sizes must be powers of two >= 1, got {size_list!r}")
    parts = []
    for s in size_list:
        p = predict(model, jobs.assign(gpus_requested=s), **kwargs)
        p.insert(1, "gpus", s)
        p["_pos"] = np.arange(len(p))
        parts.append(p)
    out = pd.concat(parts, ignore_index=True).sort_values(["_pos", "gpus"], kind="stable")
    out["fits"] = out["gpus_pred"] <= out["gpus"]
    cols = ["job_id", "gpus", "duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred", "fits", "flags"]
    return out[cols].reset_index(drop=True)


def _pooled(model: JobModel, row: pd.DataFrame, issues: CategoryIssues, i: int) -> tuple[float, float, float, int]:
    """Fallback for one job: predict under every combination of known levels of its bad columns."""
    bad_cols = [c for c, m in (*issues.missing.items(), *issues.unknown.items()) if m[i]]
    variants = [row.reset_index(drop=True)]
    seen = model.info.get("gpu_types_seen")
    for col in dict.fromkeys(bad_cols):
        expanded = []
        pool = seen if (col == "gpu_type" and seen) else model.levels[col]
        for v in variants:
            for level in pool:
                w = v.copy()
                w[col] = pd.Categorical([level], categories=list(model.levels[col]))
                expanded.append(w)
        variants = expanded
    x = design_frame(pd.concat(variants, ignore_index=True), model.kind)
    p10, p50, p90, g = _raw_predict(model, x)
    return float(p10.min()), float(np.median(p50)), float(p90.max()), int(g.max())
