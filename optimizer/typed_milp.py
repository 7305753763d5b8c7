"""The MILP on a typed cluster (issue 26): a master on (GPU type, node size) pools, then packing on nodes.

DESIGN §5 "Typed clusters" states the model; in short:

Pools and block classes. A pool is the set of nodes of one (``gpu_type``, node size). An aligned block a job
may use (:func:`optimizer.eligibility.block_options`: inside one node, or whole nodes of one type, and one
domain when ``same_domain``) is described by its *composition*: the GPUs it takes from each pool. Blocks of
one size with the same composition, type and duration form one *class*: the master does not tell them apart.

Master (:func:`build_pool_master`), columns ``x[j, s, k, t]`` binary for job ``j``, size ``s``, block class
``k`` of an eligible type, start ``t >= release_step``; its run lasts the type's duration
(``durations_by_type``, else duration / speed) and its reward is DESIGN §5's with that duration
(:func:`optimizer.objective.job_reward`: the same work, sooner on a faster type). Row families:
``pool_capacity`` (per pool and step: GPUs of the running starts in that pool <= the pool's GPUs not down and
not held by running jobs), ``gpu_count`` (per step: batch + real-time GPUs <= GPUs up minus running, as the
homogeneous model), ``start_once``, ``demand_band``, ``real_time_first``, ``swap_cap`` (the families of
:mod:`optimizer.milp`, unchanged: services may run on every type and count GPUs, so a service needs no pool).
Pruned: a start whose size exceeds, at some step of its run, its pools' free GPUs or the batch room.
Every valid plan maps to a point of the master (its blocks' classes and starts), so the master's optimum and
dual bound bound every valid plan (a relaxation): the GPU-level rules it leaves out (which block, one task
per GPU inside a pool, the swap cap at GPU level) are the packing's.

Packing (:func:`pack_starts`): the master's starts in step order (largest block first among equals), each on
the lowest free aligned block of its class over its run (first fit, as the baselines); then a start that did
not fit goes to another eligible class free at its step, else it is delayed to its earliest fitting start over
every eligible type (the repair), else left unstarted; services keep the master's counts. The plan is built
by :func:`optimizer.baselines.assemble_plan`, which holds the services on their GPUs within the GPU-level swap
cap (:func:`optimizer.placement.hold_services`, delaying a start in the way when nothing else keeps it).

Exactness. When the packed plan is within ``mip_rel_gap`` of the master bound it is proven optimal. Otherwise,
when the block-level model (``x[j, s, o, t]`` on eligible aligned blocks, one task per GPU cell; the full
model of :mod:`optimizer.milp` with typed start variables, :func:`build_typed_full_model`) has at most
``full_model_max_binaries`` binaries, it is solved warm-started from the best plan; above that the best
verified plan (packed master, greedy plans, baselines) is kept under the master's bound. The answer is never
below the best baseline (:class:`optimizer.strategy.MilpRun`'s rule).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from optimizer.baselines import Board, demand_following_target, greedy_place, greedy_plans, reserved_service_gpus
from optimizer.capacity import Capacity
from optimizer.eligibility import block_options
from optimizer.milp import (
    BuiltModel,
    GuardCols,
    ModelBuilder,
    StartVars,
    add_demand_band,
    add_max_wait,
    add_no_preemption,
    add_one_task_per_gpu,
    add_real_time_first,
    add_start_once,
    add_swap_cap,
    complete_guard,
    make_context,
    model_size,
    plan_to_vector,
    set_service_values,
    solution_starts,
)
from optimizer.objective import objective_value, run_decay
from optimizer.placement import served_demand_gpus, service_placement
from optimizer.plan import Plan, PlanSource
from optimizer.problem import Cluster, Job, Problem, SizeOption
from optimizer.ranking import min_bound
from optimizer.solver import SolveStatus, SparseModel, mip_gap, solve
from optimizer.strategy import MIN_SOLVE_S, MilpRun, finish_reserve_s
from optimizer.verify import verify

Pool = tuple[str, int]
"""(gpu_type, node GPUs): the nodes of one type and size."""

#: Share of the time left after the baselines that the greedy warm starts of a typed plan may take. On the whole
#: openb cluster (6,212 GPUs, 1,213 nodes) each greedy order takes seconds; run to ``deadline - MIN_SOLVE_S`` as
#: the homogeneous path does, they spent 31 s of the 60 s (load 10) and left no time for the pool master, whose LP
#: bound is what proves a gap (benchmarks/replan_openb_full.py, docs/benchmark.md "Issue 26").
GREEDY_SHARE = 0.25


def pools(problem: Problem) -> list[Pool]:
    """The pools of a typed cluster, in layout order of first appearance."""
    return list(dict.fromkeys((n.gpu_type, n.gpus) for n in problem.cluster.nodes))


def pool_of_gpu(problem: Problem) -> np.ndarray:
    """(n_gpus,) int: index into :func:`pools` of each GPU's node; -1 for padding."""
    ps = {p: k for k, p in enumerate(pools(problem))}
    out = np.full(problem.n_gpus, -1, dtype=np.int64)
    for o, n in zip(problem.cluster.node_offsets, problem.cluster.nodes, strict=True):
        out[o:o + n.gpus] = ps[(n.gpu_type, n.gpus)]
    return out


