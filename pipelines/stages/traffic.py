"""Traffic samples -> each service's hourly rows, the input of :func:`pipelines.stages.realtime.ingest_traffic` (both sides).

:func:`hourly_traffic`: the hour's mean sample, × 3600 for a per-second rate (``value_units = "rate_per_s"``,
a Prometheus ``rate()``), as is for ``per_hour``; :func:`check_services_have_traffic` refuses a service
name that matches no series.
"""

from __future__ import annotations

from collections.abc import Sequence

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
