"""`gpuplan profile`: JSON contract on the shipped m-small file, exit codes for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from pipelines.cli import app

ROOT = Path(__file__).resolve().parents[3]
M_SMALL = ROOT / "data" / "traffic" / "servegen_m-small_hourly.csv"
DIAG_KEYS = {"rows_in", "hours", "missing_hours", "longest_gap_h", "duplicates_dropped", "ambiguous_hours",
             "nonexistent_hours", "off_grid_stamps", "outliers", "constant", "components", "timezone", "zone",
             "level_shift"}


def test_profile_json_contract_on_shipped_m_small():
    res = CliRunner().invoke(app, ["profile", "--traffic", str(M_SMALL), "--timezone", "Asia/Shanghai",
                                   "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {"method", "status", "forecast", "diagnostics"} <= set(doc)
    assert doc["status"] == "degraded"  # 336 hours: C03 rule, stated in the messages
    assert "got 336" in doc["messages"][0]
    d = doc["diagnostics"]
    assert set(d) == DIAG_KEYS
    assert d["rows_in"] == 335 and d["hours"] == 336 and d["missing_hours"] == 1 and d["longest_gap_h"] == 1
    assert "weekly_168h" in d["components"] and "daily_24h" in d["components"]
    # the given zone is the clock; the file's stamps are UTC (Z); no level shift in the shipped week
    assert d["timezone"] == "Asia/Shanghai" and d["zone"]["kind"] == "utc" and d["zone"]["message"] is None
    assert d["level_shift"] is None
    fc = doc["forecast"]
    assert len(fc) == 24
    last = pd.read_csv(M_SMALL)["ts"].iloc[-1]
    assert pd.Timestamp(fc[0]["ts"]) == pd.Timestamp(last) + pd.Timedelta(hours=1)
    assert fc[0]["ts"].endswith("Z")
    assert all(0 < r["p50"] <= r["p90"] for r in fc)


def test_profile_naive_file_without_zone_exits_2(tmp_path):
    f = tmp_path / "naive.csv"
    idx = pd.date_range("2025-01-06", periods=72, freq="h")
    pd.DataFrame({"ts": idx.strftime("%Y-%m-%d %H:%M:%S"), "value": 1.0}).to_csv(f, index=False)
    res = CliRunner().invoke(app, ["profile", "--traffic", str(f), "--json"])
    assert res.exit_code == 2
    assert "declare the source time zone" in res.stderr and res.stdout == ""
    ok = CliRunner().invoke(app, ["profile", "--traffic", str(f), "--timezone", "Europe/Berlin", "--json",
                                  "--horizon-h", "5"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["diagnostics"]["constant"] is True and len(doc["forecast"]) == 5
    assert doc["forecast"][0]["ts"] == "2025-01-08T23:00:00Z"  # 2025-01-09 00:00 CET
    assert {r["p50"] for r in doc["forecast"]} == {1.0}


def test_profile_missing_file_exits_2(tmp_path):
    res = CliRunner().invoke(app, ["profile", "--traffic", str(tmp_path / "nope.csv")])
    assert res.exit_code == 2 and "not found" in res.stderr