@dataclass
class MasterVars:
    """Start columns of one (job, size, block class): ``starts`` (k,) steps, ``cols`` (k,) column indices.

    ``blocks`` (n_gpus // gpus,) bool: the class's aligned blocks; ``use`` (n_pools,) GPUs taken from each pool.
    """

    job: int
    gpus: int
    duration: int
    gpu_type: str
    blocks: np.ndarray
    use: np.ndarray
    starts: np.ndarray
    cols: np.ndarray


@dataclass
class PoolMaster:
    """The built pool master (module docstring) and what reading a solution needs."""

    model: SparseModel
    xs: list[MasterVars]
    a_cols: np.ndarray
    u_cols: np.ndarray
    ctx: object
    pool_free: np.ndarray  # (n_pools, H) GPUs of each pool not down and not held by running jobs
    row_families: dict[str, int]
    y_cols: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)  # (service, type) -> (H,) GPUs held
    guard: GuardCols | None = None  # the starvation guard's columns (max_wait_steps set), else None

    @property
    def size(self) -> dict[str, int]:
        """{rows, cols, binaries, integers} (:func:`optimizer.milp.model_size`)."""
        return model_size(self.model)


@lru_cache(maxsize=64)
def _composition(cluster: Cluster, gpus: int) -> np.ndarray:
    """(n_gpus // gpus, n_pools) int: the GPUs each aligned block of ``gpus`` GPUs takes from each pool."""
    ps = {p: k for k, p in enumerate(dict.fromkeys((n.gpu_type, n.gpus) for n in cluster.nodes))}
    gpu_pool = np.full(cluster.n_gpus, len(ps), dtype=np.int64)  # padding: an extra column, dropped
    for o, n in zip(cluster.node_offsets, cluster.nodes, strict=True):
        gpu_pool[o:o + n.gpus] = ps[(n.gpu_type, n.gpus)]
    blocks = gpu_pool.reshape(-1, gpus)
    return np.stack([(blocks == k).sum(axis=1) for k in range(len(ps))], axis=1)


def _class_table(problem: Problem, gpus: int, gpu_types: tuple[str, ...], same_domain: bool
                 ) -> tuple[tuple[str, np.ndarray, np.ndarray], ...]:
    """(gpu_type, blocks mask, pool use) per block class of a job of ``gpus`` GPUs with these eligibility fields.

    It depends on nothing else of the job, so jobs alike share it (:func:`_classes`' ``memo``).
    """
    probe = Job("_", "training", 1.0, 0, (SizeOption(gpus, 1),), gpu_types=gpu_types, same_domain=same_domain)
    comp = _composition(problem.cluster, gpus)
    out = []
    for _d, mask, ty in block_options(problem, probe, probe.sizes[0]):
        assert mask is not None
        idx = np.flatnonzero(mask)
        uniq, inv = np.unique(comp[idx], axis=0, return_inverse=True)
        for c in range(len(uniq)):
            m = np.zeros(len(mask), dtype=bool)
            m[idx[inv.ravel() == c]] = True
            out.append((ty, m, uniq[c].astype(np.int64)))
    return tuple(out)


def _classes(problem: Problem, job_index: int, memo: dict):
    """Yield (size, duration, gpu_type, blocks mask, pool use) per block class of a job (module docstring).

    ``memo``: the :func:`_class_table` of each (gpus, gpu_types, same_domain) already seen in this build.
    """
    job = problem.jobs[job_index]
    for s in job.sizes:
        key = (s.gpus, job.gpu_types, job.same_domain)
        if key not in memo:
            memo[key] = _class_table(problem, *key)
        for ty, m, use in memo[key]:
            yield s, job.duration_on(s, ty, problem.cluster), ty, m, use


