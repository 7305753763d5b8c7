"""Scenario generators: sizes of DESIGN §6.5, seeding, load calibration, forecasts, real trace."""

from __future__ import annotations

import pytest

from domain.kinds import QOS_PRIORITY
from domain.units import is_pow2
from optimizer import scenarios as S
from optimizer.errors import InputError
from pipelines.catalog import load_real_trace

SIZES = {  # DESIGN §6.5: (GPUs, jobs)
    "mixed": (32, 20),
    "diurnal_peak": (64, 40),
    "big_gangs": (64, 30),
    "priority_skew": (32, 25),
    "uniform_priority": (32, 25),
    "scale_64x30": (64, 30),
    "forecast_error": (64, 40),
}


@pytest.mark.parametrize("name", list(S.GENERATED))
def test_generated_scenarios_match_the_design_table(name):
    sc = S.build(name, 0)
    assert (sc.cluster.n_gpus, len(sc.jobs)) == SIZES[name]
    assert sc.n_steps == 96 and sc.cluster.horizon_steps == 48 and sc.cluster.step_minutes == 30
    assert sc.params["offered_load"] == pytest.approx(S.TARGET_LOAD, abs=0.02)
    assert all(is_pow2(j.gpus) and j.arrival_step < sc.n_steps for j in sc.jobs)
    assert all(len(s.demand_true) == 96 + 48 for s in sc.services)
    assert sc.exact_forecasts == (name != "forecast_error")


def test_same_seed_same_scenario_other_seed_other_jobs():
    assert S.build("mixed", 3) == S.build("mixed", 3)
    assert S.build("mixed", 3).jobs != S.build("mixed", 4).jobs


def test_uniform_priority_and_priority_skew_shapes():
    assert {j.priority for j in S.build("uniform_priority", 0).jobs} == {1.0}
    sk = S.build("priority_skew", 0)
    first_urgent = min(j.arrival_step for j in sk.jobs if j.priority == 8.0)
    assert all(j.arrival_step < first_urgent for j in sk.jobs if j.priority == 1.0)


def test_forecast_error_durations_and_surprise_day():
    sc = S.build("forecast_error", 0)
    assert sum(j.forecast_steps != j.true_steps for j in sc.jobs) >= 30
    svc = sc.services[0]
    # day 1, 10:00-22:00 (steps 68..91) is the surprise: the truth exceeds the seasonal-naive base
    surprise = range(48 + 20, 48 + 44)
    assert sum(svc.demand_true[t] for t in surprise) > 1.2 * sum(svc.demand_forecast[t] for t in surprise)


def test_forecast_at_recalibrates_the_level():
    svc = S.SimService("s", 0, 100, 10, 4, demand_true=(6, 6, 6, 6, 6, 6), demand_forecast=(4, 4, 4, 4, 4, 4),
                       recalibrate_steps=2, margin=0.0)
    assert svc.forecast_at(0, 3) == (4, 4, 4)  # nothing observed yet: level 1
    assert svc.forecast_at(2, 3) == (6, 6, 6)  # actual/forecast = 12/8 = 1.5 -> 4 x 1.5
    capped = S.SimService("s", 0, 5, 10, 4, demand_true=(6,) * 6, demand_forecast=(4,) * 6, margin=0.1)
    assert capped.forecast_at(0, 2) == (5, 5)  # ceil(4 x 1.1) = 5, clipped to max_gpus 5


def test_ls_demand_curve_time_averages_gpu_shares():
    pods = [
        S.TracePod("a", "LS", 1, 500, 0, 0, 2700),  # half a GPU for 1.5 steps
        S.TracePod("b", "LS", 2, 1000, 0, 900, 1800),  # 2 GPUs for the second half of step 0
        S.TracePod("c", "BE", 8, 1000, 0, 0, 3600),  # not LS
        S.TracePod("d", "LS", 1, 1000, 0, None, 3600),  # never ran
    ]
    assert list(S.ls_demand_curve(pods, 0, 2)) == pytest.approx([0.5 + 1.0, 0.25])


def test_real_trace_from_the_shipped_slice():
    sc = S.build("real_trace", 0, trace=load_real_trace())
    assert sc.cluster.n_gpus == 32 and sc.n_steps == 96
    assert len(sc.jobs) == sc.params["batch_pods_in_window"] == 317
    assert all(is_pow2(j.gpus) and 0 <= j.arrival_step < 96 for j in sc.jobs)
    assert {j.priority for j in sc.jobs} <= set(QOS_PRIORITY.values())
    ls, serve = sc.services
    assert max(serve.demand_true) == 4  # the 4-day peak maps to serve_peak_gpus
    assert (min(ls.demand_true[:96]), max(ls.demand_true[:96])) == (21, 24)  # the LS pods hold 21-24 GPUs
    half = S.build("real_trace", 0, trace=load_real_trace(), batch_sample=0.5)
    assert 0.4 * 317 < len(half.jobs) < 0.6 * 317


def test_unknown_scenario_is_refused():
    with pytest.raises(InputError, match="unknown scenario 'nope'"):
        S.build("nope")
    with pytest.raises(InputError, match="needs the trace"):
        S.build("real_trace")
