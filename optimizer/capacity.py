"""Capacity arrays every planner uses: what is fixed before any queued job is placed.

- :func:`running_gpus_per_step`: GPUs held by running jobs per step, shape (horizon_steps,).
- :func:`up_gpus`: GPUs not down.
- :func:`fixed_occupancy`: (horizon_steps, n_gpus) bool grid of GPUs held by running jobs or down.
- :func:`service_bounds`: per service and step, the smallest and largest allocation any valid plan
  can have (band, swap cap from ``current_gpus``, and full demand when ``settings.demand_hard``).
  The smallest trajectory is itself valid for the service.
- :func:`service_need`: per service and step, the fewest GPUs that meet its demand now and later
  within band and swap cap (the services' share of the starvation guard's board, DESIGN §5).
- :func:`least_unmet_rt` / :func:`least_unmet_by_step`: ``U*``, the least unmet real-time
  GPU-steps any valid plan can reach, and its split by service and step (the real-time-first
  bounds of DESIGN §5).
- :class:`Capacity`: the arrays above computed once per plan (:meth:`Capacity.of`) and passed down to
  the baselines, the greedy starts and the model builds (each function computes them itself when
  none is given).

Used by the baselines, the MILP, the decomposition and the infeasibility diagnosis
(:mod:`optimizer.diagnose`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optimizer.problem import Problem


def running_gpus_per_step(problem: Problem) -> np.ndarray:
    """GPUs that are up and held by running jobs at each step: shape (horizon_steps,), int.

    A running job on down GPUs (a drained node, case 022) holds them until its planned end, but they are not
    among :func:`up_gpus`, so only its GPUs that are up count here (``up - running`` stays the free GPUs).
    """
    H = problem.horizon_steps
    out = np.zeros(H, dtype=np.int64)
    down = set(problem.down_gpus)
    for r in problem.running:
        out[: min(H, r.planned_steps)] += r.gpus - len(down.intersection(range(r.block_offset, r.block_offset + r.gpus)))
    return out


def up_gpus(problem: Problem) -> int:
    """GPUs not listed in ``down_gpus``."""
    return problem.n_gpus - len(problem.down_gpus)


def fixed_occupancy(problem: Problem) -> np.ndarray:
    """(horizon_steps, n_gpus) bool: GPU held by a running job or down at that step."""
    H, N = problem.horizon_steps, problem.n_gpus
    occ = np.zeros((H, N), dtype=bool)
    if problem.down_gpus:
        occ[:, list(problem.down_gpus)] = True
    for r in problem.running:
        occ[: min(H, r.planned_steps), r.block_offset : r.block_offset + r.gpus] = True
    return occ


def service_bounds(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest valid allocation per service and step, ignoring other services.

    Returns ``(L, U)``, each shape (n_services, horizon_steps), int. ``L`` is the pointwise
    maximum of the per-step lower limit (``min_gpus``, and the demand when ``demand_hard``)
    spread by the swap cap c in both directions, and of ``current_gpus - c * (t + 1)``;
    ``U`` likewise from ``max_gpus`` and ``current_gpus + c * (t + 1)``. Both are c-Lipschitz,
    so ``L`` (when ``L <= U``) is a valid trajectory that no valid plan undercuts.
    """
    H = problem.horizon_steps
    S = len(problem.services)
    L = np.zeros((S, H), dtype=np.int64)
    U = np.zeros((S, H), dtype=np.int64)
    hard = problem.settings.demand_hard
    for i, s in enumerate(problem.services):
        # plain int lists: the per-step passes are sequential, and numpy scalar indexing in them cost
        # about 1 s per 100,000 steps (case F05)
        c = s.swap_cap_gpus
        lb = [max(s.min_gpus, d) for d in s.demand_gpus] if hard else [s.min_gpus] * H
        ub = s.max_gpus
        lo, hi = [0] * H, [0] * H
        prev_lo = prev_hi = s.current_gpus
        for t in range(H):
            prev_lo = lo[t] = max(lb[t], prev_lo - c)
            prev_hi = hi[t] = min(ub, prev_hi + c)
        for t in range(H - 2, -1, -1):
            lo[t] = max(lo[t], lo[t + 1] - c)
            hi[t] = min(hi[t], hi[t + 1] + c)
        L[i], U[i] = lo, hi
    return L, U