def build_pool_master(problem: Problem, u_star: np.ndarray, capacity: Capacity) -> PoolMaster:
    """The pool master of the module docstring (typed cluster; ``u_star`` and ``capacity`` as in :func:`optimizer.milp.make_context`)."""
    H = problem.horizon_steps
    ctx = make_context(problem, u_star, capacity)
    ctx.groups = [[k] for k in range(len(problem.jobs))]  # jobs with types are not interchangeable
    gpu_pool = pool_of_gpu(problem)
    n_pools = len(pools(problem))
    occ = np.asarray(capacity.occupancy)
    pool_free = np.stack([(~occ[:, gpu_pool == k]).sum(axis=1) for k in range(n_pools)]) \
        if n_pools else np.zeros((0, H), dtype=np.int64)
    gamma = problem.settings.decay_per_step
    b = ModelBuilder()
    xs: list[MasterVars] = []
    memo: dict = {}
    for j, job in enumerate(problem.jobs):
        if job.release_step >= H:
            continue
        for s, d, ty, mask, use in _classes(problem, j, memo):
            ts = np.arange(job.release_step, H)
            # room at every in-horizon step of the run (the pools' and the batch room): no bad step in [t, t + d)
            bad = ~((pool_free >= use[:, None]).all(axis=0) & (ctx.batch_room >= s.gpus))
            nbad = np.concatenate([[0], np.cumsum(bad)])
            ts = ts[nbad[np.minimum(ts + d, H)] - nbad[ts] == 0]
            if not len(ts):
                continue
            q = job.priority / ctx.priority_scale
            reward = q * s.efficiency * s.gpus * (s.duration_steps / d) * run_decay(gamma, ts, d)
            cols = b.add_cols(reward, 0.0, 1.0, integer=True)
            xs.append(MasterVars(j, s.gpus, d, ty, mask, use, ts, cols))
    typed_svc = [i for i, s in enumerate(problem.services) if s.typed_capacity]
    if typed_svc:
        relax_real_time_first(ctx, typed_svc)
    n_demand = b.n_rows
    a_cols, u_cols = add_demand_band(b, ctx)
    demand_rows = np.arange(n_demand, b.n_rows).reshape(a_cols.shape)
    add_real_time_first(b, ctx, u_cols)
    # pool capacity and the GPU count: coverage of each start's run
    prow = b.add_rows(-np.inf, pool_free.ravel().astype(np.float64), "pool_capacity").reshape(n_pools, H)
    y_cols = add_service_types(b, problem, typed_svc, a_cols, u_cols, demand_rows, pool_free, xs) if typed_svc else {}
    crow = b.add_rows(-np.inf, capacity.free.astype(np.float64), "gpu_count")
    for v in xs:
        steps = v.starts[:, None] + np.arange(v.duration)[None, :]
        inh = steps < H
        st = steps[inh]
        cl = np.broadcast_to(v.cols[:, None], steps.shape)[inh]
        b.add_coeffs(crow[st], cl, float(v.gpus))
        for k in np.flatnonzero(v.use).tolist():
            b.add_coeffs(prow[k, st], cl, float(v.use[k]))
    if a_cols.size:
        b.add_coeffs(np.broadcast_to(crow[None, :], a_cols.shape), a_cols, 1.0)
    once = b.add_rows(-np.inf, np.ones(len(problem.jobs)), "start_once")
    for v in xs:
        b.add_coeffs(once[v.job], v.cols, 1.0)
    add_swap_cap(b, ctx, a_cols)
    guard = add_max_wait(b, ctx, [as_start_vars(v) for v in xs])  # None without max_wait_steps
    return PoolMaster(b.model(), xs, a_cols, u_cols, ctx, pool_free, dict(b.row_families), y_cols, guard)


def as_start_vars(v: MasterVars) -> StartVars:
    """The start columns of a master class as :class:`optimizer.milp.StartVars` of the job's own group.

    The starvation guard (:func:`optimizer.milp.add_max_wait`) reads only a start's group, GPUs, duration (the
    type's), steps and columns: on counts, as the verifier's rule (:func:`optimizer.verify.max_wait_violations`).
    """
    return StartVars(v.job, v.gpus, v.duration, 1.0, np.zeros(len(v.starts), dtype=np.int64), v.starts, v.cols)


