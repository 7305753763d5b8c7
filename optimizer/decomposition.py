"""Exact decomposition of the §5 MILP: a count master (when, which size) + a block-packing check.

The §5 objective does not depend on block offsets, only on each job's start and size. So:

1. **Master** (:func:`build_count_model`): the §5 model with ``y[g, s, t]`` (start at t with
   size s, no offset) instead of ``x[g, s, o, t]``. The one-task-per-GPU rows are replaced by
   relaxations that hold for every valid placement: per step, batch GPUs + real-time GPUs <= GPUs
   up (exact, as in the full model); and per step and block size b > 1, jobs of size >= b use
   at most as many aligned b-blocks as are free of running jobs and down GPUs. Both count a job
   through running-count columns ``r`` (how many starts of a group and size cover a step,
   :func:`add_running_counts`), so the nonzeros grow with the horizon, not with horizon x
   duration. Starts for which
   no aligned block is free of fixed occupancy over the whole run are not created. Every other
   family (demand band, start once, swap cap, max-wait rows) is the same function as in
   :mod:`optimizer.milp`. Its optimum is therefore an upper bound on the full model's.
2. **Packing** (:func:`pack_offsets`): give the chosen (job, start, size) aligned offsets with no
   GPU used twice at any step: first fit by decreasing size, then a small feasibility MILP.

If packing succeeds, the master's solution is a valid plan with the master's objective, and the
master's dual bound is a valid bound for the full model (so "optimal" means optimal for §5).
If it fails, :func:`optimizer.planners.plan` solves the full model instead when it has at most
``settings.full_model_max_binaries`` binaries; above that it keeps the best verified placement the
master admits (:func:`master_guided_plan`, the warm starts; :func:`master_admits`) under the
master's bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from optimizer.baselines import demand_following_target, greedy_place, reserved_service_gpus
from optimizer.capacity import Capacity
from optimizer.milp import (
    Context,
    Coverage,
    GuardCols,
    ModelBuilder,
    StartVars,
    add_demand_band,
    add_gpu_count,
    add_max_wait,
    add_real_time_first,
    add_start_once,
    add_surprise_reserve,
    add_swap_cap,
    assign_group_members,
    complete_guard,
    make_context,
    model_size,
    non_preemptible_sets,
    set_service_values,
)
from optimizer.objective import run_decay
from optimizer.plan import Plan
from optimizer.problem import Problem
from optimizer.reserve import surprise_room
from optimizer.solver import SolveOutcome, SparseModel, check_solution, solve


def free_blocks(occ: np.ndarray, size: int) -> np.ndarray:
    """(H, n_gpus // size) bool: aligned block k of ``size`` GPUs entirely free at step t."""
    H, N = occ.shape
    return np.asarray(~occ.reshape(H, N // size, size).any(axis=2))


def add_count_starts(b: ModelBuilder, ctx: Context, occ: np.ndarray) -> list[StartVars]:
    """Start counts y[g, s, t] in 0..|g| (offsets -1): release, batch room and "some aligned block is free of fixed occupancy for the whole run" prune the starts.

    Objective: the §5 reward in units of the largest priority (as :func:`optimizer.milp.add_power_of_two_blocks`).
    """
    p = ctx.problem
    H = p.horizon_steps
    out: list[StartVars] = []
    cum_cache: dict[int, np.ndarray] = {}
    for gi, members in enumerate(ctx.groups):
        job = p.jobs[members[0]]
        if job.release_step >= H:
            continue
        for s in job.sizes:
            if s.gpus not in cum_cache:
                blocked = (~free_blocks(occ, s.gpus)).astype(np.int64)
                cum_cache[s.gpus] = np.vstack([np.zeros((1, blocked.shape[1]), np.int64), blocked.cumsum(axis=0)])
            cum = cum_cache[s.gpus]
            T = np.arange(job.release_step, H)
            te = np.minimum(T + s.duration_steps, H)
            any_free = ((cum[te] - cum[T]) == 0).any(axis=1)
            room_min = np.full(len(T), np.iinfo(np.int64).max)
            for dt in range(s.duration_steps):
                step = T + dt
                ok = step < H
                room_min[ok] = np.minimum(room_min[ok], ctx.batch_room[step[ok]])
            keep = any_free & (room_min >= s.gpus)
            T, te = T[keep], te[keep]
            if not len(T):
                continue
            q = job.priority / ctx.priority_scale  # in (0, 1]: units of the largest priority
            reward = q * s.efficiency * s.gpus * run_decay(p.settings.decay_per_step, T, s.duration_steps)
            # integer count of this group's jobs starting at t with this size (0..group size)
            cols = b.add_cols(reward, 0.0, float(len(members)), integer=True)
            out.append(StartVars(gi, s.gpus, s.duration_steps, s.efficiency, np.full(len(T), -1), T, cols))
    return out


#: Longest run (steps) whose start counts cover their steps directly in the master's capacity rows
#: (d nonzeros per start and row family); longer runs go through running-count columns
#: (:func:`add_running_counts`, 4 nonzeros per step). 0: every run through running counts. Measured
#: against each other on the same problems (benchmarks/bench_scale.py --formulation; DESIGN §5).
DIRECT_MAX_STEPS = 0


@dataclass
class RunningCount:
    """How one start-variable set covers the steps of its runs in the capacity rows.

    ``running`` True: running-count columns ``cols`` (n,), ``r[tau]`` for ``tau`` in ``steps`` (n,),
    the number of its starts whose run covers step tau. False (runs of at most
    :data:`DIRECT_MAX_STEPS` steps): ``steps`` and ``cols`` list every (step, start column) pair a
    run covers, the start counts themselves (from branch s13-budget).
    """

    steps: np.ndarray
    cols: np.ndarray
    running: bool = True


def add_running_counts(b: ModelBuilder, ctx: Context, ys: list[StartVars]) -> list[RunningCount]:
    """No preemption in the master: a start covers the d consecutive steps of its run, counted once per step.

    For each start-variable set (one group, one size, duration d) a column ``r[tau]`` per step of
    its span (first start .. last start + d, within the horizon) and the row
    ``r[tau] - r[tau-1] - y[tau] + y[tau-d] = 0`` (terms for starts that do not exist are left
    out), so ``r[tau] = Σ_{t in (tau-d, tau]} y[t]`` exactly. The capacity rows then hold one
    coefficient per set and step instead of d per start: the nonzeros grow with the horizon, not
    with horizon x duration (the master of ``day_1min_steps``, 30 jobs of 30–480 one-minute
    steps, went from 19.1 million nonzeros, which HiGHS presolve took over 60 s on whatever its
    time limit, to 0.24 million; case F05). The projection on ``y`` is the same polytope, so the
    LP bound and the optimum do not change. ``r`` is continuous in [0, group size].
    """
    H = ctx.problem.horizon_steps
    out: list[RunningCount] = []
    for v in ys:
        if v.duration <= DIRECT_MAX_STEPS:
            steps = v.starts[:, None] + np.arange(v.duration)[None, :]
            ok = steps < H
            out.append(RunningCount(steps[ok], np.broadcast_to(v.cols[:, None], steps.shape)[ok], running=False))
            continue
        k = len(ctx.groups[v.group])
        t0, t1 = int(v.starts[0]), min(int(v.starts[-1]) + v.duration, H)
        n = t1 - t0
        r = b.add_cols(np.zeros(n), 0.0, float(k), integer=False)
        rows = b.add_rows(np.zeros(n), np.zeros(n), "running_count")
        b.add_coeffs(rows, r, 1.0)
        b.add_coeffs(rows[1:], r[:-1], -1.0)
        b.add_coeffs(rows[v.starts - t0], v.cols, -1.0)
        ends = v.starts + v.duration
        inside = ends < t1
        b.add_coeffs(rows[ends[inside] - t0], v.cols[inside], 1.0)
        out.append(RunningCount(np.arange(t0, t1), r))
    return out


def running_values(v: StartVars, run: RunningCount, y: np.ndarray) -> np.ndarray:
    """``r`` (n,) implied by start counts ``y`` (k,) of ``v``: how many runs cover each step of ``run.steps``."""
    n = len(run.steps)
    t0 = int(run.steps[0]) if n else 0
    diff = np.zeros(n + 1)
    np.add.at(diff, v.starts - t0, y)
    ends = np.minimum(v.starts + v.duration - t0, n)
    np.add.at(diff, ends, -y)
    return np.cumsum(diff[:n])


def count_coverage(ys: list[StartVars], runs: list[RunningCount]) -> Coverage:
    """Batch GPUs per step in the master: ``gpus`` times each running count (for :func:`optimizer.milp.add_gpu_count`)."""
    z = np.zeros(0, dtype=np.int64)
    if not ys:
        return Coverage(z, z, z, z, np.zeros(0))
    return Coverage(z, z, np.concatenate([r.steps for r in runs]).astype(np.int64),
                    np.concatenate([r.cols for r in runs]).astype(np.int64),
                    np.concatenate([np.full(len(r.steps), float(v.gpus)) for v, r in zip(ys, runs, strict=True)]))


def add_block_levels(b: ModelBuilder, occ: np.ndarray, ys: list[StartVars], runs: list[RunningCount]) -> None:
    """Relaxed one-task-per-GPU: for each step and block size b > 1 used by some job, Σ_{sets of size s >= b} (s / b) · r[step] <= aligned b-blocks free at that step."""
    sizes = sorted({v.gpus for v in ys if v.gpus > 1})
    for bs in sizes:
        nfree = free_blocks(occ, bs).sum(axis=1).astype(np.float64)
        rr, cc, vv = [], [], []
        for v, run in zip(ys, runs, strict=True):
            if v.gpus < bs:
                continue
            rr.append(run.steps)
            cc.append(run.cols)
            vv.append(np.full(len(run.steps), float(v.gpus // bs)))
        if not rr:
            continue
        rows = b.add_rows(-np.inf, nfree, f"blocks_of_{bs}")
        b.add_coeffs(rows[np.concatenate(rr)], np.concatenate(cc), np.concatenate(vv))


@dataclass
class CountModel:
    """The master model with maps to read a solution back (``runs[i]`` are the running counts of ``ys[i]``)."""

    ctx: Context
    model: SparseModel
    ys: list[StartVars]
    a_cols: np.ndarray
    u_cols: np.ndarray
    occ: np.ndarray
    build_s: float
    runs: list[RunningCount] = field(default_factory=list)
    guard: GuardCols | None = None

    @property
    def size(self) -> dict[str, int]:
        """{rows, cols, binaries, integers} (start counts of a group of k > 1 jobs are 0..k integers)."""
        return model_size(self.model)

    @property
    def objective_scale(self) -> float:
        """The master's objective unit in the user's (the largest priority, DESIGN §5)."""
        return self.ctx.priority_scale


def build_count_model(problem: Problem, u_star: np.ndarray | None = None,
                      capacity: Capacity | None = None) -> CountModel:
    """Build the master model (see the module docstring); ``u_star``, ``capacity`` as in :func:`optimizer.milp.make_context`."""
    t0 = time.perf_counter()
    ctx = make_context(problem, u_star, capacity)
    occ = ctx.capacity.occupancy
    b = ModelBuilder()
    ys = add_count_starts(b, ctx, occ)
    runs = add_running_counts(b, ctx, ys)
    a_cols, u_cols = add_demand_band(b, ctx)
    add_real_time_first(b, ctx, u_cols)
    add_gpu_count(b, ctx, count_coverage(ys, runs), a_cols)
    add_block_levels(b, occ, ys, runs)
    np_sets = non_preemptible_sets(ctx, ys)
    add_surprise_reserve(b, ctx, count_coverage([v for v, f in zip(ys, np_sets, strict=True) if f],
                                                [r for r, f in zip(runs, np_sets, strict=True) if f]))
    add_start_once(b, ctx, ys)
    add_swap_cap(b, ctx, a_cols)
    guard = add_max_wait(b, ctx, ys)
    return CountModel(ctx, b.model(), ys, a_cols, u_cols, occ, time.perf_counter() - t0, runs=runs, guard=guard)


def count_vector(cm: CountModel, plan: Plan) -> np.ndarray | None:
    """Master column vector of a verified plan (warm start), or None when it does not map."""
    p = cm.ctx.problem
    x = np.zeros(cm.model.n_cols)
    index: dict[tuple[int, int, int], int] = {}
    for v in cm.ys:
        for t, c in zip(v.starts.tolist(), v.cols.tolist(), strict=True):
            index[(v.group, v.gpus, t)] = c
    group_of = {p.jobs[k].job_id: gi for gi, members in enumerate(cm.ctx.groups) for k in members}
    for a in plan.assignments:
        if a.running or a.start_step is None or a.gpus is None:
            continue
        c = index.get((group_of.get(a.job_id, -1), int(a.gpus), int(a.start_step)))
        if c is None:
            return None
        x[c] += 1.0
    for v, run in zip(cm.ys, cm.runs, strict=True):
        if run.running:
            x[run.cols] = running_values(v, run, x[v.cols])
    if not set_service_values(cm.ctx, cm.a_cols, cm.u_cols, plan, x):
        return None
    return complete_guard(cm.model, cm.guard, x)


def count_picks(cm: CountModel, x: np.ndarray) -> tuple[dict[str, tuple[int, int, int]], np.ndarray]:
    """``job_id -> (start_step, gpus, duration)`` and service GPUs (S, H) from a master solution."""
    p = cm.ctx.problem
    chosen: dict[int, list[tuple[int, int, int]]] = {}
    for v in cm.ys:
        n = np.rint(x[v.cols]).astype(np.int64)
        for t, k in zip(v.starts.tolist(), n.tolist(), strict=True):
            chosen.setdefault(v.group, []).extend([(t, v.gpus, v.duration)] * max(0, k))
    picks = assign_group_members(cm.ctx, chosen)
    svc = np.rint(x[cm.a_cols]).astype(np.int64) if cm.a_cols.size else np.zeros((0, p.horizon_steps), np.int64)
    return picks, svc


def pack_offsets(
    occ: np.ndarray, picks: dict[str, tuple[int, int, int]], time_limit_s: float = 5.0, seed: int = 0,
    threads: int = 1, mip_work_limit: int | None = None, log: list | None = None, milp: bool = True,
    kill_after_s: float | None = None,
) -> dict[str, int] | None:
    """Aligned offsets for fixed (start, gpus, duration) so that no GPU is used twice at a step.

    ``occ`` (H, N) fixed occupancy. First fit by decreasing size (then start, then id); if that
    fails and ``milp`` is True, a feasibility MILP over all aligned offsets. Returns
    ``job_id -> offset`` or None when no packing exists (or none was found within
    ``time_limit_s`` or ``mip_work_limit``, or first fit failed with ``milp`` False). The MILP is
    killed after ``kill_after_s`` wall seconds when given (:func:`optimizer.solver.solve`).
    The MILP's :class:`~optimizer.solver.SolveOutcome` is appended to ``log`` when given.
    """
    H, N = occ.shape
    grid = occ.copy()
    out: dict[str, int] = {}
    for jid, (t, s, d) in sorted(picks.items(), key=lambda kv: (-kv[1][1], kv[1][0], kv[0])):
        te = min(t + d, H)
        free = np.flatnonzero(~grid[t:te].reshape(te - t, N // s, s).any(axis=(0, 2)))
        if not len(free):
            break
        o = int(free[0]) * s
        grid[t:te, o : o + s] = True
        out[jid] = o
    else:
        return out
    if not milp:
        return None
    return _pack_milp(occ, picks, time_limit_s, seed, threads, mip_work_limit, log, kill_after_s)


def _pack_milp(occ: np.ndarray, picks: dict[str, tuple[int, int, int]], time_limit_s: float,
               seed: int, threads: int, mip_work_limit: int | None = None,
               log: list | None = None, kill_after_s: float | None = None) -> dict[str, int] | None:
    H, N = occ.shape
    b = ModelBuilder()
    items = sorted(picks.items())
    var_info: list[tuple[str, np.ndarray, np.ndarray]] = []
    cell_r, cell_c = [], []
    once = b.add_rows(np.ones(len(items)), np.ones(len(items)), "assign_once")
    for k, (jid, (t, s, d)) in enumerate(items):
        te = min(t + d, H)
        ok = np.flatnonzero(~occ[t:te].reshape(te - t, N // s, s).any(axis=(0, 2))) * s
        if not len(ok):
            return None
        cols = b.add_cols(np.zeros(len(ok)), 0.0, 1.0, integer=True)
        b.add_coeffs(once[k], cols, 1.0)
        var_info.append((jid, ok, cols))
        steps = np.arange(t, te)
        g = ok[:, None] + np.arange(s)[None, :]  # (k, s)
        cells = steps[None, :, None] * N + g[:, None, :]  # (k, d, s)
        cell_r.append(cells.ravel())
        cell_c.append(np.broadcast_to(cols[:, None, None], cells.shape).ravel())
    rr = np.concatenate(cell_r)
    used, inv = np.unique(rr, return_inverse=True)
    rows = b.add_rows(-np.inf, np.ones(len(used)), "one_task_per_gpu")
    b.add_coeffs(rows[inv], np.concatenate(cell_c), 1.0)
    out = solve(b.model(), time_limit_s=time_limit_s, mip_rel_gap=0.0, threads=threads, random_seed=seed,
                mip_work_limit=mip_work_limit, kill_after_s=kill_after_s)
    if log is not None:
        log.append(out)
    if out.x is None:
        return None
    res: dict[str, int] = {}
    for jid, offs, cols in var_info:
        on = np.flatnonzero(np.rint(out.x[cols]) > 0.5)
        if len(on) != 1:
            return None
        res[jid] = int(offs[on[0]])
    return res


def solve_master_lp(cm: CountModel, time_limit_s: float, kill_after_s: float | None = None) -> SolveOutcome:
    """The master's LP relaxation (every column continuous), solved with the problem's seed and threads.

    Its optimal value is an upper bound on the master's and so on every valid plan's objective
    (the master is a relaxation of the §5 model), in units of the largest priority
    (``cm.objective_scale``). ``kill_after_s``: see :func:`optimizer.solver.solve`.
    """
    st = cm.ctx.problem.settings
    lp = replace(cm.model, integer=np.zeros(cm.model.n_cols, dtype=bool))
    return solve(lp, time_limit_s=time_limit_s, mip_rel_gap=0.0, threads=st.threads, random_seed=st.random_seed,
                 kill_after_s=kill_after_s)


#: The job orders tried by :func:`lp_rounded_plans`, in this order (see there).
LP_ROUNDING_ORDERS: tuple[str, ...] = ("fraction", "mean_start", "value")


def lp_rounded_plans(cm: CountModel, x: np.ndarray, deadline: float | None = None) -> list[Plan]:
    """Round a master LP solution ``x`` (n,) into plans: jobs placed by :func:`optimizer.baselines.greedy_place` (demand-following services, earliest aligned fit) in the orders of :data:`LP_ROUNDING_ORDERS`.

    Per job, ``f`` is how much of it the LP starts (0..1, a group's starts shared among its members)
    and ``m`` its LP mean start step. Orders: ``fraction`` (f descending, then m, then id: the
    jobs the LP is sure of first); ``mean_start`` (m ascending for f >= 0.5, then the rest by f:
    the LP's timeline); ``value`` (f x the LP reward of the job per GPU-step, descending). A
    greedy placement of a job order is the classic rounding of a time-indexed LP by its start
    times (alpha-point rounding, Hall, Schulz, Shmoys and Wein 1997). Past ``deadline`` (a
    ``time.perf_counter()`` value) no further order is started. Unverified; the planner verifies.
    """
    p = cm.ctx.problem
    started: dict[str, float] = {}
    mean_t: dict[str, float] = {}
    value: dict[str, float] = {}
    for v in cm.ys:
        y = x[v.cols]
        members = cm.ctx.groups[v.group]
        reward = float((y * cm.model.cost[v.cols]).sum())
        for k in members:
            jid = p.jobs[k].job_id
            started[jid] = started.get(jid, 0.0) + float(y.sum()) / len(members)
            mean_t[jid] = mean_t.get(jid, 0.0) + float((y * v.starts).sum()) / len(members)
            value[jid] = value.get(jid, 0.0) + reward / len(members) / max(1, v.gpus * v.duration)

    def f(j) -> float:
        return round(started.get(j.job_id, 0.0), 3)

    def m(j) -> float:
        s = started.get(j.job_id, 0.0)
        return mean_t.get(j.job_id, 0.0) / s if s > 1e-9 else float("inf")

    keys = {
        "fraction": lambda j: (-f(j), m(j), j.job_id),
        "mean_start": lambda j: (f(j) < 0.5, m(j) if f(j) >= 0.5 else -f(j), j.job_id),
        "value": lambda j: (-round(value.get(j.job_id, 0.0), 9), m(j), j.job_id),
    }
    svc = reserved_service_gpus(p, demand_following_target(p), cm.ctx.capacity)
    out: list[Plan] = []
    for name in LP_ROUNDING_ORDERS:
        if deadline is not None and time.perf_counter() >= deadline:
            break
        out.append(greedy_place(p, svc, sorted(p.jobs, key=keys[name]), planner="lp_guided", deadline=deadline,
                                capacity=cm.ctx.capacity, np_room=cm.ctx.np_room))
    return out


def lp_guided_plan(cm: CountModel, time_limit_s: float = 2.0, log: list | None = None) -> Plan | None:
    """A warm-start candidate from the master's LP relaxation (:func:`solve_master_lp`), rounded in the ``fraction`` order of :func:`lp_rounded_plans`.

    None when the LP does not solve in time. Unverified; the planner verifies before use. The LP's
    :class:`~optimizer.solver.SolveOutcome` is appended to ``log`` when given.
    """
    out = solve_master_lp(cm, time_limit_s)
    if log is not None:
        log.append(out)
    if out.x is None:
        return None
    p = cm.ctx.problem
    started: dict[str, float] = {}
    mean_t: dict[str, float] = {}
    for v in cm.ys:
        y = out.x[v.cols]
        members = cm.ctx.groups[v.group]
        for k in members:
            jid = p.jobs[k].job_id
            started[jid] = started.get(jid, 0.0) + float(y.sum()) / len(members)
            mean_t[jid] = mean_t.get(jid, 0.0) + float((y * v.starts).sum()) / len(members)

    def key(j):
        f = started.get(j.job_id, 0.0)
        return (-round(f, 3), mean_t.get(j.job_id, 0.0) / f if f > 1e-9 else float("inf"), j.job_id)

    svc = reserved_service_gpus(p, demand_following_target(p), cm.ctx.capacity)
    return greedy_place(p, svc, sorted(p.jobs, key=key), planner="lp_guided", capacity=cm.ctx.capacity,
                        np_room=cm.ctx.np_room)


def master_guided_plan(problem: Problem, picks: dict[str, tuple[int, int, int]], service_gpus: np.ndarray,
                       capacity: Capacity | None = None) -> Plan:
    """A repair of a master solution that could not be packed: services at the master's ``service_gpus`` (S, H); the master's picked jobs (``job_id -> (start, gpus, duration)``) placed first, by master start, then larger first, then id; then the jobs the master left out; each by :func:`optimizer.baselines.greedy_place` at its earliest aligned fit.

    Unverified; the planner verifies before use. ``capacity``: :meth:`optimizer.capacity.Capacity.of` of ``problem``
    when the caller has it. Non-preemptible jobs keep the surprise reserve (:func:`optimizer.reserve.surprise_room`).
    """
    far = problem.horizon_steps

    def key(j):
        t, g, _d = picks.get(j.job_id, (far, 0, 0))
        return (j.job_id not in picks, t, -g, j.job_id)

    return greedy_place(problem, np.asarray(service_gpus), sorted(problem.jobs, key=key), planner="master_guided",
                        capacity=capacity, np_room=surprise_room(problem))


def master_admits(cm: CountModel, plan: Plan) -> bool:
    """True when ``plan``'s starts and service allocations are a feasible point of the master (every row: demand band, start once, swap cap, max-wait, block levels; column bounds).

    The master is a relaxation of the full model, so its dual bound bounds exactly these plans.
    The starvation guard's auxiliary columns are filled from the plan (:func:`optimizer.milp.complete_guard`).
    """
    x = count_vector(cm, plan)
    if x is None:
        return False
    obj = float(np.dot(cm.model.cost, x) + cm.model.offset)
    return check_solution(cm.model, x, obj) == ""
