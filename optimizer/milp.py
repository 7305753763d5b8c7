"""The allocation MILP of DESIGN §5, built as sparse arrays and solved with HiGHS.

Variables
- ``x[g, s, o, t]`` binary: a job of group ``g`` starts at step ``t`` with ``s`` GPUs on the
  aligned block ``o .. o+s-1`` (``o % s == 0``). Interchangeable jobs (same priority, release
  and sizes, :func:`optimizer.diagnose.job_groups`) share one set of start variables with
  "at most k starts"; ids are handed to the chosen starts in file order afterwards.
- ``a[i, t]`` integer GPUs of service ``i``; ``u[i, t] >= 0`` its unmet demand.

Constraint families, one builder function each:
``add_power_of_two_blocks`` (3: contiguous aligned power-of-two blocks, by construction of x),
``add_no_preemption`` (5: a start covers d consecutive steps on its block; running jobs and
down GPUs are fixed occupancy), ``add_one_task_per_gpu`` (1: at most one task per GPU cell and
step, and batch + real-time GPUs <= GPUs up per step), ``add_demand_band`` (2: band,
``a + u >= D``), ``add_start_once`` (2: each job at most once, at or after release, one size),
``add_swap_cap`` (4: ``|a_t - a_{t-1}| <= c`` from ``current_gpus``).

Objective (maximise), exactly DESIGN §5 in units of the largest priority ``P = max_j p_j``
(case F01: the coefficients do not depend on the priorities' units):
``Σ x · (p_j / P) · e_{j,s} · s · Σ_{τ=t}^{min(t+d,H)-1} γ^τ − Σ κ · u`` (``w / P = κ``).
The model's objective and bound times ``P`` (:attr:`BuiltModel.objective_scale`) are the §5
objective in the user's units.
With ``settings.max_wait_steps`` set, :func:`add_max_wait` adds the no-overtaking rows (the
objective stays exactly §5).

Pruning (exact, nothing optimal is lost):
- starts ``t < release_step`` are not created; starts after the last step (job not started in
  the horizon) are represented by all its x being 0. A start near the end whose run extends
  past the horizon is kept: it earns its in-horizon steps and holds its block beyond the
  horizon (occupancy after the horizon is not modelled).
- blocks touching a down GPU, and starts whose run would overlap a running job's block while
  it still runs, are not created;
- a start whose size exceeds, at some step of its run, the GPUs left after running jobs and
  the services' smallest valid allocation (:func:`optimizer.capacity.service_bounds`) is not
  created;
- GPU cells: rows are per block of the smallest queued size (GPUs inside one such block are
  interchangeable for every start variable).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from optimizer.capacity import fixed_occupancy, running_gpus_per_step, service_bounds, up_gpus
from optimizer.diagnose import job_groups
from optimizer.plan import Plan
from optimizer.problem import Problem
from optimizer.solver import SolveOutcome, SparseModel, solve


class ModelBuilder:
    """Accumulates columns, rows and coefficients; :meth:`model` returns a :class:`SparseModel`."""

    def __init__(self) -> None:
        self._cost: list[np.ndarray] = []
        self._lo: list[np.ndarray] = []
        self._hi: list[np.ndarray] = []
        self._int: list[np.ndarray] = []
        self._rlo: list[np.ndarray] = []
        self._rhi: list[np.ndarray] = []
        self._r: list[np.ndarray] = []
        self._c: list[np.ndarray] = []
        self._v: list[np.ndarray] = []
        self.n_cols = 0
        self.n_rows = 0
        self.row_families: dict[str, int] = {}

    def add_cols(self, cost, lower, upper, integer: bool) -> np.ndarray:
        """Add columns; returns their indices (n,)."""
        cost = np.asarray(cost, dtype=np.float64).ravel()
        n = len(cost)
        self._cost.append(cost)
        self._lo.append(np.broadcast_to(np.asarray(lower, dtype=np.float64), (n,)).copy())
        self._hi.append(np.broadcast_to(np.asarray(upper, dtype=np.float64), (n,)).copy())
        self._int.append(np.full(n, integer, dtype=bool))
        idx = np.arange(self.n_cols, self.n_cols + n)
        self.n_cols += n
        return idx

    def add_rows(self, lower, upper, family: str) -> np.ndarray:
        """Add rows with bounds; returns their indices (m,). ``family`` names the constraint group."""
        upper = np.asarray(upper, dtype=np.float64).ravel()
        m = len(upper)
        self._rlo.append(np.broadcast_to(np.asarray(lower, dtype=np.float64), (m,)).copy())
        self._rhi.append(upper)
        idx = np.arange(self.n_rows, self.n_rows + m)
        self.n_rows += m
        self.row_families[family] = self.row_families.get(family, 0) + m
        return idx

    def add_coeffs(self, rows, cols, vals) -> None:
        """Add matrix entries (rows, cols, vals broadcast together)."""
        r, c, v = np.broadcast_arrays(np.asarray(rows), np.asarray(cols), np.asarray(vals, dtype=np.float64))
        self._r.append(r.ravel().astype(np.int64))
        self._c.append(c.ravel().astype(np.int64))
        self._v.append(v.ravel())

    def add_cost(self, cols, vals) -> None:
        """Add to existing columns' objective coefficients."""
        cost = np.concatenate(self._cost) if self._cost else np.zeros(0)
        np.add.at(cost, np.asarray(cols, dtype=np.int64), np.asarray(vals, dtype=np.float64))
        self._cost = [cost]

    def model(self) -> SparseModel:
        """The :class:`~optimizer.solver.SparseModel` of every column and row added so far (CSC matrix)."""
        cat = lambda xs, dt=np.float64: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt)  # noqa: E731
        A = sparse.coo_matrix(
            (cat(self._v), (cat(self._r, np.int64), cat(self._c, np.int64))), shape=(self.n_rows, self.n_cols)
        ).tocsc()
        return SparseModel(
            cost=cat(self._cost), col_lower=cat(self._lo), col_upper=cat(self._hi), integer=cat(self._int, bool),
            A=A, row_lower=cat(self._rlo), row_upper=cat(self._rhi), maximize=True,
        )


