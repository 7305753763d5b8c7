"""GPU constants used by the job generators and analytic estimates (the table and its sources: :mod:`domain.gpus`).

Per-type dictionaries keyed by the :data:`domain.gpus.GPU_TABLE` names (every GPU type gpuplan
knows: P100, V100 16/32 GB, T4, A10, A100 40/80 GB, L40S, H100, H200, B200, MI300X):
``PEAK_BF16_FLOPS`` (dense 16-bit tensor FLOP/s; FP16 on GPUs without BF16), ``PEAK_FP8_FLOPS``
(dense FP8, the 16-bit rate where there is none), ``MEMORY_GB``, ``BANDWIDTH_BPS`` (bytes/s) and
``BASE_MFU`` (mean model-FLOPs utilisation). The generated histories draw only the five types of
:data:`forecasters.schema.GENERATED_GPU_TYPES`; the others are priced by the same formulas from
their datasheet figures.
"""

from __future__ import annotations

import numpy as np

from domain.gpus import GPU_TABLE

PEAK_BF16_FLOPS: dict[str, float] = {k: s.peak_16bit_flops for k, s in GPU_TABLE.items()}
PEAK_FP8_FLOPS: dict[str, float] = {k: s.peak_fp8_flops for k, s in GPU_TABLE.items()}
MEMORY_GB: dict[str, float] = {k: s.memory_gb for k, s in GPU_TABLE.items()}
BANDWIDTH_BPS: dict[str, float] = {k: s.bandwidth_bps for k, s in GPU_TABLE.items()}
BASE_MFU: dict[str, float] = {k: s.base_mfu for k, s in GPU_TABLE.items()}

#: Reference GPU of the calibration rows (LitGPT tables, LLM Compressor runtime page).
REFERENCE_GPU = "a100_40gb"

#: Share of a GPU's memory usable by a job: 90 % minus 2 GB for the CUDA context and
#: allocator fragmentation (assumption; PyTorch's caching allocator typically leaves 5-10 %).
USABLE_MEMORY_FRACTION = 0.90
CUDA_CONTEXT_GB = 2.0

#: Largest GPU count the generators consider (a power of two).
MAX_GPUS = 1024


def lookup(table: dict[str, float], gpu_type: np.ndarray) -> np.ndarray:
    """Vectorised lookup of a per-GPU-type constant; ``gpu_type: (n,)`` of type names -> ``(n,)`` float (NaN: unknown)."""
    out = np.full(len(gpu_type), np.nan)
    for g, v in table.items():
        out[np.asarray(gpu_type) == g] = v
    return out


def usable_memory_gb(gpu_type: np.ndarray) -> np.ndarray:
    """Usable memory per GPU in GB, ``(n,)``: ``0.9 * capacity - 2``."""
    return lookup(MEMORY_GB, gpu_type) * USABLE_MEMORY_FRACTION - CUDA_CONTEXT_GB

