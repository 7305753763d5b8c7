"""C25: schedules on the right clock, one nightly run per local day, UTC replan slots, no ephemeral serving."""

from __future__ import annotations

import asyncio
import json
import socket
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from pipelines.config.settings import Settings
from pipelines.flows.deployments import require_persistent_server
from pipelines.flows.schedules import claim_local_day, local_day, replan_cron, runs_per_local_day, schedule_dates
from pipelines.io.errors import InputError
from pipelines.io.slots import slot_label

LONDON = ZoneInfo("Europe/London")


def _dates(cron, tz, start, end):
    return asyncio.run(schedule_dates(cron, tz, start, end))


def test_daily_0130_london_over_autumn_change_runs_once_per_local_day():
    # C25 (c): 01:30 happens twice on 2025-10-26 in Europe/London
    runs = _dates("30 1 * * *", "Europe/London", datetime(2025, 10, 25, tzinfo=LONDON),
                  datetime(2025, 10, 28, tzinfo=LONDON))
    assert runs == [datetime(2025, 10, 25, 0, 30, tzinfo=UTC),  # BST
                    datetime(2025, 10, 26, 0, 30, tzinfo=UTC),  # first 01:30 (BST)
                    datetime(2025, 10, 27, 1, 30, tzinfo=UTC)]  # GMT
    assert [local_day(t, "Europe/London") for t in runs] == [date(2025, 10, 25), date(2025, 10, 26),
                                                             date(2025, 10, 27)]


def test_local_day_rule_drops_a_second_run_on_the_repeated_hour():
    # what an older scheduler produced (PrefectHQ/prefect#7381): both 01:30 BST and 01:30 GMT
    produced = [datetime(2025, 10, 25, 0, 30, tzinfo=UTC), datetime(2025, 10, 26, 0, 30, tzinfo=UTC),
                datetime(2025, 10, 26, 1, 30, tzinfo=UTC), datetime(2025, 10, 27, 1, 30, tzinfo=UTC)]
    kept = runs_per_local_day(produced, "Europe/London")
    assert kept == [produced[0], produced[1], produced[3]]


def test_claim_local_day_once(tmp_path):
    marker = tmp_path / "models" / "nightly_days.json"
    assert claim_local_day(marker, date(2025, 10, 26))
    assert not claim_local_day(marker, date(2025, 10, 26))
    assert claim_local_day(marker, date(2025, 10, 27))


def test_nightly_0200_follows_local_clock_across_spring_change():
    runs = _dates("0 2 * * *", "America/New_York", datetime(2025, 3, 8, tzinfo=UTC), datetime(2025, 3, 11, tzinfo=UTC))
    # 02:00 does not exist on 2025-03-09 in New York; still exactly one run that local day
    assert [local_day(t, "America/New_York") for t in runs] == [date(2025, 3, 8), date(2025, 3, 9), date(2025, 3, 10)]
    assert runs[1] == datetime(2025, 3, 9, 7, tzinfo=UTC)  # 03:00 EDT: the skipped 02:00 runs at the next instant


def test_replan_on_utc_clock_gives_25_hourly_plans_on_the_london_autumn_day():
    # C25 (b): the replan schedule is on UTC; the local day 2025-10-26 has 25 UTC hours
    start, end = datetime(2025, 10, 26, tzinfo=LONDON), datetime(2025, 10, 27, tzinfo=LONDON)
    hourly = _dates("0 * * * *", "UTC", start, end)
    slots = [slot_label(t, 60) for t in hourly]
    assert len(slots) == 25 and len(set(slots)) == 25
    half = _dates(replan_cron(Settings()), "UTC", start, end)
    assert len(half) == 50 and len({slot_label(t) for t in half}) == 50
    # the same hourly cron on the London clock fires on "new schedule hours" only: 24, one UTC hour lost
    assert len(_dates("0 * * * *", "Europe/London", start, end)) == 24


def test_replan_cron_strings():
    assert replan_cron(Settings()) == "*/30 * * * *"
    assert replan_cron(Settings(replan_every_min=60)) == "0 */1 * * *"
    assert replan_cron(Settings(replan_every_min=120)) == "0 */2 * * *"
    with pytest.raises(InputError, match="replan_every_min"):
        replan_cron(Settings(replan_every_min=45))


def test_serve_refuses_a_temporary_server(monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_API_URL", "")
    with pytest.raises(InputError, match="temporary Prefect server has no scheduler"):
        require_persistent_server("")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match="not reachable"):
        require_persistent_server(f"http://127.0.0.1:{port}/api", timeout_s=1)


