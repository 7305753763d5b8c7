"""The risk report tells the truth (issue 14): each fix pinned on a small hand-made problem.

Planned size, exact deadline, measured coverage (0.67 flagged), a never-fitting job, a fragmentation
wait, the swap cap and the starvation guard as wait reasons, long holders, idle windows merged by
their rule, and the headline's numbers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Problem
from optimizer.verify import verify
from pipelines.report import (
    ReportInputs,
    build_report_table,
    calibrate,
    headline,
    idle_windows,
    plan_view,
    planned_durations_h,
    wait_reason,
)
from pipelines.report.waits import holder_text

T0 = datetime(2025, 3, 16, 16, tzinfo=UTC)


@dataclass(frozen=True)
class Svc:
    """A service's settings as the report reads them (like ``pipelines.workspace.config.ServiceSettings``)."""

    service: str
    timezone: str = "UTC"
    units: str = "requests/h"
    capacity_per_gpu_per_h: float = 100.0
    swap_cap_gpus: int = 8

    def gpu_conversion(self) -> dict:
        return {"capacity_per_gpu_per_h": self.capacity_per_gpu_per_h, "headroom": 0.0, "min_gpus": 0,
                "max_gpus": 64, "replica_gpus": 1}


def _problem(n_gpus: int, jobs: list[dict], services: list[dict] | None = None, horizon: int = 8,
             running: list[dict] | None = None, settings: dict | None = None) -> Problem:
    return Problem.from_dict({
        "cluster": {"n_gpus": n_gpus, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": horizon},
        "settings": {"time_limit_s": 5, **(settings or {})},
        "services": services if services is not None else [
            {"service": "chat", "demand_gpus": [0] * horizon, "min_gpus": 0, "max_gpus": n_gpus,
             "swap_cap_gpus": n_gpus, "current_gpus": 0}],
        "jobs": jobs, "running": running or []})


def _plan(problem: Problem, assignments: list[JobAssignment], service_gpus: dict | None = None,
          check: bool = True) -> Plan:
    H = problem.horizon_steps
    plan = Plan(planner="milp", status="optimal", assignments=tuple(assignments),
                service_gpus=service_gpus or {s.service: tuple(s.demand_gpus) for s in problem.services},
                objective=1.0, bound=1.0, gap=0.0, solve_s=0.1, model=None, n_gpus=problem.n_gpus, horizon_steps=H)
    if check:
        assert verify(plan, problem) == []  # every hand-made plan here is a valid plan
    return plan


def _demand(problem: Problem, p50: dict | None = None, traffic_p50: dict | None = None) -> pd.DataFrame:
    rows = []
    for s in problem.services:
        for t, d in enumerate(s.demand_gpus):
            r = {"service": s.service, "step": t, "demand_gpus_p50": (p50 or {}).get(s.service, [d] * 99)[t],
                 "demand_gpus_p90": d}
            if traffic_p50 is not None:
                r["traffic_p50"] = traffic_p50[s.service][t]
            rows.append(r)
    return pd.DataFrame(rows)


def _jobs(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{"kind": "training", "priority": 1.0, "state": "queued", **r} for r in rows])


def _inputs(problem: Problem, plan: Plan, jobs: pd.DataFrame | None = None, **kw) -> ReportInputs:
    jobs = jobs if jobs is not None else _jobs([{"job_id": j.job_id, "duration_p10_h": 0.5, "duration_p50_h": 0.5,
                                                 "duration_p90_h": 0.5} for j in problem.jobs])
    return ReportInputs(problem=problem, plan=plan, start_ts=T0, jobs=jobs, demand=kw.pop("demand", _demand(problem)),
                        written_at=T0, **kw)


def _section(t: pd.DataFrame, name: str) -> pd.DataFrame:
    return t[t["section"] == name]


# ---------------------------------------------------------------- every duration at the planned size


def _elastic(planned_gpus: int, options: list[dict]) -> tuple[ReportInputs, pd.DataFrame]:
    """Job E: 4 GPUs for 4 h (P50; P90 5 h) or 8 GPUs for 2 h (P50; P90 2.5 h); deadline 3 h after the start."""
    problem = _problem(8, [{"job_id": "E", "kind": "training", "priority": 1, "release_step": 0, "deadline_step": 6,
                            "sizes": [{"gpus": 4, "duration_steps": 8}, {"gpus": 8, "duration_steps": 4}]}],
                       horizon=12)
    steps = 8 if planned_gpus == 4 else 4
    plan = _plan(problem, [JobAssignment("E", 0, steps, 0, planned_gpus)])
    jobs = _jobs([{"job_id": "E", "duration_p10_h": 3.5, "duration_p50_h": 4.0, "duration_p90_h": 5.0,
                   "deadline_at": pd.Timestamp("2025-03-16 19:00", tz="UTC"), "size_options": json.dumps(options)}])
    inp = _inputs(problem, plan, jobs)
    return inp, build_report_table(inp)


