"""One GPU-type table for a workspace: the names exports give (nodes and jobs) -> the names gpuplan plans.

A name is matched, case-insensitively, (1) in the workspace's ``[gpu_types]`` aliases
(``"NVIDIA-A100-SXM4-80GB" = "a100_80gb"``, ``G2 = "g2"``; an alias's value is itself a known name),
(2) by :func:`domain.gpus.canonical_gpu_type` (Slurm GRES types ``a100``, Kubernetes product labels
``NVIDIA-H100-80GB-HBM3``, openb models ``V100M32``; the canonical names ``h100_80gb``), (3) as a MIG
profile ``<gpu>_<n>g.<m>gb`` (Slurm's AutoDetect=nvml name, ``a100_3g.20gb``), read as the GPU it is a
slice of (``a100`` -> ``a100_40gb``). A name none of these match is unknown: a node or a queued job
naming it is refused in one line naming it, the type and the known ones (:class:`InputError`, exit 2).

A job's eligible types (:func:`job_gpu_type_names`): its annotation ``gpu_types`` (``|``-separated: the
typed GRES request of sacct/squeue, the Kueue product selector, a CSV ``gpu_types`` column as openb's
``gpu_spec``), else its ``constraint`` when every ``|`` alternative names a GPU type (``a100|h100``;
a constraint on other features, ``ib&skylake``, constrains no type), else any type (None).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

import pandas as pd

from domain.gpus import GPU_TABLE, canonical_gpu_type
from pipelines.io.errors import InputError

__all__ = ["GpuTypeTable", "job_gpu_type_names"]

#: A MIG profile type name: ``a100_3g.20gb``, ``a100-1g.5gb``, ``h100_7g.80gb``.
MIG_PROFILE = re.compile(r"^(?P<gpu>.+?)[_-](?P<slices>\d+)g[._](?P<memory>\d+)gb$", re.IGNORECASE)


def _key(name: str) -> str:
    return name.strip().lower()


class GpuTypeTable:
    """The workspace's type matching (module docstring): ``[gpu_types]`` aliases over :data:`domain.gpus.GPU_TABLE`.

    Args:
        aliases: export name -> planned name (``[gpu_types]`` of ``gpuplan.toml``).
    """

    def __init__(self, aliases: Mapping[str, str] | None = None):
        self.aliases = {_key(k): str(v).strip() for k, v in (aliases or {}).items()}
        self._targets = {_key(v): v for v in self.aliases.values()}

    def resolve(self, name: object) -> str | None:
        """The planned name of an export's type name; None when it matches nothing (unknown)."""
        if not isinstance(name, str) or not name.strip():
            return None
        key = _key(name)
        if key in self.aliases:
            return self.aliases[key]
        if key in self._targets:
            return self._targets[key]
        canonical = canonical_gpu_type(name)
        if canonical is not None:
            return canonical
        mig = MIG_PROFILE.match(name.strip())
        return self.resolve(mig["gpu"]) if mig else None

    def known(self, extra: Iterable[str] = ()) -> list[str]:
        """The names a type may resolve to: ``extra`` (e.g. the cluster's types) first, then the aliases' targets."""
        return list(dict.fromkeys([*extra, *self._targets.values()]))

    def require(self, name: str, what: str, known: Iterable[str]) -> str:
        """:meth:`resolve`, or :class:`InputError` naming ``what`` (``job 123``, ``node gpu-001``), the type and ``known``."""
        got = self.resolve(name)
        if got is None:
            shown = ", ".join(sorted(set(known))) or ", ".join(GPU_TABLE)
            example = min(set(known), default="a100_80gb")
            raise InputError(f"{what}: GPU type {name!r} is not a known type (known: {shown}); name it in "
                             f"[gpu_types] of gpuplan.toml, e.g. \"{name}\" = \"{example}\"")
        return got

    def constraint_types(self, constraint: str) -> list[str] | None:
        """GPU types of a Slurm ``--constraint`` when each ``|`` alternative names exactly one; else None."""
        text = re.sub(r"[\[\]()]", "", constraint or "").strip()
        if not text:
            return None
        out: list[str] = []
        for alternative in text.split("|"):
            found = {t for t in (self.resolve(re.sub(r"\*\d+$", "", f.strip())) for f in re.split(r"[&,]", alternative))
                     if t is not None}
            if len(found) != 1:
                return None
            out.append(found.pop())
        return list(dict.fromkeys(out))


def job_gpu_type_names(annotations: object) -> list[str] | None:
    """The job's requested type names as the export gave them (annotation ``gpu_types``, ``|``-separated); None = none given."""
    ann = json.loads(annotations) if isinstance(annotations, str) and annotations else (annotations or {})
    raw = ann.get("gpu_types") if isinstance(ann, dict) else None
    if not isinstance(raw, str) or not raw.strip():
        return None
    return [t.strip() for t in raw.split("|") if t.strip()]


def eligible_types(jobs: pd.DataFrame, table: GpuTypeTable, known: Iterable[str]) -> list[tuple[str, ...] | None]:
    """Each job's eligible planned types (a tuple; None = any type), in ``jobs`` order (module docstring).

    Raises:
        InputError: a job names a type that matches nothing (:meth:`GpuTypeTable.require`).
    """
    known = list(known)
    out: list[tuple[str, ...] | None] = []
    for job_id, ann_text in zip(jobs["job_id"], jobs["annotations"]):
        names = job_gpu_type_names(ann_text)
        if names:
            out.append(tuple(dict.fromkeys(table.require(n, f"job {job_id}", known) for n in names)))
            continue
        ann = json.loads(ann_text) if isinstance(ann_text, str) and ann_text else {}
        by_constraint = table.constraint_types(str(ann.get("constraint") or "")) if isinstance(ann, dict) else None
        out.append(tuple(by_constraint) if by_constraint else None)
    return out
