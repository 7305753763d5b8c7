"""Physics-informed residual boosting: the analytic prior as offset, corrections learned from history."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasters import jobs
from forecasters.errors import InputError
from forecasters.frames import normalise_features
from forecasters.schema import TRAINING, TRAINING_VARIANTS
from forecasters.workloads import training as T

from .conftest import ROUNDS


def _plain(jobs_frame: pd.DataFrame) -> pd.DataFrame:
    feats, _ = normalise_features(jobs_frame, TRAINING)
    return jobs.plain_features(feats, TRAINING)


def test_offset_is_the_analytic_estimate_at_the_predicted_gpu_count(training_model, training_queue):
    q = training_queue.head(40)
    x = training_model.design_matrix(q)
    pred = jobs.predict(training_model, q)
    at_pred = _plain(q).assign(gpus_requested=pred["gpus_pred"].to_numpy())
    np.testing.assert_allclose(jobs.offset_log_h(x), np.log(T.analytic_duration_h(at_pred)), rtol=0, atol=1e-12)
    # the GPU prior column is the memory model's count at the request
    np.testing.assert_allclose(x["log2_gpus_physics"], np.log2(T.gpus_used(_plain(q))), rtol=0, atol=0)


def test_raw_boosters_return_corrections_to_add_to_the_priors(training_model, training_queue):
    """The documented contract of the raw boosters (LightGBM flavour, model file alone)."""
    q = training_queue.head(40)
    x = training_model.design_matrix(q)
    pred = jobs.predict(training_model, q)
    q10, q50, q90 = training_model.residual_quantiles_log
    mu = training_model.duration_booster.predict(x) + jobs.offset_log_h(x)
    np.testing.assert_allclose(pred["duration_p50_h"], np.exp(mu + q50), rtol=1e-12)
    np.testing.assert_allclose(pred["duration_p10_h"], np.exp(mu + q10), rtol=1e-12)
    gx = x[list(training_model.model_features[:-2])]
    g = np.rint(training_model.gpus_booster.predict(gx) + gx["log2_gpus_physics"].to_numpy())
    g = np.maximum(g, np.log2(q["gpus_requested"].to_numpy()))
    assert pred["gpus_pred"].tolist() == (2 ** g.astype(int)).tolist()


def test_generated_world_needs_almost_no_correction(training_model, training_history):
    """On a history drawn from the analytic physics itself the prior is unbiased: the chosen
    correction is small and the GPU counts are the memory model's."""
    kept = training_history[training_history["duration_h"] > 0]
    x = training_model.design_matrix(kept)
    assert np.abs(training_model.duration_booster.predict(x)).max() < 0.1
    assert (jobs.predict(training_model, kept)["gpus_pred"].to_numpy() == kept["gpus_used"].to_numpy()).all()
    assert 1 <= training_model.info["duration_rounds"] <= ROUNDS
    assert len(training_model.info["oof_mse_log_by_round"]) == ROUNDS


def test_boosting_corrects_a_biased_prior(training_history):
    """An operator whose H100 jobs run 1.5x longer than the datasheet-based prior says, and whose
    L40S jobs always get twice the memory model's GPUs: the corrections are learned from history."""
    h = training_history.copy()
    h100 = (h["gpu_type"] == "h100_80gb").to_numpy()
    l40s = (h["gpu_type"] == "l40s_48gb").to_numpy()
    h.loc[h100, "duration_h"] *= 1.5
    h.loc[l40s, "gpus_used"] *= 2
    train, test = jobs.time_split(h)
    m = jobs.fit("training", train, num_rounds=ROUNDS)
    test = test[test["duration_h"] > 0].reset_index(drop=True)
    pred = jobs.predict(m, test)
    y = test["duration_h"].to_numpy()
    t_h100 = (test["gpu_type"] == "h100_80gb").to_numpy()
    ape_model = np.abs(pred["duration_p50_h"].to_numpy() - y) / y
    ape_prior = np.abs(T.analytic_duration_h(_plain(test)) - y) / y
    assert t_h100.sum() >= 20
    assert np.median(ape_prior[t_h100]) > 0.25  # the prior is a third too short there
    assert np.median(ape_model[t_h100]) < 0.15  # the boosting has learned the 1.5x
    assert m.info["duration_rounds"] > 5
    t_l40s = (test["gpu_type"] == "l40s_48gb").to_numpy()
    assert t_l40s.sum() >= 10
    assert (pred["gpus_pred"].to_numpy()[t_l40s] == test["gpus_used"].to_numpy()[t_l40s]).mean() > 0.9


def test_missing_category_prior_is_the_median_over_levels(training_queue):
    row = training_queue.head(1)
    feats, _ = normalise_features(row.assign(training_variant=pd.NA), TRAINING)
    got = jobs.log_analytic_h("training", feats, np.array([3.0]))
    each = [np.log(T.analytic_duration_h(_plain(row).assign(training_variant=v, gpus_requested=8.0)))[0] for v in TRAINING_VARIANTS]
    assert got[0] == pytest.approx(np.median(each), abs=1e-12)


def test_a_job_without_a_finite_prior_is_named(training_queue):
    feats, _ = normalise_features(training_queue.head(3).assign(model_params_b=[7.0, 0.0, 7.0]), TRAINING)
    with pytest.raises(InputError, match="row 1: the analytic duration estimate of this training job is not a number"):
        jobs.log_analytic_h("training", feats, np.zeros(3))


def test_scheduler_gpu_names_are_read_as_the_table_types(training_model, training_queue):
    # the physics kinds read gpu_type as the scheduler-history forecaster does: "B200" (a Slurm GRES type),
    # a Kubernetes product label and the canonical name are one type, with one forecast
    row = training_queue.head(1)
    spellings = {"b200_180gb": "b200_180gb", "B200": "b200_180gb", "NVIDIA-H100-80GB-HBM3": "h100_80gb",
                 "a100": "a100_40gb", "Tesla-V100-SXM2-32GB": "v100_32gb"}
    for given, canonical in spellings.items():
        feats, issues = normalise_features(row.assign(gpu_type=given), TRAINING)
        assert str(feats["gpu_type"].iloc[0]) == canonical and not issues.unknown
    got = [jobs.predict(training_model, row.assign(gpu_type=g))[["duration_p50_h", "duration_p90_h"]].iloc[0].tolist()
           for g in ("b200_180gb", "B200")]
    assert got[0] == got[1]
    with pytest.raises(InputError, match="unknown gpu_type 'B300' at row 0"):
        jobs.predict(training_model, row.assign(gpu_type="B300"))