OPTIONS_8 = [{"gpus": 8, "duration_h": 2.0, "duration_p10_h": 1.8, "duration_p50_h": 2.0, "duration_p90_h": 2.5}]


def test_elastic_job_planned_on_8_gpus_is_not_at_risk_by_its_4_gpu_duration():
    inp, t = _elastic(8, OPTIONS_8)
    # at 8 GPUs: P90 2.5 h -> 18:30 < deadline 19:00 (at 4 GPUs the P90 of 5 h would finish 21:00)
    assert _section(t, "job_at_risk").empty
    job = inp.problem.jobs[0]
    q, source = planned_durations_h(inp, job, 8, inp.jobs.iloc[0])
    assert q == {"p10": 1.8, "p50": 2.0, "p90": 2.5} and source == "forecast at 8 GPUs"
    eta = _section(t, "queue_eta").set_index("job_id")
    assert eta.loc["E", "gpus"] == 8 and eta.loc["E", "end_ts"] == pd.Timestamp("2025-03-16 18:00", tz="UTC")


def test_elastic_job_planned_on_4_gpus_is_at_risk_by_its_4_gpu_duration():
    _, t = _elastic(4, OPTIONS_8)
    risk = _section(t, "job_at_risk").set_index("job_id")
    assert list(risk.index) == ["E"]
    assert risk.loc["E", "end_ts"] == pd.Timestamp("2025-03-16 21:00", tz="UTC")  # 16:00 + P90 5 h
    assert risk.loc["E", "reason"].startswith(
        "P90 finish 2025-03-16 21:00:00Z is 2 h after its deadline 2025-03-16 19:00:00Z (on 4 GPUs, the planned "
        "size: P50 4.00 h, P90 5.00 h, forecast; P50 end 2025-03-16 20:00:00Z also late)")


def test_elastic_size_option_without_quantiles_is_scaled_by_the_requested_sizes_ratios():
    # an older jobs.parquet: only the P50 at 8 GPUs (2.4 h); P90 = 2.4 x 5/4 = 3.0 h -> 19:00, not after 19:00
    inp, t = _elastic(8, [{"gpus": 8, "duration_h": 2.4}])
    q, source = planned_durations_h(inp, inp.problem.jobs[0], 8, inp.jobs.iloc[0])
    assert q["p90"] == pytest.approx(3.0) and q["p10"] == pytest.approx(2.1) and source == \
        "scaled from the requested size"
    assert _section(t, "job_at_risk").empty
    inp2, t2 = _elastic(8, [{"gpus": 8, "duration_h": 2.5}])  # P90 3.125 h -> 19:07:30 > 19:00
    assert _section(t2, "job_at_risk")["end_ts"].tolist() == [pd.Timestamp("2025-03-16 19:07:30", tz="UTC")]


# ---------------------------------------------------------------- deadlines: the real instant


def _deadline_case(p90_h: float) -> pd.DataFrame:
    # deadline 19:44:23Z; the problem's deadline_step is rounded up to step 8 (20:00)
    problem = _problem(8, [{"job_id": "A", "kind": "training", "priority": 1, "release_step": 0, "gpus": 8,
                            "duration_steps": 7, "deadline_step": 8}])
    plan = _plan(problem, [JobAssignment("A", 0, 7, 0, 8)])
    jobs = _jobs([{"job_id": "A", "duration_p10_h": 3.0, "duration_p50_h": 3.4, "duration_p90_h": p90_h,
                   "deadline_at": pd.Timestamp("2025-03-16 19:44:23.877", tz="UTC")}])
    return build_report_table(_inputs(problem, plan, jobs))


def test_deadline_is_the_real_instant_to_the_second():
    t = _deadline_case(3.8)  # P90 finish 19:48 > 19:44:23 (but before the rounded step deadline 20:00)
    risk = _section(t, "job_at_risk").set_index("job_id")
    assert risk.loc["A", "deadline_ts"] == pd.Timestamp("2025-03-16 19:44:23.877", tz="UTC")
    assert "after its deadline 2025-03-16 19:44:23Z" in risk.loc["A", "reason"]
    assert "P90 finish 2025-03-16 19:48:00Z is 0.06 h after" in risk.loc["A", "reason"]
    eta = _section(t, "queue_eta").set_index("job_id")
    assert eta.loc["A", "deadline_ts"] == pd.Timestamp("2025-03-16 19:44:23.877", tz="UTC")
    assert _section(_deadline_case(3.7), "job_at_risk").empty  # 19:42 < 19:44:23


