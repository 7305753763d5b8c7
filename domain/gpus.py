"""GPU types: one datasheet table (peak FLOP/s, memory, bandwidth) and the names schedulers give them.

Shared vocabulary: the physics of the job kinds (:mod:`forecasters.workloads.hardware`), the job
feature contracts (:mod:`forecasters.schema`, ``gpu_type``) and the scheduler-history forecaster
(:mod:`forecasters.scheduler`, which reads a scheduler's ``gpu_type`` through
:func:`canonical_gpu_type`) all use :data:`GPU_TABLE`.

All values per GPU. ``peak_16bit_flops`` is the *dense* 16-bit tensor rate: BF16 where the GPU has
BF16, else FP16 (V100, T4, P100 have no BF16; P100 has no tensor cores, its FP16 vector rate).
Vendor sheets quote twice the dense figure "with sparsity"; those are halved here.
``peak_fp8_flops`` is the dense FP8 rate, or the 16-bit rate where the GPU has no FP8.

| gpu_type | 16-bit dense | FP8 dense | memory | bandwidth | source |
|---|---|---|---|---|---|
| p100_16gb | 21.2 TFLOP/s (FP16) | (none) | 16 GB | 732 GB/s | NVIDIA Tesla P100 datasheet (SXM2) |
| v100_16gb | 125 TFLOP/s (FP16 tensor) | (none) | 16 GB | 900 GB/s | NVIDIA V100 Tensor Core GPU datasheet (SXM2) |
| v100_32gb | 125 TFLOP/s (FP16 tensor) | (none) | 32 GB | 900 GB/s | NVIDIA V100 datasheet (SXM2 32GB) |
| t4_16gb | 65 TFLOP/s (FP16 tensor) | (none) | 16 GB | 320 GB/s | NVIDIA T4 Tensor Core GPU datasheet |
| a10_24gb | 125 TFLOP/s | (none) | 24 GB | 600 GB/s | NVIDIA A10 Tensor Core GPU datasheet (250 with sparsity) |
| a100_40gb | 312 TFLOP/s | (none) | 40 GB | 1,555 GB/s | NVIDIA A100 Tensor Core GPU datasheet (SXM) |
| a100_80gb | 312 TFLOP/s | (none) | 80 GB | 2,039 GB/s | NVIDIA A100 datasheet (80GB SXM) |
| l40s_48gb | 181 TFLOP/s | 366 TFLOP/s | 48 GB | 864 GB/s | NVIDIA L40S datasheet (362/733 with sparsity) |
| h100_80gb | 989 TFLOP/s | 1,979 TFLOP/s | 80 GB | 3,350 GB/s | NVIDIA H100 Tensor Core GPU datasheet (SXM) |
| h200_141gb | 989 TFLOP/s | 1,979 TFLOP/s | 141 GB | 4,800 GB/s | NVIDIA H200 Tensor Core GPU datasheet (SXM) |
| b200_180gb | 2,250 TFLOP/s | 4,500 TFLOP/s | 180 GB | 7,700 GB/s | NVIDIA HGX B200 datasheet, per GPU (4.5/9 PFLOP/s with sparsity) |
| mi300x_192gb | 1,307 TFLOP/s | 2,615 TFLOP/s | 192 GB | 5,300 GB/s | AMD Instinct MI300X datasheet (peak dense BF16 1,307.4, FP8 2,614.9) |

``base_mfu``: mean model-FLOPs utilisation of a well-configured job. A100 0.45 (Megatron-LM,
Narayanan et al. SC'21, 52 % of A100 peak for large GPT runs), H100 0.38 and H200 0.40 (Llama 3
paper, Dubey et al. 2024, Table 4: 38-43 % BF16 MFU on H100); every other type 0.40, an
assumption (no public MFU figure was found for LLM jobs on them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type's datasheet figures (module table).

    Attributes:
        gpu_type: canonical name, ``<model>_<memory>gb`` lower case.
        peak_16bit_flops: dense BF16 (else FP16) tensor FLOP/s.
        peak_fp8_flops: dense FP8 FLOP/s (the 16-bit rate where there is no FP8).
        memory_gb: memory per GPU (GB).
        bandwidth_bps: memory bandwidth (bytes/s).
        base_mfu: typical model-FLOPs utilisation (fraction).
        vendor: ``nvidia`` or ``amd``.
    """

    gpu_type: str
    peak_16bit_flops: float
    peak_fp8_flops: float
    memory_gb: float
    bandwidth_bps: float
    base_mfu: float
    vendor: str = "nvidia"


