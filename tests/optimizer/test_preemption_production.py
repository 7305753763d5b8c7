"""The production replan (issue 30): ``production_plan`` stops by the simulator's rule; without a stop, the same plan."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optimizer.planners import PLANNERS, plan, production_plan
from optimizer.preemption import rt_shortfall
from optimizer.problem import Problem
from optimizer.verify import verify


def surge_doc(demand0: int = 4) -> dict:
    """8 GPUs; P1 (priority 2, 2 GPUs, 3 since the last checkpoint or start + 1 restart: loses 4 steps), P2 (priority 1, 2 GPUs,
    1 + 1: loses 2, the cheapest and the lowest priority: both orders pick it),
    N (2 GPUs, not preemptible, nothing to lose); 2 GPUs free; chat holds 2 and wants ``demand0`` at step 0."""
    return {
        "cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 4},
        "settings": {"budget": "work", "time_limit_s": 20},
        "services": [{"service": "chat", "demand_gpus": [demand0, 2, 2, 2], "min_gpus": 0, "max_gpus": 8,
                      "swap_cap_gpus": 4, "current_gpus": 2}],
        "jobs": [{"job_id": "Q", "kind": "training", "priority": 1, "gpus": 2, "duration_steps": 2}],
        "running": [
            {"job_id": "P1", "kind": "training", "priority": 2, "gpus": 2, "block_offset": 0, "remaining_steps": 4,
             "preemptible": True, "checkpoint_interval_steps": 4, "restart_steps": 1, "steps_since_checkpoint": 3},
            {"job_id": "P2", "kind": "training", "priority": 1, "gpus": 2, "block_offset": 2, "remaining_steps": 4,
             "preemptible": True, "checkpoint_interval_steps": 4, "restart_steps": 1, "steps_since_checkpoint": 1},
            {"job_id": "N", "kind": "training", "priority": 1, "gpus": 2, "block_offset": 4, "remaining_steps": 4},
        ],
    }


@pytest.mark.parametrize("planner", PLANNERS)
def test_surge_only_a_stop_can_serve_stops_the_cheapest(planner):
    prob = Problem.from_dict(surge_doc())
    assert rt_shortfall(prob) == 2  # chat wants min(4, 8, 2 + 4) = 4; 8 - 6 held = 2 free
    p = production_plan(prob, planner)
    assert p.stops == (("P2", 2),)  # loss 1 x 2 x 2 = 4 < P1's 2 x 2 x 4 = 16; N is never a candidate
    assert verify(p, prob) == []
    assert p.service_gpus["chat"][0] == 4
    (a,) = [a for a in p.assignments if a.job_id == "P2"]
    assert a.running and a.start_step is None


@pytest.mark.parametrize("planner", PLANNERS)
def test_no_surge_or_no_preemptible_job_gives_the_same_plan(planner):
    calm = Problem.from_dict(surge_doc(demand0=2))
    assert rt_shortfall(calm) == 0
    a, b = production_plan(calm, planner), plan(calm, planner)
    assert a.stops == () and replace(a, solve_s=0.0).to_dict() == replace(b, solve_s=0.0).to_dict()
    d = surge_doc()
    for r in d["running"]:
        r.pop("preemptible", None)
    none = Problem.from_dict(d)
    a, b = production_plan(none, planner), plan(none, planner)
    assert a.stops == () and replace(a, solve_s=0.0).to_dict() == replace(b, solve_s=0.0).to_dict()


def test_running_at_ages_checkpoints_and_counts_the_plans_starts():
    from optimizer.preemption import running_at, since_after

    d = surge_doc()
    # swap cap 2, not 4: with P1, P2 preemptible the surprise reserve (issue 30) leaves non-preemptible Q
    # 8 - 2 (N) - min(8, 2 + cap) GPUs from step 1: 0 with a cap of 4, 2 with a cap of 2
    d["services"][0]["swap_cap_gpus"] = 2
    prob = Problem.from_dict(d)
    p = production_plan(prob, "fast")  # Q starts at step 1 on P2's GPUs [2, 4)
    (q,) = [a for a in p.assignments if a.job_id == "Q"]
    assert (q.start_step, q.block_offset) == (1, 2)
    at2 = {r.job_id: r for r in running_at(p, prob, 2)}
    assert sorted(at2) == ["N", "P1", "Q"]  # P2 was stopped
    assert at2["P1"].steps_since_checkpoint == 1 and at2["P1"].remaining_steps == 2  # (3 + 2) mod 4
    assert at2["Q"].steps_since_checkpoint == 1 and not at2["Q"].preemptible
    # a requeued run before its first checkpoint (since >= interval): it comes after restart + interval steps
    assert [since_after(2, 2, 2, k) for k in range(4)] == [2, 3, 0, 1]
    assert since_after(5, None, 0, 3) == 8


def test_stops_that_are_not_enough_say_so_with_the_conflict_before_the_stops():
    """Operator trial (issue 30): when stopping every preemptible job still leaves real time short, the error
    counted the running jobs after the stops and the hint said "none preemptible". Hand case: chat min_gpus 7 (holds
    4, swap cap 4), P1 + P2 (4 GPUs, preemptible) and N (2) running on 8 GPUs: stopping both leaves 7 + 2 = 9 > 8."""
    from optimizer.diagnose import InfeasibleProblemError
    from pipelines.stages.solve import infeasible_hint

    d = surge_doc(demand0=8)
    d["services"][0].update(min_gpus=7, current_gpus=4, demand_gpus=[8, 7, 7, 7])
    d["running"][0]["block_offset"], d["running"][1]["block_offset"], d["running"][2]["block_offset"] = 0, 2, 4
    prob = Problem.from_dict(d)
    with pytest.raises(InfeasibleProblemError) as ei:
        production_plan(prob, "milp")
    e = ei.value
    assert "(even after stopping the preemptible running job(s) P1, P2: 4 GPUs freed)" in str(e)
    c = e.conflict
    assert (c.step, c.realtime, c.running, c.preemptible_running, c.up, c.shortfall) == (0, 7, 6, 4, 8, 5)
    hint = infeasible_hint(c)
    assert "none preemptible" not in hint and "4 of them on preemptible jobs, not enough" in hint
