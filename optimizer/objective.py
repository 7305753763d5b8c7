"""The DESIGN §5 objective of a plan, computed from the plan alone (independent of the MILP).

``objective = Σ_started jobs p_j · e_{j,s} · s · Σ_{τ=t}^{t+d_{j,s}-1} γ^τ
             − w · Σ_{i,t} max(0, D_{i,t} − a_{i,t})``,  with ``w = κ · max_j p_j``.

Running jobs are fixed occupancy, not decisions, so they add nothing (a constant in every
plan). A job started inside the horizon is valued for its whole run, also the steps after the
horizon (the terminal value of DESIGN §5, issue 15): cutting its reward at the horizon made a
late start of a long job worth less than the real-time demand its GPUs would displace.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from optimizer.placement import served_demand_gpus, service_placement
from optimizer.plan import Plan
from optimizer.problem import Job, Problem


def run_decay(gamma: float, start_step, duration_steps):
    """``Σ_{τ=t}^{t+d-1} γ^τ`` for start ``t`` and duration ``d`` steps (scalars or numpy arrays).

    Closed form ``γ^t (1 − γ^d) / (1 − γ)`` (geometric series), ``d`` when ``γ = 1``. The run is
    counted whole, also past the horizon (terminal value, DESIGN §5).
    """
    t = np.asarray(start_step, dtype=np.float64)
    d = np.asarray(duration_steps, dtype=np.float64)
    if gamma == 1.0:
        out = d + 0.0 * t
    else:
        out = gamma**t * (1.0 - gamma**d) / (1.0 - gamma)
    return float(out) if out.ndim == 0 else out


def job_reward(job: Job, gpus: int, start_step: int, problem: Problem, gpu_type: str = "") -> float:
    """Reward of starting ``job`` with ``gpus`` GPUs at ``start_step`` (DESIGN §5, first term).

    ``p_j · e_{j,s} · s · Σ_{τ=t}^{t+d-1} γ^τ`` (whole run, :func:`run_decay`). On a typed cluster (issue 26) the
    run lasts ``d' = job.duration_on(size, gpu_type)`` steps and does the same work, so each step earns
    ``d / d'`` of a reference step: ``p · e · s · (d / d') · Σ_{τ=t}^{t+d'-1} γ^τ`` (a faster type earns the
    same work sooner). Raises KeyError naming the job when ``gpus`` is not one of its sizes.
    """
    for s in job.sizes:
        if s.gpus == gpus:
            if problem.cluster.typed:
                d = job.duration_on(s, gpu_type, problem.cluster)
                rate = s.duration_steps / d
                return job.priority * s.efficiency * s.gpus * rate * run_decay(problem.settings.decay_per_step,
                                                                                start_step, d)
            decay = run_decay(problem.settings.decay_per_step, start_step, s.duration_steps)
            return job.priority * s.efficiency * s.gpus * decay
    raise KeyError(f"job {job.job_id!r} has no size of {gpus} GPUs")


def unmet_gpu_steps(plan: Plan, problem: Problem) -> float:
    """Σ_{i,t} max(0, D_{i,t} − a_{i,t}) in GPU-steps (a missing service counts as 0 GPUs).

    A service with per-type capacity (issue 26) counts ``a`` as the demand GPUs its GPU-level plan serves
    (:func:`optimizer.placement.served_demand_gpus`: a GPU of a faster type serves more than one).
    """
    total = 0.0
    served = None
    for s in problem.services:
        if s.typed_capacity and s.service in plan.service_gpus:
            if served is None:
                served = served_demand_gpus(problem, service_placement(problem, plan))
            total += float(np.maximum(0.0, np.asarray(s.demand_gpus, dtype=np.float64) - served[s.service]).sum())
            continue
        a = plan.service_gpus.get(s.service, (0,) * problem.horizon_steps)
        total += sum(max(0, d - x) for d, x in zip(s.demand_gpus, a, strict=False))
    return float(total)


def objective_value(plan: Plan, problem: Problem) -> float:
    """The DESIGN §5 objective of ``plan`` on ``problem`` (float; larger is better)."""
    jobs = {j.job_id: j for j in problem.jobs}
    reward = 0.0
    for a in plan.assignments:
        if a.running or a.start_step is None or a.job_id not in jobs:
            continue
        gpu_type = ""
        if problem.cluster.typed and a.block_offset is not None:
            k = problem.cluster.node_of(int(a.block_offset))
            gpu_type = "" if k is None else problem.cluster.nodes[k].gpu_type
        reward += job_reward(jobs[a.job_id], int(cast(int, a.gpus)), int(a.start_step), problem, gpu_type)
    return reward - problem.unmet_penalty() * unmet_gpu_steps(plan, problem)
