"""Baselines worked by hand: FIFO's no-overtaking, EASY's head reservation, priority order,
and the static peak reservation for real-time services."""

from __future__ import annotations

import time

import numpy as np
import pytest

from optimizer.baselines import (
    assemble_plan,
    baseline_plan,
    demand_following_target,
    greedy_place,
    greedy_plans,
    reserved_service_gpus,
)
from optimizer.planners import plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption
from optimizer.solver import SolveStatus


def _problem(c_priority: float = 1.0) -> Problem:
    """4 GPUs, 6 steps; R holds GPUs 0-1 for steps 0-2; A needs all 4 GPUs for 2 steps, B one
    GPU for 1 step, C two GPUs for 4 steps; all released at 0."""
    jobs = (
        Job("A", "training", 1.0, 0, (SizeOption(4, 2),)),
        Job("B", "batch_inference", 1.0, 0, (SizeOption(1, 1),)),
        Job("C", "quantization", c_priority, 0, (SizeOption(2, 4),)),
    )
    return Problem(Cluster(4, 4, 30, 6), PlanSettings(), (), jobs, (RunningJob("R", "training", 1.0, 2, 0, 3),))


def _starts(r):
    return {a.job_id: (a.start_step, a.block_offset) for a in r.assignments if not a.running}


def test_fifo_strict_arrival_order_no_overtaking():
    # A first fits at 3 (R ends); B may not start before 3, and A fills steps 3-4 -> B at 5;
    # C may not start before B (5) -> C at 5 on the free 2-block 2-3.
    assert _starts(plan(_problem(), "fifo")) == {"A": (3, 0), "B": (5, 0), "C": (5, 2)}


def test_easy_backfills_only_what_does_not_delay_the_head():
    # head A reserved at 3; B (ends at 1) backfills at 0 on GPU 2; C (4 steps) would push A
    # past 3 at any step 0-2, so it waits until A ends (5).
    assert _starts(plan(_problem(), "easy")) == {"A": (3, 0), "B": (0, 2), "C": (5, 0)}


def test_priority_backfill_orders_by_priority_then_arrival():
    # C (priority 3) starts first at 0 on 2-3; head A is then reserved at 4 (C ends); B
    # backfills at 3 on GPU 0 (R has ended, B ends at 4 <= 4); A at 4.
    assert _starts(plan(_problem(3.0), "priority")) == {"C": (0, 2), "B": (3, 0), "A": (4, 0)}
    # EASY ignores priority: same as with equal priorities
    assert _starts(plan(_problem(3.0), "easy")) == {"A": (3, 0), "B": (0, 2), "C": (5, 0)}


def test_static_peak_reservation_respects_swap_cap_and_band():
    svc = Service("chat", (1, 3, 2, 1, 1, 1), 0, 4, 1, 1)
    p = Problem(Cluster(4, 4, 30, 6), PlanSettings(), (svc,), ())
    # peak 3 reached from current 1 at most 1 GPU per step, then held all day
    assert reserved_service_gpus(p).tolist() == [[2, 3, 3, 3, 3, 3]]
    capped = Problem(Cluster(4, 4, 30, 6), PlanSettings(), (Service("chat", (1, 3, 2, 1, 1, 1), 0, 2, 1, 1),), ())
    assert reserved_service_gpus(capped).tolist() == [[2, 2, 2, 2, 2, 2]]  # band max 2


def test_reservation_cut_back_when_running_jobs_hold_the_cluster():
    # two services of peak 2 on 4 GPUs, a running 2-GPU job for 2 steps: only 2 GPUs for both
    p = Problem(Cluster(4, 4, 30, 4), PlanSettings(),
                (Service("a", (2, 2, 2, 2), 0, 4, 4, 0), Service("b", (2, 2, 2, 2), 0, 4, 4, 0)), (),
                (RunningJob("R", "training", 1.0, 2, 0, 2),))
    a = reserved_service_gpus(p)
    assert a.sum(axis=0).tolist() == [2, 2, 4, 4]
    assert np.all(a[:, 2:] == 2)


