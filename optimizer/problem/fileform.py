"""The problem file's form (DESIGN §3.1): keys, field types and how entries are named.

This module knows the JSON shape of a problem file and nothing of the problem types: it checks
that an object has only allowed keys and every required one (:func:`check_keys`), converts and
checks scalar fields (:func:`as_int`, :func:`as_num`, :func:`as_str`, :func:`as_list`), and reads
each section into plain keyword dicts (``read_*``). :mod:`optimizer.problem.types` builds the
validated objects from those dicts (``Problem.from_dict``) and writes them back
(``Problem.to_dict``) with the key lists defined here.

Every refusal raises :class:`optimizer.errors.InputError` whose message names where the value
sits (``job 'A'``, ``services[2]``, ``settings``) and the field.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from optimizer.errors import InputError

#: Keys of the top-level problem object (``cluster`` is required).
PROBLEM_KEYS: tuple[str, ...] = ("version", "cluster", "settings", "services", "jobs", "running", "down_gpus")

#: The problem-file version ``Problem.to_dict`` writes (``version``): 2 adds ``cluster.nodes``,
#: ``cluster.gpu_speed`` and the jobs' ``gpu_types`` / ``durations_by_type`` / ``same_domain`` (issue 26).
#: A file without ``version`` is version 1: one GPU type, ``n_gpus`` GPUs on ``gpus_per_node``-GPU nodes.
PROBLEM_VERSION: int = 2

#: Keys of ``cluster``: ``n_gpus`` (version 1, required) or ``nodes`` (version 2; ``n_gpus`` then derived);
#: ``gpu_type`` (version 1's single label) is accepted and ignored.
CLUSTER_KEYS: tuple[str, ...] = ("n_gpus", "gpus_per_node", "step_minutes", "horizon_steps", "gpu_type",
                                 "nodes", "gpu_speed")

#: Keys of one ``cluster.nodes`` entry (``name``, ``gpus`` required; ``gpu_type`` defaults to ``""``, one
#: unnamed type; ``domain`` to ``""``, none; ``down`` to no GPU: the node's local GPU indices that are down).
NODE_KEYS: tuple[str, ...] = ("name", "gpus", "gpu_type", "domain", "down")

#: Keys of ``settings`` (all optional), in the order ``Problem.to_dict`` writes them.
SETTINGS_KEYS: tuple[str, ...] = (
    "decay_per_step",
    "penalty_ratio",
    "time_limit_s",
    "mip_rel_gap",
    "threads",
    "random_seed",
    "max_binaries",
    "max_wait_steps",
    "demand_hard",
    "multi_node_blocks",
    "milp_method",
    "mip_work_limit",
    "full_model_max_binaries",
    "budget",
)

#: Keys of a ``services`` entry (all but ``min_gpus`` required).
SERVICE_KEYS: tuple[str, ...] = ("service", "demand_gpus", "min_gpus", "max_gpus", "swap_cap_gpus", "current_gpus",
                                 "capacity_per_gpu_per_h")

#: Keys of a ``jobs`` entry: ``job_id``, ``kind``, ``priority`` required, and either
#: ``gpus`` + ``duration_steps`` or ``sizes``.
JOB_KEYS: tuple[str, ...] = (
    "job_id", "kind", "priority", "release_step", "gpus", "duration_steps", "sizes", "deadline_step",
    "gpu_types", "durations_by_type", "same_domain", "preemptible", "checkpoint_interval_steps", "restart_steps",
)

#: Keys of one ``sizes`` entry of a job (``efficiency`` optional, default 1).
SIZE_KEYS: tuple[str, ...] = ("gpus", "duration_steps", "efficiency")

#: Keys of a ``running`` entry (all required).
RUNNING_KEYS: tuple[str, ...] = ("job_id", "kind", "priority", "gpus", "block_offset", "remaining_steps")

#: Optional keys of a ``running`` entry (issue 30, preemption): ``preemptible`` (default false),
#: ``checkpoint_interval_steps`` (default none: no checkpoint), ``restart_steps`` (default 0) and either
#: ``steps_since_checkpoint`` or ``steps_run`` (steps since the run's start, from which the first follows).
RUNNING_PREEMPTION_KEYS: tuple[str, ...] = ("preemptible", "checkpoint_interval_steps", "restart_steps",
                                            "steps_since_checkpoint", "steps_run")


# ----------------------------------------------------------------------------- fields


def as_int(v: Any, where: str, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """Field ``name`` of ``where`` as an int in ``[lo, hi]`` (integral floats such as 6.0 are accepted).

    Raises:
        InputError: a bool, None, non-integral or out-of-range value.
    """
    if isinstance(v, bool) or v is None:
        raise InputError(f"{where}: {name} = {v!r} is not an integer")
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise InputError(f"{where}: {name} = {v!r} is not an integer")
        v = int(v)
    if not isinstance(v, int):
        if not isinstance(v, numbers.Integral):
            raise InputError(f"{where}: {name} = {v!r} is not an integer")
        v = int(v)
    if lo is not None and v < lo:
        raise InputError(f"{where}: {name} = {v} must be >= {lo}")
    if hi is not None and v > hi:
        raise InputError(f"{where}: {name} = {v} must be <= {hi}")
    return v


def as_num(v: Any, where: str, name: str) -> float:
    """Field ``name`` of ``where`` as a finite float.

    Raises:
        InputError: a bool, None, non-numeric or non-finite value.
    """
    if isinstance(v, bool) or v is None:
        raise InputError(f"{where}: {name} = {v!r} is not a number")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {name} = {v!r} is not a number") from None
    if not math.isfinite(f):
        raise InputError(f"{where}: {name} = {v!r} is not a finite number")
    return f


def as_str(v: Any, where: str, name: str) -> str:
    """Field ``name`` of ``where`` as a non-empty string.

    Raises:
        InputError: not a string, or blank.
    """
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"{where}: {name} = {v!r} must be a non-empty string")
    return v


def as_list(v: Any, where: str, name: str) -> list[Any]:
    """Field ``name`` of ``where`` as a list (any sequence but a string, bytes or mapping).

    Raises:
        InputError: not a list.
    """
    if isinstance(v, (str, bytes, Mapping)) or not isinstance(v, Sequence):
        raise InputError(f"{where}: {name} must be a list, got {type(v).__name__}")
    return list(v)


def check_keys(d: Any, where: str, allowed: Sequence[str], required: Sequence[str]) -> Mapping[str, Any]:
    """``d`` itself when it is an object with only ``allowed`` keys and every ``required`` one.

    Raises:
        InputError: not an object, an unknown key (listing the allowed ones) or a missing key.
    """
    if not isinstance(d, Mapping):
        raise InputError(f"{where}: expected an object, got {type(d).__name__}")
    unknown = sorted(set(d) - set(allowed))
    if unknown:
        raise InputError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}"
        )
    missing = [k for k in required if k not in d]
    if missing:
        raise InputError(f"{where}: missing required key(s) {', '.join(map(repr, missing))}")
    return d


def entry_name(x: Any, list_name: str, i: int, id_key: str, label: str) -> str:
    """How entry ``i`` of ``list_name`` is named in messages: ``job 'A'`` when it has an id, else ``jobs[3]``."""
    if isinstance(x, Mapping) and isinstance(x.get(id_key), str):
        return f"{label} {x[id_key]!r}"
    return f"{list_name}[{i}]"


# ----------------------------------------------------------------------------- sections


def read_problem(d: Any) -> Mapping[str, Any]:
    """The top-level object, keys checked (``cluster`` required; ``version`` 1 or 2, absent = 1).

    Raises:
        InputError: an unknown version, or version-2 fields (``cluster.nodes``, ``cluster.gpu_speed``) in a
            version-1 file.
    """
    d = check_keys(d, "problem", PROBLEM_KEYS, ("cluster",))
    v = as_int(d.get("version", 1), "problem", "version", lo=1)
    if v > PROBLEM_VERSION:
        raise InputError(f"problem: version = {v} is newer than this gpuplan reads ({PROBLEM_VERSION})")
    c = d.get("cluster")
    if v < 2 and isinstance(c, Mapping) and ("nodes" in c or "gpu_speed" in c):
        raise InputError("problem: cluster.nodes and cluster.gpu_speed need version = 2 (version is 1 or absent)")
    return d


def section_list(top: Mapping[str, Any], name: str) -> list[Any]:
    """The list ``services``, ``jobs``, ``running`` or ``down_gpus`` of the problem (empty when absent)."""
    return as_list(top.get(name, []), "problem", name)


def read_cluster(c: Any) -> dict[str, Any]:
    """Keyword arguments of ``Cluster`` from the ``cluster`` object (``gpu_type`` dropped).

    With ``nodes``: a list of node dicts (keys checked, :data:`NODE_KEYS`) and ``gpu_speed`` a list of
    ``(gpu_type, speed)`` pairs; ``n_gpus`` and ``gpus_per_node`` are derived by ``Cluster`` (given, they must
    agree with the nodes).
    """
    c = check_keys(c, "cluster", CLUSTER_KEYS, () if isinstance(c, Mapping) and "nodes" in c else ("n_gpus",))
    out = {k: v for k, v in c.items() if k not in ("gpu_type", "nodes", "gpu_speed")}
    if "nodes" in c:
        nodes = []
        for i, x in enumerate(as_list(c["nodes"], "cluster", "nodes")):
            where = entry_name(x, "cluster.nodes", i, "name", "node")
            x = check_keys(x, where, NODE_KEYS, ("name", "gpus"))
            nodes.append({"name": x["name"], "gpus": x["gpus"], "gpu_type": x.get("gpu_type", ""),
                          "domain": x.get("domain", ""), "down": tuple(as_list(x.get("down", []), where, "down"))})
        out["nodes"] = nodes
        out.setdefault("n_gpus", 0)  # derived by Cluster from the nodes
    if "gpu_speed" in c:
        sp = c["gpu_speed"]
        if not isinstance(sp, Mapping):
            raise InputError(f"cluster: gpu_speed must be an object {{gpu_type: speed}}, got {type(sp).__name__}")
        out["gpu_speed"] = tuple((k, as_num(v, "cluster", f"gpu_speed[{k!r}]")) for k, v in sp.items())
    return out


def read_settings(s: Any) -> dict[str, Any]:
    """Keyword arguments of ``PlanSettings`` from the ``settings`` object (None or absent: defaults)."""
    return dict(check_keys(s or {}, "settings", SETTINGS_KEYS, ()))


def read_service(x: Any, i: int) -> dict[str, Any]:
    """Keyword arguments of ``Service`` from entry ``i`` of ``services`` (``min_gpus`` defaults to 0)."""
    where = entry_name(x, "services", i, "service", "service")
    x = check_keys(x, where, SERVICE_KEYS, ("service", "demand_gpus", "max_gpus", "swap_cap_gpus", "current_gpus"))
    return {
        "service": x["service"],
        "demand_gpus": x["demand_gpus"],
        "min_gpus": x.get("min_gpus", 0),
        "max_gpus": x["max_gpus"],
        "swap_cap_gpus": x["swap_cap_gpus"],
        "current_gpus": x["current_gpus"],
        **_read_capacity(x, where),
    }


def _read_capacity(x: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``capacity_per_gpu_per_h``: a number (the old form) or an object ``{gpu_type: requests per GPU-hour}``."""
    if "capacity_per_gpu_per_h" not in x:
        return {}
    c = x["capacity_per_gpu_per_h"]
    if isinstance(c, Mapping):
        if not c:
            raise InputError(f"{where}: capacity_per_gpu_per_h is an empty object; give {{gpu_type: rate}} or a number")
        return {"capacity_by_type": tuple(c.items())}
    return {"capacity_per_gpu_per_h": c}


