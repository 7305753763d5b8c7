"""The fast mode (issue 29, ``planner = "fast"``): hand-solvable plans, the candidates it ranks, the MILP above it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optimizer.capacity import least_unmet_rt
from optimizer.examples import random_problem
from optimizer.fast import fast_candidates, fast_plan
from optimizer.planners import PLANNERS, plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, Service, SizeOption
from optimizer.ranking import rank
from optimizer.verify import verify


def _starts(p):
    return {a.job_id: (a.start_step, a.block_offset, a.gpus) for a in p.assignments if not a.running}


def _valley() -> Problem:
    """8 GPUs, 4 steps; chat needs 6 GPUs at steps 0-1 and none after (swap cap 8); A needs 4 GPUs for 2 steps,
    B 2 GPUs for 4 steps. Holding chat's daily peak (6) leaves 2 GPUs: A never fits."""
    svc = (Service("chat", (6, 6, 0, 0), 0, 8, 8, 6),)
    jobs = (Job("A", "training", 1.0, 0, (SizeOption(4, 2),)), Job("B", "batch_inference", 1.0, 0, (SizeOption(2, 4),)))
    return Problem(Cluster(8, 8, 30, 4), PlanSettings(), svc, jobs)


def test_fast_reserves_real_time_on_the_demand_curve_and_starts_what_the_peak_reservation_blocks():
    p = _valley()
    prio = plan(p, "priority")
    assert _starts(prio) == {"A": (None, None, None), "B": (0, 0, 2)} and prio.service_gpus == {"chat": (6, 6, 6, 6)}
    f = plan(p, "fast")
    assert f.planner == "fast" and f.source == "greedy" and verify(f, p) == []
    # chat follows its demand, B starts at once beside it, A when chat drops at step 2
    assert f.service_gpus == {"chat": (6, 6, 0, 0)}
    assert _starts(f) == {"A": (2, 0, 4), "B": (0, 4, 2)}
    g = 0.995  # PlanSettings' default decay per step: value = priority x GPUs x sum of decay over the run's steps
    assert f.objective == pytest.approx(4 * (g**2 + g**3) + 2 * (1 + g + g**2 + g**3), rel=1e-9)
    assert f.notes[-1] == "fast mode: best verified of 4 candidates (priority backfill, greedy orders): greedy"
    m = plan(p, "milp")
    assert m.status == "optimal" and m.objective == pytest.approx(f.objective, rel=1e-9)  # the optimum here


def test_fast_keeps_priority_backfill_when_no_greedy_order_ranks_higher():
    # no service: the greedy orders and priority backfill give the same plan; the first of equals (priority) wins
    jobs = (Job("A", "training", 2.0, 0, (SizeOption(4, 2),)), Job("B", "training", 1.0, 0, (SizeOption(4, 2),)))
    p = Problem(Cluster(4, 4, 30, 4), PlanSettings(), (), jobs)
    f = fast_plan(p)
    assert f.source == "priority" and _starts(f) == {"A": (0, 0, 4), "B": (2, 0, 4)}
    assert [c.planner for c in fast_candidates(p)] == ["priority", "greedy", "greedy", "greedy"]


def test_fast_is_in_every_planner_list_and_named_in_its_plan():
    assert "fast" in PLANNERS
    p = _valley()
    assert plan(p, "fast").planner == "fast"


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_fast_never_below_priority_backfill_and_the_milp_never_below_fast(seed):
    p = random_problem(16, 10, 12, seed=seed)
    p = replace(p, settings=replace(p.settings, budget="work", time_limit_s=60.0))
    least = least_unmet_rt(p)
    f, prio, m = plan(p, "fast"), plan(p, "priority"), plan(p, "milp")
    assert verify(f, p) == []
    assert rank(f, p, least) >= rank(prio, p, least)
    rf, rm = rank(f, p, least), rank(m, p, least)
    assert rm[0] >= rf[0] and (rm[0] > rf[0] or m.objective >= f.objective - 1e-7 * max(1.0, abs(f.objective)))