def test_page_prints_deadlines_to_the_second(tmp_path):
    from pipelines.report import write_risk_report

    problem = _problem(8, [{"job_id": "A", "kind": "training", "priority": 1, "release_step": 0, "gpus": 8,
                            "duration_steps": 7, "deadline_step": 8}])
    plan = _plan(problem, [JobAssignment("A", 0, 7, 0, 8)])
    jobs = _jobs([{"job_id": "A", "duration_p10_h": 3.0, "duration_p50_h": 3.4, "duration_p90_h": 3.8,
                   "deadline_at": pd.Timestamp("2025-03-16 19:44:23", tz="UTC")}])
    page = write_risk_report(tmp_path, _inputs(problem, plan, jobs), "run-d")["risk_report.md"].read_text()
    assert "| A | training | 8 | 2025-03-16 16:00Z | 2025-03-16 19:48Z | 2025-03-16 19:44:23Z |" in page
    assert "20:00Z | 2025-03-16 19:44" not in page and "00:00Z after deadline" not in page


# ---------------------------------------------------------------- coverage risk from measured calibration


def _calibrated_inputs() -> ReportInputs:
    """Two services, planned 5 GPUs every step; P50 traffic 400/h = 4 GPUs at 100/h per GPU.

    Last day: ``small`` ran at the P50 for 16 hours and at twice it for 8 (above its P90 of 1.5 x P50):
    coverage 16/24 = 0.667; ``mid`` at the P50 all day: coverage 1.0.
    """
    H = 8
    problem = _problem(16, [{"job_id": "J", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4,
                             "duration_steps": 2}],
                       services=[{"service": s, "demand_gpus": [5] * H, "min_gpus": 0, "max_gpus": 16,
                                  "swap_cap_gpus": 4, "current_gpus": 5} for s in ("small", "mid")], horizon=H)
    plan = _plan(problem, [JobAssignment("J", 0, 2, 0, 4)])
    ts = pd.date_range("2025-03-15 16:00", periods=24, freq="h", tz="UTC")
    ratio_small = np.array([2.0 if h in (1, 2, 3, 4, 5, 6, 7, 13) else 1.0 for h in range(24)])
    bands = pd.concat([pd.DataFrame({"service": s, "ts": ts, "actual": 100.0 * r, "p50": 100.0, "p90": 150.0})
                       for s, r in (("small", ratio_small), ("mid", np.ones(24)))], ignore_index=True)
    demand = _demand(problem, p50={"small": [4] * H, "mid": [4] * H},
                     traffic_p50={"small": [400.0] * H, "mid": [400.0] * H})
    return _inputs(problem, plan, demand=demand, bands=bands, services=(Svc("small"), Svc("mid")))


def test_service_with_measured_coverage_067_is_flagged():
    inp = _calibrated_inputs()
    cal = {c.service: c for c in calibrate(inp)}
    small, mid = cal["small"], cal["mid"]
    assert (small.hours, small.covered, small.above_h) == (24, 16, 8)
    assert small.coverage == pytest.approx(2 / 3) and small.flagged
    assert small.longest_above_h == 7 and small.longest_from == pd.Timestamp("2025-03-15 17:00", tz="UTC")
    assert mid.coverage == 1.0 and not mid.flagged
    # P(demand > plan): 8 of the 24 recent ratios are 2.0 -> need ceil(2 x 400 / 100) = 8 GPUs > 5 planned
    assert small.method == "empirical" and small.exceed.tolist() == pytest.approx([8 / 24] * 8)
    assert mid.exceed.tolist() == [0.0] * 8  # ratio 1.0 -> 4 GPUs <= 5
    assert small.expected_hours_over(0.5) == pytest.approx(8 / 24 * 8 * 0.5)
    t = build_report_table(inp)
    rows = _section(t, "rt_calibration")
    allday = rows[rows["label"] == "all"].set_index("service")
    assert allday.loc["small", "value"] == pytest.approx(2 / 3) and allday.loc["small", "count"] == 24
    assert allday.loc["small", "reason"].startswith(
        "BELOW TARGET: P90 covered 16 of the last 24 hours (0.67, target 0.90); actual above P90 for 8 hours, "
        "longest run 7 h from 2025-03-15 17:00Z")
    bands = rows[rows["service"] == "small"].set_index("label")
    # UTC bands 00-06 .. 18-24: hours 16:00..15:00 -> the 8 high hours are 17-23 (18-24 band: 6 of them) and 05
    assert bands.loc["18-24 UTC", "value"] == pytest.approx(0.0) and bands.loc["00-06 UTC", "value"] == \
        pytest.approx(5 / 6)
    head = headline(inp, t)
    assert head["rt_below_target"] == ["small"]
    assert head["rt_services"]["small"]["recent_p90_coverage"] == pytest.approx(0.6667)
    assert head["rt_services"]["small"]["max_p_exceed"] == pytest.approx(0.3333)


