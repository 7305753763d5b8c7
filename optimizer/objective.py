"""The DESIGN §5 objective of a plan, computed from the plan alone (independent of the MILP).

``objective = Σ_started jobs p_j · e_{j,s} · s · Σ_{τ=t}^{min(t+d_{j,s}, H)-1} γ^τ
             − w · Σ_{i,t} max(0, D_{i,t} − a_{i,t})``,  with ``w = κ · max_j p_j``.

Running jobs are fixed occupancy, not decisions, so they add nothing (a constant in every
plan). A job started inside the horizon but ending after it earns only its in-horizon steps.
"""

from __future__ import annotations

from typing import cast

from optimizer.plan import Plan
from optimizer.problem import Job, Problem


def job_reward(job: Job, gpus: int, start_step: int, problem: Problem) -> float:
    """Reward of starting ``job`` with ``gpus`` GPUs at ``start_step`` (DESIGN §5, first term).

    ``p_j · e_{j,s} · s · Σ_{τ=t}^{min(t+d, H)-1} γ^τ``. Raises KeyError naming the job when
    ``gpus`` is not one of its sizes.
    """
    for s in job.sizes:
        if s.gpus == gpus:
            g = problem.settings.decay_per_step
            end = min(start_step + s.duration_steps, problem.horizon_steps)
            decay = sum(g**tau for tau in range(start_step, end))
            return job.priority * s.efficiency * s.gpus * decay
    raise KeyError(f"job {job.job_id!r} has no size of {gpus} GPUs")


def unmet_gpu_steps(plan: Plan, problem: Problem) -> float:
    """Σ_{i,t} max(0, D_{i,t} − a_{i,t}) in GPU-steps (a missing service counts as 0 GPUs)."""
    total = 0
    for s in problem.services:
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
        reward += job_reward(jobs[a.job_id], int(cast(int, a.gpus)), int(a.start_step), problem)
    return reward - problem.unmet_penalty() * unmet_gpu_steps(plan, problem)