def _three_orders_problem() -> Problem:
    """4 GPUs, 3 steps, no services, all released at 0: P (priority 3, 2 GPUs x 3 steps, efficiency
    0.5), Q (priority 2, 1 GPU x 1 step, or 2 GPUs x 1 step at efficiency 0.1), R (priority 1, 4 GPUs
    x 2 steps). Decay 1: a started job's value is priority x efficiency x GPUs x steps of its whole run."""
    jobs = (
        Job("P", "training", 3.0, 0, (SizeOption(2, 3, 0.5),)),
        Job("Q", "batch_inference", 2.0, 0, (SizeOption(1, 1), SizeOption(2, 1, 0.1))),
        Job("R", "training", 1.0, 0, (SizeOption(4, 2),)),
    )
    return Problem(Cluster(4, 4, 30, 3), PlanSettings(decay_per_step=1.0), (), jobs)


def _greedy_starts(p):
    return {a.job_id: (a.start_step, a.block_offset, a.gpus) for a in p.assignments if a.start_step is not None}


def test_greedy_plans_place_jobs_in_three_orders():
    plans = greedy_plans(_three_orders_problem())
    assert [(p.planner, p.n_gpus, p.horizon_steps) for p in plans] == [("greedy", 4, 3)] * 3
    assert [a.job_id for a in plans[0].assignments if a.start_step is None] == ["R"]  # not started, by name
    # priority: P on GPUs 0-1 for the whole horizon, Q on GPU 2 (1 GPU: value 2 beats 2 x 0.1 x 2 = 0.4),
    # R (all 4 GPUs) never fits
    assert _greedy_starts(plans[0]) == {"P": (0, 0, 2), "Q": (0, 2, 1)}
    # reward per GPU-step, priority x best efficiency: Q 2 > P 1.5 > R 1. Q takes GPU 0, so P takes 2-3
    assert _greedy_starts(plans[1]) == {"Q": (0, 0, 1), "P": (0, 2, 2)}
    # size x duration, largest first: R 8 > P 6 > Q 2 (its larger option). R holds steps 0-1; P starts
    # at 2 (its run goes past the horizon), Q beside it on GPU 2
    assert _greedy_starts(plans[2]) == {"R": (0, 0, 4), "P": (2, 0, 2), "Q": (2, 2, 1)}
    # equal size x duration: the higher priority first (B, though A comes first by id)
    tie = Problem(Cluster(2, 2, 30, 1), PlanSettings(), (),
                  (Job("A", "training", 1.0, 0, (SizeOption(2, 1),)), Job("B", "training", 2.0, 0, (SizeOption(2, 1),))))
    assert _greedy_starts(greedy_plans(tie)[2]) == {"B": (0, 0, 2)}
    # objective: priority x efficiency x GPU-steps of each started job's whole run (the terminal value of
    # DESIGN §5): P started at step 2 earns its 3 steps x 2 GPUs although only one step is inside the horizon
    assert [p.objective for p in plans] == [3 * 0.5 * 6 + 2 * 1, 2 * 1 + 3 * 0.5 * 6, 1 * 8 + 3 * 0.5 * 6 + 2 * 1]


def test_a_passed_deadline_starts_no_job_and_says_so():
    p = _problem()
    for name in ("fifo", "easy", "priority"):
        r = baseline_plan(p, name, deadline=0.0)  # perf_counter() is already past 0
        assert (r.planner, r.status) == (name, "feasible")
        assert [a.job_id for a in r.assignments if a.start_step is not None] == ["R"]  # only the running job
        assert r.message == f"{name} stopped at the time limit after placing 0 of 3 jobs; the rest are not started"
        assert baseline_plan(p, name).message == ""
    svc = reserved_service_gpus(p)
    assert _greedy_starts(greedy_place(p, svc, list(p.jobs), deadline=0.0)) == {"R": (0, 0, 2)}
    assert greedy_plans(p, deadline=0.0) == []
    assert len(greedy_plans(p, deadline=time.perf_counter() + 3600.0)) == 3


def test_unknown_baseline_name_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^unknown baseline planner 'sjf'; expected fifo, easy or priority$"):
        baseline_plan(_problem(), "sjf")


