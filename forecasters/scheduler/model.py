"""The fitted scheduler runtime forecaster (:class:`SchedulerModel`) and :func:`predict_runtime`.

Fitting is in :mod:`forecasters.scheduler.fitting`; the model and the rules are described in
:mod:`forecasters.scheduler`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.frames import row_label
from forecasters.scheduler.features import (
    FeatureSpec,
    as_number,
    limit_hours,
    numeric_column,
    parse_annotations,
    text_values,
)
from forecasters.scheduler.type_history import TypeHistory

#: ``mode`` of a model with LightGBM quantile boosters.
MODE_LIGHTGBM = "lightgbm_quantile"
#: ``mode`` of a model fitted on too few runs: per-user (else global) quantiles of the history.
MODE_FALLBACK = "median_fallback"
#: Quantile levels of the forecasts.
QUANTILES: tuple[float, float, float] = (0.1, 0.5, 0.9)
#: A running job is expected to run at least this much longer than it already has (hours).
MIN_REMAINING_H = 1.0 / 60.0
#: Flag of a job whose ``<feature>`` value the model does not know: ``unseen_user``, ``unseen_partition`` ...
FLAG_UNSEEN_PREFIX = "unseen_"
#: Flag of every job predicted by a fallback model.
FLAG_FALLBACK = MODE_FALLBACK
#: Flag of a job whose ``<input>`` is far outside the training history: ``out_of_range_gpus``,
#: ``out_of_range_time_limit_h``, ``out_of_range_<annotation key>`` (:func:`range_flags`).
FLAG_OUT_OF_RANGE_PREFIX = "out_of_range_"
#: Flag of a running job that has already run longer than every training run.
FLAG_ELAPSED_BEYOND = "elapsed_beyond_history"
#: "Far outside": above ``RANGE_FACTOR x`` the largest training value or below the smallest ``/ RANGE_FACTOR``.
RANGE_FACTOR = 2.0
#: Columns of :func:`predict_runtime`'s frame.
RUNTIME_COLUMNS: tuple[str, ...] = (
    "job_id", "duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred", "capped_at_limit",
    "elapsed_h", "remaining_p10_h", "remaining_p50_h", "remaining_p90_h", "flags",
)


@dataclass
class SchedulerModel:
    """A fitted runtime forecaster over canonical job records.

    Attributes:
        mode: :data:`MODE_LIGHTGBM` or :data:`MODE_FALLBACK`.
        spec: the features (levels, annotation keys, time zone) the model reads.
        boosters: LightGBM boosters of the log-hours quantiles ``(p10, p50, p90)`` (None in fallback
            mode); each takes ``spec.design(jobs)[0]`` and returns ``log(hours)`` before the shifts.
        shifts_log: ``(p10, p90)`` split-conformal shifts added to those boosters' outputs (log hours).
        p90_raise_log: user -> log factor raising that user's P90 (the censored-run check).
        user_quantiles_h: user -> ``(p10, p50, p90)`` of that user's training runtimes (hours).
        global_quantiles_h: ``(p10, p50, p90)`` of every training runtime (hours).
        runtimes_h: every training runtime (hours), sorted: the empirical survival a running job's
            remaining time is conditioned on (:func:`residual_quantiles_h`).
        gpu_quantiles_h: GPU count -> ``(p10, p50, p90)`` of the training runtimes with that count
            (hours): the per-GPU-count baseline.
        ranges: input -> ``(min, max)`` over the training runs (``gpus``, ``time_limit_h``, numeric
            annotation keys): the history's range, for :func:`range_flags`.
        info: the fit report (counts per bucket of the history, calibration, parameters, versions).
        types: what the history says about GPU types (:class:`forecasters.scheduler.type_history.TypeHistory`), for
            :func:`forecasters.scheduler.by_type.predict_runtime_by_type`
            (None: a model pickled before it existed).
    """

    mode: str
    spec: FeatureSpec
    boosters: tuple[Any, Any, Any] | None
    shifts_log: tuple[float, float]
    p90_raise_log: dict[str, float]
    user_quantiles_h: dict[str, tuple[float, float, float]]
    global_quantiles_h: tuple[float, float, float]
    info: dict[str, Any] = field(default_factory=dict)
    runtimes_h: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    gpu_quantiles_h: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    types: TypeHistory | None = None

    @property
    def user_medians_h(self) -> dict[str, float]:
        """User -> median training runtime (hours): the per-user baseline."""
        return {u: q[1] for u, q in self.user_quantiles_h.items()}

    @property
    def global_median_h(self) -> float:
        """Median training runtime (hours): the global baseline."""
        return self.global_quantiles_h[1]


def unraised_log_quantiles(model: SchedulerModel, jobs: pd.DataFrame) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(log-hour quantiles (n, 3), unseen)`` before the P90 raise and the cap; rows non-decreasing.

    LightGBM mode: booster outputs plus the conformal shifts, sorted per row (Chernozhukov,
    Fernández-Val and Galichon 2010, "Quantile and probability curves without crossing": sorting
    never worsens quantile estimates). Fallback mode: the user's training quantiles, else the
    global ones. ``unseen`` as in :meth:`FeatureSpec.design` (fallback: ``user`` only, a user
    without training runs).
    """
    x, unseen = model.spec.design(jobs)
    if model.boosters is None:
        users = text_values(jobs["user"])
        known = np.array([u in model.user_quantiles_h for u in users.tolist()], dtype=bool)
        q = np.array([model.user_quantiles_h.get(u, model.global_quantiles_h) for u in users.tolist()],
                     dtype=float).reshape(len(jobs), 3)
        present = np.array([u is not None for u in users.tolist()], dtype=bool)
        return np.log(q), ({"user": present & ~known} if (present & ~known).any() else {})
    if len(jobs) == 0:
        return np.zeros((0, 3)), unseen
    q = np.column_stack([b.predict(x) for b in model.boosters]).reshape(len(jobs), 3)
    q[:, 0] += model.shifts_log[0]
    q[:, 2] += model.shifts_log[1]
    return np.sort(q, axis=1), unseen


