"""The independent verifier names each kind of violation (one hand-made plan per rule)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption
from optimizer.verify import verify

P = Problem(
    Cluster(8, 4, 30, 6),
    PlanSettings(multi_node_blocks=True),
    (Service("chat", (2, 2, 2, 2, 2, 2), 1, 4, 1, 2),),
    (
        Job("A", "training", 1.0, 1, (SizeOption(4, 2), SizeOption(2, 3, 0.9))),
        Job("B", "quantization", 2.0, 0, (SizeOption(2, 2),)),
    ),
    (RunningJob("R", "training", 1.0, 2, 0, 2),),
    down_gpus=(7,),
)


def good(**changes) -> Plan:
    """R on GPUs 0-1 for steps 0-1, B on 2-3 for steps 0-1, A on 0-3 for steps 2-3; chat holds 2."""
    a = {
        "R": JobAssignment("R", 0, 2, 0, 2, running=True),
        "A": JobAssignment("A", 2, 4, 0, 4),
        "B": JobAssignment("B", 0, 2, 2, 2),
    }
    a.update(changes.pop("assign", {}))
    base = Plan("test", "heuristic", tuple(a.values()), {"chat": (2,) * 6}, 0.0, None, None, 0.0, None,
                n_gpus=8, horizon_steps=6)
    return replace(base, **changes)


def _one(plan: Plan, *fragments: str, problem: Problem = P) -> None:
    v = verify(plan, problem)
    assert v, "expected a violation"
    text = " | ".join(v)
    for f in fragments:
        assert f in text, text


def test_valid_plan_has_no_violations():
    assert verify(good(), P) == []


def test_one_task_per_gpu():
    _one(good(assign={"B": JobAssignment("B", 1, 3, 2, 2), "A": JobAssignment("A", 2, 4, 0, 4)}),
         "GPU 2 used by both", "one task per GPU")


def test_gpu_count_with_real_time():
    _one(good(service_gpus={"chat": (3, 4, 4, 4, 4, 4)}), "exceed the 7 GPUs up")


def test_band_swap_cap_and_hard_demand():
    _one(good(service_gpus={"chat": (2, 0, 1, 1, 1, 1)}), "outside its band [1, 4]")
    _one(good(service_gpus={"chat": (2, 4, 4, 4, 4, 4)}), "changes 2 -> 4 GPUs, swap cap is 1")
    hard = replace(P, settings=replace(P.settings, demand_hard=True))
    _one(good(service_gpus={"chat": (1, 1, 1, 1, 1, 1)}), "below hard demand 2", problem=hard)
    _one(good(service_gpus={}), "service 'chat': missing")
    _one(good(service_gpus={"chat": (2,) * 5}), "5 steps of GPUs, horizon is 6")


def test_blocks_sizes_alignment_release_duration():
    _one(good(assign={"A": JobAssignment("A", 2, 4, 2, 4)}), "block_offset 2 not aligned to its size 4")
    _one(good(assign={"A": JobAssignment("A", 2, 4, 0, 8)}), "8 GPUs is not one of its sizes [4, 2]")
    _one(good(assign={"A": JobAssignment("A", 0, 2, 4, 4)}), "before its release step 1")
    _one(good(assign={"A": JobAssignment("A", 2, 3, 0, 4)}), "runs 1 steps on 4 GPUs, its duration is 2")
    _one(good(assign={"A": JobAssignment("A", 2, 5, 2, 3)}), "3 GPUs is not one of its sizes")
    _one(good(assign={"A": JobAssignment("A", 6, 8, 0, 4)}), "outside the horizon")
    _one(good(assign={"A": JobAssignment("A", 2, 4, 4, 4)}), "uses down GPU(s) [7]")
    _one(good(assign={"A": JobAssignment("A", None, 4, None, None)}), "not started but")
    # the second size option with its own duration is fine
    assert verify(good(assign={"A": JobAssignment("A", 2, 5, 4, 2)}), P) == []


def test_running_job_stays_and_job_lists_are_complete():
    _one(good(assign={"R": JobAssignment("R", 0, 2, 2, 2, running=True)}), "running job 'R': moved or stopped")
    _one(good(assign={"R": JobAssignment("R", 0, 1, 0, 2, running=True)}), "running job 'R': moved or stopped")
    plan = good()
    _one(replace(plan, assignments=plan.assignments[:2]), "job 'B': missing from the plan")
    _one(replace(plan, assignments=plan.assignments + (JobAssignment("Z", None, None, None, None),)),
         "job 'Z': not in the problem")
    _one(replace(plan, assignments=plan.assignments + (plan.assignments[2],)), "job 'B': listed 2 times")


@pytest.mark.parametrize("remaining", [0, -3])
def test_running_job_with_remaining_below_1_is_planned_for_1_step(remaining):
    p = replace(P, running=(RunningJob("R", "training", 1.0, 2, 0, remaining),))
    assert verify(good(assign={"R": JobAssignment("R", 0, 1, 0, 2, running=True)}), p) == []
