"""`gpuplan forecast`: the forecast `gpuplan run` plans with, hour for hour; its JSON contract; `profile` says what it is."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from pipelines.cli.app import app
from pipelines.cli.forecast import FORECAST_TABLE_NOTE

ROOT = Path(__file__).resolve().parents[3]
TRAFFIC = ROOT / "data" / "traffic"


def _forecast(path: Path, *extra: str) -> dict:
    res = CliRunner().invoke(app, ["forecast", "--traffic", str(path), "--timezone", "Asia/Shanghai", "--json",
                                   *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.heavy
def test_forecast_equals_the_demand_forecast_of_a_gpuplan_run_hour_for_hour(tmp_path, iso_env):
    res = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    run = pd.read_parquet(tmp_path / "runs" / "latest" / "forecasts.parquet")
    steps = run[run["entity"] == "service_step"].copy()
    steps["ts"] = pd.to_datetime(steps["ts"], utc=True)
    for service in ("m-small", "m-mid"):
        doc = _forecast(TRAFFIC / f"servegen_{service}_hourly.csv")
        mine = pd.DataFrame(doc["forecast"]).assign(ts=lambda d: pd.to_datetime(d["ts"], utc=True))
        hours = steps[(steps["service"] == service) & (steps["ts"].dt.minute == 0)].sort_values("ts")
        assert len(hours) == 24 and hours["ts"].tolist() == mine["ts"].tolist()
        assert hours["traffic_p50"].tolist() == mine["p50"].tolist()  # exactly: one function computes both
        assert hours["traffic_p90"].tolist() == mine["p90"].tolist()


def test_forecast_json_contract_on_shipped_m_small():
    doc = _forecast(TRAFFIC / "servegen_m-small_hourly.csv", "--horizon-h", "30")
    assert {"method", "status", "messages", "timezone", "plan_start", "forecast", "candidates", "hourly", "p90",
            "day_ahead_guard", "last_day", "diagnostics"} == set(doc)
    assert doc["timezone"] == "Asia/Shanghai" and doc["plan_start"] == "2025-03-16T16:00:00Z"
    fc = doc["forecast"]
    assert len(fc) == 30 and fc[0]["ts"] == doc["plan_start"] and all(0 < r["p50"] <= r["p90"] for r in fc)
    # lead bands of 6 h, the fourth holding every hour from 18 h on; the first hour is the hourly mode's alone
    assert [r["lead_band"] for r in fc] == [0] * 6 + [1] * 6 + [2] * 6 + [3] * 12
    assert fc[0]["hourly_share"] == 1.0 and fc[1]["hourly_share"] < 1.0
    bands = doc["p90"]["bands"]
    assert [b["lead_h"] for b in bands] == [[0, 5], [6, 11], [12, 17], [18, None]]
    assert all(b["quantile"] > 1 and 0 < b["coverage"] <= 1 for b in bands)
    assert sum(c["weight"] for c in doc["candidates"].values()) == pytest.approx(1.0)
    assert set(doc["candidates"]) == {"profile", "naive24", "mean7", "ets", "mstl_ets"}
    h = doc["hourly"]
    assert h["kind"] in ("combination", "persistence") and h["anchor"] in ("observed", "readable")
    assert {"mean_gain", "se", "t", "t_crit", "days", "wins"} == set(h["guard"])
    assert doc["diagnostics"]["rows_in"] == 335 and doc["diagnostics"]["missing_hours"] == 1


def test_profile_help_says_it_is_the_weekly_profile_alone():
    res = CliRunner().invoke(app, ["profile", "--help"])
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())
    assert "The weekly seasonal profile alone" in text and "gpuplan forecast prints what gpuplan run plans with" in text
    top = CliRunner().invoke(app, ["--help"]).stdout
    assert "forecast" in top


def test_forecast_refuses_a_bad_horizon_in_one_line():
    res = CliRunner().invoke(app, ["forecast", "--traffic", str(TRAFFIC / "servegen_m-small_hourly.csv"),
                                   "--horizon-h", "0"])
    assert res.exit_code == 2 and "--horizon-h must be between 1 and 336" in res.output


def test_forecast_table_names_its_units_and_columns():
    res = CliRunner().invoke(app, ["forecast", "--traffic", str(TRAFFIC / "servegen_m-small_hourly.csv"),
                                   "--horizon-h", "2"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    i = lines.index(FORECAST_TABLE_NOTE)
    assert lines[i + 1].split() == ["ts", "(UTC)", "p50", "per", "h", "p90", "per", "h", "hourly", "share"]
    assert len(lines) == i + 4 and lines[i + 2].startswith("2025-03-16T16:00:00Z") and lines[i + 2].endswith(" 1.00")


def test_forecast_text_says_what_multiplies_the_first_hours_p90():
    """The first hour's P90 is the hourly mode's own quantile, not its lead band's (a new user could not match them)."""
    doc = _forecast(TRAFFIC / "servegen_m-mid_hourly.csv", "--horizon-h", "2")
    q1 = doc["p90"]["hourly_q90"]
    first = doc["forecast"][0]
    assert doc["p90"]["kind"] == "ratio" and abs(first["p90"] / first["p50"] - q1) < 1e-9
    res = CliRunner().invoke(app, ["forecast", "--traffic", str(TRAFFIC / "servegen_m-mid_hourly.csv"),
                                   "--timezone", "Asia/Shanghai", "--horizon-h", "2"])
    assert f"P90 = P50 x the quantile of its lead band; the first hour: the hourly mode's own, x{q1:.3f}" \
        in res.stdout.splitlines()
    assert "candidates (backtest MAE in the file's units per hour): profile weight " in res.stdout