#: The GPU types gpuplan knows, oldest first (module table).
GPU_TABLE: dict[str, GpuSpec] = {s.gpu_type: s for s in (
    GpuSpec("p100_16gb", 21.2e12, 21.2e12, 16.0, 732e9, 0.40),
    GpuSpec("v100_16gb", 125e12, 125e12, 16.0, 900e9, 0.40),
    GpuSpec("v100_32gb", 125e12, 125e12, 32.0, 900e9, 0.40),
    GpuSpec("t4_16gb", 65e12, 65e12, 16.0, 320e9, 0.40),
    GpuSpec("a10_24gb", 125e12, 125e12, 24.0, 600e9, 0.40),
    GpuSpec("a100_40gb", 312e12, 312e12, 40.0, 1555e9, 0.45),
    GpuSpec("a100_80gb", 312e12, 312e12, 80.0, 2039e9, 0.45),
    GpuSpec("l40s_48gb", 181e12, 366e12, 48.0, 864e9, 0.40),
    GpuSpec("h100_80gb", 989e12, 1979e12, 80.0, 3350e9, 0.38),
    GpuSpec("h200_141gb", 989e12, 1979e12, 141.0, 4800e9, 0.40),
    GpuSpec("b200_180gb", 2250e12, 4500e12, 180.0, 7700e9, 0.40),
    GpuSpec("mi300x_192gb", 1307.4e12, 2614.9e12, 192.0, 5300e9, 0.40, vendor="amd"),
)}

#: Family name (as a scheduler may print it, no memory size) -> the canonical type it means: the
#: family's smallest-memory variant (the conservative reading: less memory, never more).
FAMILY_DEFAULT: dict[str, str] = {
    "p100": "p100_16gb", "v100": "v100_16gb", "t4": "t4_16gb", "a10": "a10_24gb", "a100": "a100_40gb",
    "l40s": "l40s_48gb", "h100": "h100_80gb", "h200": "h200_141gb", "b200": "b200_180gb", "mi300x": "mi300x_192gb",
}

_SPLIT = re.compile(r"[^a-z0-9]+")
_MEMORY = re.compile(r"^(?:m)?(\d{2,3})(?:gb|g)?$")
_VENDOR_WORDS = frozenset({"nvidia", "tesla", "amd", "instinct", "gpu", "sxm", "sxm2", "sxm4", "sxm5", "pcie", "nvl",
                           "hbm2", "hbm2e", "hbm3", "hbm3e", "oam"})


def canonical_gpu_type(name: object) -> str | None:
    """The :data:`GPU_TABLE` key a scheduler's GPU name means, or None when it names no known type.

    Accepts the canonical names (``a100_80gb``) and what schedulers and device plugins print:
    Slurm GRES types (``a100``, ``v100``; a family without memory size is its smallest variant,
    :data:`FAMILY_DEFAULT`), Kubernetes ``nvidia.com/gpu.product`` labels (``NVIDIA-A100-SXM4-80GB``,
    ``Tesla-T4``, ``NVIDIA-H100-80GB-HBM3``), the Alibaba openb node models (``V100M16``,
    ``V100M32``, ``T4``, ``P100``, ``A10``) and AMD's (``AMD Instinct MI300X``, ``mi300x``).
    Case, ``-``/``_``/spaces and vendor words (NVIDIA, Tesla, SXM4, PCIe, HBM3 ...) are ignored.
    A name listing several types (Slurm ``a100,v100``) is None: it names no single type.
    """
    if not isinstance(name, str):
        return None
    text = name.strip().lower()
    if text in GPU_TABLE:
        return text
    if "," in text:
        return None
    words = [w for w in _SPLIT.split(text) if w and w not in _VENDOR_WORDS]
    # openb's "v100m16" / "v100m32": model and memory glued together
    glued = re.fullmatch(r"([a-z]+\d+[a-z]?)m(\d{2})", "".join(words))
    if glued:
        words = [glued.group(1), glued.group(2)]
    family = next((w for w in words if w in FAMILY_DEFAULT), None)
    if family is None:
        return None
    memory = None
    for w in words:
        m = _MEMORY.match(w)
        if m and w != family:
            memory = int(m.group(1))
    if memory is None:
        return FAMILY_DEFAULT[family]
    exact = f"{family}_{memory}gb"
    return exact if exact in GPU_TABLE else None
