"""Fitting the weekly seasonal profile: :func:`fit_profile` (the method: :mod:`forecasters.realtime.profile`).

The orders by BIC, the weekday coverage and short-history rules, the level-shift step term, the
rolling-origin P90 calibration; statsmodels OLS for the fit. Pure (no file IO).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.realtime.profile import (
    HOURS_PER_DAY,
    HOURS_PER_WEEK,
    Profile,
    ProfileSettings,
    check_hourly_series,
    features,
    local_hours,
    n_cols,
)
from forecasters.realtime.shift import LevelShift, detect_level_shift

try:  # optional: installed with scikit-learn; without it BLAS keeps its default thread count
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None


def fit_profile(
    series: pd.Series,
    timezone: str = "UTC",
    exclude=None,
    settings: ProfileSettings | None = None,
) -> Profile:
    """Fit the weekly seasonal profile to an hourly UTC series.

    Args:
        series: traffic per hour (>= 0, no NaN), tz-aware regular hourly index (from :func:`ingest`).
        timezone: IANA zone of the service's local clock (seasonality), default ``"UTC"``.
        exclude: timestamps (iterable of ISO strings or Timestamps) kept out of the fit, e.g. the
            ``imputed`` hours and ``outliers`` of the ingest diagnostics.
        settings: :class:`ProfileSettings`.

    Returns:
        :class:`Profile` with status ``"ok"`` or ``"degraded"`` (see the module docstring).

    Raises:
        forecasters.errors.InputError: bad index/values, fewer than ``min_points`` points, unknown zone,
            rank-deficient regressors, or a short history with ``on_short_history="error"``.
    """
    with _one_blas_thread():
        return _fit_profile(series, timezone, exclude, settings or ProfileSettings())


def _one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """Limit BLAS to one thread during a fit.

    The matrices are tiny (<= 672 x 170), and on a loaded 2-core machine multi-threaded OpenBLAS
    made one least-squares solve ~70x slower (measured 0.32 s vs 4.5 ms). Uses threadpoolctl when
    installed (it is, via scikit-learn); otherwise does nothing.
    """
    if threadpool_limits is None:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _fit_profile(series: pd.Series, timezone: str, exclude, s: ProfileSettings) -> Profile:
    """:func:`fit_profile` in one BLAS thread: check, window, constant or regression, P90, status."""
    series = check_hourly_series(series)
    try:
        local_hours(series.index[:1], timezone)
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"timezone {timezone!r}: not a known IANA zone ({exc})") from exc
    full_max = float(series.max()) if len(series) else 0.0
    shift = (detect_level_shift(series, timezone, s.level_shift)
             if s.level_shift is not None and len(series) and full_max != float(series.min()) else None)
    if s.trailing_window_h is not None and len(series) > s.trailing_window_h:
        series = series.iloc[-s.trailing_window_h:]
    n = len(series)
    use = _usable_hours(series, exclude, s)
    vals = series.to_numpy()
    t0, end = series.index[0], series.index[-1]
    fitted_vals = vals[use]
    if fitted_vals.max() == fitted_vals.min():
        c = float(fitted_vals[0])
        return Profile(method="constant series: profile = the constant (no regression)", status="ok",
                       messages=("constant series: every hour equals %g" % c,), components=("constant",),
                       timezone=timezone, transform="none", params_=np.zeros(0), t0_=t0, end_=end,
                       n_points=n, q90_=0.0, constant_value=c, weekly=False, settings=s)

    weekly, messages, status = _weekly_coverage(series.index[use], n, timezone, s)
    shift_since, shift_msg, shift_status = _shift_term(shift, series.index, use, s)
    if shift_msg:
        messages.append(shift_msg)
    transform, z = _transformed(vals, use, s, messages)

    s_fallback = s
    if weekly and s.order_candidates:
        s = _select_orders(series.index, timezone, t0, z, use, s, shift_since)
    X = features(series.index, timezone, t0, s, weekly, shift_since)
    if np.linalg.matrix_rank(X[use]) < X.shape[1] and s != s_fallback:
        # BIC's orders with every hour of the day a term need every hour observed: the fallback orders
        X_try = features(series.index, timezone, t0, s_fallback, weekly, shift_since)
        if np.linalg.matrix_rank(X_try[use]) == X_try.shape[1]:
            messages.append(f"{int(use.sum())} usable hours cannot identify the {X.shape[1]} terms of the orders "
                            f"chosen by BIC: the fallback orders ({s_fallback.daily_order}, "
                            f"{s_fallback.weekly_order})")
            s, X = s_fallback, X_try
    if np.linalg.matrix_rank(X[use]) < X.shape[1]:
        # masked hours leave terms unidentified (issue 31: m-mid client 73, a step with its new level's hours
        # flagged, 4 of 7 origins refused): the fallback orders above, then drop the step term, then the weekly part, each a degraded status
        for drop_step, drop_weekly in ((True, False), (False, True), (True, True)):
            if (drop_step and shift_since is None) or (drop_weekly and not weekly):
                continue
            wk, since = weekly and not drop_weekly, None if drop_step else shift_since
            X_try = features(series.index, timezone, t0, s, wk, since)
            if np.linalg.matrix_rank(X_try[use]) == X_try.shape[1]:
                dropped = [w for w, d in (("step term", drop_step), ("weekly component", drop_weekly)) if d]
                messages.append(f"{int(use.sum())} usable hours cannot identify {X.shape[1]} profile terms: "
                                f"{' and '.join(dropped)} dropped")
                status, shift_status = "degraded", ("degraded" if drop_step else shift_status)
                weekly, shift_since, X = wk, since, X_try
                break
        else:
            raise InputError(f"series: {int(use.sum())} usable hours cannot identify {X.shape[1]} profile terms "
                             "(too many masked hours); give a longer history")
    params, warn_msgs = _ols(X[use], z[use])
    if warn_msgs:
        messages += warn_msgs
        status = "degraded"

    resid = z - X @ params
    phi = _lag1_corr(resid, use)
    step = None if shift_since is None else (series.index >= shift_since)
    q90, q90_1h = _p90_offsets(X, z, use, resid, s, n, weekly, transform, step, messages)
    if shift_status == "degraded":
        status = "degraded"
    elif shift_status == "level_shift" and status == "ok":
        status = "level_shift"
    method = _method(s, weekly, transform) + (f"+step({shift_since:%Y-%m-%dT%H:%MZ})" if shift_since is not None
                                              else "")
    return Profile(method=method, status=status, messages=tuple(messages),
                   components=_components(s, weekly) + (("level_shift",) if shift_since is not None else ()),
                   timezone=timezone, transform=transform,
                   params_=params, t0_=t0, end_=end, n_points=n, q90_=max(float(q90), 0.0),
                   constant_value=None, weekly=weekly, settings=s, phi_=phi,
                   q90_1h_=max(float(q90_1h), 0.0), shift=shift, shift_since_=shift_since)


def _usable_hours(series: pd.Series, exclude, s: ProfileSettings) -> np.ndarray:
    """Hours of the (windowed) series not in ``exclude``, bool ``(n,)``; too few raise ``InputError``."""
    n = len(series)
    if n < s.min_points:
        raise InputError(f"series: {n} hourly points; the profile needs at least {s.min_points}")
    use = np.ones(n, dtype=bool)
    ex = list(exclude) if exclude is not None else []
    if ex:
        use &= ~series.index.isin(pd.DatetimeIndex(pd.to_datetime(ex, utc=True)))
    if use.sum() < s.min_points:
        raise InputError(f"series: {int(use.sum())} usable hours after excluding {n - int(use.sum())}; "
                         f"the profile needs at least {s.min_points}")
    return use


def _weekly_coverage(usable: pd.DatetimeIndex, n: int, timezone: str,
                     s: ProfileSettings) -> tuple[bool, list[str], str]:
    """Whether the weekly terms are fitted, with the messages and status of the history rules.

    C03: ``n`` points below ``min_weekly_points`` degrade (or raise with ``on_short_history="error"``),
    below 168 the weekly component is not estimated; a local weekday with fewer than ``min_weekday_h``
    of the ``usable`` hours drops it too (masked weekday).
    """
    messages: list[str] = []
    status = "ok"
    weekly = n >= HOURS_PER_WEEK
    if n < s.min_weekly_points:
        msg = (f"weekly seasonality needs more than {s.min_weekly_points - 1} hourly points; got {n}")
        if s.on_short_history == "error":
            raise InputError(msg)
        if weekly:
            msg += "; weekly component fitted from fewer than two weekly periods (unreplicated)"
        else:
            msg += "; weekly component NOT estimated (needs one full week): daily profile only"
        messages.append(msg)
        status = "degraded"
    if weekly:
        thin = _thin_weekdays(usable, timezone, s.min_weekday_h)
        if thin:
            weekly = False
            messages.append(f"weekly component NOT estimated: local {', '.join(thin)} "
                            f"{'has' if len(thin) == 1 else 'have'} fewer than {s.min_weekday_h} usable hours in "
                            "the fitted window (masked or missing); daily profile only")
            status = "degraded"
    return weekly, messages, status


def _transformed(vals: np.ndarray, use: np.ndarray, s: ProfileSettings, messages: list[str]) -> tuple[str, np.ndarray]:
    """The scale (``"log"`` when every usable value is > 0 under ``"auto"``) and the values on it, ``(n,)``."""
    transform = s.transform
    if transform == "auto":
        transform = "log" if (vals[use] > 0).all() else "none"
    if transform == "log" and not (vals[use] > 0).all():
        messages.append("log transform skipped: series has zero values")
        transform = "none"
    # excluded hours never enter a fit; give them a finite placeholder so that log(0) cannot warn
    z = np.log(np.where(use, vals, 1.0)) if transform == "log" else vals.astype(float)
    return transform, z


def _p90_offsets(X, z, use, resid, s: ProfileSettings, n: int, weekly: bool, transform: str, step,
                 messages: list[str]) -> tuple[float, float]:
    """``(q90_day, q90_1h)`` from rolling origins, else from the in-sample residuals (with a message)."""
    q = _calibrate_q90(X, z, use, s, n, weekly, transform, step)
    if q is not None:
        return q
    dof = max(int(use.sum()) - X.shape[1], 1)
    q90 = float(np.quantile(resid[use], s.p90_quantile)) * np.sqrt(use.sum() / dof)
    messages.append("P90 band from in-sample residuals (history too short for rolling-origin calibration)")
    return q90, q90


def _components(s: ProfileSettings, weekly: bool) -> tuple[str, ...]:
    comps = ["level"] + (["trend"] if s.trend else []) + ["daily_24h"]
    return tuple(comps + (["weekly_168h"] if weekly else []))


def _method(s: ProfileSettings, weekly: bool, transform: str) -> str:
    terms = f"fourier(24h,{s.daily_order})" + (f"+fourier(168h,{s.weekly_order})" if weekly else "")
    return f"statsmodels OLS: {'trend+' if s.trend else ''}{terms}, local clock, {transform} scale"


def _ols(X: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Fit with statsmodels OLS; every warning it raises is returned as a message (never ignored)."""
    # local import on purpose: statsmodels.api costs ~1.0 s to import (measured with python -X importtime
    # after numpy and pandas) and only fitting needs it, not forecasting from a fitted profile
    import statsmodels.api as sm

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = sm.OLS(z, X).fit()
    msgs = [f"statsmodels: {w.category.__name__}: {w.message}" for w in caught]
    return np.asarray(res.params, dtype=float), msgs


WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _thin_weekdays(usable: pd.DatetimeIndex, timezone: str, min_hours: int) -> list[str]:
    """Local weekdays (names, Monday first) with fewer than ``min_hours`` of the ``usable`` UTC hours."""
    counts = np.bincount(usable.tz_convert(timezone).day_of_week.to_numpy(), minlength=7)
    return [WEEKDAYS[d] for d in range(7) if counts[d] < min_hours]


def _shift_term(shift: LevelShift | None, idx: pd.DatetimeIndex, use: np.ndarray,
                s: ProfileSettings) -> tuple[pd.Timestamp | None, str | None, str]:
    """Whether a detected shift enters the regression: ``(step start or None, message, status)``.

    The step needs ``min_shift_fit_h`` usable hours from ``since`` on and ``min_points`` usable hours
    before it inside the fitted window; otherwise it is not modelled and the status is ``"degraded"``
    (unless the fitted window starts at or after the change, when the fit is on the new level anyway).
    Status ``"ok"`` when there is no shift, ``"level_shift"`` when it is followed.
    """
    if shift is None:
        return None, None, "ok"
    after = idx >= shift.since
    n_after, n_before = int((use & after).sum()), int((use & ~after).sum())
    if n_before == 0:
        return None, (f"{shift.describe()}: the fitted window starts at the new level; the profile follows "
                      "it"), "level_shift"
    if n_after >= s.min_shift_fit_h and n_before >= s.min_points:
        return shift.since, (f"{shift.describe()}: the forecast follows the new level (a step term from "
                             f"{shift.since:%Y-%m-%dT%H:%MZ} in the regression, estimated on {n_after} h)"), \
            "level_shift"
    return None, (f"{shift.describe()}: NOT modelled ({n_after} usable hours after the change, "
                  f"{n_before} before; need {s.min_shift_fit_h} and {s.min_points}); the forecast may "
                  "still be at the old level"), "degraded"