def test_page_flags_the_service_below_target(tmp_path):
    from pipelines.report import write_risk_report

    page = write_risk_report(tmp_path, _calibrated_inputs(), "run-c")["risk_report.md"].read_text()
    assert "`small` 0.67 (16/24 h) BELOW TARGET**" in page
    assert "- **`small`**: BELOW TARGET: P90 covered 16 of the last 24 hours" in page
    assert "**1 below target**" in page
    # UTC bands of the 24 hours 16:00..15:00: the high hours 17:00-23:00 and 05:00
    assert "| small | 0.67 (24 h) | 0.83 (6 h) | 1.00 (6 h) | 0.83 (6 h) | 0.00 (6 h) |" in page
    assert "| mid | 1.00 (24 h) | 1.00 (6 h) | 1.00 (6 h) | 1.00 (6 h) | 1.00 (6 h) |" in page


def test_without_service_settings_the_exceedance_is_the_normal_approximation():
    inp = replace(_calibrated_inputs(), services=())
    small = calibrate(inp)[0]
    assert small.method == "normal" and small.flagged  # the coverage is still measured
    # planned 5 GPUs, P50 4, P90 5: sigma = 1 / 1.2816, P(Z > 1.2816) = 0.1 at every step
    assert small.exceed.tolist() == pytest.approx([0.1] * 8)


# ---------------------------------------------------------------- wait reasons


def test_a_job_that_can_never_fit_says_so():
    H = 4
    problem = _problem(64, [{"job_id": "BIG", "kind": "training", "priority": 2, "release_step": 0, "gpus": 64,
                             "duration_steps": 2}],
                       services=[{"service": "chat", "demand_gpus": [10, 12, 11, 10], "min_gpus": 2, "max_gpus": 64,
                                  "swap_cap_gpus": 4, "current_gpus": 10}], horizon=H)
    plan = _plan(problem, [JobAssignment("BIG", None, None, None, None)])
    inp = _inputs(problem, plan)
    expected = ("cannot fit on this cluster while real-time minimum is 10 GPUs: needs 64 GPUs, 64 GPUs are up and "
                "the real-time services need at least 10 at every step of the horizon (P90 demand within band and "
                "swap cap; band minimums alone 2), so at most 54 are ever free for batch work")
    assert wait_reason(inp, problem.jobs[0], None) == expected
    t = build_report_table(inp)
    assert _section(t, "job_at_risk")["reason"].tolist() == [expected]
    eta = _section(t, "queue_eta")
    assert eta["reason"].tolist() == ["never in this plan: " + expected] and eta["start_ts"].isna().all()
    assert "after the" not in eta["reason"].iloc[0]


def test_fragmentation_wait_reason():
    # X on GPUs 2-3 and Y on GPUs 4-5 for 2 h: 4 GPUs idle at 16:00 but no aligned 4-GPU block is free
    problem = _problem(8, [{"job_id": "X", "kind": "training", "priority": 1, "release_step": 0, "gpus": 2,
                            "duration_steps": 4},
                           {"job_id": "Y", "kind": "training", "priority": 1, "release_step": 0, "gpus": 2,
                            "duration_steps": 4},
                           {"job_id": "F", "kind": "quantization", "priority": 1, "release_step": 0, "gpus": 4,
                            "duration_steps": 2}])
    plan = _plan(problem, [JobAssignment("X", 0, 4, 2, 2), JobAssignment("Y", 0, 4, 4, 2),
                           JobAssignment("F", 4, 6, 0, 4)])
    inp = _inputs(problem, plan)
    assert wait_reason(inp, problem.jobs[2], 4) == (
        "at 2025-03-16 16:00Z, its earliest feasible step, 4 of 8 GPUs are idle and it needs 4 (aligned block GPUs "
        "0-3 on node-00; until it starts it is held by X (2 GPUs until 2025-03-16 18:00Z)): enough GPUs idle but "
        "fragmented, no aligned 4-GPU block is free at 2025-03-16 16:00Z; the plan starts it at 2025-03-16 18:00Z")


