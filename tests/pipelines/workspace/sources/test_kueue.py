"""pipelines.workspace.sources.kueue: Workload exports -> job records, checked field by field.

Inputs follow real ``kubectl get workloads.kueue.x-k8s.io -A -o json`` output: the List envelope
kubectl prints (``{"apiVersion": "v1", "items": [...], "kind": "List", "metadata": {...}}``), the
Workload fields of ``apis/kueue/v1beta1/workload_types.go`` (kubernetes-sigs/kueue), and the
condition blocks of Kueue's "Troubleshooting Jobs" page
(https://kueue.sigs.k8s.io/docs/tasks/troubleshooting/troubleshooting_jobs/: admitted,
pending for quota, preempted). Failure messages are the batch/Job controller's
("Job has reached the specified backoff limit", "Job was active longer than specified deadline"),
which Kueue copies into the Finished condition.
"""

from __future__ import annotations

import copy
import json
import math
from decimal import Decimal

import pandas as pd
import pytest

from domain.records import JOB_RECORD
from pipelines.io.errors import InputError
from pipelines.workspace.sources.kueue import parse_kueue_workloads
from pipelines.workspace.sources.kueue_gpus import parse_quantity


def _container(gpus=None, *, name="trainer", limits_only=False, restart_policy=None):
    resources = {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"memory": "64Gi"}}
    if gpus is not None:
        resources["limits"]["nvidia.com/gpu"] = gpus
        if not limits_only:
            resources["requests"]["nvidia.com/gpu"] = gpus
    out = {"name": name, "image": "nvcr.io/nvidia/pytorch:24.03-py3", "resources": resources}
    if restart_policy:
        out["restartPolicy"] = restart_policy
    return out


def _podset(name, count, containers, init_containers=None, annotations=None):
    spec = {"containers": containers, "restartPolicy": "Never"}
    if init_containers is not None:
        spec["initContainers"] = init_containers
    meta = {"annotations": annotations} if annotations else {}
    return {"name": name, "count": count, "template": {"metadata": meta, "spec": spec}}


def _workload(name, namespace, created, podsets, *, owner=None, conditions=(), admission=None, labels=None,
              annotations=None, queue="user-queue", priority_class=None, priority=None, status_extra=None,
              spec_extra=None):
    meta = {"creationTimestamp": created, "generation": 1, "name": name, "namespace": namespace,
            "resourceVersion": "48213", "uid": "0b4e0c9a-8d1f-4c7e-9a55-3e6f1a2b7c01",
            "labels": {"kueue.x-k8s.io/job-uid": "46ef6b23-a7d9-42b1-b0f8-071bbb29a94d", **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "blockOwnerDeletion": True, "controller": True,
                                    "kind": "Job", "name": owner, "uid": "46ef6b23-a7d9-42b1-b0f8-071bbb29a94d"}]
    spec = {"active": True, "podSets": podsets, "queueName": queue}
    if priority_class:
        spec["priorityClassName"] = priority_class
        spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    if priority is not None:
        spec["priority"] = priority
    spec.update(spec_extra or {})
    status = {"conditions": list(conditions)}
    if admission:
        status["admission"] = admission
    status.update(status_extra or {})
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": meta, "spec": spec,
            "status": status}


def _cond(kind, status, reason, message, at):
    return {"lastTransitionTime": at, "message": message, "observedGeneration": 1, "reason": reason,
            "status": status, "type": kind}


def _admission(*assignments):
    return {"clusterQueue": "cluster-queue", "podSetAssignments": list(assignments)}


def _assignment(name, count, gpu_flavor):
    flavors = {"cpu": "default-flavor", "memory": "default-flavor"}
    if gpu_flavor:
        flavors["nvidia.com/gpu"] = gpu_flavor
    return {"count": count, "flavors": flavors, "name": name, "resourceUsage": {"cpu": str(8 * count)}}


def _reserved(at, queue="cluster-queue"):
    return _cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {queue}", at)


def _admitted(at):
    return _cond("Admitted", "True", "Admitted", "The workload is admitted", at)


def _list(*items):
    return json.dumps({"apiVersion": "v1", "items": list(items), "kind": "List",
                       "metadata": {"resourceVersion": ""}}, indent=2)


PENDING = _workload(
    "job-sweep-7f2c1", "ml-research", "2024-03-21T13:42:10Z",
    [_podset("main", 2, [_container("4")])], owner="sweep", priority_class="high-priority", priority=1000,
    conditions=[_cond("QuotaReserved", "False", "Pending",
                      "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
                      "a100-80gb, 8 more needed", "2024-03-21T13:43:00Z")])

