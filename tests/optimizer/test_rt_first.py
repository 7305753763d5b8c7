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

from optimizer.objective import unmet_gpu_steps
from optimizer.planners import plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, Service, SizeOption
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
