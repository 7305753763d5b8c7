"""Node inventories -> node records: ``sinfo --json`` / ``scontrol show nodes --json``, ``kubectl get nodes -o json``, CSV/parquet.

``[sources.nodes]`` (:mod:`pipelines.workspace.config`) names the cluster's own inventory export; the newest
export is the next plan's cluster. Pure parsers (text or a frame in, :class:`NodeParse` out, no file IO).

A node record (:data:`NODE_RECORD`, one row per GPU node):

| column | type | meaning |
|---|---|---|
| ``name`` | str | the node's name as the scheduler prints it (``gpu-001``, ``openb-node-0001``) |
| ``gpus`` | int | GPUs of the node (> 0; nodes without GPUs are skipped, counted in ``without_gpus``) |
| ``gpu_type`` | str or None | the type as the export names it (``a100``, ``NVIDIA-A100-SXM4-80GB``, ``V100M32``); None when it names none |
| ``domain`` | str or None | a placement domain (CSV ``domain``); None |
| ``features`` | str | Slurm's node features, ``,``-joined (``""`` when none; Kubernetes: ``""``) |
| ``partitions`` | str | Slurm partitions of the node, ``,``-joined (``""`` when none) |
| ``state`` | str | the scheduler's state words, ``+``-joined upper case (``IDLE+DRAIN``, ``READY``, ``NOTREADY+UNSCHEDULABLE``) |
| ``down`` | bool | no new job may start there (below) |

**Slurm** (:func:`parse_slurm_nodes_json`). Three shapes, told apart by their keys:

* ``{"nodes": [...]}`` — ``scontrol show nodes --json`` (all versions) and ``sinfo --json`` of Slurm 22.05
  (openapi plugin v0.0.38). A node's ``state`` is a lower-case word plus ``state_flags`` (``"idle"``,
  ``["DRAIN"]``) in v0.0.38, a list of upper-case words in v0.0.39–v0.0.42 (``["IDLE", "DRAIN"]``);
  ``features`` is a ``,``-joined string (v0.0.38) or a list (v0.0.40+); ``gres`` the node's GRES string.
* ``{"sinfo": [...]}`` — ``sinfo --json`` of Slurm 23.02–25.x (data_parser v0.0.39–v0.0.42): one item per
  partition and group of like nodes; the names are ``nodes.nodes``, the state ``node.state`` (a list),
  the GRES ``gres.total``, the features ``features.total``, the partition ``partition.name``. A node in
  several items (partitions) is one node, its partitions joined; ``sinfo -N --json`` gives one item per node.

GRES (``gres``, slurm.conf ``Gres=``): ``,``-separated ``name[:type]:count`` with an optional
``(S:0-1)`` socket suffix (``gpu:a100:8``, ``gpu:8``, ``gpu:a100:4(S:0-1)``, ``gpu:tesla:16``); the ``gpu``
entries' counts are summed; the node's type is their type (None for ``gpu:8``). A node listing two GPU types
(``gpu:fake1:1(S:0),gpu:fake2:1(S:0)``) is rejected naming both (gpuplan plans one type per node).
Down: any state word in :data:`SLURM_DOWN_STATES` (``DOWN``, ``DRAIN`` — draining and drained —, ``FAIL``,
``NOT_RESPONDING``, ``MAINT``, ``FUTURE``, ``POWERED_DOWN``, …; source: Slurm ``sinfo(1)`` "NODE STATE CODES"
and ``src/common/slurm_protocol_defs.c`` ``node_state_string``). Only ``errors`` at the top level refuses the
export (its first error named).

**Kubernetes** (:func:`parse_kubernetes_nodes_json`): a ``List`` (or ``NodeList``) of ``Node`` objects. GPUs:
``status.allocatable["nvidia.com/gpu"]`` (else ``status.capacity``; a Kubernetes quantity); type: the label
``nvidia.com/gpu.product`` (set by NVIDIA GPU Feature Discovery, e.g. ``NVIDIA-A100-SXM4-80GB``,
``Tesla-T4``; another label with ``product_label``). Down: ``spec.unschedulable`` (``kubectl cordon``), the
``Ready`` condition not ``True``, or a taint with effect ``NoSchedule``/``NoExecute`` whose key is not in
``tolerated_taints`` (default :data:`TOLERATED_TAINTS`: the ``nvidia.com/gpu`` taint cloud GPU node pools
carry and every GPU pod tolerates).

**CSV/parquet** (:func:`parse_node_table`): columns ``name, gpus, gpu_type[, domain][, state]``; the Alibaba
openb node list as is (``sn`` -> name, ``gpu`` -> gpus, ``model`` -> gpu_type; its CPU-only rows skipped).
A ``state`` column (``down``, ``drain``, ``drained``, ``up`` …) marks down nodes; absent: all up.

A malformed node is rejected with ``nodes[i] (<name>): ...`` (CSV: ``line N``), the others kept; a node
named twice with different GPUs or types is rejected at its second appearance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pipelines.io import strict_json
from pipelines.io.errors import InputError
from pipelines.workspace.sources.kueue_gpus import GPU_RESOURCE, parse_quantity
from pipelines.workspace.sources.slurm import BadField, slurm_epoch

__all__ = ["NODE_RECORD", "SLURM_DOWN_STATES", "TOLERATED_TAINTS", "NodeParse", "gres_gpus", "node_frame",
           "parse_kubernetes_nodes_json", "parse_node_table", "parse_slurm_nodes_json"]

#: Columns of a node record (module docstring).
NODE_RECORD: tuple[str, ...] = ("name", "gpus", "gpu_type", "domain", "features", "partitions", "state", "down")
#: Slurm node state words (base states and flags) under which no new job starts: the node is down for planning.
#: Source: sinfo(1) "NODE STATE CODES" and ``node_state_string`` in src/common/slurm_protocol_defs.c.
SLURM_DOWN_STATES: frozenset[str] = frozenset({
    "DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "NO_RESPOND", "MAINT",
    "MAINTENANCE", "FUTURE", "INVAL", "INVALID", "UNKNOWN", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN",
    "POWER_DRAIN", "REBOOT_ISSUED", "REBOOT_REQUESTED", "PLANNED_DOWN",
})
#: Taint keys that do not make a Kubernetes GPU node down (GPU pods tolerate them: GKE/AKS/EKS GPU pools).
TOLERATED_TAINTS: tuple[str, ...] = ("nvidia.com/gpu", "amd.com/gpu")
#: Table columns read as the node record's (the openb node list's names).
TABLE_ALIASES: dict[str, str] = {"sn": "name", "node": "name", "gpu": "gpus", "model": "gpu_type"}
#: CSV ``state`` values meaning down.
TABLE_DOWN = frozenset({"down", "drain", "drained", "draining", "fail", "maint", "cordoned", "unschedulable", "false",
                        "0", "no"})

_PAREN = re.compile(r"\([^)]*\)")


@dataclass
class NodeParse:
    """What one inventory export gave.

    Attributes:
        frame: the GPU nodes (:data:`NODE_RECORD` columns), in the export's order.
        read: nodes read (valid or not, GPU or not).
        errors: one message per rejected node (``nodes[3] (gpu-004): ...``).
        without_gpus: nodes skipped because they have no GPU.
        exported_at: when the export was taken, if it says (Slurm ``last_update``); else None.
    """

    frame: pd.DataFrame
    read: int
    errors: list[str] = field(default_factory=list)
    without_gpus: int = 0
    exported_at: pd.Timestamp | None = None
    unit: str = "nodes"

    @property
    def rejected(self) -> int:
        """Nodes rejected (one per error message)."""
        return len(self.errors)


class _Bad(Exception):
    """One node is malformed; the message says what and what was expected."""


def node_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows with :data:`NODE_RECORD` keys -> a typed node frame (``gpus`` int64, ``down`` bool)."""
    frame = pd.DataFrame(list(rows), columns=list(NODE_RECORD))
    frame["name"] = frame["name"].astype(str)
    frame["gpus"] = pd.to_numeric(frame["gpus"]).fillna(0).astype("int64")
    for col in ("gpu_type", "domain"):
        frame[col] = frame[col].astype(object).where(frame[col].notna(), None)
    for col in ("features", "partitions", "state"):
        frame[col] = frame[col].astype(object).where(frame[col].notna(), "").astype(str)
    frame["down"] = frame["down"].fillna(False).astype(bool)
    return frame


