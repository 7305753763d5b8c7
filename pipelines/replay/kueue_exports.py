"""Kueue export writer: the ``kubectl get workloads -o json`` list of a replayed job table at a time T.

Pure (text out, no file IO); the inverse of :mod:`pipelines.workspace.sources.kueue`. Field rules:
``data/fixtures/README.md`` ("Field choices per file").
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import pandas as pd

from pipelines.replay.jobs import (
    CLUSTER_QUEUE,
    NAMESPACE,
    QOS_PRIORITY,
    QUEUE_NAME,
    UID_NS,
    Job,
    job_rows,
    to_epoch_s,
    utc_text,
)


def _k8s_cpu(milli: int) -> str:
    """A CPU quantity in Kubernetes canonical form: 4000 -> "4", 3152 -> "3152m"."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _k8s_mem(mib: int) -> str:
    """A memory quantity in Kubernetes canonical form: 16384 -> "16Gi", 5600 -> "5600Mi"."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def _uid(kind: str, pod: str) -> str:
    return str(uuid.uuid5(UID_NS, f"{kind}/{pod}"))


def workload_name(pod: str, job_uid: str) -> str:
    """Kueue's Workload name for a batch/v1 Job: ``job-<name>-<first 5 hex of sha1(Kind, Group, name, uid)>``.

    Source: kueue ``pkg/controller/jobframework`` ``GetWorkloadNameForOwnerWithGVK`` / ``getHash``.
    """
    digest = hashlib.sha1(f"Job\nbatch\n{pod}\n{job_uid}".encode()).hexdigest()
    return f"job-{pod}-{digest[:5]}"


def _workload(job: Job, t: int, rv: int) -> dict:
    """One ``kueue.x-k8s.io/v1beta1`` Workload as ``kubectl get -o json`` prints it at t.

    Conditions and messages: Kueue docs "Troubleshooting Jobs" (QuotaReserved/Admitted) and the job
    reconciler (Finished, reason Succeeded/Failed). A pending workload has an empty status (not
    yet attempted; the trace gives no reason). API: kueue ``apis/kueue/v1beta1/workload_types.go``.
    """
    st = job.state_at(t)
    job_uid = _uid("job", job.pod)
    requests = {"cpu": _k8s_cpu(job.cpu_milli), "nvidia.com/gpu": str(job.gpus)}
    if job.memory_mib > 0:
        requests["memory"] = _k8s_mem(job.memory_mib)
    meta: dict = {
        "creationTimestamp": utc_text(job.submit), "generation": 1,
        "labels": {"kueue.x-k8s.io/job-uid": job_uid},
        "name": workload_name(job.pod, job_uid), "namespace": NAMESPACE,
        "ownerReferences": [{"apiVersion": "batch/v1", "blockOwnerDeletion": True, "controller": True, "kind": "Job",
                             "name": job.pod, "uid": job_uid}],
        "resourceVersion": str(rv), "uid": _uid("workload", job.pod),
    }
    status: dict = {}
    if st in ("running", "ended"):
        assert job.start is not None and job.model is not None
        flavor = job.model.lower()
        status["admission"] = {"clusterQueue": CLUSTER_QUEUE, "podSetAssignments": [
            {"count": 1, "flavors": {k: flavor for k in requests}, "name": "main", "resourceUsage": dict(requests)}]}
        conds = [
            {"lastTransitionTime": utc_text(job.start), "message": f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}",
             "observedGeneration": 1, "reason": "QuotaReserved", "status": "True", "type": "QuotaReserved"},
            {"lastTransitionTime": utc_text(job.start), "message": "The workload is admitted",
             "observedGeneration": 1, "reason": "Admitted", "status": "True", "type": "Admitted"},
        ]
        if st == "ended":
            failed = job.final == "FAILED"
            conds.append({"lastTransitionTime": utc_text(job.end),
                          "message": "Job has reached the specified backoff limit" if failed
                          else "Job finished successfully",
                          "observedGeneration": 1, "reason": "Failed" if failed else "Succeeded", "status": "True",
                          "type": "Finished"})
        else:
            meta["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
        status["conditions"] = conds
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": meta,
        "spec": {
            "active": True,
            "podSets": [{"count": 1, "name": "main", "template": {"metadata": {}, "spec": {
                "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(job.gpus)},
                                                              "requests": requests}}],
                "restartPolicy": "Never"}}}],
            "priority": QOS_PRIORITY[job.qos], "priorityClassName": job.qos.lower(),
            "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass", "queueName": QUEUE_NAME,
        },
        "status": status,
    }


def kueue_list_text(jobs: pd.DataFrame, t: Any) -> str:
    """What ``kubectl get workloads.kueue.x-k8s.io -A -o json`` prints at ``t``: a v1 List, keys sorted, 4-space indent.

    Every job submitted by t (job id order) as it stands at t: pending (empty status), running
    (admitted, finalizer ``kueue.x-k8s.io/resource-in-use``) or finished (Kueue keeps finished
    Workloads until their owner Job is deleted). A job cancelled while pending by t is absent: a
    Job deleted before admission takes its Workload with it. resourceVersion is a placeholder
    (1000000 + the item's position). Final newline.

    Raises:
        InputError: a bad job table (:func:`replay_jobs`) or ``t`` without a zone.
    """
    at = to_epoch_s(t, "t")
    items = []
    for job in job_rows(jobs):
        st = job.state_at(at)
        if st is None or (job.start is None and st == "ended"):
            continue
        items.append(_workload(job, at, 1_000_000 + len(items)))
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    return json.dumps(doc, indent=4, sort_keys=True, ensure_ascii=False) + "\n"
