"""MLflow: accuracy you can inspect (issue 14).

Run names by kind, data cut-off and date; the real-time backtest per service with units in the metric
names and its forecast-against-actual plot; registry versions with a description and their holdout
metrics; no parameter holding a long list. All in a temporary store.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.config.settings import load_settings
from pipelines.tracking import forecast_runs
from pipelines.tracking import models as tracking_models
from pipelines.tracking import runs as tracking_runs
from pipelines.tracking import store as tracking_store

ON = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


@pytest.fixture()
def store(tmp_path):
    s = load_settings(tracking_uri=f"sqlite:///{tmp_path / 'st' / 'mlflow.db'}", mlruns_dir=tmp_path / "st")
    assert s.artifact_root == tmp_path / "st" / "artifacts"  # beside the database, never the clone's mlruns/
    tracking_store.init_store(s)
    return s


def _client(s):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=s.tracking_uri, registry_uri=s.tracking_uri)


def _artifact_files(s, rid: str) -> list[str]:
    import mlflow.artifacts

    root = Path(mlflow.artifacts.download_artifacts(run_id=rid, tracking_uri=s.tracking_uri))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_run_names_say_kind_cutoff_and_date():
    assert tracking_runs.run_name("realtime", "2025-03-14T00:00:00+00:00", on=ON) == "realtime cutoff=2025-03-14 2026-12-01"
    assert (tracking_runs.run_name("profile", pd.Timestamp("2025-03-16T15:00Z"), "m-small", on=ON)
            == "profile m-small cutoff=2025-03-16 15:00Z 2026-12-01")
    assert tracking_runs.run_name("plan", "2025-03-16T16:00:00+08:00", "demo", on=ON) == "plan demo cutoff=2025-03-16 08:00Z 2026-12-01"
    assert tracking_runs.run_name("training", None, on=ON) == "training 2026-12-01"


def test_a_long_list_is_an_artifact_not_a_parameter_and_a_curve_is_a_metric_history(store):
    curve = [0.5 - 0.001 * i for i in range(400)]
    rid = tracking_runs.log_run(store, "training", "t", params={"info.oof_mse_log_by_round": curve, "short": [1, 2, 3],
                                                           "n": 5},
                           metric_steps={"cv.oof_mse_log": curve + [float("nan")]})
    run = _client(store).get_run(rid)
    assert run.data.params == {"info.oof_mse_log_by_round": "400 values: params/info.oof_mse_log_by_round.json",
                               "short": "[1, 2, 3]", "n": "5"}
    assert max(len(v) for v in run.data.params.values()) < 100
    assert _artifact_files(store, rid) == ["params/info.oof_mse_log_by_round.json"]
    import mlflow.artifacts

    got = json.loads(mlflow.artifacts.load_text(f"runs:/{rid}/params/info.oof_mse_log_by_round.json"))
    assert got == curve
    hist = _client(store).get_metric_history(rid, "cv.oof_mse_log")
    assert [m.step for m in hist] == list(range(400)) and hist[399].value == pytest.approx(0.101)


def _rt_doc() -> tuple[dict, dict[str, pd.DataFrame]]:
    ts = pd.date_range("2025-03-13T16:00Z", periods=48, freq="h")
    hours = {"m-small": pd.DataFrame({"ts": ts, "actual": np.full(48, 100.0), "p50": np.full(48, 90.0),
                                      "p90": np.full(48, 120.0), "snaive168": np.full(48, 70.0),
                                      "naive24": np.full(48, 80.0), "persistence": np.full(48, 95.0)})}
    svc = {"status": "ok", "messages": [], "method": "combination", "units": "requests/h",
           "cutoff": "2025-03-16T15:00:00+00:00", "n_hours": 48, "n_days": 2, "horizon_h": 24,
           "origins": ["2025-03-13T16:00:00+00:00", "2025-03-14T16:00:00+00:00"], "masked_hours": 1, "outliers": [],
           "metrics": {"mae": 10.0, "mase_snaive168": 10 / 30, "mase_naive24": 0.5, "mase_persistence": 2.0,
                       "mape": 0.1, "p90_coverage": 1.0},
           "baselines": {"snaive168": {"mae": 30.0}, "naive24": {"mae": 20.0}, "persistence": {"mae": 5.0}},
           "hourly_recal": {"mae": 6.0, "mase_snaive168": 0.2, "mase_naive24": 0.3, "mase_persistence": None,
                            "mape": 0.06, "p90_coverage": 0.9},
           "candidates": {"profile": {"mae": 12.0, "mase_naive24": 0.6, "mase_snaive168": 0.4}},
           "weights": {"profile": 1.0}}
    return {"kind": "realtime", "services": {"m-small": svc}}, hours


def test_realtime_backtest_run_per_service_with_units_baselines_and_plot(store):
    doc, hours = _rt_doc()
    rid = forecast_runs.log_realtime_backtest(store, doc, hours, on=ON)
    run = _client(store).get_run(rid)
    assert run.info.run_name == "realtime cutoff=2025-03-16 15:00Z 2026-12-01"
    assert run.data.tags["gpuplan.stage"] == "nightly"
    assert run.data.tags["mlflow.note.content"].splitlines()[-1] == (
        "- m-small: day-ahead MAE 10 requests/h = 0.333 x seasonal naive 168 h, 0.500 x naive 24 h; P90 coverage 1.000 "
        "over 48 hours (2 daily origins up to 2025-03-16T15:00:00+00:00)")
    assert run.data.metrics == {
        "rt.m-small.mae_requests_per_h": 10.0, "rt.m-small.mae_ratio_vs_snaive168": pytest.approx(1 / 3),
        "rt.m-small.mae_ratio_vs_naive24": 0.5, "rt.m-small.mape_frac": 0.1,
        "rt.m-small.p90_coverage_backtest_frac": 1.0,
        "rt.m-small.hourly.mae_requests_per_h": 6.0, "rt.m-small.hourly.mae_ratio_vs_snaive168": 0.2,
        "rt.m-small.hourly.mae_ratio_vs_naive24": 0.3, "rt.m-small.hourly.mape_frac": 0.06,
        "rt.m-small.hourly.p90_coverage_backtest_frac": 0.9,  # a MASE of None (zero baseline error) is left out
        "rt.m-small.baseline.snaive168.mae_requests_per_h": 30.0, "rt.m-small.baseline.naive24.mae_requests_per_h": 20.0,
        "rt.m-small.baseline.persistence.mae_requests_per_h": 5.0, "rt.m-small.cand.profile.mae_requests_per_h": 12.0,
        "rt.m-small.cand.profile.mae_ratio_vs_naive24": 0.6, "rt.m-small.cand.profile.mae_ratio_vs_snaive168": 0.4,
        "rt.m-small.weight.profile": 1.0, "rt.m-small.n_scored_h": 48.0, "rt.m-small.n_origins": 2.0,
        "rt.m-small.masked_h": 1.0}
    p = run.data.params
    assert p["cutoff"] == "2025-03-16T15:00:00+00:00" and p["rt.m-small.units"] == "requests/h"
    assert p["rt.m-small.origins"] == "2025-03-13T16:00:00+00:00 .. 2025-03-14T16:00:00+00:00"
    assert _artifact_files(store, rid) == ["backtest/realtime_backtest.json", "plots/backtest_realtime.png"]
    import mlflow.artifacts

    png = Path(mlflow.artifacts.download_artifacts(f"runs:/{rid}/plots/backtest_realtime.png",
                                                   tracking_uri=store.tracking_uri))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_band_metrics_carry_units():
    assert tracking_runs.band_metrics({"band_mae": 5.0, "band_mape": 0.2, "band_p90_coverage": 0.667, "level_factor": 0.8,
                                  "history_hours": 336}, "requests/h") == {
        "band_mae_requests_per_h": 5.0, "band_mape_frac": 0.2, "band_p90_coverage_last24h_frac": 0.667,
        "level_factor_ratio": 0.8, "history_h": 336}


def test_registered_version_has_a_description_and_its_holdout_metrics(store):
    from forecasters import jobs as J
    from forecasters.generators import generate_history
    from pipelines.stages.models import TrainedModel, held_out

    hist = generate_history("quantization", 240, seed=4)
    train_rows, test = J.time_split(hist, 0.2)
    model = J.fit("quantization", train_rows, num_rounds=25)
    trained = TrainedModel(model, test, J.evaluate(model, test))
    rid = tracking_models.log_job_model_run(store, "quantization", model, trained.doc, test, held_out(trained),
                                     "/data/histories/quantization_jobs.parquet")
    c = _client(store)
    mv = c.get_model_version_by_alias("gpuplan-quantization-forecaster", "champion")
    m = trained.doc["metrics"]
    assert mv.run_id == rid
    assert float(mv.tags["holdout.mae_h"]) == pytest.approx(m["mae_h"], rel=1e-5)
    assert float(mv.tags["holdout.pinball_p90"]) == pytest.approx(m["pinball_p90"], rel=1e-5)
    assert float(mv.tags["holdout.baseline.per_variant_median.mae_h"]) == pytest.approx(
        trained.doc["baselines"]["per_variant_median"]["mae_h"], rel=1e-5)
    cutoff = pd.to_datetime(test["submitted_at"], utc=True).max()
    assert mv.tags["holdout.n_jobs"] == str(len(test)) and mv.tags["cutoff"] == cutoff.isoformat()
    assert mv.description.startswith(
        "quantization duration forecaster (LightGBM boosting on the analytic prior's residual; P10/P50/P90 hours and "
        f"GPUs), trained on the {trained.doc['n_train']} earliest jobs of the generated history quantization_jobs.parquet")
    base = trained.doc["baselines"]["analytic"]["mae_h"]
    assert (f"Holdout MAE {m['mae_h']:.4f} h = {m['mae_h'] / base:.3f} × analytic baseline ({base:.4f} h)"
            in mv.description) and rid in mv.description
    run = c.get_run(rid)
    assert run.info.run_name == tracking_runs.run_name("quantization", cutoff.isoformat())
    assert run.data.params["info.oof_mse_log_by_round"] == "25 values: params/info.oof_mse_log_by_round.json"
    assert len(c.get_metric_history(rid, "cv.oof_mse_log")) == 25
    assert max(len(v) for v in run.data.params.values()) < 300


def test_plan_run_named_by_workspace_and_plan_start_logs_the_html_report_when_present(store, tmp_path):
    run_dir = tmp_path / "20250316T1600Z_abc"
    run_dir.mkdir()
    (run_dir / "risk_report.md").write_text("# Risk report\n")
    (run_dir / "risk_report.html").write_text("<html><body>report</body></html>")
    summary = {"metrics": {"planned_utilization_pct": 68.7}, "objective": 3312.8, "bound": 3314.2, "mip_gap": 4e-4,
               "solve_s": 2.0, "proven_optimal": True, "status": "optimal", "plan_start": "2025-03-16T16:00:00+00:00",
               "fallback": False, "rt_status": {"m-small": ["ok", ""]},
               "cluster": {"workspace": "/srv/prod-a", "n_gpus": 64}}
    rid = tracking_runs.log_plan_run(store, run_dir, run_dir.name, "milp", summary,
                                {"m-small": {"band_mae": 5.0, "band_p90_coverage": 0.667}},
                                {"report/risk_report.md": run_dir / "risk_report.md"}, units={"m-small": "requests/h"})
    run = _client(store).get_run(rid)
    assert run.info.run_name == tracking_runs.run_name("plan", "2025-03-16T16:00:00+00:00", "prod-a")
    assert run.data.tags["gpuplan.run_folder"] == "20250316T1600Z_abc"
    assert run.data.metrics["m-small.band_mae_requests_per_h"] == 5.0
    assert run.data.metrics["m-small.band_p90_coverage_last24h_frac"] == 0.667
    assert _artifact_files(store, rid) == ["report/risk_report.html", "report/risk_report.md"]
