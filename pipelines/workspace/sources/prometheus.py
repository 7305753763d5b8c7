"""Prometheus range queries -> traffic records, and traffic records -> hourly means.

Input: the JSON body of ``GET /api/v1/query_range`` (Prometheus HTTP API,
https://prometheus.io/docs/prometheus/latest/querying/api/ — ``docs/querying/api.md`` in
prometheus/prometheus, sections "Format overview", "Range queries" and "Range vectors")::

    {"status": "success" | "error",
     "data": {"resultType": "matrix",
              "result": [{"metric": {"<label>": "<value>", ...},
                          "values": [[<unix_time>, "<sample_value>"], ...]}, ...]},
     "errorType": "<string>", "error": "<string>",      # only when status is "error"
     "warnings": ["<string>"], "infos": ["<string>"]}   # optional; data is still complete

``<unix_time>`` is seconds since the epoch as a JSON number with millisecond decimals
(``1435781430.781``); sample values are strings because JSON has no ``NaN``/``Inf``
(``"NaN"``, ``"+Inf"``, ``"-Inf"``). A series may carry native-histogram samples under
``"histograms"`` instead of ``"values"``; those are not read (one error line per such series).

Choices:

* A series' service is ``metric[service_label]`` (e.g. ``service``, ``job``, ``app``). A series
  without that label is skipped with one error line naming its labels; with ``services`` given,
  a series of another service is skipped with ``series {labels}: service 'x' is not configured``.
* Several series with the same service (one per pod, per instance, per status code ...) are
  **summed per timestamp**, as PromQL ``sum by (<service_label>)`` would: a timestamp where any
  contributing sample is NaN/±Inf is NaN (IEEE addition), and a series absent at a timestamp
  adds nothing. A query that already aggregates (``sum by (service) (rate(...[5m]))``) gives one
  series per service and the sum is that series.
* Non-finite samples (``"NaN"``, ``"+Inf"``, ``"-Inf"``) become NaN and are kept (a traffic
  record's value is NaN for a missing or non-finite sample, :mod:`pipelines.workspace.sources.records`).
* ``warnings`` / ``infos`` are ignored: by the API's definition the data is complete.
* Negative samples are refused (traffic is a rate or a count, never below 0; a negative value comes
  from ``delta()``/``deriv()`` over a counter reset or a bad recording rule): one error line per
  series with their number, the first one's time and value; the series' other samples are kept.
* Units: ``read`` and ``rejected`` count samples (``[t, "v"]`` pairs of every series, skipped ones
  included; a series refused whole counts all its samples); the errors are one line per skipped
  series, per series with negative samples, or per malformed sample.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import pandas as pd

from pipelines.io.errors import InputError
from pipelines.io.strict_json import loads
from pipelines.workspace.sources.records import TRAFFIC_RECORD, ParseResult, traffic_frame

__all__ = ["HOURLY_COLUMNS", "aggregate_hourly", "parse_query_range"]

#: Columns of :func:`aggregate_hourly`'s frame.
HOURLY_COLUMNS: tuple[str, ...] = ("service", "ts", "value", "n_samples")
_NON_FINITE = {"NaN", "+Inf", "-Inf", "Inf"}


def _labels(metric: Mapping[str, Any]) -> str:
    """Prometheus' own series notation: ``{__name__="up", job="node"}`` (labels sorted)."""
    return "{" + ", ".join(f'{k}="{metric[k]}"' for k in sorted(metric)) + "}"


def _sample_value(raw: Any) -> float:
    """``"12.5"`` -> 12.5; ``"NaN"``, ``"+Inf"``, ``"-Inf"`` -> NaN. Raises ValueError for anything else."""
    if not isinstance(raw, str):
        raise ValueError
    if raw in _NON_FINITE:
        return math.nan
    value = float(raw)
    return value if math.isfinite(value) else math.nan


