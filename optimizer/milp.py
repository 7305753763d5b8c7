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
``add_swap_cap`` (4: ``|a_t - a_{t-1}| <= c`` from ``current_gpus``); real time first (DESIGN §5):
``u <= u*`` bounds with one service, ``add_real_time_first``'s row ``Σ u <= U*`` with several.

Objective (maximise), exactly DESIGN §5 in units of the largest priority ``P = max_j p_j``
(case F01: the coefficients do not depend on the priorities' units):
``Σ x · (p_j / P) · e_{j,s} · s · Σ_{τ=t}^{t+d-1} γ^τ − Σ κ · u`` (``w / P = κ``): a start is
valued for its whole run, also past the horizon (terminal value, DESIGN §5).
The model's objective and bound times ``P`` (:attr:`BuiltModel.objective_scale`) are the §5
objective in the user's units.
With ``settings.max_wait_steps`` set, :func:`add_max_wait` adds the starvation guard, EASY's
reservation for the first job that has waited that long (DESIGN §5; the objective stays §5).

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
from scipy.sparse.linalg import spsolve_triangular

from optimizer.capacity import (
    Capacity,
    least_unmet_by_step,
)
from optimizer.diagnose import job_groups
from optimizer.objective import run_decay
from optimizer.plan import Plan
from optimizer.problem import Problem
from optimizer.reserve import surprise_room
from optimizer.solver import SparseModel


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

    def set_continuous(self, cols) -> None:
        """Make existing columns continuous (they were added as integer)."""
        flags = np.concatenate(self._int) if self._int else np.zeros(0, dtype=bool)
        flags[np.asarray(cols, dtype=np.int64)] = False
        self._int = [flags]

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
    priority_scale: float  # P = max priority: the model's objective unit (DESIGN §5)
    unmet_cap: np.ndarray  # (S, H) u's upper bound: u* with one service, else the demand
    least_unmet: int  # U* = least unmet real-time GPU-steps of any valid plan (real time first)
    capacity: Capacity  # the problem's capacity arrays (running, up, fixed occupancy, service bounds and need)
    np_room: np.ndarray | None = None  # (H,) GPUs new non-preemptible starts may hold (surprise reserve); None: no row


def make_context(problem: Problem, u_star: np.ndarray | None = None, capacity: Capacity | None = None) -> Context:
    """The shared arrays of one model build: job groups, GPU cells, fixed occupancy, batch room, service bounds.

    ``u_star``: :func:`optimizer.capacity.least_unmet_by_step` of ``problem`` when the caller has it
    (the planner computes it once per plan; with several services it is a small MILP), else computed here;
    ``capacity`` likewise (:meth:`optimizer.capacity.Capacity.of`).
    """
    H, N = problem.horizon_steps, problem.n_gpus
    groups = job_groups(problem)
    unit = min((s.gpus for j in problem.jobs for s in j.sizes), default=N)
    n_cells = N // unit
    capacity = Capacity.of(problem) if capacity is None else capacity
    blocked = np.asarray(capacity.occupancy.reshape(H, n_cells, unit).any(axis=2))
    L, U = capacity.lower, capacity.upper
    room = capacity.free - (L.sum(axis=0) if len(L) else 0)
    u_star = least_unmet_by_step(problem, capacity) if u_star is None else u_star
    D = np.array([s.demand_gpus for s in problem.services], dtype=np.int64).reshape(len(problem.services), H)
    # one service: u <= u* step by step is exactly Σ u <= U* (every valid plan has u >= u* at every step);
    # several services: U* can be split among them in several ways, so the row of add_real_time_first
    cap = u_star if len(problem.services) == 1 else D
    return Context(problem, groups, unit, n_cells, blocked, np.asarray(room), L, U, problem.max_priority(),
                   cap, int(u_star.sum()), capacity, surprise_room(problem))


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
            reward = q * s.efficiency * s.gpus * run_decay(p.settings.decay_per_step, T, s.duration_steps)
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
    """Constraint 2 for services: integer ``a[i,t]`` in the band (tightened to the valid range ``[L, U]``), integer ``u[i,t] in [0, u*[i,t]]`` with cost ``-w / P = -κ`` (model units), and rows ``a + u >= D``.

    With one service ``u*`` (:func:`optimizer.capacity.least_unmet_by_step`) is the unmet demand of
    the plan reaching ``U*``, the least any valid plan can reach: real time first (DESIGN §5); with
    several, ``u* = D`` and :func:`add_real_time_first` adds the row ``Σ u <= U*``.

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
    # real time first (DESIGN §5, issue 15), one service: u <= u*, the unmet demand of the plan reaching U*
    # (the least any valid plan can reach), so no batch reward buys an unmet GPU-step (several: a row)
    u_hi = np.zeros_like(D) if p.settings.demand_hard else np.minimum(D, ctx.unmet_cap)
    # u is declared integer (exact: D and a are integers). As a continuous column singleton,
    # HiGHS 1.16 presolve mishandled a start solution with a > D (it priced u = D - a < 0 and
    # returned the start as "optimal" with a wrong objective).
    u = b.add_cols(np.full(S * H, -w), 0.0, u_hi.ravel(), integer=True).reshape(S, H)
    rows = b.add_rows(D.ravel(), np.full(S * H, np.inf), "demand_band").reshape(S, H)
    b.add_coeffs(rows, a, 1.0)
    b.add_coeffs(rows, u, 1.0)
    return a, u


def add_real_time_first(b: ModelBuilder, ctx: Context, u_cols: np.ndarray) -> None:
    """Real time first with several services (DESIGN §5, issue 15): one row ``Σ_{i,t} u[i,t] <= U*``.

    ``U*`` is the least unmet real-time GPU-steps any valid plan can reach
    (:func:`optimizer.capacity.least_unmet_rt`). With one service the column bounds
    ``u <= u*`` of :func:`add_demand_band` say the same step by step and no row is added; none
    either without services or with ``demand_hard``. Never infeasible: the plan that starts nothing
    and gives the services a ``U*`` trajectory satisfies every other row.
    """
    if u_cols.shape[0] < 2 or ctx.problem.settings.demand_hard:
        return
    row = b.add_rows(-np.inf, np.array([float(ctx.least_unmet)]), "real_time_first")
    b.add_coeffs(np.broadcast_to(row, u_cols.ravel().shape), u_cols.ravel(), 1.0)


def add_one_task_per_gpu(b: ModelBuilder, ctx: Context, cov: Coverage, a_cols: np.ndarray) -> None:
    """Constraint 1: for every GPU cell and step, starts covering it sum to <= 1 (cells held by running jobs or down GPUs have no start variables at all); and :func:`add_gpu_count`."""
    if len(cov.cell_rows):
        used, inv = np.unique(cov.cell_rows, return_inverse=True)
        rows = b.add_rows(-np.inf, np.ones(len(used)), "one_task_per_gpu")
        b.add_coeffs(rows[inv], cov.cell_cols, 1.0)
    add_gpu_count(b, ctx, cov, a_cols)


def add_gpu_count(b: ModelBuilder, ctx: Context, cov: Coverage, a_cols: np.ndarray) -> None:
    """Constraint 1, counting part: for every step, batch GPUs in use plus real-time GPUs <= GPUs up minus running jobs' GPUs (real-time GPUs need no contiguity, so counting is exact)."""
    cap = ctx.capacity.free.astype(np.float64)
    rows = b.add_rows(-np.inf, cap, "gpu_count")
    if len(cov.step_rows):
        b.add_coeffs(rows[cov.step_rows], cov.step_cols, cov.step_vals)
    if a_cols.size:
        b.add_coeffs(np.broadcast_to(rows[None, :], a_cols.shape), a_cols, 1.0)


def non_preemptible_sets(ctx: Context, xs: list[StartVars]) -> list[bool]:
    """Per start-variable set of ``xs``: True when its group's jobs are not preemptible (groups never mix, :func:`optimizer.diagnose.job_groups`)."""
    return [not ctx.problem.jobs[ctx.groups[v.group][0]].preemptible for v in xs]


def add_surprise_reserve(b: ModelBuilder, ctx: Context, np_cov: Coverage) -> None:
    """The surprise reserve (issue 30, :mod:`optimizer.reserve`): per step, GPUs of new non-preemptible starts <= ``ctx.np_room``.

    ``ctx.np_room[t] = max(0, up − running non-preemptible − Σ_i min(max_gpus_i, D_{i,t} + swap_cap_gpus_i))``
    (:func:`optimizer.reserve.surprise_room`, shape (H,), GPUs): running non-preemptible work is in the right-hand
    side, preemptible starts have no coefficient (they may use the reserve). ``np_cov``: the step coverage of the
    non-preemptible start sets only (:func:`non_preemptible_sets`; the full model's :func:`add_no_preemption`
    entries, or the master's running counts, :func:`optimizer.decomposition.count_coverage`). No row when
    ``ctx.np_room`` is None (no preemptible job: the model is exactly the one without the reserve) or nothing
    non-preemptible can start. Always feasible: starting nothing keeps every row.
    """
    if ctx.np_room is None or not len(np_cov.step_rows):
        return
    rows = b.add_rows(-np.inf, ctx.np_room.astype(np.float64), "surprise_reserve")
    b.add_coeffs(rows[np_cov.step_rows], np_cov.step_cols, np_cov.step_vals)


def full_np_coverage(ctx: Context, cov: Coverage, xs: list[StartVars]) -> Coverage:
    """The step entries of ``cov`` (the full model's, :func:`add_no_preemption`) of non-preemptible start sets only."""
    z = np.zeros(0, dtype=np.int64)
    flags = non_preemptible_sets(ctx, xs)
    np_cols = [v.cols for v, f in zip(xs, flags, strict=True) if f]
    if ctx.np_room is None or not np_cols:
        return Coverage(z, z, z, z, np.zeros(0))
    keep = np.isin(cov.step_cols, np.concatenate(np_cols))
    return Coverage(z, z, cov.step_rows[keep], cov.step_cols[keep], cov.step_vals[keep])


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


@dataclass
class GuardCols:
    """The starvation guard's auxiliary columns (:func:`add_max_wait`) and how to fill them from start columns.

    ``def_rows`` (m,) are equality rows in dependency order, each defining the auxiliary column
    ``def_cols`` (m,) (coefficient +1) from columns defined before it. ``full_cols`` (f,) are the
    binaries "all ``full_n`` (f,) jobs of a group started", 1 exactly when the started count in
    ``full_of`` (f,) reaches ``full_n``. ``room_rows`` (r,) are the "no room" rows
    ``board GPUs - (c + 1) · b >= 0`` with their binary ``room_cols`` (r,) and ``c + 1`` in
    ``room_need`` (r,). :func:`complete_guard` uses them to turn a vector of start and service
    columns into a full model point (warm starts; :func:`optimizer.decomposition.master_admits`).
    """

    def_rows: np.ndarray
    def_cols: np.ndarray
    full_cols: np.ndarray
    full_of: np.ndarray
    full_n: np.ndarray
    room_rows: np.ndarray
    room_cols: np.ndarray
    room_need: np.ndarray


def add_max_wait(b: ModelBuilder, ctx: Context, xs: list[StartVars]) -> GuardCols | None:
    """Starvation guard (cases C19, F03), when ``settings.max_wait_steps = W`` is set: EASY's reservation for the first job that has waited W steps (DESIGN §5, "Starvation guard").

    Groups ``g`` (:func:`optimizer.diagnose.job_groups`: runs of interchangeable jobs adjacent in
    arrival order ≺ = (release_step, job_id), ``n_g`` jobs, most of them single jobs) in arrival
    order; ``π_g = r_g + W``; ``s_g, d_g`` the requested size and duration. ``C_g(t)``: starts of
    later groups' jobs before ``π_g`` that cover step t (on g's board). Auxiliary columns, all
    defined by equality rows:

    - ``σ_g(t)`` = jobs of g started by t; ``Q_g(t)`` = Σ_{g' ≺ g} σ_{g'}(t);
    - ``G_g(t)`` = GPUs at t of the jobs of groups before g, so ``G_last+1(t)`` is all batch GPUs;
    - ``full_g(t)``: ``σ_g(t)`` itself for a single job, else a binary with ``n_g · full <= σ_g``;
    - binary ``b_g(τ)``, τ >= π_g, 1 only if g's reserved job has no room at τ (rows (ii))::

          board_g(τ) + Σ_{C_g(τ)} s · x  >=  (c_g(τ) + 1) · b_g(τ),
          c_g(τ) = up - running(τ) - Σ_i need_i(τ) - s_g

      with ``board_g = G_g`` for a single job (it is not on its own board) and ``G_{g+1}`` for a
      group (its jobs started by τ are ahead of its reserved one); ``need`` from
      :func:`optimizer.capacity.service_need`. When ``c_g(τ) < 0`` the data alone leave no room:
      no ``b_g(τ)``, and the rows (i) whose window holds τ are not needed.

    Rows (i), for every group with a later group and every step t >= π_g, with ``M_t`` the most
    batch GPUs at t (GPUs up - running - the services' smallest allocation)::

        G_last+1(t) - G_{g+1}(t) - Σ_{C_g(t)} s · x
            <=  M_t · ( Σ_{τ ∈ T_g(t)} b_g(τ)  +  full_g(t)  +  (#jobs before g - Q_g(t)) )

    The left side is the GPUs at t of the overtakers (later jobs started at or after π_g; later
    jobs of g itself never start before earlier ones, :func:`assign_group_members`); the right side
    is 0 exactly when g holds the reserved job at t (every earlier job started, one of g's waits)
    and that job has room at every step of ``[t, t + d_g)``. ``T_g(t)``: t and each later step of
    that window whose ``c_g`` is below every earlier one of it; a step with no smaller ``c_g`` than
    an earlier one adds nothing, because a reserved job's board holds only jobs started by t and
    so never grows after t. For a group of several jobs ``T_g(t) = {t}`` (``job_groups`` keeps
    groups only where ``c_g`` does not drop after ``π_g``), where ``G_{g+1}`` counts exactly its
    jobs started by t. Never infeasible (a plan that starts nothing, or FIFO's, satisfies it); the
    objective is unchanged. Returns None (nothing added) when W is not set or there is one group.
    """
    p = ctx.problem
    W = p.settings.max_wait_steps
    if W is None or len(ctx.groups) < 2:
        return None  # off, or no job that could be overtaken
    H = p.horizon_steps
    first = [p.jobs[m[0]] for m in ctx.groups]
    order = sorted(range(len(ctx.groups)), key=lambda g: (first[g].release_step, first[g].job_id))
    J = len(order)
    n = np.array([len(ctx.groups[g]) for g in order], dtype=np.int64)
    pos_of = {g: a for a, g in enumerate(order)}
    by_a: list[list[StartVars]] = [[] for _ in range(J)]
    for v in xs:
        by_a[pos_of[v.group]].append(v)
    steps = np.arange(H)
    free = (ctx.capacity.free - ctx.capacity.need.sum(axis=0)).astype(np.float64)
    # most batch GPUs at a step (the rows' big M): up - running - the services' smallest allocation
    big_m = np.maximum(ctx.batch_room, 0).astype(np.float64)

    def cover(v: StartVars, sel: np.ndarray | None = None, t_min: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(steps, cols) of every step in [t_min, H) covered by the selected starts of ``v``."""
        st_, cl = (v.starts, v.cols) if sel is None else (v.starts[sel], v.cols[sel])
        t = st_[:, None] + np.arange(v.duration)[None, :]
        ok = (t < H) & (t >= t_min)
        return t[ok], np.broadcast_to(cl[:, None], t.shape)[ok]

    def_rows: list[np.ndarray] = []
    def_cols: list[np.ndarray] = []
    # σ_a(t) - σ_a(t-1) - Σ x_a(start t) = 0
    sigma = b.add_cols(np.zeros(J * H), 0.0, np.repeat(n, H).astype(np.float64), integer=False).reshape(J, H)
    rows = b.add_rows(np.zeros(J * H), np.zeros(J * H), "max_wait_def").reshape(J, H)
    b.add_coeffs(rows, sigma, 1.0)
    b.add_coeffs(rows[:, 1:], sigma[:, :-1], -1.0)
    for a in range(J):
        for v in by_a[a]:
            b.add_coeffs(rows[a, v.starts], v.cols, -1.0)
    def_rows.append(rows.ravel())
    def_cols.append(sigma.ravel())
    # Q_a(t) = Q_{a-1}(t) + σ_{a-1}(t), a = 1..J-1 (Q_0 = 0)
    q = np.full((J, H), -1, dtype=np.int64)
    if J > 1:
        q[1:] = b.add_cols(np.zeros((J - 1) * H), 0.0, float(n.sum()), integer=False).reshape(J - 1, H)
        rows = b.add_rows(np.zeros((J - 1) * H), np.zeros((J - 1) * H), "max_wait_def").reshape(J - 1, H)
        b.add_coeffs(rows, q[1:], 1.0)
        b.add_coeffs(rows[1:], q[1:-1], -1.0)
        b.add_coeffs(rows, sigma[:-1], -1.0)
        def_rows.append(rows.ravel())
        def_cols.append(q[1:].ravel())
    # G_a(t) = G_{a-1}(t) + GPUs of group a-1 running at t, a = 1..J (G_0 = 0)
    g = np.full((J + 1, H), -1, dtype=np.int64)
    g[1:] = b.add_cols(np.zeros(J * H), 0.0, float(p.n_gpus), integer=False).reshape(J, H)
    rows = b.add_rows(np.zeros(J * H), np.zeros(J * H), "max_wait_def").reshape(J, H)
    b.add_coeffs(rows, g[1:], 1.0)
    b.add_coeffs(rows[1:], g[1:-1], -1.0)
    for a in range(J):
        for v in by_a[a]:
            t, c = cover(v)
            b.add_coeffs(rows[a, t], c, -float(v.gpus))
    def_rows.append(rows.ravel())
    def_cols.append(g[1:].ravel())

    full_cols: list[np.ndarray] = []
    full_of: list[np.ndarray] = []
    full_n: list[np.ndarray] = []
    room_rows: list[np.ndarray] = []
    room_cols: list[np.ndarray] = []
    room_need: list[np.ndarray] = []
    ahead = np.concatenate([[0], np.cumsum(n)])  # jobs before group a
    for a in range(J - 1):  # the last group in arrival order has no one to be overtaken by
        job = first[order[a]]
        pi = job.release_step + W
        if pi >= H:
            continue
        s_g, d_g = job.requested.gpus, job.requested.duration_steps
        taus = steps[pi:]
        need = free[pi:] - s_g + 1.0  # c_g(τ) + 1
        fixed = need <= 0  # the data alone leave no room at τ
        live = np.flatnonzero(~fixed)
        bcols = b.add_cols(np.zeros(len(live)), 0.0, 1.0, integer=True)
        bcol_at = np.full(H, -1, dtype=np.int64)
        bcol_at[taus[live]] = bcols
        # C_g: later groups' starts before π_g still running at t >= π_g
        c_steps, c_cols, c_vals = [], [], []
        for a2 in range(a + 1, J):
            if first[order[a2]].release_step >= pi:
                break  # arrival order is by release: no later job can start before π_g
            for v in by_a[a2]:
                sel = v.starts < pi
                if sel.any():
                    t, c = cover(v, sel, t_min=pi)
                    c_steps.append(t)
                    c_cols.append(c)
                    c_vals.append(np.full(len(t), float(v.gpus)))
        cs = np.concatenate(c_steps) if c_steps else np.zeros(0, dtype=np.int64)
        cc = np.concatenate(c_cols) if c_cols else np.zeros(0, dtype=np.int64)
        cv = np.concatenate(c_vals) if c_vals else np.zeros(0)
        board = a if n[a] == 1 else a + 1  # G index of the board: a single job is not on its own
        # room rows (ii): board(τ) + Σ_C s x - (c + 1) b >= 0
        if len(live):
            rr = b.add_rows(np.zeros(len(live)), np.full(len(live), np.inf), "max_wait_room")
            at = np.full(H, -1, dtype=np.int64)
            at[taus[live]] = rr
            b.add_coeffs(rr, bcols, -need[live])
            if board > 0:
                b.add_coeffs(rr, g[board, taus[live]], 1.0)
            on = at[cs] >= 0
            b.add_coeffs(at[cs[on]], cc[on], cv[on])
            room_rows.append(rr)
            room_cols.append(bcols)
            room_need.append(need[live])
        # reservation rows (i), for t >= π_g whose window [t, t + d_g) holds no fixed step
        nfix = np.concatenate([[0], np.cumsum(fixed)])  # over taus
        end = np.minimum(np.arange(len(taus)) + d_g, len(taus))
        ts = taus[nfix[end] - nfix[np.arange(len(taus))] == 0]
        if not len(ts):
            continue
        if n[a] == 1:
            full = sigma[a, ts]
        else:
            full = b.add_cols(np.zeros(len(ts)), 0.0, 1.0, integer=True)
            fr = b.add_rows(np.full(len(ts), -np.inf), np.zeros(len(ts)), "max_wait_full")
            b.add_coeffs(fr, full, float(n[a]))
            b.add_coeffs(fr, sigma[a, ts], -1.0)
            full_cols.append(full)
            full_of.append(sigma[a, ts])
            full_n.append(np.full(len(ts), float(n[a])))
        ri = b.add_rows(np.full(len(ts), -np.inf), big_m[ts] * ahead[a], "max_wait")
        at = np.full(H, -1, dtype=np.int64)
        at[ts] = ri
        b.add_coeffs(ri, g[J, ts], 1.0)
        b.add_coeffs(ri, g[a + 1, ts], -1.0)
        on = at[cs] >= 0
        b.add_coeffs(at[cs[on]], cc[on], -cv[on])
        b.add_coeffs(ri, full, -big_m[ts])
        if a > 0:
            b.add_coeffs(ri, q[a, ts], big_m[ts])
        b.add_coeffs(ri, bcol_at[ts], -big_m[ts])  # T_g(t): t, then each new low of c over the window
        low = need[ts - pi]
        for dt in range(1, d_g):
            tau = ts + dt
            val = need[np.minimum(tau, H - 1) - pi]
            keep = (tau < H) & (val < low)
            if keep.any() and n[a] > 1:
                raise AssertionError("job_groups kept a group where the guard's capacity drops")
            b.add_coeffs(ri[keep], bcol_at[tau[keep]], -big_m[ts[keep]])
            low = np.where(keep, val, low)
    cat = lambda xs_, dt=np.int64: np.concatenate(xs_).astype(dt) if xs_ else np.zeros(0, dtype=dt)  # noqa: E731
    return GuardCols(cat(def_rows), cat(def_cols), cat(full_cols), cat(full_of), cat(full_n, np.float64),
                     cat(room_rows), cat(room_cols), cat(room_need, np.float64))


def complete_guard(model: SparseModel, guard: GuardCols | None, x: np.ndarray) -> np.ndarray:
    """Fill the guard's auxiliary columns of ``x`` (n,) from its start columns, in place; returns ``x``.

    Defined columns come from one triangular solve over their rows; each ``full`` and ``b`` binary
    is set to 1 exactly when its rows allow it. The result is a model point iff the plan behind
    ``x`` satisfies the starvation guard (DESIGN §5).
    """
    if guard is None or not len(guard.def_rows):
        return x
    A = sparse.csr_matrix(model.A)
    x[guard.def_cols] = 0.0
    x[guard.full_cols] = 0.0
    x[guard.room_cols] = 0.0
    # the definitions, restricted to the columns they define, are lower triangular with a unit
    # diagonal (each row uses only columns defined by earlier rows): one triangular solve
    D = A[guard.def_rows]
    tri = sparse.csr_matrix(D[:, guard.def_cols])
    x[guard.def_cols] = spsolve_triangular(tri, -(D @ x), lower=True)
    x[guard.full_cols] = (x[guard.full_of] >= guard.full_n - 1e-9).astype(np.float64)
    if len(guard.room_rows):
        act = A[guard.room_rows] @ x  # board GPUs (b = 0 here)
        x[guard.room_cols] = (act >= guard.room_need - 1e-9).astype(np.float64)
    return x


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
    guard: GuardCols | None = None

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


def build_model(problem: Problem, u_star: np.ndarray | None = None, capacity: Capacity | None = None) -> BuiltModel:
    """Build the §5 MILP for ``problem`` (call :func:`optimizer.diagnose.check_size` first); ``u_star``, ``capacity`` as in :func:`make_context`."""
    t0 = time.perf_counter()
    ctx = make_context(problem, u_star, capacity)
    b = ModelBuilder()
    xs = add_power_of_two_blocks(b, ctx)
    cov = add_no_preemption(ctx, xs)
    a_cols, u_cols = add_demand_band(b, ctx)
    add_real_time_first(b, ctx, u_cols)
    add_one_task_per_gpu(b, ctx, cov, a_cols)
    add_surprise_reserve(b, ctx, full_np_coverage(ctx, cov, xs))
    add_start_once(b, ctx, xs)
    add_swap_cap(b, ctx, a_cols)
    guard = add_max_wait(b, ctx, xs)
    model = b.model()
    return BuiltModel(ctx, model, xs, a_cols, u_cols, time.perf_counter() - t0, dict(b.row_families), guard)


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
    if not set_service_values(bm.ctx, bm.a_cols, bm.u_cols, plan, x):
        return None
    return complete_guard(bm.model, bm.guard, x)


def set_service_values(ctx: Context, a_cols: np.ndarray, u_cols: np.ndarray, plan: Plan, x: np.ndarray) -> bool:
    """Write a plan's service GPUs ``a`` and unmet demand ``u = max(0, D - a)`` into ``x`` (in place); False when they lie outside the model's bounds (then ``x`` is not a model point)."""
    p = ctx.problem
    total = 0.0
    for i, s in enumerate(p.services):
        alloc = np.asarray(plan.service_gpus[s.service], dtype=np.float64)
        if np.any(alloc < ctx.L[i]) or np.any(alloc > ctx.U[i]):
            return False
        unmet = np.maximum(0.0, np.asarray(s.demand_gpus, dtype=np.float64) - alloc)
        if p.settings.demand_hard and unmet.any():
            return False
        if np.any(unmet > ctx.unmet_cap[i]):
            return False  # more unmet real-time demand than real time first allows
        total += float(unmet.sum())
        x[a_cols[i]] = alloc
        x[u_cols[i]] = unmet
    return p.settings.demand_hard or total <= ctx.least_unmet


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
