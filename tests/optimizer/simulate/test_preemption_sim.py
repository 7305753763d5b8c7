"""Surge preemption in the simulator, by hand (issue 30, DESIGN §6.2).

8 GPUs (one node), horizon 4, window 12 steps of 30 min, real-time margin off. Service ``chat`` [0, 8], swap
cap 2, forecast 0 everywhere (the plan foresees nothing), actual 2 at the surge step(s), else 0. Jobs arriving
at step 0, all started at once (8 GPUs): P1 (2 GPUs, 6 steps, preemptible, checkpoint every 2, restart 1,
priority 1), P2 (2 GPUs, 6 steps, preemptible, no checkpoint, priority 1), N (4 GPUs, 8 steps, not preemptible,
priority 0.1). At a surge of 2 at step 3 nothing is free, so only a stop serves it: P1 has 1 step since its
checkpoint at 2 (+ restart 1: loses 1 x 2 x 2 = 4), P2 3 steps since its start (loses 6), N cheapest by
priority but not preemptible. P1 is stopped: 4 GPU-steps = 2.0 GPU-h lost, requeued with 6 - 2 + 1 = 5 steps,
restarted at step 4 (the service gives its 2 GPUs back), done at 9.
"""

from __future__ import annotations

import pytest

from optimizer.metrics import compute
from optimizer.problem import Cluster, PlanSettings
from optimizer.scenarios import Scenario, SimJob, SimService
from optimizer.simulate import planner_fn, simulate

T, H = 12, 4


def scenario(surge_steps=(3,)):
    cluster = Cluster(n_gpus=8, gpus_per_node=8, step_minutes=30, horizon_steps=H)
    demand = tuple(2 if t in surge_steps else 0 for t in range(T + H))
    svc = SimService(service="chat", min_gpus=0, max_gpus=8, swap_cap_gpus=2, initial_gpus=0,
                     demand_true=demand, demand_forecast=(0,) * (T + H))
    jobs = (
        SimJob("P1", "training", 1.0, 0, 2, 6, 6, preemptible=True, checkpoint_interval_steps=2, restart_steps=1),
        SimJob("P2", "training", 1.0, 0, 2, 6, 6, preemptible=True),
        SimJob("N", "training", 0.1, 0, 4, 8, 8),
    )
    return Scenario("preempt", 0, cluster, PlanSettings(mip_rel_gap=0.0), T, (svc,), jobs)


@pytest.mark.parametrize("planner", ["fast", "priority", "milp"])
def test_surge_only_a_stop_serves_stops_the_cheapest(planner):
    res = simulate(scenario(), planner_fn(planner), name=planner, rt_margin_alpha=None)
    assert res.stops_per_job == {"P1": 1}
    assert res.jobs["P1"].stop_steps == [3]
    assert res.preempted_gpu_h == 2.0  # (1 since the checkpoint + 1 restart) x 2 GPUs x 0.5 h
    assert res.service_gpus["chat"][3] == 2
    assert compute(res).rt_unmet_gpu_h == 0.0
    p1 = res.jobs["P1"]
    assert (p1.priority, p1.start_step, p1.end_step) == (1.0, 4, 9)  # 5 steps of remaining work + restart
    assert res.jobs["P2"].end_step == 6 and res.jobs["N"].end_step == 8
    # lost (not value): 1 step since the checkpoint at stop + the restart step run at 4, on 2 GPUs
    assert (p1.lost_gpu_steps, p1.run_gpu_steps) == (4, 2 * 3 + 2 * 5)


def test_priority_order_stops_lowest_priority_preemptible():
    res = simulate(scenario(), planner_fn("priority"), name="priority", rt_margin_alpha=None,
                   preempt_order="priority")
    assert res.stops_per_job == {"P1": 1}  # P1, P2 tie on priority 1: by id; N (0.1) is not preemptible


def test_no_surge_nothing_stopped():
    res = simulate(scenario(surge_steps=()), planner_fn("fast"), name="fast", rt_margin_alpha=None)
    assert res.stops_per_job == {} and res.preempted_gpu_h == 0.0


def test_no_preemption_leaves_the_shortfall():
    res = simulate(scenario(), planner_fn("fast"), name="fast", rt_margin_alpha=None, preempt_order=None)
    assert res.stops_per_job == {} and res.service_gpus["chat"][3] == 0
    assert compute(res).rt_unmet_gpu_h == 1.0


def test_stopped_at_its_checkpoint_loses_only_the_restart():
    res = simulate(scenario(surge_steps=(2,)), planner_fn("fast"), name="fast", rt_margin_alpha=None)
    assert res.stops_per_job == {"P1": 1}
    assert res.preempted_gpu_h == 1.0  # 0 since the checkpoint at 2 + restart 1, x 2 GPUs x 0.5 h
    assert res.jobs["P1"].end_step == 3 + (6 - 2 + 1)


def test_stop_cap_holds():
    res = simulate(scenario(surge_steps=(2, 5, 8)), planner_fn("fast"), name="fast", rt_margin_alpha=None,
                   max_stops_per_24h=1)
    assert all(n <= 1 for n in res.stops_per_job.values())
    assert sum(res.stops_per_job.values()) >= 1


def test_a_second_stop_before_the_next_checkpoint_does_not_count_the_first_restart_again():
    # P1 (2 GPUs, checkpoint every 2 steps, restart 1): stopped at its checkpoint at 2 (loses the restart only:
    # 1 step), back at 3 where it restarts for 1 step, stopped again at 5: 1 step of work since its start + the new
    # restart = 2 steps (the restart step of 3 was the first stop's loss). (1 + 2) x 2 GPUs x 0.5 h = 3.0 GPU-h.
    res = simulate(scenario(surge_steps=(2, 5, 8)), planner_fn("fast"), name="fast", rt_margin_alpha=None)
    assert res.jobs["P1"].stop_steps == [2, 5]
    assert res.preempted_gpu_h == 3.0  # was 4.0: the restart step counted by both stops
    assert res.jobs["P1"].lost_gpu_steps * 0.5 == 3.0  # the job's own record of lost work agrees


def test_queued_jobs_carry_their_preemption_fields():
    """The replan's problem marks queued jobs as the scenario does (the surprise reserve reads them, issue 30)."""
    seen = []
    inner = planner_fn("fast")

    def fn(problem, warm_start):
        seen.append(problem)
        return inner(problem, warm_start)

    simulate(scenario(), fn, name="fast", rt_margin_alpha=None)
    first = {j.job_id: (j.preemptible, j.checkpoint_interval_steps, j.restart_steps) for j in seen[0].jobs}
    assert first == {"P1": (True, 2, 1), "P2": (True, None, 0), "N": (False, None, 0)}