RUNNING = _workload(
    "pytorchjob-llama-ft-4c9d2", "ml-research", "2024-03-19T20:48:55Z",
    [_podset("master", 1, [_container(None, name="launcher")]),
     _podset("worker", 4, [_container("8", limits_only=True)])],
    owner="llama-ft", labels={"gpuplan.user": "alice"},
    annotations={"gpuplan.kind": "training", "gpuplan.params_b": "7", "kueue.x-k8s.io/is-group-workload": "false"},
    conditions=[_reserved("2024-03-19T20:49:17Z"), _admitted("2024-03-19T20:49:17Z")],
    admission=_admission(_assignment("master", 1, None), _assignment("worker", 4, "a100-80gb")))

SUCCEEDED = _workload(
    "job-quantize-awq-88b1e", "inference", "2024-03-20T08:00:00Z",
    [_podset("main", 1, [_container("2")], annotations={"gpuplan.kind": "quantization"})],
    owner="quantize-awq", spec_extra={"maximumExecutionTimeSeconds": 14400},
    conditions=[_reserved("2024-03-20T08:05:30Z"), _admitted("2024-03-20T08:05:30Z"),
                _cond("PodsReady", "True", "PodsReady", "All pods were ready or succeeded since the workload admission",
                      "2024-03-20T08:06:02Z"),
                _cond("Finished", "True", "Succeeded", "Job finished successfully", "2024-03-20T10:35:30Z")],
    admission=_admission(_assignment("main", 1, "h100")))

FAILED = _workload(
    "job-eval-harness-0a7f3", "ml-research", "2024-03-20T09:00:00Z",
    [_podset("main", 1, [_container("1")])], owner="eval-harness",
    conditions=[_reserved("2024-03-20T09:00:04Z"), _admitted("2024-03-20T09:00:04Z"),
                _cond("Finished", "True", "Failed", "Job has reached the specified backoff limit",
                      "2024-03-20T09:17:24Z")],
    admission=_admission(_assignment("main", 1, "a100-80gb")))

DEADLINE = _workload(
    "job-batch-embed-51c0d", "inference", "2024-03-20T11:00:00Z",
    [_podset("main", 3, [_container("1")])], owner="batch-embed", labels={"gpuplan.time_limit_s": "7200"},
    conditions=[_reserved("2024-03-20T11:00:10Z"), _admitted("2024-03-20T11:00:10Z"),
                _cond("Finished", "True", "Failed", "Job was active longer than specified deadline",
                      "2024-03-20T13:00:10Z")],
    admission=_admission(_assignment("main", 3, "l4")))

# Kueue's troubleshooting page, "Is my Job preempted?": quota released, Admitted back to False.
PREEMPTED = _workload(
    "job-pretrain-3b-e41aa", "ml-research", "2024-03-21T14:00:00Z",
    [_podset("main", 2, [_container("8")])], owner="pretrain-3b", priority=100,
    conditions=[
        _cond("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient unused "
              "quota for cpu in flavor default-flavor, 9 more needed", "2024-03-21T15:49:56Z"),
        _cond("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload",
              "2024-03-21T15:49:55Z"),
        _cond("Admitted", "False", "NoReservation", "The workload has no reservation", "2024-03-21T15:49:56Z")],
    status_extra={"accumulatedPastExexcutionTimeSeconds": 5395})

# Evicted a moment ago: Admitted and QuotaReserved are still True while the pods terminate (the admission
# kept): the ClusterQueue still counts its 4 GPUs, so the record holds them (running), issue 32 case 006.
EVICTING = _workload(
    "job-finetune-mistral-77d10", "ml-research", "2024-03-22T09:55:00Z",
    [_podset("main", 1, [_container("4")])], owner="finetune-mistral",
    conditions=[_reserved("2024-03-22T10:00:00Z"), _admitted("2024-03-22T10:00:00Z"),
                _cond("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload",
                      "2024-03-22T11:30:00Z"),
                _cond("Preempted", "True", "InClusterQueue", "Preempted to accommodate a higher priority Workload",
                      "2024-03-22T11:30:00Z")],
    admission=_admission(_assignment("main", 1, "a100-80gb")))

