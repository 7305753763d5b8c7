"""Problem types for the allocation model: what a problem file (DESIGN §3.1) holds, validated on entry.

A :class:`Problem` is what the optimiser plans: forecasts are already applied (durations in
whole steps, real-time demand in whole GPUs per step). Everything is an immutable dataclass whose
``__post_init__`` checks its invariants; ``Problem.from_dict`` builds one from a JSON-shaped dict
(the keys and field rules are in :mod:`optimizer.problem.fileform`) and ``Problem.to_dict``
round-trips it.

Every refusal raises :class:`optimizer.errors.InputError` whose message names the job or
service and the field, e.g. ``job 'A': sizes[0].gpus = 3 is not a power of two (1, 2, 4, ...)``.

Helper for the shell that turns forecasts into a problem (case C22): :func:`round_up_pow2` (GPU
count -> aligned power-of-two block size). Hours -> whole steps (case C21) is
:func:`domain.units.hours_to_steps`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from domain.kinds import JOB_KINDS
from domain.units import ROUND_DIGITS, is_pow2, pow2_ceil
from optimizer.errors import InputError
from optimizer.problem import fileform
from optimizer.problem.fileform import as_int, as_list, as_num, as_str

# ----------------------------------------------------------------------------- helper (C22)


def round_up_pow2(
    x: float,
    max_gpus: int,
    allow_multi_node: bool = True,
    gpus_per_node: int = 8,
) -> tuple[int, str]:
    """Round a requested or forecast GPU count up to a power-of-two block size (case C22).

    ``x`` is rounded to 1e-6 first (so a regressor output of 8.0000001 is 8, not 16), then
    ceiled, then rounded up to the next power of two (:func:`domain.units.pow2_ceil`): 3 -> 4,
    6 -> 8, 0.6 -> 1, 2.3 -> 4, 5.0 -> 8. The result must fit the cluster (``max_gpus``) and, when
    multi-node blocks are disabled, one node (``gpus_per_node``).

    Returns ``(gpus, note)`` where ``note`` is ``""`` when ``x`` already was a valid size and
    otherwise a sentence for the risk report ("rounded 3 -> 4 GPUs (power-of-two block)").

    Raises :class:`InputError` for a non-finite value, a count below 1 after rounding to 1e-6
    (``gpu_count must be >= 1``), or a block larger than allowed (e.g. 16 or 9.0 on 8-GPU nodes
    with multi-node blocks disabled).
    """
    try:
        xf = float(x)
    except (TypeError, ValueError):
        raise InputError(f"gpu_count {x!r} is not a number") from None
    if not math.isfinite(xf):
        raise InputError(f"gpu_count {x!r} is not a finite number")
    xr = round(xf, ROUND_DIGITS)
    if xr <= 0:
        raise InputError(f"gpu_count must be >= 1 (got {x!r})")
    size = pow2_ceil(xr)
    limit = max_gpus if allow_multi_node else min(max_gpus, gpus_per_node)
    if size > limit:
        where = (
            f"cluster has {max_gpus}"
            if size > max_gpus
            else f"multi-node blocks are disabled and a node has {gpus_per_node} GPUs"
        )
        shown = f"{x!r}" if size == xr else f"{x!r} (rounds up to a {size}-GPU block)"
        raise InputError(f"gpu_count {shown} is too large: {where}")
    note = "" if float(size) == xf else f"rounded {x!r} -> {size} GPUs (power-of-two block)"
    return size, note


# ----------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Node:
    """One node of a typed cluster (problem-file version 2, DESIGN §3.1).

    ``gpus`` a power of two; ``gpu_type`` any name (the :data:`domain.gpus.GPU_TABLE` names or an operator's,
    such as openb's ``G2``; ``""`` = the one unnamed type); ``domain`` a rack or NVLink domain (``""`` = none);
    ``down`` the node's local GPU indices ``0..gpus-1`` that are down for the whole horizon.
    """

    name: str
    gpus: int
    gpu_type: str = ""
    domain: str = ""
    down: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        name = as_str(self.name, "cluster.nodes", "name")
        w = f"node {name!r}"
        g = as_int(self.gpus, w, "gpus", lo=1)
        if not is_pow2(g):
            raise InputError(f"{w}: gpus = {g} is not a power of two (1, 2, 4, 8, ...)")
        for f in ("gpu_type", "domain"):
            if not isinstance(getattr(self, f), str):
                raise InputError(f"{w}: {f} = {getattr(self, f)!r} must be a string")
        down = tuple(as_int(x, w, f"down[{i}]", lo=0, hi=g - 1) for i, x in enumerate(self.down))
        if len(set(down)) != len(down):
            raise InputError(f"{w}: down lists a GPU twice: {list(down)}")
        object.__setattr__(self, "gpus", g)
        object.__setattr__(self, "down", tuple(sorted(down)))


@dataclass(frozen=True)
class Cluster:
    """The GPUs being planned.

    ``n_gpus`` GPUs in topology order (a node is ``gpus_per_node`` consecutive GPUs),
    planned over ``horizon_steps`` steps of ``step_minutes`` minutes (default 48 x 30 min = 24 h).

    Typed (problem-file version 2, issue 26): ``nodes`` lists the nodes, each with its size and GPU type.
    They are laid out largest first (stable), node after node, so an aligned block no larger than a node
    lies inside one node and a larger one covers whole nodes; the GPU index space is padded up to a power
    of two with GPUs that are down (:attr:`layout_down`). ``n_gpus`` is then that power of two and
    ``gpus_per_node`` the largest node. ``gpu_speed``: (gpu_type, relative speed > 0) pairs, 1 for a type not
    listed; a job's duration on a type is its duration divided by the speed (:meth:`Job.duration_on`).
    """

    n_gpus: int
    gpus_per_node: int = 8
    step_minutes: int = 30
    horizon_steps: int = 48
    nodes: tuple[Node, ...] = ()
    gpu_speed: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        w = "cluster"
        nodes = tuple(n if isinstance(n, Node) else Node(**n) for n in self.nodes)
        if nodes:
            names = [n.name for n in nodes]
            dup = sorted({x for x in names if names.count(x) > 1})
            if dup:
                raise InputError(f"{w}: node name(s) {', '.join(map(repr, dup))} listed twice")
            nodes = tuple(sorted(nodes, key=lambda n: -n.gpus))  # stable: the file's order among equals
            total = sum(n.gpus for n in nodes)
            n_pad = pow2_ceil(total)
            if self.n_gpus not in (None, 0, n_pad):
                raise InputError(f"{w}: n_gpus = {self.n_gpus!r} disagrees with the nodes' {total} GPUs "
                                 f"(a typed cluster has n_gpus = {n_pad}, the next power of two; leave n_gpus out)")
            object.__setattr__(self, "n_gpus", n_pad)
            object.__setattr__(self, "gpus_per_node", nodes[0].gpus)
        object.__setattr__(self, "nodes", nodes)
        speed = []
        for k, v in self.gpu_speed:
            sp = as_num(v, w, f"gpu_speed[{k!r}]")
            if not isinstance(k, str) or sp <= 0:
                raise InputError(f"{w}: gpu_speed[{k!r}] = {v!r} must be a number > 0 for a GPU type name")
            speed.append((k, sp))
        node_types = list(dict.fromkeys(n.gpu_type for n in nodes))
        unknown = [k for k, _ in speed if nodes and k not in node_types]
        if unknown:  # a typo would silently plan that type at speed 1 (operator trial)
            raise InputError(f"{w}: gpu_speed names GPU type {unknown[0]!r}, which no node has; "
                             f"the cluster's types are {node_types}")
        object.__setattr__(self, "gpu_speed", tuple(speed))
        n = as_int(self.n_gpus, w, "n_gpus", lo=1)
        if not is_pow2(n):
            raise InputError(f"{w}: n_gpus = {n} is not a power of two")
        gpn = as_int(self.gpus_per_node, w, "gpus_per_node", lo=1)
        if not is_pow2(gpn):
            raise InputError(f"{w}: gpus_per_node = {gpn} is not a power of two")
        object.__setattr__(self, "n_gpus", n)
        object.__setattr__(self, "gpus_per_node", gpn)
        object.__setattr__(self, "step_minutes", as_int(self.step_minutes, w, "step_minutes", lo=1))
        object.__setattr__(self, "horizon_steps", as_int(self.horizon_steps, w, "horizon_steps", lo=1))

    @property
    def n_nodes(self) -> int:
        """Number of nodes (at least 1; a cluster smaller than a node is one partial node)."""
        if self.nodes:
            return len(self.nodes)
        return max(1, self.n_gpus // self.gpus_per_node)

    @property
    def typed(self) -> bool:
        """True when the cluster lists its nodes (problem-file version 2)."""
        return bool(self.nodes)

    @property
    def node_offsets(self) -> tuple[int, ...]:
        """First GPU index of each node of :attr:`nodes` (layout order)."""
        out, o = [], 0
        for n in self.nodes:
            out.append(o)
            o += n.gpus
        return tuple(out)

    def node_of(self, gpu: int) -> int | None:
        """Index into :attr:`nodes` of the node holding GPU ``gpu``; None for a padding GPU or an untyped cluster."""
        for k, (o, n) in enumerate(zip(self.node_offsets, self.nodes, strict=True)):
            if o <= gpu < o + n.gpus:
                return k
        return None

    @property
    def layout_down(self) -> tuple[int, ...]:
        """GPU indices down by the layout: the nodes' ``down`` GPUs and the padding up to ``n_gpus`` (sorted)."""
        if not self.nodes:
            return ()
        out = [o + d for o, n in zip(self.node_offsets, self.nodes, strict=True) for d in n.down]
        out.extend(range(sum(n.gpus for n in self.nodes), self.n_gpus))
        return tuple(sorted(out))

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The GPU types of the nodes, in layout order of first appearance (``("",)`` when untyped)."""
        return tuple(dict.fromkeys(n.gpu_type for n in self.nodes)) if self.nodes else ("",)

    def speed(self, gpu_type: str) -> float:
        """Relative speed of ``gpu_type`` (``gpu_speed``; 1 when not listed)."""
        return dict(self.gpu_speed).get(gpu_type, 1.0)


#: The two budget modes of :attr:`PlanSettings.budget` (DESIGN §5).
BUDGET_MODES: tuple[str, ...] = ("time", "work")


@dataclass(frozen=True)
class PlanSettings:
    """Planner settings: the ``settings`` block of a problem file (DESIGN §5).

    - ``decay_per_step`` gamma in (0, 1]: reward of a batch GPU-step at step tau is gamma**tau.
    - ``penalty_ratio`` kappa in [5, 10]: unmet real-time demand costs w = kappa * max_j p_j
      per GPU-step (DESIGN §5).
    - ``time_limit_s``: the budget of the whole plan call, heuristics included, enforced on the wall
      clock (HiGHS runs in a child process killed at it; DESIGN §5 "A hard deadline");
      ``mip_rel_gap``, ``threads``, ``random_seed``: HiGHS options.
    - ``max_binaries``: with ``milp_method`` ``"full"``, refuse a full model whose estimated start
      binaries exceed it (C17a); the decomposed path is judged on its master (issue 17).
    - ``max_wait_steps`` W: starvation guard of the MILP (cases C19, F03), EASY's reservation: the
      first job in arrival order (release_step, job_id) that has waited W steps and not started
      is reserved; a later job started at or after that point may run only at steps where the
      reserved job has no room for its requested size anyway (DESIGN §5 "Starvation guard"; hard;
      :func:`optimizer.milp.add_max_wait`, checked by :func:`optimizer.verify.verify`). None = off.
    - ``demand_hard``: when True, real-time demand must be served in full (no unmet slack);
      demand above capacity is then reported as infeasible before solving (case C14a).
    - ``multi_node_blocks``: when False, no batch block may span more than one node.
    - ``milp_method``: ``"decomposed"`` (default: a start/size master plus a block-packing check,
      exact, see :mod:`optimizer.decomposition`; the full model when packing fails) or
      ``"full"`` (the full x[j, s, o, t] model only).
    - ``mip_work_limit``: the deterministic work budget per MILP solve, in HiGHS MIP limit checks
      (see :func:`optimizer.solver.solve`; 5–180 ms of CPU each on the 2-core machine, depending on
      the instance). Every MILP solve of the planner (master, block packing, full model) stops at
      it; the LP relaxation and the heuristics run to their end, and ``time_limit_s`` is only the
      deadline of the whole plan (a safety stop). With ``threads=1`` and a fixed ``random_seed`` the
      plan then does not depend on machine speed or load unless that deadline fires (``Plan.status``
      ``deadline``, ``Plan.wall_clock_limited``). None (default) = sized by the planner from the
      master's columns and ``time_limit_s`` (:func:`optimizer.solver.auto_work_limit`: the master's
      share of ``time_limit_s`` at a wall/CPU ratio of 8 on the 2-core machine; 0, no branch-and-bound, when the
      root node alone would not fit; DESIGN §5).
    - ``full_model_max_binaries``: when the decomposed master's starts cannot be packed into
      aligned blocks, the exact full x[j, s, o, t] model is solved only up to this many binaries
      (estimate of :func:`optimizer.diagnose.estimate_size`); above it the planner keeps the best
      verified placement (master-guided repair, the warm starts) under the master's bound. Measured
      on the 2-core machine (``big_gangs``): full models of 5,400–8,800 binaries spent 10–60 s, up to
      22 s in presolve alone, before a first improvement.
    - ``budget``: ``"time"`` (default) or ``"work"`` (DESIGN §5 "Budget", issue 29). ``"time"``: the
      wall-clock ``time_limit_s`` is the budget: the master MILP (and, above
      ``SCALE_MIN_MASTER_COLUMNS`` columns, too) runs branch-and-bound until it proves ``mip_rel_gap``
      or its share of the clock ends; the plan depends on machine load. ``"work"``: the deterministic
      work budget (``mip_work_limit``, else :func:`optimizer.solver.auto_work_limit`), the clock only a
      safety stop: identical plans under any load (``gpuplan bench --reproducible``, tests). An explicit
      ``mip_work_limit`` caps every MILP solve in both modes.
    """

    decay_per_step: float = 0.995
    penalty_ratio: float = 8.0
    time_limit_s: float = 30.0
    mip_rel_gap: float = 0.001
    threads: int = 1
    random_seed: int = 0
    max_binaries: int = 2_000_000
    max_wait_steps: int | None = None
    demand_hard: bool = False
    multi_node_blocks: bool = True
    milp_method: str = "decomposed"
    mip_work_limit: int | None = None
    full_model_max_binaries: int = 4_000
    budget: str = "time"

    def __post_init__(self) -> None:
        w = "settings"
        if self.milp_method not in ("decomposed", "full"):
            raise InputError(f"{w}: milp_method = {self.milp_method!r} must be 'decomposed' or 'full'")
        if self.budget not in BUDGET_MODES:
            raise InputError(f"{w}: budget = {self.budget!r} must be 'time' or 'work'")
        g = as_num(self.decay_per_step, w, "decay_per_step")
        if not 0.0 < g <= 1.0:
            raise InputError(f"{w}: decay_per_step = {g} must be in (0, 1]")
        k = as_num(self.penalty_ratio, w, "penalty_ratio")
        if not 5.0 <= k <= 10.0:
            raise InputError(f"{w}: penalty_ratio = {k} must be in [5, 10] (DESIGN §5)")
        tl = as_num(self.time_limit_s, w, "time_limit_s")
        if tl <= 0:
            raise InputError(f"{w}: time_limit_s = {tl} must be > 0")
        gap = as_num(self.mip_rel_gap, w, "mip_rel_gap")
        if gap < 0:
            raise InputError(f"{w}: mip_rel_gap = {gap} must be >= 0")
        object.__setattr__(self, "decay_per_step", g)
        object.__setattr__(self, "penalty_ratio", k)
        object.__setattr__(self, "time_limit_s", tl)
        object.__setattr__(self, "mip_rel_gap", gap)
        object.__setattr__(self, "threads", as_int(self.threads, w, "threads", lo=1))
        object.__setattr__(self, "random_seed", as_int(self.random_seed, w, "random_seed", lo=0))
        object.__setattr__(self, "max_binaries", as_int(self.max_binaries, w, "max_binaries", lo=1))
        if self.max_wait_steps is not None:
            object.__setattr__(
                self, "max_wait_steps", as_int(self.max_wait_steps, w, "max_wait_steps", lo=0)
            )
        object.__setattr__(
            self, "full_model_max_binaries", as_int(self.full_model_max_binaries, w, "full_model_max_binaries", lo=0)
        )
        if self.mip_work_limit is not None:
            object.__setattr__(self, "mip_work_limit", as_int(self.mip_work_limit, w, "mip_work_limit", lo=1))
        for b in ("demand_hard", "multi_node_blocks"):
            if not isinstance(getattr(self, b), bool):
                raise InputError(f"{w}: {b} = {getattr(self, b)!r} must be true or false")


@dataclass(frozen=True)
class Service:
    """A real-time inference service: GPUs follow a demand curve (DESIGN §5).

    ``demand_gpus``: shape (horizon_steps,), GPUs wanted per step (>= 0). Band
    ``[min_gpus, max_gpus]``; ``swap_cap_gpus``: most GPUs added or removed between two steps;
    ``current_gpus``: the allocation committed at the step before 0.

    Per-type capacity (issue 26, typed clusters): ``capacity_per_gpu_per_h`` the requests one GPU serves per
    hour, a number (every type the same: the old form, it changes no plan) or, as ``capacity_by_type``,
    (gpu_type, requests per GPU-hour) pairs: the service runs only on those types, and ``demand_gpus`` counts
    GPUs of its slowest listed type (demand in requests per hour = ``demand_gpus × min rate``), so one GPU of
    type τ serves :meth:`weight` ``= rate_τ / min rate`` of them (DESIGN §3.1).
    """

    service: str
    demand_gpus: tuple[int, ...]
    min_gpus: int
    max_gpus: int
    swap_cap_gpus: int
    current_gpus: int
    capacity_per_gpu_per_h: float | None = None
    capacity_by_type: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        name = as_str(self.service, "service", "service")
        w = f"service {name!r}"
        raw = as_list(self.demand_gpus, w, "demand_gpus")
        if all(type(v) is int for v in raw) and (not raw or min(raw) >= 0):
            dem = tuple(raw)  # the common case, checked in bulk: a long horizon is read in milliseconds (F05)
        else:
            dem = tuple(as_int(v, w, f"demand_gpus[{i}]", lo=0) for i, v in enumerate(raw))
        lo = as_int(self.min_gpus, w, "min_gpus", lo=0)
        hi = as_int(self.max_gpus, w, "max_gpus", lo=0)
        if hi < lo:
            raise InputError(f"{w}: max_gpus = {hi} is below min_gpus = {lo}")
        object.__setattr__(self, "demand_gpus", dem)
        object.__setattr__(self, "min_gpus", lo)
        object.__setattr__(self, "max_gpus", hi)
        object.__setattr__(self, "swap_cap_gpus", as_int(self.swap_cap_gpus, w, "swap_cap_gpus", lo=0))
        object.__setattr__(self, "current_gpus", as_int(self.current_gpus, w, "current_gpus", lo=0))
        if self.capacity_per_gpu_per_h is not None:
            r = as_num(self.capacity_per_gpu_per_h, w, "capacity_per_gpu_per_h")
            if not r > 0:
                raise InputError(f"{w}: capacity_per_gpu_per_h = {r!r} must be > 0 (requests per GPU-hour)")
            object.__setattr__(self, "capacity_per_gpu_per_h", float(r))
        rates = []
        for k, v in self.capacity_by_type:
            r = as_num(v, w, f"capacity_per_gpu_per_h[{k!r}]")
            if not isinstance(k, str) or not k or not r > 0:
                raise InputError(f"{w}: capacity_per_gpu_per_h[{k!r}] = {v!r} must be a number > 0 "
                                 "(requests per GPU-hour) for a GPU type name")
            rates.append((k, float(r)))
        if self.capacity_by_type and self.capacity_per_gpu_per_h is not None:
            raise InputError(f"{w}: capacity_per_gpu_per_h is either a number or an object {{gpu_type: rate}}")
        object.__setattr__(self, "capacity_by_type", tuple(rates))

    @property
    def typed_capacity(self) -> bool:
        """True when the capacity per GPU depends on the GPU type (``capacity_by_type`` given)."""
        return bool(self.capacity_by_type)

    def weight(self, gpu_type: str) -> float:
        """Demand GPUs (of the slowest listed type) one GPU of ``gpu_type`` serves; 0 on a type not listed.

        1 on every type without ``capacity_by_type`` (the old form: every GPU serves the same).
        """
        if not self.capacity_by_type:
            return 1.0
        rates = dict(self.capacity_by_type)
        return rates[gpu_type] / min(rates.values()) if gpu_type in rates else 0.0


@dataclass(frozen=True)
class SizeOption:
    """One allowed size of a batch job: ``gpus`` (power of two) for ``duration_steps`` steps.

    ``efficiency`` in (0, 1] scales the reward of this size relative to the job's requested
    size (DESIGN §5, e_{j,s}; 1 when a job has one allowed size).
    """

    gpus: int
    duration_steps: int
    efficiency: float = 1.0


@dataclass(frozen=True)
class Job:
    """A queued batch job (training, quantization or batch inference).

    ``priority`` > 0, in :data:`PRIORITY_RANGE` and within a factor :data:`PRIORITY_SPREAD_MAX` of
    the problem's largest; ``release_step`` >= 0 (the first step it may start); ``sizes`` the allowed
    (gpus, duration_steps, efficiency) options, the first being the requested size (baselines
    use it); optional ``deadline_step`` (carried for the risk report; not a planning constraint).
    """

    job_id: str
    kind: str
    priority: float
    release_step: int
    sizes: tuple[SizeOption, ...]
    deadline_step: int | None = None
    gpu_types: tuple[str, ...] = ()
    durations_by_type: tuple[tuple[str, int], ...] = ()
    same_domain: bool = False
    preemptible: bool = False
    checkpoint_interval_steps: int | None = None
    restart_steps: int = 0

    @property
    def requested(self) -> SizeOption:
        """The requested (first) size option."""
        return self.sizes[0]

    def eligible(self, gpu_type: str) -> bool:
        """True when the job may run on ``gpu_type`` (``gpu_types`` empty = any type)."""
        return not self.gpu_types or gpu_type in self.gpu_types

    def duration_on(self, size: SizeOption, gpu_type: str, cluster: Cluster) -> int:
        """Steps ``size`` runs on ``gpu_type``.

        ``durations_by_type`` for the requested size when it names the type, else ``ceil(duration_steps /
        speed)`` (speed of :meth:`Cluster.speed`; after rounding to 1e-6, so a speed of 1 keeps the duration).
        """
        if size == self.requested:
            by = dict(self.durations_by_type)
            if gpu_type in by:
                return by[gpu_type]
        sp = cluster.speed(gpu_type)
        if sp == 1.0:
            return size.duration_steps
        return max(1, math.ceil(round(size.duration_steps / sp, ROUND_DIGITS)))


@dataclass(frozen=True)
class RunningJob:
    """A batch job already running: it keeps ``gpus`` GPUs from ``block_offset`` (aligned).

    ``remaining_steps`` below 1 means "observed still running" and is planned as 1
    (:attr:`planned_steps`).

    Preemption (issue 30, DESIGN §3.1): ``preemptible`` (default False: never stopped);
    ``checkpoint_interval_steps`` (>= 1, None: no checkpoint, all work since the run's start is lost);
    ``restart_steps`` (>= 0) added to the remaining work of a requeued job; ``steps_since_checkpoint``
    (>= 0; a requeued run's restart steps count, so it may reach the interval) the steps the run has held its block since its last
    checkpoint or its start. A stop loses ``steps_since_checkpoint + restart_steps`` steps on ``gpus`` GPUs
    (:attr:`lost_steps`).
    """

    job_id: str
    kind: str
    priority: float
    gpus: int
    block_offset: int
    remaining_steps: int
    preemptible: bool = False
    checkpoint_interval_steps: int | None = None
    restart_steps: int = 0
    steps_since_checkpoint: int = 0

    @property
    def lost_steps(self) -> int:
        """Steps of work a stop now costs: work since the last checkpoint plus the restart (>= 0)."""
        return self.steps_since_checkpoint + self.restart_steps

    @property
    def planned_steps(self) -> int:
        """Steps this job is planned to keep its block: ``max(1, remaining_steps)``."""
        return max(1, self.remaining_steps)


PRIORITY_RANGE: tuple[float, float] = (1e-300, 1e300)
"""Supported priorities ``[lo, hi]`` (case F01). The objective is homogeneous in priority (the
unmet-demand penalty is ``κ · max p``), so only ratios matter; the model is built in units of the
largest priority (DESIGN §5) and this range only keeps every objective value a normal finite float."""

PRIORITY_SPREAD_MAX: float = 1e6
"""Largest supported ratio between two priorities of one problem (case F01). The model is
normalised by the largest priority; a job priced more than this much below it would earn less per
GPU-step than HiGHS's absolute tolerances (1e-7 on reduced costs, 1e-6 on the MIP gap) and could be
left unstarted on an idle cluster while the solve reports "optimal"."""

OBJECTIVE_MAX: float = 1e306
"""Largest objective magnitude (in priority units) a problem may reach; see :func:`_check_priority_scale`."""

RejectedJob = tuple[str, str]
"""(job_id, reason) for a queued job refused at validation but left out of the plan (C21)."""


@dataclass(frozen=True)
class Problem:
    """A validated planning problem (DESIGN §3.1).

    ``down_gpus``: GPU indices unavailable for the whole horizon (node failure, case C24). A running job may
    sit on down GPUs: it keeps them until its planned end and nothing new starts there (a Slurm drain, case 022;
    a failure requeues its running jobs first, :mod:`optimizer.whatif`).
    ``rejected_jobs``: queued jobs dropped at validation with ``on_invalid_job="drop"`` (C21);
    not part of the problem file (``to_dict`` leaves them out).

    Build it with :meth:`from_dict` (validates everything) or directly from the dataclasses
    (``__post_init__`` runs the same cross-checks).
    """

    cluster: Cluster
    settings: PlanSettings
    services: tuple[Service, ...]
    jobs: tuple[Job, ...]
    running: tuple[RunningJob, ...] = ()
    down_gpus: tuple[int, ...] = ()
    rejected_jobs: tuple[RejectedJob, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "services", tuple(self.services))
        object.__setattr__(self, "jobs", tuple(self.jobs))
        object.__setattr__(self, "running", tuple(self.running))
        object.__setattr__(self, "down_gpus", tuple(self.down_gpus))
        object.__setattr__(self, "rejected_jobs", tuple(self.rejected_jobs))
        _check_problem(self)

    # -- convenience
    @property
    def horizon_steps(self) -> int:
        """Steps in the planning horizon (the cluster's)."""
        return self.cluster.horizon_steps

    @property
    def n_gpus(self) -> int:
        """GPUs in the cluster."""
        return self.cluster.n_gpus

    def job(self, job_id: str) -> Job:
        """The queued job with this id (KeyError if absent)."""
        for j in self.jobs:
            if j.job_id == job_id:
                return j
        raise KeyError(job_id)

    def max_priority(self) -> float:
        """Largest priority p_j over queued and running jobs (1.0 when there are none); sets w = kappa * max p.

        It is also the priority scale of the model (DESIGN §5): the MILP is built with priorities
        ``p_j / max p``, so its coefficients do not depend on the priorities' units.
        """
        ps = [j.priority for j in self.jobs] + [r.priority for r in self.running]
        return max(ps) if ps else 1.0

    def unmet_penalty(self) -> float:
        """The cost w = kappa * max_j p_j of one unmet real-time GPU-step (DESIGN §5)."""
        return self.settings.penalty_ratio * self.max_priority()

    # -- (de)serialisation
    @classmethod
    def from_dict(
        cls, d: Mapping[str, Any], on_invalid_job: Literal["raise", "drop"] = "raise"
    ) -> Problem:
        """Validate a problem-file dict (DESIGN §3.1) and build a :class:`Problem`.

        ``on_invalid_job="drop"`` leaves a queued job that fails validation out of the problem
        and lists it in ``rejected_jobs`` as (job_id, reason) (case C21: one bad job must not stop
        the others); everything else invalid still raises. Raises :class:`InputError`.
        """
        if on_invalid_job not in ("raise", "drop"):
            raise ValueError(f"on_invalid_job must be 'raise' or 'drop', got {on_invalid_job!r}")
        top = fileform.read_problem(d)
        cluster = Cluster(**fileform.read_cluster(top["cluster"]))
        settings = PlanSettings(**fileform.read_settings(top.get("settings")))
        services = tuple(
            Service(**fileform.read_service(x, i)) for i, x in enumerate(fileform.section_list(top, "services"))
        )
        jobs: list[Job] = []
        rejected: list[RejectedJob] = []
        for i, x in enumerate(fileform.section_list(top, "jobs")):
            try:
                job = _job(fileform.read_job(x, i))
                _check_job(job, cluster, settings)
            except InputError as exc:
                if on_invalid_job == "raise":
                    raise
                jid = x.get("job_id") if isinstance(x, Mapping) else None
                rejected.append((str(jid) if jid is not None else f"jobs[{i}]", str(exc)))
                continue
            jobs.append(job)
        running = tuple(
            RunningJob(**fileform.read_running(x, i)) for i, x in enumerate(fileform.section_list(top, "running"))
        )
        down = tuple(
            as_int(v, "problem", f"down_gpus[{i}]", lo=0)
            for i, v in enumerate(fileform.section_list(top, "down_gpus"))
        )
        return cls(cluster, settings, services, tuple(jobs), running, down, tuple(rejected))

    def to_dict(self) -> dict[str, Any]:
        """The problem-file dict (JSON-serialisable); ``from_dict(p.to_dict()) == p``.

        Version :data:`~optimizer.problem.fileform.PROBLEM_VERSION`. A typed cluster is written as its
        ``nodes`` (layout order) and ``down_gpus`` leaves out the GPUs its nodes and padding already mark down.
        """
        st = self.settings
        settings = {k: getattr(st, k) for k in fileform.SETTINGS_KEYS}
        return {
            "version": fileform.PROBLEM_VERSION,
            "cluster": self._cluster_dict(),
            "settings": settings,
            "services": [
                {
                    "service": s.service,
                    "demand_gpus": list(s.demand_gpus),
                    "min_gpus": s.min_gpus,
                    "max_gpus": s.max_gpus,
                    "swap_cap_gpus": s.swap_cap_gpus,
                    "current_gpus": s.current_gpus,
                    **_capacity_dict(s),
                }
                for s in self.services
            ],
            "jobs": [_job_to_dict(j) for j in self.jobs],
            "running": [
                {
                    "job_id": r.job_id,
                    "kind": r.kind,
                    "priority": r.priority,
                    "gpus": r.gpus,
                    "block_offset": r.block_offset,
                    "remaining_steps": r.remaining_steps,
                    **_preemption_dict(r),
                }
                for r in self.running
            ],
            "down_gpus": sorted(set(self.down_gpus) - set(self.cluster.layout_down)),
        }

    def _cluster_dict(self) -> dict[str, Any]:
        c = self.cluster
        out: dict[str, Any] = {"step_minutes": c.step_minutes, "horizon_steps": c.horizon_steps}
        if not c.typed:
            return {"n_gpus": c.n_gpus, "gpus_per_node": c.gpus_per_node} | out
        out["nodes"] = [{"name": n.name, "gpus": n.gpus, "gpu_type": n.gpu_type}
                        | ({"domain": n.domain} if n.domain else {}) | ({"down": list(n.down)} if n.down else {})
                        for n in c.nodes]
        if c.gpu_speed:
            out["gpu_speed"] = dict(c.gpu_speed)
        return out


def split_valid_jobs(d: Mapping[str, Any]) -> tuple[Problem, list[RejectedJob]]:
    """Build a problem from a dict, dropping queued jobs that fail validation (case C21).

    Returns ``(problem, rejected)`` with ``rejected`` a list of (job_id, reason), e.g.
    ``("A", "job 'A': requests 96 GPUs; cluster has 64")``. Anything invalid outside the queued
    jobs still raises :class:`InputError`.
    """
    p = Problem.from_dict(d, on_invalid_job="drop")
    return p, list(p.rejected_jobs)


# ----------------------------------------------------------------------------- file form


def _job(f: Mapping[str, Any]) -> Job:
    """A :class:`Job` from :func:`optimizer.problem.fileform.read_job`'s fields (checked later)."""
    return Job(
        job_id=f["job_id"],
        kind=f["kind"],
        priority=f["priority"],
        release_step=f["release_step"],
        sizes=tuple(SizeOption(g, d, e) for g, d, e in f["sizes"]),
        deadline_step=f["deadline_step"],
        gpu_types=f["gpu_types"],
        durations_by_type=f["durations_by_type"],
        same_domain=f["same_domain"],
        preemptible=f["preemptible"],
        checkpoint_interval_steps=f["checkpoint_interval_steps"],
        restart_steps=f["restart_steps"],
    )


def _job_to_dict(j: Job) -> dict[str, Any]:
    d: dict[str, Any] = {"job_id": j.job_id, "kind": j.kind, "priority": j.priority, "release_step": j.release_step}
    if len(j.sizes) == 1 and j.sizes[0].efficiency == 1.0:
        d["gpus"] = j.sizes[0].gpus
        d["duration_steps"] = j.sizes[0].duration_steps
    else:
        d["sizes"] = [
            {"gpus": s.gpus, "duration_steps": s.duration_steps, "efficiency": s.efficiency} for s in j.sizes
        ]
    if j.deadline_step is not None:
        d["deadline_step"] = j.deadline_step
    if j.gpu_types:
        d["gpu_types"] = list(j.gpu_types)
    if j.durations_by_type:
        d["durations_by_type"] = dict(j.durations_by_type)
    if j.same_domain:
        d["same_domain"] = True
    d.update(_preemption_dict(j))
    return d


def _preemption_dict(j: Job | RunningJob) -> dict[str, Any]:
    """The preemption fields of a job for the problem file, only those not at their default (issue 30)."""
    d: dict[str, Any] = {}
    if j.preemptible:
        d["preemptible"] = True
    if j.checkpoint_interval_steps is not None:
        d["checkpoint_interval_steps"] = j.checkpoint_interval_steps
    if j.restart_steps:
        d["restart_steps"] = j.restart_steps
    if isinstance(j, RunningJob) and j.steps_since_checkpoint:
        d["steps_since_checkpoint"] = j.steps_since_checkpoint
    return d


def _check_preemption(j: Job | RunningJob, w: str) -> None:
    """Validate and normalise the preemption fields of a queued or running job (issue 30).

    Raises :class:`InputError` naming the job and the field: ``preemptible`` not a bool,
    ``checkpoint_interval_steps`` not an int >= 1 (or null), ``restart_steps`` not an int >= 0, and for a
    running job ``steps_since_checkpoint`` not an int >= 0, or, with a checkpoint interval, not below
    ``checkpoint_interval_steps + restart_steps`` (a run checkpoints after every interval of work; a requeued
    run's restart steps come before its first checkpoint, so it may reach the interval but never pass
    ``interval + restart_steps - 1``: :func:`optimizer.simulate.checkpoint_progress`).
    """
    if not isinstance(j.preemptible, bool):
        raise InputError(f"{w}: preemptible = {j.preemptible!r} must be true or false")
    ci = j.checkpoint_interval_steps
    if ci is not None:
        ci = as_int(ci, w, "checkpoint_interval_steps", lo=1)
    rs = as_int(j.restart_steps, w, "restart_steps", lo=0)
    object.__setattr__(j, "checkpoint_interval_steps", ci)
    object.__setattr__(j, "restart_steps", rs)
    if isinstance(j, RunningJob):
        sc = as_int(j.steps_since_checkpoint, w, "steps_since_checkpoint", lo=0)
        if ci is not None and sc >= ci + rs:
            raise InputError(
                f"{w}: steps_since_checkpoint = {sc} must be below checkpoint_interval_steps + restart_steps = "
                f"{ci} + {rs} (a checkpoint is written after every {ci} steps of work)")
        object.__setattr__(j, "steps_since_checkpoint", sc)


# ----------------------------------------------------------------------------- cross-checks


def _check_gpus(g: Any, where: str, name: str, cluster: Cluster, settings: PlanSettings) -> int:
    if isinstance(g, (int, float)) and not isinstance(g, bool) and g == 0:
        raise InputError(f"{where}: {name}: gpu_count must be >= 1 (got 0)")
    g = as_int(g, where, name, lo=1)
    if g > cluster.n_gpus:
        raise InputError(f"{where}: requests {g} GPUs; cluster has {cluster.n_gpus} ({name})")
    if not is_pow2(g):
        raise InputError(f"{where}: {name} = {g} is not a power of two (1, 2, 4, 8, ...)")
    if not settings.multi_node_blocks and g > cluster.gpus_per_node:
        raise InputError(
            f"{where}: {name} = {g} spans more than one {cluster.gpus_per_node}-GPU node "
            "and multi_node_blocks is disabled"
        )
    return g


def _check_identity(j: Job | RunningJob, label: str) -> tuple[str, str, float]:
    """Check job_id, kind and priority (> 0 and inside :data:`PRIORITY_RANGE`); returns (job_id, message prefix, priority)."""
    jid = as_str(j.job_id, label, "job_id")
    w = f"{label} {jid!r}"
    if j.kind not in JOB_KINDS:
        raise InputError(f"{w}: kind = {j.kind!r} must be one of {', '.join(JOB_KINDS)}")
    p = as_num(j.priority, w, "priority")
    if p <= 0:
        raise InputError(f"{w}: priority = {j.priority!r} must be > 0")
    lo, hi = PRIORITY_RANGE
    if not lo <= p <= hi:
        raise InputError(f"{w}: priority = {p:g} is outside the supported range [{lo:g}, {hi:g}] "
                         "(only ratios of priorities matter: divide them all by a common factor; DESIGN §5)")
    return jid, w, p


def _check_priority_scale(p: Problem) -> None:
    """The problem-wide priority rules of DESIGN §5 (case F01): spread and objective magnitude.

    Raises :class:`InputError` naming the job and ``priority`` when a priority lies more than
    :data:`PRIORITY_SPREAD_MAX` below the largest (its reward would sit below HiGHS's absolute
    tolerances once the model is normalised by the largest priority), or when the objective in
    priority units could exceed :data:`OBJECTIVE_MAX` (it must stay a finite float):
    ``max p · (N · H + κ · Σ_{i,t} D_{i,t})`` bounds its magnitude (batch reward at most one unit
    per GPU-step, unmet demand at most the demand).
    """
    labelled = [("job", j.job_id, j.priority) for j in p.jobs] + [("running job", r.job_id, r.priority)
                                                                   for r in p.running]
    if not labelled:
        return
    _, top_id, top = max(labelled, key=lambda x: x[2])
    for label, jid, pr in labelled:
        if pr * PRIORITY_SPREAD_MAX < top:
            raise InputError(
                f"{label} {jid!r}: priority = {pr:g} is more than {PRIORITY_SPREAD_MAX:g} times below the largest "
                f"priority {top:g} (job {top_id!r}); priorities must lie within a factor {PRIORITY_SPREAD_MAX:g} "
                "of each other (DESIGN §5)")
    # a start inside the horizon earns its whole run (terminal value): up to N GPUs over H + d_max steps
    d_max = max((o.duration_steps for j in p.jobs for o in j.sizes), default=0)
    units = float(p.cluster.n_gpus * (p.cluster.horizon_steps + d_max)) + p.settings.penalty_ratio * float(
        sum(sum(s.demand_gpus) for s in p.services))
    if top * units > OBJECTIVE_MAX:
        label = next(lab for lab, jid, _ in labelled if jid == top_id)
        raise InputError(
            f"{label} {top_id!r}: priority = {top:g} is too large for this problem: the objective can reach "
            f"priority x {units:.3g} GPU-steps, above {OBJECTIVE_MAX:g}; priorities here must be at most "
            f"{OBJECTIVE_MAX / units:.3g} (only their ratios matter; DESIGN §5)")


def _check_job(j: Job, cluster: Cluster, settings: PlanSettings) -> None:
    """Validate a queued job against the cluster; normalises fields in place (frozen-safe)."""
    jid, w, p = _check_identity(j, "job")
    rel = as_int(j.release_step, w, "release_step", lo=0)
    sizes = tuple(j.sizes) if isinstance(j.sizes, (list, tuple)) else None
    if not sizes:
        raise InputError(f"{w}: sizes must be a non-empty list")
    out = []
    seen: set[int] = set()
    for k, s in enumerate(sizes):
        if not isinstance(s, SizeOption):
            raise InputError(f"{w}: sizes[{k}] is not a SizeOption")
        fname = "gpus" if len(sizes) == 1 else f"sizes[{k}].gpus"
        g = _check_gpus(s.gpus, w, fname, cluster, settings)
        if g in seen:
            raise InputError(f"{w}: sizes[{k}].gpus = {g} is listed twice")
        seen.add(g)
        dname = "duration_steps" if len(sizes) == 1 else f"sizes[{k}].duration_steps"
        d = as_int(s.duration_steps, w, dname, lo=1)
        e = as_num(s.efficiency, w, f"sizes[{k}].efficiency")
        if not 0.0 < e <= 1.0:
            raise InputError(f"{w}: sizes[{k}].efficiency = {e} must be in (0, 1]")
        out.append(SizeOption(g, d, e))
    dl = j.deadline_step
    if dl is not None:
        dl = as_int(dl, w, "deadline_step", lo=0)
    types = tuple(as_str(x, w, f"gpu_types[{i}]") for i, x in enumerate(j.gpu_types))
    if len(set(types)) != len(types):
        raise InputError(f"{w}: gpu_types lists a type twice: {list(types)}")
    known = cluster.gpu_types
    unknown = [x for x in types if x not in known]
    if cluster.typed and unknown:
        raise InputError(f"{w}: gpu_types {unknown} name no node's type; the cluster has {list(known)}")
    if types and not cluster.typed:
        raise InputError(f"{w}: gpu_types = {list(types)} needs a typed cluster (cluster.nodes, version 2)")
    by = []
    for ty, steps in j.durations_by_type:
        if (types and ty not in types) or ty not in known:
            raise InputError(f"{w}: durations_by_type[{ty!r}] names a type it cannot run on "
                             f"(gpu_types {list(types) or 'any'}, cluster types {list(known)})")
        by.append((ty, as_int(steps, w, f"durations_by_type[{ty!r}]", lo=1)))
    if not isinstance(j.same_domain, bool):
        raise InputError(f"{w}: same_domain = {j.same_domain!r} must be true or false")
    _check_preemption(j, w)
    object.__setattr__(j, "gpu_types", types)
    object.__setattr__(j, "durations_by_type", tuple(by))
    object.__setattr__(j, "job_id", jid)
    object.__setattr__(j, "priority", p)
    object.__setattr__(j, "release_step", rel)
    object.__setattr__(j, "sizes", tuple(out))
    object.__setattr__(j, "deadline_step", dl)


def _check_running(r: RunningJob, cluster: Cluster) -> None:
    jid, w, p = _check_identity(r, "running job")
    g = as_int(r.gpus, w, "gpus", lo=1)
    if g > cluster.n_gpus:
        raise InputError(f"{w}: requests {g} GPUs; cluster has {cluster.n_gpus} (gpus)")
    if not is_pow2(g):
        raise InputError(f"{w}: gpus = {g} is not a power of two")
    o = as_int(r.block_offset, w, "block_offset", lo=0)
    if o % g:
        raise InputError(f"{w}: block_offset = {o} is not aligned to its size {g} (must be a multiple of {g})")
    if o + g > cluster.n_gpus:
        raise InputError(f"{w}: block {o}..{o + g - 1} lies outside the cluster of {cluster.n_gpus} GPUs (block_offset)")
    rem = as_int(r.remaining_steps, w, "remaining_steps")
    _check_preemption(r, w)
    object.__setattr__(r, "job_id", jid)
    object.__setattr__(r, "priority", p)
    object.__setattr__(r, "gpus", g)
    object.__setattr__(r, "block_offset", o)
    object.__setattr__(r, "remaining_steps", rem)


def _capacity_dict(s: Service) -> dict[str, Any]:
    """A service's ``capacity_per_gpu_per_h`` for the problem file: the number, the per-type object, or nothing."""
    if s.capacity_by_type:
        return {"capacity_per_gpu_per_h": dict(s.capacity_by_type)}
    return {} if s.capacity_per_gpu_per_h is None else {"capacity_per_gpu_per_h": s.capacity_per_gpu_per_h}


def _check_problem(p: Problem) -> None:
    if not isinstance(p.cluster, Cluster):
        raise InputError("problem: cluster must be a Cluster")
    if not isinstance(p.settings, PlanSettings):
        raise InputError("problem: settings must be a PlanSettings")
    H, N = p.cluster.horizon_steps, p.cluster.n_gpus
    names: set[str] = set()
    for s in p.services:
        if s.service in names:
            raise InputError(f"service {s.service!r}: service name listed twice")
        names.add(s.service)
        if len(s.demand_gpus) != H:
            raise InputError(
                f"service {s.service!r}: demand_gpus has {len(s.demand_gpus)} entries; "
                f"horizon_steps is {H}"
            )
        if s.min_gpus > N:
            raise InputError(f"service {s.service!r}: min_gpus = {s.min_gpus} exceeds the cluster of {N} GPUs")
        if s.capacity_by_type:
            if not p.cluster.typed:
                raise InputError(f"service {s.service!r}: capacity_per_gpu_per_h per GPU type needs a typed cluster "
                                 "(cluster.nodes, version 2)")
            unknown = [k for k, _ in s.capacity_by_type if k not in p.cluster.gpu_types]
            if unknown:
                raise InputError(f"service {s.service!r}: capacity_per_gpu_per_h names GPU type {unknown[0]!r}, "
                                 f"which no node has; the cluster has {list(p.cluster.gpu_types)}")
    ids: set[str] = set()
    for j in p.jobs:
        _check_job(j, p.cluster, p.settings)
        if j.job_id in ids:
            raise InputError(f"job {j.job_id!r}: job_id listed twice")
        ids.add(j.job_id)
    down = set()
    for i, g in enumerate(p.down_gpus):
        g = as_int(g, "problem", f"down_gpus[{i}]", lo=0, hi=N - 1)
        if g in down:
            raise InputError(f"problem: down_gpus[{i}] = {g} listed twice")
        down.add(g)
    down.update(p.cluster.layout_down)  # a typed cluster's down and padding GPUs (issue 26)
    object.__setattr__(p, "down_gpus", tuple(sorted(down)))
    owner: dict[int, str] = {}
    for r in p.running:
        _check_running(r, p.cluster)
        if r.job_id in ids:
            raise InputError(f"running job {r.job_id!r}: job_id listed twice (also queued or running)")
        ids.add(r.job_id)
        for g in range(r.block_offset, r.block_offset + r.gpus):
            if g in owner:
                raise InputError(
                    f"running job {r.job_id!r}: block_offset {r.block_offset} overlaps running job "
                    f"{owner[g]!r} on GPU {g}"
                )
            owner[g] = r.job_id
    _check_priority_scale(p)
