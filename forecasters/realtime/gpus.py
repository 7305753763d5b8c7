"""Traffic → GPUs (DESIGN §4.4)."""

from __future__ import annotations

import numpy as np

from forecasters.errors import InputError


def to_gpus(
    traffic,
    capacity_per_gpu_per_h: float,
    headroom: float,
    min_gpus: int,
    max_gpus: int,
    replica_gpus: int = 1,
) -> np.ndarray:
    """GPUs needed per hour: ``ceil(traffic * (1 + headroom) / capacity_per_gpu_per_h)``, banded.

    The count is clipped to ``[min_gpus, max_gpus]`` and rounded up to a multiple of
    ``replica_gpus`` (DESIGN §4.4).

    Args:
        traffic: array-like ``(n,)`` of traffic per hour (same units as the capacity), >= 0, finite.
        capacity_per_gpu_per_h: traffic one GPU serves per hour (> 0).
        headroom: fraction added on top of traffic (>= 0), e.g. 0.1.
        min_gpus: the service's lowest GPU count, a multiple of ``replica_gpus``, ``>= 0``.
        max_gpus: the service's highest GPU count, a multiple of ``replica_gpus``, ``>= min_gpus``.
        replica_gpus: GPUs per replica (>= 1).

    Returns:
        ``int64`` array ``(n,)``. The ratio is rounded to 1e-9 before the ceiling so that float noise
        (4.0000000001) does not add a GPU.

    Raises:
        forecasters.errors.InputError: negative/NaN traffic or an inconsistent band (names the field).
    """
    x = np.asarray(traffic, dtype=float)
    if not np.isfinite(x).all():
        raise InputError("traffic: NaN or inf in the demand to convert to GPUs")
    if (x < 0).any():
        raise InputError(f"traffic: negative value {x[x < 0][0]:g}")
    if not capacity_per_gpu_per_h > 0:
        raise InputError(f"capacity_per_gpu_per_h must be > 0; got {capacity_per_gpu_per_h}")
    if headroom < 0:
        raise InputError(f"headroom must be >= 0; got {headroom}")
    if int(replica_gpus) < 1:
        raise InputError(f"replica_gpus must be >= 1; got {replica_gpus}")
    if not 0 <= min_gpus <= max_gpus:
        raise InputError(f"min_gpus {min_gpus} / max_gpus {max_gpus}: need 0 <= min_gpus <= max_gpus")
    for name, v in (("min_gpus", min_gpus), ("max_gpus", max_gpus)):
        if v % replica_gpus:
            raise InputError(f"{name} {v} is not a multiple of replica_gpus {replica_gpus}")
    need = np.ceil(np.round(x * (1.0 + headroom) / capacity_per_gpu_per_h, 9))
    need = np.clip(need, min_gpus, max_gpus)
    need = np.ceil(need / replica_gpus) * replica_gpus
    return need.astype(np.int64)
