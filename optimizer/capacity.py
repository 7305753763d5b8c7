"""Capacity arrays every planner uses: what is fixed before any queued job is placed.

- :func:`running_gpus_per_step`: GPUs held by running jobs per step, shape (horizon_steps,).
- :func:`up_gpus`: GPUs not down.
- :func:`fixed_occupancy`: (horizon_steps, n_gpus) bool grid of GPUs held by running jobs or down.
- :func:`service_bounds`: per service and step, the smallest and largest allocation any valid plan
  can have (band, swap cap from ``current_gpus``, and full demand when ``settings.demand_hard``).
  The smallest trajectory is itself valid for the service.
- :func:`service_need`: per service and step, the fewest GPUs that meet its demand now and later
  within band and swap cap (the services' share of the starvation guard's board, DESIGN §5).

Used by the baselines, the MILP, the decomposition and the infeasibility diagnosis
(:mod:`optimizer.diagnose`).
"""

from __future__ import annotations

import numpy as np

from optimizer.problem import Problem


def running_gpus_per_step(problem: Problem) -> np.ndarray:
    """GPUs held by running jobs at each step: shape (horizon_steps,), int."""
    H = problem.horizon_steps
    out = np.zeros(H, dtype=np.int64)
    for r in problem.running:
        out[: min(H, r.planned_steps)] += r.gpus
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
    H = problem.horizon_steps
    _, U = service_bounds(problem)
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
