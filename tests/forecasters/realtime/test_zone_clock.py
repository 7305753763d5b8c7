"""F06: a traffic file whose stamps carry a zone sets the seasonal clock (or says it cannot).

Each instance: a one-hour 09:00/10:00 local weekday peak (100, else 40) spanning a clock change, so a
wrong clock smears the peak over two UTC hours (the field case gave 57.2 and 57.4 instead of 100/40).
Values read are exact: a 12/84-harmonic profile spans every hour-of-week shape.
"""

from __future__ import annotations

from datetime import timedelta
from datetime import timezone as fixed_tz
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecasters.realtime import ingest
from forecasters.realtime.zones import GOLDEN_ZONES, parse_offsets_s, preferred_zone, zone_from_offsets
from pipelines.cli.profile import profile_document
from pipelines.io.traffic_io import read_traffic
from pipelines.stages.realtime import fit_realtime_forecasts, ingest_traffic, plan_start
from pipelines.workspace.config import ServiceSettings

FIELD2 = Path("/work/shared/cases/field-2")
needs_field2 = pytest.mark.skipif(not FIELD2.exists(), reason="needs the shared field-2 cases")


def _local_peak(start: str, end: str, tz: str, peak_hour: int) -> pd.DatetimeIndex:
    """Every UTC hour from local ``start`` to local ``end`` (inclusive), as local aware stamps."""
    lo = pd.Timestamp(start).tz_localize(tz).tz_convert("UTC")
    hi = pd.Timestamp(end).tz_localize(tz).tz_convert("UTC")
    return pd.date_range(lo, hi, freq="h").tz_convert(tz)


def _values(local: pd.DatetimeIndex, peak_hour: int) -> np.ndarray:
    return np.where((local.hour == peak_hour) & (local.day_of_week < 5), 100.0, 40.0)


def _offset_text(local: pd.DatetimeIndex) -> pd.Series:
    """ISO stamps with the local offset written as ``+HH:MM`` (what a zone-aware export writes)."""
    return pd.Series(local.strftime("%Y-%m-%dT%H:%M:%S%z")).str.replace(r"(\d{2})(\d{2})$", r"\1:\2", regex=True)


def _offset_frame(start: str, end: str, tz: str, peak_hour: int) -> pd.DataFrame:
    local = _local_peak(start, end, tz, peak_hour)
    return pd.DataFrame({"ts": _offset_text(local), "value": _values(local, peak_hour)})


def _p50(doc: dict, ts: str) -> float:
    return next(r["p50"] for r in doc["forecast"] if r["ts"] == ts)


# --- the field case ------------------------------------------------------------------------------------
@needs_field2
def test_f06_case_new_york_offsets_set_the_clock():
    doc = profile_document(read_traffic(FIELD2 / "ny_local_peak_offsets.csv"), None, 24)
    d = doc["diagnostics"]
    assert doc["status"] == "ok"
    assert d["timezone"] == "America/New_York"
    z = d["zone"]
    assert (z["kind"], z["source"], z["status"]) == ("iana", "offsets", "ok")
    assert z["offsets"] == ["-05:00", "-04:00"] and z["switches"] == ["2025-03-09T07:00:00Z"]
    assert len(z["candidates"]) == 27 and {"America/Toronto", "US/Eastern", "EST5EDT"} <= set(z["candidates"])
    assert doc["messages"][0].startswith("seasonal clock America/New_York from the file: UTC offsets -05:00 -> "
                                         "-04:00 switching at 2025-03-09T07:00:00Z match America/New_York; 26 "
                                         "other zone(s) match too")
    # Monday 2025-03-24 09:00 EDT = 13:00Z is the peak; 14:00Z is not (today: 57.2 and 57.4)
    assert _p50(doc, "2025-03-24T13:00:00Z") == pytest.approx(100.0, abs=0.5)
    assert _p50(doc, "2025-03-24T14:00:00Z") == pytest.approx(40.0, abs=0.5)
    assert _p50(doc, "2025-03-24T12:00:00Z") == pytest.approx(40.0, abs=0.5)


@needs_field2
def test_f06_case_given_zone_wins_and_notes_the_files_zone():
    df = read_traffic(FIELD2 / "ny_local_peak_offsets.csv")
    doc = profile_document(df, "Europe/Berlin", 24)
    assert doc["diagnostics"]["timezone"] == "Europe/Berlin" and doc["diagnostics"]["zone"]["zone"] == "America/New_York"
    assert doc["messages"][0].startswith("timezone Europe/Berlin (given) is the seasonal clock; UTC offsets -05:00")
    assert doc["messages"][0].endswith("which the given zone overrides")
    same = profile_document(df, "America/Toronto", 24)  # a matching zone: nothing to note
    assert not any("overrides" in m for m in same["messages"])
    assert _p50(same, "2025-03-24T13:00:00Z") == pytest.approx(100.0, abs=0.5)


