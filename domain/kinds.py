"""Workload kinds and QoS classes (DESIGN §1, §3).

Batch kinds run as one contiguous power-of-two block until done; real-time inference is an
elastic *service*, never a job.
"""

from __future__ import annotations

from enum import StrEnum


class JobKind(StrEnum):
    """Batch job kinds. A ``StrEnum``: ``JobKind.TRAINING == "training"``."""

    TRAINING = "training"
    QUANTIZATION = "quantization"
    BATCH_INFERENCE = "batch_inference"


#: The batch job kinds in their canonical order (training, quantization, batch inference).
JOB_KINDS: tuple[str, ...] = tuple(k.value for k in JobKind)

#: The real-time inference kind (a service with a demand curve, DESIGN §4.4).
REALTIME = "realtime"

#: Priority by Kubernetes QoS class for real GPU-pod traces (Alibaba openb): the trace has no
#: priority; Guaranteed pods are the ones the operator promised resources to, best-effort (BE)
#: the ones it did not. Source: Kubernetes QoS classes (Guaranteed > Burstable > BestEffort).
QOS_PRIORITY: dict[str, float] = {"Guaranteed": 4.0, "Burstable": 2.0, "BE": 1.0}

#: Batch kind by QoS class for real GPU pods: best-effort pods become batch inference,
#: Burstable/Guaranteed pods training (data/traces/README.md).
QOS_KIND: dict[str, str] = {"Guaranteed": "training", "Burstable": "training", "BE": "batch_inference"}