def gres_gpus(text: str, field_name: str = "gres") -> tuple[int, str | None]:
    """``(GPUs, type)`` of a Slurm GRES string: ``gpu:a100:4(S:0-1),gpu:a100:4`` -> ``(8, "a100")``; ``gpu:8`` -> ``(8, None)``.

    ``(null)``, ``N/A`` and empty give ``(0, None)``; non-GPU entries (``tmpsize:7T``) are ignored.

    Raises:
        _Bad: a GPU count that is not a whole number, or two GPU types on one node.
    """
    body = _PAREN.sub("", text or "").strip()
    if body.lower() in ("", "(null)", "n/a", "none"):
        return 0, None
    total = 0
    types: list[str] = []
    for entry in (e.strip() for e in body.split(",")):
        parts = entry.split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) == 1:
            count, gpu_type = "1", None
        elif len(parts) == 2:
            count, gpu_type = parts[1], None
        else:
            count, gpu_type = parts[-1], ":".join(parts[1:-1])
        if not count.isdigit():
            raise _Bad(f"{field_name} {text!r} has GPU count {count!r} (expected e.g. gpu:a100:8 or gpu:8)")
        total += int(count)
        if gpu_type and int(count) > 0 and gpu_type not in types:
            types.append(gpu_type)
    if len(types) > 1:
        raise _Bad(f"{field_name} {text!r} names {len(types)} GPU types ({', '.join(types)}); gpuplan plans one type "
                   f"per node (expected e.g. gpu:a100:8)")
    return total, (types[0] if types else None)


