"""Real-time inference demand: ingest hourly traffic, weekly seasonal profile, P50/P90, GPUs (DESIGN §4.4).

Public API (pure; no file IO):

* :func:`ingest` ``(df, timezone, offgrid_rule="max") -> (series, diagnostics)``
* :func:`fit_profile` ``(series, timezone="UTC", exclude=None, settings=None) -> Profile``
* :func:`forecast` ``(profile, horizon_h, start=None) -> DataFrame[ts (UTC), p50, p90]``
* :func:`recalibrate` ``(profile, recent_actuals) -> Profile`` (level correction)
* :func:`to_gpus` ``(traffic, capacity_per_gpu_per_h, headroom, min_gpus, max_gpus, replica_gpus)``
* :func:`backtest` rolling-origin evaluation against seasonal-naive baselines.
"""

from forecasters.realtime.backtest import backtest
from forecasters.realtime.gpus import to_gpus
from forecasters.realtime.ingest import OFFGRID_RULES, IngestSettings, daily_totals, ingest
from forecasters.realtime.profile import (
    Profile,
    ProfileSettings,
    fit_profile,
    fitted,
    forecast,
    hour_of_week_profile,
    recalibrate,
)

__all__ = [
    "OFFGRID_RULES",
    "IngestSettings",
    "Profile",
    "ProfileSettings",
    "backtest",
    "daily_totals",
    "fit_profile",
    "fitted",
    "forecast",
    "hour_of_week_profile",
    "ingest",
    "recalibrate",
    "to_gpus",
]
