"""Training jobs (fine-tuning, continued pre-training, preference tuning): generator and analytic estimate.

No public per-job log of LLM fine-tuning jobs could be found, so histories are generated from first
principles (DESIGN §4.1). For one job with ``N`` parameters, ``D`` tokens processed and ``G`` GPUs:

``duration = startup + (compute + dequant) * noise + checkpoints``

* ``compute = D * flops_per_token / (G * peak * mfu)``.
  ``flops_per_token = k * N + k/2 * L * s * h`` (the second term is causal attention,
  Kaplan et al. 2020 eq. 2.2 with the causal half); ``k`` by variant: 6 for a full update
  (forward 2N + backward 4N), 4 when only adapters train (no weight gradients of the frozen base),
  4.8 for DoRA (weight-norm recompute, assumption +20 %), 2.6 for LLaMA-Adapter-style ``adapter``
  (backward stops at the top layers: LitGPT rows show Adapter at 0.60-0.64 x LoRA's time per
  iteration, calibration CSV lines 25 vs 7 and 28 vs 12), 8 for DPO (policy update + reference
  forward), 28 for PPO (policy and value updates 12, reference and reward forwards 4, rollout
  generation at about 1/6 of training efficiency ~ 12). Gradient checkpointing adds a forward (+2).
* ``D = epochs * tokens``, where without sequence packing every example is padded to the longest
  in its micro-batch: tokens x min(seq_len / mean example length, 1.5) (assumption: dynamic padding).
* ``mfu`` = base MFU of the GPU type (:mod:`forecasters.workloads.hardware`) x micro-batch fill
  ``T / (T + 512 * sqrt(7 / N_b))`` with ``T`` tokens per micro-batch (calibrated on the LitGPT LoRA
  rows at micro-batch 1, about 256 Alpaca tokens per iteration: CSV lines 7, 12, 17 give 0.16 and
  0.22 MFU at 7B and 13B; the formula gives 0.15 and 0.18) x 0.8 without flash attention x 0.92 per
  doubling of tensor parallelism x 0.95 / 0.9 for ZeRO-2 / ZeRO-3 x 0.9 across nodes (> 8 GPUs)
  and 0.85 beyond 64 GPUs (assumptions). fp8 runs at the fp8 peak x 0.65 (attention, norms and
  optimizer stay in bf16; assumption).
* ``dequant``: 4-bit (nf4) or int8 bases are dequantised on every micro-step, a memory-bound cost of
  0.0114 s per billion parameters per micro-step on an A100-40GB, scaled by memory bandwidth
  (fitted on QLoRA minus LoRA time per iteration, CSV lines 13 vs 12 and 18 vs 17: QLoRA 1.56x and
  2.0x slower at 7B and 13B; the fitted model gives 1.52x and 1.63x, and LoRA 2.56 / 3.91 min per 1k iterations against the
  published 2.36 / 3.19).
* ``startup`` ~ U(2, 8) min (image pull, NCCL init; assumption) + weights read at 2 GB/s;
  ``checkpoints``: one per hour of training, trainable state written at 1 GB/s per node.
* ``noise``: two independent lognormal factors of sigma 0.08: the GPU's own speed (Sinha et al.,
  "Not All GPUs Are Created Equal", SC'22, arXiv:2208.11035: 8 % average performance variation
  between GPUs of one SKU, outliers 1.5x) and per-job MFU scatter from code and data details no
  feature captures (assumption, same size). The analytic estimate is this formula with both
  factors at 1 and the mean start-up time.

GPU count (``gpus_used``): the smallest power of two at least ``tensor_parallel`` whose per-GPU
memory fits the usable memory: weights, gradients and optimizer state by precision and variant
(2 + 2 + 12 bytes per trainable parameter for AdamW mixed precision, ZeRO paper, Rajbhandari et
al. 2020; 6 for 8-bit Adam, 5 Adafactor, 8 Lion/SGD-momentum), frozen bases at their precision
(nf4 0.55 bytes/param incl. quantisation constants), reference/reward models for DPO/PPO,
sharded by tensor parallelism and by ZeRO stage over data parallelism, plus activations
(34 s b h bytes per layer without recomputation, Korthikanti et al. 2022, + 5 a s^2 b without
flash attention; 2 s b h per layer with checkpointing). A job runs on ``max(gpus_requested, that)``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasters.schema import GENERATED_GPU_TYPES, OPTIMIZERS, TRAINING, TRAINING_VARIANTS
from forecasters.workloads.hardware import (
    BANDWIDTH_BPS,
    BASE_MFU,
    MAX_GPUS,
    PEAK_BF16_FLOPS,
    PEAK_FP8_FLOPS,
    REFERENCE_GPU,
    lookup,
    usable_memory_gb,
)

SPEC = TRAINING

FULL_UPDATE = ("full_finetune", "continued_pretraining", "dpo", "ppo_rlhf")
ADAPTER_VARIANTS = ("lora", "qlora", "dora", "ia3", "prefix_tuning", "adapter")
FLOPS_PER_PARAM_TOKEN = {
    "full_finetune": 6.0,
    "continued_pretraining": 6.0,
    "dpo": 8.0,
    "ppo_rlhf": 28.0,
    "lora": 4.0,
    "qlora": 4.0,
    "dora": 4.8,
    "ia3": 4.0,
    "prefix_tuning": 4.0,
    "adapter": 2.6,
}
#: Bytes per weight of the (frozen or working) copy, by precision.
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "int8": 1.0, "nf4": 0.55}
#: Optimizer state + fp32 master bytes per trainable parameter (ZeRO paper's K=12 for AdamW).
OPTIMIZER_BYTES = {"adamw": 12.0, "adamw_8bit": 6.0, "adafactor": 5.0, "lion": 8.0, "sgd": 8.0}
DEQUANT_S_PER_B_PER_MICROSTEP = 0.0114  # on the reference GPU (A100-40GB), see module docstring
MB_FILL_TOKENS_AT_7B = 512.0
STARTUP_S = (120.0, 480.0)
LOAD_BPS = 2e9
CKPT_WRITE_BPS_PER_NODE = 1e9
CKPT_EVERY_S = 3600.0
NOISE_SIGMA_GPU = 0.08
NOISE_SIGMA_JOB = 0.08

#: (params_b, num_layers, hidden_size, probability): shapes of common open models.
MODEL_CATALOG = (
    (0.5, 24, 896, 0.05),
    (1.3, 24, 2048, 0.08),
    (3.0, 28, 3072, 0.10),
    (7.0, 32, 4096, 0.18),
    (8.0, 32, 4096, 0.22),
    (13.0, 40, 5120, 0.12),
    (34.0, 48, 8192, 0.08),
    (70.0, 80, 8192, 0.15),
    (405.0, 126, 16384, 0.02),
)
VARIANT_PROBS = (0.12, 0.22, 0.14, 0.06, 0.04, 0.04, 0.05, 0.08, 0.15, 0.10)
#: Median dataset size in millions of tokens per epoch, by variant (lognormal, sigma 1.0).
DATASET_TOKENS_M = {
    "full_finetune": 60.0,
    "continued_pretraining": 1500.0,
    "dpo": 20.0,
    "ppo_rlhf": 4.0,
    "lora": 25.0,
    "qlora": 25.0,
    "dora": 25.0,
    "ia3": 10.0,
    "prefix_tuning": 10.0,
    "adapter": 10.0,
}


def sample_features(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Draw ``n`` plausible training-job feature rows (the 22 features of §4.1).

    Configurations whose model state cannot fit in 256 GPUs are switched to ZeRO-3 with
    gradient checkpointing, as their operators would; the few that still do not fit are
    dropped and drawn again. Returns a frame with the 22 feature columns only, index 0..n-1.
    """
    parts: list[pd.DataFrame] = []
    have = 0
    while have < n:
        part = _sample_batch(max(n - have, 1) + 16, rng)
        parts.append(part)
        have += len(part)
    return pd.concat(parts, ignore_index=True).iloc[:n].reset_index(drop=True)


