"""Metric definitions (DESIGN §6.3) on a hand-computed tiny simulation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sim_helpers import greedy_plan, tiny_scenario

from optimizer.metrics import CSV_COLUMNS, compute, percentile
from optimizer.simulate import simulate, simulate_clairvoyant


def test_percentile_linear_interpolation():
    assert percentile([0.0, 0.0, 2.0], 50) == 0.0
    assert percentile([0.0, 0.0, 2.0], 95) == pytest.approx(1.8)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([], 50) is None


def test_tiny_simulation_step_by_step():
    # t0: A starts on GPUs 0-1 (forecast 2 steps); C (4 GPUs) never fits next to the service.
    # t1: B arrives, starts on GPU 2; service gets 1 GPU but 2 are demanded (1 unmet).
    # t2: B done; A outlives its forecast (forecast end 2) -> keeps its block, remaining = 1.
    # t3: A done (true 3 steps).
    res = simulate(tiny_scenario(), greedy_plan, name="greedy", keep_plans=True)
    assert res.batch_gpus["training"] == [2, 2, 2, 0]
    assert res.batch_gpus["quantization"] == [0, 1, 0, 0]
    assert res.service_gpus["s"] == [1, 1, 1, 1]
    assert res.jobs["A"].block_offset == 0 and res.jobs["A"].end_step == 3
    assert res.jobs["B"].block_offset == 2 and res.jobs["B"].end_step == 2
    assert res.jobs["C"].first_start_step is None
    overrun = res.problems_at[2].running
    assert [(r.job_id, r.block_offset, r.remaining_steps) for r in overrun] == [("A", 0, 1)]
    assert res.verified_plans == 4 and res.violations == 0


def test_tiny_simulation_metrics_by_hand():
    m = compute(simulate(tiny_scenario(), greedy_plan, name="greedy"))
    # batch GPU-steps 2+3+2+0 = 7 -> 3.5 GPU-h; RT served min(1,1)+min(1,2)+min(1,2)+min(1,1) = 4
    # GPU-steps -> 2 GPU-h; window 4 GPUs x 4 steps x 0.5 h = 8 GPU-h.
    assert m.utilization_pct == pytest.approx(100 * (3.5 + 2.0) / 8.0)  # 68.75
    # value: A 2 GPUs x 3 steps x 0.5 h x p2 = 6; B 1 x 1 x 0.5 x p1 = 0.5
    assert m.value == pytest.approx(6.5)
    assert (m.jobs_completed, m.jobs_total) == (2, 3)
    # demand 1+2+2+1 = 6 GPU-steps = 3 GPU-h, unmet 2 GPU-steps = 1 GPU-h
    assert m.rt_unmet_gpu_h == pytest.approx(1.0)
    assert m.rt_sla_pct == pytest.approx(100 * 2 / 3, abs=1e-4)
    # waits: A 0 h, B 0 h, C censored at window end: 4 steps = 2 h -> P50 0, P95 1.8
    assert m.wait_p50_h == 0.0
    assert m.wait_p95_h == pytest.approx(1.8)
    assert m.wait_by_priority == {"1": (1.0, 1.9), "2": (0.0, 0.0)}
    assert m.replans == 4 and m.gap_max is None
    assert list(m.row()) == list(CSV_COLUMNS)


def test_replan_every_two_steps_follows_previous_plan():
    # With k=2, step 1 follows the step-0 plan: B (arrived at 1) is not in it and waits until
    # the replan at step 2, where it starts next to A (A's block is kept).
    res = simulate(tiny_scenario(), greedy_plan, name="greedy", replan_every_steps=2)
    assert [r.replanned for r in res.replans] == [True, False, True, False]
    assert res.jobs["B"].first_start_step == 2
    assert res.batch_gpus["quantization"] == [0, 0, 1, 0]
    m = compute(res)
    assert m.value == pytest.approx(6.5)
    assert m.wait_by_priority["1"] == (1.25, 1.925)  # B 0.5 h, C 2 h
    assert res.verified_plans == 4 and res.stale_plans == 0


def test_clairvoyant_sees_truth_and_arrivals_inside_the_horizon():
    res = simulate(tiny_scenario().clairvoyant(), greedy_plan, name="clairvoyant", lookahead=True, keep_plans=True)
    p0 = res.problems_at[0]
    assert [(j.job_id, j.release_step) for j in p0.jobs] == [("A", 0), ("C", 0), ("B", 1)]
    assert [s.demand_gpus for s in p0.services] == [(1, 2, 2, 1)]  # true demand
    assert [(r.job_id, r.remaining_steps) for r in res.problems_at[1].running] == [("A", 2)]  # true 3 steps
    clair = simulate_clairvoyant(tiny_scenario(), greedy_plan)
    # the greedy planner now reserves the true demand (2 GPUs at steps 1-2): A (2 GPUs, 3 steps)
    # still fits at step 0 and B waits until A ends and the service shrinks, at step 3
    assert clair.jobs["B"].first_start_step == 3
    m = compute(clair)
    assert m.rt_unmet_gpu_h == 0.0 and m.value == pytest.approx(6.5) and m.verified_plans == 4


def test_followed_plan_that_no_longer_holds_is_replaced_not_committed():
    # Job A (2 GPUs) is forecast at 1 step but runs 3; the service wants 3 GPUs from step 1 on.
    # Step 0: A starts; the plan gives the service 1 GPU, then 3 once A is (expected to be) done.
    # Step 1 (k=2, following): A still runs, so the followed plan needs 2 + 3 > 4 GPUs: it no
    # longer verifies, is not committed, and a fresh plan gives the service the 2 GPUs left.
    sc = tiny_scenario()
    svc = replace(sc.services[0], demand_true=(1,) + (3,) * 7, demand_forecast=(1,) + (3,) * 7, swap_cap_gpus=2)
    jobs = (replace(sc.jobs[0], true_steps=3, forecast_steps=1),)
    res = simulate(replace(sc, services=(svc,), jobs=jobs), greedy_plan, name="greedy", replan_every_steps=2)
    assert res.stale_plans == 1
    assert res.replans[1].replanned and res.replans[1].reason.startswith("previous plan no longer valid: step 0:")
    assert res.service_gpus["s"] == [1, 2, 2, 3]
    assert res.batch_gpus["training"] == [2, 2, 2, 0]
    assert res.verified_plans == 4 and res.violations == 0  # one committed, verified plan per step
    assert compute(res).rt_unmet_gpu_h == 1.0  # 1 GPU short at steps 1 and 2
