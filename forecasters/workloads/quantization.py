"""Quantization jobs (post-training quantization of an LLM): generator and analytic estimate (DESIGN §4.2).

``duration = startup + load + algorithm * noise + write``, with the algorithm time on ``G`` GPUs

``algorithm = (c_f * N * T * r_flops + c_s * N * h * m_s * r_flops + c_p * N * r_bw) / G**0.7``

for ``N`` parameters, hidden size ``h`` and ``T = calibration_samples * calibration_seq_len``
calibration tokens. ``c_f`` (s per parameter-token, calibration forward passes + statistics),
``c_s`` (s per parameter x hidden, the per-layer solve; GPTQ's Hessian/Cholesky work grows with the
input width) and ``c_p`` (s per parameter, the round-to-nearest/packing pass) are on an A100 and
scaled by ``r_flops = 312 TFLOP/s / peak`` and ``r_bw = 1,555 GB/s / bandwidth`` for other GPUs.

Calibration (``finetune_quant_published_numbers.csv``; line numbers of that file):

* line 61, LLM Compressor: RTN weight-only on Llama-3-8B ~1 min on one A100 -> ``c_p = 7.5e-9`` s/param
  (used for ``fp8`` without calibration data and ``bnb_nf4``).
* line 63, LLM Compressor: GPTQ on Llama-3-8B ~30 min on one A100, and line 65, GPTQ paper
  (arXiv:2210.17323): a 175B model in ~4 GPU-hours -> the two GPTQ constants ``c_f`` and ``c_s`` solved
  exactly from these two points (:func:`gptq_constants`), assuming LLM Compressor's example
  calibration of 512 samples x 2,048 tokens with group size 128, and the paper's 128 x 2,048
  per-channel setting.
* line 64, AWQ on Llama-3-8B ~30 min -> ``c_f`` for AWQ (scale search; no solve), same calibration set assumed.
* line 62, RTN weights + activations ~20 min -> ``c_f`` for ``smoothquant`` (activation statistics);
  ``fp8`` with static activation scales uses half of it (one statistics pass; assumption).

Assumptions (not calibrated; no public timing found): ``hqq`` 10x the RTN pass (iterative
half-quadratic solver, no data); ``gguf_k_quant`` 4x the RTN pass, runs on CPU (not scaled by GPU
type or count), plus GPTQ's forward cost when an importance matrix is computed from calibration
samples; ``aqlm`` 2x GPTQ's forward and 40x its solve (codebook beam search; the method is known to
take hours to days); GPTQ ``act_order`` x1.1 and group size ``g`` x(1 + 16/g) on the solve;
``G**0.7`` scaling across GPUs (layers are quantised in sequence). Startup U(1, 4) min, weights read
at 2 GB/s, the quantised model written at 1 GB/s. Noise: the same two lognormal factors
(sigma 0.08 each) as training jobs (see :mod:`forecasters.workloads.training`).

GPU count: methods that hold the whole fp16 model on GPU (``bnb_nf4``, ``fp8``, ``hqq``) need
``pow2_ceil_array(2 N x 1.15 / usable memory)`` GPUs; layer-by-layer methods (``gptq``, ``awq``,
``smoothquant``, ``aqlm``) need one layer (fp16, x4 for Hessians/workspace) plus the calibration
activations; ``gguf_k_quant`` one GPU. A job runs on ``max(gpus_requested, that)``.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from domain.units import pow2_ceil_array
from forecasters.schema import GENERATED_GPU_TYPES, QUANT_METHODS, QUANTIZATION
from forecasters.workloads.hardware import (
    BANDWIDTH_BPS,
    PEAK_BF16_FLOPS,
    REFERENCE_GPU,
    lookup,
    usable_memory_gb,
)

SPEC = QUANTIZATION

C_P_RTN = 60.0 / 8e9  # line 61: ~1 min for 8B
WHOLE_MODEL = ("bnb_nf4", "fp8", "hqq")
LAYERWISE = ("gptq", "awq", "smoothquant", "aqlm")
STARTUP_S = (60.0, 240.0)
LOAD_BPS = 2e9
WRITE_BPS = 1e9
GPU_SCALING_EXP = 0.7
NOISE_SIGMA_GPU = 0.08
NOISE_SIGMA_JOB = 0.08
METHOD_PROBS = (0.25, 0.2, 0.12, 0.08, 0.15, 0.1, 0.06, 0.04)
MODEL_CATALOG = (
    (0.5, 24, 896, 0.04),
    (1.3, 24, 2048, 0.06),
    (3.0, 28, 3072, 0.10),
    (7.0, 32, 4096, 0.18),
    (8.0, 32, 4096, 0.22),
    (13.0, 40, 5120, 0.10),
    (34.0, 48, 8192, 0.08),
    (70.0, 80, 8192, 0.15),
    (175.0, 96, 12288, 0.03),
    (405.0, 126, 16384, 0.04),
)


def _solve_factor(method: np.ndarray, group: np.ndarray, act_order: np.ndarray) -> np.ndarray:
    g = np.asarray(group, dtype=float)
    return np.where(act_order, 1.1, 1.0) * np.where(g > 0, 1.0 + 16.0 / np.maximum(g, 1.0), 1.0)


@functools.cache
def gptq_constants() -> tuple[float, float]:
    """``(c_f, c_s)`` for GPTQ on an A100, solved exactly from CSV lines 63 and 65 (see module doc)."""
    a = np.array(
        [
            [8e9 * 512 * 2048, 8e9 * 4096 * (1.0 + 16.0 / 128.0)],
            [175e9 * 128 * 2048, 175e9 * 12288 * 1.0],
        ]
    )
    b = np.array([1800.0 - C_P_RTN * 8e9, 4 * 3600.0 - C_P_RTN * 175e9])
    c_f, c_s = np.linalg.solve(a, b)
    return float(c_f), float(c_s)


def method_constants() -> dict[str, tuple[float, float, float]]:
    """Per method ``(c_f, c_s, c_p)`` on an A100 (s per param-token, per param x hidden, per param)."""
    c_f, c_s = gptq_constants()
    t_cal = 8e9 * 512 * 2048
    c_f_awq = (1800.0 - C_P_RTN * 8e9) / t_cal  # line 64
    c_f_sq = (1200.0 - C_P_RTN * 8e9) / t_cal  # line 62
    return {
        "gptq": (c_f, c_s, C_P_RTN),
        "awq": (c_f_awq, 0.0, C_P_RTN),
        "bnb_nf4": (0.0, 0.0, C_P_RTN),
        "smoothquant": (c_f_sq, 0.0, C_P_RTN),
        "fp8": (0.5 * c_f_sq, 0.0, C_P_RTN),
        "gguf_k_quant": (c_f, 0.0, 4.0 * C_P_RTN),
        "hqq": (0.0, 0.0, 10.0 * C_P_RTN),
        "aqlm": (2.0 * c_f, 40.0 * c_s, C_P_RTN),
    }


def sample_features(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Draw ``n`` plausible quantization-job feature rows (the 11 features of §4.2).

    ``group_size`` 0 means per-channel (no groups); ``calibration_seq_len`` is 0 when no
    calibration data is used.
    """
    method = rng.choice(np.array(QUANT_METHODS), size=n, p=METHOD_PROBS)
    probs = np.array([m[3] for m in MODEL_CATALOG])
    idx = rng.choice(len(MODEL_CATALOG), size=n, p=probs / probs.sum())
    params_b = np.array([MODEL_CATALOG[i][0] for i in idx])
    layers = np.array([MODEL_CATALOG[i][1] for i in idx])
    hidden = np.array([MODEL_CATALOG[i][2] for i in idx])
    bits = np.select(
        [method == m for m in QUANT_METHODS],
        [
            rng.choice(np.array([2, 3, 4, 4, 4, 8]), size=n),  # gptq
            np.full(n, 4),  # awq
            np.full(n, 4),  # bnb_nf4
            np.full(n, 8),  # smoothquant
            np.full(n, 8),  # fp8
            rng.choice(np.array([2, 3, 4, 5, 6, 8]), size=n),  # gguf
            rng.choice(np.array([2, 3, 4, 8]), size=n),  # hqq
            rng.choice(np.array([2, 3]), size=n),  # aqlm
        ],
    )
    group = np.where(
        np.isin(method, ("gptq", "awq", "hqq")),
        rng.choice(np.array([32, 64, 128, 128, 0]), size=n),
        np.where(method == "gguf_k_quant", 32, np.where(method == "bnb_nf4", 64, 0)),
    )
    samples = np.select(
        [method == m for m in QUANT_METHODS],
        [
            rng.choice(np.array([128, 256, 512, 1024]), size=n),
            rng.choice(np.array([64, 128, 256, 512]), size=n),
            np.zeros(n, dtype=int),
            rng.choice(np.array([128, 256, 512]), size=n),
            rng.choice(np.array([0, 0, 256, 512]), size=n),
            rng.choice(np.array([0, 0, 128, 256]), size=n),
            np.zeros(n, dtype=int),
            rng.choice(np.array([512, 1024, 2048]), size=n),
        ],
    )
    seq = np.where(samples > 0, rng.choice(np.array([512, 1024, 2048, 4096]), size=n, p=[0.3, 0.2, 0.4, 0.1]), 0)
    act_order = (method == "gptq") & (rng.random(n) < 0.5)
    gpu_type = rng.choice(np.array(GENERATED_GPU_TYPES), size=n, p=[0.15, 0.3, 0.3, 0.1, 0.15])
    frame = pd.DataFrame(
        {
            "quant_method": method,
            "model_params_b": params_b,
            "num_layers": layers,
            "hidden_size": hidden,
            "target_bits": bits.astype(np.int64),
            "group_size": group.astype(np.int64),
            "calibration_samples": samples.astype(np.int64),
            "calibration_seq_len": seq.astype(np.int64),
            "act_order": act_order,
            "gpu_type": gpu_type,
            "gpus_requested": 1,
        }
    )
    mem_min = memory_gpus(frame)
    shift = rng.choice(np.array([-1, 0, 0, 0, 0, 1, 2]), size=n)
    frame["gpus_requested"] = np.clip(mem_min * 2.0**shift, 1, 64).astype(np.int64)
    return frame