@dataclass
class StartVars:
    """Start variables of one job group and one size: arrays of shape (k,)."""

    group: int
    gpus: int
    duration: int
    efficiency: float
    offsets: np.ndarray
    starts: np.ndarray
    cols: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass
class Context:
    """Shared data for the builder functions."""

    problem: Problem
    groups: list[list[int]]
    unit: int  # GPUs per cell (smallest queued size)
    n_cells: int  # cells per step
    blocked: np.ndarray  # (H, n_cells) bool: cell held by a running job or down at that step
    batch_room: np.ndarray  # (H,) GPUs batch may use at most, after running jobs and min real-time
    L: np.ndarray  # (S, H) smallest valid service allocation
    U: np.ndarray  # (S, H) largest valid service allocation
    decay_cum: np.ndarray  # (H+1,) prefix sums of gamma^tau
    priority_scale: float  # P = max priority: the model's objective unit (DESIGN §5)


def make_context(problem: Problem) -> Context:
    """The shared arrays of one model build: job groups, GPU cells, fixed occupancy, batch room, service bounds, decay sums."""
    H, N = problem.horizon_steps, problem.n_gpus
    groups = job_groups(problem)
    unit = min((s.gpus for j in problem.jobs for s in j.sizes), default=N)
    n_cells = N // unit
    gpu_blocked = fixed_occupancy(problem)
    blocked = np.asarray(gpu_blocked.reshape(H, n_cells, unit).any(axis=2))
    L, U = service_bounds(problem)
    room = up_gpus(problem) - running_gpus_per_step(problem) - (L.sum(axis=0) if len(L) else 0)
    g = problem.settings.decay_per_step
    decay_cum = np.concatenate([[0.0], np.cumsum(g ** np.arange(H, dtype=np.float64))])
    return Context(problem, groups, unit, n_cells, blocked, np.asarray(room), L, U, decay_cum,
                   problem.max_priority())


# ----------------------------------------------------------------------------- families


