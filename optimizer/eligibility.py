"""Which aligned blocks a job may use on a typed cluster (issue 26), per GPU type: the planners' side of the rules.

On a typed cluster (``Cluster.nodes``, laid out largest node first) an aligned block of ``g`` GPUs at offset
``k·g`` is usable by a job when it lies inside one node, or covers whole nodes (a gang) of one type (and of
one domain when the job asks ``same_domain``; not at all with ``multi_node_blocks`` off), holds no padding
GPU, and its type is one of the job's ``gpu_types`` (empty = any). :func:`block_options` gives, per usable
type, the job's duration on it and the mask of usable blocks; on an untyped cluster one option, every block,
the size's own duration (so the homogeneous planners are unchanged). The verifier re-derives the same rules
on its own (:func:`optimizer.verify.verify`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from optimizer.problem import Cluster, Job, Problem, SizeOption

#: (duration_steps on that type, (n_gpus // gpus,) bool mask of usable blocks or None = every block, gpu_type)
BlockOption = tuple[int, np.ndarray | None, str]


@lru_cache(maxsize=256)
def _block_kinds(cluster: Cluster, gpus: int, multi_node: bool) -> tuple[tuple[str, str] | None, ...]:
    """Per aligned block of ``gpus`` GPUs, its (gpu_type, domain), or None when unusable.

    A usable block is one node's part or whole nodes of one type; domain ``"*"`` when those nodes span
    domains. Unusable: padding, part of a node in a gang, mixed types, or spanning nodes with ``multi_node`` off.
    """
    N = cluster.n_gpus
    node = np.full(N, -1, dtype=np.int64)
    for k, (o, n) in enumerate(zip(cluster.node_offsets, cluster.nodes, strict=True)):
        node[o:o + n.gpus] = k
    out: list[tuple[str, str] | None] = []
    for b in range(N // gpus):
        ks = node[b * gpus:(b + 1) * gpus]
        if (ks < 0).any():
            out.append(None)
            continue
        uniq = list(dict.fromkeys(ks.tolist()))
        nodes = [cluster.nodes[k] for k in uniq]
        if len(nodes) > 1 and (not multi_node or sum(n.gpus for n in nodes) != gpus):
            out.append(None)
            continue
        types = {n.gpu_type for n in nodes}
        if len(types) > 1:
            out.append(None)
            continue
        domains = {n.domain for n in nodes}
        out.append((nodes[0].gpu_type, domains.pop() if len(domains) == 1 else "*"))
    return tuple(out)


def block_options(problem: Problem, job: Job, size: SizeOption) -> list[BlockOption]:
    """The (duration, usable-block mask, gpu_type) options of ``job`` at ``size`` (module docstring); [] when none."""
    c = problem.cluster
    if not c.typed:
        return [(size.duration_steps, None, "")]
    kinds = _block_kinds(c, size.gpus, problem.settings.multi_node_blocks)
    out: list[BlockOption] = []
    for ty in c.gpu_types:
        if not job.eligible(ty):
            continue
        mask = np.array([k is not None and k[0] == ty and not (job.same_domain and k[1] == "*") for k in kinds],
                        dtype=bool)
        if mask.any():
            out.append((job.duration_on(size, ty, c), mask, ty))
    return out


def block_type(problem: Problem, offset: int) -> str:
    """GPU type of the node holding GPU ``offset`` (``""`` untyped or padding)."""
    k = problem.cluster.node_of(offset) if problem.cluster.typed else None
    return "" if k is None else problem.cluster.nodes[k].gpu_type


def duration_at(problem: Problem, job: Job, gpus: int, offset: int) -> int:
    """Steps ``job`` runs with ``gpus`` GPUs on the block at ``offset`` (its type's duration). KeyError: no such size."""
    size = next((s for s in job.sizes if s.gpus == gpus), None)
    if size is None:
        raise KeyError(f"job {job.job_id!r} has no size of {gpus} GPUs")
    if not problem.cluster.typed:
        return size.duration_steps
    return job.duration_on(size, block_type(problem, offset), problem.cluster)
