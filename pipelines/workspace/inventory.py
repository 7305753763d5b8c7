"""The cluster's node inventory from its ``[sources.nodes]`` exports (issue 27): the newest export, types matched.

Pure of the workspace object (it takes the source's files and settings), so that
:attr:`pipelines.workspace.load.Workspace.cluster` can read the export before the first ingest and
:func:`pipelines.workspace.ingest.read_nodes` keeps it at every ingest. The parsers are
:mod:`pipelines.workspace.sources.nodes`; types are matched by :class:`pipelines.workspace.gpu_types.GpuTypeTable`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from domain.units import is_pow2
from pipelines.io.csv_sniff import read_operator_csv
from pipelines.io.errors import InputError
from pipelines.workspace.config import SourceConfig
from pipelines.workspace.gpu_types import GpuTypeTable
from pipelines.workspace.sources.nodes import NodeParse

__all__ = ["MAX_ERRORS", "newest_inventory", "parse_node_export"]

#: At most this many error lines are listed in a report.
MAX_ERRORS = 50


def parse_node_export(src: SourceConfig, path: Path) -> NodeParse:
    """One export of ``[sources.nodes]`` (``src``) -> node records (:mod:`pipelines.workspace.sources.nodes`).

    Raises:
        InputError: the file cannot be read at all (not JSON, no nodes list, no name/gpus column).
    """
    from pipelines.workspace.sources import nodes

    if src.format in ("csv", "parquet"):
        if path.suffix.lower() == ".parquet":
            try:
                frame, is_csv = pd.read_parquet(path), False
            except (OSError, ValueError) as exc:
                raise InputError(f"cannot be read as parquet: {' '.join(str(exc).split())[:200]}") from None
        else:
            frame, is_csv = read_operator_csv(path, str(path), text_columns=("name", "sn", "gpu_type", "model",
                                                                              "domain")), True
        return nodes.parse_node_table(frame, csv=is_csv)
    text = path.read_text(encoding="utf-8", errors="replace")
    if src.format == "slurm-sinfo-json":
        return nodes.parse_slurm_nodes_json(text)
    return nodes.parse_kubernetes_nodes_json(text, src.product_label, src.tolerated_taints)


def newest_inventory(files: Sequence[Path], src: SourceConfig, aliases: Mapping[str, str],
                     default_type: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The newest of ``files`` (exports of ``src``) as the planned inventory, and its report.

    The newest export (its own ``last_update``, else its file's modification time) is the inventory; a
    node's type is matched through ``[gpu_types]`` ``aliases`` over :mod:`domain.gpus` (an untyped GRES
    ``gpu:8``: ``default_type``, ``[cluster] gpu_type``); the frame keeps the export's name in ``export_gpu_type``.

    Raises:
        InputError: no file matches; the newest export cannot be read or holds no GPU node; a node's
            type matches no known type (one line naming the node, the type and the known ones); a node's
            GPU count is not a power of two (naming the node and its count).
    """
    best: tuple[pd.Timestamp, str, Path, NodeParse] | None = None
    errors: list[str] = []
    for path in files:
        try:
            got = parse_node_export(src, path)
        except InputError as exc:
            errors.append(f"{path.name}: {exc}")
            continue
        taken = (pd.Timestamp(got.exported_at) if got.exported_at is not None
                 else pd.Timestamp(path.stat().st_mtime, unit="s", tz="UTC").floor("s"))
        if best is None or (taken, path.name) >= (best[0], best[1]):
            best = (taken, path.name, path, got)
    if best is None:
        raise InputError(f"sources.nodes: no export could be read ({'; '.join(errors)[:300]})")
    taken, name, _, got = best
    if got.frame.empty:
        raise InputError(f"sources.nodes: {name}: no GPU node ({got.read} nodes read, {got.rejected} rejected"
                         f"{': ' + got.errors[0] if got.errors else ''})")
    table = GpuTypeTable(aliases)
    from domain.gpus import GPU_TABLE

    known = table.known(GPU_TABLE)
    frame = got.frame.copy()
    frame["export_gpu_type"] = frame["gpu_type"]
    frame["gpu_type"] = [table.require(t, f"sources.nodes: {name}: node {n}", known) if t is not None
                         else (table.resolve(default_type) or default_type)
                         for n, t in zip(frame["name"], frame["gpu_type"])]
    odd = [(str(n), int(g)) for n, g in zip(frame["name"], frame["gpus"]) if not is_pow2(int(g))]
    if odd:  # refused here, naming the node and the file, not later inside the plan's cluster check
        more = f" (and {len(odd) - 1} more)" if len(odd) > 1 else ""
        raise InputError(f"sources.nodes: {name}: node {odd[0][0]} has {odd[0][1]} GPUs{more}: every node needs a "
                         "power-of-two number of GPUs (1, 2, 4, 8, ...); list it with a power-of-two count (the rest unused) or leave it out")
    by_type: dict[str, dict[str, int]] = {}
    for t, part in frame.groupby("gpu_type", sort=True):
        by_type[str(t)] = {"nodes": int(len(part)), "gpus": int(part["gpus"].sum()),
                           "down_nodes": int(part["down"].sum()), "down_gpus": int(part.loc[part["down"], "gpus"].sum())}
    report = {"unit": "nodes", "file": name, "exported_at": taken.isoformat(), "read": got.read,
              "gpu_nodes": int(len(frame)), "without_gpus": got.without_gpus, "rejected": got.rejected,
              "error_lines": len(got.errors) + len(errors), "errors": (errors + got.errors)[:MAX_ERRORS],
              "by_type": by_type}
    return frame, report