# --- further instances -----------------------------------------------------------------------------------
def test_f06_new_york_fall_back_offsets():
    # -04:00 -> -05:00 at 2025-11-02 06:00Z; the Monday after, 09:00 EST = 14:00Z
    doc = profile_document(_offset_frame("2025-10-06", "2025-11-16 23:00", "America/New_York", 9), None, 24)
    z = doc["diagnostics"]["zone"]
    assert doc["status"] == "ok" and doc["diagnostics"]["timezone"] == "America/New_York"
    assert z["offsets"] == ["-04:00", "-05:00"] and z["switches"] == ["2025-11-02T06:00:00Z"]
    assert _p50(doc, "2025-11-17T14:00:00Z") == pytest.approx(100.0, abs=0.5)
    assert _p50(doc, "2025-11-17T13:00:00Z") == pytest.approx(40.0, abs=0.5)


def test_f06_central_european_spring_switch_last_sunday_of_march():
    # +01:00 -> +02:00 at 2025-03-30 01:00Z (CET -> CEST); 10:00 CEST on Monday 2025-04-14 = 08:00Z
    doc = profile_document(_offset_frame("2025-03-03", "2025-04-13 23:00", "Europe/Berlin", 10), None, 24)
    d = doc["diagnostics"]
    assert doc["status"] == "ok"
    # 37 names reproduce CET/CEST; Europe/Paris is CLDR's golden zone of Europe_Central
    assert d["timezone"] == "Europe/Paris" and len(d["zone"]["candidates"]) == 37
    assert {"Europe/Berlin", "Europe/Rome", "CET"} <= set(d["zone"]["candidates"])
    assert d["zone"]["switches"] == ["2025-03-30T01:00:00Z"]
    assert _p50(doc, "2025-04-14T08:00:00Z") == pytest.approx(100.0, abs=0.5)
    assert _p50(doc, "2025-04-14T09:00:00Z") == pytest.approx(40.0, abs=0.5)


def test_f06_western_european_autumn_switch_with_plus_zero_offsets():
    # Lisbon +01:00 -> +00:00 at 2025-10-26 01:00Z: "+00:00" stamps that are not UTC; London is CLDR's
    # golden zone (British) among the matches. 09:00 WET on Monday 2025-11-10 = 09:00Z.
    doc = profile_document(_offset_frame("2025-09-29", "2025-11-09 23:00", "Europe/Lisbon", 9), None, 24)
    d = doc["diagnostics"]
    assert d["timezone"] == "Europe/London" and "Europe/Lisbon" in d["zone"]["candidates"]
    assert d["zone"]["offsets"] == ["+01:00", "+00:00"] and d["zone"]["switches"] == ["2025-10-26T01:00:00Z"]
    assert _p50(doc, "2025-11-10T09:00:00Z") == pytest.approx(100.0, abs=0.5)
    assert _p50(doc, "2025-11-10T08:00:00Z") == pytest.approx(40.0, abs=0.5)


def test_f06_parquet_with_tz_aware_dtype(tmp_path):
    local = _local_peak("2025-02-17", "2025-03-23 23:00", "America/Chicago", 9)
    f = tmp_path / "chicago.parquet"
    pd.DataFrame({"ts": local, "value": _values(local, 9)}).to_parquet(f, index=False)
    df = read_traffic(f)
    assert isinstance(df["ts"].dtype, pd.DatetimeTZDtype)
    doc = profile_document(df, None, 24)
    d = doc["diagnostics"]
    assert doc["status"] == "ok" and d["timezone"] == "America/Chicago"
    assert (d["zone"]["kind"], d["zone"]["source"]) == ("iana", "dtype")
    assert doc["messages"][0] == "seasonal clock America/Chicago from the file: the ts column's zone is America/Chicago"
    # Monday 2025-03-24 09:00 CDT = 14:00Z
    assert _p50(doc, "2025-03-24T14:00:00Z") == pytest.approx(100.0, abs=0.5)
    assert _p50(doc, "2025-03-24T15:00:00Z") == pytest.approx(40.0, abs=0.5)


