"""Kueue Workloads -> job records: the JSON of ``kubectl get workloads.kueue.x-k8s.io -A -o json``.

Format (Kueue API ``kueue.x-k8s.io/v1beta1`` and ``v1beta2``, ``apis/kueue/v1beta1/workload_types.go``
and ``apis/kueue/v1beta2/workload_types.go`` in kubernetes-sigs/kueue): the export is a ``List`` (or
``WorkloadList``) with ``items``, or one ``Workload`` object. One Workload is one job record:

| record column | Workload field |
|---|---|
| ``job_id`` | ``metadata.namespace`` + ``/`` + ``metadata.name`` |
| ``submitted_at`` | ``metadata.creationTimestamp`` (required) |
| ``started_at`` | ``lastTransitionTime`` of ``Admitted=True`` (see the state table) |
| ``ended_at`` | ``lastTransitionTime`` of ``Finished=True``, or of ``Evicted=True`` for an evicted workload |
| ``gpus`` | sum over ``spec.podSets`` of pod count x per-pod ``nvidia.com/gpu`` (below) |
| ``gpu_type`` | ResourceFlavor name assigned to ``nvidia.com/gpu`` in ``status.admission.podSetAssignments[].flavors`` |
| annotation ``gpu_types`` | GPU products the pods select: ``nodeSelector`` / required node affinity ``In`` on ``nvidia.com/gpu.product`` (:func:`product_selector`), alternatives joined by a vertical bar |
| ``time_limit_s`` | ``spec.maximumExecutionTimeSeconds``, else the ``gpuplan.time_limit_s`` label/annotation |
| ``user`` | the ``gpuplan.user`` label/annotation, else None (Kueue records no submitting user) |
| ``account`` / ``partition`` | namespace / ``spec.queueName`` (the LocalQueue) |
| ``qos`` | ``spec.priorityClassName`` (v1beta1) or ``spec.priorityClassRef.name`` (v1beta2) |
| ``priority`` | ``spec.priority`` |
| ``job_name`` | ``metadata.ownerReferences[0].name`` (the Job, JobSet, RayJob ...), else ``metadata.name`` |
| ``kind`` | ``gpuplan.kind`` when it is ``training`` / ``quantization`` / ``batch_inference`` |
| ``annotations`` | every ``gpuplan.*`` key of the pod templates, the Workload's labels and its annotations |
| ``deadline_at`` | the ``gpuplan.deadline`` annotation, ISO 8601 with a zone (a label value cannot hold ``:``); a Workload has no deadline field; a bad or zone-less one rejects the workload naming it |
| ``eligible_at`` / ``nodes`` | not in a Workload: NaT / None |

State (conditions are ``metav1.Condition``; "X" below means ``type: X, status: "True"``):

| conditions | state | started_at / elapsed_s |
|---|---|---|
| Finished, reason ``Succeeded`` | completed | Admitted time / Finished - Admitted |
| Finished, reason ``Failed``, message mentions a deadline or time limit | timeout | same |
| Finished, reason ``Failed`` | failed | same |
| Finished, reason ``AdmissionChecksRejected`` | cancelled | same (normally never admitted) |
| Finished, another reason | unknown | same |
| Evicted or Preempted, yet Admitted and QuotaReserved still True and ``status.admission`` kept (quota held: kueue#14811), ``spec.active`` not false, reason not ``Deactivated...`` | running (holding its GPUs; annotation ``kueue_quota_held = Evicted:<reason>``) | Admitted time / NaN |
| Evicted (not re-admitted since), reason ``Deactivated...MaximumExecutionTimeExceeded`` | timeout | see below |
| Evicted, reason ``Deactivated...`` or ``InactiveWorkload`` (``spec.active`` set false) | cancelled | see below |
| Evicted for any other reason (``Preempted``, ``PodsReadyTimeout``, ``AdmissionCheck``, queue stopped ...), or Preempted, ``spec.active`` not false | pending (requeued) | see below |
| the same with ``spec.active`` false | preempted | see below |
| Admitted | running | Admitted time / NaN (no clock in a pure parser) |
| otherwise (no condition, ``QuotaReserved`` False or True without Admitted) | pending | NaT / NaN |

Choices, with their grounds:

* **Start = Admitted, not QuotaReserved.** Kueue unsuspends the job (creates its pods) only when
  the workload is Admitted, i.e. quota reserved *and* every admission check Ready
  (``WorkloadAdmitted`` in ``workload_types.go``); a workload with QuotaReserved only is waiting
  for a check (e.g. a ProvisioningRequest) and is pending. Kueue's own runtime
  (``TotalExecutionTime`` in ``pkg/workload/workload.go``) measures Finished - Admitted, the same
  pair used here.
* **Eviction.** "Evicted" is the current eviction when no ``Admitted=True`` is newer than it
  (Kueue also resets Evicted/Preempted to False when it reserves quota again:
  ``SetQuotaReservation``). While the eviction is in progress Admitted is still True and gives
  the start; once Kueue has released the quota (``UnsetQuotaReservationWithCondition``) Admitted
  is False and the start time is gone, so ``started_at`` is NaT and ``elapsed_s`` is Kueue's
  ``status.accumulatedPastExecutionTimeSeconds`` (v1beta1 spells it
  ``accumulatedPastExexcutionTimeSeconds``): the admitted time summed over past runs; NaN when
  absent. Kueue evicts only workloads holding quota (``pkg/workload/evict``), so a preempted
  workload counts as having run and is censored (``domain.records.is_censored``). Kueue requeues
  an evicted workload that is still active: it waits for GPUs again, so the record says
  ``pending`` (as Slurm's REQUEUED) with ``elapsed_s`` the accumulated past run time, and gpuplan
  plans it; only a deactivated one stays ``preempted`` (censored).
* **Timeout.** Kueue copies the job's failure message into Finished (``Job.Finished`` in
  ``pkg/controller/jobs/job``); a batch/Job past ``activeDeadlineSeconds`` fails with reason
  ``DeadlineExceeded`` and message "Job was active longer than specified deadline". Any
  Finished/Failed message matching :data:`TIMEOUT_MESSAGE` is read as ``timeout``.
* **elapsed_s** is the last run (end - Admitted); runs before an earlier eviction are not added.
* **GPUs per pod** follow Kubernetes' effective Pod request
  (https://kubernetes.io/docs/concepts/resource-management/effective-pod-requests-limits/):
  max(sum of ``containers`` + sum of sidecars, max over regular ``initContainers`` of its request
  plus the sidecars listed before it); a sidecar is an init container with
  ``restartPolicy: Always``. A container's GPUs are ``resources.requests["nvidia.com/gpu"]``,
  else ``resources.limits[...]`` (Kubernetes defaults an extended resource's request to its
  limit). Pod count is ``status.admission.podSetAssignments[].count`` when admitted (partial
  admission may lower it), else ``spec.podSets[].count``.
* **gpu_type** is the ResourceFlavor name as the cluster named it (``a100-80gb``, ``spot-h100``);
  several GPU podSets with different flavors give the distinct names joined by ``,``. A workload
  without admission (pending, or evicted and released) has no flavor: None.
* **user**: Kueue's Workload has no user field and no standard user label (Kueue's
  "Labels and Annotations" reference lists none; labels are copied from the job only when
  listed in ``labelKeysToCopy``), so only ``gpuplan.user`` is read.
* **Annotations** merge, later wins: each podSet's ``template.metadata`` labels then annotations
  (Kueue copies the pod template, so annotations set on the Job's pods arrive here), then the
  Workload's labels, then its annotations.

A malformed item is rejected with ``item N (<namespace>/<name>): <what> (expected ...)``, N the
index in ``items`` (0-based, as in ``.items[N]``); the other items are kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from pipelines.io.errors import InputError
from pipelines.io.strict_json import loads
from pipelines.workspace.sources.kueue_gpus import Reject, object_field, whole_number, workload_gpus
from pipelines.workspace.sources.records import ParseResult, annotations_from_mapping, is_censored, job_frame

__all__ = ["KINDS", "TIMEOUT_MESSAGE", "parse_kueue_workloads"]

#: Values of ``gpuplan.kind`` that set the record's ``kind``.
KINDS: tuple[str, ...] = ("training", "quantization", "batch_inference")
#: A Finished/Failed message read as a timeout ("Job was active longer than specified deadline").
TIMEOUT_MESSAGE = re.compile(r"deadline|time ?limit|timed out", re.IGNORECASE)

_LIST_KINDS = ("List", "WorkloadList")


@dataclass(frozen=True)
class _Condition:
    status: str
    reason: str
    message: str
    at: pd.Timestamp | None


def parse_kueue_workloads(text: str, source: str = "kueue") -> ParseResult:
    """Kueue Workload export text -> job records (module docstring: field map, states, choices).

    Args:
        text: JSON of ``kubectl get workloads.kueue.x-k8s.io -A -o json`` (a ``List`` with
            ``items``) or of one Workload (``kubectl get workload NAME -o json``).
        source: the records' ``source`` column.

    Returns:
        :class:`ParseResult` with one :data:`JOB_RECORD` row per valid Workload, ``read`` = items
        read, one error per rejected item (``item 3 (ml/job-x-1a2b3): ...``).

    Raises:
        InputError: not JSON (a key repeated in one object included, :mod:`pipelines.io.strict_json`),
            not a Workload, List or WorkloadList object, or ``items`` not a list.
    """
    if _looks_like_yaml(text):
        raise InputError("Kueue workloads export looks like YAML: use -o json "
                         "(kubectl get workloads.kueue.x-k8s.io -A -o json)")
    doc = loads(text, "Kueue workloads export")
    if not isinstance(doc, dict):
        raise InputError(f"Kueue workloads export: top level is {type(doc).__name__} "
                         f"(expected an object: a List with items, or one Workload)")
    kind = doc.get("kind")
    if kind == "Workload" or ("items" not in doc and "spec" in doc and kind is None):
        items: list[Any] = [doc]
    elif "items" in doc and (kind is None or kind in _LIST_KINDS):
        items = doc["items"]
        if not isinstance(items, list):
            raise InputError(f"Kueue workloads export: items is {type(items).__name__} (expected a list of Workloads)")
    else:
        raise InputError(f"Kueue workloads export: kind {kind!r} (expected 'List' or 'WorkloadList' with items, "
                         f"or 'Workload'; from kubectl get workloads.kueue.x-k8s.io -A -o json)")
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for index, item in enumerate(items):
        try:
            rows.append(_record(item, source))
        except Reject as exc:
            errors.append(f"item {index} ({_reference(item)}): {exc}")
    return ParseResult(frame=job_frame(rows), read=len(items), errors=errors, marking_read=True)


_YAML_KEY = re.compile(r"^(?:---\s*$|[A-Za-z_][\w.-]*:(?:\s|$))")


def _looks_like_yaml(text: str) -> bool:
    """The first line that is not blank or a ``#`` comment is a YAML key (``apiVersion: ...``) or ``---``."""
    for line in text.removeprefix("\ufeff").splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return bool(_YAML_KEY.match(stripped))
    return False