def _raise_p90(model: SchedulerModel, jobs: pd.DataFrame, q: np.ndarray) -> np.ndarray:
    """``q`` with each job's P90 raised by its user's :attr:`SchedulerModel.p90_raise_log`."""
    if not model.p90_raise_log:
        return q
    users = text_values(jobs["user"]).tolist()
    out = q.copy()
    out[:, 2] += np.array([model.p90_raise_log.get(u, 0.0) if u is not None else 0.0 for u in users])
    return out


def running_elapsed_h(jobs: pd.DataFrame, now: datetime | None) -> tuple[np.ndarray, np.ndarray]:
    """``(running, elapsed_h)``, both ``(n,)``: which jobs run, and for how many hours at ``now``.

    Running: state ``running`` with ``started_at`` known. Elapsed is 0 for the others, and for a
    start after ``now``.

    Raises:
        InputError: a running job and no ``now``, or a ``now`` without a time zone.
    """
    n = len(jobs)
    if "state" not in jobs.columns or "started_at" not in jobs.columns:
        return np.zeros(n, dtype=bool), np.zeros(n)
    started = pd.to_datetime(jobs["started_at"], utc=True).reset_index(drop=True)
    running = (jobs["state"].astype(object).to_numpy() == "running") & started.notna().to_numpy()
    if not running.any():
        return running, np.zeros(n)
    if now is None:
        i = int(np.flatnonzero(running)[0])
        raise InputError(f"{row_label(jobs, i)} is running: pass now (an aware datetime) to predict its remaining time")
    if now.tzinfo is None or now.tzinfo.utcoffset(now) is None:
        raise InputError(f"now must be timezone-aware (e.g. datetime.now(timezone.utc)), got {now!r}")
    delta_s = (pd.Timestamp(now).tz_convert("UTC") - started).dt.total_seconds().to_numpy(dtype=float, na_value=0.0)
    return running, np.where(running, np.maximum(delta_s, 0.0) / 3600.0, 0.0)


#: Training runs longer than a running job's elapsed time needed to read its remaining time from them.
MIN_SURVIVORS = 20
#: Quantile levels of the ``(p10, p50, p90)`` columns.
LEVELS = np.array([0.1, 0.5, 0.9])