# Preempted earlier, then admitted again: Kueue resets Evicted to False ("Previously: ...").
READMITTED = _workload(
    "job-finetune-gemma-2b3c4", "ml-research", "2024-03-22T07:00:00Z",
    [_podset("main", 1, [_container("4")])], owner="finetune-gemma",
    conditions=[_reserved("2024-03-22T09:10:00Z"), _admitted("2024-03-22T09:10:00Z"),
                _cond("Evicted", "False", "QuotaReserved",
                      "Previously: Preempted to accommodate a higher priority Workload", "2024-03-22T09:10:00Z"),
                _cond("Requeued", "True", "Preempted", "Preempted to accommodate a higher priority Workload",
                      "2024-03-22T08:40:00Z")],
    admission=_admission(_assignment("main", 1, "h100")))


def _by_id(result):
    return result.frame.set_index("job_id")


def test_every_state_with_exact_times_and_gpus():
    items = [PENDING, RUNNING, SUCCEEDED, FAILED, DEADLINE, PREEMPTED, EVICTING, READMITTED]
    result = parse_kueue_workloads(_list(*items))
    assert result.read == 8 and result.errors == []
    assert list(result.frame.columns) == list(JOB_RECORD)
    f = _by_id(result)
    assert f["state"].to_dict() == {
        "ml-research/job-sweep-7f2c1": "pending", "ml-research/pytorchjob-llama-ft-4c9d2": "running",
        "inference/job-quantize-awq-88b1e": "completed", "ml-research/job-eval-harness-0a7f3": "failed",
        "inference/job-batch-embed-51c0d": "timeout", "ml-research/job-pretrain-3b-e41aa": "pending",
        "ml-research/job-finetune-mistral-77d10": "running", "ml-research/job-finetune-gemma-2b3c4": "running"}
    assert f["censored"].to_dict() == {
        "ml-research/job-sweep-7f2c1": False, "ml-research/pytorchjob-llama-ft-4c9d2": False,
        "inference/job-quantize-awq-88b1e": False, "ml-research/job-eval-harness-0a7f3": False,
        "inference/job-batch-embed-51c0d": False, "ml-research/job-pretrain-3b-e41aa": False,
        "ml-research/job-finetune-mistral-77d10": False, "ml-research/job-finetune-gemma-2b3c4": False}
    # 2 pods x 4; master 0 + 4 workers x 8 (limits only); 1 x 2; 1 x 1; 3 x 1; 2 x 8; 1 x 4; 1 x 4
    assert f["gpus"].tolist() == [8, 32, 2, 1, 3, 16, 4, 4]
    assert f["gpu_type"].tolist() == [None, "a100-80gb", "h100", "a100-80gb", "l4", None, "a100-80gb", "h100"]
    assert (f["source"] == "kueue").all()


def test_times_and_elapsed_are_the_condition_transition_times():
    f = _by_id(parse_kueue_workloads(_list(PENDING, RUNNING, SUCCEEDED, DEADLINE, PREEMPTED, EVICTING)))
    ts = pd.Timestamp
    p = f.loc["ml-research/job-sweep-7f2c1"]
    assert p["submitted_at"] == ts("2024-03-21T13:42:10Z")
    assert pd.isna(p["started_at"]) and pd.isna(p["ended_at"]) and math.isnan(p["elapsed_s"])
    r = f.loc["ml-research/pytorchjob-llama-ft-4c9d2"]
    assert r["started_at"] == ts("2024-03-19T20:49:17Z") and pd.isna(r["ended_at"]) and math.isnan(r["elapsed_s"])
    s = f.loc["inference/job-quantize-awq-88b1e"]
    assert (s["submitted_at"], s["started_at"], s["ended_at"]) == (
        ts("2024-03-20T08:00:00Z"), ts("2024-03-20T08:05:30Z"), ts("2024-03-20T10:35:30Z"))
    assert s["elapsed_s"] == 9000.0  # 08:05:30 -> 10:35:30
    assert f.loc["inference/job-batch-embed-51c0d", "elapsed_s"] == 7200.0
    # evicted and still active: Kueue requeued it, it waits again (pending, planned); the run so far
    # is Kueue's accumulatedPastExexcutionTimeSeconds
    pre = f.loc["ml-research/job-pretrain-3b-e41aa"]
    assert pd.isna(pre["started_at"]) and pd.isna(pre["ended_at"]) and pre["elapsed_s"] == 5395.0
    ev = f.loc["ml-research/job-finetune-mistral-77d10"]  # quota still held: its GPUs are not free
    assert ev["started_at"] == ts("2024-03-22T10:00:00Z") and pd.isna(ev["ended_at"]) and math.isnan(ev["elapsed_s"])
    assert json.loads(ev["annotations"])["kueue_quota_held"] == "Evicted:Preempted"
    # deactivated (spec.active false) after a preemption: not requeued, a censored run
    gone = copy.deepcopy(EVICTING)
    gone["spec"]["active"] = False
    g = parse_kueue_workloads(json.dumps(gone)).frame.iloc[0]
    assert (g["state"], bool(g["censored"]), g["elapsed_s"]) == ("preempted", True, 5400.0)
    assert g["started_at"] == ts("2024-03-22T10:00:00Z") and g["ended_at"] == ts("2024-03-22T11:30:00Z")
    assert str(f["submitted_at"].dtype) == "datetime64[us, UTC]"