def _reference(item: Any) -> str:
    meta = item.get("metadata") if isinstance(item, dict) else None
    if not isinstance(meta, dict):
        return "?/?"
    return f"{meta.get('namespace') or '?'}/{meta.get('name') or '?'}"


def _record(item: Any, source: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise Reject(f"is {type(item).__name__} (expected a Workload object)")
    if item.get("kind", "Workload") != "Workload":
        raise Reject(f"kind {item.get('kind')!r} (expected 'Workload')")
    meta = object_field(item.get("metadata"), "metadata", "an object")
    name = _text(meta.get("name"), "metadata.name")
    namespace = _text(meta.get("namespace"), "metadata.namespace")
    submitted = _time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    spec = object_field(item.get("spec"), "spec", "an object with podSets")
    status = object_field(item.get("status") or {}, "status", "an object")
    podsets = spec.get("podSets")
    if not isinstance(podsets, list) or not podsets:
        raise Reject("spec.podSets is missing or empty (expected a list of 1 to 8 podSets)")

    annotations = _annotations(podsets, meta)
    conditions = _conditions(status.get("conditions"))
    assignments = _assignments(status.get("admission"))
    gpus, gpu_type = workload_gpus(podsets, assignments)
    wanted = product_selector(podsets)
    if wanted and "gpu_types" not in annotations:
        annotations = {**annotations, "gpu_types": "|".join(wanted)}
    requeued = spec.get("active", True) is not False  # an active evicted workload is requeued by Kueue
    state, started, ended, elapsed_s, ran = _lifecycle(conditions, status, requeued)
    held = _quota_held(conditions, status)
    if held and state == "running":
        annotations = {**annotations, "kueue_quota_held": held}
    owners = meta.get("ownerReferences")
    owner = owners[0].get("name") if isinstance(owners, list) and owners and isinstance(owners[0], dict) else None
    kind = annotations.get("kind")
    return {
        "source": source, "job_id": f"{namespace}/{name}", "submitted_at": submitted, "eligible_at": None,
        "started_at": started, "ended_at": ended, "state": state, "censored": is_censored(state, ran),
        "elapsed_s": elapsed_s, "time_limit_s": _time_limit_s(spec, annotations), "gpus": gpus,
        "gpu_type": gpu_type, "nodes": None, "user": annotations.get("user"), "account": namespace,
        "partition": _optional_text(spec.get("queueName"), "spec.queueName"), "qos": _priority_class(spec),
        "priority": _priority(spec), "job_name": owner if isinstance(owner, str) and owner else name,
        "kind": kind if kind in KINDS else None, "annotations": annotations,
        "deadline_at": _deadline(annotations.get("deadline")),
    }


def _deadline(text: str | None) -> pd.Timestamp | None:
    """A ``gpuplan.deadline`` label/annotation (ISO 8601 with a zone; Kueue has no deadline field) -> UTC.

    Raises:
        Reject: not a time, or a time without a zone (the workload is rejected naming the field).
    """
    if text is None or not str(text).strip():
        return None
    try:
        ts = pd.Timestamp(str(text).strip())
    except (TypeError, ValueError):
        ts = None
    if ts is None or pd.isna(ts):
        raise Reject(f"gpuplan.deadline {text!r} is not a time (expected ISO 8601 with a zone, e.g. 2025-03-16T18:00:00Z)")
    if ts.tzinfo is None:
        raise Reject(f"gpuplan.deadline {text!r} has no time zone (expected ISO 8601 with a zone, "
                     f"e.g. 2025-03-16T18:00:00Z)")
    return ts.tz_convert("UTC")


#: The node label naming a node's GPU product (NVIDIA GPU Feature Discovery).
PRODUCT_LABEL = "nvidia.com/gpu.product"


def product_selector(podsets: list[Any], label: str = PRODUCT_LABEL) -> list[str]:
    """GPU products the pods may run on: ``nodeSelector[label]`` and required node affinity ``label In [...]``.

    Read from each podSet's ``template.spec``: ``nodeSelector`` (one value) and
    ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[].matchExpressions``
    with ``key == label`` and ``operator == "In"`` (the terms are ORed: their values are alternatives).
    ``[]`` when no podSet constrains the product (any type).
    """
    out: list[str] = []
    for podset in podsets:
        template = podset.get("template") if isinstance(podset, dict) else None
        spec = template.get("spec") if isinstance(template, dict) else None
        if not isinstance(spec, dict):
            continue
        selector = spec.get("nodeSelector")
        if isinstance(selector, dict) and isinstance(selector.get(label), str):
            out.append(selector[label])
        affinity = spec.get("affinity") if isinstance(spec.get("affinity"), dict) else {}
        node_affinity = affinity.get("nodeAffinity") if isinstance(affinity.get("nodeAffinity"), dict) else {}
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
        for term in terms if isinstance(terms, list) else []:
            for expr in (term.get("matchExpressions") or []) if isinstance(term, dict) else []:
                if isinstance(expr, dict) and expr.get("key") == label and expr.get("operator") == "In":
                    out.extend(str(v) for v in expr.get("values") or [])
    return list(dict.fromkeys(out))


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise Reject(f"{field} is {'missing' if value is None else repr(value)} (expected a non-empty string)")
    return value


def _optional_text(value: Any, field: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Reject(f"{field} is {value!r} (expected a string)")
    return value


def _time(value: Any, field: str) -> pd.Timestamp:
    """RFC 3339 time as Kubernetes writes it (``2024-03-19T20:49:17Z``) -> UTC timestamp."""
    if not isinstance(value, str):
        raise Reject(f"{field} is {'missing' if value is None else repr(value)} "
                      f"(expected an RFC 3339 time such as 2024-03-19T20:49:17Z)")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise Reject(f"{field} {value!r} is not an RFC 3339 time with a zone (expected e.g. 2024-03-19T20:49:17Z)")
    return pd.Timestamp(parsed).tz_convert("UTC")


def _annotations(podsets: list[Any], meta: Mapping[str, Any]) -> dict[str, str]:
    merged: dict[str, str] = {}
    sources: list[tuple[Any, str]] = []
    for i, podset in enumerate(podsets):
        template = podset.get("template") if isinstance(podset, dict) else None
        tmeta = template.get("metadata") if isinstance(template, dict) else None
        if isinstance(tmeta, dict):
            sources += [(tmeta.get("labels"), f"spec.podSets[{i}].template.metadata.labels"),
                        (tmeta.get("annotations"), f"spec.podSets[{i}].template.metadata.annotations")]
    sources += [(meta.get("labels"), "metadata.labels"), (meta.get("annotations"), "metadata.annotations")]
    for values, field in sources:
        if values is None:
            continue
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise Reject(f"{field} is not a map of strings (expected {{\"key\": \"value\", ...}})")
        merged.update(annotations_from_mapping(values))
    return merged


def _conditions(value: Any) -> dict[str, _Condition]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise Reject(f"status.conditions is {type(value).__name__} (expected a list of conditions)")
    out: dict[str, _Condition] = {}
    for i, cond in enumerate(value):
        if not isinstance(cond, dict) or not isinstance(cond.get("type"), str):
            raise Reject(f"status.conditions[{i}] has no type (expected a metav1.Condition object)")
        kind = cond["type"]
        if kind in out:
            raise Reject(f"status.conditions has type {kind!r} twice (expected each type once; listMapKey=type)")
        status = cond.get("status")
        if status not in ("True", "False", "Unknown"):
            raise Reject(f"status.conditions[{i}] ({kind}) status {status!r} (expected 'True', 'False' or 'Unknown')")
        when = cond.get("lastTransitionTime")
        at = _time(when, f"status.conditions[{i}] ({kind}) lastTransitionTime") if status == "True" else None
        out[kind] = _Condition(status=status, reason=str(cond.get("reason") or ""),
                               message=str(cond.get("message") or ""), at=at)
    return out


def _assignments(admission: Any) -> dict[str, dict[str, Any]]:
    if admission is None:
        return {}
    admission = object_field(admission, "status.admission", "an object with podSetAssignments")
    out: dict[str, dict[str, Any]] = {}
    for i, psa in enumerate(admission.get("podSetAssignments") or []):
        if not isinstance(psa, dict):
            raise Reject(f"status.admission.podSetAssignments[{i}] is {type(psa).__name__} (expected an object)")
        out[str(psa.get("name") or "main")] = psa
    return out


def _lifecycle(conds: dict[str, _Condition], status: dict[str, Any], requeued: bool = False) -> tuple[
        str, pd.Timestamp | None, pd.Timestamp | None, float, bool]:
    """(state, started_at, ended_at, elapsed_s, ran) from the conditions (module docstring table)."""
    def true(kind: str) -> _Condition | None:
        cond = conds.get(kind)
        return cond if cond is not None and cond.status == "True" else None

    admitted, finished = true("Admitted"), true("Finished")
    started = admitted.at if admitted else None
    if finished is not None:
        ended = finished.at
        reason = finished.reason
        if reason == "Succeeded":
            state = "completed"
        elif reason == "Failed":
            state = "timeout" if TIMEOUT_MESSAGE.search(finished.message) else "failed"
        elif reason == "AdmissionChecksRejected":
            state = "cancelled"
        else:
            state = "unknown"
        return state, started, ended, _span(started, ended), started is not None

    # the most recent of Evicted / Preempted that no later admission has superseded
    evictions = [c for c in (true("Evicted"), true("Preempted")) if c is not None]
    current = [c for c in evictions if admitted is None or c.at is None or admitted.at is None or c.at >= admitted.at]
    if current:
        evicted = true("Evicted")
        reason = evicted.reason if evicted is not None else "Preempted"
        if requeued and _quota_held(conds, status) and not (reason.startswith("Deactivated")
                                                            or reason == "InactiveWorkload"):
            # Evicted, but Admitted and QuotaReserved still True with the admission kept (kueue#14811, #6035):
            # the ClusterQueue still counts its GPUs, so they are held, not free: a running (holding) record
            return "running", started, None, float("nan"), True
        if reason.startswith("Deactivated") and "MaximumExecutionTimeExceeded" in reason:
            state = "timeout"
        elif reason.startswith("Deactivated") or reason == "InactiveWorkload":
            state = "cancelled"
        elif requeued:
            # Kueue puts an evicted, still active workload back in its queue (as Slurm's REQUEUED):
            # it waits for GPUs again; its run so far is not a completion
            return "pending", None, None, _accumulated_s(status), False
        else:
            state = "preempted"
        ended = max(c.at for c in current if c.at is not None)
        elapsed = _span(started, ended)
        if started is None:
            elapsed = _accumulated_s(status)
        ran = started is not None or (np.isfinite(elapsed) and elapsed > 0) or state == "preempted"
        return state, started, ended, elapsed, bool(ran)
    if admitted is not None:
        return "running", started, None, float("nan"), True
    return "pending", None, None, float("nan"), False


def _quota_held(conds: dict[str, _Condition], status: dict[str, Any]) -> str:
    """``"Evicted:<reason>"`` when a workload is evicted (or preempted) yet still holds its quota, else ``""``.

    Held: ``Admitted`` and ``QuotaReserved`` True and ``status.admission`` kept beside a current
    ``Evicted``/``Preempted`` True (Kueue releases the quota by clearing the admission and setting
    QuotaReserved False: ``UnsetQuotaReservationWithCondition``).
    """
    def true(kind: str) -> _Condition | None:
        cond = conds.get(kind)
        return cond if cond is not None and cond.status == "True" else None

    admitted, reserved = true("Admitted"), true("QuotaReserved")
    if admitted is None or reserved is None or not status.get("admission") or true("Finished") is not None:
        return ""
    for kind in ("Evicted", "Preempted"):
        cond = true(kind)
        if cond is not None and (cond.at is None or admitted.at is None or cond.at >= admitted.at):
            return f"{kind}:{cond.reason or '?'}"
    return ""


def _span(started: pd.Timestamp | None, ended: pd.Timestamp | None) -> float:
    if started is None or ended is None:
        return float("nan")
    if ended < started:
        raise Reject(f"ends at {ended.isoformat()} before it was admitted at {started.isoformat()} "
                      f"(expected Admitted <= Finished/Evicted lastTransitionTime)")
    return float((ended - started).total_seconds())


def _accumulated_s(status: dict[str, Any]) -> float:
    for key in ("accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds"):
        if status.get(key) is not None:
            return float(whole_number(status[key], f"status.{key}"))
    return float("nan")


def _time_limit_s(spec: dict[str, Any], annotations: dict[str, str]) -> float:
    if spec.get("maximumExecutionTimeSeconds") is not None:
        return float(whole_number(spec["maximumExecutionTimeSeconds"], "spec.maximumExecutionTimeSeconds", minimum=1))
    raw = annotations.get("time_limit_s")
    if raw is None:
        return float("nan")
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value) or value <= 0:
        raise Reject(f"gpuplan.time_limit_s {raw!r} is not a positive number of seconds (expected e.g. \"86400\")")
    return value


def _priority_class(spec: dict[str, Any]) -> str | None:
    ref = spec.get("priorityClassRef")
    if isinstance(ref, dict) and ref.get("name"):
        return _optional_text(ref.get("name"), "spec.priorityClassRef.name")
    return _optional_text(spec.get("priorityClassName"), "spec.priorityClassName")


def _priority(spec: dict[str, Any]) -> float:
    value = spec.get("priority")
    if value is None:
        return float("nan")
    if isinstance(value, bool) or not isinstance(value, int):
        raise Reject(f"spec.priority is {value!r} (expected an integer)")
    return float(value)
