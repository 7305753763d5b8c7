"""Seeded job-history and queue generators for the three batch kinds (DESIGN §4.1-4.3).

``generate_history(kind, n, seed)`` returns one row per finished job with ``job_id``, the kind's
features (:mod:`forecasters.schema`), ``submitted_at``, ``started_at``, ``finished_at`` (UTC,
timezone-aware, whole seconds), ``duration_h`` (= finished - started, hours) and ``gpus_used``.
The physics of each kind lives in :mod:`forecasters.workloads` (``training``, ``quantization``,
``batch_inference``; :func:`kind_module` is re-exported here). The same ``(kind, n, seed)`` gives
the same frame, bit for bit.

Arrivals are a Poisson process over :data:`HISTORY_DAYS` days from :data:`HISTORY_START`; the
queue wait before a start is exponential with mean 30 min (assumption). A share
:data:`FAILED_AT_LAUNCH_SHARE` of jobs failed at launch and was recorded with duration 0 h
(as in case C21); forecasters exclude them from training and report the count.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.schema import JOB_ID, TARGET_DURATION, TARGET_GPUS, spec_for
from forecasters.workloads import kind_module

HISTORY_START = pd.Timestamp("2026-01-05 00:00:00", tz="UTC")
HISTORY_DAYS = 120.0
MEAN_WAIT_H = 0.5
FAILED_AT_LAUNCH_SHARE = 0.005
_ID_PREFIX = {"training": "trn", "quantization": "qnt", "batch_inference": "bat"}
_SEED_OFFSET = {"training": 0, "quantization": 1, "batch_inference": 2}


def _rng(kind: str, seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), _SEED_OFFSET[kind], stream])


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n must be a positive whole number of jobs, got {n!r}")
    return int(n)


def generate_history(kind: str, n: int, seed: int = 0) -> pd.DataFrame:
    """Generate ``n`` finished jobs of ``kind`` with outcomes; see the module docstring for columns.

    Raises:
        InputError: unknown kind or ``n < 1``.
    """
    mod = kind_module(kind)
    n = _check_n(n)
    rng = _rng(kind, seed, 0)
    spec = spec_for(kind)
    features = mod.sample_features(n, rng)
    duration_h, gpus = mod.simulate(features, rng)
    failed = rng.random(n) < FAILED_AT_LAUNCH_SHARE
    gaps_s = rng.exponential(HISTORY_DAYS * 86400.0 / n, n)
    submitted_s = np.floor(np.cumsum(gaps_s))
    wait_s = np.floor(rng.exponential(MEAN_WAIT_H * 3600.0, n))
    run_s = np.where(failed, 0.0, np.maximum(np.round(duration_h * 3600.0), 1.0))
    base = HISTORY_START.as_unit("us")
    submitted = base + pd.to_timedelta(submitted_s, unit="s")
    started = submitted + pd.to_timedelta(wait_s, unit="s")
    finished = started + pd.to_timedelta(run_s, unit="s")
    out = pd.DataFrame({JOB_ID: [f"{_ID_PREFIX[kind]}-{i:05d}" for i in range(n)]})
    for col in spec.features:
        out[col] = features[col].to_numpy()
    out["submitted_at"] = pd.DatetimeIndex(submitted).as_unit("us")
    out["started_at"] = pd.DatetimeIndex(started).as_unit("us")
    out["finished_at"] = pd.DatetimeIndex(finished).as_unit("us")
    out[TARGET_DURATION] = run_s / 3600.0
    out[TARGET_GPUS] = gpus.astype(np.int64)
    for col in spec.categorical:
        out[col] = out[col].astype(str)
    return out


def generate_queue(kind: str, n: int, seed: int = 0, now: pd.Timestamp | None = None) -> pd.DataFrame:
    """Generate ``n`` waiting jobs of ``kind`` (features, no outcomes) for the planner.

    Columns: ``job_id`` (``q<kind prefix>-NNNNN``), ``kind``, ``submitted_at`` (UTC, within the 6 h
    before ``now``; default :data:`HISTORY_START` + :data:`HISTORY_DAYS` days) and the kind's features.
    Priorities, allowed sizes and deadlines are the planner's business and are not generated here.
    """
    mod = kind_module(kind)
    n = _check_n(n)
    rng = _rng(kind, seed, 1)
    spec = spec_for(kind)
    now = (HISTORY_START + pd.Timedelta(days=HISTORY_DAYS)) if now is None else pd.Timestamp(now)
    if now.tzinfo is None:
        raise InputError(f"now must be timezone-aware (UTC), got naive {now}")
    features = mod.sample_features(n, rng)
    ago_s = np.sort(np.floor(rng.uniform(0.0, 6 * 3600.0, n)))[::-1]
    out = pd.DataFrame({JOB_ID: [f"q{_ID_PREFIX[kind]}-{i:05d}" for i in range(n)], "kind": kind})
    out["submitted_at"] = pd.DatetimeIndex(now.tz_convert("UTC") - pd.to_timedelta(ago_s, unit="s")).as_unit("us")
    for col in spec.features:
        out[col] = features[col].to_numpy()
    for col in spec.categorical:
        out[col] = out[col].astype(str)
    return out


def tail_shape(durations_h: np.ndarray) -> dict[str, float]:
    """Shape of a duration distribution, for comparing generated and real traces.

    Args:
        durations_h: ``(n,)`` positive durations (any unit: only ratios are returned, plus the median).

    Returns:
        ``{"n", "median", "p90_over_p50", "p99_over_p50", "p50_over_p10", "mean_over_median",
        "top1pct_share"}``: quantile ratios, mean/median and the share of total time in the longest
        1 % of jobs.
    """
    d = np.sort(np.asarray(durations_h, dtype=float))
    d = d[np.isfinite(d) & (d > 0)]
    if d.size < 10:
        raise InputError(f"tail_shape needs at least 10 positive durations, got {d.size}")
    p10, p50, p90, p99 = np.quantile(d, [0.1, 0.5, 0.9, 0.99])
    top = d[int(np.floor(0.99 * d.size)) :]
    return {
        "n": int(d.size),
        "median": float(p50),
        "p90_over_p50": float(p90 / p50),
        "p99_over_p50": float(p99 / p50),
        "p50_over_p10": float(p50 / p10),
        "mean_over_median": float(d.mean() / p50),
        "top1pct_share": float(top.sum() / d.sum()),
    }


__all__ = ["generate_history", "generate_queue", "kind_module", "tail_shape"]