def relax_real_time_first(ctx, typed_svc: list[int]) -> None:
    """Real time first off for services with per-type capacity: ``u <= D`` (not ``u*``), no ``Σ u <= U*`` row.

    ``U*`` (:func:`optimizer.capacity.least_unmet_by_step`) counts one demand GPU per GPU; a service whose GPUs
    of a faster type serve more (or which may use only some types) has another least unmet demand, not
    computed here, so only the unmet penalty κ puts real time first for it (DESIGN §5 "Typed clusters").
    """
    D = np.array([s.demand_gpus for s in ctx.problem.services], dtype=np.int64).reshape(ctx.unmet_cap.shape)
    cap = np.array(ctx.unmet_cap, dtype=np.int64, copy=True)
    cap[typed_svc] = D[typed_svc]
    ctx.unmet_cap = cap
    ctx.least_unmet = int(D.sum())


def add_service_types(b: ModelBuilder, problem: Problem, typed_svc: list[int], a_cols: np.ndarray,
                      u_cols: np.ndarray, demand_rows: np.ndarray, pool_free: np.ndarray,
                      xs: list[MasterVars]) -> dict[tuple[int, str], np.ndarray]:
    """Per-type service capacity (issue 26) for the services ``typed_svc``; returns their ``y`` columns.

    Integer ``y[i, τ, t]`` = GPUs of type τ service i holds (only its listed types). Families:
    **service_types** ``Σ_τ y[i, τ, t] = a[i, t]``; the **demand_band** row becomes
    ``Σ_τ w_τ y[i, τ, t] + u[i, t] >= D[i, t]`` (``w_τ`` = :meth:`optimizer.problem.Service.weight`, added as
    ``(w_τ - 1) y`` to the row ``a + u >= D``), with ``u`` continuous (the demand it leaves may be fractional);
    **type_capacity** per type and step: the batch starts' GPUs in that type's pools plus ``Σ_i y[i, τ, t]`` <=
    the type's free GPUs; **type_swap_cap** (t >= 1): ``Σ_τ max(0, y[τ, t] - y[τ, t-1]) <= c`` and
    ``Σ_τ max(0, y[τ, t-1] - y[τ, t]) <= c`` (continuous ``up``/``dn`` columns): a change of type is GPUs added and
    released, so the GPU-level swap cap (``max(added, released) <= c``) holds on types too. Every valid plan is a
    point: its GPU-level placement gives ``y`` (and swaps at GPU level are at least the swaps between types).
    The auxiliary columns are kept in ``y_cols`` under ``(i, "~up:" + τ)`` / ``(i, "~dn:" + τ)`` for warm starts.
    """
    H = problem.horizon_steps
    ps = pools(problem)
    y_cols: dict[tuple[int, str], np.ndarray] = {}
    types = sorted({k for i in typed_svc for k, _ in problem.services[i].capacity_by_type})
    b.set_continuous(u_cols[typed_svc].ravel())
    swap_aux: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for i in typed_svc:
        s = problem.services[i]
        row = b.add_rows(np.zeros(H), np.zeros(H), "service_types")
        b.add_coeffs(row, a_cols[i], -1.0)
        for ty in types:
            w = s.weight(ty)
            if w <= 0:
                continue
            y = b.add_cols(np.zeros(H), 0.0, float(s.max_gpus), integer=True)
            b.add_coeffs(row, y, 1.0)
            if w != 1.0:
                b.add_coeffs(demand_rows[i], y, w - 1.0)
            y_cols[(i, ty)] = y
    for i in typed_svc:  # type_swap_cap: GPUs added to / released from each type between steps, each <= the cap
        mine = [y for (k, _t), y in y_cols.items() if k == i]
        if H < 2 or not mine:
            continue
        c = float(problem.services[i].swap_cap_gpus)
        add_row = b.add_rows(np.full(H - 1, -np.inf), np.full(H - 1, c), "type_swap_cap")
        rel_row = b.add_rows(np.full(H - 1, -np.inf), np.full(H - 1, c), "type_swap_cap")
        for y in mine:
            up = b.add_cols(np.zeros(H - 1), 0.0, np.inf, integer=False)  # >= y[t] - y[t-1]
            dn = b.add_cols(np.zeros(H - 1), 0.0, np.inf, integer=False)  # >= y[t-1] - y[t]
            r = b.add_rows(np.zeros(H - 1), np.full(H - 1, np.inf), "type_swap_cap")
            b.add_coeffs(r, up, 1.0)
            b.add_coeffs(r, y[1:], -1.0)
            b.add_coeffs(r, y[:-1], 1.0)
            r = b.add_rows(np.zeros(H - 1), np.full(H - 1, np.inf), "type_swap_cap")
            b.add_coeffs(r, dn, 1.0)
            b.add_coeffs(r, y[1:], 1.0)
            b.add_coeffs(r, y[:-1], -1.0)
            b.add_coeffs(add_row, up, 1.0)
            b.add_coeffs(rel_row, dn, 1.0)
            swap_aux.append((y, up, dn))
    for ty in types:
        ks = [k for k, p in enumerate(ps) if p[0] == ty]
        row = b.add_rows(-np.inf, pool_free[ks].sum(axis=0).astype(np.float64), "type_capacity")
        for v in xs:
            u = int(v.use[ks].sum())
            if not u:
                continue
            steps = v.starts[:, None] + np.arange(v.duration)[None, :]
            inh = steps < H
            b.add_coeffs(row[steps[inh]], np.broadcast_to(v.cols[:, None], steps.shape)[inh], float(u))
        for (_i, t2), y in y_cols.items():
            if t2 == ty:
                b.add_coeffs(row, y, 1.0)
    for (i, ty), y in list(y_cols.items()):
        for yy, up, dn in swap_aux:
            if yy is y:
                y_cols[(i, "~up:" + ty)] = up
                y_cols[(i, "~dn:" + ty)] = dn
    return y_cols