def residual_quantiles_h(runtimes_h: np.ndarray, elapsed_h: float) -> np.ndarray:
    """``(p10, p50, p90)`` of the whole run time of a job that has already run ``elapsed_h`` hours.

    The empirical conditional distribution of the training runtimes longer than ``elapsed_h``
    when at least :data:`MIN_SURVIVORS` are; else a Pareto tail with index 1 above the elapsed
    time, ``P(T > t | T > e) = e / t``, i.e. ``t_q = e / (1 - q)``: a job that has run ``e`` hours
    runs ``e`` more with probability 1/2 (the process-lifetime law of Harchol-Balter and Downey,
    "Exploiting process lifetime distributions for dynamic load balancing", ACM TOCS 1997). Shape
    ``(3,)``, hours, each above ``elapsed_h``.
    """
    longer = runtimes_h[runtimes_h > elapsed_h]
    if len(longer) >= MIN_SURVIVORS:
        return np.quantile(longer, LEVELS)
    e = max(float(elapsed_h), MIN_REMAINING_H)
    return e / (1.0 - LEVELS)


def input_values(jobs: pd.DataFrame, names: Any) -> dict[str, np.ndarray]:
    """Input name -> values ``(n,)`` for the names of :attr:`SchedulerModel.ranges`.

    ``gpus``, ``time_limit_h`` (NaN when unlimited) or an annotation key (NaN when absent or not a number).

    Raises what :func:`forecasters.scheduler.features.numeric_column` raises (a negative count).
    """
    out: dict[str, np.ndarray] = {}
    ann = None
    for name in names:
        if name == "gpus":
            out[name] = numeric_column(jobs, "gpus")
        elif name == "time_limit_h":
            out[name] = limit_hours(jobs)
        else:
            ann = parse_annotations(jobs) if ann is None else ann
            out[name] = np.array([as_number(a.get(name)) for a in ann], dtype=float)
    return out


def range_flags(ranges: dict[str, tuple[float, float]], values: dict[str, np.ndarray], n: int) -> list[list[str]]:
    """Per job, ``out_of_range_<input>`` for each input far outside the training history's range.

    ``values[name]`` ``(n,)`` (NaN: unknown, never flagged); ``(lo, hi) = ranges[name]``. Far outside:
    ``v > RANGE_FACTOR x hi``, or ``v < lo / RANGE_FACTOR`` (a value of 0 when the history's least
    is positive is below). The trees predict such a job like the history's largest (smallest)
    ones: the flag says the forecast is an extrapolation.
    """
    flags: list[list[str]] = [[] for _ in range(n)]
    for name, (lo, hi) in ranges.items():
        v = values.get(name)
        if v is None:
            continue
        far = np.isfinite(v) & ((v > RANGE_FACTOR * hi) | (v < lo / RANGE_FACTOR))
        for i in np.flatnonzero(far):
            flags[int(i)].append(FLAG_OUT_OF_RANGE_PREFIX + name)
    return flags


