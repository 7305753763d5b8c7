"""Metric definitions (DESIGN §6.3) on a hand-computed tiny simulation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sim_helpers import greedy_plan, tiny_scenario

from optimizer.metrics import CSV_COLUMNS, compute, job_waits_h, percentile
from optimizer.plan import PlanSource
from optimizer.simulate import SURGE_REASON, JobRecord, ReplanRecord, SimResult, simulate, simulate_clairvoyant
from optimizer.solver import SolveStatus


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
    # (the loop without the in-step replan on a demand surge; with it: test_surge_replan_...)
    res = simulate(tiny_scenario(), greedy_plan, name="greedy", keep_plans=True, surge_replan=False, rt_margin_alpha=None)
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
    m = compute(simulate(tiny_scenario(), greedy_plan, name="greedy", surge_replan=False, rt_margin_alpha=None))
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


def test_surge_replan_inside_the_step_serves_what_free_gpus_allow():
    # The tiny run again, now replanning at once when the actual demand exceeds the allocation:
    # t1: actual 2 > 1 committed -> replan with demand 2 at step 0: A (2) and B (1, just started)
    #     hold 3 of 4 GPUs, so the service still gets 1 (1 GPU-step unmet; batch is not preempted).
    # t2: actual 2 > 1 -> replan: B is done, A holds 2, the service gets 2 (swap cap 1 from 1).
    # t0, t3: actual 1 = allocated, no surge.
    res = simulate(tiny_scenario(), greedy_plan, name="greedy", keep_plans=True, rt_margin_alpha=None)
    assert res.surge_replans == 2
    assert [(r.step, r.reason) for r in res.replans if r.reason == SURGE_REASON] == [
        (1, SURGE_REASON), (2, SURGE_REASON)]
    assert res.service_gpus["s"] == [1, 1, 2, 1]
    assert [s.demand_gpus[0] for s in res.problems_at[2].services] == [2]  # the surge plan's problem
    assert [r.job_id for r in res.problems_at[1].running] == ["A", "B"]  # B started before the surge
    assert res.verified_plans == 6 and res.violations == 0  # 4 steps + 2 surge plans, all verified
    m = compute(res)
    assert m.rt_unmet_gpu_h == pytest.approx(0.5)  # only step 1: 1 GPU-step x 0.5 h (1.0 without surges)
    assert m.surge_replans == 2 and m.replans == 6
    assert m.value == pytest.approx(6.5)  # the batch side is unchanged


def test_replan_every_two_steps_follows_previous_plan():
    # With k=2, step 1 follows the step-0 plan: B (arrived at 1) is not in it and waits until
    # the replan at step 2, where it starts next to A (A's block is kept).
    res = simulate(tiny_scenario(), greedy_plan, name="greedy", replan_every_steps=2, surge_replan=False, rt_margin_alpha=None)
    assert [r.replanned for r in res.replans] == [True, False, True, False]
    assert res.jobs["B"].first_start_step == 2
    assert res.batch_gpus["quantization"] == [0, 0, 1, 0]
    m = compute(res)
    assert m.value == pytest.approx(6.5)
    assert m.wait_by_priority["1"] == (1.25, 1.925)  # B 0.5 h, C 2 h
    assert res.verified_plans == 4 and res.stale_plans == 0


def test_an_arrival_between_replans_is_started_at_once_by_the_fast_mode_on_the_followed_plan():
    # The same run with place_arrivals: at step 1 (following the step-0 plan) B has arrived; A holds 2 GPUs and
    # the service 1 of 4, so B's 1 GPU fits now: the fast mode starts it at step 1 on the followed plan (A and the
    # service keep their GPUs) instead of at the replan of step 2. C still never fits.
    res = simulate(tiny_scenario(), greedy_plan, name="greedy", replan_every_steps=2, surge_replan=False,
                   rt_margin_alpha=None, place_arrivals=True)
    assert [(r.replanned, r.reason) for r in res.replans] == [
        (True, "scheduled"), (False, "arrivals placed by the fast mode"), (True, "scheduled"), (False, "")]
    assert res.arrival_placements == 1
    assert res.jobs["B"].first_start_step == 1
    assert res.batch_gpus["quantization"] == [0, 1, 0, 0]
    assert res.batch_gpus["training"] == [2, 2, 2, 0]  # A's run is unchanged
    m = compute(res)
    assert m.value == pytest.approx(6.5)  # the same GPU-hours inside the window, one step earlier
    assert m.wait_by_priority["1"] == (1.0, 1.9)  # B 0 h (was 0.5 h), C 2 h
    assert res.verified_plans == 4 and res.violations == 0 and res.stale_plans == 0


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
    res = simulate(replace(sc, services=(svc,), jobs=jobs), greedy_plan, name="greedy", replan_every_steps=2,
                   surge_replan=False, rt_margin_alpha=None)
    assert res.stale_plans == 1
    assert res.replans[1].replanned and res.replans[1].reason.startswith("previous plan no longer valid: step 0:")
    assert res.service_gpus["s"] == [1, 2, 2, 3]
    assert res.batch_gpus["training"] == [2, 2, 2, 0]
    assert res.verified_plans == 4 and res.violations == 0  # one committed, verified plan per step
    assert compute(res).rt_unmet_gpu_h == 1.0  # 1 GPU short at steps 1 and 2


# --- A hand-made SimResult where every min/max/clip/filter inside compute() changes the answer ---


def _hand_result(**changes) -> SimResult:
    """4 GPUs, 4 steps of 0.5 h (window 8 GPU-h).

    Service s: allocated [3, 1, 2, 0], actual [1, 2, 2, 2]: over-allocated at step 0 (3 vs 1),
    short at steps 1 and 3, exact at step 2.
    Batch: A (p2, 2 GPUs, steps 0-1, completed), K (p3, 1 GPU, steps 0-1, killed by a failure:
    2 GPU-steps lost), B (p1, 1 GPU, arrives 1, starts 2, still running at the window end),
    C (p1, arrives 1, never starts), D (p1, arrives at step 4 = the window end: outside it).
    Replans: fresh MILP optimal (1 s, gap 0.001); a followed step (9 s, gap 0.5: not a solve);
    fresh MILP stopped on its limit and the wall clock (3 s, gap 0.02); a fresh fallback carrying
    the MILP's time_limit outcome (2 s, gap inf).
    """
    jobs = {
        "A": JobRecord("A", "training", 2.0, 2, 0, first_start_step=0, start_step=0, end_step=2, block_offset=0,
                       run_gpu_steps=4),
        "K": JobRecord("K", "training", 3.0, 1, 0, first_start_step=0, run_gpu_steps=2, lost_gpu_steps=2,
                       restarts=1),
        "B": JobRecord("B", "quantization", 1.0, 1, 1, first_start_step=2, start_step=2, block_offset=3,
                       run_gpu_steps=2),
        "C": JobRecord("C", "quantization", 1.0, 1, 1),
        "D": JobRecord("D", "quantization", 1.0, 1, 4),
    }
    replans = [
        ReplanRecord(0, True, SolveStatus.OPTIMAL, 1.0, 0.001, 0.0, 3, 0, source=PlanSource.MILP),
        ReplanRecord(1, False, SolveStatus.TIME_LIMIT, 9.0, 0.5, 0.0, 2, 2, source=PlanSource.MILP),
        ReplanRecord(2, True, SolveStatus.TIME_LIMIT, 3.0, 0.02, 0.0, 2, 1, wall_clock_limited=True,
                     source=PlanSource.MILP),
        ReplanRecord(3, True, SolveStatus.TIME_LIMIT, 2.0, float("inf"), 0.0, 1, 1, source=PlanSource.FALLBACK),
    ]
    base = SimResult(
        scenario="hand", planner="p", n_gpus=4, n_steps=4, step_h=0.5, jobs=jobs,
        batch_gpus={"training": [3, 3, 0, 0], "quantization": [0, 0, 1, 1]},
        service_gpus={"s": [3, 1, 2, 0]}, service_demand={"s": [1, 2, 2, 2]}, down_gpus=[0, 0, 0, 0],
        replans=replans, verified_plans=4,
    )
    return replace(base, **changes)


def test_real_time_served_is_min_of_allocated_and_actual():
    # issue 18 mutant 2: served = allocated would count the idle over-allocation at step 0.
    m = compute(_hand_result())
    # served min(3,1)+min(1,2)+min(2,2)+min(0,2) = 1+1+2+0 = 4 GPU-steps = 2 GPU-h (allocated: 6 -> 3)
    assert m.rt_served_gpu_h == 2.0
    assert m.rt_demand_gpu_h == 3.5  # 7 GPU-steps
    # unmet max(0, d - a): 0+1+0+2 = 3 GPU-steps = 1.5 GPU-h (|d - a| would be 5, d - a 1)
    assert m.rt_unmet_gpu_h == 1.5
    assert m.rt_sla_pct == pytest.approx(100 * 2.0 / 3.5, abs=1e-4)  # 57.1429, not above 100
    # batch 3+3+1+1 = 8 GPU-steps = 4 GPU-h (lost work still counts: the GPUs were busy);
    # utilisation (4 + 2) / 8 = 75 % (with allocated real-time GPU-hours it would be 87.5 %)
    assert m.batch_gpu_h == 4.0
    assert m.utilization_pct == 75.0


def test_value_excludes_lost_work_and_counts_partial_runs():
    m = compute(_hand_result())
    # A 2 x 4 x 0.5 = 4; K 3 x (2 - 2) x 0.5 = 0; B (partial, still running) 1 x 2 x 0.5 = 1
    assert m.value == 5.0
    assert m.lost_gpu_h == 1.0
    # completed: only A; total: A, K, B, C (D arrives at the window end)
    assert (m.jobs_completed, m.jobs_total) == (1, 4)


def test_waits_are_censored_and_exclude_arrivals_at_the_window_end():
    m = compute(_hand_result())
    # A 0, K 0, B (2 - 1) x 0.5 = 0.5, C censored (4 - 1) x 0.5 = 1.5; D excluded
    # sorted [0, 0, 0.5, 1.5]: P50 = 0.25, P95 = 0.5 + 0.85 x 1.0 = 1.35
    assert m.wait_p50_h == 0.25
    assert m.wait_p95_h == pytest.approx(1.35)
    assert m.wait_by_priority == {"1": (1.0, 1.45), "2": (0.0, 0.0), "3": (0.0, 0.0)}


def test_solve_figures_count_fresh_plans_only():
    m = compute(_hand_result())
    assert m.replans == 3
    assert (m.solve_s_p50, m.solve_s_max) == (2.0, 3.0)  # the followed step's 9 s is no solve
    assert m.gap_max == 0.02  # the followed 0.5 is no solve; the fallback's inf is not a gap
    assert m.time_limited_solves == 1  # the fallback carrying time_limit is not a MILP plan
    assert m.wall_clock_limited_solves == 1


def test_edge_cases_no_demand_no_solves_and_exact_allocation():
    # no real-time demand at all: SLA is 100 %, and over-allocation is never "served"
    m = compute(_hand_result(service_demand={"s": [0, 0, 0, 0]}, replans=[]))
    assert (m.rt_sla_pct, m.rt_served_gpu_h, m.rt_unmet_gpu_h) == (100.0, 0.0, 0.0)
    assert m.utilization_pct == 50.0  # batch only: 4 / 8
    assert (m.replans, m.solve_s_p50, m.solve_s_max, m.gap_max, m.time_limited_solves) == (0, None, None, None, 0)
    # allocation exactly the demand: everything served, SLA 100
    m = compute(_hand_result(service_gpus={"s": [1, 2, 2, 2]}))
    assert (m.rt_served_gpu_h, m.rt_unmet_gpu_h, m.rt_sla_pct) == (3.5, 0.0, 100.0)


def test_time_limited_solves_counts_fresh_milp_plans_on_a_limit():
    base = _hand_result().replans
    extra = ReplanRecord(4, True, SolveStatus.TIME_LIMIT, 1.0, 0.01, 0.0, 1, 1, source=PlanSource.MILP)
    # two fresh MILP plans on a limit (steps 2 and 4), one optimal, one fallback, one followed step
    assert compute(_hand_result(replans=[*base, extra])).time_limited_solves == 2


def test_identity_fields_pass_through_and_rounding_is_4_decimals_6_for_gaps():
    rec = ReplanRecord(0, True, SolveStatus.TIME_LIMIT, 1.23456789, 0.12345678, 0.0, 1, 0, source=PlanSource.MILP)
    m = compute(_hand_result(scenario="mixed", planner="fifo", violations=2, stale_plans=3, replans=[rec]))
    assert (m.scenario, m.planner, m.violations, m.stale_plans, m.verified_plans) == ("mixed", "fifo", 2, 3, 4)
    assert (m.solve_s_p50, m.solve_s_max) == (1.2346, 1.2346)  # 4 decimals (5 would be 1.23457)
    assert m.gap_max == 0.123457  # 6 decimals (4: 0.1235, 7: 0.1234568)


def test_an_empty_window_has_zero_utilisation_not_a_division_error():
    m = compute(_hand_result(n_steps=0, jobs={}, batch_gpus={}, service_gpus={"s": []}, service_demand={"s": []},
                             replans=[]))
    assert (m.utilization_pct, m.rt_sla_pct, m.jobs_total, m.wait_p50_h) == (0.0, 100.0, 0, None)


def test_allocation_and_demand_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="zip"):
        compute(_hand_result(service_gpus={"s": [3, 1, 2]}))


def test_sla_of_a_demand_below_one_gpu_hour_is_measured():
    # one GPU demanded for one 15-minute step (0.25 GPU-h), none allocated: SLA 0 %, not "no demand" 100 %
    m = compute(_hand_result(step_h=0.25, service_gpus={"s": [0, 0, 0, 0]}, service_demand={"s": [1, 0, 0, 0]}))
    assert (m.rt_sla_pct, m.rt_unmet_gpu_h, m.rt_demand_gpu_h) == (0.0, 0.25, 0.25)


def test_a_job_arriving_after_the_window_listed_first_does_not_hide_the_others():
    res = _hand_result()
    first = replace(res, jobs={"D": res.jobs["D"], **{k: v for k, v in res.jobs.items() if k != "D"}})
    assert job_waits_h(first) == {"A": 0.0, "K": 0.0, "B": 0.5, "C": 1.5}
    assert compute(first).wait_p50_h == 0.25
