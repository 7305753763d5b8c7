"""Generators: reproducibility, schema, physics anchors from the calibration CSV, memory-driven GPU counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from domain import JOB_KINDS
from forecasters.errors import InputError
from forecasters.generators import generate_history, generate_queue, kind_module, tail_shape
from forecasters.schema import SPECS, TIMING_COLUMNS
from forecasters.workloads import quantization as Q
from forecasters.workloads import training as T


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_history_schema_and_invariants(kind):
    h = generate_history(kind, 300, seed=3)
    spec = SPECS[kind]
    assert list(h.columns) == ["job_id", *spec.features, *TIMING_COLUMNS, "duration_h", "gpus_used"]
    assert h["job_id"].is_unique
    for col in TIMING_COLUMNS:
        assert str(h[col].dtype) == "datetime64[us, UTC]"
    span_h = (h["finished_at"] - h["started_at"]).dt.total_seconds() / 3600.0
    np.testing.assert_array_equal(span_h.to_numpy(), h["duration_h"].to_numpy())
    assert (h["started_at"] >= h["submitted_at"]).all()
    g = h["gpus_used"].to_numpy()
    assert ((g & (g - 1)) == 0).all() and (g >= 1).all()
    assert (g >= h["gpus_requested"].to_numpy()).all()
    assert (h["duration_h"] >= 0).all()


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_same_seed_same_frame_other_seed_differs(kind):
    a = generate_history(kind, 200, seed=7)
    pd.testing.assert_frame_equal(a, generate_history(kind, 200, seed=7), check_exact=True)
    assert not a["duration_h"].equals(generate_history(kind, 200, seed=8)["duration_h"])


def test_queue_has_features_and_no_outcomes():
    now = pd.Timestamp("2026-03-01 12:00", tz="UTC")
    q = generate_queue("quantization", 20, seed=1, now=now)
    assert "duration_h" not in q.columns and "gpus_used" not in q.columns
    assert set(SPECS["quantization"].features) <= set(q.columns)
    assert (q["kind"] == "quantization").all()
    assert (q["submitted_at"] <= now).all() and (q["submitted_at"] >= now - pd.Timedelta(hours=6)).all()
    with pytest.raises(InputError, match="timezone-aware"):
        generate_queue("training", 2, now=pd.Timestamp("2026-03-01 12:00"))


def test_unknown_kind_and_bad_n_are_refused():
    with pytest.raises(InputError, match="unknown job kind 'pretraining'; known: training"):
        generate_history("pretraining", 10)
    with pytest.raises(InputError, match="positive whole number"):
        generate_history("training", 0)


def _one(**kw) -> pd.DataFrame:
    base = dict(
        training_variant="lora", model_params_b=7.0, num_layers=32, hidden_size=4096, seq_len=256,
        dataset_tokens_m=0.256, dataset_examples=1000, epochs=1.0, global_batch_size=128,
        micro_batch_size=1, grad_accum_steps=128, lora_rank=8, trainable_params_pct=0.1,
        precision="bf16", optimizer="adamw", gpus_requested=1, gpu_type="a100_40gb",
        gradient_checkpointing=False, zero_stage=0, tensor_parallel=1, flash_attention=True,
        sequence_packing=True,
    )
    base.update(kw)
    return pd.DataFrame([base])


def _min_per_1k_iters(**kw) -> float:
    train_s, _, _, _ = T.duration_parts(_one(**kw))
    return float(train_s[0]) / 60.0


def test_training_physics_against_litgpt_rows():
    # CSV lines 12 and 17: LoRA 2.36 / 3.19 min per 1k iterations (7B / 13B, A100-40GB, micro-batch 1)
    lora7 = _min_per_1k_iters()
    lora13 = _min_per_1k_iters(model_params_b=13.0, num_layers=40, hidden_size=5120)
    assert lora7 == pytest.approx(2.36, rel=0.2)
    assert lora13 == pytest.approx(3.19, rel=0.25)
    # lines 13 and 18: QLoRA 1.5-2x slower per step than LoRA at 7-13B
    qlora7 = _min_per_1k_iters(training_variant="qlora", precision="nf4")
    qlora13 = _min_per_1k_iters(training_variant="qlora", precision="nf4", model_params_b=13.0, num_layers=40, hidden_size=5120)
    assert 1.4 <= qlora7 / lora7 <= 2.0
    assert 1.4 <= qlora13 / lora13 <= 2.0


def test_full_finetune_costs_six_thirds_of_adapter_flops():
    full = _min_per_1k_iters(training_variant="full_finetune", micro_batch_size=16, seq_len=4096)
    lora = _min_per_1k_iters(micro_batch_size=16, seq_len=4096)
    # same tokens and GPU: 6 N D vs 4 N D (+ the same attention share) -> ratio 1.5
    assert full / lora == pytest.approx(1.5, rel=0.01)


def test_memory_driven_gpu_counts():
    # 70B full fine-tune with AdamW under ZeRO-3: 16 bytes/param = 1,120 GB of state. On 16 GPUs that is
    # 70 GB each, exactly the usable 0.9 x 80 - 2 GB, so activations no longer fit: 32 GPUs.
    big = _one(training_variant="full_finetune", model_params_b=70.0, num_layers=80, hidden_size=8192,
               trainable_params_pct=100.0, zero_stage=3, gpu_type="a100_80gb", seq_len=2048,
               gradient_checkpointing=True)
    assert T.memory_gpus(big)[0] == 32
    assert T.memory_gpus(_one(gpu_type="a100_80gb"))[0] == 1
    # a request above the memory minimum is what the job runs on
    assert T.gpus_used(_one(gpus_requested=4))[0] == 4


def _quant(**kw) -> pd.DataFrame:
    base = dict(quant_method="gptq", model_params_b=8.0, num_layers=32, hidden_size=4096, target_bits=4,
                group_size=128, calibration_samples=512, calibration_seq_len=2048, act_order=False,
                gpu_type="a100_40gb", gpus_requested=1)
    base.update(kw)
    return pd.DataFrame([base])


def test_quantization_anchors_reproduce_the_calibration_rows():
    # line 63: GPTQ 8B ~30 min on one A100; line 65: 175B ~4 GPU-hours; line 64 AWQ ~30 min;
    # line 62 W8A8 ~20 min; line 61 RTN ~1 min
    assert Q.algorithm_s(_quant())[0] == pytest.approx(1800.0, rel=1e-6)
    big = _quant(model_params_b=175.0, num_layers=96, hidden_size=12288, calibration_samples=128, group_size=0)
    assert Q.algorithm_s(big)[0] == pytest.approx(4 * 3600.0, rel=1e-6)
    assert Q.algorithm_s(_quant(quant_method="awq", group_size=0))[0] == pytest.approx(1800.0, rel=1e-6)
    assert Q.algorithm_s(_quant(quant_method="smoothquant", group_size=0))[0] == pytest.approx(1200.0, rel=1e-6)
    assert Q.algorithm_s(_quant(quant_method="fp8", calibration_samples=0, calibration_seq_len=0))[0] == pytest.approx(60.0)


def test_analytic_estimate_is_the_noise_free_median():
    for kind in JOB_KINDS:
        h = generate_history(kind, 2000, seed=5)
        h = h[h["duration_h"] > 0]
        ratio = h["duration_h"].to_numpy() / kind_module(kind).analytic_duration_h(h)
        assert np.median(ratio) == pytest.approx(1.0, abs=0.03), kind


def test_tail_shape_by_hand():
    d = np.arange(1, 101, dtype=float)
    s = tail_shape(d)
    assert s["n"] == 100
    assert s["median"] == pytest.approx(50.5)
    assert s["top1pct_share"] == pytest.approx(100.0 / 5050.0)
    with pytest.raises(InputError, match="at least 10"):
        tail_shape([1.0, 2.0])