def test_count_blocked_wait_names_every_holder_or_and_n_others():
    # six 1-GPU jobs s0..s5 hold GPUs 0-5 until 17:00..19:30; W needs all 8 GPUs
    jobs = [{"job_id": f"s{i}", "kind": "training", "priority": 1, "release_step": 0, "gpus": 1,
             "duration_steps": 2 + i} for i in range(6)]
    jobs.append({"job_id": "W", "kind": "training", "priority": 1, "release_step": 0, "gpus": 8, "duration_steps": 1})
    problem = _problem(8, jobs)
    plan = _plan(problem, [JobAssignment(f"s{i}", 0, 2 + i, i, 1) for i in range(6)] + [JobAssignment("W", 7, 8, 0, 8)])
    reason = wait_reason(_inputs(problem, plan), problem.jobs[-1], 7)
    assert reason == (
        "at 2025-03-16 16:00Z, its earliest feasible step, 2 of 8 GPUs are idle and it needs 8 (aligned block GPUs "
        "0-7 on node-00; until it starts it is held by s5 (1 GPU until 2025-03-16 19:30Z), s4 (1 GPU until "
        "2025-03-16 19:00Z), s3 (1 GPU until 2025-03-16 18:30Z), s2 (1 GPU until 2025-03-16 18:00Z) and 2 others); "
        "real-time holds 0 GPUs")


def test_swap_cap_wait_reason():
    # chat needs 8 at 16:00 and may shrink by at most 2 per step: 8, 6, 4, 2 GPUs while its demand is 0 from 16:30
    problem = _problem(8, [{"job_id": "S", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4,
                            "duration_steps": 2}],
                       services=[{"service": "chat", "demand_gpus": [8, 0, 0, 0, 0, 0, 0, 0], "min_gpus": 0,
                                  "max_gpus": 8, "swap_cap_gpus": 2, "current_gpus": 8}])
    plan = _plan(problem, [JobAssignment("S", 2, 4, 0, 4)], {"chat": (8, 6, 4, 2, 0, 0, 0, 0)})
    inp = _inputs(problem, plan)
    assert plan_view(inp).need[0].tolist() == [8, 6, 4, 2, 0, 0, 0, 0]
    # alone: 16:00 leaves 0, 16:30 leaves 2, 17:00 leaves 4: the earliest feasible step is its start
    assert wait_reason(inp, problem.jobs[0], 2) == (
        "starts at its earliest feasible step; one step earlier, at 2025-03-16 16:30Z running jobs and real-time "
        "need leave 2 of 8 GPUs (needs 4): real-time needs 6, 6 of them above its demand because of the swap cap "
        "(at most 2 GPUs per step)")


def test_spare_real_time_gpus_named_when_they_keep_a_job_waiting():
    # the plan keeps chat at 6 at 17:00 (need 4: the swap cap from 8) while its demand is 0: 2 GPUs spare
    problem = _problem(8, [{"job_id": "S", "kind": "training", "priority": 1, "release_step": 1, "gpus": 4,
                            "duration_steps": 1}],
                       services=[{"service": "chat", "demand_gpus": [8, 0, 0, 0, 0, 0, 0, 0], "min_gpus": 0,
                                  "max_gpus": 8, "swap_cap_gpus": 2, "current_gpus": 8}])
    plan = _plan(problem, [JobAssignment("S", 3, 4, 0, 4)], {"chat": (8, 6, 6, 4, 2, 0, 0, 0)})
    # alone: 16:30 leaves 8 - 6 = 2; 17:00 leaves 8 - 4 = 4 -> earliest feasible step 17:00, where the plan
    # leaves 2 idle: real-time holds 6 = need 4 (all above its demand 0: swap cap) + 2 spare
    assert wait_reason(_inputs(problem, plan), problem.jobs[0], 3) == (
        "at 2025-03-16 17:00Z, its earliest feasible step, 2 of 8 GPUs are idle and it needs 4 (aligned block GPUs "
        "0-3 on node-00; no batch job holds it until it starts); real-time holds 6 GPUs, of which 4 above its "
        "demand because of the swap cap (at most 2 GPUs per step) and 2 spare above its need: with real-time at "
        "its need it would fit (the plan's choice)")


def test_guard_wait_reason():
    # G (8 GPUs) is protected from its release (max_wait_steps=0); the cluster is idle until 17:00, but K
    # (after G in arrival order) may not run before G while G has room: it waits for G
    problem = _problem(8, [{"job_id": "G", "kind": "training", "priority": 1, "release_step": 0, "gpus": 8,
                            "duration_steps": 1},
                           {"job_id": "K", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4,
                            "duration_steps": 1}],
                       settings={"max_wait_steps": 0})
    plan = _plan(problem, [JobAssignment("G", 2, 3, 0, 8), JobAssignment("K", 3, 4, 0, 4)])
    assert wait_reason(_inputs(problem, plan), problem.jobs[1], 3) == (
        "at 2025-03-16 16:00Z, its earliest feasible step, 8 of 8 GPUs are idle and it needs 4 (aligned block GPUs "
        "0-3 on node-00; until it starts it is held by G (4 GPUs of its 8 until 2025-03-16 17:30Z)): room for its "
        "whole run, but the starvation guard reserves room for G (queued since 2025-03-16 16:00Z, protected after "
        "max_wait_steps=0): starting it then would delay G; the plan starts it at 2025-03-16 17:30Z")
    # without the guard the same wait is the planner's own choice
    free = _problem(8, [{"job_id": "G", "kind": "training", "priority": 1, "release_step": 0, "gpus": 8,
                         "duration_steps": 1},
                        {"job_id": "K", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4,
                         "duration_steps": 1}])
    reason = wait_reason(_inputs(free, plan), free.jobs[1], 3)
    assert reason.endswith("room for its whole run from then, yet the plan starts it at 2025-03-16 17:30Z: not "
                           "required by capacity: the planner's choice (MILP objective, gap 0 %)")