def _sample_batch(n: int, rng: np.random.Generator) -> pd.DataFrame:
    variant = rng.choice(np.array(TRAINING_VARIANTS), size=n, p=VARIANT_PROBS)
    probs = np.array([m[3] for m in MODEL_CATALOG])
    m_idx = rng.choice(len(MODEL_CATALOG), size=n, p=probs / probs.sum())
    full = np.isin(variant, FULL_UPDATE)
    m_idx = np.where(full & (m_idx == len(MODEL_CATALOG) - 1), m_idx - 1, m_idx)  # no 405B full updates
    params_b = np.array([MODEL_CATALOG[i][0] for i in m_idx])
    layers = np.array([MODEL_CATALOG[i][1] for i in m_idx])
    hidden = np.array([MODEL_CATALOG[i][2] for i in m_idx])

    seq_choices = np.array([512, 1024, 2048, 4096, 8192])
    seq_len = rng.choice(seq_choices, size=n, p=[0.10, 0.25, 0.35, 0.2, 0.1])
    cpt = variant == "continued_pretraining"
    seq_len = np.where(cpt, rng.choice(np.array([2048, 4096, 8192]), size=n), seq_len)

    med_tokens = np.array([DATASET_TOKENS_M[v] for v in variant])
    tokens_m = np.clip(med_tokens * np.exp(rng.normal(0.0, 1.0, n)), 0.5, 20000.0)
    fill = np.where(cpt, rng.uniform(0.8, 1.0, n), rng.uniform(0.15, 0.6, n))
    mean_len = np.maximum(seq_len * fill, 32.0)
    examples = np.maximum(np.round(tokens_m * 1e6 / mean_len), 1).astype(np.int64)

    epochs = rng.choice(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), size=n, p=[0.3, 0.25, 0.3, 0.1, 0.05])
    epochs = np.where(cpt, rng.choice(np.array([0.5, 1.0]), size=n, p=[0.3, 0.7]), epochs)
    epochs = np.where(variant == "ppo_rlhf", rng.choice(np.array([1.0, 2.0]), size=n), epochs)
    epochs = np.where(variant == "dpo", rng.choice(np.array([1.0, 2.0, 3.0]), size=n), epochs)

    micro = rng.choice(np.array([1, 2, 4, 8, 16]), size=n, p=[0.25, 0.25, 0.25, 0.15, 0.1])
    micro = np.where(seq_len >= 4096, np.minimum(micro, 2), micro)
    lora_like = np.isin(variant, ("lora", "qlora", "dora"))
    lora_rank = np.where(lora_like, rng.choice(np.array([8, 16, 32, 64, 128]), size=n), 0)
    # trainable share: LoRA 2*r*h per adapted matrix, 7 matrices per layer
    lora_pct = 100.0 * 7 * 2 * lora_rank * hidden * layers / (params_b * 1e9)
    pct = np.select(
        [full, lora_like, variant == "ia3", variant == "prefix_tuning", variant == "adapter"],
        [
            np.full(n, 100.0),
            lora_pct,
            100.0 * 3 * hidden * layers / (params_b * 1e9),
            100.0 * 2 * 20 * hidden * layers / (params_b * 1e9),
            100.0 * 2 * 64 * hidden * layers / (params_b * 1e9),
        ],
    )
    precision = np.where(
        variant == "qlora",
        "nf4",
        np.where(
            full,
            rng.choice(np.array(["bf16", "fp16", "fp8"]), size=n, p=[0.8, 0.1, 0.1]),
            rng.choice(np.array(["bf16", "fp16", "int8"]), size=n, p=[0.8, 0.1, 0.1]),
        ),
    )
    optimizer = rng.choice(np.array(OPTIMIZERS), size=n, p=[0.6, 0.15, 0.1, 0.1, 0.05])
    gpu_type = rng.choice(np.array(GENERATED_GPU_TYPES), size=n, p=[0.15, 0.3, 0.3, 0.1, 0.15])
    # fp8 training only where the hardware has fp8 tensor cores
    precision = np.where((precision == "fp8") & np.isin(gpu_type, ("a100_40gb", "a100_80gb")), "bf16", precision)

    big = params_b >= 30
    tp = np.where(big & full, rng.choice(np.array([1, 2, 4, 8]), size=n), rng.choice(np.array([1, 1, 1, 2]), size=n))
    zero_stage = np.where(
        full,
        np.where(params_b >= 7, rng.choice(np.array([2, 3, 3]), size=n), rng.choice(np.array([0, 1, 2, 3]), size=n)),
        rng.choice(np.array([0, 0, 0, 2, 3]), size=n),
    )
    ckpt = rng.random(n) < np.where(params_b >= 13, 0.8, 0.4)
    flash = rng.random(n) < 0.85
    packing = rng.random(n) < np.where(cpt, 0.95, 0.45)

    frame = pd.DataFrame(
        {
            "training_variant": variant,
            "model_params_b": params_b,
            "num_layers": layers,
            "hidden_size": hidden,
            "seq_len": seq_len,
            "dataset_tokens_m": np.round(tokens_m, 3),
            "dataset_examples": examples,
            "epochs": epochs,
            "global_batch_size": 0,
            "micro_batch_size": micro,
            "grad_accum_steps": 0,
            "lora_rank": lora_rank,
            "trainable_params_pct": np.round(pct, 6),
            "precision": precision,
            "optimizer": optimizer,
            "gpus_requested": 1,
            "gpu_type": gpu_type,
            "gradient_checkpointing": ckpt,
            "zero_stage": zero_stage,
            "tensor_parallel": tp,
            "flash_attention": flash,
            "sequence_packing": packing,
        }
    )
    mem_min = memory_gpus(frame)
    too_big = mem_min > 256
    if too_big.any():  # larger jobs use ZeRO-3 + recomputation, as their operators would
        frame.loc[too_big, "zero_stage"] = 3
        frame.loc[too_big, "gradient_checkpointing"] = True
        mem_min = memory_gpus(frame)
    keep = mem_min <= 256
    frame = frame.loc[keep].reset_index(drop=True)
    mem_min, tp, micro = mem_min[keep], tp[keep], micro[keep]
    n = len(frame)
    shift = rng.choice(np.array([-1, 0, 0, 0, 1, 1, 2]), size=n)
    requested = np.clip(mem_min * 2.0**shift, 1, 256).astype(np.int64)
    requested = np.maximum(requested, 1)
    frame["gpus_requested"] = requested
    dp = np.maximum(requested // tp, 1)
    target_gbs = rng.choice(np.array([32, 64, 128, 256, 512]), size=n)
    accum = np.maximum(np.round(target_gbs / (micro * dp)), 1).astype(np.int64)
    frame["grad_accum_steps"] = accum
    frame["global_batch_size"] = (micro * dp * accum).astype(np.int64)
    return frame


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    return frame[name].to_numpy()


def memory_gpus(frame: pd.DataFrame) -> np.ndarray:
    """Minimum power-of-two GPU count whose per-GPU memory fits the job, ``(n,)`` int64.

    See the module docstring for the memory model. Returns :data:`MAX_GPUS` x 2 when nothing
    up to :data:`MAX_GPUS` fits.
    """
    variant = _col(frame, "training_variant").astype(str)
    n_params = _col(frame, "model_params_b").astype(float) * 1e9
    precision = _col(frame, "precision").astype(str)
    opt = np.array([OPTIMIZER_BYTES[o] for o in _col(frame, "optimizer").astype(str)])
    wbytes = np.array([WEIGHT_BYTES[p] for p in precision])
    pct = _col(frame, "trainable_params_pct").astype(float) / 100.0
    tp = np.maximum(_col(frame, "tensor_parallel").astype(float), 1.0)
    zero = _col(frame, "zero_stage").astype(float)
    full = np.isin(variant, FULL_UPDATE)
    trainable = np.where(full, n_params * np.where(variant == "ppo_rlhf", 2.0, 1.0), n_params * pct)
    frozen_w = np.where(
        full,
        n_params * 2.0 * np.select([variant == "dpo", variant == "ppo_rlhf"], [1.0, 2.0], 0.0),
        n_params * wbytes,
    )
    train_w = trainable * 2.0
    grads = trainable * 2.0
    optst = trainable * opt
    s = _col(frame, "seq_len").astype(float)
    b = _col(frame, "micro_batch_size").astype(float)
    h = _col(frame, "hidden_size").astype(float)
    layers = _col(frame, "num_layers").astype(float)
    ckpt = _col(frame, "gradient_checkpointing").astype(bool)
    flash = _col(frame, "flash_attention").astype(bool)
    per_layer = s * b * h * (34.0 + np.where(flash, 0.0, 5.0 * s / 128.0))
    act = np.where(ckpt, 2.0 * s * b * h * layers + per_layer, per_layer * layers) / tp
    usable = usable_memory_gb(_col(frame, "gpu_type").astype(str)) * 1e9
    result = np.full(len(frame), MAX_GPUS * 2, dtype=np.int64)
    g = 1
    while g <= MAX_GPUS:
        dp = np.maximum(g / tp, 1.0)
        states = (
            np.where(zero >= 1, optst / dp, optst)
            + np.where(zero >= 2, grads / dp, grads)
            + np.where(zero >= 3, (train_w + frozen_w) / dp, train_w + frozen_w)
        ) / tp
        fits = (states + act <= usable) & (g >= tp) & (result > MAX_GPUS)
        result[fits] = g
        g *= 2
    return result


def gpus_used(frame: pd.DataFrame) -> np.ndarray:
    """GPUs a job runs on: ``max(gpus_requested, memory_gpus)``, ``(n,)`` int64 powers of two."""
    return np.maximum(_col(frame, "gpus_requested").astype(np.int64), memory_gpus(frame))


def duration_parts(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Noise-free parts of the duration model (module docstring) of ``(n,)`` training jobs.

    Args:
        frame: ``(n, ...)`` the training features as plain columns (strings, floats, bools).

    Returns:
        ``(train_s, load_s, ckpt_s, gpus)``: compute plus dequantisation time, weight-loading time
        and the time of one checkpoint, in seconds (float ``(n,)``), and the GPU count the job runs
        on (int64 ``(n,)``, :func:`gpus_used`).
    """
    variant = _col(frame, "training_variant").astype(str)
    n_b = _col(frame, "model_params_b").astype(float)
    n_params = n_b * 1e9
    layers = _col(frame, "num_layers").astype(float)
    h = _col(frame, "hidden_size").astype(float)
    s = _col(frame, "seq_len").astype(float)
    tokens = _col(frame, "dataset_tokens_m").astype(float) * 1e6
    examples = np.maximum(_col(frame, "dataset_examples").astype(float), 1.0)
    epochs = _col(frame, "epochs").astype(float)
    packing = _col(frame, "sequence_packing").astype(bool)
    mean_len = np.maximum(tokens / examples, 1.0)
    pad = np.where(packing, 1.0, np.minimum(np.maximum(s / mean_len, 1.0), 1.5))
    s_eff = np.where(packing, s, np.minimum(s, 1.5 * mean_len))
    total_tokens = tokens * pad * epochs
    k = np.array([FLOPS_PER_PARAM_TOKEN[v] for v in variant])
    k = k + np.where(_col(frame, "gradient_checkpointing").astype(bool), 2.0, 0.0)
    flops = total_tokens * (k * n_params + k / 2.0 * layers * s_eff * h)

    gpu_type = _col(frame, "gpu_type").astype(str)
    precision = _col(frame, "precision").astype(str)
    g = gpus_used(frame).astype(float)
    tp = np.maximum(_col(frame, "tensor_parallel").astype(float), 1.0)
    zero = _col(frame, "zero_stage").astype(float)
    peak = np.where(precision == "fp8", lookup(PEAK_FP8_FLOPS, gpu_type) * 0.65, lookup(PEAK_BF16_FLOPS, gpu_type))
    micro_tokens = _col(frame, "micro_batch_size").astype(float) * s_eff
    fill = micro_tokens / (micro_tokens + MB_FILL_TOKENS_AT_7B * np.sqrt(7.0 / n_b))
    mfu = lookup(BASE_MFU, gpu_type) * fill
    mfu = mfu * np.where(_col(frame, "flash_attention").astype(bool), 1.0, 0.8)
    mfu = mfu * 0.92 ** np.log2(tp)
    mfu = mfu * np.where(g > 1, np.select([zero >= 3, zero >= 2], [0.9, 0.95], 1.0), 1.0)
    mfu = mfu * np.where(g > 64, 0.85, np.where(g > 8, 0.9, 1.0))
    compute_s = flops / (g * peak * mfu)
    quant_base = np.isin(precision, ("nf4", "int8")) & ~np.isin(variant, FULL_UPDATE)
    dp = np.maximum(g / tp, 1.0)
    micro_steps = total_tokens / (micro_tokens * dp)
    dq_s = (
        micro_steps
        * DEQUANT_S_PER_B_PER_MICROSTEP
        * n_b
        / tp
        * (BANDWIDTH_BPS[REFERENCE_GPU] / lookup(BANDWIDTH_BPS, gpu_type))
    )
    train_s = compute_s + np.where(quant_base, dq_s, 0.0)

    wbytes = np.array([WEIGHT_BYTES[p] for p in precision])
    models = np.select([variant == "dpo", variant == "ppo_rlhf"], [2.0, 4.0], 1.0)
    load_s = n_params * wbytes * models / LOAD_BPS
    opt = np.array([OPTIMIZER_BYTES[o] for o in _col(frame, "optimizer").astype(str)])
    pct = _col(frame, "trainable_params_pct").astype(float) / 100.0
    state_bytes = n_params * pct * (2.0 + opt) * np.where(variant == "ppo_rlhf", 2.0, 1.0)
    ckpt_s = state_bytes / (CKPT_WRITE_BPS_PER_NODE * np.ceil(g / 8.0))
    return train_s, load_s, ckpt_s, g.astype(np.int64)


def _assemble(train_s, load_s, ckpt_s, startup_s) -> np.ndarray:
    n_ckpt = np.floor(train_s / CKPT_EVERY_S)
    return (startup_s + load_s + train_s + n_ckpt * ckpt_s) / 3600.0


def analytic_duration_h(frame: pd.DataFrame) -> np.ndarray:
    """Noise-free analytic duration in hours, ``(n,)``: the generator's formula with mean start-up.

    This is the "analytic FLOPs estimate" baseline of DESIGN §4.1. ``frame`` holds the 22 features.
    """
    train_s, load_s, ckpt_s, _ = duration_parts(frame)
    return _assemble(train_s, load_s, ckpt_s, np.full(len(frame), np.mean(STARTUP_S)))


def simulate(frame: pd.DataFrame, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Actual outcomes of jobs: ``(duration_h (n,), gpus_used (n,) int64)`` with the noise of the world."""
    n = len(frame)
    train_s, load_s, ckpt_s, g = duration_parts(frame)
    noise = np.exp(rng.normal(0.0, NOISE_SIGMA_GPU, n) + rng.normal(0.0, NOISE_SIGMA_JOB, n))
    startup = rng.uniform(*STARTUP_S, n)
    return _assemble(train_s * noise, load_s, ckpt_s, startup), g
