"""The starvation guard (``max_wait_steps``, DESIGN §5) on the typed pool master (issue 26).

Hand-solvable, typed (one h100 node ``h1`` of 4 GPUs, so the pool master plans it): R runs on GPUs 0-1 for 3
more steps. BIG (4 GPUs, 2 steps, priority 1) is first in arrival order; SMALL (2 GPUs, 4 steps, priority 3)
second. Without the guard the MILP starts SMALL at 0 on GPUs 2-3 (its reward is the larger) and BIG at 4,
after SMALL: BIG is delayed by a later job. With ``max_wait_steps = 0`` BIG is reserved from step 0; SMALL may
run only where BIG has no room (steps 0-2, while R holds 2 GPUs), and with its 4 steps it would still run at
step 3, when BIG has room: so BIG starts at 3 and SMALL after it, at 5.
"""

from __future__ import annotations

import pytest

from optimizer.objective import run_decay
from optimizer.planners import plan
from optimizer.problem import Cluster, Job, Node, PlanSettings, Problem, RunningJob, SizeOption
from optimizer.verify import max_wait_violations, verify


def _problem(wait: int | None) -> Problem:
    return Problem(Cluster(0, 4, 30, 10, nodes=(Node("h1", 4, "h100"),)),
                   PlanSettings(max_wait_steps=wait, budget="work"), (),
                   (Job("BIG", "training", 1.0, 0, (SizeOption(4, 2),), gpu_types=("h100",)),
                    Job("SMALL", "training", 3.0, 0, (SizeOption(2, 4),), gpu_types=("h100",))),
                   (RunningJob("R", "training", 1.0, 2, 0, 3),))


def test_without_the_guard_small_goes_first_and_delays_big():
    p = _problem(None)
    got = plan(p, "milp")
    starts = {a.job_id: a.start_step for a in got.assignments}
    assert starts["SMALL"] == 0 and starts["BIG"] == 4
    assert max_wait_violations(got, _problem(0))  # the same plan breaks the guard


def test_typed_pool_master_keeps_the_guard_big_at_3_small_at_5():
    p = _problem(0)
    got = plan(p, "milp")
    assert verify(got, p) == [] and got.source != "fallback"
    starts = {a.job_id: (a.start_step, a.block_offset) for a in got.assignments}
    assert starts["BIG"] == (3, 0) and starts["SMALL"][0] == 5
    g = p.settings.decay_per_step
    assert got.objective == pytest.approx(4 * run_decay(g, 3, 2) + 3 * 2 * run_decay(g, 5, 4))
    assert got.status == "optimal"
    assert "max_wait_steps=0" in " ".join(got.notes)
    # never below a baseline plan that keeps the guard (EASY's: the same plan); priority backfill's breaks it
    bases = {b: plan(p, b) for b in ("fifo", "easy", "priority")}
    keep = [q.objective for q in bases.values() if not max_wait_violations(q, p)]
    assert keep and got.objective >= max(keep) - 1e-9
    assert bases["easy"].objective == pytest.approx(got.objective)
    assert max_wait_violations(bases["priority"], p)