def test_long_holder_flagged():
    # L holds 16 GPUs for 288 steps (6 days); R (running, 8 GPUs) ends at 18:00
    problem = _problem(32, [{"job_id": "L", "kind": "training", "priority": 1, "release_step": 0, "gpus": 16,
                             "duration_steps": 288},
                            {"job_id": "W", "kind": "training", "priority": 1, "release_step": 0, "gpus": 16,
                             "duration_steps": 2}],
                       running=[{"job_id": "R", "kind": "training", "priority": 1, "gpus": 8, "block_offset": 0,
                                 "remaining_steps": 4}])
    plan = _plan(problem, [JobAssignment("R", 0, 4, 0, 8, running=True), JobAssignment("L", 0, 288, 16, 16),
                           JobAssignment("W", 4, 6, 0, 16)])
    inp = _inputs(problem, plan)
    view = plan_view(inp)
    assert holder_text(inp, view, "L") == "L (16 GPUs until 2025-03-22 16:00Z; long holder, 6.0 days)"
    assert holder_text(inp, view, "R") == "R (8 GPUs until 2025-03-16 18:00Z)"
    t = build_report_table(inp)
    lh = _section(t, "long_holder")
    assert lh["job_id"].tolist() == ["L"] and lh["value"].tolist() == [144.0]
    assert lh["reason"].iloc[0] == "holds 16 GPUs (GPUs 16-31 on node-02..node-03) for 6.0 days, until 2025-03-22 16:00Z"


# ---------------------------------------------------------------- idle windows: merged by their rule


def test_idle_windows_merge_by_the_rule():
    # 16 GPUs, no batch: idle = 16 - planned real-time = 9, 10, 8, 12, 7, 8, 8, 8 GPUs per half hour
    problem = _problem(16, [], services=[{"service": "chat", "demand_gpus": [7, 6, 8, 4, 9, 8, 8, 8], "min_gpus": 0,
                                          "max_gpus": 16, "swap_cap_gpus": 16, "current_gpus": 7}])
    inp = _inputs(problem, _plan(problem, []))
    w = idle_windows(inp)  # >= 8 GPUs (one node) for >= 1 h
    assert w[["start_step", "end_step", "gpus", "count"]].values.tolist() == [[0, 4, 8, 4], [5, 8, 8, 3]]
    assert w["value"].tolist() == [19.5, 12.0]
    assert w["reason"].tolist() == [
        "8–12 GPUs idle for 2 h (19.5 GPU-h); an aligned block of 8 GPUs stays free of batch work throughout",
        "8 GPUs idle for 1.5 h (12 GPU-h); an aligned block of 8 GPUs stays free of batch work throughout"]
    assert idle_windows(inp, min_h=2.0)["start_step"].tolist() == [0]
    assert len(idle_windows(inp, min_h=0.5, min_gpus=1)) == 1  # every step has >= 1 idle: one window


# ---------------------------------------------------------------- the headline


def test_headline_numbers():
    inp = _calibrated_inputs()
    jobs = inp.jobs.assign(submitted_at=pd.Timestamp("2025-03-16 15:20", tz="UTC"))
    inp = replace(inp, jobs=jobs, models={"training": {"name": "m", "version": "3", "alias": "champion"}},
                  rt_selection={"small": {"rule": "r", "candidates": {"profile": {"weight": 0.25},
                                                                       "naive24": {"weight": 0.75}}}})
    t = build_report_table(inp)
    h = headline(inp, t, now=datetime(2025, 3, 16, 18, tzinfo=UTC))
    # 16 GPUs x 4 h = 64 GPU-h; batch 4 GPUs x 1 h = 4; real-time serving P50: 2 x 4 GPUs x 4 h = 32
    assert h["planned_utilization_pct"] == pytest.approx(100 * 36 / 64, abs=0.01)
    assert h["rt_covered_p50_pct"] == 100.0 and h["rt_covered_p90_pct"] == 100.0
    assert (h["jobs_queued"], h["jobs_start_now"], h["jobs_start_later"], h["jobs_waiting"], h["jobs_at_risk"]) == \
        (1, 1, 0, 0, 0)
    assert h["idle_gpu_h"] == pytest.approx(64 - 4 - 40)  # real-time planned 2 x 5 GPUs x 4 h = 40
    assert h["inputs"]["traffic_hour"] == {"ts": "2025-03-16 15:00Z", "age_h_at_plan_start": 1.0, "age_h_now": 3.0}
    assert h["inputs"]["job_submitted"]["age_h_at_plan_start"] == pytest.approx(0.67, abs=0.01)
    assert h["newest_input"] == {"what": "job_submitted", "ts": "2025-03-16 15:20Z"}
    assert h["models"]["jobs"] == {"training": {"name": "m", "version": "3", "alias": "champion"}}
    assert h["models"]["realtime"]["small"]["weights"] == {"profile": 0.25, "naive24": 0.75}
    json.dumps(h)  # plain JSON