def set_type_values(pm: PoolMaster, problem: Problem, plan: Plan, x: np.ndarray) -> None:
    """Write a plan's ``y`` (GPUs per type of its GPU-level placement) and exact ``u`` into ``x`` (in place)."""
    if not pm.y_cols:
        return
    place = service_placement(problem, plan)
    served = served_demand_gpus(problem, place)
    gtype = [""] * problem.n_gpus
    for o, n in zip(problem.cluster.node_offsets, problem.cluster.nodes, strict=True):
        gtype[o:o + n.gpus] = [n.gpu_type] * n.gpus
    H = problem.horizon_steps
    for i, s in enumerate(problem.services):
        if not s.typed_capacity:
            continue
        steps = place.get(s.service, ())
        for (k, ty), y in pm.y_cols.items():
            if k == i and not ty.startswith("~"):
                x[y] = [sum(1 for g in steps[t] if gtype[g] == ty) if t < len(steps) else 0 for t in range(H)]
                if (k, "~up:" + ty) in pm.y_cols:
                    d = np.diff(x[y])
                    x[pm.y_cols[(k, "~up:" + ty)]] = np.maximum(0.0, d)
                    x[pm.y_cols[(k, "~dn:" + ty)]] = np.maximum(0.0, -d)
        x[pm.u_cols[i]] = np.maximum(0.0, np.asarray(s.demand_gpus, dtype=np.float64) - served[s.service])