def read_job(x: Any, i: int) -> dict[str, Any]:
    """Keyword arguments of ``Job`` from entry ``i`` of ``jobs``.

    ``sizes`` comes back as a list of ``(gpus, duration_steps, efficiency)`` tuples: the ``sizes``
    list, or the one size ``gpus`` x ``duration_steps`` (efficiency 1). ``release_step``
    defaults to 0, ``deadline_step`` to None.

    Raises:
        InputError: both forms given, or neither.
    """
    where = entry_name(x, "jobs", i, "job_id", "job")
    x = check_keys(x, where, JOB_KEYS, ("job_id", "kind", "priority"))
    sizes: list[tuple[Any, Any, Any]] = []
    if "sizes" in x:
        if "gpus" in x or "duration_steps" in x:
            raise InputError(f"{where}: give either gpus + duration_steps or sizes, not both")
        for k, s in enumerate(as_list(x["sizes"], where, "sizes")):
            s = check_keys(s, f"{where}: sizes[{k}]", SIZE_KEYS, ("gpus", "duration_steps"))
            sizes.append((s["gpus"], s["duration_steps"], s.get("efficiency", 1.0)))
    else:
        missing = [k for k in ("gpus", "duration_steps") if k not in x]
        if missing:
            raise InputError(f"{where}: missing {' and '.join(missing)} (or give sizes)")
        sizes.append((x["gpus"], x["duration_steps"], 1.0))
    by_type = x.get("durations_by_type", {})
    if not isinstance(by_type, Mapping):
        raise InputError(f"{where}: durations_by_type must be an object {{gpu_type: steps}}, "
                         f"got {type(by_type).__name__}")
    return {
        "job_id": x["job_id"],
        "kind": x["kind"],
        "priority": x["priority"],
        "release_step": x.get("release_step", 0),
        "sizes": sizes,
        "deadline_step": x.get("deadline_step"),
        "gpu_types": tuple(as_list(x.get("gpu_types", []), where, "gpu_types")),
        "durations_by_type": tuple(by_type.items()),
        "same_domain": x.get("same_domain", False),
        "preemptible": x.get("preemptible", False),
        "checkpoint_interval_steps": x.get("checkpoint_interval_steps"),
        "restart_steps": x.get("restart_steps", 0),
    }


