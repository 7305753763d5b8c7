"""Weekly seasonal traffic profile: OLS on trend + Fourier(24 h) + Fourier(168 h) (DESIGN §4.4).

This module holds the fitted :class:`Profile`, its regression terms and its forecast (:func:`forecast`,
:func:`fitted`, :func:`recalibrate`); the fit is :func:`forecasters.realtime.profile_fit.fit_profile`.

Method (chosen from the measurements in STACK.md: fastest and most accurate of the statsmodels options,
and unlike MSTL it keeps the weekly component with one full week of history):

    z_t = b0 + b1 * trend_t + sum_k daily_k(t) + sum_k weekly_k(t) + e_t,    fitted by statsmodels OLS

* ``z = log(traffic)`` when every fitted value is > 0, else ``z = traffic`` (no log of zero, C06).
* The seasonal regressors are evaluated on the service's LOCAL wall clock (IANA zone): daily terms on the
  local hour of day, weekly terms on the local hour of week (Monday 00:00 = 0). A 09:00 local peak stays
  at 09:00 across a clock change (C08); timestamps are stored and forecast in UTC.
* Daily harmonics k = 1..``daily_order`` of period 24 h; weekly harmonics k = 1..``weekly_order`` of period
  168 h except multiples of 7 (those are daily harmonics already; keeping both would be collinear).
  The terms are built here rather than with statsmodels' ``DeterministicProcess``/``Fourier``, whose
  terms follow the position in the index (a UTC step count), which drifts by an hour at each clock
  change (C08). The orders are chosen by BIC among ``order_candidates`` (default (4, 10) of STACK.md,
  up to (12, 84), which spans every hour-of-week shape, e.g. a one-hour 09:00 peak).
* The trend is linear in UTC hours (scaled to weeks).
* P50 = inverse transform of the regression prediction; P90 adds the 0.9 quantile of out-of-sample
  24 h-ahead errors collected on rolling origins inside the history (each of the last
  ``calib_origins`` days forecast from the history before it, by the same method), so the band reflects
  day-ahead error, not the smaller in-sample residuals.
* Recalibration (:func:`recalibrate`, every planning run): a level factor = actual / P50 over the last
  hour(s), decaying ahead as an AR(1) of the fit residuals (``phi_``); the P90 offset then runs from the
  calibrated one-hour-ahead value back to the day-ahead value. Refit (nightly) on a trailing window
  (``trailing_window_h``, 4 weeks).
* History rule (C03): the weekly component needs more than two weekly periods (``min_weekly_points`` =
  337 hourly points) for status ``"ok"``. With 168..336 points the weekly terms are still fitted (the
  regression is identified from one full week) but the profile is ``"degraded"`` with the message
  "weekly seasonality needs more than 336 hourly points; got N". Below 168 points the weekly component
  cannot be estimated at all: status ``"degraded"``, components without ``weekly_168h``, and a message
  saying so (or an error with ``on_short_history="error"``). Never a silent loss.
* Weekday coverage (field fault "masked weekday"): the weekly terms describe each local weekday only
  through the hours of that weekday in the fitted window; a weekday with fewer than
  ``min_weekday_h`` (12) usable hours there (e.g. the only week of history has that day masked) would be
  extrapolated by the weekly harmonics (measured: a masked Sunday forecast 1.8x its true level). Then
  the weekly component is not estimated (daily profile only), the status is ``"degraded"`` and a message
  names the weekday(s).
* statsmodels warnings raised during a fit are recorded as messages and make the status ``"degraded"``.
* Level shift (field case F09): before the fit, :func:`forecasters.realtime.shift.detect_level_shift` (the
  same rule ingest uses) tests the end of the history for a lasting new level. When one is found, the
  regression gets a step term ``1[t >= since]`` (a level-shift intervention: the step's coefficient is
  the new level, estimated from the hours since the change only, while the daily/weekly shape is fitted
  on the whole history) and forecasts carry it. The status is ``"level_shift"`` (unless already
  ``"degraded"``) and a message gives the factor and the start. Too few usable hours on either side of
  the change to estimate the step: status ``"degraded"`` and a message (never the old level silently).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.realtime.shift import LevelShift, ShiftSettings

HOURS_PER_WEEK = 168
HOURS_PER_DAY = 24


@dataclass(frozen=True)
class ProfileSettings:
    """Settings of :func:`forecasters.realtime.profile_fit.fit_profile` (defaults documented in the module docstring).

    Attributes:
        daily_order: Fourier harmonics of the 24 h period (4, STACK.md); the fallback order.
        weekly_order: Fourier harmonics of the 168 h period (10, STACK.md; multiples of 7 skipped).
        order_candidates: (daily, weekly) order pairs compared by BIC on the history; the pair with the
            lowest BIC among those with at most ``max_params_share`` × usable points parameters is used.
            (12, 84) spans every hour-of-week pattern (sharp one-hour peaks, C08); (4, 10) is the smooth
            STACK.md default. Empty tuple: always use ``daily_order``/``weekly_order``.
        max_params_share: cap on parameters per usable point for a candidate (1/3).
        trend: include a linear trend.
        transform: ``"auto"`` (log when all values > 0), ``"log"`` or ``"none"``.
        min_weekly_points: points needed for status ``"ok"`` (337 = more than two weeks, C03).
        min_points: fewer hourly points are refused (48).
        p90_quantile: quantile of the day-ahead errors used for the upper band (0.9).
        calib_origins: number of inner rolling origins (days) used to calibrate the band (7).
        trailing_window_h: refit on at most this many most recent hours (672 = 4 weeks); None = all.
        on_short_history: ``"degraded"`` or ``"error"`` below ``min_weekly_points``.
        level_shift: settings of the level-shift test (module docstring), or None to skip it.
        min_shift_fit_h: usable hours at the new level needed to estimate the step term (24).
        min_weekday_h: usable hours each local weekday needs in the fitted window for the weekly terms
            (12, half a day; module docstring).
    """

    daily_order: int = 4
    weekly_order: int = 10
    order_candidates: tuple[tuple[int, int], ...] = ((4, 10), (12, 10), (12, 20), (12, 84))
    max_params_share: float = 1 / 3
    trend: bool = True
    transform: str = "auto"
    min_weekly_points: int = 2 * HOURS_PER_WEEK + 1
    min_points: int = 2 * HOURS_PER_DAY
    p90_quantile: float = 0.9
    calib_origins: int = 7
    trailing_window_h: int | None = 4 * HOURS_PER_WEEK
    on_short_history: str = "degraded"
    level_shift: ShiftSettings | None = ShiftSettings()
    min_shift_fit_h: int = HOURS_PER_DAY
    min_weekday_h: int = HOURS_PER_DAY // 2


@dataclass(frozen=True)
class Profile:
    """A fitted profile. Values are in the series' units per hour; times are UTC.

    Attributes:
        method: human-readable method name.
        status: ``"ok"``, ``"level_shift"`` (a new level detected and followed) or ``"degraded"`` (see
            ``messages``).
        messages: reasons for a degraded status and other notes.
        components: e.g. ``("level", "trend", "daily_24h", "weekly_168h")`` or ``("constant",)``.
        timezone: IANA zone of the local clock the seasonality is on.
        transform: ``"log"`` or ``"none"``.
        params_: regression coefficients (shape ``(p,)``; empty for a constant profile).
        t0_: UTC hour of the first history point (trend origin).
        end_: UTC hour of the last history point.
        n_points: hourly points in the fitted span.
        q90_: P90 offset on the transformed scale (>= 0).
        constant_value: the value of a constant series, else None.
        level_factor: multiplicative level correction at ``anchor_`` from :func:`recalibrate` (1.0 = none).
        anchor_: UTC hour of the last actual used by :func:`recalibrate` (None = not recalibrated).
        phi_: lag-1 autocorrelation of the fit residuals (transformed scale), clipped to [0, 0.99]: the
            AR(1) decay of a level correction, ``factor(h) = level_factor ** (phi_ ** h)`` h hours after
            ``anchor_``.
        q90_1h_: P90 offset (transformed scale) of one-hour-ahead forecasts after recalibration,
            calibrated on the same inner rolling origins as ``q90_``.
        weekly: whether the weekly terms are in the model.
        settings: the :class:`ProfileSettings` used.
        shift: the level shift detected at the end of the history (None = none).
        shift_since_: start of the step term in the regression (None = no step term).
    """

    method: str
    status: str
    messages: tuple[str, ...]
    components: tuple[str, ...]
    timezone: str
    transform: str
    params_: np.ndarray
    t0_: pd.Timestamp
    end_: pd.Timestamp
    n_points: int
    q90_: float
    constant_value: float | None
    weekly: bool
    settings: ProfileSettings = field(default_factory=ProfileSettings)
    level_factor: float = 1.0
    anchor_: pd.Timestamp | None = None
    phi_: float = 0.0
    q90_1h_: float = 0.0
    shift: LevelShift | None = None
    shift_since_: pd.Timestamp | None = None

    @property
    def constant(self) -> bool:
        """True when the history was constant (the profile is that value exactly)."""
        return self.constant_value is not None


def local_hours(ts_utc: pd.DatetimeIndex, timezone: str) -> tuple[np.ndarray, np.ndarray]:
    """Local hour of day (0..24) and hour of week (0..168, Monday 00:00 = 0) on the wall clock."""
    local = ts_utc.tz_convert(timezone)
    hod = local.hour.to_numpy() + local.minute.to_numpy() / 60.0
    how = local.day_of_week.to_numpy() * 24 + hod
    return hod, how


def design(hod: np.ndarray, how: np.ndarray, t_weeks: np.ndarray, s: ProfileSettings, weekly: bool) -> np.ndarray:
    """Regressors (n, p): constant, [trend], daily sin/cos k, [weekly sin/cos k, k not multiple of 7]."""
    cols = [np.ones_like(hod)]
    if s.trend:
        cols.append(t_weeks)
    for k in range(1, s.daily_order + 1):
        a = 2 * np.pi * k * hod / HOURS_PER_DAY
        cols += [np.cos(a)] if 2 * k == HOURS_PER_DAY else [np.sin(a), np.cos(a)]
    if weekly:
        for k in range(1, s.weekly_order + 1):
            if k % 7 == 0:
                continue
            a = 2 * np.pi * k * how / HOURS_PER_WEEK
            cols += [np.cos(a)] if 2 * k == HOURS_PER_WEEK else [np.sin(a), np.cos(a)]
    return np.column_stack(cols)


def features(idx: pd.DatetimeIndex, timezone: str, t0: pd.Timestamp, s: ProfileSettings, weekly: bool,
              shift_since: pd.Timestamp | None = None):
    """:func:`design` at UTC stamps ``idx``, plus the step column ``1[t >= shift_since]`` (last) when given."""
    hod, how = local_hours(idx, timezone)
    t_weeks = ((idx - t0) / pd.Timedelta(hours=1)).to_numpy(dtype=float) / HOURS_PER_WEEK
    X = design(hod, how, t_weeks, s, weekly)
    if shift_since is None:
        return X
    return np.column_stack([X, (idx >= shift_since).astype(float)])


def n_cols(s: ProfileSettings, weekly: bool) -> int:
    """Number of columns of :func:`design` (without the step column)."""
    n = 1 + (1 if s.trend else 0) + sum(1 if 2 * k == HOURS_PER_DAY else 2 for k in range(1, s.daily_order + 1))
    if weekly:
        n += sum(1 if 2 * k == HOURS_PER_WEEK else 2 for k in range(1, s.weekly_order + 1) if k % 7 != 0)
    return n


def check_hourly_series(series: pd.Series) -> pd.Series:
    """The series as floats on its UTC index, checked: tz-aware, a regular hourly grid, finite, >= 0.

    Raises:
        forecasters.errors.InputError: naming the first bad timestamp (ingest first: it imputes and regrids).
    """
    if not isinstance(series.index, pd.DatetimeIndex) or series.index.tz is None:
        raise InputError("series: index must be tz-aware hourly timestamps (use forecasters.realtime.ingest)")
    idx = series.index.tz_convert("UTC")
    if len(idx) > 1 and not (idx[1:] - idx[:-1] == pd.Timedelta(hours=1)).all():
        raise InputError("series: index must be a regular hourly grid (use forecasters.realtime.ingest)")
    vals = series.to_numpy(dtype=float)
    if not np.isfinite(vals).all():
        i = int(np.flatnonzero(~np.isfinite(vals))[0])
        raise InputError(f"series: value at {idx[i].isoformat()} is NaN/inf; impute first (ingest does)")
    if (vals < 0).any():
        i = int(np.flatnonzero(vals < 0)[0])
        raise InputError(f"series: value at {idx[i].isoformat()} is negative")
    return pd.Series(vals, index=idx)


def _base(profile: Profile, idx: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    """P50 and P90 at UTC stamps ``idx`` without any level correction."""
    if profile.constant_value is not None:  # a constant profile
        v = np.full(len(idx), float(profile.constant_value))
        return v, v.copy()
    X = features(idx, profile.timezone, profile.t0_, profile.settings, profile.weekly, profile.shift_since_)
    zhat = X @ profile.params_
    if profile.transform == "log":
        return np.exp(zhat), np.exp(zhat + profile.q90_)
    p50 = np.maximum(zhat, 0.0)
    return p50, np.maximum(zhat + profile.q90_, p50)


def _corrected(profile: Profile, idx: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    """P50/P90 with the level correction.

    The factor is ``level_factor ** (phi ** h)`` at ``h`` hours after the anchor (full factor at or
    before it); the P90 offset is the rolling-origin calibrated one-hour-ahead offset at h = 1 and
    relaxes to the day-ahead offset as the correction decays.
    """
    p50, p90 = _base(profile, idx)
    if profile.anchor_ is None or profile.constant:
        return p50 * profile.level_factor, p90 * profile.level_factor
    h = np.maximum(((idx - profile.anchor_) / pd.Timedelta(hours=1)).to_numpy(dtype=float), 0.0)
    decay = profile.phi_ ** h
    p50c = p50 * profile.level_factor ** decay
    # P90 offset: the calibrated one-hour-ahead value at h = 1, relaxing to the day-ahead value as the
    # correction decays: q(h) = q90 - (q90 - q90_1h) * phi ** (h - 1).
    q = profile.q90_ - (profile.q90_ - profile.q90_1h_) * profile.phi_ ** np.maximum(h - 1.0, 0.0)
    q = np.where(h == 0, 0.0, np.maximum(q, 0.0))
    if profile.transform == "log":
        p90c = p50c * np.exp(q)
    else:
        p90c = p50c + q
    return p50c, np.maximum(p90c, p50c)


def forecast(profile: Profile, horizon_h: int, start=None) -> pd.DataFrame:
    """Forecast P50/P90 traffic per hour.

    Args:
        profile: from :func:`forecasters.realtime.profile_fit.fit_profile` (optionally :func:`recalibrate`-d).
        horizon_h: number of hours (>= 1).
        start: first UTC hour; default the first hour after the history (``profile.end_ + 1 h``).

    Returns:
        Frame with ``horizon_h`` rows: ``ts`` (tz UTC, consecutive hours), ``p50``, ``p90`` (traffic per
        hour, >= 0, ``p90 >= p50``), with the level correction of :func:`recalibrate` applied.

    Raises:
        forecasters.errors.InputError: ``horizon_h < 1`` or a naive ``start``.
    """
    if int(horizon_h) < 1:
        raise InputError(f"horizon_h must be >= 1; got {horizon_h}")
    if start is None:
        start = profile.end_ + pd.Timedelta(hours=1)
    start = pd.Timestamp(start)
    if start.tzinfo is None:
        raise InputError(f"forecast start {start} has no time zone; give a UTC timestamp")
    idx = pd.date_range(start.tz_convert("UTC").floor("h"), periods=int(horizon_h), freq="h")
    p50, p90 = _corrected(profile, idx)
    return pd.DataFrame({"ts": idx, "p50": p50, "p90": p90})


def fitted(profile: Profile, idx: pd.DatetimeIndex) -> np.ndarray:
    """P50 of the profile at arbitrary UTC stamps (with any level correction); shape ``(len(idx),)``."""
    return _corrected(profile, pd.DatetimeIndex(idx).tz_convert("UTC"))[0]


def recalibrate(
    profile: Profile,
    recent_actuals: pd.Series,
    window_h: int = 1,
    bounds: tuple[float, float] = (0.5, 2.0),
) -> Profile:
    """Level correction from the most recent actual hours (DESIGN §4.4: run at every planning run).

    ``level_factor = sum(actual) / sum(profile P50)`` over the last ``window_h`` non-NaN hours of
    ``recent_actuals`` (UTC-indexed, traffic per hour), clipped to ``bounds``; the anchor is the last of
    those hours. Ahead of the anchor the correction decays as an AR(1) of the fit residuals:
    ``level_factor ** (phi_ ** h)`` at ``h`` hours (so a surprise hour moves the next hours, not next
    week). The default window is 1 h, the AR(1) one-step predictor. It replaces (does not compound) any
    earlier correction. A zero expected sum (e.g. an all-zero profile) leaves the factor at 1.

    Returns:
        A new :class:`Profile` (the input is not modified).

    Raises:
        forecasters.errors.InputError: ``recent_actuals`` without a tz-aware index or with negatives.
    """
    if not isinstance(recent_actuals.index, pd.DatetimeIndex) or recent_actuals.index.tz is None:
        raise InputError("recent_actuals: index must be tz-aware UTC hours")
    r = recent_actuals.dropna().astype(float).sort_index().iloc[-window_h:]
    if (r < 0).any():
        raise InputError("recent_actuals: negative traffic")
    if r.empty:
        return profile
    expected = _base(profile, r.index.tz_convert("UTC"))[0]
    denom = float(expected.sum())
    if denom <= 0:
        return dataclasses.replace(profile, level_factor=1.0, anchor_=None)
    factor = float(np.clip(r.sum() / denom, bounds[0], bounds[1]))
    return dataclasses.replace(profile, level_factor=factor, anchor_=r.index[-1].tz_convert("UTC"))


def hour_of_week_profile(profile: Profile) -> np.ndarray:
    """P50 per local hour of week, shape ``(168,)``, index 0 = Monday 00:00 local.

    At the trend level (and level-shift step) of the last history hour, times the level factor. A constant profile
    returns that constant exactly.
    """
    if profile.constant_value is not None:  # a constant profile
        return np.full(HOURS_PER_WEEK, float(profile.constant_value)) * profile.level_factor
    how = np.arange(HOURS_PER_WEEK, dtype=float)
    hod = how % HOURS_PER_DAY
    t_weeks = np.full(HOURS_PER_WEEK, (profile.end_ - profile.t0_) / pd.Timedelta(hours=1) / HOURS_PER_WEEK)
    X = design(hod, how, t_weeks, profile.settings, profile.weekly)
    if profile.shift_since_ is not None:  # the end of the history is at the new level
        X = np.column_stack([X, np.ones(HOURS_PER_WEEK)])
    zhat = X @ profile.params_
    p50 = np.exp(zhat) if profile.transform == "log" else np.maximum(zhat, 0.0)
    return p50 * profile.level_factor
