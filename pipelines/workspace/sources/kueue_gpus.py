"""Kubernetes GPU requests of a Kueue workload's pods: quantities and the effective-pod-requests rule.

Pure helpers of :mod:`pipelines.workspace.sources.kueue` (its docstring states the rules):
:func:`parse_quantity` reads a ``resource.Quantity``; :func:`pod_gpus` is a Pod's effective request of
``nvidia.com/gpu`` (app containers plus restartable init sidecars, or the largest init step if more).
A malformed item raises :class:`Reject`, whose message says what and what was expected.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

__all__ = ["GPU_RESOURCE", "Reject", "container_gpus", "object_field", "parse_quantity", "pod_gpus", "whole_number",
           "workload_gpus"]

#: The extended resource counted as GPUs (NVIDIA device plugin).
GPU_RESOURCE = "nvidia.com/gpu"
#: Kubernetes quantity: k8s.io/apimachinery/pkg/api/resource/quantity.go (<signedNumber><suffix>).
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIX = {
    None: Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18, "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}


class Reject(Exception):
    """One item is malformed; the message says what and what was expected."""


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes resource quantity (``"4"``, ``4``, ``"500m"``, ``"1k"``, ``"2Gi"``, ``"1e3"``) -> its exact value.

    Grammar: ``<signedNumber><suffix>`` of k8s.io/apimachinery ``resource.Quantity`` (decimal SI
    ``n u m k M G T P E``, binary SI ``Ki .. Ei``, decimal exponent ``e<n>``). A JSON number is
    accepted as written.

    Raises:
        ValueError: not a quantity (booleans, non-finite numbers and other text included).
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not np.isfinite(value):
            raise ValueError(f"{value!r} is not a quantity")
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a quantity")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not a quantity")
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a quantity") from None
    if suffix and suffix[0] in "eE" and len(suffix) > 1:
        return base.scaleb(int(suffix[1:]))
    return base * _SUFFIX[suffix]


def whole_number(value: Any, field: str, minimum: int = 0) -> int:
    """A JSON integer (or an integral float) >= ``minimum``.

    Raises:
        Reject: anything else (``field`` names it).
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value) \
            or int(value) != value or value < minimum:
        raise Reject(f"{field} is {value!r} (expected a whole number >= {minimum})")
    return int(value)


def container_gpus(container: Any, field: str) -> int:
    """GPUs one container requests (``resources.requests``, else ``limits``; 0 when neither names them).

    Raises:
        Reject: not an object, or the quantity not a whole number of GPUs (``field`` names it).
    """
    if not isinstance(container, dict):
        raise Reject(f"{field} is {type(container).__name__} (expected a container object)")
    resources = container.get("resources") or {}
    if not isinstance(resources, dict):
        raise Reject(f"{field}.resources is {type(resources).__name__} (expected an object)")
    for part in ("requests", "limits"):
        values = resources.get(part) or {}
        if not isinstance(values, dict):
            raise Reject(f"{field}.resources.{part} is {type(values).__name__} (expected a map of quantities)")
        if GPU_RESOURCE in values:
            raw = values[GPU_RESOURCE]
            where = f"{field}.resources.{part}[{GPU_RESOURCE!r}]"
            try:
                quantity = parse_quantity(raw)
            except ValueError:
                raise Reject(f"{where} {raw!r} is not a Kubernetes quantity (expected a whole number such as \"4\")") \
                    from None
            if quantity != quantity.to_integral_value() or quantity < 0:
                raise Reject(f"{where} {raw!r} is not a whole number of GPUs (expected e.g. \"1\" or \"4\"; "
                              f"fractional GPUs are not counted)")
            return int(quantity)
    return 0


def pod_gpus(spec: dict[str, Any], field: str) -> int:
    """Effective Pod request of GPUs (Kubernetes' effective-pod-requests rule, :mod:`pipelines.workspace.sources.kueue`).

    Raises:
        Reject: containers not lists, or a container malformed.
    """
    containers = spec.get("containers") or []
    inits = spec.get("initContainers") or []
    if not isinstance(containers, list) or not isinstance(inits, list):
        raise Reject(f"{field}.containers / initContainers is not a list (expected lists of containers)")
    app = sum(container_gpus(c, f"{field}.containers[{i}]") for i, c in enumerate(containers))
    sidecars = 0
    init_peak = 0
    for i, container in enumerate(inits):
        gpus = container_gpus(container, f"{field}.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            sidecars += gpus
        else:
            init_peak = max(init_peak, gpus + sidecars)
    return max(app + sidecars, init_peak)


def object_field(value: Any, field: str, expected: str) -> dict[str, Any]:
    """``value`` when it is a JSON object.

    Raises:
        Reject: it is not (``field`` names it, ``expected`` says what it should be).
    """
    if not isinstance(value, dict):
        raise Reject(f"{field} is {'missing' if value is None else type(value).__name__} (expected {expected})")
    return value


def workload_gpus(podsets: list[Any], assignments: dict[str, dict[str, Any]]) -> tuple[int, str | None]:
    """GPUs of a workload (podSets: count x effective pod request; an admission's count wins) and its GPU flavours.

    Returns ``(gpus, "flavor-a,flavor-b")`` (None when no GPU flavour was assigned).

    Raises:
        Reject: a podSet, template or count malformed.
    """
    total = 0
    flavors: list[str] = []
    for i, podset in enumerate(podsets):
        field = f"spec.podSets[{i}]"
        if not isinstance(podset, dict):
            raise Reject(f"{field} is {type(podset).__name__} (expected a podSet object)")
        count = whole_number(podset.get("count", 1), f"{field}.count")
        template = object_field(podset.get("template"), f"{field}.template", "a pod template")
        pod_spec = object_field(template.get("spec"), f"{field}.template.spec", "a pod spec")
        per_pod = pod_gpus(pod_spec, f"{field}.template.spec")
        assignment = assignments.get(str(podset.get("name") or "main"))
        if assignment is not None and assignment.get("count") is not None:
            count = whole_number(assignment["count"], f"status.admission.podSetAssignments[{podset.get('name')}].count")
        total += count * per_pod
        if per_pod and assignment is not None:
            flavor = (assignment.get("flavors") or {}).get(GPU_RESOURCE)
            if isinstance(flavor, str) and flavor and flavor not in flavors:
                flavors.append(flavor)
    return total, ",".join(flavors) or None