def test_demand_following_target_ramps_ahead_of_a_rise_and_greedy_services_follow_it():
    # "up": demand 0, 0, 2 with cap 1 must be at 1 one step early: 0, 1, 2 (T_t = max(D_t, T_t+1 - c)).
    # "down": demand 3, 0, 0 drops at once. "held": cap 0, demand 0: stays 0 (not 1)
    svcs = (Service("up", (0, 0, 2), 0, 4, 1, 0), Service("down", (3, 0, 0), 0, 4, 1, 3),
            Service("held", (0, 0, 0), 0, 4, 0, 0))
    p = Problem(Cluster(8, 8, 30, 3), PlanSettings(), svcs, (Job("J", "training", 1.0, 0, (SizeOption(1, 1),)),))
    target = demand_following_target(p)
    assert target.dtype == np.int64
    assert target.tolist() == [[0, 1, 2], [3, 0, 0], [0, 0, 0]]
    # the greedy candidates hold services on that target (swap cap 1 from current: down goes 3, 2, 1);
    # the baselines hold the peak, reached from current_gpus at the swap cap
    for plan_ in greedy_plans(p):
        assert plan_.service_gpus == {"up": (0, 1, 2), "down": (3, 2, 1), "held": (0, 0, 0)}
    assert baseline_plan(p, "fifo").service_gpus == {"up": (1, 2, 2), "down": (3, 3, 3), "held": (0, 0, 0)}


def test_solve_time_is_the_call_s_own_wall_time():
    p = _three_orders_problem()
    for call in (lambda: baseline_plan(p, "easy"), lambda: greedy_place(p, reserved_service_gpus(p), list(p.jobs))):
        t0 = time.perf_counter()
        r = call()
        elapsed_s = time.perf_counter() - t0
        assert 0.0 <= r.solve_s <= elapsed_s


def test_backfill_tries_again_the_step_after_a_backfill_and_never_goes_back():
    # 8 GPUs, GPU 7 down, so a 4-GPU job only fits on GPUs 0-3. A (2 GPUs, steps 0-3) holds GPUs 0-1,
    # so the head H (4 GPUs x 2) is reserved at step 4 on GPUs 0-3. At step 1, X (1 GPU x 6) would
    # take GPU 2 and delay H: refused. Y (2 GPUs x 2) takes GPUs 2-3 for steps 1-2 and ends before 4.
    # At step 2 the lowest free GPU for X is 4, outside H's block: X starts at 2 (not at 4, as it would
    # if the walk skipped from 1 to the next freed step).
    jobs = (Job("A", "training", 1.0, 0, (SizeOption(2, 4),)), Job("H", "training", 1.0, 0, (SizeOption(4, 2),)),
            Job("X", "batch_inference", 1.0, 1, (SizeOption(1, 6),)),
            Job("Y", "batch_inference", 1.0, 1, (SizeOption(2, 2),)))
    p = Problem(Cluster(8, 8, 30, 8), PlanSettings(), (), jobs, (), (7,))
    assert _starts(plan(p, "easy")) == {"A": (0, 0), "H": (4, 0), "X": (2, 4), "Y": (1, 2)}
    # priority: 8 GPUs, 8 steps. A (priority 3) holds GPUs 0-1 for steps 0-3; H (8 GPUs x 2) is
    # reserved at 4. L (priority 1, released 3) would delay H at 3 and at 4. C (priority 3, released 4)
    # starts at 4 on GPUs 0-3, H moves to 5 and L waits for H to end (7). Stepping back to 3 after C
    # started would let L use the room C's start revealed (L at 3 on GPUs 4-7).
    jobs = (Job("A", "training", 3.0, 0, (SizeOption(2, 4),)), Job("H", "training", 2.0, 0, (SizeOption(8, 2),)),
            Job("L", "training", 1.0, 3, (SizeOption(4, 2),)), Job("C", "training", 3.0, 4, (SizeOption(4, 1),)))
    p = Problem(Cluster(8, 8, 30, 8), PlanSettings(), (), jobs)
    assert _starts(plan(p, "priority")) == {"A": (0, 0), "C": (4, 0), "H": (5, 0), "L": (7, 0)}


def test_backfill_reserves_the_head_from_the_next_step_not_the_past():
    # 8 GPUs; the service's reservation ramps 2, 4, 6, 6 (peak 6 from current 0, swap cap 2), leaving
    # 6, 4, 2, 2 GPUs. H (4 GPUs x 2, released at 1) needs 4 at steps 1-2: never fits from step 1 on,
    # so it has no reservation and X (1 GPU x 1, behind H in arrival order) backfills at 1. (H would have
    # fitted at step 0, before its release; a reservation searched from there would refuse X.)
    svc = Service("s", (0, 0, 6, 6), 0, 8, 2, 0)
    jobs = (Job("H", "training", 1.0, 1, (SizeOption(4, 2),)), Job("X", "batch_inference", 1.0, 1, (SizeOption(1, 1),)))
    p = Problem(Cluster(8, 8, 30, 4), PlanSettings(), (svc,), jobs)
    assert reserved_service_gpus(p).tolist() == [[2, 4, 6, 6]]
    assert _starts(plan(p, "easy")) == {"H": (None, None), "X": (1, 0)}


