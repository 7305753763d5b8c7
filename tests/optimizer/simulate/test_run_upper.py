"""Running jobs are counted at an upper run length in every plan (issue 15, DESIGN §6.1), by hand.

4 GPUs (one node), 4-step horizon, 4-step window, MILP planner at gap 0. Service s: demand 3 at
step 3 only (forecast exact), band [0, 4], swap cap 4, none held. Jobs, all priority 1:
W (1 GPU, forecast 1 step, runs 2) and A (2 GPUs, forecast 2, runs 4) start at 0; Z (1 GPU,
forecast 2, runs 2) arrives at 2. (The real-time margin is off here: exact forecasts, and its cold
start would hold the swap cap at step 0.) W completes at 2: ratio actual/forecast 2, so from step 2 on A
is counted to 0 + 2 x 2 = step 4 instead of its forecast end 2.
- Forecast end only: at step 2 A seems to end at 3, so Z starts at 2 and the service is planned 3
  GPUs at step 3. At step 3 A still holds 2 and Z 1: the service gets 1, 2 GPU-steps unmet.
- Upper run length: at step 2 A holds GPUs 2-3, so at most 2 GPUs are left for demand 3 at step 3
  (U* = 1); Z at 2 would leave 2 unmet, so real time first keeps Z waiting: the service gets 2 at
  step 3, 1 GPU-step unmet.
"""

from __future__ import annotations

from optimizer.metrics import compute
from optimizer.problem import Cluster, PlanSettings
from optimizer.scenarios import Scenario, SimJob, SimService
from optimizer.simulate import planner_fn, simulate


def overrun_scenario() -> Scenario:
    cluster = Cluster(n_gpus=4, gpus_per_node=4, step_minutes=30, horizon_steps=4)
    demand = (0, 0, 0, 3, 0, 0, 0, 0)
    svc = SimService(service="s", min_gpus=0, max_gpus=4, swap_cap_gpus=4, initial_gpus=0,
                     demand_true=demand, demand_forecast=demand)
    jobs = (
        SimJob("W", "training", 1.0, 0, 1, 2, 1),
        SimJob("A", "training", 1.0, 0, 2, 4, 2),
        SimJob("Z", "training", 1.0, 2, 1, 2, 2),
    )
    return Scenario("overrun", 0, cluster, PlanSettings(mip_rel_gap=0.0), 4, (svc,), jobs)


def test_forecast_end_only_under_serves_real_time():
    res = simulate(overrun_scenario(), planner_fn("milp"), name="milp", run_upper=False, rt_margin_alpha=None)
    assert res.jobs["Z"].first_start_step == 2
    assert res.service_gpus["s"][3] == 1
    assert compute(res).rt_unmet_gpu_h == 1.0  # 2 GPU-steps x 0.5 h


def test_upper_run_length_keeps_the_gpus_real_time_will_need():
    res = simulate(overrun_scenario(), planner_fn("milp"), name="milp", keep_plans=True, rt_margin_alpha=None)
    assert [r.remaining_steps for r in res.problems_at[2].running] == [2]  # A: 0 + 2 x 2 - 2
    assert res.jobs["Z"].first_start_step is None
    assert res.service_gpus["s"][3] == 2
    assert compute(res).rt_unmet_gpu_h == 0.5  # 1 GPU-step x 0.5 h
