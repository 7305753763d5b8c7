"""The calibrated real-time margin (issue 15, DESIGN §6.1): split-conformal quantile of the rolling
simulation's own forecast residuals, per 6-h lead band, on hand lists and the tiny scenario."""

from __future__ import annotations

import pytest
from sim_helpers import greedy_plan, tiny_scenario

from optimizer.errors import InputError
from optimizer.metrics import compute
from optimizer.simulate import ConformalMargin, conformal_quantile, simulate


def test_conformal_quantile_is_the_ceil_n_plus_1_rank_on_a_hand_list():
    res = [-1, 0, 2, 5, 1]  # sorted -1, 0, 1, 2, 5
    assert conformal_quantile(res, 0.5) == 1.0  # k = ceil(6 x 0.5) = 3
    assert conformal_quantile(res, 0.2) == 5.0  # k = ceil(6 x 0.8) = ceil(4.8) = 5
    assert conformal_quantile(res, 0.4) == 2.0  # k = ceil(6 x 0.6) = ceil(3.6) = 4
    assert conformal_quantile(list(range(1, 10)), 0.2) == 8.0  # n 9: k = ceil(10 x 0.8) = 8
    assert conformal_quantile(res, 0.001) == 5.0  # k = ceil(5.994) = 6 > n: the largest residual
    assert conformal_quantile([], 0.1) == 0.0
    with pytest.raises(InputError, match="alpha = 0 must be in"):
        conformal_quantile(res, 0)


def test_margin_pools_residuals_by_6h_lead_band_and_is_never_negative():
    m = ConformalMargin(alpha=0.5, horizon_steps=4, step_minutes=180)  # 6 h = 2 steps per band
    m.issue(0, "s", (5, 5, 5, 5))
    m.observe(0, "s", 7)  # lead 0, band 0: +2
    m.observe(2, "s", 9)  # lead 2, band 1: +4
    m.observe(3, "s", 5)  # lead 3, band 1: 0
    assert m.margin("s", 0) == 2 and m.margin("s", 1) == 2  # band 0 [2]: k = ceil(2 x 0.5) = 1
    assert m.margin("s", 2) == 4  # band 1 [0, 4]: k = ceil(3 x 0.5) = 2
    assert ConformalMargin(0.7, 4, 180).margin("s", 0) is None  # nothing seen yet: cold start
    m.issue(0, "t", (0, 0, 0, 0))
    m.observe(1, "t", 9)  # service t: residual 9, never pooled with s's
    assert m.margin("s", 5) == 2  # band 2 empty: all of s's residuals [0, 2, 4], k = ceil(4 x 0.5) = 2
    m2 = ConformalMargin(0.5, 4, 180)
    m2.issue(0, "s", (5, 5, 5, 5))
    m2.observe(0, "s", 2)  # over-forecast: residual -3, margin 0 (never below the forecast)
    assert m2.margin("s", 0) == 0


def test_tiny_run_plans_forecast_plus_margin_from_step_2():
    # tiny: forecast 1 every step, actual (1, 2, 2, 1); 30-min steps: every lead in band 0. alpha 0.5.
    # t0: no residual yet: cold start, forecast + swap cap 1 = 2 (A still fits: 2 + 2 GPUs).
    # After t0: residual 0. t1: [0] -> k = 1 -> 0: plan 1 (1 GPU-step unmet).
    # After t1: +1 (issued at 0, lead 1), +1 (issued at 1, lead 0): [0, 1, 1] -> t2: k = 2 -> margin 1.
    # t2: A holds 2 GPUs, the service gets 2 (demand 2: served); t3: A done, 2 GPUs for demand 1.
    res = simulate(tiny_scenario(), greedy_plan, name="greedy", keep_plans=True, surge_replan=False,
                   rt_margin_alpha=0.5)
    assert [res.problems_at[t].services[0].demand_gpus for t in range(4)] == [
        (2, 2, 2, 2), (1, 1, 1, 1), (2, 2, 2, 2), (2, 2, 2, 2)]
    assert res.service_gpus["s"] == [2, 1, 2, 2]
    assert compute(res).rt_unmet_gpu_h == pytest.approx(0.5)  # step 1 only (1.0 without the margin)