def read_running(x: Any, i: int) -> dict[str, Any]:
    """Keyword arguments of ``RunningJob`` from entry ``i`` of ``running``.

    Every key of :data:`RUNNING_KEYS` is required; those of :data:`RUNNING_PREEMPTION_KEYS` are optional.
    ``steps_run`` (steps since the run's start) is turned into ``steps_since_checkpoint``: ``steps_run mod
    checkpoint_interval_steps``, or ``steps_run`` itself without a checkpoint interval.

    Raises:
        InputError: both ``steps_since_checkpoint`` and ``steps_run`` given, or a bad ``steps_run``.
    """
    where = entry_name(x, "running", i, "job_id", "running job")
    d = dict(check_keys(x, where, RUNNING_KEYS + RUNNING_PREEMPTION_KEYS, RUNNING_KEYS))
    if "steps_run" in d:
        if "steps_since_checkpoint" in d:
            raise InputError(f"{where}: give either steps_since_checkpoint or steps_run, not both")
        run = as_int(d.pop("steps_run"), where, "steps_run", lo=0)
        interval = d.get("checkpoint_interval_steps")
        if interval is not None:
            interval = as_int(interval, where, "checkpoint_interval_steps", lo=1)
        d["steps_since_checkpoint"] = run % interval if interval else run
    return d
