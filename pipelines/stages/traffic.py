"""Traffic samples -> each service's hourly rows, the input of :func:`pipelines.stages.realtime.ingest_traffic` (both sides).

:func:`hourly_traffic`: the hour's mean sample, × 3600 for a per-second rate (``value_units = "rate_per_s"``,
a Prometheus ``rate()``), as is for ``per_hour``; :func:`check_services_have_traffic` refuses a service
name that matches no series. :func:`planned_forecast`: the hourly forecast the plan uses (``gpuplan run``'s
demand and ``gpuplan forecast``); :func:`file_service`: one traffic file as a service's hourly rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from pipelines.io.errors import InputError
from pipelines.workspace.config import ServiceSettings
from pipelines.workspace.sources.prometheus import aggregate_hourly


def hourly_traffic(samples: pd.DataFrame, services: Sequence[ServiceSettings], value_units: str) -> dict[str, pd.DataFrame]:
    """Traffic samples (``service``, ``ts`` UTC, ``value``) -> service -> hourly rows (``ts`` ISO text with ``Z``, ``value``).

    An hour without a finite sample is absent (the real-time ingest imputes it and flags it).

    The hour's mean of finite samples (:func:`pipelines.workspace.sources.prometheus.aggregate_hourly`); a
    service without samples gets an empty frame (the real-time ingest then names it).
    """
    hourly = aggregate_hourly(samples, per_hour=value_units == "rate_per_s")
    out = {}
    for svc in services:
        h = hourly[hourly["service"] == svc.service]
        out[svc.service] = pd.DataFrame({"ts": pd.DatetimeIndex(h["ts"]).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                         "value": h["value"].to_numpy(float)})
    return out


def check_services_have_traffic(samples: pd.DataFrame, services: Sequence[ServiceSettings], label: str) -> None:
    """Refuse a plan where a configured service has no traffic sample at all (a name that matches no series).

    Raises:
        InputError: naming the services without samples and the service names the traffic has.
    """
    seen = sorted(set(samples["service"].astype(str)))
    missing = [s.service for s in services if s.service not in seen]
    if missing:
        raise InputError(f"service(s) {', '.join(repr(m) for m in missing)} have no traffic samples (the traffic "
                         f"source has {', '.join(repr(x) for x in seen) or 'none'}): [[services]] names must match "
                         f"the '{label}' label")


def planned_forecast(fitted: Any, start: datetime, horizon_h: int) -> pd.DataFrame:
    """The hourly traffic forecast ``gpuplan run`` plans with, from one service's fit (``gpuplan forecast`` too).

    Args:
        fitted: the service's :class:`forecasters.realtime.combine.Combined`
            (:func:`pipelines.stages.realtime.fit_realtime_forecasts`).
        start: the plan start (UTC); a start inside the hour already in the history (a replan at 20:30Z
            with the origin at 21:00Z) takes the first forecast hour, never a forecast before the origin.
        horizon_h: hours (>= 1).

    Returns:
        :func:`forecasters.realtime.combine.forecast_combined`'s frame (``ts`` UTC hours from
        ``max(start floored to the hour, origin)``, ``p50``, ``p90``, ``clipped``), in the traffic's units per hour.
    """
    from forecasters.realtime.combine import forecast_combined

    fc_start = max(pd.Timestamp(start).floor("h"), pd.Timestamp(fitted.origin))
    return forecast_combined(fitted, horizon_h, start=fc_start)


def file_service(frame: pd.DataFrame, timezone: str | None, service: str = "traffic",
                 units: str = "traffic/h") -> tuple[ServiceSettings, dict[str, pd.DataFrame]]:
    """One traffic file's rows -> a service and its hourly rows as ``gpuplan run`` reads a traffic source.

    The stamps are parsed by :func:`forecasters.realtime.ingest` (ISO offsets, ``Z``, a tz-aware column, or
    naive local stamps with ``timezone``); its observed hours (not the hours it imputed) are the samples,
    turned into hourly rows by :func:`hourly_traffic` (per-hour values, the hour's mean), as the run's traffic
    source is. The service's clock: ``timezone``, else the zone the stamps carry, else UTC.

    Args:
        frame: ``ts``, ``value`` (:func:`pipelines.io.traffic_io.read_traffic`).
        timezone: IANA zone (``--timezone``) or None.
        service: the service's name.
        units: its traffic units.

    Returns:
        ``(settings, {service: hourly rows})``; the settings' GPU conversion is a placeholder (one GPU per
        unit of traffic): the traffic forecast does not depend on it.

    Raises:
        forecasters.errors.InputError: bad stamps or values (named by ingest).
    """
    from forecasters.realtime import ingest

    series, diag = ingest(frame[["ts", "value"]], timezone)
    observed = series.drop(index=pd.DatetimeIndex(pd.to_datetime(diag["imputed"], utc=True)))
    svc = ServiceSettings(service=service, timezone=diag["timezone"], capacity_per_gpu_per_h=1.0, min_gpus=0,
                          max_gpus=1, swap_cap_gpus=1, units=units)
    samples = pd.DataFrame({"service": service, "ts": observed.index, "value": observed.to_numpy(float)})
    return svc, hourly_traffic(samples, [svc], "per_hour")
