"""Job forecasters: output contract, batch/category-order invariance, C09, C12, C21, bad input, evaluation."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecasters import jobs
from forecasters.errors import InputError
from forecasters.generators import generate_history
from forecasters.schema import TRAINING_FEATURES, TRAINING_VARIANTS

ROUNDS = 40


def test_prediction_contract(training_model, training_queue):
    pred = jobs.predict(training_model, training_queue)
    assert list(pred.columns) == list(jobs.PREDICTION_COLUMNS)
    assert pred["job_id"].tolist() == training_queue["job_id"].tolist()
    assert (pred["duration_p10_h"] <= pred["duration_p50_h"]).all()
    assert (pred["duration_p50_h"] <= pred["duration_p90_h"]).all()
    assert (pred["duration_p10_h"] > 0).all()
    g = pred["gpus_pred"].to_numpy()
    assert ((g & (g - 1)) == 0).all() and (g >= 1).all()
    assert all(f == [] for f in pred["flags"])
    assert len(TRAINING_FEATURES) == 22 and len(TRAINING_VARIANTS) == 10


def test_same_job_same_prediction_whatever_the_batch(training_model, training_queue):
    full = jobs.predict(training_model, training_queue).set_index("job_id")
    alone = jobs.predict(training_model, training_queue.iloc[[17]])
    pd.testing.assert_frame_equal(alone.set_index("job_id"), full.loc[[training_queue["job_id"].iloc[17]]])
    shuffled = training_queue.sample(frac=1.0, random_state=3)
    pd.testing.assert_frame_equal(jobs.predict(training_model, shuffled).set_index("job_id"), full.loc[shuffled["job_id"]])


def test_category_order_of_the_input_frame_does_not_matter(training_model, training_queue):
    ref = jobs.predict(training_model, training_queue)
    q = training_queue.copy()
    # categoricals whose level order (hence codes) differs from the model's fixed lists
    q["training_variant"] = pd.Categorical(q["training_variant"], categories=list(reversed(TRAINING_VARIANTS)))
    q["gpu_type"] = pd.Categorical(q["gpu_type"])  # only the levels present, alphabetical
    pd.testing.assert_frame_equal(jobs.predict(training_model, q), ref)


def test_fit_does_not_modify_its_input(training_history):
    before = training_history.copy(deep=True)
    jobs.fit("training", training_history.head(200), num_rounds=5)
    pd.testing.assert_frame_equal(training_history, before)


# ---------------------------------------------------------------- C09


def test_c09_unseen_variant_is_refused_naming_column_value_and_levels(training_model, training_queue):
    q = training_queue.head(5).copy()
    q.loc[2, "training_variant"] = "GRPO"
    with pytest.raises(InputError) as exc:
        jobs.predict(training_model, q)
    msg = str(exc.value)
    assert "unknown training_variant 'GRPO'" in msg
    assert "known: full_finetune, lora, qlora, dora, ia3, prefix_tuning, adapter, continued_pretraining, dpo, ppo_rlhf" in msg
    assert "row 2" in msg


def test_c09_missing_variant_is_refused(training_model, training_queue):
    q = training_queue.head(3).copy()
    q["training_variant"] = q["training_variant"].astype(object)
    q.loc[1, "training_variant"] = None
    with pytest.raises(InputError, match="training_variant is missing at row 1"):
        jobs.predict(training_model, q)


def test_c09_configured_fallback_flags_the_job_and_leaves_others_alone(training_model, training_queue):
    q = training_queue.head(4).copy()
    q["training_variant"] = q["training_variant"].astype(object)
    q.loc[1, "training_variant"] = "GRPO"
    q.loc[2, "training_variant"] = None
    ref = jobs.predict(training_model, training_queue.head(4))
    out = jobs.predict(training_model, q, on_unseen="fallback")
    assert out["flags"].tolist() == [[], ["unseen_category"], ["unseen_category"], []]
    pd.testing.assert_frame_equal(out.iloc[[0, 3]], ref.iloc[[0, 3]])
    # the fallback pools every known level: P10 = min, P90 = max over levels
    row = training_queue.iloc[[1]]
    per_level = pd.concat(
        [jobs.predict(training_model, row.assign(training_variant=v)) for v in TRAINING_VARIANTS], ignore_index=True
    )
    assert out.loc[1, "duration_p10_h"] == pytest.approx(per_level["duration_p10_h"].min())
    assert out.loc[1, "duration_p90_h"] == pytest.approx(per_level["duration_p90_h"].max())
    assert out.loc[1, "duration_p50_h"] == pytest.approx(per_level["duration_p50_h"].median())
    with pytest.raises(InputError, match="on_unseen"):
        jobs.predict(training_model, q, on_unseen="guess")


# ---------------------------------------------------------------- bad input


def test_missing_feature_column_is_named(training_model, training_queue):
    with pytest.raises(InputError, match="missing column\\(s\\) lora_rank, zero_stage"):
        jobs.predict(training_model, training_queue.drop(columns=["lora_rank", "zero_stage"]))


def test_non_numeric_value_names_row_and_column(training_model, training_queue):
    q = training_queue.head(5).copy()
    q["seq_len"] = q["seq_len"].astype(object)
    q.loc[3, "seq_len"] = "long"
    jid = q.loc[3, "job_id"]
    with pytest.raises(InputError, match=f"row 3 \\(job_id '{jid}'\\), column 'seq_len': value 'long' is not a number"):
        jobs.predict(training_model, q)


def test_boolean_and_integer_columns_are_checked(training_model, training_queue):
    q = training_queue.head(3).copy()
    q["flash_attention"] = q["flash_attention"].astype(object)
    q.loc[0, "flash_attention"] = "maybe"
    with pytest.raises(InputError, match="column 'flash_attention': value 'maybe' is not a boolean"):
        jobs.predict(training_model, q)
    q = training_queue.head(3).copy()
    q["gpus_requested"] = q["gpus_requested"].astype(float)
    q.loc[2, "gpus_requested"] = 2.5
    with pytest.raises(InputError, match="row 2 .*column 'gpus_requested': value 2.5 is not a non-negative whole number"):
        jobs.predict(training_model, q)


def test_history_with_bad_gpu_count_or_unknown_level_is_refused(training_history):
    h = training_history.head(100).copy()
    h.loc[4, "gpus_used"] = 3
    with pytest.raises(InputError, match="row 4 .*'gpus_used': value 3 is not a power of two"):
        jobs.fit("training", h, num_rounds=5)
    h = training_history.head(100).copy()
    h.loc[7, "training_variant"] = "GRPO"
    with pytest.raises(InputError, match="training history: unknown training_variant 'GRPO' at row 7"):
        jobs.fit("training", h, num_rounds=5)


# ---------------------------------------------------------------- C12


def test_c12_numpy_pyarrow_and_pandas3_string_backends_predict_identically(training_model):
    from forecasters.generators import generate_queue

    q = generate_queue("training", 200, seed=21)
    buf = io.BytesIO()
    q.to_parquet(buf, index=False)
    raw = buf.getvalue()
    a = pd.read_parquet(io.BytesIO(raw), dtype_backend="numpy_nullable")
    b = pd.read_parquet(io.BytesIO(raw), dtype_backend="pyarrow")
    c = pd.read_parquet(io.BytesIO(raw))
    b2 = b.astype({"training_variant": "string[pyarrow]", "gpu_type": "string[pyarrow]"})
    assert str(b["training_variant"].dtype) == "large_string[pyarrow]"
    assert b2["training_variant"].dtype.storage == "pyarrow"
    assert str(b["gpus_requested"].dtype) == "int64[pyarrow]"
    assert str(b["model_params_b"].dtype) == "double[pyarrow]"
    assert isinstance(c["training_variant"].dtype, pd.StringDtype)  # pandas 3 default str
    obj = q.astype({"training_variant": object, "gpu_type": object})
    ref = jobs.predict(training_model, obj)
    for frame in (a, b, b2, c):
        pd.testing.assert_frame_equal(jobs.predict(training_model, frame), ref, check_exact=True)


def test_c12_unconvertible_column_names_column_and_dtype(training_model, training_queue):
    q = training_queue.head(3).copy()
    q["epochs"] = [object(), object(), object()]
    with pytest.raises(InputError, match="row 0 .*column 'epochs'"):
        jobs.predict(training_model, q)


# ---------------------------------------------------------------- C21


def test_c21_zero_durations_are_excluded_and_counted(training_history):
    h = training_history[training_history["duration_h"] > 0].head(300).reset_index(drop=True)
    h.loc[:11, "duration_h"] = 0.0
    h.loc[12, "duration_h"] = -1.0
    m = jobs.fit("training", h, num_rounds=5)
    assert m.info["n_excluded_nonpositive"] == 13
    assert m.info["n_train"] == 287


def test_c21_duration_steps_ceil_and_at_least_one_step():
    steps = jobs.duration_steps([-0.4, 0.2, 0.0, 0.5, 0.51, 2.0, float("nan")], step_minutes=30)
    assert steps.tolist() == [1, 1, 1, 1, 2, 4, 1]
    assert jobs.duration_steps(0.75, step_minutes=60).tolist() == 1
    with pytest.raises(InputError, match="step_minutes"):
        jobs.duration_steps(1.0, step_minutes=0)


def test_c21_clip_to_step_flags_short_predictions():
    pred = pd.DataFrame(
        {"job_id": ["D", "E", "F"], "duration_p10_h": [-0.6, 0.1, 1.0], "duration_p50_h": [-0.4, 0.2, 2.0],
         "duration_p90_h": [0.1, 0.3, 3.0], "gpus_pred": [1, 1, 2], "flags": [[], ["unseen_category"], []]}
    )
    out = jobs.clip_to_step(pred, step_minutes=30)
    assert out["duration_p50_h"].tolist() == [0.5, 0.5, 2.0]
    assert out["flags"].tolist() == [["clipped_min_duration"], ["unseen_category", "clipped_min_duration"], []]
    assert jobs.duration_steps(out["duration_p50_h"], 30).tolist() == [1, 1, 4]
    assert pred["flags"].tolist()[0] == []  # input untouched


def test_predict_with_step_clips_and_flags(training_model, training_queue):
    raw = jobs.predict(training_model, training_queue)
    clipped = jobs.predict(training_model, training_queue, step_minutes=30)
    short = raw["duration_p10_h"] < 0.5
    assert short.any()
    assert (clipped["duration_p10_h"] >= 0.5).all()
    assert [("clipped_min_duration" in f) for f in clipped["flags"]] == short.tolist()


# ---------------------------------------------------------------- split and evaluation


def test_time_split_is_time_ordered(training_history):
    train, test = jobs.time_split(training_history, 0.25)
    assert len(train) + len(test) == len(training_history)
    assert train["submitted_at"].max() < test["submitted_at"].min()
    assert len(test) == pytest.approx(0.25 * len(training_history), abs=2)
    with pytest.raises(InputError, match="test_fraction"):
        jobs.time_split(training_history, 1.0)


def test_evaluate_shape_and_baselines(training_history):
    train, test = jobs.time_split(training_history)
    m = jobs.fit("training", train, num_rounds=ROUNDS)
    doc = jobs.evaluate(m, test)
    assert set(doc) == {"kind", "n_train", "n_test", "metrics", "baselines"}
    assert set(doc["metrics"]) == {"mae_h", "mape", "median_ape", "pinball_p10", "pinball_p90", "coverage_p10_p90"}
    assert set(doc["baselines"]) == {"per_variant_median", "analytic"}
    assert doc["n_test"] == int((test["duration_h"] > 0).sum())
    _check_metrics_by_hand(m, test, doc)
    # the per-variant median baseline recomputed by hand
    kept = test[test["duration_h"] > 0]
    med = train[train["duration_h"] > 0].groupby("training_variant")["duration_h"].median()
    base = kept["training_variant"].map(med).to_numpy()
    y = kept["duration_h"].to_numpy()
    assert doc["baselines"]["per_variant_median"]["mae_h"] == pytest.approx(np.mean(np.abs(y - base)))
    # even a 40-round model is far better than the per-variant median on these orders of magnitude
    assert doc["metrics"]["mae_h"] < 0.7 * doc["baselines"]["per_variant_median"]["mae_h"]


@pytest.mark.parametrize("kind", ["quantization", "batch_inference"])
def test_other_kinds_fit_predict_evaluate(kind):
    h = generate_history(kind, 400, seed=2)
    train, test = jobs.time_split(h)
    m = jobs.fit(kind, train, num_rounds=30)
    doc = jobs.evaluate(m, test)
    assert doc["kind"] == kind
    if kind == "batch_inference":
        assert set(doc["baselines"]) == {"per_variant_median", "analytic", "throughput_median"}
    pred = jobs.predict(m, test)
    assert (pred["duration_p10_h"] <= pred["duration_p50_h"]).all()
    assert (pred["duration_p50_h"] <= pred["duration_p90_h"]).all()
    assert (pred["duration_p10_h"] < pred["duration_p90_h"]).mean() > 0.9  # a real interval, not a point
    assert doc["n_test"] == int((test["duration_h"] > 0).sum())
    assert doc["n_train"] == int((train["duration_h"] > 0).sum())
    _check_metrics_by_hand(m, test, doc)
    # the model is far better than the per-group median (0.05 vs 0.50 h for quantization, 0.45 vs 5.9 h
    # for batch inference on this seed), and its P10-P90 interval covers close to its nominal 80 %
    assert doc["metrics"]["mae_h"] < 0.3 * doc["baselines"]["per_variant_median"]["mae_h"]
    assert 0.65 <= doc["metrics"]["coverage_p10_p90"] <= 0.92


def _check_metrics_by_hand(m, test, doc):
    """Every metric of ``evaluate`` recomputed with numpy from ``predict`` on the kept holdout rows, and
    the per-group median baseline recomputed from the training medians stored in the model."""
    kept = test[test["duration_h"] > 0]
    y = kept["duration_h"].to_numpy(dtype=float)
    pred = jobs.predict(m, kept)
    p10, p50, p90 = (pred[c].to_numpy() for c in ("duration_p10_h", "duration_p50_h", "duration_p90_h"))
    met = doc["metrics"]
    assert met["mae_h"] == pytest.approx(np.mean(np.abs(y - p50)), rel=1e-9)
    assert met["mape"] == pytest.approx(np.mean(np.abs(y - p50) / y), rel=1e-9)
    assert met["median_ape"] == pytest.approx(np.median(np.abs(y - p50) / y), rel=1e-9)
    e10, e90 = y - p10, y - p90
    assert met["pinball_p10"] == pytest.approx(np.mean(np.where(e10 >= 0, 0.1 * e10, -0.9 * e10)), rel=1e-9)
    assert met["pinball_p90"] == pytest.approx(np.mean(np.where(e90 >= 0, 0.9 * e90, -0.1 * e90)), rel=1e-9)
    inside = int(((y >= p10) & (y <= p90)).sum())
    assert met["coverage_p10_p90"] == pytest.approx(inside / len(y), rel=1e-12)
    assert 0 < inside < len(y)  # the hand count is informative: some rows in, some out
    base = kept[m.spec.group_col].astype(str).map(m.baseline["group_medians"]).to_numpy(dtype=float)
    assert doc["baselines"]["per_variant_median"]["mae_h"] == pytest.approx(np.mean(np.abs(y - base)), rel=1e-9)


def test_predict_for_sizes_matches_predict_at_each_size(training_model, training_queue):
    q = training_queue.head(3)
    out = jobs.predict_for_sizes(training_model, q, [1, 8])
    assert out["job_id"].tolist() == [j for j in q["job_id"] for _ in (1, 8)]
    assert out["gpus"].tolist() == [1, 8, 1, 8, 1, 8]
    at8 = jobs.predict(training_model, q.assign(gpus_requested=8))
    np.testing.assert_array_equal(out.loc[out["gpus"] == 8, "duration_p50_h"].to_numpy(), at8["duration_p50_h"].to_numpy())
    assert (out["fits"] == (out["gpus_pred"] <= out["gpus"])).all()
    with pytest.raises(InputError, match="powers of two"):
        jobs.predict_for_sizes(training_model, q, [3])


@given(
    hours=st.floats(min_value=-10.0, max_value=500.0, allow_nan=False),
    step=st.sampled_from([15.0, 30.0, 60.0]),
)
def test_duration_steps_is_the_smallest_covering_whole_step_count(hours, step):
    n = int(jobs.duration_steps(hours, step))
    assert n >= 1
    step_h = step / 60.0
    assert n * step_h >= hours - 1e-9
    if hours > step_h:
        assert (n - 1) * step_h < hours + 1e-9
