"""What-if edits and explanations (optimizer.whatif) on a problem small enough to solve by hand.

The hand problem (``HAND``): 8 GPUs on two 4-GPU nodes, 8 steps, decay 0.9, no real-time service.
R (priority 4) is running on GPUs [4, 8) for 2 more steps; A (8 GPUs, 2 steps) and B (4 GPUs,
3 steps), priority 1, are queued. B fits only on [0, 4) before R ends; A needs all 8 GPUs.
- Base: B at 0 on [0, 4), A at 3 (after B ends) on [0, 8). The alternative A at 2, B at 4 is worth
  8(g^2+g^3) + 4(g^4+g^5+g^6) = 19.42 < 4(1+g+g^2) + 8(g^3+g^4) = 21.92 (g = 0.9, priority 1).
- +8 GPUs (GPUs [8, 16)): A starts at 0 on [8, 16), the only 8-block free at step 0; B keeps step 0.
- node-01 ([4, 8)) drained: R is lost and requeued (2 steps, its remaining); 4 GPUs are up, A can
  never run; R (priority 4) goes first on [0, 4) at step 0 and B follows at step 2:
  4*4(1+g) + 4(g^2+g^3+g^4) = 39.18 > 4(1+g+g^2) + 16(g^3+g^4) = 33.00 the other way round.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.errors import InputError
from optimizer.planners import plan
from optimizer.problem import Problem
from optimizer.verify import verify
from optimizer.whatif import WhatIf, apply_whatif, explain, warm_start

#: The hand problem (8 GPUs on two 4-GPU nodes, 8 steps; worked in tests/optimizer/test_whatif.py), shared by
#: the what-if tests: tests/data/whatif_hand.json.
HAND = json.loads((Path(__file__).resolve().parents[1] / "data" / "whatif_hand.json").read_text())


def _starts(p):
    return {a.job_id: (a.start_step, a.block_offset) for a in p.assignments}


@pytest.fixture(scope="module")
def base():
    prob = Problem.from_dict(HAND)
    pl = plan(prob, "milp")
    assert _starts(pl) == {"R": (0, 4), "B": (0, 0), "A": (3, 0)}  # the hand solution
    return prob, pl


def _replan(base, w):
    prob, pl = base
    ap = apply_whatif(prob, w)
    new = plan(ap.problem, "milp", warm_start(pl, ap))
    assert verify(new, ap.problem) == []
    return ap, new, {c.job_id: c for c in explain(prob, pl, ap, new)}


def test_add_gpus_starts_a_earlier_on_the_added_node(base):
    ap, new, ch = _replan(base, WhatIf(add_gpus=8))
    assert ap.problem.n_gpus == 16 and ap.problem.down_gpus == () and ap.physical_gpus == 16
    assert _starts(new)["A"] == (0, 8) and _starts(new)["B"][0] == 0
    a = ch["A"]
    assert (a.start_base, a.start_whatif, a.delta_steps, a.kind) == (3, 0, -3, "earlier")
    assert a.reason == "starts earlier: runs on added GPUs [8, 16)"
    assert "B" not in ch or ch["B"].start_whatif == 0  # B may only be re-packed


def test_drain_node_lets_the_running_job_finish_and_starts_nothing_new_there(base):
    # case 022: Slurm's drain. R keeps GPUs [4, 8) until its planned end (step 2); nothing new starts on the
    # node afterwards, so only [0, 4) takes new work: B keeps step 0 there and A (8 GPUs) can never start
    ap, new, ch = _replan(base, WhatIf(drain_groups=(("node-01 drained", (4, 5, 6, 7)),)))
    assert ap.problem.down_gpus == (4, 5, 6, 7) and [r.job_id for r in ap.problem.running] == ["R"]
    assert ap.requeued == {}
    assert _starts(new) == {"R": (0, 4), "B": (0, 0), "A": (None, None)}
    r = next(a for a in new.assignments if a.job_id == "R")
    assert (r.start_step, r.end_step, r.block_offset, r.gpus) == (0, 2, 4, 4)  # not preempted, not moved
    assert sorted(ch) == ["A"]  # R and B unchanged
    assert ch["A"].reason == ("no longer starts within the horizon: no aligned block of 8 GPUs is fully up any more "
                              "(4 GPUs up); its base block GPUs [0, 8) is down (node-01 drained)")


def test_fail_node_requeues_the_running_job_and_moves_the_others(base):
    ap, new, ch = _replan(base, WhatIf(fail_groups=(("node-01 drained", (4, 5, 6, 7)),)))
    assert ap.problem.down_gpus == (4, 5, 6, 7) and [r.job_id for r in ap.problem.running] == []
    assert _starts(new) == {"R": (0, 0), "B": (2, 0), "A": (None, None)}
    assert ch["R"].kind == "requeued" and ch["R"].reason == (
        "was running on GPUs [4, 8) (node-01 drained): lost, requeued to restart from scratch (2 steps); "
        "starts at step 0 on GPUs [0, 4)")
    assert ch["B"].reason == "starts later: its base block GPUs [0, 4) from step 0 is now held by requeued job R"
    assert (ch["B"].start_base, ch["B"].start_whatif) == (0, 2)
    assert ch["A"].reason == ("no longer starts within the horizon: no aligned block of 8 GPUs is fully up any more "
                              "(4 GPUs up); its base block GPUs [0, 8) is down (node-01 drained)")


def test_restart_steps_and_cancel_and_priority(base):
    prob, _ = base
    ap = apply_whatif(prob, WhatIf(fail_groups=(("GPUs 4-5 failed", (4, 5)),), restart_steps={"R": 6},
                                   cancel=("A",), priority=(("B", 8.0),)))
    assert [(j.job_id, j.priority, j.requested.gpus, j.requested.duration_steps) for j in ap.problem.jobs] == [
        ("B", 8.0, 4, 3), ("R", 4.0, 4, 6)]
    assert ap.cancelled == ("A",) and ap.priority == {"B": (1.0, 8.0)}
    assert ap.requeued == {"R": "was running on GPUs [4, 8) (GPUs 4-5 failed): lost, requeued to restart from "
                                "scratch (6 steps)"}


def test_add_gpus_to_a_non_power_of_two_pads_with_down_gpus():
    d = {**HAND, "cluster": {**HAND["cluster"], "n_gpus": 64, "gpus_per_node": 8}}
    ap = apply_whatif(Problem.from_dict(d), WhatIf(add_gpus=16))
    assert ap.problem.n_gpus == 128 and ap.physical_gpus == 80
    assert ap.problem.down_gpus == tuple(range(80, 128))


def test_demand_scale_rounds_up_and_keeps_current():
    d = {**HAND, "services": [{"service": "chat", "demand_gpus": [0, 1, 2, 3, 4, 5, 2, 2], "min_gpus": 0,
                               "max_gpus": 8, "swap_cap_gpus": 4, "current_gpus": 2}]}
    ap = apply_whatif(Problem.from_dict(d), WhatIf(demand_scale=(("chat", 1.5),)))
    (s,) = ap.problem.services
    assert s.demand_gpus == (0, 2, 3, 5, 6, 8, 3, 3) and s.current_gpus == 2 and ap.scaled == {"chat": 1.5}


def test_added_job_joins_the_queue(base):
    prob, _ = base
    job = {"job_id": "N", "kind": "training", "priority": 2, "gpus": 2, "duration_steps": 1}
    ap = apply_whatif(prob, WhatIf(add_jobs=(job,)))
    assert ap.added == ("N",) and ap.problem.job("N").requested.gpus == 2


@pytest.mark.parametrize(("w", "msg"), [
    (WhatIf(cancel=("Z",)), "--cancel Z: no queued or running job 'Z' in the run (3 jobs, e.g. A, B, R)"),
    (WhatIf(priority=(("Z", 2.0),)), "--priority Z=2: no queued or running job 'Z' in the run (3 jobs, e.g. A, B, R)"),
    (WhatIf(priority=(("A", 0.0),)), "--priority A=0.0: the priority must be a number > 0"),
    (WhatIf(demand_scale=(("chat", 2.0),)), "--demand-scale chat=2: no service 'chat' in the run (services: none)"),
    (WhatIf(fail_groups=(("GPUs 6-9 failed", (6, 7, 8, 9)),)),
     "GPUs 6-9 failed: GPU 8 is outside the cluster of 8 GPUs (0..7)"),
    (WhatIf(add_jobs=({"job_id": "A", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 1},)),
     "--add-job: job_id 'A' is already in the run; give the new job another id"),
    (WhatIf(add_jobs=({"job_id": "N", "kind": "training", "priority": 1, "gpus": 3, "duration_steps": 1},)),
     "job 'N': gpus = 3 is not a power of two (1, 2, 4, 8, ...)"),
    (WhatIf(add_gpus=-1), "--add-gpus -1: expected a whole number of GPUs >= 0"),
])
def test_bad_edits_name_the_option_and_value(base, w, msg):
    with pytest.raises(InputError) as exc:
        apply_whatif(base[0], w)
    assert str(exc.value) == msg


def test_a_warm_start_is_valued_on_the_problem_it_starts():
    """A warm start's objective field belongs to the problem it was solved on: it is recomputed, never trusted.

    Demand rose from 2 to 6 GPUs on a 4-GPU cluster; the old plan (2 GPUs, objective 0 there) is feasible but
    leaves 4 GPUs x 4 steps unmet, so the MILP must serve the band's 4 GPUs (unmet 2 x 4 steps = 8 GPU-steps).
    """
    from optimizer.plan import Plan

    doc = {"cluster": {"n_gpus": 4, "gpus_per_node": 4, "step_minutes": 30, "horizon_steps": 4},
           "settings": {"time_limit_s": 20, "threads": 1},
           "services": [{"service": "chat", "demand_gpus": [6, 6, 6, 6], "min_gpus": 0, "max_gpus": 4,
                         "swap_cap_gpus": 4, "current_gpus": 2}],
           "jobs": [], "running": []}
    prob = Problem.from_dict(doc)
    stale = Plan(planner="milp", status="optimal", assignments=(), service_gpus={"chat": (2, 2, 2, 2)},
                 objective=0.0, bound=None, gap=None, solve_s=0.0, model=None, n_gpus=4, horizon_steps=4)
    out = plan(prob, "milp", warm_start=stale)
    assert out.service_gpus["chat"] == (4, 4, 4, 4)
    assert out.objective == pytest.approx(-prob.unmet_penalty() * 8)
