"""Real-time inference demand: ingest hourly traffic, weekly seasonal profile, P50/P90, GPUs (DESIGN §4.4).

Public API (pure; no file IO):

* :func:`ingest` ``(df, timezone, offgrid_rule="max") -> (series, diagnostics)``
* :func:`fit_profile` ``(series, timezone="UTC", exclude=None, settings=None) -> Profile``
* :func:`forecast` ``(profile, horizon_h, start=None) -> DataFrame[ts (UTC), p50, p90]``
* :func:`recalibrate` ``(profile, recent_actuals) -> Profile`` (level correction)
* :func:`to_gpus` ``(traffic, capacity_per_gpu_per_h, headroom, min_gpus, max_gpus, replica_gpus)``
* :func:`fit_combined` ``(series, timezone, exclude, outliers, settings, memo) -> Combined``: candidates
  (profile, naive 24 h, 7-day same-hour mean, ETS, MSTL+ETS) chosen and weighted by their own rolling-origin
  backtest, split-conformal P90, persistence-anchored hourly mode, range guard (DESIGN §4.4)
* :func:`forecast_combined` ``(combined, horizon_h, start=None) -> DataFrame[ts, p50, p90, clipped]``
* :func:`reanchor` ``(combined, actuals, exclude, outliers) -> Combined`` (the hourly mode's anchor)
* :func:`backtest` rolling-origin evaluation of the combination against naive baselines.
"""

from forecasters.realtime.backtest import backtest
from forecasters.realtime.combine import fit_combined, forecast_combined, reanchor
from forecasters.realtime.gpus import to_gpus
from forecasters.realtime.ingest import OFFGRID_RULES, IngestSettings, daily_totals, ingest
from forecasters.realtime.model import Combined, CombineSettings
from forecasters.realtime.profile import Profile, ProfileSettings, fitted, forecast, hour_of_week_profile, recalibrate
from forecasters.realtime.profile_fit import fit_profile

__all__ = [
    "OFFGRID_RULES",
    "CombineSettings",
    "Combined",
    "IngestSettings",
    "Profile",
    "ProfileSettings",
    "backtest",
    "daily_totals",
    "fit_combined",
    "fit_profile",
    "fitted",
    "forecast",
    "forecast_combined",
    "hour_of_week_profile",
    "ingest",
    "reanchor",
    "recalibrate",
    "to_gpus",
]
