"""A new level at the end of the history: tell a lasting level shift from a run of outliers (DESIGN §4.4).

Field case F09: the outlier rule of :func:`forecasters.realtime.ingest` compares each hour with the same
hour over the surrounding ±3 days, so at the end of a series a lasting change has only old-level days
behind it, is either flagged hour by hour or simply averaged away by the fit, and the planner is handed
the old level. This module's one-sided test looks only backwards.

Rule (one function, used by ingest and by every profile fit):

* Reference of an hour ``t`` for a candidate start ``s``: the median of the traffic at the same LOCAL hour
  of week (wall clock of ``timezone``, so a clock change does not shift it) ``k .. k+2`` weeks before
  ``t`` (``ref_weeks`` = 3 weeks, those present), with ``k`` the first whole number of weeks that reaches
  back before ``s`` (counted in UTC hours). The ratio ``r_t = y_t / reference``; at least 90 % of the
  window's hours need a reference.
* A candidate ``s`` (any hour with at least one week of history before it, at most ``max_age_h`` hours
  before the end, at least ``min_hours`` before the end) is scored, for each direction, as
  (hours of ``[s, end]`` whose ratio is beyond ``ratio`` in that direction) − (hours that are not);
  the best-scoring ``s`` is the change point (a step at ``s*`` scores highest at ``s*``: an earlier start
  adds old-level hours, a later one drops new-level hours).
* It is a level shift when, over ``[s, end]``: the window has at least ``min_hours`` hours (48: one
  unusual day, e.g. a holiday, stays an outlier day), at least ``share`` (80 %) of its hours with a
  reference are beyond ``ratio`` (1.25, i.e. +25 % / −20 %) in the same direction, and the median ratio
  is beyond ``ratio`` too. The factor is that median ratio.

A spike (a few hours) never fills 80 % of a 48 h window, so it stays an outlier.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

HOURS_PER_WEEK = 168


@dataclass(frozen=True)
class ShiftSettings:
    """Settings of :func:`detect_level_shift` (module docstring).

    Attributes:
        min_hours: shortest new level, in hours (48).
        ratio: an hour has moved when its ratio to the reference is >= ``ratio`` or <= 1/``ratio`` (1.25).
        share: share of the window's hours (with a reference) that must have moved the same way (0.8).
        ref_weeks: weeks of same-hour-of-week history in the reference median (3).
        max_age_h: a shift must start within this many hours of the end (672 = 4 weeks, the profile's
            trailing fit window: an older change is the whole fitted history already).
    """

    min_hours: int = 48
    ratio: float = 1.25
    share: float = 0.8
    ref_weeks: int = 3
    max_age_h: int = 4 * HOURS_PER_WEEK


@dataclass(frozen=True)
class LevelShift:
    """A detected level shift.

    Attributes:
        since: UTC hour of the first hour at the new level.
        factor: median ratio of the window's hours to their reference (new level / old level).
        hours: hours from ``since`` to the end of the series.
        share: share of those hours (with a reference) beyond the threshold in the factor's direction.
    """

    since: pd.Timestamp
    factor: float
    hours: int
    share: float

    def describe(self) -> str:
        """``"level shift x0.50 since 2025-09-22T00:00Z (72 h, 100% of hours beyond the threshold)"``."""
        return (f"level shift x{self.factor:.2f} since {self.since:%Y-%m-%dT%H:%MZ} ({self.hours} h, "
                f"{self.share:.0%} of hours moved the same way)")

    def to_dict(self) -> dict:
        """JSON-ready: ``since`` (ISO ``Z``), ``factor``, ``hours``, ``share``."""
        return {"since": self.since.strftime("%Y-%m-%dT%H:%M:%SZ"), "factor": float(self.factor),
                "hours": int(self.hours), "share": float(self.share)}


def _lag_positions(idx: pd.DatetimeIndex, timezone: str, weeks: int) -> np.ndarray:
    """``P[k-1, t]`` = position of the hour at local wall time (t − k weeks), −1 when absent; shape (weeks, n)."""
    local = idx.tz_convert(timezone).tz_localize(None)
    pos = pd.Series(np.arange(len(idx)), index=local)
    pos = pos[~pos.index.duplicated(keep="first")]  # a fall-back hour occurs twice: the first one counts
    out = np.full((weeks, len(idx)), -1, dtype=np.int64)
    for k in range(1, weeks + 1):
        got = pos.reindex(local - pd.Timedelta(days=7 * k)).to_numpy(dtype=float)
        out[k - 1] = np.where(np.isnan(got), -1, got).astype(np.int64)
    return out


def _lagged(y: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Values at the lag positions ``P`` (NaN where −1); shape of ``P``."""
    return np.where(P >= 0, y[np.maximum(P, 0)], np.nan)


def detect_level_shift(series: pd.Series, timezone: str = "UTC",
                       settings: ShiftSettings | None = None) -> LevelShift | None:
    """The level shift at the end of an hourly series, or None (module docstring for the rule).

    Args:
        series: traffic per hour (>= 0, no NaN), tz-aware regular hourly index (from ingest).
        timezone: IANA zone (or fixed-offset name) of the service's local clock.
        settings: :class:`ShiftSettings`.

    Returns:
        :class:`LevelShift` or None (no shift, or fewer than one week + ``min_hours`` hours of history).
    """
    st = settings or ShiftSettings()
    n = len(series)
    if n < HOURS_PER_WEEK + st.min_hours:
        return None
    y = series.to_numpy(dtype=float)
    idx = pd.DatetimeIndex(series.index)
    lo = max(HOURS_PER_WEEK, n - st.max_age_h)
    hi = n - st.min_hours
    if hi < lo:
        return None
    n_k0 = (n - lo) // HOURS_PER_WEEK + 1
    L = _lagged(y, _lag_positions(idx, timezone, n_k0 + st.ref_weeks - 1))
    # R[j, t]: median of the same local hour of week j+1 .. j+ref_weeks weeks before t (those that exist)
    R = np.full((n_k0, n), np.nan)
    for j in range(n_k0):
        block = L[j:j + st.ref_weeks]
        have = ~np.isnan(block).all(axis=0)
        R[j, have] = np.nanmedian(block[:, have], axis=0)
    thr = np.log(st.ratio)
    best: tuple[int, int, int, np.ndarray] | None = None  # (score, s, direction, log ratios)
    for s in range(lo, hi + 1):
        t = np.arange(s, n)
        ref = R[(t - s) // HOURS_PER_WEEK, t]  # the weeks before s only
        pos = ref > 0  # NaN (no reference) compares False
        if pos.sum() < 0.9 * (n - s):
            continue
        dd = np.log(np.maximum(y[t][pos], 1e-12) / ref[pos])
        for sign in (1, -1):
            moved = sign * dd >= thr
            score = 2 * int(moved.sum()) - moved.size
            if best is None or score > best[0]:
                best = (score, s, sign, dd)
    if best is None:
        return None
    _, s, sign, dd = best
    moved_share = float(np.mean(sign * dd >= thr))
    med = float(np.median(dd))
    if moved_share < st.share or sign * med < thr:
        return None
    return LevelShift(since=idx[s].tz_convert("UTC"), factor=float(np.exp(med)), hours=n - s, share=moved_share)
