"""GPU constants used by the job generators and analytic estimates, with their public sources.

All values per GPU. Peak FLOP/s are *dense* tensor-core figures (vendor sheets quote twice
these "with sparsity").

| gpu_type | bf16 peak | fp8 peak | memory | bandwidth | source |
|---|---|---|---|---|---|
| a100_40gb | 312 TFLOP/s | (none: bf16 rate) | 40 GB | 1,555 GB/s | NVIDIA A100 Tensor Core GPU datasheet (SXM) |
| a100_80gb | 312 TFLOP/s | (none: bf16 rate) | 80 GB | 2,039 GB/s | NVIDIA A100 datasheet (80GB SXM) |
| h100_80gb | 989 TFLOP/s | 1,979 TFLOP/s | 80 GB | 3,350 GB/s | NVIDIA H100 Tensor Core GPU datasheet (SXM) |
| h200_141gb | 989 TFLOP/s | 1,979 TFLOP/s | 141 GB | 4,800 GB/s | NVIDIA H200 Tensor Core GPU datasheet (SXM) |
| l40s_48gb | 181 TFLOP/s | 366 TFLOP/s | 48 GB | 864 GB/s | NVIDIA L40S datasheet (362/733 with sparsity) |

Mean model-FLOPs utilisation (MFU) of a well-configured job, by type (``BASE_MFU``):
A100 0.45 (Megatron-LM, Narayanan et al. SC'21, reports 52 % of A100 peak for large GPT runs;
the torchtune table, calibration CSV lines 58-60, implies 26-42 % for 70B-405B jobs on 8 x A100),
H100 0.38 and H200 0.40 (Llama 3 paper, Dubey et al. 2024, Table 4: 38-43 % BF16 MFU on H100),
L40S 0.40 (assumption: PCIe card without NVLink, between the two).
"""

from __future__ import annotations

import numpy as np

from forecasters.schema import GPU_TYPES

PEAK_BF16_FLOPS = {
    "a100_40gb": 312e12,
    "a100_80gb": 312e12,
    "h100_80gb": 989e12,
    "h200_141gb": 989e12,
    "l40s_48gb": 181e12,
}
PEAK_FP8_FLOPS = {
    "a100_40gb": 312e12,  # no fp8 tensor cores: runs at the bf16 rate
    "a100_80gb": 312e12,
    "h100_80gb": 1979e12,
    "h200_141gb": 1979e12,
    "l40s_48gb": 366e12,
}
MEMORY_GB = {"a100_40gb": 40.0, "a100_80gb": 80.0, "h100_80gb": 80.0, "h200_141gb": 141.0, "l40s_48gb": 48.0}
BANDWIDTH_BPS = {
    "a100_40gb": 1555e9,
    "a100_80gb": 2039e9,
    "h100_80gb": 3350e9,
    "h200_141gb": 4800e9,
    "l40s_48gb": 864e9,
}
BASE_MFU = {"a100_40gb": 0.45, "a100_80gb": 0.45, "h100_80gb": 0.38, "h200_141gb": 0.40, "l40s_48gb": 0.40}

#: Reference GPU of the calibration rows (LitGPT tables, LLM Compressor runtime page).
REFERENCE_GPU = "a100_40gb"

#: Share of a GPU's memory usable by a job: 90 % minus 2 GB for the CUDA context and
#: allocator fragmentation (assumption; PyTorch's caching allocator typically leaves 5-10 %).
USABLE_MEMORY_FRACTION = 0.90
CUDA_CONTEXT_GB = 2.0

#: Largest GPU count the generators consider (a power of two).
MAX_GPUS = 1024


def lookup(table: dict[str, float], gpu_type: np.ndarray) -> np.ndarray:
    """Vectorised lookup of a per-GPU-type constant; ``gpu_type: (n,)`` of level strings -> ``(n,)`` float."""
    out = np.empty(len(gpu_type), dtype=float)
    for g in GPU_TYPES:
        out[np.asarray(gpu_type) == g] = table[g]
    return out


def usable_memory_gb(gpu_type: np.ndarray) -> np.ndarray:
    """Usable memory per GPU in GB, ``(n,)``: ``0.9 * capacity - 2``."""
    return lookup(MEMORY_GB, gpu_type) * USABLE_MEMORY_FRACTION - CUDA_CONTEXT_GB

