"""Workload physics of the three batch job kinds: what a job needs and how long it runs.

One module per kind (:class:`domain.JobKind`), each with the same functions, used by the job
generators (:mod:`forecasters.generators`) and as the physics priors of the job forecasters
(:mod:`forecasters.jobs.priors`):

* ``sample_features(n, rng)``: draw ``n`` jobs' features (the kind's contract, :mod:`forecasters.schema`);
* ``simulate(frame, rng)``: noisy ``(duration_h, gpus_used)`` of those jobs;
* ``analytic_duration_h(frame)``: the noise-free duration estimate (hours);
* ``memory_gpus(frame)`` / ``gpus_used(frame)``: the memory-driven minimum GPU count and
  ``max(gpus_requested, memory_gpus)``.

Modules: :mod:`~forecasters.workloads.training` (fine-tuning, continued pre-training, preference
tuning), :mod:`~forecasters.workloads.quantization`, :mod:`~forecasters.workloads.batch_inference`,
and :mod:`~forecasters.workloads.hardware`, the GPU datasheet table they share (peak FLOP/s,
memory, bandwidth, MFU, with sources).
"""

from __future__ import annotations

from types import ModuleType

from domain import JobKind
from forecasters.schema import spec_for
from forecasters.workloads import batch_inference, quantization, training

#: The physics module of each batch kind.
KIND_MODULES: dict[str, ModuleType] = {
    JobKind.TRAINING: training,
    JobKind.QUANTIZATION: quantization,
    JobKind.BATCH_INFERENCE: batch_inference,
}


def kind_module(kind: str) -> ModuleType:
    """The physics module of ``kind`` (``sample_features``, ``simulate``, ``analytic_duration_h``, ``gpus_used``).

    Raises:
        InputError: an unknown kind (the message names the known kinds).
    """
    spec_for(kind)  # raises InputError naming known kinds
    return KIND_MODULES[kind]


__all__ = ["KIND_MODULES", "batch_inference", "kind_module", "quantization", "training"]
