"""`gpuplan train --kind realtime`: the backtest report on the shipped services, its CLI and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import pipelines.cli.train as train_cmd
from pipelines.cli.app import app
from pipelines.cli.train import realtime_report as train_report
from pipelines.io.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
SERVICE_KEYS = {"status", "messages", "method", "units", "cutoff", "n_hours", "n_days", "horizon_h", "origins",
                "masked_hours", "outliers", "metrics", "baselines", "hourly_recal", "candidates", "weights"}
METRIC_KEYS = {"mae", "mase_snaive168", "mase_naive24", "mase_persistence", "mase_persistence_obs", "mape",
               "p90_coverage"}
CANDIDATES = ["profile", "naive24", "mean7", "ets", "mstl_ets"]


@pytest.fixture(scope="module", autouse=True)
def isolated_mlflow(tmp_path_factory):
    """`gpuplan train` logs to MLflow: this module's runs go to a store of its own."""
    with pytest.MonkeyPatch.context() as mp:
        root = tmp_path_factory.mktemp("train_mlflow")
        mp.setenv("GPUPLAN_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield root


@pytest.fixture(scope="module")
def report(isolated_mlflow) -> dict:
    return train_report()


@pytest.fixture(scope="module")
def benchmark() -> dict:
    """What benchmarks/backtest_realtime.py prints with --json (same default settings)."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "backtest_realtime.py"), "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout)


def test_report_keys_are_exact(report):
    cfg = json.loads((ROOT / "data" / "traffic" / "services.json").read_text())
    assert set(report) == {"kind", "services"} and report["kind"] == "realtime"
    assert list(report["services"]) == [s["service"] for s in cfg["services"]]
    for doc in report["services"].values():
        assert set(doc) == SERVICE_KEYS
        assert set(doc["metrics"]) == METRIC_KEYS and set(doc["hourly_recal"]) == METRIC_KEYS
        assert set(doc["baselines"]) == {"snaive168", "naive24", "persistence", "persistence_obs"}
        assert all(set(b) == {"mae"} for b in doc["baselines"].values())
        assert list(doc["candidates"]) == CANDIDATES and list(doc["weights"]) == CANDIDATES
        assert all(set(c) == {"mae", "mase_naive24", "mase_snaive168"} for c in doc["candidates"].values())
        assert sum(doc["weights"].values()) == pytest.approx(1.0, abs=1e-12)
    json.dumps(report, allow_nan=False)  # JSON-able as emit_json needs it


def test_report_is_logged_as_one_realtime_run_with_units_baselines_and_plot(report, isolated_mlflow):
    import pandas as pd
    from mlflow import MlflowClient

    uri = f"sqlite:///{isolated_mlflow / 'mlflow.db'}"
    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name("gpuplan-forecaster-realtime")
    today = pd.Timestamp.now(tz="UTC").strftime("%Y-%m-%d")
    runs = [r for r in c.search_runs([exp.experiment_id])
            if r.info.run_name == f"realtime cutoff=2025-03-16 15:00Z {today}"]
    assert runs and all(r.data.tags["gpuplan.stage"] == "train" for r in runs)
    m = runs[-1].data.metrics
    for name, doc in report["services"].items():
        assert doc["cutoff"] == "2025-03-16T15:00:00+00:00"
        assert m[f"rt.{name}.mae_requests_per_h"] == pytest.approx(doc["metrics"]["mae"], rel=1e-12)
        assert m[f"rt.{name}.mae_ratio_vs_snaive168"] == pytest.approx(doc["metrics"]["mase_snaive168"], rel=1e-12)
        assert m[f"rt.{name}.mae_ratio_vs_naive24"] == pytest.approx(doc["metrics"]["mase_naive24"], rel=1e-12)
        assert m[f"rt.{name}.p90_coverage_backtest_frac"] == pytest.approx(doc["metrics"]["p90_coverage"], rel=1e-12)
        assert m[f"rt.{name}.baseline.snaive168.mae_requests_per_h"] == pytest.approx(
            doc["baselines"]["snaive168"]["mae"], rel=1e-12)
    files = [f.path for f in c.list_artifacts(runs[-1].info.run_id, "plots")]
    assert files == ["plots/backtest_realtime.png"]


def test_report_values_equal_the_benchmark(report, benchmark):
    assert set(report["services"]) == set(benchmark)
    for name, doc in report["services"].items():
        b = benchmark[name]
        assert doc["origins"] == b["origins"] and doc["n_days"] == b["n_days"] == 7
        assert doc["masked_hours"] == b["masked_hours"] and doc["outliers"] == b["outliers"]
        for key, variant in (("metrics", "day_ahead"), ("hourly_recal", "hourly_recal")):
            v = b["variants"][variant]
            m = doc[key]
            assert doc["n_hours"] == v["n_hours"]
            assert m["mae"] == pytest.approx(v["mae"], rel=1e-12)
            assert m["mase_snaive168"] == pytest.approx(v["mase_snaive168"], rel=1e-12)
            assert m["mase_naive24"] == pytest.approx(v["mase_naive24"], rel=1e-12)
            assert m["mase_persistence"] == pytest.approx(v["mase_persistence"], rel=1e-12)
            assert m["mape"] == pytest.approx(v["mape_pct"] / 100, rel=1e-12)  # fraction, not percent
            assert m["p90_coverage"] == pytest.approx(v["p90_coverage"], rel=1e-12)
        day = b["variants"]["day_ahead"]
        assert doc["baselines"]["snaive168"]["mae"] == pytest.approx(day["mae_snaive168"], rel=1e-12)
        assert doc["baselines"]["naive24"]["mae"] == pytest.approx(day["mae_naive24"], rel=1e-12)
        assert doc["baselines"]["persistence"]["mae"] == pytest.approx(day["mae_persistence"], rel=1e-12)
        assert doc["baselines"]["persistence_obs"]["mae"] == pytest.approx(day["mae_persistence_obs"], rel=1e-12)
        for c, m in doc["candidates"].items():
            assert m["mae"] == pytest.approx(b["candidates"][c]["mae"], rel=1e-12)


def test_report_counts_and_identities_on_the_shipped_data(report):
    small, mid = report["services"]["m-small"], report["services"]["m-mid"]
    # 7 days x 24 h minus the masked gap hours inside the second week (m-small 1, m-mid 12 of its 17)
    assert (small["n_hours"], small["masked_hours"]) == (167, 1)
    assert (mid["n_hours"], mid["masked_hours"]) == (155, 17)
    assert small["origins"][0] == "2025-03-09T16:00:00+00:00"  # first hour + 168 h (local midnight, UTC+8)
    for doc in (small, mid):
        base = doc["baselines"]
        for m in (doc["metrics"], doc["hourly_recal"]):
            assert m["mase_snaive168"] == pytest.approx(m["mae"] / base["snaive168"]["mae"], rel=1e-12)
            assert m["mase_naive24"] == pytest.approx(m["mae"] / base["naive24"]["mae"], rel=1e-12)
            # coverage is a share of the scored hours
            assert np.isclose(m["p90_coverage"] * doc["n_hours"], round(m["p90_coverage"] * doc["n_hours"]))
            # the forecast beats seasonal naive and naive-24 on both services, day-ahead and hourly
            assert m["mase_snaive168"] < 1 and m["mase_naive24"] < 1
        # the hourly mode beats the day-ahead forecast (mae and mape)
        assert doc["hourly_recal"]["mae"] < doc["metrics"]["mae"]
        assert doc["hourly_recal"]["mape"] < doc["metrics"]["mape"] < 0.5
        # two shipped weeks (336 h) are below the C03 rule: degraded, and the message says why
        assert doc["status"] == "degraded" and "got 336" in doc["messages"][0]
        assert "fourier(168h" in doc["method"] and doc["units"] == "requests/h" and doc["horizon_h"] == 24
    # m-small's hourly change model: the seasonal change a persistence forecast misses (0.81 x y[t-1]); m-mid's
    # changes are noise, level with persistence (y[t-1] reads 5 imputed hours after masked gaps)
    assert small["hourly_recal"]["mase_persistence"] < 0.85
    # against persistence from the last observed hour on the second week: m-small's model beats it; on m-mid the
    # running guard (DESIGN §4.4) switches on noise at the 3 origins that kept a model and costs 0.6 % (0.996
    # without it, in benchmarks/forecast_realtime_real.py)
    assert small["hourly_recal"]["mase_persistence_obs"] < 0.85
    assert mid["hourly_recal"]["mase_persistence_obs"] == pytest.approx(1.00216, abs=5e-5)
    # regression pin on the shipped data (deterministic: numpy fits, no randomness): the number of scored
    # hours at or below P90, day-ahead and hourly. A P50-for-P90 or an off-by-one-hour bug moves them.
    # (Moved with the pooled P90 at the widen-only adaptive level and the hourly change model: from 138 / 135;
    # with the P90 per 6-h lead band and the guarded hourly mode, issue 31: from (145, 150) / (137, 144); with the
    # hourly mode's running guard: m-mid's hourly from 141.)
    covered = {name: tuple(round(doc[k]["p90_coverage"] * doc["n_hours"]) for k in ("metrics", "hourly_recal"))
               for name, doc in report["services"].items()}
    assert covered == {"m-small": (147, 150), "m-mid": (133, 140)}


def test_cli_realtime_json_is_one_document_equal_to_the_report(report):
    res = CliRunner().invoke(app, ["train", "--kind", "realtime", "--json"])
    assert res.exit_code == 0, res.output
    assert len(res.stdout.strip().splitlines()) == 1
    assert json.loads(res.stdout) == json.loads(json.dumps(report))


def test_cli_realtime_table_and_all_include_the_report(report, monkeypatch):
    # the computation itself is checked above; here only what the command prints around it
    monkeypatch.setattr(train_cmd, "realtime_report", lambda: report)
    res = CliRunner().invoke(app, ["train", "--kind", "realtime"])
    assert res.exit_code == 0, res.output
    for name, doc in report["services"].items():
        assert f"realtime {name}" in res.stdout
        assert f"{doc['metrics']['mae']:,.0f}" in res.stdout
        assert f"{doc['baselines']['snaive168']['mae']:,.0f}" in res.stdout

    monkeypatch.setattr(train_cmd, "train_job_kind", lambda kind: {"kind": kind})
    res = CliRunner().invoke(app, ["train", "--kind", "all", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [r["kind"] for r in doc["results"]] == ["training", "quantization", "batch_inference", "realtime"]
    assert doc["results"][-1] == json.loads(json.dumps(report))
    assert "skipped" not in res.stderr


def _write_services(folder: Path, services: list[dict]) -> None:
    (folder / "traffic").mkdir(parents=True, exist_ok=True)
    (folder / "traffic" / "services.json").write_text(json.dumps({"services": services}))


def _service(name: str, file: str) -> dict:
    return {"service": name, "file": file, "timezone": "UTC", "capacity_per_gpu_per_h": 1.0, "headroom": 0.1,
            "min_gpus": 1, "max_gpus": 4, "swap_cap_gpus": 1}


def test_bad_inputs_name_the_file_or_setting(tmp_path, make_utc):
    with pytest.raises(InputError, match="service settings not found: .*services.json"):
        train_report(tmp_path)
    _write_services(tmp_path, [_service("a", "a.csv")])
    with pytest.raises(FileNotFoundError, match="a.csv"):
        train_report(tmp_path)
    hod = np.arange(180) % 24
    make_utc("2025-01-06T00:00Z", 180, 100 + 10 * np.sin(2 * np.pi * hod / 24)).to_csv(
        tmp_path / "traffic" / "a.csv", index=False)
    with pytest.raises(ValueError, match="too short for a test window"):  # 180 h < 168 h + one day
        train_report(tmp_path)
    frame = make_utc("2025-01-06T00:00Z", 200, np.full(200, 5.0)).assign(service="other")
    frame.to_csv(tmp_path / "traffic" / "a.csv", index=False)
    with pytest.raises(InputError, match="no rows with service == 'a'"):
        train_report(tmp_path)


def test_cli_bad_realtime_input_exits_2_with_one_line(tmp_path, monkeypatch):
    real = train_cmd.realtime_report
    monkeypatch.setattr(train_cmd, "realtime_report", lambda: real(tmp_path))
    res = CliRunner().invoke(app, ["train", "--kind", "realtime", "--json"])
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: service settings not found")