def test_assemble_plan_keeps_the_solver_fields_it_is_given():
    # the MILP hands its bound, gap and model sizes through assemble_plan; the objective is computed
    # here: P alone, 2 GPUs x 3 steps at efficiency 0.5 and priority 3, decay 1 -> 9
    p = _three_orders_problem()
    svc = np.zeros((0, 3), dtype=np.int64)
    r = assemble_plan(p, "milp", SolveStatus.OPTIMAL, {"P": (0, 2, 2)}, svc, 1.25, bound=9.5, gap=0.05,
                      model={"binaries": 7}, message="m")
    assert (r.planner, r.status, r.objective, r.bound, r.gap, r.solve_s, r.model, r.message) == (
        "milp", "optimal", 9.0, 9.5, 0.05, 1.25, {"binaries": 7}, "m")
    assert [(a.job_id, a.start_step, a.end_step, a.block_offset, a.gpus) for a in r.assignments] == [
        ("P", 0, 3, 2, 2), ("Q", None, None, None, None), ("R", None, None, None, None)]
    plain = assemble_plan(p, "fifo", SolveStatus.FEASIBLE, {}, svc, 0.0)
    assert (plain.bound, plain.gap, plain.model, plain.objective) == (None, None, None, 0.0)


def test_reservation_cuts_the_last_service_first_and_never_below_its_band():
    def rows(avail_gpus: int, min_gpus: int = 0) -> list[list[int]]:
        # two services of peak 2 (band min_gpus..4, swap cap 4, current 0) on 4 GPUs, 4 - avail_gpus
        # of them down
        svcs = (Service("a", (2, 2), min_gpus, 4, 4, 0), Service("b", (2, 2), min_gpus, 4, 4, 0))
        down = tuple(range(4 - avail_gpus))
        return reserved_service_gpus(Problem(Cluster(4, 4, 30, 2), PlanSettings(), svcs, (), (), down)).tolist()

    assert rows(4) == [[2, 2], [2, 2]]
    assert rows(2) == [[2, 2], [0, 0]]  # 2 GPUs too many: b, the last service, gives both
    assert rows(1) == [[1, 1], [0, 0]]  # 3 too many: b gives 2, then a gives 1
    assert rows(2, min_gpus=1) == [[1, 1], [1, 1]]  # b gives only down to its band minimum, then a
    empty = Problem(Cluster(4, 4, 30, 2), PlanSettings(), (), ())
    assert reserved_service_gpus(empty).shape == (0, 2)  # (n_services, horizon_steps)


def test_room_that_frees_at_step_1_of_a_2_step_horizon_is_used():
    # R holds all 4 GPUs at step 0; J (released at 0) starts at 1, its run cut at the horizon
    p = Problem(Cluster(4, 4, 30, 2), PlanSettings(), (), (Job("J", "training", 1.0, 0, (SizeOption(4, 2),)),),
                (RunningJob("R", "training", 1.0, 4, 0, 1),))
    for name in ("fifo", "easy", "priority"):
        assert _starts(plan(p, name)) == {"J": (1, 0)}


def test_greedy_candidates_stop_placing_when_the_deadline_passes_mid_order(monkeypatch):
    # a clock that reads 1, 2, 3, ... (one tick per call) and a deadline of 3.5: the first order
    # starts (tick 1), places its first job (ticks 2 and 3: start of the call, check before P), stops
    # before its second job (tick 4) and no second order is started (tick 6)
    ticks = iter(range(1, 100))
    monkeypatch.setattr("optimizer.baselines.time", type("Clock", (), {"perf_counter": lambda: float(next(ticks))}))
    plans = greedy_plans(_three_orders_problem(), deadline=3.5)
    assert len(plans) == 1 and _greedy_starts(plans[0]) == {"P": (0, 0, 2)}