def _select_orders(idx, timezone, t0, z, use, s: ProfileSettings, shift_since=None) -> ProfileSettings:
    """Pick (daily, weekly) Fourier orders by BIC = n log(RSS/n) + p log(n) on the usable hours.

    Candidates with more than ``max_params_share`` × n parameters are skipped; RSS is floored at
    1e-12 × total sum of squares so that an exact fit of noise-free data does not give -inf.
    """
    n = int(use.sum())
    tss = float(np.sum((z[use] - z[use].mean()) ** 2)) + 1e-300
    best, best_bic = None, np.inf
    for d, w in s.order_candidates:
        cand = dataclasses.replace(s, daily_order=d, weekly_order=w)
        p = n_cols(cand, weekly=True) + (shift_since is not None)
        if p > s.max_params_share * n:
            continue
        X = features(idx, timezone, t0, cand, True, shift_since)[use]
        beta, *_ = np.linalg.lstsq(X, z[use], rcond=None)
        rss = max(float(np.sum((z[use] - X @ beta) ** 2)), 1e-12 * tss)
        bic = n * np.log(rss / n) + p * np.log(n)
        if bic < best_bic - 1e-9:
            best, best_bic = cand, bic
    return best if best is not None else s


def _lag1_corr(resid: np.ndarray, use: np.ndarray) -> float:
    """Lag-1 autocorrelation of residuals over consecutive usable hours, clipped to [0, 0.99]."""
    pair = use[1:] & use[:-1]
    a, b = resid[1:][pair], resid[:-1][pair]
    if pair.sum() <= 2 or np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(np.clip(np.corrcoef(a, b)[0, 1], 0.0, 0.99))


