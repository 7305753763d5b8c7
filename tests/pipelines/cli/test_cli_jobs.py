"""gpuplan train / predict for job kinds: JSON shapes, job ids kept, one-line errors with exit code 2."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from forecasters import jobs
from forecasters.generators import generate_queue
from pipelines.cli.app import app


@pytest.fixture(autouse=True)
def small_models(monkeypatch):
    monkeypatch.setattr(jobs, "DEFAULT_ROUNDS", 30)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A model store and MLflow store of this module only (predict trains into it when empty)."""
    root = tmp_path_factory.mktemp("store")
    return {"GPUPLAN_MODELS_DIR": str(root / "models"), "GPUPLAN_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}"}


@pytest.fixture(autouse=True)
def isolated_store(store, monkeypatch):
    for k, v in store.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def test_train_json_shape():
    res = CliRunner().invoke(app, ["train", "--kind", "quantization", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["kind"] == "quantization"
    assert doc["n_train"] + doc["n_test"] == 3000 - 24  # 24 failed-at-launch rows excluded
    assert set(doc["metrics"]) == {"mae_h", "mape", "median_ape", "pinball_p10", "pinball_p90", "coverage_p10_p90"}
    assert set(doc["baselines"]) == {"per_variant_median", "analytic"}
    assert set(doc["baselines"]["analytic"]) == {"mae_h", "mape"}
    met, base = doc["metrics"], doc["baselines"]
    # coverage is a share of the n_test rows, near the interval's nominal 80 % (a quantile swap or a
    # P10-P50 band would give ~0 or ~0.4); the model beats the per-variant median by far (0.08 vs 0.81 h)
    covered = met["coverage_p10_p90"] * doc["n_test"]
    assert abs(covered - round(covered)) < 1e-6
    assert 0.65 <= met["coverage_p10_p90"] <= 0.92
    assert met["mae_h"] < 0.3 * base["per_variant_median"]["mae_h"] and met["mape"] < 0.5
    assert met["median_ape"] < met["mape"]  # right-skewed errors: median below the mean
    assert "excluded 1" in res.stderr


def test_train_rejects_unknown_kind():
    res = CliRunner().invoke(app, ["train", "--kind", "pretraining", "--json"])
    assert res.exit_code == 2
    assert res.stderr.strip().startswith("error: --kind must be one of training")
    assert len(res.stderr.strip().splitlines()) == 1


def test_predict_json_keeps_job_ids_and_flags(tmp_path):
    q = generate_queue("batch_inference", 4, seed=3)
    q["job_id"] = ["a", "b", "c", "d"]
    q.to_csv(tmp_path / "jobs.csv", index=False)
    res = CliRunner().invoke(app, ["predict", "--kind", "batch_inference", "--jobs", str(tmp_path / "jobs.csv"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["kind"] == "batch_inference"
    assert [j["job_id"] for j in doc["jobs"]] == ["a", "b", "c", "d"]
    for j in doc["jobs"]:
        assert set(j) == {"job_id", "duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred", "flags"}
        assert 0 < j["duration_p10_h"] <= j["duration_p50_h"] <= j["duration_p90_h"]
        assert "clipped_min_duration" not in j["flags"]  # hours as forecast: steps are the planner's business
    assert min(j["duration_p10_h"] for j in doc["jobs"]) < 0.5  # a P10 under one 30-min step is printed as is


def test_predict_unknown_category_is_one_line_exit_2(tmp_path):
    q = generate_queue("training", 3, seed=3)
    q.loc[1, "training_variant"] = "GRPO"
    q.to_csv(tmp_path / "jobs.csv", index=False)
    res = CliRunner().invoke(app, ["predict", "--kind", "training", "--jobs", str(tmp_path / "jobs.csv"), "--json"])
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    # no saved model in this store: progress lines say it trains (and its ratio to the analytic baseline, issue
    # 33), then the error as one line
    assert lines[0].startswith("training forecaster at ") and "no saved model" in lines[0]
    assert any("× analytic baseline" in x for x in lines[1:-1])
    assert [x for x in lines if x.startswith("error: ")] == [lines[-1]]
    assert "unknown training_variant 'GRPO'" in lines[-1] and "known: full_finetune" in lines[-1]


def test_predict_loads_the_saved_model_and_refits_only_when_asked(tmp_path, store, monkeypatch):
    q = generate_queue("quantization", 3, seed=4)
    q.to_csv(tmp_path / "jobs.csv", index=False)
    args = ["predict", "--kind", "quantization", "--jobs", str(tmp_path / "jobs.csv"), "--json"]
    first = CliRunner().invoke(app, args)  # no saved model yet: trained, saved, then used
    assert first.exit_code == 0, first.output
    saved = store["GPUPLAN_MODELS_DIR"] + "/quantization/model.json"
    stamp = os.stat(saved).st_mtime_ns

    def no_fit(*a, **k):
        raise AssertionError("predict refitted a saved model")

    monkeypatch.setattr(jobs, "fit", no_fit)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == json.loads(first.stdout)
    assert os.stat(saved).st_mtime_ns == stamp
    refit = CliRunner().invoke(app, [*args, "--refit"])
    assert refit.exit_code == 1 and "predict refitted a saved model" in refit.stderr  # --refit does fit