def _words(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [w for w in re.split(r"[+,\s]+", value.strip().upper()) if w]
    if isinstance(value, list):
        return [str(w).strip().upper() for w in value if str(w).strip()]
    raise _Bad(f"state {value!r} is not a node state (expected e.g. \"idle\" or [\"IDLE\", \"DRAIN\"])")


def _joined(value: Any) -> str:
    """A string or list field (features, partitions) as ``,``-joined text."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(str(v) for v in value if str(v))
    text = str(value)
    return "" if text in ("(null)", "N/A") else text


def _add(rows: dict[str, dict[str, Any]], rec: dict[str, Any]) -> None:
    """Add one node, merging a node seen again (another sinfo partition item)."""
    old = rows.get(rec["name"])
    if old is None:
        rows[rec["name"]] = rec
        return
    if (old["gpus"], old["gpu_type"]) != (rec["gpus"], rec["gpu_type"]):
        raise _Bad(f"listed twice with different GPUs ({old['gpus']} x {old['gpu_type']} and {rec['gpus']} x "
                   f"{rec['gpu_type']}) (expected one GRES per node)")
    parts = [p for p in old["partitions"].split(",") + rec["partitions"].split(",") if p]
    old["partitions"] = ",".join(dict.fromkeys(parts))
    words = list(dict.fromkeys(old["state"].split("+") + rec["state"].split("+")))
    old["state"] = "+".join(w for w in words if w)
    old["down"] = old["down"] or rec["down"]


def _export_doc(text: str, what: str) -> dict[str, Any]:
    doc = strict_json.loads(text, what)
    if not isinstance(doc, dict):
        raise InputError(f"{what} is a JSON {type(doc).__name__} (expected an object)")
    return doc


def _slurm_epoch(value: Any) -> pd.Timestamp | None:
    """``last_update`` by the one reader of Slurm's numbers (:func:`~pipelines.workspace.sources.slurm.slurm_epoch`); a bad one -> None."""
    try:
        return slurm_epoch("last_update", value)
    except BadField:
        return None


def parse_slurm_nodes_json(text: str) -> NodeParse:
    """Nodes of ``sinfo --json`` or ``scontrol show nodes --json`` (Slurm 22.05–25.x; module docstring).

    Raises:
        InputError: not JSON (a repeated key included), a non-empty top-level ``errors``, or neither a
            ``nodes`` nor a ``sinfo`` list.
    """
    doc = _export_doc(text, "Slurm nodes export (sinfo --json / scontrol show nodes --json)")
    problems = doc.get("errors") or []
    if problems:
        first = problems[0]
        detail = (first.get("description") or first.get("error")) if isinstance(first, dict) else first
        raise InputError(f"Slurm nodes export reported an error: {detail}")
    exported = _slurm_epoch(doc.get("last_update"))
    if isinstance(doc.get("sinfo"), list):
        items = [(i, it) for i, it in enumerate(doc["sinfo"])]
        reader = _sinfo_item
    elif isinstance(doc.get("nodes"), list):
        items = [(i, it) for i, it in enumerate(doc["nodes"])]
        reader = _node_item
    else:
        raise InputError("Slurm nodes export has neither a nodes nor a sinfo list (expected the output of "
                         "sinfo --json or scontrol show nodes --json)")
    rows: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    seen: set[str] = set()
    without = 0
    for i, item in items:
        name = "?"
        try:
            if not isinstance(item, dict):
                raise _Bad(f"is {type(item).__name__} (expected a node object)")
            for rec in reader(item):
                name = rec["name"]
                if rec["gpus"] <= 0:
                    if name not in seen:
                        without += 1
                    seen.add(name)
                    continue
                seen.add(name)
                _add(rows, rec)
        except _Bad as bad:
            label = name if name != "?" else _item_name(item)
            errors.append(f"{'sinfo' if reader is _sinfo_item else 'nodes'}[{i}] ({label}): {bad}")
    return NodeParse(node_frame(rows.values()), len(seen) + len(errors), errors, without, exported)


def _item_name(item: Any) -> str:
    if isinstance(item, dict):
        if isinstance(item.get("name"), str):
            return item["name"]
        nodes = item.get("nodes")
        if isinstance(nodes, dict) and isinstance(nodes.get("nodes"), list) and nodes["nodes"]:
            return str(nodes["nodes"][0])
    return "?"


def _node_item(node: dict[str, Any]) -> list[dict[str, Any]]:
    """One node object of ``scontrol show nodes --json`` / 22.05 ``sinfo --json``."""
    name = node.get("name")
    if not isinstance(name, str) or not name:
        raise _Bad(f"name {name!r} is not a node name (expected a non-empty string)")
    words = _words(node.get("state")) + _words(node.get("state_flags"))
    gpus, gpu_type = gres_gpus(str(node.get("gres") or ""))
    return [{"name": name, "gpus": gpus, "gpu_type": gpu_type, "domain": None,
             "features": _joined(node.get("features")), "partitions": _joined(node.get("partitions")),
             "state": "+".join(words), "down": any(w in SLURM_DOWN_STATES for w in words)}]


def _sinfo_item(item: dict[str, Any]) -> list[dict[str, Any]]:
    """One item of the 23.02+ ``sinfo --json`` list: a partition's group of like nodes."""
    nodes = item.get("nodes")
    names = nodes.get("nodes") if isinstance(nodes, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise _Bad(f"nodes.nodes {names!r} is not a list of node names (expected e.g. [\"gpu-001\"])")
    node = item.get("node") if isinstance(item.get("node"), dict) else {}
    words = _words(node.get("state"))
    gres = item.get("gres") if isinstance(item.get("gres"), dict) else {}
    gpus, gpu_type = gres_gpus(str(gres.get("total") or ""), "gres.total")
    features = item.get("features") if isinstance(item.get("features"), dict) else {}
    partition = item.get("partition") if isinstance(item.get("partition"), dict) else {}
    return [{"name": n, "gpus": gpus, "gpu_type": gpu_type, "domain": None,
             "features": _joined(features.get("total")), "partitions": _joined(partition.get("name")),
             "state": "+".join(words), "down": any(w in SLURM_DOWN_STATES for w in words)} for n in names]


def parse_kubernetes_nodes_json(text: str, product_label: str = "nvidia.com/gpu.product",
                                tolerated_taints: Sequence[str] = TOLERATED_TAINTS) -> NodeParse:
    """Nodes of ``kubectl get nodes -o json`` (module docstring).

    Raises:
        InputError: not JSON, or not a ``List``/``NodeList`` with ``items`` (nor one ``Node``).
    """
    doc = _export_doc(text, "Kubernetes nodes export (kubectl get nodes -o json)")
    if doc.get("kind") == "Node":
        items: list[Any] = [doc]
    elif isinstance(doc.get("items"), list) and doc.get("kind") in (None, "List", "NodeList"):
        items = doc["items"]
    else:
        raise InputError(f"Kubernetes nodes export: kind {doc.get('kind')!r} (expected 'List' or 'NodeList' with "
                         f"items, from kubectl get nodes -o json)")
    rows: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    without = 0
    for i, item in enumerate(items):
        try:
            rec = _kube_node(item, product_label, tuple(tolerated_taints))
            if rec["gpus"] <= 0:
                without += 1
                continue
            if rec["name"] in rows:
                raise _Bad("is listed twice (expected each node once)")
            rows[rec["name"]] = rec
        except _Bad as bad:
            errors.append(f"items[{i}] ({_kube_name(item)}): {bad}")
    return NodeParse(node_frame(rows.values()), len(items), errors, without)


def _kube_name(item: Any) -> str:
    meta = item.get("metadata") if isinstance(item, dict) else None
    return str(meta.get("name") or "?") if isinstance(meta, dict) else "?"


def _kube_node(item: Any, product_label: str, tolerated: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
        raise _Bad("is not a Node object (expected kind: Node)")
    meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _Bad("metadata.name is missing (expected the node's name)")
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
    status = item.get("status") if isinstance(item.get("status"), dict) else {}
    gpus = 0
    for part in ("allocatable", "capacity"):
        values = status.get(part) if isinstance(status.get(part), dict) else {}
        if GPU_RESOURCE in values:
            try:
                q = parse_quantity(values[GPU_RESOURCE])
            except ValueError:
                q = None
            if q is None or q != q.to_integral_value() or q < 0:
                raise _Bad(f"status.{part}[{GPU_RESOURCE!r}] {values[GPU_RESOURCE]!r} is not a whole number of GPUs "
                           f"(expected e.g. \"8\")")
            gpus = int(q)
            break
    product = labels.get(product_label)
    words: list[str] = []
    conditions = status.get("conditions") if isinstance(status.get("conditions"), list) else []
    ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)
    words.append("READY" if ready is not None and ready.get("status") == "True" else "NOTREADY")
    if spec.get("unschedulable") is True:
        words.append("UNSCHEDULABLE")
    for taint in spec.get("taints") or []:
        if isinstance(taint, dict) and taint.get("effect") in ("NoSchedule", "NoExecute") \
                and taint.get("key") not in tolerated:
            words.append(f"TAINT:{taint.get('key')}:{taint.get('effect')}")
    return {"name": name, "gpus": gpus, "gpu_type": str(product) if product else None, "domain": None,
            "features": "", "partitions": "", "state": "+".join(words), "down": words != ["READY"]}


def parse_node_table(frame: pd.DataFrame, csv: bool = True) -> NodeParse:
    """Node rows of a CSV/parquet (module docstring; the openb node list as is).

    Raises:
        InputError: no name (``name``/``sn``) or no GPU count (``gpus``/``gpu``) column.
    """
    frame = frame.rename(columns={c: str(c).strip() for c in frame.columns})
    frame = frame.rename(columns={a: t for a, t in TABLE_ALIASES.items() if a in frame.columns and t not in frame.columns})
    missing = [c for c in ("name", "gpus") if c not in frame.columns]
    if missing:
        raise InputError(f"node table lacks column(s) {', '.join(missing)} (expected name, gpus, gpu_type[, domain]; "
                         f"or the openb node list's sn, gpu, model)")
    rows: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    without = 0
    for i, raw in enumerate(frame.to_dict(orient="records")):
        where = f"line {i + 2}" if csv else f"row {i + 1}"
        name = str(raw["name"]).strip() if pd.notna(raw["name"]) else ""
        try:
            if not name:
                raise _Bad("name is empty")
            g = raw["gpus"]
            if pd.isna(g) or float(g) != int(float(g)) or float(g) < 0:
                raise _Bad(f"gpus {g!r} is not a whole number of GPUs >= 0")
            if int(float(g)) == 0:
                without += 1
                continue
            t = raw.get("gpu_type")
            d = raw.get("domain")
            st = str(raw.get("state") or "").strip()
            if name in rows:
                raise _Bad("is listed twice (expected each node once)")
            rows[name] = {"name": name, "gpus": int(float(g)),
                          "gpu_type": str(t).strip() if t is not None and pd.notna(t) and str(t).strip() else None,
                          "domain": str(d).strip() if d is not None and pd.notna(d) and str(d).strip() else None,
                          "features": "", "partitions": "", "state": st.upper(), "down": st.lower() in TABLE_DOWN}
        except (_Bad, TypeError, ValueError) as exc:
            errors.append(f"{where} ({name or '?'}): {exc}")
    return NodeParse(node_frame(rows.values()), len(frame), errors, without)