def _calibrate_q90(X, z, use, s: ProfileSettings, n: int, weekly: bool, transform: str, step=None):
    """P90 offsets from inner rolling origins: ``(q90_day, q90_1h)`` or None (fewer than 24 errors).

    Origins are the last ``calib_origins`` day boundaries ``o = n-24, n-48, ...`` with at least
    ``min_points`` hours before them; each refits the same regression (weekly terms only when
    ``o >= 168``) on hours ``[0, o)`` (least squares via numpy, the OLS estimator, to keep this cheap)
    and scores ``[o, o+24)`` twice: ``q90_day`` = 0.9 quantile of the 24 h-ahead errors (no correction);
    ``q90_1h`` = 0.9 quantile of the one-hour-ahead errors after the :func:`recalibrate` correction from
    the previous hour's actual (``window_h = 1``, AR(1) decay ``phi`` of that inner fit's residuals).
    Errors are on the transformed scale (log or raw).

    With a level-shift step (``step``: boolean ``(n,)``, True from the change on; its column is the last
    of ``X``) an inner fit carries the step term only when its training hours include some at the new
    level; otherwise it scores only its test hours before the change (the forecast being calibrated
    knows the change, so errors from not knowing it are not its errors).
    """
    day, hour = [], []
    n_base, n_all = n_cols(s, weekly=False), n_cols(s, weekly=weekly)
    for j in range(1, s.calib_origins + 1):
        o = n - HOURS_PER_DAY * j
        if o < s.min_points:
            break
        cols = list(range(n_all if (weekly and o >= HOURS_PER_WEEK) else n_base))
        train = use[:o]
        with_step = step is not None and bool(step[:o][train].any())
        if with_step:
            cols.append(X.shape[1] - 1)
        Xo = X[:, cols]
        if np.linalg.matrix_rank(Xo[:o][train]) < len(cols):
            continue
        beta, *_ = np.linalg.lstsq(Xo[:o][train], z[:o][train], rcond=None)
        zhat = Xo @ beta
        phi = _lag1_corr(z[:o] - zhat[:o], train)
        test = np.arange(o, min(o + HOURS_PER_DAY, n))
        ok = use[test]
        if step is not None and not with_step:
            ok = ok & ~step[test]
        day.append((z[test] - zhat[test])[ok])
        prev = test - 1
        okp = ok & use[prev]
        if transform == "log":
            pred = zhat[test] + phi * (z[prev] - zhat[prev])
        else:
            base_prev = np.where(zhat[prev] > 0, zhat[prev], np.nan)
            ratio = np.clip(np.nan_to_num(z[prev] / base_prev, nan=1.0), 0.5, 2.0)
            pred = np.maximum(zhat[test], 0.0) * ratio ** phi
        hour.append((z[test] - pred)[okp])
    if not day:
        return None
    e_day, e_hour = np.concatenate(day), np.concatenate(hour)
    if e_day.size < HOURS_PER_DAY or e_hour.size < HOURS_PER_DAY:
        return None
    return float(np.quantile(e_day, s.p90_quantile)), float(np.quantile(e_hour, s.p90_quantile))
