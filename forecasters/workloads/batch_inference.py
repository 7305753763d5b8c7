"""Batch (offline) inference jobs: generator, analytic estimate and throughput baseline (DESIGN §4.3).

``duration = startup + load + prefill + decode * noise_len``, all times ``* noise_gpu``:

* ``prefill = 2 N * num_requests * mean_input_tokens / (G * peak * 0.5)`` (compute-bound; 50 % MFU
  assumed for large prefill batches; fp8 weights use the fp8 peak).
* ``decode``: memory-bandwidth-bound steps. Each step reads the weights and the KV cache of the
  running batch once: ``step = (W + B * ctx * kv) / (G * bandwidth * 0.7) * (1 + 0.05 log2 G) + 4 ms``
  with ``W`` weight bytes by precision, ``kv = 131,072 * (N_b / 8) ** 0.42`` bytes per token
  (Llama-3-8B: 2 x 32 layers x 1,024 KV width x 2 bytes; 70B: 327,680, hence the exponent),
  ``ctx = in + out / 2`` the mean context, ``B = min(max_batch_size, KV capacity / (in + out))``.
  ``num_requests * mean_output_tokens / B`` steps, times an engine factor (vLLM 1.0, SGLang 0.9,
  TensorRT-LLM 0.85, TGI 1.15, plain HF transformers 3.0 without continuous batching; assumptions
  in line with the engines' published relative benchmarks, not calibrated here).
* startup U(1, 4) min + 30 s CUDA-graph capture, weights read at 2 GB/s.
* noise: the GPU factor (sigma 0.08, Sinha et al. SC'22, as for training) and the realised mean
  output length against the declared one (sigma 0.10; assumption: declared means come from a sample).

GPU count: ``pow2_ceil_array(W / (0.75 * usable))`` (a quarter of memory kept for the KV cache); a job runs
on ``max(gpus_requested, that)``. Baseline of §4.3: tokens / median throughput per (model-size
class, GPU type), see :func:`size_class`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from domain.units import pow2_ceil_array
from forecasters.schema import BATCH_INFERENCE, ENGINES, GENERATED_GPU_TYPES, SERVING_PRECISIONS
from forecasters.workloads.hardware import (
    BANDWIDTH_BPS,
    PEAK_BF16_FLOPS,
    PEAK_FP8_FLOPS,
    lookup,
    usable_memory_gb,
)

SPEC = BATCH_INFERENCE

WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.55}
ENGINE_FACTOR = {"vllm": 1.0, "sglang": 0.9, "tensorrt_llm": 0.85, "tgi": 1.15, "hf_transformers": 3.0}
STARTUP_S = (60.0, 240.0)
GRAPH_CAPTURE_S = 30.0
LOAD_BPS = 2e9
STEP_OVERHEAD_S = 0.004
NOISE_SIGMA_GPU = 0.08
NOISE_SIGMA_LEN = 0.10
PARAMS_B = (0.5, 1.3, 3.0, 7.0, 8.0, 13.0, 34.0, 70.0, 405.0)
PARAMS_P = (0.05, 0.08, 0.1, 0.17, 0.22, 0.1, 0.08, 0.17, 0.03)
#: Upper edges (billions of parameters) of the model-size classes of the throughput baseline.
SIZE_CLASS_EDGES_B = (2.0, 10.0, 20.0, 50.0, 100.0)


def size_class(params_b: np.ndarray) -> np.ndarray:
    """Model-size class index ``(n,)`` int: 0 (<2B), 1 (2-10B), 2 (10-20B), 3 (20-50B), 4 (50-100B), 5 (>100B)."""
    return np.searchsorted(np.array(SIZE_CLASS_EDGES_B), np.asarray(params_b, dtype=float), side="right")


def sample_features(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Draw ``n`` plausible batch-inference feature rows (the 9 features of §4.3)."""
    params_b = rng.choice(np.array(PARAMS_B), size=n, p=PARAMS_P)
    precision = rng.choice(np.array(SERVING_PRECISIONS), size=n, p=[0.45, 0.1, 0.2, 0.1, 0.15])
    gpu_type = rng.choice(np.array(GENERATED_GPU_TYPES), size=n, p=[0.15, 0.3, 0.3, 0.1, 0.15])
    precision = np.where((precision == "fp8") & np.isin(gpu_type, ("a100_40gb", "a100_80gb")), "bf16", precision)
    num_requests = np.clip(np.round(20000 * np.exp(rng.normal(0, 1.5, n))), 100, 5_000_000).astype(np.int64)
    mean_in = np.clip(np.round(600 * np.exp(rng.normal(0, 0.8, n))), 16, 32000)
    mean_out = np.clip(np.round(250 * np.exp(rng.normal(0, 0.8, n))), 1, 8000)
    engine = rng.choice(np.array(ENGINES), size=n, p=[0.45, 0.15, 0.15, 0.1, 0.15])
    max_batch = rng.choice(np.array([16, 32, 64, 128, 256, 512]), size=n)
    frame = pd.DataFrame(
        {
            "model_params_b": params_b,
            "precision": precision,
            "num_requests": num_requests,
            "mean_input_tokens": mean_in,
            "mean_output_tokens": mean_out,
            "engine": engine,
            "max_batch_size": max_batch.astype(np.int64),
            "gpu_type": gpu_type,
            "gpus_requested": 1,
        }
    )
    mem_min = memory_gpus(frame)
    shift = rng.choice(np.array([0, 0, 0, 1, 1, 2]), size=n)
    frame["gpus_requested"] = np.clip(mem_min * 2.0**shift, 1, 64).astype(np.int64)
    return frame


