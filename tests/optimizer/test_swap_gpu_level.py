"""The swap cap at GPU level (issue 26): GPUs swapped = max(GPUs added, GPUs released) per service and step.

The shipped demo's plan (``tests/data/demo_plan_swap.json``: ``gpuplan run`` on ``data/demo``, plan start
2025-03-16T16:00Z) moved both services at step 17 (00:30 UTC) with no change in count, m-mid 11 of its 16 GPUs
and m-small 5 of its 7 on the GPU-level rows of its ``plan.parquet``, while their swap caps are 8 and 4.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.placement import gpus_swapped, hold_services, service_placement, swap_excess
from optimizer.plan import JobAssignment, Plan
from optimizer.planners import PLANNERS, plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption
from optimizer.verify import placement_violations, verify

DEMO = json.loads((Path(__file__).parents[1] / "data" / "demo_plan_swap.json").read_text())


@pytest.fixture(scope="module")
def demo() -> tuple[Problem, Plan]:
    return Problem.from_dict(DEMO["problem"]), Plan.from_dict(DEMO["plan"])


def test_gpus_swapped_is_the_larger_of_added_and_released():
    assert gpus_swapped((0, 1, 2, 3), (0, 1, 2, 4)) == 1  # one replica moved
    assert gpus_swapped((0, 1), (0, 1, 2, 3)) == 2  # grown by two
    assert gpus_swapped((0, 1, 2, 3), (2, 3)) == 2  # shrunk by two
    assert gpus_swapped((0, 1, 2), (3, 4)) == 3  # all three released, two added
    assert gpus_swapped((), ()) == 0


def test_shipped_demo_plan_breaks_both_swap_caps_at_gpu_level(demo):
    problem, p = demo
    shown = {n: tuple(tuple(s) for s in steps) for n, steps in DEMO["gpu_step_services"].items()}
    # the GPU-level rows the demo's plan.parquet shows: the 11 of 16 and 5 of 7 at 00:30
    assert placement_violations(p, problem, shown) == [
        "service 'm-small': step 17: swaps 5 GPUs at GPU level (added 5, released 5), swap cap is 4",
        "service 'm-mid': step 17: swaps 11 GPUs at GPU level (added 11, released 11), swap cap is 8"]
    assert [len(shown["m-mid"][16]), len(shown["m-small"][16])] == [16, 7]
    # the GPU-level plan the verifier checks (and plan.parquet shows): the same blocks, the replicas that
    # qqnt's block will take moved off ahead of it, at most the cap per step
    placed = service_placement(problem, p)
    assert verify(p, problem) == []
    assert [max(gpus_swapped(placed[n][t - 1], placed[n][t]) for t in range(1, 48)) for n in ("m-mid", "m-small")] \
        == [8, 3]
    assert hold_services(problem, p) is p  # nothing to re-pack


@pytest.mark.parametrize("planner", PLANNERS)
def test_every_planner_keeps_the_swap_cap_at_gpu_level_on_the_demo_problem(demo, planner):
    problem, _ = demo
    p = plan(problem, planner)
    assert verify(p, problem) == []
    placed = service_placement(problem, p)
    assert swap_excess(problem, placed) == 0
    for s in problem.services:
        worst = max(gpus_swapped(placed[s.service][t - 1], placed[s.service][t]) for t in range(1, 48))
        assert worst <= s.swap_cap_gpus


def _fragments_problem(cap: int) -> Problem:
    """8 GPUs, 3 steps. Running: R on 0-1, Q on 2, T on 5 (whole horizon), P on 3 and S on 4 (step 0 only).

    chat holds 2 GPUs in band [2, 8]: at step 0 only 6-7 are free. J (2 GPUs, 1 step, released at step 1):
    the only aligned 2-block free at steps 1-2 is 6-7, chat's; the free GPUs 3 and 4 are not aligned.
    """
    return Problem(Cluster(8, 8, 30, 3), PlanSettings(),
                   (Service("chat", (2, 2, 2), 2, 8, cap, 2),),
                   (Job("J", "training", 1.0, 1, (SizeOption(2, 1),)),),
                   (RunningJob("R", "training", 1.0, 2, 0, 3), RunningJob("Q", "training", 1.0, 1, 2, 3),
                    RunningJob("P", "training", 1.0, 1, 3, 1), RunningJob("S", "training", 1.0, 1, 4, 1),
                    RunningJob("T", "training", 1.0, 1, 5, 3)))


def _fragments_plan(start: int | None) -> Plan:
    run = (JobAssignment("R", 0, 3, 0, 2, running=True), JobAssignment("Q", 0, 3, 2, 1, running=True),
           JobAssignment("P", 0, 1, 3, 1, running=True), JobAssignment("S", 0, 1, 4, 1, running=True),
           JobAssignment("T", 0, 3, 5, 1, running=True))
    j = JobAssignment("J", None, None, None, None) if start is None else JobAssignment("J", start, start + 1, 6, 2)
    return Plan("hand", "feasible", run + (j,), {"chat": (2, 2, 2)}, 0.0, None, None, 0.0, None,
                n_gpus=8, horizon_steps=3)


def test_a_block_on_both_replicas_moves_two_gpus():
    p2 = _fragments_problem(cap=2)
    assert service_placement(p2, _fragments_plan(1))["chat"] == ((6, 7), (3, 4), (3, 4))
    assert verify(_fragments_plan(1), p2) == []
    p1 = _fragments_problem(cap=1)
    assert verify(_fragments_plan(1), p1) == [
        "service 'chat': step 1: swaps 2 GPUs at GPU level (added 2, released 2), swap cap is 1"]
    assert verify(_fragments_plan(None), p1) == []


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_start_that_would_move_more_replicas_than_the_cap_waits(planner):
    # cap 1: J waits one step while chat moves one replica off 6-7 (to 4), then the other (to 3) as J starts
    p1 = _fragments_problem(cap=1)
    got = plan(p1, planner)
    assert verify(got, p1) == []
    assert {a.job_id: (a.start_step, a.block_offset) for a in got.assignments}["J"] == (2, 6)
    assert service_placement(p1, got)["chat"] == ((6, 7), (4, 6), (3, 4))
    # cap 0: chat can never leave 6-7, so J never starts
    p0 = _fragments_problem(cap=0)
    got = plan(p0, planner)
    assert verify(got, p0) == []
    assert {a.job_id: a.start_step for a in got.assignments}["J"] is None
    # with a cap of 2 the move is allowed and every planner starts J at its release, on 6-7
    p2 = _fragments_problem(cap=2)
    assert {a.job_id: (a.start_step, a.block_offset) for a in plan(p2, planner).assignments}["J"] == (1, 6)
