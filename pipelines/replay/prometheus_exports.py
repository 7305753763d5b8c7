"""Prometheus export writer: a ``query_range`` response body cut to the days before a time T.

Pure (text out, no file IO); the inverse of :mod:`pipelines.workspace.sources.prometheus`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from pipelines.io.errors import InputError
from pipelines.io.strict_json import loads
from pipelines.replay.jobs import DAY_S, go_float, to_epoch_s


def _prom_time(ts: Any, where: str) -> str:
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        raise InputError(f"{where}: time {ts!r} is not a unix time (expected e.g. 1742140800)")
    return str(int(ts)) if float(ts).is_integer() else json.dumps(round(float(ts), 3))


def prometheus_text(samples: Mapping[str, Any] | str, t: Any, days: float) -> str:
    """The ``/api/v1/query_range`` body of the samples in ``(t - days, t]`` of a query_range body.

    Args:
        samples: a query_range response body (dict or its JSON text), ``{"status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[unix_s, "v"], ...]}]}}``.
            A value given as a number is printed like Go ``FormatFloat`` (:func:`go_float`); a
            text value is kept as it is.
        t: the query's ``end`` (tz-aware).
        days: the range in days (``start = end - days``; a sample at exactly ``start`` is left out).

    Returns:
        Compact JSON without a trailing newline, like the HTTP response: series in the given order
        (Prometheus returns them sorted by labels), a series without samples in the range left out
        (Prometheus omits empty series), times as integers when whole (Prometheus
        ``MarshalTimestamp``). Format: Prometheus HTTP API docs, "Range queries" / "Range vectors"
        (https://prometheus.io/docs/prometheus/latest/querying/api/).

    Raises:
        InputError: not a success matrix body, a malformed series or sample, ``days <= 0``, ``t``
            without a zone, a value that cannot be printed (:func:`go_float`).
    """
    doc = loads(samples, "Prometheus query_range body") if isinstance(samples, str) else samples
    if not isinstance(doc, Mapping) or doc.get("status") != "success" or not isinstance(doc.get("data"), Mapping) \
            or doc["data"].get("resultType") != "matrix" or not isinstance(doc["data"].get("result"), list):
        raise InputError("Prometheus body: not {\"status\": \"success\", \"data\": {\"resultType\": \"matrix\", "
                         "\"result\": [...]}}")
    if not days > 0:
        raise InputError(f"Prometheus range: days {days!r} (expected > 0)")
    end_s = to_epoch_s(t, "t")
    start_s = end_s - days * DAY_S
    series = []
    for i, s in enumerate(doc["data"]["result"]):
        if not isinstance(s, Mapping) or not isinstance(s.get("metric"), Mapping) or not isinstance(s.get("values"), list):
            raise InputError(f"Prometheus body: series {i} is not {{metric, values}}")
        kept = []
        for j, v in enumerate(s["values"]):
            if not isinstance(v, list | tuple) or len(v) != 2:
                raise InputError(f"Prometheus body: series {i} sample {j} {v!r} is not [unix_time, \"value\"]")
            ts, value = v
            text_ts = _prom_time(ts, f"Prometheus body: series {i} sample {j}")
            if not start_s < ts <= end_s:
                continue
            text_v = value if isinstance(value, str) else go_float(float(value))
            kept.append(f"[{text_ts},{json.dumps(text_v, ensure_ascii=False)}]")
        if kept:
            metric = json.dumps(dict(s["metric"]), separators=(",", ":"), ensure_ascii=False)
            series.append(f'{{"metric":{metric},"values":[{",".join(kept)}]}}')
    return '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(series) + "]}}"
