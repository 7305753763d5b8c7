"""Real-time demand chosen by backtest: candidates, inverse-MAE combination, conformal P90, hourly mode (DESIGN §4.4).

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

**Hourly mode** (one hour ahead, a model of the change from the anchor): with ``a`` the last readable hour
before ``t``, ``C`` the combination and ``r`` the same-hour reference (mean of the clean hours 1..7 days
before, :func:`same_hour_mean`), each model of :data:`HOURLY_MODELS` forecasts ``y_a + sum_j b_j x_j(t)`` on
the :data:`HOURLY_FEATURES` ``C(t) - y_a`` (the day-ahead gap: a persistence/day-ahead blend),
``r(t) - r(a)`` (the expected seasonal change) and ``y_a - y_{a-1}`` (the last change: AR(1) on differences;
measured no better, not in the default list); persistence is the model with no feature. Coefficients are
least absolute deviations (:func:`lad_fit`: the score is MAE) on the inner days' readable hours, each hour
forecast from the readable actuals before it and that origin's ``C``. Each model is scored leave-one-day-out
(coefficients from the other 6 days); the mode is the inverse-MAE combination of the models on those scores
(a linear model again: coefficients = the weighted sum of each model's coefficients fitted on all 7 days;
combining was measured steadier than picking the best model, whose choice flips from day to day on series
whose changes are white noise), kept only when its own leave-one-day-out MAE beats persistence's by more
than one standard error of the per-day difference (the one-standard-error rule, Hastie, Tibshirani and
Friedman, *The Elements of Statistical Learning*, 2nd ed., §7.10); else persistence. So on the backtest the
hourly mode is not worse than persistence. Further from the anchor its correction to ``C`` decays:
``P50(t) = C(t) + rho ** (k - 1) (H(t) - C(t))`` at ``k`` hours with ``H`` the model's forecast and ``rho``
the lag-1 autocorrelation of the combination's relative backtest errors (clipped to [0, 0.99]). The forecast
from the origin is this anchored P50 (anchor = the last readable history hour).

*Flagged hours as anchors*: an hour ingest flagged anchors the hourly mode (judged by :meth:`AnchorRule.accepts`
as if unflagged: an outage's zero outside the bounds still never anchors) when, over the flagged hours of this
history, persisting the flagged hour erred less on the next hour than persisting the last read hour before
it (:attr:`Combined.read_flagged`): on the Philly series ingest flags the first hours of the cluster's real
steps (24 hours: 385 against 2113 node-hours of error), on ServeGen m-small its one flagged hour is a spike.
The candidates, the scoring and the level correction read flagged hours as before.

**P90**: split-conformal quantiles of the residuals of the forecast as issued at each inner origin (the
final weights and hourly mode applied to that origin's candidates and anchor): ratio ``actual / P50``
(multiplicative, when every backtest P50 is > 0; else the difference), pooled (``hour_bands`` = 1; 4 bands
of 6 h, 42 residuals each, were measured to cover less); at ``k = 1`` hour after the anchor the hourly mode's
own quantile (its out-of-day backtest residuals). Quantile: the ``ceil((n + 1) (1 - alpha))``-th smallest of
``n`` residuals (Angelopoulos and Bates, *A Gentle Introduction to Conformal Prediction*, 2021, eq. 1). The
level is adaptive (ACI, Gibbs and Candès 2021, :func:`aci_alpha`): from ``alpha = 0.1`` the inner days are
replayed oldest first, each day's P90 taken from the days before it and each of its misses moving ``alpha``
by ``gamma (0.1 - miss)`` (``gamma = 0.005``); the level then only widens (``alpha <= 0.1``): a run of
recent misses (a new regime the older days do not show) widens the next P90, a quiet week does not narrow
it below the plain split-conformal quantile (7 days hold few independent errors: the hours of a day miss
together).

**Range guard**: no P50/P90 leaves ``[min / m, max * m]`` of the clean history (``m`` =
``range_multiple`` = 2); a value outside is clipped (``clipped`` in the forecast frame), and when the
first ``guard_horizon_h`` (168) hours need clipping at fit time the status is ``"degraded"`` with a
message naming the candidates beyond it.

**History too short** for one scored inner origin: the profile alone (its own P90), status
``"degraded"`` with a message.

Cost: the candidates at 8 origins (the profile fit dominates) and the hourly models' 4 x 8 LAD fits;
``gpuplan run`` fits 2 services twice (the forecast and the last-day band, sharing 7 origins through
``memo``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from domain.conformal import conformal_upper
from forecasters.errors import InputError
from forecasters.realtime.ingest import impute_hours
from forecasters.realtime.profile import (
    Profile,
    ProfileSettings,
    check_hourly_series,
    fit_profile,
    fitted,
    forecast,
    recalibrate,
)

HOURS_PER_DAY = 24
HOURS_PER_WEEK = 168
#: The candidate forecasters (module docstring), in the order they are reported.
CANDIDATES = ("profile", "naive24", "mean7", "ets", "mstl_ets")
#: Rule name recorded with every combination (DESIGN §4.4).
RULE = ("inverse-MAE weights over the last 7 daily origins; split-conformal P90 with an adaptive (ACI) level; "
        "hourly: inverse-MAE combination of LAD change models, leave-one-day-out, or persistence")
#: Features of the hourly model, each known at the anchor hour ``a`` for a target hour ``t > a`` (module
#: docstring): the day-ahead combination's gap ``C(t) - y_a``, the seasonal change ``r(t) - r(a)`` (``r`` the
#: mean of the same hour over the last 7 days, :func:`same_hour_mean`) and the last change ``y_a - y_{a-1}``.
HOURLY_FEATURES = ("gap_day_ahead", "seasonal_change", "last_change")
#: The hourly models ``y_a + sum_j b_j x_j(t)``: name -> the features ``x_j`` they use (persistence: none).
HOURLY_MODELS: dict[str, tuple[str, ...]] = {
    "persistence": (),
    "blend": ("gap_day_ahead",),
    "seasonal": ("seasonal_change",),
    "blend_seasonal": ("gap_day_ahead", "seasonal_change"),
    "full": HOURLY_FEATURES,
}


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
        hour_bands: local hour-of-day bands of the P90 (1: pooled; 4 bands of 6 h were measured to cover less).
        min_band_residuals: fewer residuals in a band: the pooled quantile (24).
        aci_gamma: step of the adaptive conformal update of the P90's miss rate (0.005, Gibbs and Candès 2021;
            0 = plain split conformal).
        aci_widen_only: the update may only widen the P90 (its miss rate never above ``1 - p90_quantile``).
        hourly_models: names from :data:`HOURLY_MODELS` the hourly mode combines (persistence always; ``full``,
            with the last change, was measured no better and is not in the default).
        hourly_se_rule: standard errors the hourly combination must beat persistence by (1.0).
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
    hour_bands: int = 1
    min_band_residuals: int = HOURS_PER_DAY
    aci_gamma: float = 0.005
    aci_widen_only: bool = True
    hourly_models: tuple[str, ...] = ("persistence", "blend", "seasonal", "blend_seasonal")
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
        p90_alpha: the miss rate the P90 quantiles are taken at (``1 - p90_alpha``), after the adaptive update
            (``1 - p90_quantile`` without it).
        hourly_model: ``"combination"`` (of :data:`HOURLY_MODELS`), ``"persistence"`` or ``"none"`` (no
            backtest); ``hourly_coef``: its coefficients on :data:`HOURLY_FEATURES`, shape ``(3,)`` (all 0 for
            persistence); ``hourly_weights``: model -> weight in the combination; ``rho``: the decay per hour
            of its correction to the day-ahead P50.
        hourly_q90: P90 quantile of the one-hour-ahead mode (same kind as ``p90_kind``).
        hourly_scores: leave-one-day-out backtest MAE of ``hourly`` (the mode used), ``persistence``,
            ``combination`` (before the one-standard-error rule), each model, and ``day_ahead`` (the
            combination of candidates alone).
        read_flagged: whether hours ingest flagged anchor the hourly mode (when the rule accepts them as
            unflagged): on this history, persisting a flagged hour erred less than persisting the hour before it.
        anchor_ts / anchor_value: the last usable actual hour and its value (None without one).
        anchor_change: ``y_a - y_{a-1}`` at the anchor when the hour before it anchors too, else 0.
        bounds: the range guard's ``(low, high)``.
        anchor_rule: the :class:`AnchorRule` of flagged hours (None = nothing to judge by: never read).
        last_ts / last_value / last_z: the last observed history hour (flagged or not), its value and its
            adjusted value (by the same-hour reference, :func:`same_hour_mean`).
        anchor_z: the anchor's adjusted value.
        hour_ref: same-hour reference of the 24 hours after the origin (mean of the clean values 1..7
            days before each), shape ``(24,)``; NaN where none.
        ref_hist: the same reference of the last 168 history hours (the anchors' ``r(a)``), shape ``(168,)``
            (NaN-padded at the front for a shorter history).
        settings: the :class:`CombineSettings` used.
        calibration: the P90's calibration residuals: ``ts`` (UTC hours), ``actual``, ``p50`` (as issued at
            each inner origin) and ``day`` (inner origin, 0 = the most recent).
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
    p90_alpha: float
    hourly_model: str
    hourly_coef: np.ndarray
    hourly_weights: dict[str, float]
    rho: float
    hourly_q90: float
    hourly_scores: dict[str, float]
    read_flagged: bool
    anchor_ts: pd.Timestamp | None
    anchor_value: float | None
    anchor_change: float
    bounds: tuple[float, float]
    anchor_rule: AnchorRule | None
    last_ts: pd.Timestamp | None
    last_value: float | None
    last_z: float
    anchor_z: float
    hour_ref: np.ndarray
    ref_hist: np.ndarray
    settings: CombineSettings
    calibration: dict[str, np.ndarray] = field(default_factory=dict)

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
            "p90": {"kind": self.p90_kind, "bands": [float(q) for q in self.p90_bands],
                    "alpha": float(self.p90_alpha)},
            "hourly": {"kind": self.hourly_model, "rho": float(self.rho), "q90": float(self.hourly_q90),
                       "coef": {f: float(b) for f, b in zip(HOURLY_FEATURES, self.hourly_coef)},
                       "weights": {m: float(v) for m, v in self.hourly_weights.items()},
                       "read_flagged": bool(self.read_flagged),
                       **{f"mae_{k}": float(v) for k, v in self.hourly_scores.items()}},
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


def _usable(idx: pd.DatetimeIndex, exclude) -> np.ndarray:
    ex = list(exclude) if exclude is not None else []
    if not ex:
        return np.ones(len(idx), dtype=bool)
    return ~idx.isin(pd.DatetimeIndex(pd.to_datetime(ex, utc=True)))


def conformal_quantile(residuals: np.ndarray, level: float) -> float:
    """Split-conformal upper quantile: the ``ceil((n + 1) level)``-th smallest of ``n`` residuals (:func:`domain.conformal.conformal_rank`).

    The ``(n + 1)`` is the finite-sample correction (Angelopoulos and Bates, *A Gentle Introduction to
    Conformal Prediction*, 2021, eq. 1). The rank is clipped to ``1..n``: the largest residual when it exceeds
    ``n`` (a level the residuals cannot resolve, e.g. ``level >= 1`` from the adaptive update, where
    Gibbs and Candès take the whole line: a finite P90 takes the largest residual seen), the smallest when
    ``level <= 0``. Raises ``InputError`` for an empty input.
    """
    if np.size(residuals) == 0:
        raise InputError("conformal_quantile: no residuals")
    return conformal_upper(residuals, level)


def aci_alpha(residuals: np.ndarray, day: np.ndarray, alpha: float, gamma: float, bands: np.ndarray | None = None,
              n_bands: int = 1, min_band: int = HOURS_PER_DAY) -> float:
    """Miss rate after adaptive conformal inference replayed over the backtest days, oldest first.

    Adaptive conformal inference (Gibbs and Candès, "Adaptive Conformal Inference Under Distribution Shift",
    NeurIPS 2021, eq. 2): ``alpha_{t+1} = alpha_t + gamma (alpha - err_t)``, ``err_t = 1`` when the actual
    was above the upper quantile issued for it. Replay: from ``alpha``, each day ``e`` but the oldest gets the
    P90 it would have been issued, the quantile at level ``1 - alpha_e`` (:func:`conformal_quantile`) of the
    residuals of the days before it (per band when ``n_bands > 1``, a band with fewer than ``min_band``
    residuals pooled), fixed for the day like a day-ahead P90; each of its hours then updates ``alpha``. So a
    run of recent misses widens the next P90, a run of easy days narrows it, and with ``gamma = 0`` the level
    stays ``1 - alpha``.

    Args:
        residuals: score per backtest hour (ratio actual / P50 or difference), shape ``(n,)``.
        day: the day of each residual, larger = older (0 = the most recent), shape ``(n,)``.
        alpha: target miss rate (0.1 for a P90).
        gamma: step size (Gibbs and Candès use 0.005).
        bands: band of each residual (None: one band), as in the P90 itself.
        n_bands: number of bands.
        min_band: fewer residuals in a band: the pooled quantile.

    Returns:
        The miss rate to take the next quantile at (may leave [0, 1]; :func:`conformal_quantile` clips the rank).
    """
    r = np.asarray(residuals, dtype=float)
    d = np.asarray(day)
    b = np.zeros(r.size, dtype=np.int64) if bands is None else np.asarray(bands)
    a = float(alpha)
    for e in sorted(set(d.tolist()), reverse=True)[1:]:
        older, cur = d > e, d == e
        pooled = conformal_quantile(r[older], 1 - a)
        q = np.array([conformal_quantile(r[older & (b == k)], 1 - a) if (older & (b == k)).sum() >= min_band
                      else pooled for k in range(n_bands)])
        miss = int((r[cur] > q[b[cur]]).sum())
        a += gamma * (alpha * int(cur.sum()) - miss)
    return a


def lad_fit(x: np.ndarray, z: np.ndarray, iterations: int = 30) -> np.ndarray:
    """Least-absolute-deviations coefficients: ``b`` minimising ``sum_i |z_i - x_i b|`` (no intercept).

    Iteratively reweighted least squares (Schlossmacher, "An iterative technique for absolute deviations curve
    fitting", JASA 68, 1973): from the least-squares fit, weighted least squares (normal equations) with weights
    ``1 / max(|r_i|, eps)`` (``eps`` = 1e-6 x the mean ``|z|``), at most ``iterations`` times and until the
    sum of absolute residuals improves by less than 1e-6 of itself; the coefficients with the lowest sum seen
    are kept, then replaced by the exact fit through the ``k``
    points nearest them when that is no worse (an L1 fit passes through ``k`` points: a vertex of its linear
    programme). Rank-deficient designs (a feature that is always 0) get the least-squares solution of the
    singular normal equations (``numpy.linalg.lstsq``).

    Args:
        x: design, shape ``(n, k)`` (``k`` may be 0: an empty result).
        z: targets, shape ``(n,)``.
        iterations: reweighting steps at most (30).

    Returns:
        Coefficients, shape ``(k,)``.
    """
    x = np.asarray(x, dtype=float)
    z = np.asarray(z, dtype=float)
    if x.shape[1] == 0 or z.size == 0:
        return np.zeros(x.shape[1])
    b = np.linalg.lstsq(x, z, rcond=None)[0]
    best, best_obj = b, float(np.abs(z - x @ b).sum())
    eps = 1e-6 * (float(np.abs(z).mean()) + 1e-300)
    for _ in range(iterations):
        xw = x.T / np.maximum(np.abs(z - x @ b), eps)
        a = xw @ x
        try:
            b = np.linalg.solve(a, xw @ z)
        except np.linalg.LinAlgError:
            b = np.linalg.lstsq(a, xw @ z, rcond=None)[0]
        obj = float(np.abs(z - x @ b).sum())
        if obj < best_obj:
            done = obj > best_obj * (1 - 1e-6)
            best, best_obj = b, obj
            if done:
                break
        else:
            break
    # polish: an L1 fit passes through k of the points (a vertex of the linear programme); the k points
    # nearest the IRLS fit, solved exactly, replace it when they are no worse
    k = x.shape[1]
    near = np.argsort(np.abs(z - x @ best), kind="stable")[:k]
    if near.size == k and abs(np.linalg.det(x[near])) > 1e-12 * max(float(np.abs(x[near]).max()) ** k, 1e-300):
        exact = np.linalg.solve(x[near], z[near])
        if float(np.abs(z - x @ exact).sum()) <= best_obj:
            best = exact
    return best


def hourly_features(day_ahead: np.ndarray, anchor_value: np.ndarray | float, ref_t: np.ndarray,
                    ref_a: np.ndarray | float, last_change: np.ndarray | float) -> np.ndarray:
    """The :data:`HOURLY_FEATURES` of target hours from their anchors; shape ``(n, 3)``.

    ``gap_day_ahead = C(t) - y_a`` (``day_ahead`` = ``C``), ``seasonal_change = r(t) - r(a)`` (0 where either
    reference is NaN), ``last_change`` as given. All in series units per hour; inputs broadcast to ``(n,)``.
    """
    c, ya = np.asarray(day_ahead, dtype=float), np.asarray(anchor_value, dtype=float)
    rt, ra = np.asarray(ref_t, dtype=float), np.asarray(ref_a, dtype=float)
    seas = np.where(np.isfinite(rt) & np.isfinite(ra), rt - ra, 0.0)
    gap = c - ya
    n = np.broadcast(gap, seas, np.asarray(last_change)).shape
    return np.column_stack([np.broadcast_to(gap, n), np.broadcast_to(seas, n),
                            np.broadcast_to(np.asarray(last_change, dtype=float), n)])


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
    series = check_hourly_series(series)
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
    read_flagged = _flags_are_steps(y, obs, flagged, use)
    anchorable = _plausible(y, obs, np.zeros(n, dtype=bool), z, window, s.range_multiple) if read_flagged else use
    bounds = _range(y, use, s)
    rule = _anchor_rule(z, use, n - window, n, bounds)
    last_obs = int(np.flatnonzero(obs)[-1]) if obs.any() else None
    ref_hist = np.concatenate([np.full(max(HOURS_PER_WEEK - n, 0), np.nan), ref[max(n - HOURS_PER_WEEK, 0):n]])
    last: dict[str, Any] = {"anchor_rule": rule, "bounds": bounds, "last_ts": None if last_obs is None else series.index[last_obs],
            "last_value": None if last_obs is None else float(y[last_obs]),
            "last_z": float("nan") if last_obs is None else float(z[last_obs]), "hour_ref": ref[n:],
            "ref_hist": ref_hist, "read_flagged": read_flagged}
    anchor = int(np.flatnonzero(anchorable)[-1]) if anchorable.any() else None
    last.update({"anchor_ts": None if anchor is None else series.index[anchor],
                 "anchor_value": None if anchor is None else float(y[anchor]),
                 "anchor_z": float("nan") if anchor is None else float(z[anchor]),
                 "anchor_change": _last_change(y, anchorable, anchor)})
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

    hm, coef, hweights, h_pred, h_act, hscores = _choose_hourly(rows, w, y, anchorable, ref, s)

    # P90: split-conformal on the residuals of the forecast as issued at each inner origin (the combination
    # with the hourly model at the last anchorable hour before it, its correction decaying with rho), at the
    # level the adaptive update (ACI) replayed over those days leaves
    before = _last_usable_before(anchorable)
    issued = []
    for o, t, m, _ in rows:
        a0 = int(before[o])
        c = w @ m
        if a0 < 0:
            issued.append(c)
            continue
        k = (t - a0).astype(float)
        issued.append(_anchored(c, k, float(y[a0]), _last_change(y, anchorable, a0), ref[t], float(ref[a0]),
                                coef, rho))
    p50_bt = np.concatenate(issued)
    kind = "ratio" if (p50_bt > 0).all() and (h_pred > 0).all() else "additive"
    resid = act / p50_bt if kind == "ratio" else act - p50_bt
    band = _bands(tgt_idx, timezone, s.hour_bands)
    day_of = np.concatenate([np.full(t.size, r) for r, (_, t, _, _) in enumerate(rows)])
    alpha0 = 1.0 - s.p90_quantile
    alpha = aci_alpha(resid, day_of, alpha0, s.aci_gamma, band, s.hour_bands, s.min_band_residuals)
    if s.aci_widen_only:
        alpha = min(alpha, alpha0)
    pooled = conformal_quantile(resid, 1.0 - alpha)
    q_bands = np.array([conformal_quantile(resid[band == b], 1.0 - alpha)
                        if (band == b).sum() >= s.min_band_residuals else pooled for b in range(s.hour_bands)])
    h_resid = h_act / h_pred if kind == "ratio" else h_act - h_pred
    hq = conformal_quantile(h_resid, 1.0 - alpha) if h_resid.size else (1.0 if kind == "ratio" else 0.0)
    hdesc = "persistence" if hm == "persistence" else (
        "combination (" + ", ".join(f"{m} {v:.2f}" for m, v in hweights.items()) + "): y_a + "
        + " + ".join(f"{b:.3f} x {f}" for f, b in zip(HOURLY_FEATURES, coef)))
    method = (f"combination of {', '.join(names)} by {RULE.split(';')[0]} "
              f"({', '.join(f'{c} {weights[c]:.2f}' for c in names)}); P90 split-conformal ({kind}, level "
              f"{1 - alpha:.3f} after ACI); hourly: {hdesc}; profile: {final.profile.method}")
    comb = Combined(method=method, status=status, messages=tuple(messages),
                    components=tuple(final.profile.components) + ("combination",), timezone=timezone,
                    origin=final.origin, fit=final, weights=weights, scores=scores, n_scored_h=int(act.size),
                    n_inner_origins=len(rows), p90_kind=kind, p90_bands=q_bands, p90_alpha=float(alpha),
                    hourly_model=hm, hourly_coef=coef, hourly_weights=hweights, rho=rho, hourly_q90=hq, hourly_scores=hscores, settings=s,
                    calibration={"ts": tgt_idx, "actual": act, "p50": p50_bt, "day": day_of}, **last)
    return _guard_status(comb)


def _range(y: np.ndarray, use: np.ndarray, s: CombineSettings) -> tuple[float, float]:
    v = y[use] if use.any() else y
    return float(v.min()) / s.range_multiple, float(v.max()) * s.range_multiple


def _last_change(y: np.ndarray, anchorable: np.ndarray, a: int | None) -> float:
    """``y_a - y_{a-1}`` when both hours anchor, else 0."""
    if a is None or a < 1 or not anchorable[a - 1]:
        return 0.0
    return float(y[a] - y[a - 1])


def _flags_are_steps(y: np.ndarray, obs: np.ndarray, flagged: np.ndarray, use: np.ndarray) -> bool:
    """Whether this history's flagged hours were the first hours of new levels rather than spikes.

    Over every flagged observed hour ``t`` whose next hour is observed: the absolute error of persisting
    ``t`` (``|y_{t+1} - y_t|``) against that of persisting the last read hour before ``t``
    (``|y_{t+1} - y_b|``, :func:`_plausible`); True when the first sum is lower (no flagged hour: False).
    On the Philly series the cluster's real steps are flagged (24 hours: 385 against 2113 node-hours); on
    ServeGen m-small the one flagged hour is a spike.
    """
    cand = np.flatnonzero(flagged[:-1] & obs[1:])
    if cand.size == 0:
        return False
    before = _last_usable_before(use)
    b = before[cand]
    ok = b >= 0
    cand, b = cand[ok], b[ok]
    if cand.size == 0:
        return False
    read = float(np.abs(y[cand + 1] - y[cand]).sum())
    skip = float(np.abs(y[cand + 1] - y[b]).sum())
    return read < skip


def _choose_hourly(rows, w: np.ndarray, y: np.ndarray, anchorable: np.ndarray, ref: np.ndarray,
                   s: CombineSettings) -> tuple[str, np.ndarray, dict[str, float], np.ndarray, np.ndarray,
                                                dict[str, float]]:
    """The hourly mode: the inverse-MAE combination of the hourly models, or persistence (module docstring).

    Each model of ``s.hourly_models`` (persistence always among them) is scored leave-one-day-out on the
    inner days (LAD coefficients from the other days, :func:`lad_fit`); the combination's weights are
    ``(1 / MAE_m) / sum (1 / MAE)`` of those scores (a model with MAE 0 takes all the weight, shared), its
    coefficients the weighted sum of each model's coefficients fitted on every day; it replaces persistence
    only when its own leave-one-day-out MAE is lower by more than ``s.hourly_se_rule`` standard errors of the
    per-day difference.

    Returns ``(kind "combination" or "persistence", coefficients on HOURLY_FEATURES (shape (3,)), model
    weights, the kind's out-of-day one-hour predictions and the actuals they forecast (shapes (m,)),
    scores)``; scores: leave-one-day-out MAE of ``hourly`` (the kind), ``persistence``, ``combination``, each
    model, and ``day_ahead`` (the combination of candidates alone).
    """
    before = _last_usable_before(anchorable)
    days = []  # (anchor values, features, targets y_t, day-ahead C)
    for _, t, m, _ in rows:
        a = before[t]
        has = a >= 0
        t, a, c = t[has], a[has], (w @ m)[has]
        if t.size == 0:
            continue
        last = np.where(a >= 1, y[a] - y[np.maximum(a - 1, 0)], 0.0) * anchorable[np.maximum(a - 1, 0)]
        days.append((y[a], hourly_features(c, y[a], ref[t], ref[a], last), y[t], c))
    models = [mname for mname in s.hourly_models if mname in HOURLY_MODELS and mname != "persistence"]
    models = ["persistence", *models]
    zero = np.zeros(len(HOURLY_FEATURES))
    pers_only = {"persistence": 1.0}
    if len(days) < 2:  # nothing to validate on: persistence
        return ("persistence", zero, pers_only, np.concatenate([dd[0] for dd in days]) if days else np.zeros(0),
                np.concatenate([dd[2] for dd in days]) if days else np.zeros(0), {})
    per_day = np.zeros((len(days), len(models)))
    oof: list[list[np.ndarray]] = [[] for _ in models]
    coefs = np.zeros((len(models), len(HOURLY_FEATURES)))
    z_all = np.concatenate([dd[2] - dd[0] for dd in days])
    for mi, mname in enumerate(models):
        cols = [HOURLY_FEATURES.index(f) for f in HOURLY_MODELS[mname]]
        if cols:
            coefs[mi, cols] = lad_fit(np.vstack([dd[1][:, cols] for dd in days]), z_all)
        for d, (ya, x, yt, _) in enumerate(days):
            if cols:
                xo = np.vstack([dd[1][:, cols] for j, dd in enumerate(days) if j != d])
                zo = np.concatenate([dd[2] - dd[0] for j, dd in enumerate(days) if j != d])
                pred = ya + x[:, cols] @ lad_fit(xo, zo)
            else:
                pred = ya
            oof[mi].append(pred)
            per_day[d, mi] = np.abs(yt - pred).mean()
    counts = np.array([dd[2].size for dd in days], dtype=float)
    total = (per_day * counts[:, None]).sum(axis=0) / counts.sum()
    wm = (total == 0).astype(float) if (total == 0).any() else 1.0 / total
    wm = wm / wm.sum()
    comb_oof = [sum(wm[mi] * oof[mi][d] for mi in range(len(models))) for d in range(len(days))]
    comb_day = np.array([np.abs(dd[2] - comb_oof[d]).mean() for d, dd in enumerate(days)])
    comb_total = float((comb_day * counts).sum() / counts.sum())
    diff = comb_day - per_day[:, 0]
    se = float(np.std(diff, ddof=1) / np.sqrt(diff.size))
    use_comb = -float(np.mean(diff)) > s.hourly_se_rule * se
    act = np.concatenate([dd[2] for dd in days])
    day_mae = float(np.abs(act - np.concatenate([dd[3] for dd in days])).mean())
    scores = {"hourly": comb_total if use_comb else float(total[0]), "persistence": float(total[0]),
              "combination": comb_total, "day_ahead": day_mae,
              **{mname: float(total[mi]) for mi, mname in enumerate(models) if mname != "persistence"}}
    if not use_comb:
        return "persistence", zero, pers_only, np.concatenate(oof[0]), act, scores
    return ("combination", wm @ coefs, {mname: float(wm[mi]) for mi, mname in enumerate(models)},
            np.concatenate(comb_oof), act, scores)


def _profile_only(series, use, timezone, final: OriginFit, s: CombineSettings, messages, status,
                  last: dict) -> Combined:
    """Too short for one scored inner origin: the recalibrated profile alone (its own P90)."""
    messages = messages + [f"history too short for the combination backtest (needs {s.min_history_h} h before "
                           f"an origin {s.horizon_h} h before the end): the weekly profile alone"]
    comb = Combined(method=final.profile.method + " (alone: no backtest)", status="degraded",
                    messages=tuple(messages), components=tuple(final.profile.components), timezone=timezone,
                    origin=final.origin, fit=final, weights={"profile": 1.0}, scores={}, n_scored_h=0,
                    n_inner_origins=0, p90_kind="profile", p90_bands=np.zeros(s.hour_bands),
                    p90_alpha=1.0 - s.p90_quantile, hourly_model="none", hourly_coef=np.zeros(len(HOURLY_FEATURES)),
                    hourly_weights={}, rho=0.0, hourly_q90=0.0, hourly_scores={}, settings=s, **last)
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


def _anchored(day: np.ndarray, k: np.ndarray, anchor_value: float, anchor_change: float, ref_t: np.ndarray,
              ref_a: float, coef: np.ndarray, rho: float) -> np.ndarray:
    """P50 with the hourly model: ``C(t) + rho ** (k - 1) (H(t) - C(t))`` at ``k >= 1`` hours after the anchor.

    ``H(t) = y_a + x(t) coef`` (:func:`hourly_features`); ``day`` = ``C``; ``k < 1``: ``C``. Shapes ``(n,)``.
    """
    x = hourly_features(day, anchor_value, ref_t, ref_a, anchor_change)
    h1 = anchor_value + x @ coef
    wk = np.where(k >= 1, rho ** np.maximum(k - 1, 0), 0.0)
    return day + wk * (h1 - day)


def _ref_at(comb: Combined, idx: pd.DatetimeIndex) -> np.ndarray:
    """The same-hour reference ``r`` at UTC hours ``idx``; shape ``(len(idx),)``.

    ``ref_hist`` before the origin (NaN further back), ``hour_ref`` for the next 24 h and, beyond, ``hour_ref``
    repeated daily (the 7-day same-hour mean).
    """
    h = np.round(((idx - comb.origin) / pd.Timedelta(hours=1)).to_numpy()).astype(np.int64)
    out = np.full(len(h), np.nan)
    fut = h >= 0
    out[fut] = comb.hour_ref[h[fut] % HOURS_PER_DAY]
    past = ~fut & (h >= -len(comb.ref_hist))
    out[past] = comb.ref_hist[len(comb.ref_hist) + h[past]]
    return out


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
    if comb.anchor_ts is not None:
        k = ((idx - comb.anchor_ts) / pd.Timedelta(hours=1)).to_numpy()
        ref_a = float(_ref_at(comb, pd.DatetimeIndex([comb.anchor_ts]))[0])
        p50 = _anchored(p50, k, float(comb.anchor_value or 0.0), comb.anchor_change, _ref_at(comb, idx), ref_a,
                        comb.hourly_coef, comb.rho)
        q = np.where(k == 1, comb.hourly_q90, q)
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
            judge does not anchor. With ``comb.read_flagged`` the flags are ignored (the rule judges every
            hour as unflagged: an hour outside the range guard's bounds with an unusual change still does not
            anchor).

    Returns:
        A new :class:`Combined` (the day-ahead P50/P90 and the choices unchanged; ``anchor_change`` the new
        anchor's change from the hour before when that hour anchored too, else 0); the input unchanged when
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
    if comb.read_flagged:
        flagged[:] = False
    ts: pd.Timestamp | None = comb.anchor_ts
    val: float | None = comb.anchor_value
    za, change = comb.anchor_z, comb.anchor_change
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
            follows = ts is not None and val is not None and t - ts == pd.Timedelta(hours=1)
            change = float(v) - float(val) if follows and val is not None else 0.0
            ts, val, za = t, float(v), float(z[i])
    if ts == comb.anchor_ts:
        return comb
    return dataclasses.replace(comb, anchor_ts=ts, anchor_value=val, anchor_z=za, anchor_change=change)
