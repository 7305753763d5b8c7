"""pipelines.workspace.sources.prometheus: /api/v1/query_range bodies -> traffic records -> hourly means.

Response bodies follow the Prometheus HTTP API page
(https://prometheus.io/docs/prometheus/latest/querying/api/, ``docs/querying/api.md`` in
prometheus/prometheus): the ``query_range`` example (``up`` over 30 s at a 15 s step,
timestamps ``1435781430.781`` ...), the envelope's ``status``/``errorType``/``error``/``warnings``,
and sample values as strings (``"NaN"``, ``"+Inf"``).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from pipelines.io.errors import InputError
from pipelines.workspace.sources.prometheus import HOURLY_COLUMNS, aggregate_hourly, parse_query_range
from pipelines.workspace.sources.records import TRAFFIC_RECORD

# The documented example response, verbatim in content.
DOCS_EXAMPLE = """{
   "status" : "success",
   "data" : {
      "resultType" : "matrix",
      "result" : [
         {
            "metric" : {
               "__name__" : "up",
               "job" : "prometheus",
               "instance" : "localhost:9090"
            },
            "values" : [
               [ 1435781430.781, "1" ],
               [ 1435781445.781, "1" ],
               [ 1435781460.781, "1" ]
            ]
         },
         {
            "metric" : {
               "__name__" : "up",
               "job" : "node",
               "instance" : "localhost:9091"
            },
            "values" : [
               [ 1435781430.781, "0" ],
               [ 1435781445.781, "0" ],
               [ 1435781460.781, "1" ]
            ]
         }
      ]
   }
}"""

T0 = 1710842400  # 2024-03-19T10:00:00Z


def _body(*series, warnings=None):
    out = {"status": "success", "data": {"resultType": "matrix", "result": list(series)}}
    if warnings:
        out["warnings"] = warnings
    return json.dumps(out)


def _series(metric, values):
    return {"metric": metric, "values": [[t, v] for t, v in values]}


def test_docs_example_one_series_per_job():
    result = parse_query_range(DOCS_EXAMPLE, "job")
    assert result.read == 6 and result.errors == []
    assert list(result.frame.columns) == list(TRAFFIC_RECORD)
    assert result.frame["service"].tolist() == ["node"] * 3 + ["prometheus"] * 3
    assert result.frame["value"].tolist() == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert result.frame["ts"].iloc[0] == pd.Timestamp("2015-07-01T20:10:30.781Z")
    assert result.frame["ts"].iloc[2] == pd.Timestamp("2015-07-01T20:11:00.781Z")
    assert str(result.frame["ts"].dtype) == "datetime64[us, UTC]"


def test_nan_and_inf_samples_become_nan():
    body = _body(_series({"service": "chat"}, [(T0, "12.5"), (T0 + 60, "NaN"), (T0 + 120, "+Inf"),
                                               (T0 + 180, "-Inf"), (T0 + 240, "3")]))
    result = parse_query_range(body, "service")
    values = result.frame["value"].tolist()
    assert values[0] == 12.5 and values[4] == 3.0
    assert all(math.isnan(v) for v in values[1:4])
    assert result.read == 5 and result.errors == []


def test_two_series_of_one_service_are_summed_per_timestamp():
    # sum by (service, pod) (rate(http_requests_total[5m])): one series per pod
    body = _body(
        _series({"service": "chat", "pod": "chat-7d9f-abcde"}, [(T0, "1.5"), (T0 + 60, "2"), (T0 + 120, "NaN")]),
        _series({"service": "chat", "pod": "chat-7d9f-fghij"}, [(T0, "0.25"), (T0 + 60, "1"), (T0 + 120, "4")]),
        _series({"service": "embed", "pod": "embed-5c4b-klmno"}, [(T0 + 60, "7")]),
        _series({"service": "chat", "pod": "chat-7d9f-pqrst"}, [(T0 + 60, "0.5")]),  # pod started late
    )
    result = parse_query_range(body, "service")
    chat = result.frame[result.frame["service"] == "chat"]
    assert chat["ts"].tolist() == [pd.Timestamp(T0, unit="s", tz="UTC") + pd.Timedelta(seconds=s) for s in (0, 60, 120)]
    assert chat["value"].tolist()[:2] == [1.75, 3.5]
    assert math.isnan(chat["value"].tolist()[2])  # NaN + 4 is NaN, as PromQL's sum would give
    assert result.frame[result.frame["service"] == "embed"]["value"].tolist() == [7.0]
    assert len(result.frame) == 4 and result.read == 8


def test_series_without_the_label_or_of_an_unconfigured_service_are_skipped_with_one_line_each():
    body = _body(
        _series({"service": "chat"}, [(T0, "1")]),
        _series({"__name__": "http_requests_total", "job": "ingress"}, [(T0, "5"), (T0 + 60, "6")]),
        _series({"service": "batch-export"}, [(T0, "9")]),
        warnings=["PromQL info: metric might not be a counter, name does not end in _total"])
    result = parse_query_range(body, "service", services=["chat", "embed"])
    assert result.frame["service"].tolist() == ["chat"] and result.frame["value"].tolist() == [1.0]
    assert result.read == 4
    assert result.errors == [
        "series {__name__=\"http_requests_total\", job=\"ingress\"}: no label 'service' "
        "(expected each series to name its service)",
        "series {service=\"batch-export\"}: service 'batch-export' is not configured",
    ]


def test_malformed_sample_is_rejected_and_the_rest_of_its_series_kept():
    body = _body(_series({"service": "chat"}, [(T0, "1"), (T0 + 60, "lots"), (T0 + 120, "3")]))
    result = parse_query_range(body, "service")
    assert result.frame["value"].tolist() == [1.0, 3.0]
    assert result.errors == ["series {service=\"chat\"}: sample 1 [1710842460, 'lots'] is not "
                             "[<unix_time>, \"<value>\"] (expected e.g. [1435781430.781, \"1\"])"]


def test_error_status_raises_with_prometheus_message():
    body = json.dumps({"status": "error", "errorType": "bad_data",
                       "error": "invalid parameter \"query\": 1:6: parse error: unexpected end of input"})
    with pytest.raises(InputError) as info:
        parse_query_range(body, "service")
    assert str(info.value) == ("Prometheus query failed: bad_data: invalid parameter \"query\": "
                               "1:6: parse error: unexpected end of input")


def test_non_matrix_result_raises():
    # the documented instant-query (/api/v1/query) answer
    vector = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "up", "job": "prometheus", "instance": "localhost:9090"},
         "value": [1435781451.781, "1"]}]}})
    with pytest.raises(InputError, match="resultType 'vector' \\(an instant query's result, /api/v1/query\\) \\(expected 'matrix'"):
        parse_query_range(vector, "job")
    with pytest.raises(InputError, match="not valid JSON"):
        parse_query_range("<html>502 Bad Gateway</html>", "job")


def test_hourly_means_ignore_nan_and_drop_empty_hours():
    # 15-minute steps over 10:00-12:45; hour 11 has only NaN samples
    chat = [(T0, "10"), (T0 + 900, "20"), (T0 + 1800, "NaN"), (T0 + 2700, "30"),
            (T0 + 3600, "NaN"), (T0 + 4500, "NaN"),
            (T0 + 7200, "4"), (T0 + 8100, "5")]
    embed = [(T0 + 1800, "0.5"), (T0 + 3599, "1.5")]
    records = parse_query_range(_body(_series({"service": "chat"}, chat), _series({"service": "embed"}, embed)),
                                "service").frame
    hourly = aggregate_hourly(records)
    assert list(hourly.columns) == list(HOURLY_COLUMNS)
    hour = [pd.Timestamp("2024-03-19T10:00:00Z"), pd.Timestamp("2024-03-19T12:00:00Z")]
    assert hourly["service"].tolist() == ["chat", "chat", "embed"]
    assert hourly["ts"].tolist() == [hour[0], hour[1], hour[0]]
    assert hourly["value"].tolist() == [20.0, 4.5, 1.0]
    assert hourly["n_samples"].tolist() == [3, 2, 2]
    per_hour = aggregate_hourly(records, per_hour=True)
    assert per_hour["value"].tolist() == [72000.0, 16200.0, 3600.0]  # rate/s x 3600 s
    assert str(hourly["ts"].dtype) == "datetime64[us, UTC]" and str(hourly["n_samples"].dtype) == "int64"


def test_hourly_refuses_frames_without_utc_times():
    naive = pd.DataFrame({"service": ["chat"], "ts": [pd.Timestamp("2024-03-19T10:00:00")], "value": [1.0]})
    with pytest.raises(InputError, match="ts has no time zone"):
        aggregate_hourly(naive)
    with pytest.raises(InputError, match="no column value"):
        aggregate_hourly(naive.drop(columns="value"))
