"""The DESIGN §5 objective of a plan, by hand (gamma 0.5 so every discounted sum is exact).

8 GPUs, 4 steps of 30 min. A (priority 2; 2 GPUs x 2 steps, or 4 GPUs x 1 step at efficiency 0.75),
B (priority 3; 1 GPU x 3 steps), R running (priority 1). Service chat demands (2, 0, 3, 1).
Unmet weight w = kappa x max p = 8 x 3 = 24 per GPU-step.
"""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.objective import job_reward, objective_value, unmet_gpu_steps
from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption

P = Problem(
    Cluster(8, 8, 30, 4),
    PlanSettings(decay_per_step=0.5, penalty_ratio=8.0),
    (Service("chat", (2, 0, 3, 1), 0, 8, 8, 0),),
    (Job("A", "training", 2.0, 0, (SizeOption(2, 2), SizeOption(4, 1, 0.75))),
     Job("B", "training", 3.0, 0, (SizeOption(1, 3),))),
    (RunningJob("R", "training", 1.0, 2, 6, 2),),
)


def _plan(*assignments, services=None) -> Plan:
    svc = {"chat": (1, 1, 3, 3)} if services is None else services
    return Plan("test", "feasible", tuple(assignments), svc, 0.0, None, None, 0.0, None, n_gpus=8, horizon_steps=4)


def test_job_reward_by_hand():
    assert job_reward(P.jobs[0], 2, 0, P) == 6.0  # 2 x 1.0 x 2 x (1 + 0.5)
    assert job_reward(P.jobs[0], 4, 1, P) == 3.0  # 2 x 0.75 x 4 x 0.5
    # ends after the horizon: valued for its whole run (terminal value), steps 3 and 4: 2 x 2 x (0.125 + 0.0625)
    assert job_reward(P.jobs[0], 2, 3, P) == 0.75
    assert job_reward(P.jobs[1], 1, 2, P) == 1.3125  # steps 2, 3, 4 of its 3: 3 x 1 x (0.25 + 0.125 + 0.0625)
    with pytest.raises(KeyError, match="job 'A' has no size of 8 GPUs"):
        job_reward(P.jobs[0], 8, 0, P)


def test_unmet_counts_only_shortfalls_and_a_missing_service_as_zero_gpus():
    # shortfalls max(0, d - a): (2-1, 0-1 -> 0, 3-3, 1-3 -> 0) = 1 (d - a summed would be -2)
    assert unmet_gpu_steps(_plan(), P) == 1.0
    assert unmet_gpu_steps(_plan(services={}), P) == 6.0  # 2 + 0 + 3 + 1
    assert unmet_gpu_steps(_plan(services={"chat": (2, 0, 3, 1)}), P) == 0.0


def test_objective_value_by_hand():
    plan = _plan(JobAssignment("R", 0, 2, 6, 2, running=True), JobAssignment("A", 0, 1, 0, 4),
                 JobAssignment("B", 2, 5, 4, 1))
    # A 4 GPUs at 0: 6.0; B at 2: 1.3125 (whole run); R running: nothing; unmet 1 GPU-step x 24
    assert P.unmet_penalty() == 24.0
    assert objective_value(plan, P) == 6.0 + 1.3125 - 24.0
    # unstarted jobs and ids not in the problem earn nothing
    other = _plan(JobAssignment("A", None, None, None, None), JobAssignment("Z", 0, 1, 0, 4),
                  JobAssignment("B", 2, 5, 4, 1), services={"chat": (2, 0, 3, 1)})
    assert objective_value(other, P) == 1.3125


def test_unmet_adds_up_over_services():
    two = Problem(P.cluster, P.settings, (P.services[0], Service("embed", (1, 1, 1, 1), 0, 8, 8, 0)), P.jobs, P.running)
    # chat 1 GPU-step short (as above), embed 4 (nothing allocated)
    assert unmet_gpu_steps(_plan(), two) == 5.0
    assert unmet_gpu_steps(_plan(services={"embed": (1, 1, 1, 1)}), two) == 6.0  # chat missing: 2 + 0 + 3 + 1


def test_run_decay_by_hand():
    from optimizer.objective import run_decay

    # γ = 1: the run's length, whatever the start (also start 0), as a Python float for scalars
    assert run_decay(1.0, 3, 4) == 4.0 and isinstance(run_decay(1.0, 3, 4), float)
    assert run_decay(1.0, 0, 2) == 2.0
    assert run_decay(1.0, np.array([0, 5]), np.array([2, 3])).tolist() == [2.0, 3.0]
    # γ = 0.5, start 2, 3 steps: 0.25 + 0.125 + 0.0625 (the closed form γ^t (1 − γ^d) / (1 − γ))
    assert run_decay(0.5, 2, 3) == pytest.approx(0.4375) and isinstance(run_decay(0.5, 2, 3), float)
