"""Real-time first (issue 15): the terminal value of DESIGN §5 on a hand-solvable problem.

8 GPUs on one node, 4 steps, γ = 1, κ = 8. Service chat: demand (0, 1, 0, 0), band [0, 8], swap
cap 8, currently 0 GPUs. Job J: priority 1, 8 GPUs for 10 steps (the whole node), queued.
J started at 0 holds every GPU at step 1, leaving 1 GPU-step of chat unmet (penalty κ·1 = 8);
started at 2 or 3 it leaves chat served.
- Reward cut at the horizon (the old model): start 0 earns 8·4 − 8 = 24, start 2 earns 8·2 = 16,
  start 3 earns 8: the planner traded chat's GPU-step for batch reward.
- Whole run valued (terminal value): every start earns 8·10 = 80; start 0 nets 72, start 2 or 3
  nets 80: chat is served.
"""

from __future__ import annotations

import pytest

from optimizer.capacity import least_unmet_by_step, least_unmet_rt
from optimizer.decomposition import build_count_model
from optimizer.objective import unmet_gpu_steps
from optimizer.planners import plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption
from optimizer.solver import solve
from optimizer.verify import verify


def horizon_cut_problem(method: str) -> Problem:
    st = PlanSettings(decay_per_step=1.0, penalty_ratio=8.0, mip_rel_gap=0.0, milp_method=method)
    return Problem(Cluster(8, 8, 30, 4), st, (Service("chat", (0, 1, 0, 0), 0, 8, 8, 0),),
                   (Job("J", "training", 1.0, 0, (SizeOption(8, 10),)),), ())


@pytest.mark.parametrize("method", ["decomposed", "full"])
def test_terminal_value_keeps_the_planner_from_trading_real_time_for_a_long_job(method):
    p = horizon_cut_problem(method)
    r = plan(p, "milp")
    assert verify(r, p) == []
    assert unmet_gpu_steps(r, p) == 0.0
    assert r.job("J").start_step in (2, 3)
    assert r.objective == pytest.approx(80.0, abs=1e-9)


def test_least_unmet_with_two_services_sharing_what_a_running_job_leaves():
    """4 GPUs; a running job holds 2 GPUs for steps 0-1. Services A (demand 2, 2, 2) and B (demand
    1, 1, 1), band [0, 4], swap cap 4, none held now. Steps 0-1: 2 GPUs for 3 demanded, 1 unmet each;
    step 2: 4 GPUs, all served. U* = 2, whichever service is short."""
    st = PlanSettings(decay_per_step=1.0, mip_rel_gap=0.0)
    p = Problem(Cluster(4, 4, 30, 3), st,
                (Service("A", (2, 2, 2), 0, 4, 4, 0), Service("B", (1, 1, 1), 0, 4, 4, 0)), (),
                (RunningJob("R", "training", 1.0, 2, 0, 2),))
    assert least_unmet_rt(p) == 2
    u = least_unmet_by_step(p)
    assert u.sum(axis=0).tolist() == [1, 1, 0]
    r = plan(p, "milp")
    assert verify(r, p) == [] and unmet_gpu_steps(r, p) == 2.0


def test_real_time_first_row_with_two_services_refuses_the_weighted_trade():
    """8 GPUs, 4 steps, γ = 0.5, κ = 5 (w = 5). Services A demand (0, 1, 0, 0) and B demand 0, band
    [0, 8], swap cap 8 (two services: the row Σu <= U* is what holds real time first). Job J:
    priority 1, 8 GPUs (the node), 4 steps. Start 0 earns 8·(1 + 0.5 + 0.25 + 0.125) = 15 and
    leaves A's GPU at step 1 unmet (−5): 10; start 2 earns 8·(0.25 + 0.125 + 0.0625 + 0.03125)
    = 3.75, start 3 half that. Weighted, the planner would start J at 0; U* = 0, so J starts at 2."""
    st = PlanSettings(decay_per_step=0.5, penalty_ratio=5.0, mip_rel_gap=0.0)
    p = Problem(Cluster(8, 8, 30, 4), st,
                (Service("A", (0, 1, 0, 0), 0, 8, 8, 0), Service("B", (0, 0, 0, 0), 0, 8, 8, 0)),
                (Job("J", "training", 1.0, 0, (SizeOption(8, 4),)),), ())
    assert least_unmet_rt(p) == 0
    r = plan(p, "milp")
    assert verify(r, p) == [] and unmet_gpu_steps(r, p) == 0.0
    assert r.job("J").start_step == 2 and r.objective == pytest.approx(3.75, abs=1e-12)
    # the model itself (not only the planner's ranking of its candidates): the master's optimum is 3.75, not 10
    out = solve(build_count_model(p).model, time_limit_s=20.0, mip_rel_gap=0.0)
    assert out.status == "optimal" and out.objective == pytest.approx(3.75, abs=1e-9)
