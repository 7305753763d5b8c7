"""Baselines worked by hand: FIFO's no-overtaking, EASY's head reservation, priority order,
and the static peak reservation for real-time services."""

from __future__ import annotations

import numpy as np

from optimizer.baselines import reserved_service_gpus
from optimizer.planners import plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption


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