def service_need(problem: Problem) -> np.ndarray:
    """GPUs each service needs to meet its demand, per step: shape (n_services, horizon_steps), int.

    The smallest trajectory that meets the demand at every step (clipped to the band), moving by at
    most ``swap_cap_gpus`` per step from ``current_gpus``: :func:`service_bounds`'s lower trajectory
    with the demand as the lower limit, clipped to its upper trajectory (where demand is out of
    reach). Ramp-ups ahead of a rise are included (``n_t >= n_{t+1} - c``). This is what the
    starvation guard counts for real-time work when it asks whether the reserved job has room
    (DESIGN §5): allocations above it are spare, so the guard cannot be gamed by holding them.
    """
    return _need(problem, service_bounds(problem)[1])


def _need(problem: Problem, U: np.ndarray) -> np.ndarray:
    """:func:`service_need` given the upper trajectories ``U`` (n_services, horizon_steps) of :func:`service_bounds`."""
    H = problem.horizon_steps
    out = np.zeros((len(problem.services), H), dtype=np.int64)
    for i, s in enumerate(problem.services):
        c = s.swap_cap_gpus
        lo = np.clip(np.asarray(s.demand_gpus, dtype=np.int64), s.min_gpus, s.max_gpus)
        prev = s.current_gpus
        for t in range(H):
            lo[t] = max(lo[t], prev - c)
            prev = lo[t]
        for t in range(H - 2, -1, -1):
            lo[t] = max(lo[t], lo[t + 1] - c)
        out[i] = np.minimum(lo, U[i])
    return out



@dataclass(frozen=True)
class Capacity:
    """The capacity arrays of one problem, computed once per plan (:meth:`of`) and passed down to every stage.

    ``running`` (horizon_steps,) int: GPUs held by running jobs (:func:`running_gpus_per_step`); ``up``: GPUs
    not down (:func:`up_gpus`); ``occupancy`` (horizon_steps, n_gpus) bool: held by a running job or down
    (:func:`fixed_occupancy`); ``lower``, ``upper`` (n_services, horizon_steps) int: the smallest and largest
    valid allocations (:func:`service_bounds`); ``need`` (n_services, horizon_steps) int: the GPUs each
    service needs (:func:`service_need`). The arrays are read-only: a caller that marks cells copies them.
    """

    running: np.ndarray
    up: int
    occupancy: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    need: np.ndarray

    @classmethod
    def of(cls, problem: Problem) -> Capacity:
        """The capacity arrays of ``problem`` (each function of this module once)."""
        lower, upper = service_bounds(problem)
        arrays = (running_gpus_per_step(problem), fixed_occupancy(problem), lower, upper, _need(problem, upper))
        for a in arrays:
            a.flags.writeable = False
        running, occupancy, lower, upper, need = arrays
        return cls(running, up_gpus(problem), occupancy, lower, upper, need)

    @property
    def free(self) -> np.ndarray:
        """GPUs up minus those of running jobs, per step: shape (horizon_steps,), int."""
        return self.up - self.running


def least_unmet_rt(problem: Problem) -> int:
    """``U*``: the least total unmet real-time demand (GPU-steps) of any valid plan (``least_unmet_by_step(problem).sum()``)."""
    return int(least_unmet_by_step(problem).sum())