def add_power_of_two_blocks(b: ModelBuilder, ctx: Context) -> list[StartVars]:
    """Constraint 3 (contiguous power-of-two blocks), by construction: create x only for aligned blocks ``o = 0, s, 2s, ...`` of each allowed size and starts ``t >= release_step``, pruned as described in the module docstring.

    Objective coefficients are the §5 rewards.
    """
    p = ctx.problem
    H, N = p.horizon_steps, p.n_gpus
    P = np.zeros((H + 1, ctx.n_cells + 1), dtype=np.int64)  # 2-D prefix sums of blocked cells
    P[1:, 1:] = ctx.blocked.astype(np.int64).cumsum(axis=0).cumsum(axis=1)
    out: list[StartVars] = []
    for gi, members in enumerate(ctx.groups):
        job = p.jobs[members[0]]
        for s in job.sizes:
            if job.release_step >= H:
                continue
            offs = np.arange(0, N, s.gpus)
            ts = np.arange(job.release_step, H)
            Os, T = (a.ravel() for a in np.meshgrid(offs, ts, indexing="ij"))
            te = np.minimum(T + s.duration_steps, H)
            us, ue = Os // ctx.unit, (Os + s.gpus) // ctx.unit
            n_blocked = P[te, ue] - P[T, ue] - P[te, us] + P[T, us]
            keep = n_blocked == 0
            # batch room: size must fit at every step of the run
            room_min = np.full(len(T), np.iinfo(np.int64).max)
            for dt in range(s.duration_steps):
                step = T + dt
                ok = step < H
                room_min[ok] = np.minimum(room_min[ok], ctx.batch_room[step[ok]])
            keep &= room_min >= s.gpus
            Os, T, te = Os[keep], T[keep], te[keep]
            if not len(Os):
                continue
            q = job.priority / ctx.priority_scale  # in (0, 1]: units of the largest priority
            reward = q * s.efficiency * s.gpus * (ctx.decay_cum[te] - ctx.decay_cum[T])
            cols = b.add_cols(reward, 0.0, 1.0, integer=True)
            out.append(StartVars(gi, s.gpus, s.duration_steps, s.efficiency, Os, T, cols))
    return out


@dataclass
class Coverage:
    """Which (cell, step) and which step each start variable occupies (COO arrays)."""

    cell_rows: np.ndarray  # flat cell index t * n_cells + c
    cell_cols: np.ndarray
    step_rows: np.ndarray  # step index
    step_cols: np.ndarray
    step_vals: np.ndarray  # GPUs