def _weights_bytes(frame: pd.DataFrame) -> np.ndarray:
    prec = frame["precision"].to_numpy().astype(str)
    return frame["model_params_b"].to_numpy(dtype=float) * 1e9 * np.array([WEIGHT_BYTES[p] for p in prec])


def memory_gpus(frame: pd.DataFrame) -> np.ndarray:
    """Minimum power-of-two GPU count holding the weights with a quarter left for KV, ``(n,)`` int64."""
    usable = usable_memory_gb(frame["gpu_type"].to_numpy().astype(str)) * 1e9
    return pow2_ceil_array(_weights_bytes(frame) / (0.75 * usable))


def gpus_used(frame: pd.DataFrame) -> np.ndarray:
    """GPUs a job runs on: ``max(gpus_requested, memory_gpus)``, ``(n,)`` int64."""
    return np.maximum(frame["gpus_requested"].to_numpy().astype(np.int64), memory_gpus(frame))


def _parts(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Noise-free (fixed_s, prefill_s, decode_s), each ``(n,)``."""
    n_b = frame["model_params_b"].to_numpy(dtype=float)
    gpu_type = frame["gpu_type"].to_numpy().astype(str)
    prec = frame["precision"].to_numpy().astype(str)
    reqs = frame["num_requests"].to_numpy(dtype=float)
    tin = frame["mean_input_tokens"].to_numpy(dtype=float)
    tout = frame["mean_output_tokens"].to_numpy(dtype=float)
    engine = frame["engine"].to_numpy().astype(str)
    g = gpus_used(frame).astype(float)
    w = _weights_bytes(frame)
    peak = np.where(prec == "fp8", lookup(PEAK_FP8_FLOPS, gpu_type), lookup(PEAK_BF16_FLOPS, gpu_type))
    prefill = 2.0 * n_b * 1e9 * reqs * tin / (g * peak * 0.5)
    kv = 131072.0 * (n_b / 8.0) ** 0.42
    capacity_tokens = np.maximum(g * usable_memory_gb(gpu_type) * 1e9 * 0.9 - w, kv) / kv
    batch = np.maximum(np.minimum(frame["max_batch_size"].to_numpy(dtype=float), capacity_tokens / (tin + tout)), 1.0)
    ctx = tin + tout / 2.0
    step = (w + batch * ctx * kv) / (g * lookup(BANDWIDTH_BPS, gpu_type) * 0.7) * (1.0 + 0.05 * np.log2(g))
    step = step + STEP_OVERHEAD_S
    decode = reqs * tout / batch * step * np.array([ENGINE_FACTOR[e] for e in engine])
    fixed = GRAPH_CAPTURE_S + w / LOAD_BPS
    return fixed, prefill, decode


def analytic_duration_h(frame: pd.DataFrame) -> np.ndarray:
    """Noise-free analytic duration in hours, ``(n,)``."""
    fixed, prefill, decode = _parts(frame)
    return (np.mean(STARTUP_S) + fixed + prefill + decode) / 3600.0


def simulate(frame: pd.DataFrame, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Actual outcomes: ``(duration_h (n,), gpus_used (n,) int64)`` with the world's noise."""
    n = len(frame)
    fixed, prefill, decode = _parts(frame)
    gpu_noise = np.exp(rng.normal(0.0, NOISE_SIGMA_GPU, n))
    len_noise = np.exp(rng.normal(0.0, NOISE_SIGMA_LEN, n))
    startup = rng.uniform(*STARTUP_S, n)
    return (startup + fixed + (prefill + decode * len_noise) * gpu_noise) / 3600.0, gpus_used(frame)