def least_unmet_by_step(problem: Problem, capacity: Capacity | None = None) -> np.ndarray:
    """Unmet real-time GPUs per service and step of a plan reaching ``U*``: shape (n_services, horizon_steps), int.

    ``U*`` is ``min Σ_{i,t} max(0, D_{i,t} − a_{i,t})`` over service allocations within the valid
    range ``[L, U]`` of :func:`service_bounds` (band, swap cap from ``current_gpus``), swap cap
    between steps, and ``Σ_i a_{i,t} <= N_up − running(t)`` (running jobs are never preempted;
    queued jobs can always be left unstarted, so they do not bind). One service: the pointwise
    largest valid allocation ``hi``, the largest ``c``-Lipschitz trajectory under
    ``min(U_t, N_up − running(t))`` (forward and backward passes), is above every valid
    allocation at every step, so ``max(0, D − hi)`` is every valid plan's least unmet demand step
    by step. Several services share the capacity: one optimum of a small integer program
    (``scipy.optimize.milp``, HiGHS; ``2·S·H`` columns), unmet read as ``max(0, D − a)``. All zero
    without services or with ``demand_hard`` (demand is then a constraint). The problem is assumed
    feasible (:func:`optimizer.diagnose.check_feasible`); raises RuntimeError otherwise. ``capacity``:
    :meth:`Capacity.of` of ``problem`` when the caller has it.
    """
    S, H = len(problem.services), problem.horizon_steps
    if S == 0 or problem.settings.demand_hard:
        return np.zeros((S, H), dtype=np.int64)
    if capacity is None:
        cap = (up_gpus(problem) - running_gpus_per_step(problem)).astype(np.int64)
        L, U = service_bounds(problem)
    else:
        cap, L, U = capacity.free.astype(np.int64), capacity.lower, capacity.upper
    D = np.array([s.demand_gpus for s in problem.services], dtype=np.int64)
    if S == 1:
        c = problem.services[0].swap_cap_gpus
        hi = [int(v) for v in np.minimum(U[0], cap)]
        for t in range(1, H):
            hi[t] = min(hi[t], hi[t - 1] + c)
        for t in range(H - 2, -1, -1):
            hi[t] = min(hi[t], hi[t + 1] + c)
        if any(h < lo for h, lo in zip(hi, L[0].tolist(), strict=True)):
            raise RuntimeError("least_unmet_by_step: no valid service allocation (check_feasible first)")
        return np.maximum(0, D - np.asarray(hi, dtype=np.int64)[None, :])
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

    n = S * H  # columns: a (S*H), then u (S*H)
    A = lil_matrix((H + S * (H - 1) + n, 2 * n))
    lo, up = [], []
    r = 0
    for t in range(H):  # Σ_i a[i,t] <= cap[t]
        for i in range(S):
            A[r, i * H + t] = 1.0
        lo.append(-np.inf)
        up.append(float(cap[t]))
        r += 1
    for i, s in enumerate(problem.services):  # |a[i,t] - a[i,t-1]| <= c
        for t in range(1, H):
            A[r, i * H + t] = 1.0
            A[r, i * H + t - 1] = -1.0
            lo.append(-float(s.swap_cap_gpus))
            up.append(float(s.swap_cap_gpus))
            r += 1
    for k in range(n):  # a + u >= D
        A[r, k] = 1.0
        A[r, n + k] = 1.0
        lo.append(float(D.ravel()[k]))
        up.append(np.inf)
        r += 1
    cost = np.concatenate([np.zeros(n), np.ones(n)])
    bounds = Bounds(np.concatenate([L.ravel(), np.zeros(n)]).astype(float),
                    np.concatenate([U.ravel(), D.ravel()]).astype(float))
    res = milp(cost, constraints=LinearConstraint(A.tocsr(), lo, up), integrality=np.ones(2 * n), bounds=bounds)
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"least_unmet_by_step: {res.message} (check_feasible first)")
    a = np.rint(res.x[:n]).astype(np.int64).reshape(S, H)
    return np.maximum(0, D - a)