# ---------------------------------------------------------------- the forecasts behind the planned size


def test_size_options_carry_the_three_quantiles_at_each_size():
    from forecasters.generators import generate_history, generate_queue
    from forecasters.jobs import fit, predict_for_sizes
    from pipelines.stages.models import forecast_jobs

    model = fit("training", generate_history("training", 300, seed=11), num_rounds=20)
    queue = generate_queue("training", 6, seed=5).assign(
        state="queued", source="generated", priority=1.0, started_at=pd.NaT, deadline_at=pd.NaT)
    out = forecast_jobs(model, queue, 30)
    elastic = out[out["size_options"].notna()]
    assert len(elastic) >= 2
    for i, row in elastic.iterrows():
        (opt,) = json.loads(row["size_options"])
        ref = predict_for_sizes(model, queue.iloc[[i]], [opt["gpus"]], step_minutes=30).iloc[0]
        assert opt["gpus"] == 2 * max(row["gpus_requested"], row["gpus_pred"])
        assert [opt[f"duration_{q}_h"] for q in ("p10", "p50", "p90")] == pytest.approx(
            [ref[f"duration_{q}_h"] for q in ("p10", "p50", "p90")])
        assert opt["duration_h"] == opt["duration_p50_h"]  # the planned quantile (P50), as the problem reads it


# ---------------------------------------------------------------- plots read as plots


def test_plot_helpers():
    from pipelines.report.plots import clock_axis, pyplot, service_colors, traffic_scale

    assert traffic_scale(9.8e6, "requests/h") == (1e6, "million requests/h")
    assert traffic_scale(2.5e4, "tokens/h") == (1e3, "thousand tokens/h")
    assert traffic_scale(5000.0, "requests/h") == (1.0, "requests/h")
    assert service_colors(["b", "a"]) == {"b": "#d62728", "a": "#9467bd"}
    plt = pyplot()
    fig, ax = plt.subplots()
    clock_axis(ax, T0, 30, 48)  # 24 h: a tick every 2 h
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert ax.get_xticks().tolist() == list(range(0, 49, 4))
    assert labels[0] == "16:00\nMar 16" and labels[1] == "18:00" and labels[4] == "00:00\nMar 17"
    assert ax.get_xlabel() == "time (UTC; one step = 30 min)"
    plt.close(fig)


def test_every_report_plot_has_clock_times_units_and_legends_clear_of_the_data(tmp_path, monkeypatch):
    from pipelines.report import write_risk_report
    from pipelines.report.plots import pyplot

    plt = pyplot()
    close = plt.close
    kept = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    inp = _calibrated_inputs()
    write_risk_report(tmp_path, inp, "run-p")
    assert len(kept) == 4  # demand, bands, outlook, gantt
    titles = []
    for fig in kept:
        fig.canvas.draw()
        for ax in fig.axes:
            if not ax.get_xlabel() and ax.get_ylabel().startswith(("P(demand", "jobs waiting")):
                continue  # the right-hand axes of a twin pair
            assert "UTC" in ax.get_xlabel(), ax.get_xlabel()
            assert any(u in ax.get_ylabel() for u in ("GPUs", "requests/h")), ax.get_ylabel()
            assert ax.yaxis.get_offset_text().get_text() == ""  # no bare x1e7
            ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
            assert ticks and all(re.match(r"\d\d:\d\d", t) for t in ticks), ticks
            leg = ax.get_legend()
            if leg is not None:
                assert leg.get_window_extent().x0 >= ax.get_window_extent().x1 - 1  # right of the data
            titles.append(ax.get_title())
    # one service order everywhere: the problem's (small, then mid)
    demand_titles = [t for t in titles if "demand forecast and planned GPUs" in t]
    bands_titles = [t for t in titles if "forecast against actual" in t]
    assert [t.split(":")[0] for t in demand_titles] == ["small", "mid"] == [t.split(":")[0] for t in bands_titles]
    # one colour per service everywhere: the P50 lines of the demand and forecast-against-actual plots
    from matplotlib.colors import to_hex

    def p50_colors(fig, label: str) -> list[str]:
        return [to_hex(ln.get_color()) for ax in fig.axes for ln in ax.get_lines() if ln.get_label() == label]

    assert p50_colors(kept[0], "P50 demand forecast") == ["#d62728", "#9467bd"] == p50_colors(kept[1], "P50 forecast")
    for fig in kept:
        close(fig)