def uncapped_quantiles_h(model: SchedulerModel, jobs: pd.DataFrame, now: datetime | None
                         ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """``(q (n, 3) hours, unseen, running (n,), elapsed_h (n,))``: :func:`predict_runtime`'s quantiles before the limit.

    Log quantiles, the P90 raise, hours; a running job's outrun quantiles replaced
    (:func:`residual_quantiles_h`) and every quantile at least its elapsed time plus a minute.
    Raises what :func:`predict_runtime` raises.
    """
    q_log, unseen = unraised_log_quantiles(model, jobs)
    q = np.exp(_raise_p90(model, jobs, q_log))
    running, elapsed = running_elapsed_h(jobs, now)
    for r in np.flatnonzero(running):
        outrun = q[r] <= elapsed[r] + MIN_REMAINING_H
        if outrun.any():
            q[r] = np.sort(np.where(outrun, residual_quantiles_h(model.runtimes_h, elapsed[r]), q[r]))
    q[running] = np.maximum(q[running], (elapsed[running] + MIN_REMAINING_H)[:, None])
    return q, unseen, running, elapsed


def capped_at_limit(q: np.ndarray, limit_h: np.ndarray, running: np.ndarray, elapsed_h: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q capped, capped (n,), remaining (n, 3))``: quantiles ``q`` (n, 3) hours at most the limit ``limit_h`` (n,).

    A running job's quantiles are first raised to its elapsed time plus a minute; ``capped``: the
    P90 was above a finite limit; ``remaining = max(q - elapsed, 0)`` (elapsed 0 unless running).
    """
    q = q.copy()
    q[running] = np.maximum(q[running], (elapsed_h[running] + MIN_REMAINING_H)[:, None])
    capped = np.isfinite(limit_h) & (q[:, 2] > limit_h)
    q = np.where(np.isfinite(limit_h)[:, None], np.minimum(q, limit_h[:, None]), q)
    return q, capped, np.maximum(q - elapsed_h[:, None], 0.0)


def predict_runtime(model: SchedulerModel, jobs: pd.DataFrame, now: datetime | None = None) -> pd.DataFrame:
    """Runtime quantiles, GPUs, and remaining time of each job record.

    Rules, in order (see :mod:`forecasters.scheduler`): log-hour quantiles (boosters plus
    conformal shifts, or the fallback's quantiles), sorted per row; the user's censored-run P90
    raise; hours. Running jobs (state ``running`` with ``started_at``; ``e`` = hours since start at
    ``now``): a quantile the job has already outrun (``q <= e + 1 min``) is replaced by the same
    quantile of its run time given that it has run ``e`` (:func:`residual_quantiles_h`), rows
    sorted again, and at least ``e + 1 min``. Then every quantile is capped at
    the job's time limit ``L`` (:func:`forecasters.scheduler.features.limit_hours`; Slurm ends a job at
    its limit), and
    ``remaining = max(quantile - e, 0)`` (``e`` = 0 for jobs not running, so remaining = duration).

    Args:
        model: a fitted :class:`SchedulerModel`.
        jobs: ``(n, ...)`` job records (:data:`domain.records.JOB_RECORD` columns; at least
            :data:`forecasters.scheduler.features.FEATURE_INPUTS`, plus ``state`` and ``started_at``
            for the remaining time of running jobs).
        now: aware datetime, needed when a job is running.

    Returns:
        ``(n, 11)`` frame (:data:`RUNTIME_COLUMNS`): ``job_id`` (str); ``duration_p10_h``,
        ``duration_p50_h``, ``duration_p90_h`` (hours, non-decreasing, <= the limit; for a running
        job its whole run, at least the elapsed time plus a minute unless the limit is nearer);
        ``gpus_pred`` (int, the GPUs the record requests/allocates: a scheduler gives what is
        asked); ``capped_at_limit`` (bool: the uncapped P90 was above the limit); ``elapsed_h``
        (0 unless running); ``remaining_p10_h``/``remaining_p50_h``/``remaining_p90_h`` (hours);
        ``flags`` (str, comma-separated: ``unseen_<feature>`` per categorical value the model
        does not know; ``out_of_range_<input>`` per input far outside the history
        (:func:`range_flags`); :data:`FLAG_ELAPSED_BEYOND` for a running job already longer than
        every training run; :data:`FLAG_FALLBACK` for a fallback model; ``""`` when none).

    Raises:
        InputError: a missing column, an unparsable value (row named), a running job without
            ``now``, a naive ``now``.
    """
    q, unseen, running, elapsed = uncapped_quantiles_h(model, jobs, now)
    q, capped, remaining = capped_at_limit(q, limit_hours(jobs), running, elapsed)
    names = [FLAG_UNSEEN_PREFIX + c for c in unseen]
    masks = list(unseen.values())
    ranges = getattr(model, "ranges", {})  # a model pickled before ranges existed has none
    far = range_flags(ranges, input_values(jobs, ranges), len(jobs))
    longest = float(model.runtimes_h.max()) if len(model.runtimes_h) else np.inf
    flags = []
    for i in range(len(jobs)):
        f = [nm for nm, m in zip(names, masks) if m[i]]
        f.extend(far[i])
        if running[i] and elapsed[i] > longest:
            f.append(FLAG_ELAPSED_BEYOND)
        if model.mode == MODE_FALLBACK:
            f.append(FLAG_FALLBACK)
        flags.append(",".join(f))
    return pd.DataFrame({
        "job_id": jobs["job_id"].astype(str).to_numpy(),
        "duration_p10_h": q[:, 0],
        "duration_p50_h": q[:, 1],
        "duration_p90_h": q[:, 2],
        "gpus_pred": np.nan_to_num(numeric_column(jobs, "gpus"), nan=0.0).astype(np.int64),
        "capped_at_limit": capped,
        "elapsed_h": elapsed,
        "remaining_p10_h": remaining[:, 0],
        "remaining_p50_h": remaining[:, 1],
        "remaining_p90_h": remaining[:, 2],
        "flags": flags,
    })