def master_vector(pm: PoolMaster, problem: Problem, plan: Plan) -> np.ndarray | None:
    """The master's column vector of a verified plan (a warm start); None when a start has no column."""
    x = np.zeros(pm.model.n_cols)
    index: dict[str, list[MasterVars]] = {}
    for v in pm.xs:
        index.setdefault(problem.jobs[v.job].job_id, []).append(v)
    for a in plan.assignments:
        if a.running or a.start_step is None or a.block_offset is None or a.gpus is None:
            continue
        hit = None
        for v in index.get(a.job_id, []):
            if v.gpus == a.gpus and v.blocks[a.block_offset // a.gpus]:
                k = np.searchsorted(v.starts, a.start_step)
                if k < len(v.starts) and v.starts[k] == a.start_step:
                    hit = int(v.cols[k])
                break
        if hit is None:
            return None
        x[hit] = 1.0
    if not set_service_values(pm.ctx, pm.a_cols, pm.u_cols, plan, x):  # type: ignore[arg-type]
        return None
    set_type_values(pm, problem, plan, x)
    return complete_guard(pm.model, pm.guard, x)


def pack_starts(problem: Problem, pm: PoolMaster, x: np.ndarray, svc: np.ndarray,
                capacity: Capacity) -> tuple[dict[str, tuple[int, int, int]], int, int]:
    """The master's starts on aligned blocks (module docstring): ``(starts, n_delayed, n_dropped)``.

    ``starts``: job_id -> (start_step, block_offset, gpus); ``svc`` (S, H) the services' GPUs (counts).
    """
    board = Board(problem, svc, capacity)
    chosen = [(int(t), v) for v in pm.xs for t in v.starts[np.rint(x[v.cols]) > 0.5].tolist()]
    chosen.sort(key=lambda tv: (tv[0], -tv[1].gpus, tv[1].job))
    starts: dict[str, tuple[int, int, int]] = {}
    left = []
    for t, v in chosen:
        o = board.fit_at(t, v.gpus, v.duration, v.blocks)
        if o is None:
            left.append((t, v))
            continue
        board.place(t, o, v.gpus, v.duration)
        starts[problem.jobs[v.job].job_id] = (t, o, v.gpus)
    delayed = dropped = 0
    for t, v in left:
        job = problem.jobs[v.job]
        size = next(s for s in job.sizes if s.gpus == v.gpus)
        opts = block_options(problem, job, size)
        hit = board.fit_options(t, v.gpus, opts)
        if hit is not None:
            board.place(t, hit[0], v.gpus, hit[1])
            starts[job.job_id] = (t, hit[0], v.gpus)
            continue
        later = board.earliest_options(t + 1, v.gpus, opts)
        if later is None:
            dropped += 1
            continue
        board.place(later[0], later[1], v.gpus, later[2])
        starts[job.job_id] = (later[0], later[1], v.gpus)
        delayed += 1
    return starts, delayed, dropped


def build_typed_full_model(problem: Problem, u_star: np.ndarray, capacity: Capacity) -> BuiltModel:
    """The block-level model on a typed cluster: :mod:`optimizer.milp`'s full model with typed start variables.

    ``x[j, s, o, t]`` only on the eligible aligned blocks of each type (:func:`optimizer.eligibility.block_options`)
    with that type's duration and reward; one group per job (jobs with types are not interchangeable); the other
    families as in :func:`optimizer.milp.build_model`, the starvation guard included (``max_wait_steps``).
    """
    t0 = time.perf_counter()
    H = problem.horizon_steps
    ctx = make_context(problem, u_star, capacity)
    ctx.groups = [[k] for k in range(len(problem.jobs))]
    blocked = ctx.blocked
    P = np.zeros((H + 1, ctx.n_cells + 1), dtype=np.int64)
    P[1:, 1:] = blocked.astype(np.int64).cumsum(axis=0).cumsum(axis=1)
    gamma = problem.settings.decay_per_step
    b = ModelBuilder()
    xs: list[StartVars] = []
    for j, job in enumerate(problem.jobs):
        if job.release_step >= H:
            continue
        for s in job.sizes:
            for d, mask, _ty in block_options(problem, job, s):
                assert mask is not None
                offs = np.flatnonzero(mask) * s.gpus
                ts = np.arange(job.release_step, H)
                Os, T = (a.ravel() for a in np.meshgrid(offs, ts, indexing="ij"))
                te = np.minimum(T + d, H)
                us, ue = Os // ctx.unit, (Os + s.gpus) // ctx.unit
                keep = (P[te, ue] - P[T, ue] - P[te, us] + P[T, us]) == 0
                room = np.full(len(T), np.iinfo(np.int64).max)
                for dt in range(d):
                    st = T + dt
                    inh = st < H
                    room[inh] = np.minimum(room[inh], ctx.batch_room[st[inh]])
                keep &= room >= s.gpus
                Os, T = Os[keep], T[keep]
                if not len(Os):
                    continue
                q = job.priority / ctx.priority_scale
                reward = q * s.efficiency * s.gpus * (s.duration_steps / d) * run_decay(gamma, T, d)
                cols = b.add_cols(reward, 0.0, 1.0, integer=True)
                xs.append(StartVars(j, s.gpus, d, s.efficiency, Os, T, cols))
    cov = add_no_preemption(ctx, xs)
    a_cols, u_cols = add_demand_band(b, ctx)
    add_real_time_first(b, ctx, u_cols)
    add_one_task_per_gpu(b, ctx, cov, a_cols)
    add_start_once(b, ctx, xs)
    add_swap_cap(b, ctx, a_cols)
    guard = add_max_wait(b, ctx, xs)
    return BuiltModel(ctx, b.model(), xs, a_cols, u_cols, time.perf_counter() - t0, dict(b.row_families), guard)


def block_model_binaries(problem: Problem) -> int:
    """An upper bound on the block-level model's start binaries, from the problem alone (before building it).

    Eligible aligned blocks × starts from release to the horizon, per job, size and type.
    """
    H = problem.horizon_steps
    return sum(int(mask.sum()) * max(0, H - j.release_step) for j in problem.jobs for s in j.sizes
               for _d, mask, _t in block_options(problem, j, s) if mask is not None)


class TypedMilpRun(MilpRun):
    """One ``milp`` plan of a typed problem (module docstring).

    Baselines and greedy starts as :class:`MilpRun`, then the pool master, packing with repair, and the
    block-level model when it is small.
    """

    def plan(self) -> Plan:
        """The stages of the module docstring; every answer verified and never below the best baseline."""
        self.baselines()
        self.greedy_starts()
        b, st = self.budget, self.settings
        if b.left() < MIN_SOLVE_S:
            return self.out_of_time("the pool master was built")
        pm = build_pool_master(self.problem, self.u_star, self.capacity)
        self.size = dict(pm.size, method="pools", pools=len(pools(self.problem)))
        b.took("pool master build")
        b.kill_at = b.deadline - finish_reserve_s(pm.model.n_cols)
        if b.room() < MIN_SOLVE_S:
            return self.out_of_time("the pool master solve")
        self.lp_stage(pm)
        self.best = self.seeds[0]
        lp_gap = mip_gap(self.best.objective, self.lp_bound) if self.rt_first(self.best) else None
        w_auto = b.work_limit(pm.model.n_cols)
        if lp_gap is not None and (lp_gap <= st.mip_rel_gap or w_auto == 0):
            why = ("within mip_rel_gap" if lp_gap <= st.mip_rel_gap else
                   f"the work budget for time_limit_s={st.time_limit_s:g} does not cover the root node of a pool "
                   f"master of {pm.model.n_cols:,} columns (auto_work_limit 0: no branch-and-bound)")  # work mode only
            return self.bounded(self.best, self.lp_bound, "pool master LP relaxation", why)
        start = next((x for x in (master_vector(pm, self.problem, s) for s in self.seeds) if x is not None), None)
        hl, kill = b.limits()
        work = self.full_work_limit(pm.model.n_cols)  # None in budget "time": the clock decides (DESIGN §5)
        self.size["mip_work_limit"] = work
        out = solve(pm.model, time_limit_s=hl, mip_rel_gap=st.mip_rel_gap, threads=st.threads,
                    random_seed=st.random_seed, start=start, mip_work_limit=work, kill_after_s=kill,
                    allow_restart=False)
        b.solves.append(out)
        self.size.update(mip_checks=out.work, mip_nodes=out.nodes)
        b.took("pool master solve")
        self.bound = min_bound(self.lp_bound, None if out.bound is None else out.bound * self.scale)
        self.best = self.seeds[0]
        if out.x is not None and out.status in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT):
            svc = np.rint(out.x[pm.a_cols]).astype(np.int64) if pm.a_cols.size else \
                np.zeros((0, self.problem.horizon_steps), np.int64)
            if len(self.problem.services):
                svc = np.minimum(svc, self.capacity.need)
            starts, delayed, dropped = pack_starts(self.problem, pm, out.x, svc, self.capacity)
            b.took("packing on nodes")
            if delayed or dropped:
                self.notes.append(f"pools: {delayed} start(s) of the pool master did not fit a block of their "
                                  f"class and were delayed, {dropped} left unstarted (repair, DESIGN §5)")
            packed, _why = self.finish(out, starts, svc, PlanSource.DECOMPOSITION, bound=self.bound)
            if packed is not None and not self.worse(packed, self.best):
                self.best = packed
        elif self.bound is None:
            return self.fallback(out.status, out.message or str(out.status))
        gap = mip_gap(self.best.objective, self.bound) if self.rt_first(self.best) else None
        if (gap is None or gap > st.mip_rel_gap) and b.left() >= MIN_SOLVE_S:
            full = self.typed_full_model()
            if full is not None and not self.worse(full, self.best):
                return full
        if self.best.planner == "milp":
            return self._gap_status(self.best)
        return self.bounded(self.best, self.bound, "pool master", "the best verified plan under the pool master")

    def greedy_deadline(self) -> float:
        """The ``perf_counter`` time after which no greedy order is started or job placed (:data:`GREEDY_SHARE`)."""
        b = self.budget
        return min(b.deadline - MIN_SOLVE_S, time.perf_counter() + GREEDY_SHARE * max(0.0, b.left()))

    def greedy_starts(self) -> None:
        """:meth:`MilpRun.greedy_starts` with the greedy plans cut at :meth:`greedy_deadline` (the pool master's time)."""
        b, problem = self.budget, self.problem
        until = self.greedy_deadline()
        greedy = greedy_plans(problem, until, self.capacity)
        self.seeds = [self.base] + [g for g in greedy if not verify(g, problem)]
        b.past("greedy warm starts", until)
        ws = self.warm_start
        if ws is not None and not verify(ws, problem):  # valued again on this problem, as MilpRun does
            self.seeds.append(replace(ws, objective=objective_value(ws, problem)))
        self.rank_seeds()
        b.took("greedy warm starts")

    def lp_stage(self, pm: PoolMaster) -> None:
        """The master's LP relaxation (a proven bound) and the plan rounded from it (a start), to their end."""
        b, st, problem = self.budget, self.settings, self.problem
        hl, kill = b.limits()
        lp = solve(replace(pm.model, integer=np.zeros(pm.model.n_cols, dtype=bool)), time_limit_s=hl,
                   mip_rel_gap=0.0, threads=st.threads, random_seed=st.random_seed, kill_after_s=kill)
        b.solves.append(lp)
        b.took("pool master LP")
        if lp.status != SolveStatus.OPTIMAL or lp.objective is None or lp.x is None:
            return
        self.lp_bound = lp.objective * self.scale
        frac = np.zeros(len(problem.jobs))
        mean = np.zeros(len(problem.jobs))
        for v in pm.xs:
            f = lp.x[v.cols]
            frac[v.job] += f.sum()
            mean[v.job] += (f * v.starts).sum()
        fr = [float(x) for x in frac]
        ms = [float(m) / max(f, 1e-9) for m, f in zip(mean, fr, strict=True)]
        order = sorted(range(len(problem.jobs)), key=lambda j: (-round(fr[j], 6), ms[j], problem.jobs[j].job_id))
        svc = reserved_service_gpus(problem, demand_following_target(problem), self.capacity)
        g = greedy_place(problem, svc, [problem.jobs[j] for j in order if frac[j] > 1e-6], "lp_guided",
                         deadline=b.kill_at, capacity=self.capacity)
        if not verify(g, problem):
            self.seeds.append(g)
            self.rank_seeds()
        b.took("LP rounding")

    def typed_full_model(self) -> Plan | None:
        """The block-level model when at most ``full_model_max_binaries`` binaries; its plan or None."""
        st, b = self.settings, self.budget
        if any(s.typed_capacity for s in self.problem.services):
            self.notes.append("pools: a service with per-type capacity: the block-level model (one GPU serves one "
                              "demand GPU) is not built; kept the best verified plan under the pool master's bound")
            return None
        n_bin = block_model_binaries(self.problem)
        if n_bin > st.full_model_max_binaries:
            self.notes.append(f"pools: the block-level model ({n_bin} binaries) is above full_model_max_binaries="
                              f"{st.full_model_max_binaries}: kept the best verified plan under the pool master's bound")
            return None
        bm = build_typed_full_model(self.problem, self.u_star, self.capacity)
        b.took("block model build")
        if b.left() < MIN_SOLVE_S:
            return None
        start = next((x for x in (plan_to_vector(bm, s) for s in [self.best, *self.seeds]) if x is not None), None)
        reserve = finish_reserve_s(bm.model.n_cols)
        out = solve(bm.model, time_limit_s=max(0.05, b.left() - reserve - 0.5), mip_rel_gap=st.mip_rel_gap,
                    threads=st.threads, random_seed=st.random_seed, start=start,
                    mip_work_limit=self.full_work_limit(bm.model.n_cols), kill_after_s=max(0.05, b.left() - reserve))
        b.solves.append(out)
        b.took("block model solve")
        if out.x is None or out.status not in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT):
            return None
        starts, svc = solution_starts(bm, out.x)
        self.size = dict(self.size or {}, block_model=bm.size["cols"])
        plan_, _why = self.finish(out, starts, svc, PlanSource.MILP)
        if plan_ is None or verify(plan_, self.problem):
            return None
        if self.bound is not None and out.bound is not None:
            bound = min(self.bound, out.bound * self.scale)
            plan_ = replace(plan_, bound=bound, gap=mip_gap(plan_.objective, bound))
        return self._gap_status(plan_)

    def _gap_status(self, p: Plan) -> Plan:
        """``p`` with status ``optimal`` exactly when its gap to its bound is within ``mip_rel_gap``.

        A master solved to optimality does not prove its packed plan optimal: only the gap does.
        """
        gap = mip_gap(p.objective, p.bound) if p.bound is not None else None
        ok = gap is not None and gap <= self.settings.mip_rel_gap
        status = SolveStatus.OPTIMAL if ok else SolveStatus.TIME_LIMIT
        return replace(p, status=status, gap=gap, notes=tuple(self.notes))
