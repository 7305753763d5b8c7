"""C11: save/load and MLflow (lightgbm flavour, registered pyfunc) round trips with categoricals and legacy NA variants."""

from __future__ import annotations

import json

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

from forecasters import jobs
from forecasters.generators import generate_history, generate_queue
from forecasters.schema import TRAINING_VARIANTS
from pipelines.io.errors import InputError
from pipelines.models.job_files import load_model, save_model


@pytest.fixture(scope="module")
def na_model():
    h = generate_history("training", 1000, seed=4)
    h["training_variant"] = h["training_variant"].astype(object)
    h.loc[h.index[::33][:30], "training_variant"] = pd.NA  # 30 legacy rows
    assert h["training_variant"].isna().sum() == 30
    return jobs.fit("training", h, num_rounds=30)


@pytest.fixture(scope="module")
def json_jobs():
    q = generate_queue("training", 50, seed=8).drop(columns=["submitted_at"])
    frame = pd.DataFrame(json.loads(q.to_json(orient="records")))
    assert frame["training_variant"].dtype != "category"
    return frame


def test_missing_variants_in_history_are_counted(na_model):
    assert na_model.info["n_missing_category"] == {"training_variant": 30}


def test_save_load_round_trip_keeps_categories(na_model, json_jobs, tmp_path):
    path = save_model(na_model, tmp_path / "m")
    back = load_model(path)
    assert back.levels["training_variant"] == TRAINING_VARIANTS
    assert back.duration_booster.pandas_categorical[0] == list(TRAINING_VARIANTS)
    a = jobs.predict(na_model, json_jobs)
    b = jobs.predict(back, json_jobs)
    np.testing.assert_allclose(b["duration_p50_h"], a["duration_p50_h"], rtol=0, atol=1e-9)
    assert b["gpus_pred"].tolist() == a["gpus_pred"].tolist()
    # saving again over an existing model replaces it
    save_model(back, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_booster_from_model_file_alone(na_model, json_jobs, tmp_path):
    path = save_model(na_model, tmp_path / "m")
    b = lgb.Booster(model_file=str(path / "duration_booster.txt"))
    assert b.pandas_categorical[0] == list(TRAINING_VARIANTS)
    x = na_model.design_matrix(json_jobs)
    np.testing.assert_allclose(b.predict(x), na_model.duration_booster.predict(x), rtol=0, atol=1e-9)


def test_corrupt_or_missing_model_is_a_clear_error(na_model, tmp_path):
    with pytest.raises(InputError, match="no model folder"):
        load_model(tmp_path / "nothing")
    path = save_model(na_model, tmp_path / "m")
    (path / "gpus_booster.txt").write_text("garbage")
    with pytest.raises(InputError, match="gpus_booster.txt is corrupt"):
        load_model(path)
    (path / "model.json").write_text("{")
    with pytest.raises(InputError, match="model.json is corrupt"):
        load_model(path)


def test_mlflow_logging_of_the_main_job_round_trips(na_model, json_jobs, tmp_path):
    """The path the main job uses (pipelines.tracking.models.log_job_model): (a) the registered pyfunc
    behind the ``champion`` alias on JSON-typed (plain string) columns, (b) the lightgbm flavour
    fed the model's validated design matrix; both equal the in-memory model within 1e-9."""
    import mlflow
    from mlflow import MlflowClient

    from pipelines.config.settings import load_settings
    from pipelines.tracking import models as tracking_models
    from pipelines.tracking import runs as tracking_runs
    from pipelines.tracking import store as tracking_store

    s = load_settings(tracking_uri=f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}", mlruns_dir=tmp_path / "store",
                      artifact_root=tmp_path / "store" / "artifacts")
    try:
        tracking_store.init_store(s)
        rid = tracking_runs.log_run(s, "training", "c11")
        out = tracking_models.log_job_model(s, rid, na_model, json_jobs.head(5))
        assert (out["run_id"], out["registered_name"], out["version"]) == (rid, "gpuplan-training-forecaster", "1")
        mv = MlflowClient(tracking_uri=s.tracking_uri).get_model_version_by_alias(out["registered_name"], "champion")
        assert str(mv.version) == "1"
        ref = jobs.predict(na_model, json_jobs)
        # (a) generic pyfunc through the registry alias, with JSON-typed (plain string) columns
        py = mlflow.pyfunc.load_model("models:/gpuplan-training-forecaster@champion").predict(json_jobs)
        for col in ("duration_p10_h", "duration_p50_h", "duration_p90_h"):
            np.testing.assert_allclose(py[col], ref[col], rtol=0, atol=1e-9)
        assert py["gpus_pred"].tolist() == ref["gpus_pred"].tolist()
        assert py["job_id"].tolist() == json_jobs["job_id"].tolist()
        info = mlflow.models.get_model_info(out["pyfunc_uri"])
        inputs = {c["name"]: c["type"] for c in info.signature.inputs.to_dict()}
        assert inputs["training_variant"] == "string" and inputs["job_id"] == "string"
        assert info.saved_input_example_info is not None
        # (b) the lightgbm flavour, fed the model's validated design matrix
        x = na_model.design_matrix(json_jobs)
        for key, own in (("duration_uri", na_model.duration_booster), ("gpus_uri", na_model.gpus_booster)):
            booster = mlflow.lightgbm.load_model(out[key])
            assert booster.pandas_categorical[0] == list(TRAINING_VARIANTS)
            cols = own.feature_name()  # the GPU booster takes a prefix of the design matrix
            np.testing.assert_allclose(booster.predict(x[cols]), own.predict(x[cols]), rtol=0, atol=1e-9)
            assert mlflow.models.get_model_info(out[key]).signature is not None
    finally:
        mlflow.set_tracking_uri("")
    assert (tmp_path / "store" / "artifacts").is_dir()
