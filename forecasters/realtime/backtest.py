"""Rolling-origin backtest of the weekly profile against seasonal naive baselines (DESIGN §4.4)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasters import metrics as M
from forecasters.errors import InputError
from forecasters.realtime.profile import ProfileSettings, fit_profile, forecast, recalibrate

VARIANTS = ("day_ahead", "day_ahead_recal", "hourly_recal")


def backtest(
    series: pd.Series,
    timezone: str = "UTC",
    exclude=(),
    outliers=(),
    test_start=None,
    n_days: int = 7,
    horizon_h: int = 24,
    recal_window_h: int = 1,
    settings: ProfileSettings | None = None,
) -> dict:
    """Rolling-origin evaluation: one origin per day over the test window.

    At each origin ``o`` (``test_start + d·24 h``, default ``test_start`` = first hour + 168 h, i.e. the
    second week) the profile is refitted on all hours before ``o`` and scored on ``[o, o + horizon_h)``:

    * ``day_ahead``: the refitted profile's 24 h-ahead P50/P90.
    * ``day_ahead_recal``: the same, after :func:`recalibrate` from the last ``recal_window_h`` hours
      before ``o`` (what a planning run at ``o`` would use).
    * ``hourly_recal``: at every hour ``t`` of the day the profile is recalibrated from the actuals of the
      ``recal_window_h`` hours before ``t`` and forecasts ``t`` (one hour ahead; no refit inside the day).

    Baselines on the same hours: seasonal naive ``y[t-168]`` and naive-24 ``y[t-24]`` (both known at every
    origin for horizons <= 24 h; they use the ingested series, i.e. imputed values where a lag hour was
    a gap). Hours listed in ``exclude`` (masked gaps, imputed hours) are neither fitted nor scored; hours
    in ``outliers`` are kept out of the fit (as in production) but scored, since they are real demand.

    Returns:
        ``{"variants": {name: metrics}, "origins": [...], "n_days": k}`` with metrics ``mae``,
        ``mae_snaive168``, ``mae_naive24``, ``mase_snaive168`` (= mae / mae_snaive168 on the same hours,
        i.e. MAE scaled by the seasonal-naive out-of-sample MAE), ``mase_naive24``, ``mape_pct`` (hours with
        actual > 0), ``p90_coverage`` (share of hours with actual <= P90), ``n_hours``; all in the series'
        units.

    Raises:
        forecasters.errors.InputError: the series is too short for one origin with 168 h of lag.
    """
    s = settings or ProfileSettings()
    idx = series.index
    exclude, outliers = list(exclude), list(outliers)  # iterables may be one-shot generators
    ex = pd.DatetimeIndex(pd.to_datetime(exclude, utc=True)) if exclude else idx[:0]
    masked = idx.isin(ex)
    out_idx = pd.DatetimeIndex(pd.to_datetime(outliers, utc=True)) if outliers else idx[:0]
    not_fitted = ex.union(out_idx)
    start = idx[0] + pd.Timedelta(hours=168) if test_start is None else pd.Timestamp(test_start)
    origins = [start + pd.Timedelta(hours=24 * d) for d in range(n_days)]
    origins = [o for o in origins if o + pd.Timedelta(hours=horizon_h - 1) <= idx[-1]]
    if not origins or start - pd.Timedelta(hours=168) < idx[0]:
        raise InputError(f"backtest: series {idx[0]}..{idx[-1]} too short for a test window from {start} "
                         "with 168 h of lag")
    pos = {t: i for i, t in enumerate(idx)}
    off_grid = [o for o in origins if o not in pos]
    if off_grid:
        raise InputError(f"backtest: origin {off_grid[0].isoformat()} is not an hour of the series "
                         "(test_start must be on the series' hourly grid)")
    y = series.to_numpy(dtype=float)
    rows: dict[str, list[tuple[float, ...]]] = {v: [] for v in VARIANTS}
    for o in origins:
        io = pos[o]
        hist = series.iloc[:io]
        prof = fit_profile(hist, timezone, exclude=list(not_fitted[not_fitted < o]), settings=s)
        fc = forecast(prof, horizon_h, start=o)
        rec = recalibrate(prof, hist[~masked[:io]], window_h=recal_window_h)
        fc_rec = forecast(rec, horizon_h, start=o)
        for h in range(horizon_h):
            i = io + h
            if masked[i]:
                continue
            base = (y[i], y[i - 168], y[i - 24])
            rows["day_ahead"].append(base + (fc["p50"].iat[h], fc["p90"].iat[h]))
            rows["day_ahead_recal"].append(base + (fc_rec["p50"].iat[h], fc_rec["p90"].iat[h]))
            recent = series.iloc[:i][~masked[:i]]
            hr = forecast(recalibrate(prof, recent, window_h=recal_window_h), 1, start=idx[i])
            rows["hourly_recal"].append(base + (hr["p50"].iat[0], hr["p90"].iat[0]))
    out = {v: _metrics(np.array(r)) for v, r in rows.items()}
    return {"variants": out, "origins": [o.isoformat() for o in origins], "n_days": len(origins),
            "status": prof.status, "method": prof.method}


def _metrics(a: np.ndarray) -> dict:
    """Metrics from rows (actual, snaive168, naive24, p50, p90)."""
    act, sn, n24, p50, p90 = a.T
    mae, mae_sn, mae_24 = M.mae(act, p50), M.mae(act, sn), M.mae(act, n24)
    pos = act > 0
    return {
        "mae": mae,
        "mae_snaive168": mae_sn,
        "mae_naive24": mae_24,
        "mase_snaive168": mae / mae_sn if mae_sn > 0 else float("nan"),
        "mase_naive24": mae / mae_24 if mae_24 > 0 else float("nan"),
        "mape_pct": 100 * M.mape(act[pos], p50[pos]) if pos.any() else float("nan"),
        "p90_coverage": float(np.mean(act <= p90)),
        "n_hours": int(len(act)),
    }