def add_no_preemption(ctx: Context, xs: list[StartVars]) -> Coverage:
    """Constraint 5 (no preemption): a start at t holds its whole block for the d consecutive steps t .. t+d-1 (within the horizon), never fewer and never moved; running jobs and down GPUs are fixed occupancy (already excluded from x, and counted in the per-step capacity).

    Returns the coverage used by :func:`add_one_task_per_gpu`.
    """
    H = ctx.problem.horizon_steps
    cr, cc, sr, sc, sv = [], [], [], [], []
    for v in xs:
        nu = v.gpus // ctx.unit
        dt = np.arange(v.duration)
        steps = v.starts[:, None] + dt[None, :]  # (k, d)
        ok = steps < H
        cells = (v.offsets // ctx.unit)[:, None] + np.arange(nu)[None, :]  # (k, nu)
        flat = steps[:, :, None] * ctx.n_cells + cells[:, None, :]  # (k, d, nu)
        okc = np.broadcast_to(ok[:, :, None], flat.shape)
        colc = np.broadcast_to(v.cols[:, None, None], flat.shape)
        cr.append(flat[okc])
        cc.append(colc[okc])
        cols2 = np.broadcast_to(v.cols[:, None], steps.shape)
        sr.append(steps[ok])
        sc.append(cols2[ok])
        sv.append(np.full(int(ok.sum()), float(v.gpus)))
    cat = lambda a: np.concatenate(a) if a else np.zeros(0)  # noqa: E731
    return Coverage(cat(cr).astype(np.int64), cat(cc).astype(np.int64), cat(sr).astype(np.int64),
                    cat(sc).astype(np.int64), cat(sv))


def add_demand_band(b: ModelBuilder, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Constraint 2 for services: integer ``a[i,t]`` in the band (tightened to the valid range ``[L, U]``), integer ``u[i,t] in [0, D]`` with cost ``-w / P = -κ`` (model units), and rows ``a + u >= D``.

    With ``demand_hard`` the unmet slack is fixed at 0. Returns (a_cols, u_cols), each (S, H).
    """
    p = ctx.problem
    H, S = p.horizon_steps, len(p.services)
    if S == 0:
        e = np.zeros((0, H), dtype=np.int64)
        return e, e
    D = np.array([s.demand_gpus for s in p.services], dtype=np.float64)
    a = b.add_cols(np.zeros(S * H), ctx.L.ravel(), ctx.U.ravel(), integer=True).reshape(S, H)
    w = p.unmet_penalty() / ctx.priority_scale  # = κ: the penalty stays relative to the largest priority
    u_hi = np.zeros_like(D) if p.settings.demand_hard else D
    # u is declared integer (exact: D and a are integers). As a continuous column singleton,
    # HiGHS 1.16 presolve mishandled a start solution with a > D (it priced u = D - a < 0 and
    # returned the start as "optimal" with a wrong objective).
    u = b.add_cols(np.full(S * H, -w), 0.0, u_hi.ravel(), integer=True).reshape(S, H)
    rows = b.add_rows(D.ravel(), np.full(S * H, np.inf), "demand_band").reshape(S, H)
    b.add_coeffs(rows, a, 1.0)
    b.add_coeffs(rows, u, 1.0)
    return a, u


def add_one_task_per_gpu(b: ModelBuilder, ctx: Context, cov: Coverage, a_cols: np.ndarray) -> None:
    """Constraint 1: for every GPU cell and step, starts covering it sum to <= 1 (cells held by running jobs or down GPUs have no start variables at all); and :func:`add_gpu_count`."""
    if len(cov.cell_rows):
        used, inv = np.unique(cov.cell_rows, return_inverse=True)
        rows = b.add_rows(-np.inf, np.ones(len(used)), "one_task_per_gpu")
        b.add_coeffs(rows[inv], cov.cell_cols, 1.0)
    add_gpu_count(b, ctx, cov, a_cols)


def add_gpu_count(b: ModelBuilder, ctx: Context, cov: Coverage, a_cols: np.ndarray) -> None:
    """Constraint 1, counting part: for every step, batch GPUs in use plus real-time GPUs <= GPUs up minus running jobs' GPUs (real-time GPUs need no contiguity, so counting is exact)."""
    p = ctx.problem
    cap = (up_gpus(p) - running_gpus_per_step(p)).astype(np.float64)
    rows = b.add_rows(-np.inf, cap, "gpu_count")
    if len(cov.step_rows):
        b.add_coeffs(rows[cov.step_rows], cov.step_cols, cov.step_vals)
    if a_cols.size:
        b.add_coeffs(np.broadcast_to(rows[None, :], a_cols.shape), a_cols, 1.0)


def add_start_once(b: ModelBuilder, ctx: Context, xs: list[StartVars]) -> None:
    """Constraint 2 for jobs: each job starts at most once, with one of its sizes (a group of k interchangeable jobs: at most k starts).

    Release times are enforced by construction.
    """
    if not xs:
        return
    n = len(ctx.groups)
    rows = b.add_rows(-np.inf, np.array([len(g) for g in ctx.groups], dtype=np.float64), "start_once")
    for v in xs:
        b.add_coeffs(rows[v.group], v.cols, 1.0)
    assert len(rows) == n


def add_swap_cap(b: ModelBuilder, ctx: Context, a_cols: np.ndarray) -> None:
    """Constraint 4: ``-c <= a[i,t] - a[i,t-1] <= c`` for t >= 1 and ``current_gpus - c <= a[i,0] <= current_gpus + c``."""
    p = ctx.problem
    for i, s in enumerate(p.services):
        c = float(s.swap_cap_gpus)
        r0 = b.add_rows([s.current_gpus - c], [s.current_gpus + c], "swap_cap")
        b.add_coeffs(r0, a_cols[i, :1], 1.0)
        H = a_cols.shape[1]
        if H > 1:
            rows = b.add_rows(np.full(H - 1, -c), np.full(H - 1, c), "swap_cap")
            b.add_coeffs(rows, a_cols[i, 1:], 1.0)
            b.add_coeffs(rows, a_cols[i, :-1], -1.0)


def add_max_wait(b: ModelBuilder, ctx: Context, xs: list[StartVars]) -> int:
    """Starvation guard (case C19), when ``settings.max_wait_steps = W`` is set: no overtaking after W steps of waiting, the reservation rule of EASY backfill inside the MILP.

    For each job j that can start somewhere in the horizon and each step τ >= release_j + W:
    jobs after j in arrival order (release_step, then job_id) may start at τ only if j has
    started at or before τ::

        Σ_{k after j} Σ_{s,o} x[k, s, o, τ]  <=  M · Σ_{s,o,t <= τ} x[j, s, o, t]

    with M the most jobs that can start at one step (later jobs, at most GPUs / smallest size).
    Hard, yet never infeasible (a plan that starts nothing satisfies it), and it leaves the
    objective exactly DESIGN §5. For a group of interchangeable jobs, one member started lifts
    the barrier (members are released together). Returns the number of rows added.
    """
    p = ctx.problem
    W = p.settings.max_wait_steps
    if W is None or not xs:
        return 0
    H = p.horizon_steps
    key = [(p.jobs[m[0]].release_step, min(p.jobs[k].job_id for k in m)) for m in ctx.groups]
    count = [len(m) for m in ctx.groups]
    unit = min(v.gpus for v in xs)
    by_group: dict[int, list[StartVars]] = {}
    for v in xs:
        by_group.setdefault(v.group, []).append(v)
    added = 0
    for gj in by_group:
        r = key[gj][0]
        first = r + W
        if first >= H:
            continue
        later = [g for g in by_group if key[g] > key[gj]]
        if not later:
            continue
        big_m = float(min(sum(count[g] for g in later), p.n_gpus // unit))
        taus = np.arange(first, H)
        rows = b.add_rows(-np.inf, np.zeros(len(taus)), "max_wait")
        for g in later:
            for v in by_group[g]:
                sel = v.starts >= first
                if sel.any():
                    b.add_coeffs(rows[v.starts[sel] - first], v.cols[sel], 1.0)
        for v in by_group[gj]:
            # x[j, t] counts in every row τ >= max(t, first)
            for t, c in zip(v.starts.tolist(), v.cols.tolist(), strict=True):
                k0 = max(t, first) - first
                b.add_coeffs(rows[k0:], c, -big_m)
        added += len(taus)
    return added


# ----------------------------------------------------------------------------- build / solve


@dataclass
class BuiltModel:
    """A built model with the maps needed to read a solution back."""

    ctx: Context
    model: SparseModel
    xs: list[StartVars]
    a_cols: np.ndarray
    u_cols: np.ndarray
    build_s: float
    row_families: dict[str, int]

    @property
    def size(self) -> dict[str, int]:
        """{rows, cols, binaries, integers} of the built model (see :func:`model_size`)."""
        return model_size(self.model)

    @property
    def objective_scale(self) -> float:
        """The model's objective unit in the user's: model objective (and bound) × this = DESIGN §5 objective."""
        return self.ctx.priority_scale


def model_size(m: SparseModel) -> dict[str, int]:
    """{rows, cols, binaries (integer columns with bounds [0, 1]), integers (all integer columns)}."""
    integer = np.asarray(m.integer, dtype=bool)
    binary = integer & (np.asarray(m.col_lower) == 0.0) & (np.asarray(m.col_upper) == 1.0)
    return {"rows": m.n_rows, "cols": m.n_cols, "binaries": int(binary.sum()), "integers": int(integer.sum())}


def build_model(problem: Problem) -> BuiltModel:
    """Build the §5 MILP for ``problem`` (call :func:`optimizer.diagnose.check_size` first)."""
    t0 = time.perf_counter()
    ctx = make_context(problem)
    b = ModelBuilder()
    xs = add_power_of_two_blocks(b, ctx)
    cov = add_no_preemption(ctx, xs)
    a_cols, u_cols = add_demand_band(b, ctx)
    add_one_task_per_gpu(b, ctx, cov, a_cols)
    add_start_once(b, ctx, xs)
    add_swap_cap(b, ctx, a_cols)
    add_max_wait(b, ctx, xs)
    model = b.model()
    return BuiltModel(ctx, model, xs, a_cols, u_cols, time.perf_counter() - t0, dict(b.row_families))


def plan_to_vector(bm: BuiltModel, plan: Plan) -> np.ndarray | None:
    """The model's column vector for a (verified) plan, for a warm start; None when the plan uses a start the model does not have (it then cannot be a feasible point of this model)."""
    p = bm.ctx.problem
    x = np.zeros(bm.model.n_cols)
    index: dict[tuple[int, int, int, int], int] = {}
    for v in bm.xs:
        for o, t, c in zip(v.offsets.tolist(), v.starts.tolist(), v.cols.tolist(), strict=True):
            index[(v.group, v.gpus, o, t)] = c
    group_of = {p.jobs[k].job_id: gi for gi, members in enumerate(bm.ctx.groups) for k in members}
    for a in plan.assignments:
        if a.running or a.start_step is None or a.gpus is None or a.block_offset is None:
            continue
        c = index.get((group_of.get(a.job_id, -1), int(a.gpus), int(a.block_offset), int(a.start_step)))
        if c is None:
            return None
        x[c] = 1.0
    return x if set_service_values(bm.ctx, bm.a_cols, bm.u_cols, plan, x) else None


def set_service_values(ctx: Context, a_cols: np.ndarray, u_cols: np.ndarray, plan: Plan, x: np.ndarray) -> bool:
    """Write a plan's service GPUs ``a`` and unmet demand ``u = max(0, D - a)`` into ``x`` (in place); False when they lie outside the model's bounds (then ``x`` is not a model point)."""
    p = ctx.problem
    for i, s in enumerate(p.services):
        alloc = np.asarray(plan.service_gpus[s.service], dtype=np.float64)
        if np.any(alloc < ctx.L[i]) or np.any(alloc > ctx.U[i]):
            return False
        unmet = np.maximum(0.0, np.asarray(s.demand_gpus, dtype=np.float64) - alloc)
        if p.settings.demand_hard and unmet.any():
            return False
        x[a_cols[i]] = alloc
        x[u_cols[i]] = unmet
    return True


def assign_group_members(ctx: Context, chosen: dict[int, list[tuple]]) -> dict[str, tuple]:
    """Hand each group's chosen starts (sorted) to its member jobs in file order: job_id -> start."""
    out: dict[str, tuple] = {}
    for gi, items in chosen.items():
        for k, item in zip(ctx.groups[gi], sorted(items), strict=False):
            out[ctx.problem.jobs[k].job_id] = item
    return out


def solution_starts(bm: BuiltModel, x: np.ndarray) -> tuple[dict[str, tuple[int, int, int]], np.ndarray]:
    """Read ``job_id -> (start_step, block_offset, gpus)`` and service GPUs (S, H) from a solution."""
    p = bm.ctx.problem
    chosen: dict[int, list[tuple[int, int, int]]] = {}
    for v in bm.xs:
        on = np.rint(x[v.cols]) > 0.5
        for o, t in zip(v.offsets[on].tolist(), v.starts[on].tolist(), strict=True):
            chosen.setdefault(v.group, []).append((t, o, v.gpus))
    starts = assign_group_members(bm.ctx, chosen)
    svc = np.rint(x[bm.a_cols]).astype(np.int64) if bm.a_cols.size else np.zeros((0, p.horizon_steps), np.int64)
    return starts, svc


def solve_model(bm: BuiltModel, start: np.ndarray | None = None, time_limit_s: float | None = None) -> SolveOutcome:
    """Solve a built model with the problem's settings (fresh HiGHS object)."""
    st = bm.ctx.problem.settings
    return solve(
        bm.model,
        time_limit_s=st.time_limit_s if time_limit_s is None else time_limit_s,
        mip_rel_gap=st.mip_rel_gap,
        threads=st.threads,
        random_seed=st.random_seed,
        start=start,
        mip_work_limit=st.mip_work_limit,
    )
