"""Real-time demand chosen by backtest: candidates, inverse-MAE combination, split-conformal P90 (DESIGN §4.4).

Pure (no file IO). One forecast per service and origin ``o`` (the first hour after the history):

**Candidates** (:data:`CANDIDATES`), each a day-ahead P50 from the history before ``o`` only:

* ``profile``: the weekly seasonal profile (:func:`forecasters.realtime.fit_profile`, trend + Fourier
  24 h/168 h on the local clock, level-shift step) with the planning-run level correction from the last
  readable hour (:func:`forecasters.realtime.recalibrate`): the forecast the pipeline used before.
* ``naive24``: the last day repeated, ``y[t - 24 k]`` (``k`` = the smallest whole number of days back
  into the history; 24 h in UTC hours).
* ``mean7``: mean of the same hour over the last ``mean_days`` (7) days, repeated daily.
* ``ets``: simple exponential smoothing, ETS(A,N,N) (:func:`ses_level`: smoothing level by least squares
  of the one-step errors over a grid) on the last ``ets_window_h`` (336) hours; a flat forecast at the
  smoothed level.
* ``mstl_ets``: MSTL (statsmodels, periods 24 h and 168 h; 24 h only (STL) when the window has at most
  2 x 168 h) of the last ``mstl_window_h`` (672) hours, the seasonally adjusted series smoothed by
  ETS(A,N,N); forecast = level + the last daily cycle + the last weekly cycle ("STL + ETS", Hyndman and
  Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed., §6.8 and §12.1). One STL inner
  iteration per period (``inner_iter=1``) to keep it fast (about 60 ms on 672 h against 230 ms).

**Readable hours** (the outage rule): the profile is fitted without ``exclude`` (imputed) and
``outliers`` (ingest's flags), as before. Everything else -- the other candidates' inputs, the backtest
scoring, the level correction and the hourly anchor -- reads an observed hour as it is unless
:meth:`AnchorRule.accepts` refuses it. With ``z`` the value divided by its same-hour reference (mean of
the clean hours 1..7 days before, :func:`same_hour_mean`) and "seen range" the smallest..largest
one-hour change ``z_t / z_{t-1}`` of the clean (observed, unflagged) hour pairs of the week before its
day: an hour whose change from the last hour read is within the seen range is read; otherwise an hour
outside the range guard's bounds (below the clean history's minimum / 2 or above its maximum x 2) is
not (an outage's zero); an unflagged hour inside them is; an hour ingest flagged inside them is read
only when its change from the hour before it is within the seen range, or when that hour, also inside
the bounds, moved the same way beyond it (a move confirmed by a second hour: the start of a new level).
An hour the rule cannot judge (no 24 clean pairs in the week, no reference) is read unless flagged.
So an outage's zero is never read, flagged or not (ingest's outlier rule does not flag a zero under a
weekly pattern: its reference is the same hour of the days around, whose spread the weekly pattern
widens), and a real step at the end is read from its second hour on (ingest flags every hour of a new
level until the 48 h level-shift test accepts it: on the Philly series, at a planning run after
2017-11-02, 11 of that day's 24 hours, when the cluster grew from 420 to 552 nodes). Unread hours are
re-imputed by ingest's method (:func:`forecasters.realtime.ingest.impute_hours`) for the candidates, are
not scored and do not anchor. When the profile fit detects a level shift (:mod:`forecasters.realtime.shift`),
the hours before it are scaled by its factor for the other candidates too, so every candidate follows
the new level.

**Choose by backtest, combine** (the rule): the candidates are refitted at the ``n_origins`` (7) previous
origins ``o - 24 j`` (``j = 1..7``; those with at least ``min_history_h`` hours of history) and scored
24 h ahead on the readable hours. The P50 is the combination with inverse-MAE weights
``w_c = (1 / MAE_c) / sum_d (1 / MAE_d)`` over those hours pooled (a candidate with MAE 0 takes all
the weight, shared with any other at 0). A candidate that failed at any scored origin is left out.
When the final profile follows a level shift that an inner origin did not know, that origin's hours from
the change on are not scored (the profile's P90 calibration rule). The weights scored on the day ahead
apply to every horizon.

**Hourly mode** (one hour ahead, persistence-anchored): with ``a`` the last readable hour before ``t``
and ``S`` the profile without level correction, ``A(t) = y_a * S(t) / S(a)`` (anchor kind ``ratio``)
or ``A(t) = y_a`` (``flat``), ``P50(t) = w A(t) + (1 - w) C(t)`` with ``C`` the combination. Kind and
``w`` (grid 0, 0.1, ..., 1) are chosen on the same backtest (each readable hour ``t`` of each inner day
from the readable actuals before it and that origin's ``C``; the full ``w`` at every such hour) by the
lowest MAE; persistence itself is ``flat`` with ``w = 1``, and the best option replaces it only when its
MAE is lower by more than one standard error of the per-origin MAE difference (the one-standard-error
rule, Hastie, Tibshirani and Friedman, *The Elements of Statistical Learning*, 2nd ed., §7.10); so on
the backtest the hourly mode never does worse than persistence (on readable anchors). Further from the
anchor the weight decays, ``w_k = w * rho ** (k - 1)`` at ``k`` hours, with ``rho`` the lag-1
autocorrelation of the combination's relative backtest errors (clipped to [0, 0.99]). The forecast from
the origin is this anchored P50 (anchor = the last readable history hour).

**P90**: split-conformal quantiles of the residuals of the forecast as issued at each inner origin (the
final weights and hourly choice applied to that origin's candidates and anchor): ratio ``actual / P50``
(multiplicative, when every backtest P50 is > 0; else the difference), per local hour-of-day band
(``hour_bands`` = 4 bands of 6 h; a band with fewer than ``min_band_residuals`` (24) residuals uses all
of them); at ``k = 1`` hour after the anchor (with ``w > 0``) the hourly mode's own quantile (all its
backtest hours). Quantile: the ``ceil((n + 1) * 0.9)``-th smallest of ``n`` residuals (Angelopoulos and
Bates, *A Gentle Introduction to Conformal Prediction*, 2021, eq. 1), the largest when that exceeds ``n``.
So the P90 covers at least 90 % of the recent backtest hours by construction.

**Range guard**: no P50/P90 leaves ``[min / m, max * m]`` of the clean history (``m`` =
``range_multiple`` = 2); a value outside is clipped (``clipped`` in the forecast frame), and when the
first ``guard_horizon_h`` (168) hours need clipping at fit time the status is ``"degraded"`` with a
message naming the candidates beyond it.

**History too short** for one scored inner origin: the profile alone (its own P90), status
``"degraded"`` with a message.

Cost: the candidates at 8 origins (the profile fit dominates); ``gpuplan run`` fits 2 services twice
(the forecast and the last-day band, sharing 7 origins through ``memo``): about 0.8 s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.realtime.ingest import impute_hours
from forecasters.realtime.profile import Profile, ProfileSettings, fit_profile, fitted, forecast, recalibrate

HOURS_PER_DAY = 24
HOURS_PER_WEEK = 168
#: The candidate forecasters (module docstring), in the order they are reported.
CANDIDATES = ("profile", "naive24", "mean7", "ets", "mstl_ets")
#: Rule name recorded with every combination (DESIGN §4.4).
RULE = "inverse-MAE weights over the last 7 daily origins; split-conformal P90 per 6 h band"


@dataclass(frozen=True)
class CombineSettings:
    """Settings of :func:`fit_combined` (module docstring; defaults stated there).

    Attributes:
        candidates: names from :data:`CANDIDATES` to combine.
        n_origins: previous daily origins scored (7).
        horizon_h: hours scored ahead of each inner origin (24, day-ahead).
        min_history_h: history an inner origin needs (48 h, the profile's minimum).
        mean_days: days in the same-hour mean (7).
        ets_window_h: hours the ETS level is fitted on (336).
        mstl_window_h: hours MSTL decomposes (672).
        p90_quantile: the upper quantile (0.9).
        hour_bands: local hour-of-day bands of the P90 (4 of 6 h).
        min_band_residuals: fewer residuals in a band: the pooled quantile (24).
        hourly_weights: grid of the hourly anchor weight ``w``.
        hourly_se_rule: standard errors the best hourly option must beat persistence by (1.0).
        range_multiple: the range guard's ``m`` (2.0).
        guard_horizon_h: hours checked by the range guard at fit time (168).
        profile: :class:`forecasters.realtime.ProfileSettings` of the profile candidate.
    """

    candidates: tuple[str, ...] = CANDIDATES
    n_origins: int = 7
    horizon_h: int = HOURS_PER_DAY
    min_history_h: int = 2 * HOURS_PER_DAY
    mean_days: int = 7
    ets_window_h: int = 2 * HOURS_PER_WEEK
    mstl_window_h: int = 4 * HOURS_PER_WEEK
    p90_quantile: float = 0.9
    hour_bands: int = 4
    min_band_residuals: int = HOURS_PER_DAY
    hourly_weights: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))
    hourly_se_rule: float = 1.0
    range_multiple: float = 2.0
    guard_horizon_h: int = HOURS_PER_WEEK
    profile: ProfileSettings = field(default_factory=ProfileSettings)


@dataclass(frozen=True)
class Seasonal:
    """A candidate's forecast path: ``max(level + pattern[h % len(pattern)], 0)`` at ``h`` hours after the origin."""

    level: float
    pattern: np.ndarray

    def at(self, h: np.ndarray) -> np.ndarray:
        """Values at hour offsets ``h`` (int array, >= 0) from the origin; shape of ``h``."""
        return np.maximum(self.level + self.pattern[np.asarray(h) % len(self.pattern)], 0.0)


@dataclass(frozen=True)
class AnchorRule:
    """When an hour is read as it is (module docstring, "readable hours").

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


@dataclass(frozen=True)
class OriginFit:
    """The candidates fitted at one origin (history before ``origin``).

    Attributes:
        origin: UTC hour of the first forecast hour.
        profile: recalibrated profile (the ``profile`` candidate).
        shape: the same profile without level correction (the hourly mode's ``S``).
        paths: candidate name -> :class:`Seasonal` (non-profile candidates that succeeded).
        failed: candidate name -> reason, for those that raised.
        shift_since: start of the level shift the profile detected (None = none).
    """

    origin: pd.Timestamp
    profile: Profile
    shape: Profile
    paths: dict[str, Seasonal]
    failed: dict[str, str]
    shift_since: pd.Timestamp | None

    def predict(self, name: str, h: np.ndarray) -> np.ndarray:
        """Candidate ``name`` at hour offsets ``h`` (>= 0) from the origin."""
        if name == "profile":
            idx = self.origin + pd.to_timedelta(np.asarray(h), unit="h")
            return fitted(self.profile, pd.DatetimeIndex(idx))
        return self.paths[name].at(h)


@dataclass(frozen=True)
class Combined:
    """A fitted combination (module docstring). Values in the series' units per hour; times UTC.

    Attributes:
        method: human-readable description (rule and weights).
        status: ``"ok"``, ``"level_shift"`` or ``"degraded"`` (the profile's, degraded further by the
            range guard or a too-short history).
        messages: the profile's messages and the combination's notes.
        components: the profile's components plus ``"combination"``.
        timezone: IANA zone of the seasonal clock.
        origin: UTC hour of the first forecast hour (the hour after the history).
        fit: the candidates at ``origin`` (:class:`OriginFit`).
        weights: candidate -> weight (sum 1).
        scores: candidate -> backtest MAE (series units per hour) on ``n_scored_h`` hours.
        n_scored_h: backtest hours scored; ``n_inner_origins``: origins they come from.
        p90_kind: ``"ratio"`` or ``"additive"``; ``p90_bands``: quantile per hour band (shape ``(bands,)``).
        hourly_kind: ``"flat"`` or ``"ratio"``; ``hourly_w``: the anchor weight; ``rho``: its decay per hour.
        hourly_q90: P90 quantile of the one-hour-ahead mode (same kind as ``p90_kind``).
        hourly_scores: backtest MAE of ``hourly`` (the chosen option), ``persistence``, ``day_ahead`` and
            ``best`` (the grid's lowest, before the one-standard-error rule).
        anchor_ts / anchor_value: the last usable actual hour and its value (None without one).
        bounds: the range guard's ``(low, high)``.
        anchor_rule: the :class:`AnchorRule` of flagged hours (None = nothing to judge by: never read).
        last_ts / last_value / last_z: the last observed history hour (flagged or not), its value and its
            adjusted value (by the same-hour reference, :func:`same_hour_mean`).
        anchor_z: the anchor's adjusted value.
        hour_ref: same-hour reference of the 24 hours after the origin (mean of the clean values 1..7
            days before each), shape ``(24,)``; NaN where none.
        settings: the :class:`CombineSettings` used.
    """

    method: str
    status: str
    messages: tuple[str, ...]
    components: tuple[str, ...]
    timezone: str
    origin: pd.Timestamp
    fit: OriginFit
    weights: dict[str, float]
    scores: dict[str, float]
    n_scored_h: int
    n_inner_origins: int
    p90_kind: str
    p90_bands: np.ndarray
    hourly_kind: str
    hourly_w: float
    rho: float
    hourly_q90: float
    hourly_scores: dict[str, float]
    anchor_ts: pd.Timestamp | None
    anchor_value: float | None
    bounds: tuple[float, float]
    anchor_rule: AnchorRule | None
    last_ts: pd.Timestamp | None
    last_value: float | None
    last_z: float
    anchor_z: float
    hour_ref: np.ndarray
    settings: CombineSettings

    @property
    def profile(self) -> Profile:
        """The recalibrated weekly profile at the origin (the ``profile`` candidate)."""
        return self.fit.profile

    @property
    def level_factor(self) -> float:
        """The profile candidate's level correction (1.0 = none)."""
        return float(self.fit.profile.level_factor)

    def selection(self) -> dict[str, Any]:
        """JSON-ready record of the choice: rule, candidates' backtest MAE and weights, hourly mode, P90."""
        return {
            "rule": RULE,
            "n_inner_origins": int(self.n_inner_origins),
            "n_scored_h": int(self.n_scored_h),
            "candidates": {c: {"mae": float(self.scores[c]), "weight": float(self.weights.get(c, 0.0))}
                           for c in self.scores},
            "failed": dict(self.fit.failed),
            "p90": {"kind": self.p90_kind, "bands": [float(q) for q in self.p90_bands]},
            "hourly": {"kind": self.hourly_kind, "w": float(self.hourly_w), "rho": float(self.rho),
                       "q90": float(self.hourly_q90), **{f"mae_{k}": float(v) for k, v in self.hourly_scores.items()}},
            "bounds": [float(b) for b in self.bounds],
        }


# ------------------------------------------------------------------------------------------ candidates


#: Smoothing levels tried by :func:`ses_level` (0.05 .. 1 in steps of 0.05).
SES_ALPHAS = np.round(np.arange(1, 21) * 0.05, 2)


def ses_level(z: np.ndarray) -> float:
    """ETS(A,N,N) level after ``z``: simple exponential smoothing, alpha by least squares.

    ``l_0 = z_0``, ``l_t = l_{t-1} + alpha (z_t - l_{t-1})``; alpha minimises the sum of squared one-step
    errors ``z_t - l_{t-1}`` over :data:`SES_ALPHAS` (the Holt-Winters least-squares criterion; Hyndman and
    Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed., §8.1). Vectorised over the grid:
    about 1 ms on 336 h (statsmodels' optimiser took 9-65 ms per fit here, the combination fits 18 per
    ``gpuplan run``). Raises ``ValueError`` for an empty or non-finite input.
    """
    z = np.asarray(z, dtype=float)
    if z.size == 0 or not np.isfinite(z).all():
        raise ValueError("ETS level: empty or non-finite history")
    level = np.full(SES_ALPHAS.size, z[0])
    sse = np.zeros(SES_ALPHAS.size)
    for v in z[1:]:
        err = v - level
        sse += err * err
        level = level + SES_ALPHAS * err
    return float(level[int(np.argmin(sse))])


def _mstl_ets(z: np.ndarray) -> Seasonal:
    """MSTL (24 h, and 168 h with more than two weeks) + ETS(A,N,N) level of the adjusted series."""
    from statsmodels.tsa.seasonal import MSTL, STL

    if len(z) > 2 * HOURS_PER_WEEK:
        res = MSTL(z, periods=(HOURS_PER_DAY, HOURS_PER_WEEK), stl_kwargs={"inner_iter": 1}).fit()
        seas = np.asarray(res.seasonal).reshape(len(z), -1)
        pattern = seas[-HOURS_PER_WEEK:, -1].copy()
        pattern += np.tile(seas[-HOURS_PER_DAY:, 0], HOURS_PER_WEEK // HOURS_PER_DAY)
        adj = z - seas.sum(axis=1)
    else:
        res = STL(z, period=HOURS_PER_DAY).fit(inner_iter=1)
        pattern = np.asarray(res.seasonal)[-HOURS_PER_DAY:].copy()
        adj = z - np.asarray(res.seasonal)
    return Seasonal(ses_level(adj[-2 * HOURS_PER_WEEK:]), pattern)


def _paths(y: np.ndarray, s: CombineSettings) -> tuple[dict[str, Seasonal], dict[str, str]]:
    """Non-profile candidates from the cleaned, level-adjusted history ``y`` (ends at the origin)."""
    paths, failed = {}, {}
    n = len(y)
    for name in s.candidates:
        if name == "profile":
            continue
        try:
            if name == "naive24":
                paths[name] = Seasonal(0.0, y[-HOURS_PER_DAY:].copy())
            elif name == "mean7":
                k = min(s.mean_days, n // HOURS_PER_DAY)
                days = y[n - k * HOURS_PER_DAY:].reshape(k, HOURS_PER_DAY)
                paths[name] = Seasonal(0.0, days.mean(axis=0))
            elif name == "ets":
                paths[name] = Seasonal(ses_level(y[-s.ets_window_h:]), np.zeros(1))
            elif name == "mstl_ets":
                paths[name] = _mstl_ets(y[-s.mstl_window_h:])
            else:
                raise InputError(f"unknown candidate {name!r}; expected one of {CANDIDATES}")
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing candidate is left out and named, never fatal
            failed[name] = f"{type(exc).__name__}: {exc}"
    return paths, failed


def _key(series: pd.Series, masks: tuple[np.ndarray, ...], o: int, tag: str) -> str:
    """Content key of a fit at position ``o``: the history values, the masks, the first stamp and ``tag``."""
    h = hashlib.blake2b(digest_size=16)
    h.update(series.to_numpy()[:o].tobytes())
    for m in masks:
        h.update(m[:o].tobytes())
    h.update(f"{series.index[0]}|{o}|{tag}".encode())
    return h.hexdigest()


def _profile_at(series: pd.Series, fit_use: np.ndarray, o: int, timezone: str, s: CombineSettings,
                memo: dict | None) -> Profile:
    """The weekly profile fitted on ``series[:o]`` without the hours where ``fit_use`` is False (memoized)."""
    key = _key(series, (fit_use,), o, f"profile|{timezone}|{s.profile!r}") if memo is not None else None
    if memo is not None and key in memo:
        return memo[key]
    hist = series.iloc[:o]
    prof = fit_profile(hist, timezone, exclude=list(hist.index[~fit_use[:o]]), settings=s.profile)
    if memo is not None:
        memo[key] = prof
    return prof


def _fit_origin(series: pd.Series, fit_use: np.ndarray, use: np.ndarray, o: int, timezone: str,
                s: CombineSettings, memo: dict | None) -> OriginFit:
    """All candidates at position ``o`` (history ``series[:o]``), cached in ``memo`` by content.

    ``fit_use``: hours the profile is fitted on (neither imputed nor flagged); ``use``: hours the other
    candidates and the level correction read as they are (the rest re-imputed).
    """
    key = _key(series, (fit_use, use), o, f"origin|{timezone}|{s!r}") if memo is not None else None
    if memo is not None and key in memo:
        return memo[key]
    hist = series.iloc[:o]
    prof = _profile_at(series, fit_use, o, timezone, s, memo)
    shape = dataclasses.replace(prof, level_factor=1.0, anchor_=None)
    rec = recalibrate(prof, hist[use[:o]])
    y = impute_hours(hist, list(hist.index[~use[:o]])).to_numpy()
    shift = prof.shift
    since = shift.since if shift is not None else None
    if shift is not None:
        y = np.where(hist.index < shift.since, y * shift.factor, y)
    paths, failed = _paths(y, s)
    out = OriginFit(origin=series.index[o - 1] + pd.Timedelta(hours=1), profile=rec, shape=shape, paths=paths,
                    failed=failed, shift_since=since)
    if memo is not None:
        memo[key] = out
    return out


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


def _adjusted(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``y / ref`` (seasonally adjusted by the same-hour reference), NaN where ``ref`` is NaN or <= 0."""
    good = np.isfinite(ref) & (ref > 0)
    return np.where(good, y / np.where(good, ref, 1.0), np.nan)


def _anchor_rule(z: np.ndarray, read: np.ndarray, lo: int, hi: int, bounds: tuple[float, float]) -> AnchorRule | None:
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


def _plausible(y: np.ndarray, obs: np.ndarray, flagged: np.ndarray, z: np.ndarray, window_h: int,
               multiple: float) -> np.ndarray:
    """Hours the candidates, scoring and anchors read as they are (module docstring, "readable hours").

    Every observed hour is judged by :meth:`AnchorRule.accepts`, with the rule of its day, built from the
    hours read before the day (days counted back from the end of the history, so the last rule is the one
    :func:`reanchor` applies after it): the one-hour changes of read hour pairs in the ``window_h`` hours
    before it, the bounds from every read hour before it (min / ``multiple`` .. max x ``multiple``). With
    nothing to judge by (fewer than 24 read pairs in the window, or no same-hour reference) an hour is
    read unless ingest flagged it.
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
            rule = (_anchor_rule(z, kept, day_start - window_h, day_start, (lo_v / multiple, hi_v * multiple))
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


# ------------------------------------------------------------------------------------------ helpers


def _check(series: pd.Series) -> pd.Series:
    if not isinstance(series.index, pd.DatetimeIndex) or series.index.tz is None:
        raise InputError("series: index must be tz-aware hourly timestamps (use forecasters.realtime.ingest)")
    idx = series.index.tz_convert("UTC")
    if len(idx) > 1 and not (idx[1:] - idx[:-1] == pd.Timedelta(hours=1)).all():
        raise InputError("series: index must be a regular hourly grid (use forecasters.realtime.ingest)")
    vals = series.to_numpy(dtype=float)
    if not np.isfinite(vals).all() or (vals < 0).any():
        raise InputError("series: values must be finite and >= 0 (use forecasters.realtime.ingest)")
    return pd.Series(vals, index=idx)


def _usable(idx: pd.DatetimeIndex, exclude) -> np.ndarray:
    ex = list(exclude) if exclude is not None else []
    if not ex:
        return np.ones(len(idx), dtype=bool)
    return ~idx.isin(pd.DatetimeIndex(pd.to_datetime(ex, utc=True)))


def conformal_quantile(residuals: np.ndarray, level: float) -> float:
    """Split-conformal upper quantile: the ``ceil((n + 1) level)``-th smallest of ``n`` residuals.

    The largest residual when that rank exceeds ``n`` (Angelopoulos and Bates 2021, eq. 1). Raises
    ``InputError`` for an empty input.
    """
    r = np.sort(np.asarray(residuals, dtype=float))
    if r.size == 0:
        raise InputError("conformal_quantile: no residuals")
    k = math.ceil((r.size + 1) * level)
    return float(r[min(k, r.size) - 1])


def _bands(idx: pd.DatetimeIndex, timezone: str, n_bands: int) -> np.ndarray:
    """Local hour-of-day band (0..n_bands-1) of each UTC stamp."""
    return (idx.tz_convert(timezone).hour.to_numpy() * n_bands) // HOURS_PER_DAY


def _lag1(e: np.ndarray, ok: np.ndarray) -> float:
    pair = ok[1:] & ok[:-1]
    a, b = e[1:][pair], e[:-1][pair]
    if a.size <= 2 or np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(np.clip(np.corrcoef(a, b)[0, 1], 0.0, 0.99))


def _last_usable_before(usable: np.ndarray) -> np.ndarray:
    """Position of the last usable hour strictly before each hour (-1 when none); shape ``(n,)``."""
    acc = np.maximum.accumulate(np.where(usable, np.arange(len(usable)), -1))
    return np.concatenate([[-1], acc[:-1]]).astype(np.int64)


# ------------------------------------------------------------------------------------------ fit


def fit_combined(series: pd.Series, timezone: str = "UTC", exclude=None, outliers=None,
                 settings: CombineSettings | None = None, memo: dict | None = None) -> Combined:
    """Fit the combination at the hour after ``series`` (module docstring for every rule).

    Args:
        series: traffic per hour (>= 0, no NaN), tz-aware regular hourly index (from ingest).
        timezone: IANA zone of the service's local clock.
        exclude: UTC stamps never read as they are (ingest's ``imputed`` hours; flagged hours may be
            listed here too, then they are never read either).
        outliers: UTC stamps flagged as outliers (ingest's ``outliers``): kept out of the profile fit; the
            other candidates, the scoring and the hourly anchor read one only when its one-hour change is
            within the recent range (module docstring), else it is re-imputed / skipped.
        settings: :class:`CombineSettings`.
        memo: optional dict reused across calls (e.g. the origins of a backtest): the candidates at an
            origin are cached by the exact history content, so a repeated origin is not refitted.

    Returns:
        :class:`Combined`.

    Raises:
        forecasters.errors.InputError: bad index/values, unknown zone or candidate, or a history the
            profile refuses (fewer than 48 usable hours).
    """
    s = settings or CombineSettings()
    memo = {} if memo is None else memo  # the final profile is used twice (shape, candidate)
    series = _check(series)
    n = len(series)
    y = series.to_numpy()
    obs = _usable(series.index, exclude)
    flagged = ~_usable(series.index, outliers) & obs
    fit_use = obs & ~flagged
    window = s.n_origins * HOURS_PER_DAY
    ref = same_hour_mean(np.concatenate([y, np.full(HOURS_PER_DAY, np.nan)]),
                         np.concatenate([fit_use, np.zeros(HOURS_PER_DAY, dtype=bool)]), s.mean_days)
    z = _adjusted(y, ref[:n])
    use = _plausible(y, obs, flagged, z, window, s.range_multiple)
    bounds = _range(y, use, s)
    rule = _anchor_rule(z, use, n - window, n, bounds)
    last_obs = int(np.flatnonzero(obs)[-1]) if obs.any() else None
    last: dict[str, Any] = {"anchor_rule": rule, "bounds": bounds, "last_ts": None if last_obs is None else series.index[last_obs],
            "last_value": None if last_obs is None else float(y[last_obs]),
            "last_z": float("nan") if last_obs is None else float(z[last_obs]), "hour_ref": ref[n:]}
    anchor = int(np.flatnonzero(use)[-1]) if use.any() else None
    last.update({"anchor_ts": None if anchor is None else series.index[anchor],
                 "anchor_value": None if anchor is None else float(y[anchor]),
                 "anchor_z": float("nan") if anchor is None else float(z[anchor])})
    final = _fit_origin(series, fit_use, use, n, timezone, s, memo)
    inner: list[tuple[int, OriginFit]] = []
    for j in range(1, s.n_origins + 1):
        o = n - HOURS_PER_DAY * j
        if o < s.min_history_h or int(fit_use[:o].sum()) < s.profile.min_points:
            break
        inner.append((o, _fit_origin(series, fit_use, use, o, timezone, s, memo)))
    names = [c for c in s.candidates if c == "profile" or c in final.paths]
    names = [c for c in names if all(c == "profile" or c in f.paths for _, f in inner)]
    messages = list(final.profile.messages)
    status = final.profile.status
    for c, why in final.failed.items():
        messages.append(f"candidate {c} failed at the origin ({why}); left out")

    # scored hours of each inner origin: usable, inside the history, and (with a level shift the final
    # profile follows) after the change only when that origin's profile knew it
    rows = []  # (origin position, target positions, candidate matrix (k, n_targets))
    for o, f in inner:
        t = np.arange(o, min(o + s.horizon_h, n))
        ok = use[t]
        if final.shift_since is not None and f.shift_since is None:
            ok &= series.index[t] < final.shift_since
        t = t[ok]
        if t.size == 0:
            continue
        mat = np.vstack([f.predict(c, t - o) for c in names])
        rows.append((o, t, mat, f))
    if not rows:
        return _profile_only(series, use, timezone, final, s, messages, status, last)

    act = np.concatenate([y[t] for _, t, _, _ in rows])
    cand = np.hstack([m for _, _, m, _ in rows])
    maes = np.mean(np.abs(cand - act[None, :]), axis=1)
    scores = {c: float(m) for c, m in zip(names, maes)}
    if (maes == 0).any():
        w = (maes == 0).astype(float)
    else:
        w = 1.0 / maes
    w = w / w.sum()
    weights = {c: float(v) for c, v in zip(names, w)}
    tgt_idx = series.index[np.concatenate([t for _, t, _, _ in rows])]

    # decay of the hourly correction: lag-1 autocorrelation of the combination's relative day-ahead errors
    e_all, ok_all = [], []
    for o, t, m, _ in rows:
        p = w @ m
        full = np.full(s.horizon_h + 1, np.nan)  # one empty slot: a break between origins
        full[t - o] = np.where(p > 0, y[t] / np.where(p > 0, p, 1.0) - 1.0, np.nan)
        e_all.append(np.nan_to_num(full))
        ok_all.append(~np.isnan(full))
    rho = _lag1(np.concatenate(e_all), np.concatenate(ok_all))

    hk, hw, hq_pair, hscores = _choose_hourly(rows, w, y, use, s)

    # P90: split-conformal per hour band on the residuals of the forecast as issued at each inner origin
    # (the combination with the anchor at the last usable hour before it, decaying with rho)
    before = _last_usable_before(use)
    issued = []
    for o, t, m, f in rows:
        a0 = int(before[o])
        if a0 < 0 or hw == 0:
            issued.append(w @ m)
            continue
        issued.append(_anchored(w @ m, series.index[t], series.index[a0], float(y[a0]), f.shape, hk, hw, rho))
    p50_bt = np.concatenate(issued)
    kind = "ratio" if (p50_bt > 0).all() and math.isfinite(hq_pair[0]) else "additive"
    resid = act / p50_bt if kind == "ratio" else act - p50_bt
    band = _bands(tgt_idx, timezone, s.hour_bands)
    pooled = conformal_quantile(resid, s.p90_quantile)
    q_bands = np.array([conformal_quantile(resid[band == b], s.p90_quantile)
                        if (band == b).sum() >= s.min_band_residuals else pooled for b in range(s.hour_bands)])
    hq = hq_pair[0] if kind == "ratio" else hq_pair[1]
    method = (f"combination of {', '.join(names)} by {RULE.split(';')[0]} "
              f"({', '.join(f'{c} {weights[c]:.2f}' for c in names)}); P90 split-conformal ({kind}); hourly: "
              + ("persistence" if (hk, hw) == ("flat", 1.0) else f"{hw:.1f} x {hk} anchor + {1 - hw:.1f} x day-ahead")
              + f"; profile: {final.profile.method}")
    comb = Combined(method=method, status=status, messages=tuple(messages),
                    components=tuple(final.profile.components) + ("combination",), timezone=timezone,
                    origin=final.origin, fit=final, weights=weights, scores=scores, n_scored_h=int(act.size),
                    n_inner_origins=len(rows), p90_kind=kind, p90_bands=q_bands, hourly_kind=hk, hourly_w=hw,
                    rho=rho, hourly_q90=hq, hourly_scores=hscores, settings=s, **last)
    return _guard_status(comb)


def _range(y: np.ndarray, use: np.ndarray, s: CombineSettings) -> tuple[float, float]:
    v = y[use] if use.any() else y
    return float(v.min()) / s.range_multiple, float(v.max()) * s.range_multiple


def _choose_hourly(rows, w: np.ndarray, y: np.ndarray, use: np.ndarray,
                   s: CombineSettings) -> tuple[str, float, tuple[float, float], dict[str, float]]:
    """The hourly anchor kind and weight by backtest MAE with the one-standard-error rule (module docstring).

    Returns ``(kind, w, (ratio q90, additive q90) of the chosen option's residuals, scores)``; the ratio
    quantile is NaN when a prediction is 0.
    """
    options = [(k, float(wt)) for k in ("flat", "ratio") for wt in s.hourly_weights]
    per_origin = np.zeros((len(rows), len(options)))
    counts = np.zeros(len(rows))
    before = _last_usable_before(use)
    preds_all: list[np.ndarray] = []
    acts: list[np.ndarray] = []
    for r, (o, t, m, f) in enumerate(rows):
        p50 = w @ m
        a = before[t]
        has = a >= 0
        t, p50, a = t[has], p50[has], a[has]
        if t.size == 0:
            preds_all.append(np.zeros((len(options), 0)))
            acts.append(np.zeros(0))
            continue
        both = fitted(f.shape, pd.DatetimeIndex(f.origin + pd.to_timedelta(np.concatenate([t, a]) - o, unit="h")))
        st, sa = both[:t.size], both[t.size:]
        ratio = np.where(sa > 0, st / np.where(sa > 0, sa, 1.0), 1.0)
        anchor = {"flat": y[a], "ratio": y[a] * ratio}
        preds = np.vstack([wt * anchor[k] + (1 - wt) * p50 for k, wt in options])
        preds_all.append(preds)
        acts.append(y[t])
        per_origin[r] = np.abs(preds - y[t][None, :]).sum(axis=1)
        counts[r] = t.size
    keep = counts > 0
    pers = options.index(("flat", 1.0))
    day = options.index(("flat", 0.0))
    if not keep.any():
        return "flat", 0.0, (1.0, 0.0), {}
    total = per_origin[keep].sum(axis=0) / counts[keep].sum()
    best = int(np.argmin(total))
    chosen = pers
    if best != pers:
        d = per_origin[keep, best] / counts[keep] - per_origin[keep, pers] / counts[keep]
        se = float(np.std(d, ddof=1) / np.sqrt(d.size)) if d.size > 1 else math.inf
        if -float(np.mean(d)) > s.hourly_se_rule * se:
            chosen = best
    p = np.hstack([pa[chosen] for pa, k in zip(preds_all, keep) if k])
    act = np.hstack([ac for ac, k in zip(acts, keep) if k])
    q_ratio = conformal_quantile(act / p, s.p90_quantile) if (p > 0).all() else float("nan")
    q = (q_ratio, conformal_quantile(act - p, s.p90_quantile))
    scores = {"hourly": float(total[chosen]), "persistence": float(total[pers]), "day_ahead": float(total[day]),
              "best": float(total[best])}
    return options[chosen][0], options[chosen][1], q, scores


def _profile_only(series, use, timezone, final: OriginFit, s: CombineSettings, messages, status,
                  last: dict) -> Combined:
    """Too short for one scored inner origin: the recalibrated profile alone (its own P90)."""
    messages = messages + [f"history too short for the combination backtest (needs {s.min_history_h} h before "
                           f"an origin {s.horizon_h} h before the end): the weekly profile alone"]
    comb = Combined(method=final.profile.method + " (alone: no backtest)", status="degraded",
                    messages=tuple(messages), components=tuple(final.profile.components), timezone=timezone,
                    origin=final.origin, fit=final, weights={"profile": 1.0}, scores={}, n_scored_h=0,
                    n_inner_origins=0, p90_kind="profile", p90_bands=np.zeros(s.hour_bands), hourly_kind="flat",
                    hourly_w=0.0, rho=0.0, hourly_q90=0.0, hourly_scores={}, settings=s, **last)
    return _guard_status(comb)


def _guard_status(comb: Combined) -> Combined:
    """Degrade the status when the first ``guard_horizon_h`` hours need the range guard."""
    fc = forecast_combined(comb, comb.settings.guard_horizon_h)
    n_clip = int(fc["clipped"].sum())
    if n_clip == 0:
        return comb
    lo, hi = comb.bounds
    raw = _raw(comb, pd.DatetimeIndex(fc["ts"]))[0]
    worst = [c for c in comb.weights
             if ((v := comb.fit.predict(c, np.arange(comb.settings.guard_horizon_h))) > hi).any() or (v < lo).any()]
    msg = (f"range guard: {n_clip} of the next {comb.settings.guard_horizon_h} hours were outside "
           f"[{lo:.4g}, {hi:.4g}] (history min / {comb.settings.range_multiple:g} .. max x "
           f"{comb.settings.range_multiple:g}; unclipped P50 {raw.min():.4g}..{raw.max():.4g}) and are clipped"
           + (f"; candidates beyond it: {', '.join(worst)}" if worst else ""))
    return dataclasses.replace(comb, status="degraded", messages=comb.messages + (msg,))


# ------------------------------------------------------------------------------------------ forecast


def _anchored(day: np.ndarray, idx: pd.DatetimeIndex, anchor_ts: pd.Timestamp, anchor_value: float, shape: Profile,
              kind: str, w: float, rho: float) -> np.ndarray:
    """P50 with the hourly anchor: ``w_k A(t) + (1 - w_k) day(t)``, ``w_k = w rho ** (k - 1)`` at ``k >= 1`` h."""
    k = ((idx - anchor_ts) / pd.Timedelta(hours=1)).to_numpy()
    wk = np.where(k >= 1, w * rho ** np.maximum(k - 1, 0), 0.0)
    anchor = np.full(len(idx), anchor_value)
    if kind == "ratio":
        both = fitted(shape, idx.append(pd.DatetimeIndex([anchor_ts])))
        st, sa = both[:-1], float(both[-1])
        anchor = anchor * (st / sa if sa > 0 else 1.0)
    return wk * anchor + (1 - wk) * day


def _raw(comb: Combined, idx: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    """Unclipped P50 and P90 at UTC stamps ``idx`` (at or after the origin)."""
    h = ((idx - comb.origin) / pd.Timedelta(hours=1)).to_numpy()
    if (h < 0).any():
        raise InputError(f"forecast start {idx[0].isoformat()} is before the forecast origin "
                         f"{comb.origin.isoformat()}")
    h = h.astype(np.int64)
    if comb.p90_kind == "profile":  # profile alone
        fc = forecast(comb.fit.profile, len(idx), start=idx[0])
        return fc["p50"].to_numpy(), fc["p90"].to_numpy()
    names = list(comb.weights)
    w = np.array([comb.weights[c] for c in names])
    p50 = w @ np.vstack([comb.fit.predict(c, h) for c in names])
    q = comb.p90_bands[_bands(idx, comb.timezone, len(comb.p90_bands))]
    if comb.anchor_ts is not None and comb.hourly_w > 0:
        p50 = _anchored(p50, idx, comb.anchor_ts, float(comb.anchor_value or 0.0), comb.fit.shape, comb.hourly_kind,
                        comb.hourly_w, comb.rho)
        one_h = ((idx - comb.anchor_ts) / pd.Timedelta(hours=1)).to_numpy() == 1
        q = np.where(one_h, comb.hourly_q90, q)
    p90 = p50 * q if comb.p90_kind == "ratio" else p50 + q
    return p50, np.maximum(p90, p50)


def forecast_combined(comb: Combined, horizon_h: int, start=None) -> pd.DataFrame:
    """Forecast P50/P90 per hour from a :class:`Combined`.

    Args:
        comb: from :func:`fit_combined` (optionally :func:`reanchor`-ed).
        horizon_h: number of hours (>= 1).
        start: first UTC hour, at or after ``comb.origin`` (default the origin).

    Returns:
        Frame with ``horizon_h`` rows: ``ts`` (UTC), ``p50``, ``p90`` (series units per hour, ``p90 >=
        p50 >= 0``) and ``clipped`` (bool: the range guard moved the value).

    Raises:
        forecasters.errors.InputError: ``horizon_h < 1``, a naive ``start`` or one before the origin.
    """
    if int(horizon_h) < 1:
        raise InputError(f"horizon_h must be >= 1; got {horizon_h}")
    start = comb.origin if start is None else pd.Timestamp(start)
    if start.tzinfo is None:
        raise InputError(f"forecast start {start} has no time zone; give a UTC timestamp")
    idx = pd.date_range(start.tz_convert("UTC").floor("h"), periods=int(horizon_h), freq="h")
    p50, p90 = _raw(comb, idx)
    lo, hi = comb.bounds
    c50, c90 = np.clip(p50, lo, hi), np.clip(p90, lo, hi)
    clipped = (c50 != p50) | (c90 != p90)
    return pd.DataFrame({"ts": idx, "p50": c50, "p90": np.maximum(c90, c50), "clipped": clipped})


def reanchor(comb: Combined, actuals: pd.Series, exclude=(), outliers=()) -> Combined:
    """Move the hourly anchor to the last usable hour of ``actuals`` (e.g. each hour of a planning day).

    Args:
        comb: a fitted combination.
        actuals: UTC-indexed traffic per hour after the current anchor, up to (not including) the hour to
            forecast; NaN = missing.
        exclude: UTC stamps never used as an anchor (ingest's imputed hours).
        outliers: UTC stamps flagged as outliers. Every hour (flagged or not) anchors only when
            ``comb.anchor_rule`` accepts it (the fit's rule, :meth:`AnchorRule.accepts`, on values adjusted
            by ``comb.hour_ref``; meant for the 24 hours after the origin); a flagged hour the rule cannot
            judge does not anchor.

    Returns:
        A new :class:`Combined` (the day-ahead P50/P90 and the choices unchanged); the input unchanged when
        no usable hour after the current anchor exists.

    Raises:
        forecasters.errors.InputError: an index without a time zone or a negative value.
    """
    if not isinstance(actuals.index, pd.DatetimeIndex) or actuals.index.tz is None:
        raise InputError("actuals: index must be tz-aware UTC hours")
    r = actuals.dropna().astype(float).sort_index()
    r.index = r.index.tz_convert("UTC")
    if (r < 0).any():
        raise InputError("actuals: negative traffic")
    r = r[_usable(r.index, exclude)]
    if comb.anchor_ts is not None:
        r = r[r.index > comb.anchor_ts]
    if r.empty:
        return comb
    flagged = ~_usable(r.index, outliers)
    offs = (((r.index - comb.origin) / pd.Timedelta(hours=1)).to_numpy().astype(np.int64)) % HOURS_PER_DAY
    z = _adjusted(r.to_numpy(), comb.hour_ref[offs])
    ts: pd.Timestamp | None = comb.anchor_ts
    val: float | None = comb.anchor_value
    za = comb.anchor_z
    prev_ts, zp, yp = comb.last_ts, comb.last_z, comb.last_value
    rule = comb.anchor_rule
    for i, (t, v) in enumerate(r.items()):
        consecutive = prev_ts is not None and t - prev_ts == pd.Timedelta(hours=1)
        z_prev, y_prev = (zp, yp) if consecutive else (None, None)
        prev_ts, zp, yp = t, float(z[i]), float(v)
        if rule is not None and math.isfinite(float(z[i])):
            ok = rule.accepts(float(z[i]), float(v), za if ts is not None else None, z_prev, y_prev, bool(flagged[i]))
        else:
            ok = not flagged[i]
        if ok:
            ts, val, za = t, float(v), float(z[i])
    if ts == comb.anchor_ts:
        return comb
    return dataclasses.replace(comb, anchor_ts=ts, anchor_value=val, anchor_z=za)