def memory_gpus(frame: pd.DataFrame) -> np.ndarray:
    """Minimum power-of-two GPU count for the job's memory, ``(n,)`` int64 (see module docstring)."""
    method = frame["quant_method"].to_numpy().astype(str)
    n_params = frame["model_params_b"].to_numpy(dtype=float) * 1e9
    layers = np.maximum(frame["num_layers"].to_numpy(dtype=float), 1.0)
    h = frame["hidden_size"].to_numpy(dtype=float)
    tokens = frame["calibration_samples"].to_numpy(dtype=float) * frame["calibration_seq_len"].to_numpy(dtype=float)
    usable = usable_memory_gb(frame["gpu_type"].to_numpy().astype(str)) * 1e9
    whole = 2.0 * n_params * 1.15
    layerwise = 4.0 * 2.0 * n_params / layers + tokens * h * 2.0 * 2.0
    need = np.where(np.isin(method, WHOLE_MODEL), whole, layerwise)
    g = pow2_ceil_array(need / usable)
    return np.where(method == "gguf_k_quant", 1, g).astype(np.int64)


def gpus_used(frame: pd.DataFrame) -> np.ndarray:
    """GPUs a job runs on: ``max(gpus_requested, memory_gpus)``, ``(n,)`` int64."""
    return np.maximum(frame["gpus_requested"].to_numpy().astype(np.int64), memory_gpus(frame))


