"""C28 (in process) and the tracking helpers: explicit SQLite store, experiments, aliases."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np

from pipelines.config.settings import PROJECT_ROOT, load_settings
from pipelines.tracking import forecast_runs
from pipelines.tracking import models as tracking_models
from pipelines.tracking import runs as tracking_runs
from pipelines.tracking import store as tracking_store


def test_default_tracking_uri_is_the_project_sqlite_store(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("GPUPLAN_TRACKING_URI", raising=False)
    s = load_settings()
    assert s.tracking_uri == f"sqlite:///{PROJECT_ROOT / 'mlruns' / 'mlflow.db'}"
    assert s.artifact_root == PROJECT_ROOT / "mlruns" / "artifacts"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert load_settings().tracking_uri == "http://127.0.0.1:5000"
    monkeypatch.setenv("GPUPLAN_TRACKING_URI", "sqlite:////x/y.db")
    assert load_settings().tracking_uri == "sqlite:////x/y.db"
    assert load_settings().artifact_root == Path("/x/artifacts")  # beside the database, not in the clone
    monkeypatch.setenv("GPUPLAN_ARTIFACT_ROOT", "/z/art")
    assert load_settings().artifact_root == Path("/z/art")


def test_store_in_fresh_cwd_logs_runs_and_models_without_strays(tmp_path, monkeypatch, caplog):
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    s = load_settings(tracking_uri=f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}", mlruns_dir=tmp_path / "store",
                      artifact_root=tmp_path / "store" / "artifacts")
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        ids = tracking_store.init_store(s)
        assert ids == tracking_store.init_store(s)  # idempotent
        assert set(ids) == {"training", "quantization", "batch_inference", "realtime", "scheduler", "plans", "benchmarks"}
        rid = tracking_runs.log_run(s, "plans", "p1", params={"planner": "milp"},
                               metrics={"objective": 12.5, "mip_gap": 0.05, "bad": float("nan"), "none": None})
        from forecasters import jobs
        from forecasters.generators import generate_history, generate_queue

        model = jobs.fit("training", generate_history("training", 200, seed=1), num_rounds=5)
        out = tracking_models.log_job_model(s, rid, model, generate_queue("training", 4, seed=2))
    assert (out["registered_name"], out["version"]) == ("gpuplan-training-forecaster", "1")
    runs = tracking_runs.finished_runs(s, "plans")
    assert [r.info.run_id for r in runs] == [rid]
    assert runs[0].data.metrics == {"objective": 12.5, "mip_gap": 0.05}
    from mlflow import MlflowClient

    c = MlflowClient(tracking_uri=s.tracking_uri, registry_uri=s.tracking_uri)
    mv = c.get_model_version_by_alias("gpuplan-training-forecaster", "champion")
    assert str(mv.version) == "1" and mv.current_stage in ("None", None)
    import mlflow.pyfunc

    loaded = mlflow.pyfunc.load_model("models:/gpuplan-training-forecaster@champion")
    queue = generate_queue("training", 6, seed=3)
    raw = queue.assign(training_variant=queue["training_variant"].astype(object))  # as parsed from JSON
    got, ref = loaded.predict(raw), jobs.predict(model, queue)
    assert np.allclose(got["duration_p50_h"], ref["duration_p50_h"], rtol=0, atol=1e-9)
    assert got["gpus_pred"].tolist() == ref["gpus_pred"].tolist()
    assert sorted(p.name for p in cwd.iterdir()) == []
    assert sorted(p.name for p in home.iterdir()) == []
    msgs = [str(w.message).lower() for w in caught] + [r.getMessage().lower() for r in caplog.records]
    assert not [m for m in msgs if "filesystem" in m or "file store" in m or "maintenance mode" in m], msgs
    art = Path(c.get_experiment_by_name(tracking_store.EXPERIMENTS["plans"]).artifact_location.removeprefix("file://"))
    assert art.is_relative_to(tmp_path / "store" / "artifacts")


def test_profile_run_logs_each_candidates_backtest_score_and_weight(tmp_path):
    """The real-time profile run carries the choice by backtest: scores with units in the names, weights, rule."""
    from types import SimpleNamespace

    s = load_settings(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", mlruns_dir=tmp_path,
                      artifact_root=tmp_path / "artifacts")
    tracking_store.init_store(s)
    png = tmp_path / "profile_chat.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    selection = {
        "rule": "inverse-MAE weights over the last 7 daily origins; split-conformal P90 per 6 h band",
        "n_inner_origins": 7, "n_scored_h": 160, "units": "requests/h",
        "candidates": {"profile": {"mae": 30.0, "weight": 0.25}, "naive24": {"mae": 10.0, "weight": 0.75}},
        "failed": {"mstl_ets": "ValueError: x"},
        "p90": {"kind": "ratio", "bands": [1.1, 1.2, 1.3, 1.4]},
        "hourly": {"kind": "flat", "w": 1.0, "rho": 0.8, "q90": 1.05, "mae_hourly": 4.0, "mae_persistence": 4.0,
                   "mae_day_ahead": 9.0, "mae_best": 3.9},
        "bounds": [1.0, 100.0],
    }
    prof = SimpleNamespace(method="combination", status="ok", timezone="UTC", components=("level", "combination"))
    from datetime import UTC, datetime

    rid = forecast_runs.log_realtime_forecast_run(s, "chat", prof, {"band_mae": 5.0}, datetime(2025, 3, 17, tzinfo=UTC), png,
                                   selection=selection)
    run = tracking_runs.finished_runs(s, "realtime")[0]
    assert run.info.run_id == rid
    m, p = run.data.metrics, run.data.params
    assert m["cand.profile.mae_requests_per_h"] == 30.0 and m["cand.naive24.mae_requests_per_h"] == 10.0
    assert m["cand.profile.weight"] == 0.25 and m["cand.naive24.weight"] == 0.75
    assert m["hourly.mae_requests_per_h"] == 4.0 and m["hourly.persistence_mae_requests_per_h"] == 4.0
    assert m["hourly.day_ahead_mae_requests_per_h"] == 9.0 and m["hourly.w"] == 1.0
    assert [m[f"p90.q_band{k}"] for k in range(4)] == [1.1, 1.2, 1.3, 1.4]
    assert m["band_mae_requests_per_h"] == 5.0 and "band_mae" not in m and m["selection.n_scored_h"] == 160
    assert p["selection.rule"] == selection["rule"] and p["selection.candidates"] == "profile,naive24"
    assert p["selection.failed"] == "mstl_ets: ValueError: x" and p["hourly.kind"] == "flat"
    assert "hourly.read_flagged" not in p and "p90.alpha" not in m  # an older record: nothing invented
    # a record of the hourly change model: its coefficients, combination weights, flag rule and P90 level
    sel2 = {**selection, "p90": {"kind": "ratio", "bands": [1.3], "alpha": 0.085},
            "hourly": {"kind": "combination", "rho": 0.8, "q90": 1.05, "read_flagged": True,
                       "coef": {"gap_day_ahead": 0.1, "seasonal_change": 0.7, "last_change": 0.0},
                       "weights": {"persistence": 0.2, "seasonal": 0.8}, "mae_hourly": 3.0}}
    p2, m2 = forecast_runs.selection_metrics(sel2)
    assert p2["hourly.kind"] == "combination" and p2["hourly.read_flagged"] is True
    assert m2["p90.alpha"] == 0.085 and m2["p90.q_band0"] == 1.3 and "p90.q_band1" not in m2
    assert (m2["hourly.coef.seasonal_change"], m2["hourly.weight.seasonal"], m2["hourly.mae_requests_per_h"]) == (
        0.7, 0.8, 3.0)
    assert tracking_runs.units_slug("requests/h") == "requests_per_h" and tracking_runs.units_slug("GPUs") == "GPUs"