def parse_query_range(text: str, service_label: str, services: Collection[str] | None = None) -> ParseResult:
    """A ``/api/v1/query_range`` response -> traffic records, one row per (service, timestamp).

    Args:
        text: the response body (JSON, read with :func:`pipelines.io.strict_json.loads`).
        service_label: the label naming the service (``service``, ``job``, ``app`` ...).
        services: the configured services; series of other services are skipped with an error
            line. None keeps every service.

    Returns:
        :class:`ParseResult`: ``frame`` with :data:`TRAFFIC_RECORD` columns (``ts`` UTC at
        millisecond resolution, ``value`` in the query's units, e.g. requests/s for a ``rate()``),
        sorted by service and ts; ``read`` = samples read; ``rejected`` = samples refused
        (unit ``samples``); ``errors`` = one line per skipped series, per series with negative
        samples, or per malformed sample.

    Raises:
        InputError: not JSON or not an object; ``status`` ``"error"`` (the message carries
            Prometheus' ``errorType`` and ``error``); ``status`` not ``"success"``;
            ``data.resultType`` other than ``"matrix"`` (an instant query's ``vector`` included);
            ``data.result`` not a list.
    """
    doc = loads(text, "Prometheus query_range response")
    if not isinstance(doc, dict):
        raise InputError(f"Prometheus query_range response: top level is {type(doc).__name__} "
                         f"(expected an object with status and data)")
    status = doc.get("status")
    if status == "error":
        raise InputError(f"Prometheus query failed: {doc.get('errorType', '?')}: {doc.get('error', '(no message)')}")
    if status != "success":
        raise InputError(f"Prometheus query_range response: status {status!r} (expected 'success' or 'error')")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise InputError("Prometheus query_range response: data is missing (expected {resultType, result})")
    if data.get("resultType") != "matrix":
        instant = " (an instant query's result, /api/v1/query)" if data.get("resultType") in ("vector", "scalar") else ""
        raise InputError(f"Prometheus query_range response: resultType {data.get('resultType')!r}{instant} "
                         f"(expected 'matrix', the result of /api/v1/query_range)")
    result = data.get("result")
    if not isinstance(result, list):
        raise InputError(f"Prometheus query_range response: data.result is {type(result).__name__} "
                         f"(expected a list of series)")
    wanted = None if services is None else set(services)

    sums: dict[tuple[str, int], float] = {}
    read = rejected = 0
    errors: list[str] = []
    for index, series in enumerate(result):
        if not isinstance(series, dict) or not isinstance(series.get("metric", {}), dict):
            errors.append(f"series {index}: is not {{metric, values}} (expected a range-vector series)")
            continue
        metric = series.get("metric") or {}
        values = series.get("values")
        name = _labels(metric)
        if isinstance(values, list):
            read += len(values)
        if values is None:
            what = "has only native-histogram samples" if "histograms" in series else "has no values"
            errors.append(f"series {name}: {what} (expected \"values\": [[<unix_time>, \"<value>\"], ...])")
            continue
        if not isinstance(values, list):
            errors.append(f"series {name}: values is {type(values).__name__} (expected a list of [time, value])")
            continue
        service = metric.get(service_label)
        if not isinstance(service, str) or not service:
            errors.append(f"series {name}: no label {service_label!r} (expected each series to name its service)")
            rejected += len(values)
            continue
        if wanted is not None and service not in wanted:
            errors.append(f"series {name}: service {service!r} is not configured")
            rejected += len(values)
            continue
        negative: list[tuple[float, float]] = []
        for j, sample in enumerate(values):
            try:
                if not isinstance(sample, list) or len(sample) != 2:
                    raise ValueError
                ts, raw = sample
                if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
                    raise ValueError
                value = _sample_value(raw)
            except ValueError:
                errors.append(f"series {name}: sample {j} {sample!r} is not [<unix_time>, \"<value>\"] "
                              f"(expected e.g. [1435781430.781, \"1\"])")
                rejected += 1
                continue
            if value < 0:
                negative.append((ts, value))
                continue
            key = (service, round(ts * 1000))
            sums[key] = sums.get(key, 0.0) + value
        if negative:
            at = pd.Timestamp(round(negative[0][0] * 1000), unit="ms", tz="UTC").isoformat()
            errors.append(f"series {name}: {len(negative)} negative sample(s) refused, the first {negative[0][1]:g} "
                          f"at {at} (expected traffic >= 0; a delta()/deriv() over a counter reset?)")
            rejected += len(negative)
    rows = [{"service": s, "ts": pd.Timestamp(ms, unit="ms", tz="UTC"), "value": v} for (s, ms), v in sorted(sums.items())]
    return ParseResult(frame=traffic_frame(rows), read=read, errors=errors, unit="samples", rejected_count=rejected)


def aggregate_hourly(frame: pd.DataFrame, *, per_hour: bool = False) -> pd.DataFrame:
    """Traffic records at any step -> one row per (service, UTC hour) with the hour's mean.

    Each sample belongs to the hour ``[h, h + 1 h)`` that holds its ``ts``; ``value`` is the mean
    of the hour's finite samples (NaN samples are ignored) and ``n_samples`` their number; an hour
    with no finite sample has no row.

    Units: ``value`` keeps the input's units, so for a Prometheus ``rate()`` (per second) it is
    the hour's mean rate per second. With ``per_hour=True`` it is multiplied by 3600: the expected
    count in the hour (requests/hour) — right only for per-second rates, which is what
    ``rate()``/``irate()`` return; do not set it for gauges (queue length, GPU utilisation).

    Args:
        frame: :data:`TRAFFIC_RECORD` columns (``ts`` timezone-aware).
        per_hour: multiply the mean by 3600 (per-second rate -> count per hour).

    Returns:
        Frame with :data:`HOURLY_COLUMNS`: ``service`` (str), ``ts`` (hour start,
        ``datetime64[us, UTC]``), ``value`` (float), ``n_samples`` (int64); sorted by service, ts.

    Raises:
        InputError: a :data:`TRAFFIC_RECORD` column is missing, or ``ts`` has no time zone.
    """
    missing = [c for c in TRAFFIC_RECORD if c not in frame.columns]
    if missing:
        raise InputError(f"traffic records: no column {', '.join(missing)} (expected {', '.join(TRAFFIC_RECORD)})")
    ts = pd.to_datetime(frame["ts"])
    if ts.dt.tz is None:
        raise InputError("traffic records: ts has no time zone (expected UTC timestamps, e.g. from parse_query_range)")
    values = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    finite = np.isfinite(values.to_numpy())
    work = pd.DataFrame({"service": frame["service"].astype(str)[finite].to_numpy(),
                         "ts": ts.dt.tz_convert("UTC").dt.floor("h")[finite].to_numpy(),
                         "value": values[finite].to_numpy()})
    out = (work.groupby(["service", "ts"], sort=True)["value"].agg(["mean", "size"]).reset_index()
           .rename(columns={"mean": "value", "size": "n_samples"}))
    out["ts"] = pd.to_datetime(out["ts"], utc=True).astype("datetime64[us, UTC]")
    out["value"] = out["value"].astype(float) * (3600.0 if per_hour else 1.0)
    out["n_samples"] = out["n_samples"].astype("int64")
    out["service"] = out["service"].astype(str)
    return out[list(HOURLY_COLUMNS)].reset_index(drop=True)
