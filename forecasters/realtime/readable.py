"""Which hours the real-time combination reads as they are: the readable-hour rule (DESIGN §4.4).

An observed hour is read unless :meth:`AnchorRule.accepts` refuses it (an outage's zero, an unconfirmed
jump ingest flagged); unread hours are re-imputed for the candidates, not scored and do not anchor. The
rule compares seasonally adjusted values, ``y / r`` with ``r`` the same-hour mean (:func:`same_hour_mean`).
Pure, on arrays (positions are UTC hours of one regular hourly grid).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

HOURS_PER_DAY = 24


@dataclass(frozen=True)
class AnchorRule:
    """When an hour is read as it is (DESIGN §4.4, "readable hours").

    Attributes:
        change_lo / change_hi: the smallest and largest one-hour seasonally adjusted change ``(y_t / S_t) /
            (y_{t-1} / S_{t-1})`` of the clean (observed, unflagged) hour pairs of the week before.
        value_lo / value_hi: the range guard's bounds (clean history min / ``range_multiple`` .. max x
            ``range_multiple``; series units per hour).
    """

    change_lo: float
    change_hi: float
    value_lo: float
    value_hi: float

    def accepts(self, z_a: float, y_a: float, z_last: float | None, z_prev: float | None, y_prev: float | None,
                flagged: bool) -> bool:
        """Whether hour ``a`` (adjusted ``z_a``, value ``y_a``; ``flagged`` by ingest) may be read.

        ``z_last``: the last hour read; ``z_prev`` / ``y_prev``: the hour just before ``a`` (read or not;
        None when missing). Read when (i) its change from the last hour read is within the seen range;
        else not when its value is outside the bounds (an outage's zero); else when it is not flagged; else
        (a flagged hour inside the bounds) when (ii) its change from the hour before is within the seen
        range, or (iii) the hour before, also inside the bounds, moved the same way beyond that range from
        the last hour read: a move confirmed by a second hour, the start of a new level.
        """
        def ratio(z_b: float | None) -> float | None:
            if z_b is None or not (math.isfinite(z_a) and math.isfinite(z_b)) or z_b <= 0:
                return None
            return z_a / z_b

        lo, hi = self.change_lo, self.change_hi
        r_last = ratio(z_last)
        if r_last is not None and lo <= r_last <= hi:
            return True
        if not self.value_lo <= y_a <= self.value_hi:
            return False
        if not flagged:
            return True
        r_prev = ratio(z_prev)
        if r_prev is not None and lo <= r_prev <= hi:
            return True
        if r_last is None or z_last is None or z_prev is None or y_prev is None or not math.isfinite(z_prev):
            return False
        p_last = z_prev / z_last
        inside = self.value_lo <= y_prev <= self.value_hi
        return inside and ((r_last < lo and p_last < lo) or (r_last > hi and p_last > hi))


def usable(idx: pd.DatetimeIndex, exclude) -> np.ndarray:
    """``True`` for the stamps of ``idx`` not in ``exclude`` (UTC stamps, or None); shape ``(len(idx),)``."""
    ex = list(exclude) if exclude is not None else []
    if not ex:
        return np.ones(len(idx), dtype=bool)
    return ~idx.isin(pd.DatetimeIndex(pd.to_datetime(ex, utc=True)))


def same_hour_mean(y: np.ndarray, clean: np.ndarray, days: int = 7) -> np.ndarray:
    """Mean of the clean values 24 h, 48 h, ... ``days`` x 24 h before each hour; NaN where none; shape ``(n,)``.

    Backward-looking: the value at ``t`` uses hours before ``t`` only. ``y`` may extend past the data with
    NaN (``clean`` False) to get the reference of future hours.
    """
    n = len(y)
    total, count = np.zeros(n), np.zeros(n)
    for k in range(1, days + 1):
        lag = HOURS_PER_DAY * k
        if lag >= n:
            break
        ok = clean[:-lag]
        total[lag:] += np.where(ok, y[:-lag], 0.0)
        count[lag:] += ok
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)


def adjusted(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``y / ref`` (seasonally adjusted by the same-hour reference), NaN where ``ref`` is NaN or <= 0."""
    good = np.isfinite(ref) & (ref > 0)
    return np.where(good, y / np.where(good, ref, 1.0), np.nan)


def anchor_rule(z: np.ndarray, read: np.ndarray, lo: int, hi: int, bounds: tuple[float, float]) -> AnchorRule | None:
    """The :class:`AnchorRule` from the read hour pairs ending in ``[lo, hi)`` (None with fewer than 24 pairs)."""
    lo = max(lo, 1)
    if hi <= lo:
        return None
    t = np.arange(lo, hi)
    ok = read[t] & read[t - 1] & np.isfinite(z[t]) & np.isfinite(z[t - 1]) & (z[t - 1] > 0) & (z[t] > 0)
    if ok.sum() < HOURS_PER_DAY:
        return None
    r = z[t][ok] / z[t - 1][ok]
    return AnchorRule(float(r.min()), float(r.max()), float(bounds[0]), float(bounds[1]))


def readable_hours(y: np.ndarray, obs: np.ndarray, flagged: np.ndarray, z: np.ndarray, window_h: int,
                   multiple: float) -> np.ndarray:
    """Hours the candidates, scoring and anchors read as they are (DESIGN §4.4, "readable hours"); bool ``(n,)``.

    Every observed hour is judged by :meth:`AnchorRule.accepts`, with the rule of its day, built from the
    hours read before the day (days counted back from the end of the history, so the last rule is the one
    :func:`forecasters.realtime.combine.reanchor` applies after it): the one-hour changes of read hour pairs
    in the ``window_h`` hours before it, the bounds from every read hour before it (min / ``multiple`` ..
    max x ``multiple``). With nothing to judge by (fewer than 24 read pairs in the window, or no same-hour
    reference) an hour is read unless ingest flagged it.
    """
    n = len(y)
    kept = np.zeros(n, dtype=bool)
    rule: AnchorRule | None = None
    day = None
    lo_v, hi_v = math.inf, -math.inf  # min / max of the hours read before the current day
    folded = 0  # hours [0, folded) are in lo_v / hi_v
    last = -1
    for a in range(n):
        day_start = n - HOURS_PER_DAY * ((n - a - 1) // HOURS_PER_DAY + 1)
        if day_start != day:
            upto = max(day_start, 0)
            vals = y[folded:upto][kept[folded:upto]]
            if vals.size:
                lo_v, hi_v = min(lo_v, float(vals.min())), max(hi_v, float(vals.max()))
            folded = max(folded, upto)
            day = day_start
            rule = (anchor_rule(z, kept, day_start - window_h, day_start, (lo_v / multiple, hi_v * multiple))
                    if math.isfinite(lo_v) else None)
        if not obs[a]:
            continue
        if rule is not None and math.isfinite(float(z[a])):
            before = a >= 1 and bool(obs[a - 1])
            kept[a] = rule.accepts(float(z[a]), float(y[a]), float(z[last]) if last >= 0 else None,
                                   float(z[a - 1]) if before else None, float(y[a - 1]) if before else None,
                                   bool(flagged[a]))
        else:
            kept[a] = not flagged[a]
        if kept[a]:
            last = a
    return kept


def last_usable_before(ok: np.ndarray) -> np.ndarray:
    """Position of the last ``ok`` hour strictly before each hour (-1 when none); shape ``(n,)``."""
    acc = np.maximum.accumulate(np.where(ok, np.arange(len(ok)), -1))
    return np.concatenate([[-1], acc[:-1]]).astype(np.int64)


def last_change(y: np.ndarray, anchorable: np.ndarray, a: int | None) -> float:
    """``y_a - y_{a-1}`` when both hours anchor, else 0."""
    if a is None or a < 1 or not anchorable[a - 1]:
        return 0.0
    return float(y[a] - y[a - 1])


def flags_are_steps(y: np.ndarray, obs: np.ndarray, flagged: np.ndarray, use: np.ndarray) -> bool:
    """Whether this history's flagged hours were the first hours of new levels rather than spikes.

    Over every flagged observed hour ``t`` whose next hour is observed: the absolute error of persisting
    ``t`` (``|y_{t+1} - y_t|``) against that of persisting the last read hour before ``t``
    (``|y_{t+1} - y_b|``, :func:`readable_hours`); True when the first sum is lower (no flagged hour: False).
    On the Philly series the cluster's real steps are flagged (24 hours: 385 against 2113 node-hours); on
    ServeGen m-small the one flagged hour is a spike.
    """
    cand = np.flatnonzero(flagged[:-1] & obs[1:])
    if cand.size == 0:
        return False
    before = last_usable_before(use)
    b = before[cand]
    ok = b >= 0
    cand, b = cand[ok], b[ok]
    if cand.size == 0:
        return False
    read = float(np.abs(y[cand + 1] - y[cand]).sum())
    skip = float(np.abs(y[cand + 1] - y[b]).sum())
    return read < skip


def value_bounds(y: np.ndarray, use: np.ndarray, multiple: float) -> tuple[float, float]:
    """The range guard's ``(min / multiple, max x multiple)`` of the read hours (all hours when none is read)."""
    v = y[use] if use.any() else y
    return float(v.min()) / multiple, float(v.max()) * multiple
