"""The valley-filling case (``data/examples/valley.json``), worked by hand.

8 GPUs, 8 steps; service demand [6,6,2,2,2,2,6,6], current 6, band [0, 8]; one 4-GPU, 4-step job
of priority 1 released at step 0; gamma = 0.995, kappa = 8, so w = 8 * max p = 8.

Swap cap 4. The job needs 4 free GPUs for 4 consecutive steps. Steps 2..5 have demand 2, and
the service can drop 6 -> 2 at step 2 and rise 2 -> 6 at step 6 (changes of 4 <= cap), so the job
runs on steps 2..5 with all demand served: objective 4 * (g^2 + g^3 + g^4 + g^5) = 15.72199...
Any earlier start overlaps a demand-6 step (steps 0, 1) and leaves 2 GPUs unmet there (cost 16
per step > its reward of at most 4 per step); a later start overlaps step 6 or 7 likewise. So
the optimum starts the job at step 2 on an aligned 4-block (offset 0 or 4). FIFO reserves the
peak (6) all day: 2 GPUs are left, the job never starts, objective 0.

Swap cap 1. Running the job on steps 2..5 needs a <= 4 there; then a_1 >= 3 is free but
a_1 <= 5 (cap 1 from a_2 <= 4) leaves 1 unmet at step 1, and a_6 <= 5 leaves 1 unmet at step 6:
2 unmet GPU-steps. Every other in-horizon window leaves more unmet (start 1: 3, start 3: 3,
start 4 or later: >= 3, e.g. start 7 forces a_7 <= 4 and a_6 <= 5). So the best start is step 2
with value 15.72199 - 2w. With kappa 8 (w = 8): 15.722 - 16 < 0, the job is not started and
the objective is 0 (all demand served by holding 6). With kappa 5 (w = 5): 15.722 - 10 = 5.72199.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from optimizer.capacity import least_unmet_by_step, least_unmet_rt
from optimizer.objective import objective_value
from optimizer.planners import plan
from optimizer.problem import Problem
from optimizer.verify import verify

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
GAMMA = 0.995


def _load(name: str, **settings) -> Problem:
    d = json.loads((EXAMPLES / name).read_text())
    d["settings"].update(settings)
    return Problem.from_dict(d)


def hand_reward(start: int, gpus: int = 4, duration: int = 4, priority: float = 1.0) -> float:
    """p * s * sum_{tau=t}^{t+d-1} gamma^tau (all inside the 8-step horizon here)."""
    return priority * gpus * sum(GAMMA**tau for tau in range(start, start + duration))


@pytest.mark.parametrize("method", ["decomposed", "full"])
def test_valley_milp_starts_job_at_step_2_on_aligned_block(method):
    p = _load("valley.json", mip_rel_gap=0.0, milp_method=method)
    r = plan(p, "milp")
    a = r.job("A")
    assert r.status == "optimal" and not r.fallback
    assert (a.start_step, a.end_step, a.gpus) == (2, 6, 4)
    assert a.block_offset in (0, 4)
    # all demand served: a_t >= D_t every step, and within swap cap 4 from current 6
    alloc = r.service_gpus["chat"]
    assert all(x >= d for x, d in zip(alloc, (6, 6, 2, 2, 2, 2, 6, 6), strict=True))
    assert all(x <= 4 for x in alloc[2:6])
    expected = hand_reward(2)
    assert expected == pytest.approx(15.721992514987502, rel=1e-12)
    assert r.objective == pytest.approx(expected, rel=1e-9)
    assert r.bound == pytest.approx(expected, rel=1e-6)
    assert r.gap == pytest.approx(0.0, abs=1e-6)
    assert verify(r, p) == []
    assert objective_value(r, p) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("planner", ["fifo", "easy", "priority"])
def test_valley_baselines_hold_peak_and_cannot_start_the_job(planner):
    p = _load("valley.json")
    r = plan(p, planner)
    assert r.service_gpus["chat"] == (6,) * 8  # peak reserved all day
    assert r.job("A").start_step is None
    assert r.objective == 0.0 and r.status == "feasible" and r.source == planner


@pytest.mark.parametrize("method", ["decomposed", "full"])
def test_swap_cap_1_kappa_8_job_not_worth_starting(method):
    p = _load("valley_swapcap1.json", mip_rel_gap=0.0, milp_method=method)
    assert hand_reward(2) - 2 * 8 < 0  # the best in-horizon start loses money
    r = plan(p, "milp")
    assert r.status == "optimal"
    assert r.job("A").start_step is None
    assert r.objective == pytest.approx(0.0, abs=1e-9)
    alloc = r.service_gpus["chat"]
    assert all(x >= d for x, d in zip(alloc, (6, 6, 2, 2, 2, 2, 6, 6), strict=True))


@pytest.mark.parametrize("method", ["decomposed", "full"])
def test_swap_cap_1_kappa_5_real_time_first_leaves_the_job_unstarted(method):
    """The weighted model of before issue 15 started A at 2 with 2 unmet GPU-steps (15.722 - 2 x 5 =
    5.72 > 0). Real time first (DESIGN §5): holding 6 GPUs serves every step, so U* = 0, and every
    start of A leaves at least 2 GPU-steps unmet (module docstring): A is not started, objective 0."""
    p = _load("valley_swapcap1.json", mip_rel_gap=0.0, penalty_ratio=5, milp_method=method)
    assert least_unmet_rt(p) == 0
    r = plan(p, "milp")
    assert r.job("A").start_step is None and not r.fallback  # the model's answer, not the baseline's
    assert r.objective == 0.0 and verify(r, p) == []
    alloc = r.service_gpus["chat"]
    assert sum(max(0, d - x) for x, d in zip(alloc, (6, 6, 2, 2, 2, 2, 6, 6), strict=True)) == 0


def test_valley_with_running_job_is_planned_around_it():
    """DESIGN §3.1 example: running R (priority 2) holds GPUs 0-3 for steps 0-1, so the service
    gets at most 4 there: 2 unmet GPUs at steps 0 and 1, w = 8 * 2 = 16. A still starts at 2."""
    p = _load("valley.json", mip_rel_gap=0.0)
    from optimizer.problem import RunningJob

    p = replace(p, running=(RunningJob("R", "quantization", 2.0, 4, 0, 2),))
    # U* by hand: at most 8 - 4 = 4 GPUs for demand 6 at steps 0 and 1, 4 from step 2 is enough
    assert least_unmet_rt(p) == 4
    assert least_unmet_by_step(p).tolist() == [[2, 2, 0, 0, 0, 0, 0, 0]]
    r = plan(p, "milp")
    assert r.job("R").start_step == 0 and r.job("R").end_step == 2 and r.job("R").block_offset == 0
    assert r.job("A").start_step == 2
    assert r.service_gpus["chat"][:2] == (4, 4)
    assert r.objective == pytest.approx(hand_reward(2) - 16 * 4, rel=1e-9)