def test_nightly_timezone_must_be_iana():
    with pytest.raises(ValueError, match="unknown IANA time zone"):
        Settings(nightly_timezone="Mars/Olympus")


def test_gpuplan_serve_exits_2_without_a_persistent_server(monkeypatch):
    from typer.testing import CliRunner

    from pipelines.cli.app import app

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_API_URL", "")
    res = CliRunner().invoke(app, ["serve"])
    assert res.exit_code == 2
    assert "temporary Prefect server has no scheduler" in res.output
    assert "prefect server start --host 127.0.0.1" in res.output


@pytest.mark.heavy
def test_nightly_flow_runs_once_per_local_day(prefect_server, iso_env, monkeypatch, prefect_api):
    # C25 (c) at flow level: 01:30 BST and 01:30 GMT on 2025-10-26 are one London day
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.config.settings import load_settings
    from pipelines.flows.retrain import train_forecasters
    from pipelines.tracking import runs as tracking_runs

    monkeypatch.setenv("GPUPLAN_NIGHTLY_TZ", "Europe/London")
    with temporary_settings({PREFECT_API_URL: prefect_server["url"]}):
        first = train_forecasters(scheduled_at=datetime(2025, 10, 26, 0, 30, tzinfo=UTC), kinds=["quantization"])
        second = train_forecasters(scheduled_at=datetime(2025, 10, 26, 1, 30, tzinfo=UTC), kinds=["quantization"])
        third = train_forecasters(scheduled_at=datetime(2025, 10, 27, 1, 30, tzinfo=UTC), kinds=["quantization"])
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=10)  # the runs' INFO lines reach the server before the session stops it
    assert (first["local_day"], first["skipped"]) == ("2025-10-26", False)
    assert (second["local_day"], second["skipped"]) == ("2025-10-26", True)
    assert (third["local_day"], third["skipped"]) == ("2025-10-27", False)
    runs = tracking_runs.finished_runs(load_settings(), "quantization")
    # the 27th retrains on the unchanged shipped history: nothing new is logged or registered (issue 33)
    assert len(runs) == 1 and all("metrics.mape" in r.data.metrics for r in runs)
    # issue 14: each retraining publishes its metrics beside the baselines and the champion version
    arts = prefect_api("/artifacts/filter", {"artifacts": {"key": {"any_": ["retrain-metrics-demo"]}},
                                             "sort": "CREATED_DESC"})[::-1]
    assert [a["type"] for a in arts] == ["table", "table"]  # the two runs that retrained (not the skipped one)
    m = runs[0].data.metrics
    for art in arts:
        rows = json.loads(art["data"])
        assert [(r["forecaster"], r["model"], r["version"], r["alias"]) for r in rows] == [
            ("quantization", "LightGBM", "1", "champion"), ("quantization", "baseline: per_variant_median", None, None),
            ("quantization", "baseline: analytic", None, None)]
        assert [r["mae"] for r in rows] == pytest.approx([m["metrics.mae_h"], m["baselines.per_variant_median.mae_h"],
                                                          m["baselines.analytic.mae_h"]], rel=1e-5)
        assert rows[0]["mae_units"] == "h" and rows[0]["coverage_frac"] == pytest.approx(m["metrics.coverage_p10_p90"],
                                                                                          rel=1e-5)
    md = prefect_api("/artifacts/filter", {"artifacts": {"key": {"any_": ["retrain-summary-demo"]}},
                                           "sort": "CREATED_DESC"})[::-1]
    assert [a["type"] for a in md] == ["markdown", "markdown"]
    assert md[1]["data"].startswith("# Retraining 2025-10-27\n") and "- quantization: version **1**" in md[1]["data"]


def test_bad_setting_from_environment_is_bad_input(monkeypatch):
    from pipelines.config.settings import load_settings

    monkeypatch.setenv("GPUPLAN_NIGHTLY_TZ", "Mars/Base")
    with pytest.raises(InputError, match="setting nightly_timezone: .*unknown IANA time zone 'Mars/Base'"):
        load_settings()
    monkeypatch.setenv("GPUPLAN_NIGHTLY_TZ", "UTC")
    monkeypatch.setenv("GPUPLAN_N_GPUS", "48")
    with pytest.raises(InputError, match="expected a power of two, got 48"):
        load_settings()
