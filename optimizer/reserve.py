"""The surprise reserve (issue 30): GPUs non-preemptible batch work leaves to a real-time surprise.

When a problem has at least one preemptible batch job (queued or running), gpuplan's planners (the MILP, its
warm starts and the fast mode; not the baselines, not the verifier: DESIGN §5 "The surprise reserve") keep, at
every step ``t``, room for what a one-step surprise can claim:

``NP_t + Σ_i min(max_gpus_i, D_{i,t} + swap_cap_gpus_i) <= up``

with ``NP_t`` the GPUs of non-preemptible batch work active at ``t`` (new starts, plus running non-preemptible
jobs as fixed occupancy), ``D_{i,t}`` the service's planned demand (the problem's ``demand_gpus``) and ``up`` the
GPUs not down. ``swap_cap_gpus`` is not a tuned margin: the surge replan can add at most that many GPUs to a
service in one step (:func:`optimizer.preemption.rt_shortfall`), so it is exactly what a surprise one step ahead
can claim. Preemptible jobs may use the reserve (a surge stops them). When running non-preemptible work already
exceeds the room, the rule is relaxed to "new non-preemptible starts <= max(0, room)", so it is always feasible
(starting nothing keeps it).

Typed clusters (``Cluster.typed``) are not covered (no reserve: :func:`surprise_room` returns None).
"""

from __future__ import annotations

import numpy as np

from optimizer.capacity import up_gpus
from optimizer.plan import Plan
from optimizer.problem import Problem


def reserve_active(problem: Problem) -> bool:
    """True when the reserve applies: some queued or running job is preemptible, on an untyped cluster."""
    if problem.cluster.typed:
        return False
    return any(j.preemptible for j in problem.jobs) or any(r.preemptible for r in problem.running)


def surprise_reserve_gpus(problem: Problem) -> np.ndarray:
    """``Σ_i min(max_gpus_i, demand_gpus_i[t] + swap_cap_gpus_i)`` per step: shape (horizon_steps,), int GPUs."""
    H = problem.horizon_steps
    out = np.zeros(H, dtype=np.int64)
    for s in problem.services:
        out += np.minimum(s.max_gpus, np.asarray(s.demand_gpus, dtype=np.int64) + s.swap_cap_gpus)
    return out


def running_non_preemptible(problem: Problem) -> np.ndarray:
    """GPUs that are up and held by running non-preemptible jobs, per step: shape (horizon_steps,), int.

    As :func:`optimizer.capacity.running_gpus_per_step`, over the running jobs not marked ``preemptible`` only.
    """
    H = problem.horizon_steps
    out = np.zeros(H, dtype=np.int64)
    down = set(problem.down_gpus)
    for r in problem.running:
        if r.preemptible:
            continue
        out[: min(H, r.planned_steps)] += r.gpus - len(down.intersection(range(r.block_offset, r.block_offset + r.gpus)))
    return out


def surprise_room(problem: Problem) -> np.ndarray | None:
    """GPUs new non-preemptible batch starts may hold at each step: shape (horizon_steps,), int >= 0; None when inactive.

    ``max(0, up − running non-preemptible − Σ_i min(max_gpus_i, D_{i,t} + swap_cap_gpus_i))`` (module docstring).
    None when :func:`reserve_active` is False: then no planner adds anything (the model is exactly the one
    without the reserve).
    """
    if not reserve_active(problem):
        return None
    room = up_gpus(problem) - running_non_preemptible(problem) - surprise_reserve_gpus(problem)
    return np.maximum(room, 0).astype(np.int64)


def non_preemptible_new_gpus(plan: Plan, problem: Problem) -> np.ndarray:
    """GPUs of the plan's new starts of non-preemptible queued jobs active at each step: shape (horizon_steps,), int."""
    H = problem.horizon_steps
    pre = {j.job_id for j in problem.jobs if j.preemptible}
    out = np.zeros(H, dtype=np.int64)
    for a in plan.assignments:
        if a.running or a.start_step is None or a.gpus is None or a.end_step is None or a.job_id in pre:
            continue
        out[a.start_step: min(a.end_step, H)] += a.gpus
    return out


def reserve_excess(plan: Plan, problem: Problem, room: np.ndarray | None = None) -> int:
    """GPU-steps by which ``plan``'s new non-preemptible starts exceed :func:`surprise_room` (0: the plan keeps the reserve).

    ``room``: :func:`surprise_room` of ``problem`` when the caller has it. 0 when the reserve is inactive.
    """
    room = surprise_room(problem) if room is None else room
    if room is None:
        return 0
    return int(np.maximum(non_preemptible_new_gpus(plan, problem) - room, 0).sum())
