"""A surge replan plans the step being served at its actual demand, without the margin (issue 15, DESIGN §6.2), by hand.

4 GPUs (one node), 2-step horizon, 2-step window, no jobs. Services, in this order: ``a`` (forecast
1, actual 1) and ``b`` (forecast 1, actual 3), each band [0, 4], swap cap 2, holding 1 GPU. The
real-time margin is on (default alpha): at step 0 nothing is measured, so its cold start plans each
service at forecast + swap cap = 3; 6 > 4 GPUs, and a planner filling services in order gives a 3, b 1.
b's actual 3 > 1 triggers the surge replan of step 0:
- step-0 demand max(planned, actual) = (3, 3): still 6 > 4, a keeps its margin, b gets 1:
  2 GPU-steps unmet (1.0 GPU-h);
- step-0 demand = actual = (1, 3): 4 GPUs, a gets 1, b 3: nothing unmet.
Step 1: the residuals of step 0 (a 0, b 2) give margins 0 and 2: planned (1, 3), no surge.
"""

from __future__ import annotations

import pytest
from sim_helpers import greedy_plan

from optimizer.metrics import compute
from optimizer.problem import Cluster, PlanSettings
from optimizer.scenarios import Scenario, SimService
from optimizer.simulate import SURGE_REASON, planner_fn, simulate


def two_services() -> Scenario:
    cluster = Cluster(n_gpus=4, gpus_per_node=4, step_minutes=30, horizon_steps=2)
    svcs = tuple(
        SimService(service=name, min_gpus=0, max_gpus=4, swap_cap_gpus=2, initial_gpus=1,
                   demand_true=(true,) * 4, demand_forecast=(1,) * 4)
        for name, true in (("a", 1), ("b", 3))
    )
    return Scenario("two_services", 0, cluster, PlanSettings(mip_rel_gap=0.0), 2, svcs, ())


@pytest.mark.parametrize("planner", ["greedy", "milp"])
def test_surge_plans_the_served_step_at_its_actual_demand(planner):
    fn = greedy_plan if planner == "greedy" else planner_fn("milp")
    res = simulate(two_services(), fn, name=planner, keep_plans=True)
    assert [(r.step, r.reason) for r in res.replans] == [(0, "scheduled"), (0, SURGE_REASON), (1, "scheduled")]
    assert res.service_gpus == {"a": [1, 1], "b": [3, 3]}
    assert compute(res).rt_unmet_gpu_h == 0.0
    assert [s.demand_gpus[0] for s in res.problems_at[0].services] == [1, 3]  # the surge plan's step 0
    assert res.verified_plans == 3 and res.violations == 0