def test_scheduler_fields_and_annotations():
    f = _by_id(parse_kueue_workloads(_list(PENDING, RUNNING, SUCCEEDED, DEADLINE)))
    p = f.loc["ml-research/job-sweep-7f2c1"]
    assert (p["account"], p["partition"], p["qos"], p["priority"], p["job_name"]) == (
        "ml-research", "user-queue", "high-priority", 1000.0, "sweep")
    assert p["user"] is None and p["kind"] is None and p["annotations"] == "{}"
    assert math.isnan(p["time_limit_s"])
    r = f.loc["ml-research/pytorchjob-llama-ft-4c9d2"]
    assert (r["user"], r["kind"], r["job_name"]) == ("alice", "training", "llama-ft")
    assert json.loads(r["annotations"]) == {"kind": "training", "params_b": "7", "user": "alice"}
    assert r["qos"] is None and math.isnan(r["priority"])
    s = f.loc["inference/job-quantize-awq-88b1e"]
    assert s["kind"] == "quantization"  # from the pod template's annotations
    assert s["time_limit_s"] == 14400.0  # spec.maximumExecutionTimeSeconds
    assert f.loc["inference/job-batch-embed-51c0d", "time_limit_s"] == 7200.0  # gpuplan.time_limit_s label


def test_malformed_items_mid_list_are_rejected_by_index_and_the_rest_kept():
    no_created = copy.deepcopy(SUCCEEDED)
    del no_created["metadata"]["creationTimestamp"]
    half_gpu = copy.deepcopy(FAILED)
    half_gpu["metadata"]["name"] = "job-notebook-mig-1"
    half_gpu["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "nvidia.com/gpu"] = "500m"
    not_quantity = copy.deepcopy(FAILED)
    not_quantity["metadata"]["name"] = "job-typo-2"
    not_quantity["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "nvidia.com/gpu"] = "four"
    result = parse_kueue_workloads(_list(PENDING, no_created, half_gpu, RUNNING, not_quantity))
    assert result.read == 5 and result.rejected == 3
    assert result.frame["job_id"].tolist() == ["ml-research/job-sweep-7f2c1", "ml-research/pytorchjob-llama-ft-4c9d2"]
    assert result.errors[0] == ("item 1 (inference/job-quantize-awq-88b1e): metadata.creationTimestamp is missing "
                                "(expected an RFC 3339 time such as 2024-03-19T20:49:17Z)")
    assert result.errors[1].startswith("item 2 (ml-research/job-notebook-mig-1): spec.podSets[0].template.spec."
                                       "containers[0].resources.requests['nvidia.com/gpu'] '500m' is not a whole "
                                       "number of GPUs")
    assert result.errors[2].startswith("item 4 (ml-research/job-typo-2): ")
    assert "'four' is not a Kubernetes quantity" in result.errors[2]


def test_a_single_workload_object():
    # kubectl get workload -n ml-research job-finetune-mistral-77d10 -o json
    result = parse_kueue_workloads(json.dumps(EVICTING))
    assert result.read == 1 and result.errors == []
    row = result.frame.iloc[0]
    assert (row["job_id"], row["state"], row["gpus"], row["gpu_type"]) == (
        "ml-research/job-finetune-mistral-77d10", "running", 4, "a100-80gb")


def test_init_and_sidecar_containers_follow_the_effective_pod_request():
    # per pod: max(app 2 + sidecar 1, init "warmup" 5 + the sidecar listed before it 1) = 6; x 2 pods
    podset = _podset("main", 2, [_container("2")],
                     init_containers=[_container("1", name="proxy", restart_policy="Always"),
                                      _container("5", name="warmup")])
    wl = _workload("job-init-1", "ml", "2024-03-20T08:00:00Z", [podset])
    assert parse_kueue_workloads(_list(wl)).frame["gpus"].tolist() == [12]  # (5 + 1 sidecar before it) x 2
    podset["template"]["spec"]["initContainers"][1]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    assert parse_kueue_workloads(_list(wl)).frame["gpus"].tolist() == [6]  # (2 + 1) x 2


def test_partial_admission_count_and_v1beta2_fields():
    wl = copy.deepcopy(RUNNING)
    wl["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    wl["status"]["admission"]["podSetAssignments"][1]["count"] = 3  # partially admitted: 3 of 4 workers
    wl["spec"]["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "batch"}
    wl["spec"]["priority"] = 10
    row = parse_kueue_workloads(_list(wl)).frame.iloc[0]
    assert (row["gpus"], row["qos"], row["priority"]) == (24, "batch", 10.0)


def test_finished_after_admission_checks_rejected_is_cancelled_and_deactivation_by_time_limit_is_timeout():
    rejected = _workload("job-dws-1", "ml", "2024-03-20T08:00:00Z", [_podset("main", 1, [_container("8")])],
                         conditions=[_cond("Finished", "True", "AdmissionChecksRejected",
                                           "Admission checks [dws-prov] are rejected", "2024-03-20T08:30:00Z")])
    limited = _workload("job-long-1", "ml", "2024-03-20T08:00:00Z", [_podset("main", 1, [_container("8")])],
                        spec_extra={"maximumExecutionTimeSeconds": 3600, "active": False},
                        conditions=[_cond("Evicted", "True", "DeactivatedDueToMaximumExecutionTimeExceeded",
                                          "The workload is deactivated due to exceeding the maximum execution time",
                                          "2024-03-20T09:05:00Z")],
                        status_extra={"accumulatedPastExexcutionTimeSeconds": 3600})
    f = _by_id(parse_kueue_workloads(_list(rejected, limited)))
    assert f.loc["ml/job-dws-1", "state"] == "cancelled" and not f.loc["ml/job-dws-1", "censored"]
    row = f.loc["ml/job-long-1"]
    assert (row["state"], row["censored"], row["elapsed_s"], row["time_limit_s"]) == ("timeout", False, 3600.0, 3600.0)


def test_whole_document_errors_raise():
    with pytest.raises(InputError, match="not valid JSON"):
        parse_kueue_workloads('{"items": [')
    with pytest.raises(InputError, match="kind 'JobList'"):
        parse_kueue_workloads(json.dumps({"kind": "JobList", "items": []}))
    with pytest.raises(InputError, match='key "items" is given twice'):
        parse_kueue_workloads('{"kind": "List", "items": [], "items": []}')


def test_finished_before_admitted_and_repeated_condition_are_rejected():
    backwards = copy.deepcopy(SUCCEEDED)
    backwards["status"]["conditions"][3]["lastTransitionTime"] = "2024-03-20T08:00:00Z"
    twice = copy.deepcopy(FAILED)
    twice["status"]["conditions"].append(_admitted("2024-03-20T09:05:00Z"))
    result = parse_kueue_workloads(_list(backwards, twice))
    assert result.frame.empty and result.read == 2
    assert "ends at 2024-03-20T08:00:00+00:00 before it was admitted at 2024-03-20T08:05:30+00:00" in result.errors[0]
    assert "type 'Admitted' twice" in result.errors[1]


@pytest.mark.parametrize(("raw", "value"), [("4", Decimal(4)), (4, Decimal(4)), ("500m", Decimal("0.5")),
                                             ("1k", Decimal(1000)), ("2Ki", Decimal(2048)), ("1e3", Decimal(1000)),
                                             ("1E", Decimal(10) ** 18)])
def test_parse_quantity(raw, value):
    assert parse_quantity(raw) == value


@pytest.mark.parametrize("raw", ["four", "", True, None, float("nan"), "4 GPUs"])
def test_parse_quantity_refuses(raw):
    with pytest.raises(ValueError):
        parse_quantity(raw)


def test_an_eviction_older_than_the_current_admission_is_superseded():
    # Evicted still True (a Kueue that did not reset it) but Admitted again afterwards -> running again
    stale = copy.deepcopy(READMITTED)
    stale["status"]["conditions"][2] = _cond("Evicted", "True", "Preempted",
                                             "Preempted to accommodate a higher priority Workload",
                                             "2024-03-22T08:40:00Z")
    row = parse_kueue_workloads(_list(stale)).frame.iloc[0]
    assert (row["state"], row["started_at"], row["censored"]) == (
        "running", pd.Timestamp("2024-03-22T09:10:00Z"), False)
