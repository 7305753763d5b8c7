"""C28 (in process) and the tracking helpers: explicit SQLite store, experiments, aliases."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines import tracking
from pipelines.config import PROJECT_ROOT, load_settings


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
        ids = tracking.init_store(s)
        assert ids == tracking.init_store(s)  # idempotent
        assert set(ids) == {"training", "quantization", "batch_inference", "realtime", "plans", "benchmarks"}
        rid = tracking.log_run(s, "plans", "p1", params={"planner": "milp"},
                               metrics={"objective": 12.5, "mip_gap": 0.05, "bad": float("nan"), "none": None})
        import lightgbm as lgb

        x = pd.DataFrame({"a": np.arange(60.0), "c": pd.Categorical(["u", "v", "w"] * 20, categories=["u", "v", "w"])})
        y = x["a"].to_numpy() + (x["c"].cat.codes.to_numpy() * 10.0)
        booster = lgb.train({"objective": "regression", "verbose": -1, "num_threads": 1, "min_data_in_leaf": 2},
                            lgb.Dataset(x, y), num_boost_round=5)
        version = tracking.log_lightgbm_model(s, rid, booster, x.head(4), "test-duration")
    assert version == "1"
    runs = tracking.finished_runs(s, "plans")
    assert [r.info.run_id for r in runs] == [rid]
    assert runs[0].data.metrics == {"objective": 12.5, "mip_gap": 0.05}
    from mlflow import MlflowClient

    c = MlflowClient(tracking_uri=s.tracking_uri, registry_uri=s.tracking_uri)
    mv = c.get_model_version_by_alias("test-duration", "champion")
    assert str(mv.version) == "1" and mv.current_stage in ("None", None)
    import mlflow.pyfunc

    loaded = mlflow.pyfunc.load_model("models:/test-duration@champion")
    codes = x.head(4).assign(c=x.head(4)["c"].cat.codes.astype(float))
    assert np.allclose(loaded.predict(codes), booster.predict(x.head(4)))
    assert sorted(p.name for p in cwd.iterdir()) == []
    assert sorted(p.name for p in home.iterdir()) == []
    msgs = [str(w.message).lower() for w in caught] + [r.getMessage().lower() for r in caplog.records]
    assert not [m for m in msgs if "filesystem" in m or "file store" in m or "maintenance mode" in m], msgs
    art = Path(c.get_experiment_by_name(tracking.EXPERIMENTS["plans"]).artifact_location.removeprefix("file://"))
    assert art.is_relative_to(tmp_path / "store" / "artifacts")