def algorithm_s(frame: pd.DataFrame) -> np.ndarray:
    """Noise-free algorithm time in seconds, ``(n,)`` (excludes start-up, load and write)."""
    method = frame["quant_method"].to_numpy().astype(str)
    n_params = frame["model_params_b"].to_numpy(dtype=float) * 1e9
    h = frame["hidden_size"].to_numpy(dtype=float)
    tokens = frame["calibration_samples"].to_numpy(dtype=float) * frame["calibration_seq_len"].to_numpy(dtype=float)
    gpu_type = frame["gpu_type"].to_numpy().astype(str)
    consts = method_constants()
    c_f = np.array([consts[m][0] for m in method])
    c_s = np.array([consts[m][1] for m in method])
    c_p = np.array([consts[m][2] for m in method])
    r_flops = PEAK_BF16_FLOPS[REFERENCE_GPU] / lookup(PEAK_BF16_FLOPS, gpu_type)
    r_bw = BANDWIDTH_BPS[REFERENCE_GPU] / lookup(BANDWIDTH_BPS, gpu_type)
    solve_f = _solve_factor(method, frame["group_size"].to_numpy(), frame["act_order"].to_numpy().astype(bool))
    gguf = method == "gguf_k_quant"
    gpu_part = c_f * n_params * tokens * r_flops + c_s * n_params * h * solve_f * r_flops
    per_param = c_p * n_params * np.where(gguf, 1.0, r_bw)
    scale = gpus_used(frame).astype(float) ** GPU_SCALING_EXP
    return (gpu_part + np.where(gguf, 0.0, per_param)) / scale + np.where(gguf, per_param, 0.0)


def _io_s(frame: pd.DataFrame) -> np.ndarray:
    n_params = frame["model_params_b"].to_numpy(dtype=float) * 1e9
    bits = frame["target_bits"].to_numpy(dtype=float)
    return n_params * 2.0 / LOAD_BPS + n_params * bits / 8.0 / WRITE_BPS


def analytic_duration_h(frame: pd.DataFrame) -> np.ndarray:
    """Noise-free analytic duration in hours, ``(n,)`` (the analytic baseline)."""
    return (np.mean(STARTUP_S) + _io_s(frame) + algorithm_s(frame)) / 3600.0


def simulate(frame: pd.DataFrame, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Actual outcomes: ``(duration_h (n,), gpus_used (n,) int64)`` with the world's noise."""
    n = len(frame)
    noise = np.exp(rng.normal(0.0, NOISE_SIGMA_GPU, n) + rng.normal(0.0, NOISE_SIGMA_JOB, n))
    startup = rng.uniform(*STARTUP_S, n)
    return (startup + _io_s(frame) + algorithm_s(frame) * noise) / 3600.0, gpus_used(frame)