def test_headline_builds_its_table_when_not_given():
    inp = _calibrated_inputs()
    assert headline(inp, now=T0) == headline(inp, build_report_table(inp), now=T0)


def test_wait_after_the_block_frees_names_what_holds_the_gpus_until_the_start():
    # X holds W's block (GPUs 0-3) and Y GPUs 4-5 until 17:00; then real-time takes 6 of the 8 GPUs from 17:00 to
    # 18:30: the block frees at 17:00, but W (4 GPUs) can only start at 18:30 — the reason must say why
    def case(chat: list[int], w_start: int) -> str:
        problem = _problem(8, [{"job_id": "X", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4,
                                "duration_steps": 2},
                               {"job_id": "Y", "kind": "training", "priority": 1, "release_step": 0, "gpus": 2,
                                "duration_steps": 2},
                               {"job_id": "W", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4,
                                "duration_steps": 1}],
                           services=[{"service": "chat", "demand_gpus": chat, "min_gpus": 0, "max_gpus": 8,
                                      "swap_cap_gpus": 8, "current_gpus": 0}])
        plan = _plan(problem, [JobAssignment("X", 0, 2, 0, 4), JobAssignment("Y", 0, 2, 4, 2),
                               JobAssignment("W", w_start, w_start + 1, 0, 4)])
        return wait_reason(_inputs(problem, plan), problem.jobs[2], w_start)

    head = ("at 2025-03-16 16:00Z, its earliest feasible step, 2 of 8 GPUs are idle and it needs 4 (aligned block "
            "GPUs 0-3 on node-00; until it starts it is held by X (4 GPUs until 2025-03-16 17:00Z)); elsewhere batch "
            "jobs hold 2 GPUs then: Y (2 GPUs until 2025-03-16 17:00Z); real-time holds 0 GPUs")
    assert case([0, 0, 6, 6, 6, 0, 0, 0], 5) == head + (
        "; from 2025-03-16 17:00Z until it starts at 2025-03-16 18:30Z, at most 2 of 8 GPUs are idle at any step "
        "(real-time holds 6 GPUs)")
    # real-time leaves at 18:00: from then W had room, so the half-hour after it is the plan's own choice
    assert case([0, 0, 6, 6, 0, 0, 0, 0], 5) == head + (
        "; from 2025-03-16 17:00Z until it starts at 2025-03-16 18:30Z, room for its whole run from "
        "2025-03-16 18:00Z: the planner's choice (real-time holds 0–6 GPUs)")
    # W starting the moment its block frees: nothing more to say
    assert case([0, 0, 0, 0, 0, 0, 0, 0], 2) == head


def test_a_forecast_under_one_step_reads_under_one_step_not_p50_equal_p90():
    """Operator trial: a job forecast under one step (the forecaster raises every quantile to one step and flags
    it ``clipped_min_duration``) read 'P50 0.50 h, P90 0.50 h'. S: 1 step at step 0, deadline 16:10 (P90 finish
    16:30 at one step: at risk); T the same job unflagged (really one step) keeps its hours."""
    problem = _problem(8, [{"job_id": j, "kind": "training", "priority": 1, "release_step": 0, "deadline_step": 1,
                            "sizes": [{"gpus": 1, "duration_steps": 1}]} for j in ("S", "T")])
    plan = _plan(problem, [JobAssignment("S", 0, 1, 0, 1), JobAssignment("T", 0, 1, 1, 1)])
    deadline = pd.Timestamp("2025-03-16 16:10", tz="UTC")
    jobs = _jobs([{"job_id": j, "duration_p10_h": 0.5, "duration_p50_h": 0.5, "duration_p90_h": 0.5,
                   "deadline_at": deadline, "flags": f} for j, f in (("S", "clipped_min_duration"), ("T", ""))])
    risk = _section(build_report_table(_inputs(problem, plan, jobs)), "job_at_risk").set_index("job_id")
    assert ("the planned size: P50 < 1 step, P90 < 1 step (each under one step planned as one step, 0.50 h), "
            "forecast; P50 end") in risk.loc["S", "reason"]
    assert "the planned size: P50 0.50 h, P90 0.50 h, forecast; P50 end" in risk.loc["T", "reason"]