def test_f06_fixed_offset_file_is_a_fixed_offset_clock_and_degraded():
    # -05:00 on every stamp across 2025-03-09: only the offset is known (Bogota? New York in winter?)
    local = _local_peak("2025-02-17", "2025-03-23 23:00", "America/Bogota", 9)
    df = pd.DataFrame({"ts": _offset_text(local), "value": _values(local, 9)})
    doc = profile_document(df, None, 24)
    d = doc["diagnostics"]
    assert doc["status"] == "degraded" and d["timezone"] == "UTC-05:00"
    assert (d["zone"]["kind"], d["zone"]["status"]) == ("fixed_offset", "degraded")
    assert doc["messages"][0].startswith("seasonal clock is the fixed offset UTC-05:00: every stamp has offset "
                                         "-05:00: that identifies only the offset UTC-05:00, not an IANA zone")
    assert "declare the IANA zone" in doc["messages"][0]
    # the fixed clock keeps 09:00 at 14:00Z (right for a zone without DST)
    assert _p50(doc, "2025-03-24T14:00:00Z") == pytest.approx(100.0, abs=0.5)
    # the same stamps in a parquet column with a fixed-offset dtype: same finding
    fixed = pd.DataFrame({"ts": local.tz_convert(fixed_tz(timedelta(hours=-5))), "value": _values(local, 9)})
    _, diag = ingest(fixed, None)
    assert (diag["timezone"], diag["zone"]["kind"], diag["zone"]["source"]) == ("UTC-05:00", "fixed_offset", "dtype")


def test_f06_switch_at_no_zones_date_is_unmatched_and_degraded():
    # -05:00 -> -04:00 one week after the US change: no zone switches there
    idx = pd.date_range("2025-03-01T05:00Z", "2025-03-25T03:00Z", freq="h")
    off = np.where(idx < pd.Timestamp("2025-03-16T07:00Z"), -5, -4)
    text = [(t + pd.Timedelta(hours=int(o))).strftime("%Y-%m-%dT%H:%M:%S") + f"-0{-o}:00" for t, o in zip(idx, off)]
    _, diag = ingest(pd.DataFrame({"ts": text, "value": 1.0 + (idx.hour == 14)}), None)
    z = diag["zone"]
    assert (z["kind"], z["status"], diag["timezone"]) == ("unmatched", "degraded", "UTC-04:00")
    assert z["switches"] == ["2025-03-16T07:00:00Z"]
    assert "match no IANA zone" in z["message"]


def test_f06_utc_stamps_keep_the_default_clock_quietly(make_utc):
    _, diag = ingest(make_utc("2025-01-06T00:00", 48, np.arange(48.0)), None)
    assert diag["timezone"] == "UTC" and diag["zone"]["kind"] == "utc" and diag["zone"]["message"] is None


def test_zone_preference_canonical_then_golden_then_alphabetical():
    assert preferred_zone(["US/Eastern", "America/Toronto", "America/New_York", "EST5EDT"]) == "America/New_York"
    assert preferred_zone(["CET", "Europe/Berlin", "Africa/Ceuta", "Europe/Paris"]) == "Europe/Paris"
    assert preferred_zone(["Canada/Eastern", "America/Toronto", "America/Detroit"]) == "America/Detroit"
    assert "Europe/Paris" in GOLDEN_ZONES and "America/New_York" in GOLDEN_ZONES


def test_parse_offsets_forms():
    got = parse_offsets_s(pd.Series(["2025-01-01T00:00:00Z", "2025-01-01T00:00:00+05:30",
                                     "2025-01-01T00:00:00-0400", "2025-01-01T00:00:00z"]))
    assert got.tolist() == [0, 19800, -14400, 0]


def test_zone_from_offsets_any_row_order():
    local = _local_peak("2025-03-08", "2025-03-10 23:00", "America/New_York", 9)
    text = _offset_text(local).sample(frac=1.0, random_state=3).reset_index(drop=True)
    found = zone_from_offsets(pd.DatetimeIndex(pd.to_datetime(text, utc=True, format="ISO8601")),
                              parse_offsets_s(text))
    assert found.zone == "America/New_York" and found.switches == ("2025-03-09T07:00:00Z",)


# --- the pipeline: a service's configured timezone wins ----------------------------------------------------
def test_f06_pipeline_service_timezone_wins_over_the_files_zone():
    raw = _offset_frame("2025-02-17", "2025-03-23 23:00", "America/New_York", 9)
    svc = ServiceSettings(service="chat", file="chat.csv", timezone="Asia/Tokyo", capacity_per_gpu_per_h=10.0,
                          headroom=0.0, min_gpus=0, max_gpus=20, swap_cap_gpus=4)
    ing = ingest_traffic([svc], {"chat": raw})
    diag = ing.diagnostics["chat"]
    assert diag["timezone"] == "Asia/Tokyo" and diag["zone"]["zone"] == "America/New_York"
    assert diag["zone"]["message"].startswith("timezone Asia/Tokyo (given) is the seasonal clock; UTC offsets")
    fit = fit_realtime_forecasts([svc], ing.frame, plan_start(ing.frame))
    assert fit.profiles["chat"].timezone == "Asia/Tokyo"
