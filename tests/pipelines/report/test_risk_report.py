"""Risk report (DESIGN §6.4) on a hand-checkable valley plan, plan tables and plan metrics."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pandas as pd
import pytest

from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Problem
from pipelines.report import ReportInputs, build_report_table, exceed_probability, idle_windows, write_risk_report
from pipelines.stages import outputs as queue

T0 = datetime(2025, 3, 16, 16, tzinfo=UTC)


def _problem(b_job: dict | None = None) -> Problem:
    """The valley problem; ``b_job`` replaces job B."""
    return Problem.from_dict({
        "cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 8},
        "settings": {"time_limit_s": 5},
        "services": [{"service": "chat", "demand_gpus": [6, 6, 2, 2, 2, 2, 6, 6], "min_gpus": 0, "max_gpus": 8,
                      "swap_cap_gpus": 4, "current_gpus": 6}],
        "jobs": [{"job_id": "A", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4,
                  "duration_steps": 4, "deadline_step": 5},
                 b_job or {"job_id": "B", "kind": "quantization", "priority": 2, "release_step": 0, "gpus": 8,
                           "duration_steps": 2}],
    })


def _plan(status: str = "optimal") -> Plan:
    return Plan(planner="milp", status=status,
                assignments=(JobAssignment("A", 2, 6, 0, 4), JobAssignment("B", None, None, None, None)),
                service_gpus={"chat": (6, 6, 2, 2, 2, 2, 6, 6)}, objective=7.9, bound=8.0, gap=0.0125,
                solve_s=0.1, model=None, n_gpus=8, horizon_steps=8)


def _inputs(status: str = "optimal") -> ReportInputs:
    demand = pd.DataFrame({"service": "chat", "step": range(8),
                           "demand_gpus_p50": [5, 5, 2, 2, 2, 2, 6, 6],
                           "demand_gpus_p90": [6, 6, 2, 2, 2, 2, 7, 6]})
    jobs = pd.DataFrame({"job_id": ["A", "B"], "kind": ["training", "quantization"], "priority": [1.0, 2.0],
                         "state": ["queued", "queued"], "duration_p10_h": [1.5, 0.8],
                         "duration_p50_h": [2.0, 1.0], "duration_p90_h": [3.0, 1.5]})
    return ReportInputs(problem=_problem(), plan=_plan(status), start_ts=T0, jobs=jobs, demand=demand,
                        rt_status={"chat": ("degraded", "weekly component from one week")}, time_limit_s=5)


def test_exceed_probability_normal_between_quantiles():
    assert exceed_probability(6, 6, 7) == pytest.approx(0.5)
    assert exceed_probability(7, 6, 7) == pytest.approx(0.1)
    assert exceed_probability(5, 6, 6) == 1.0 and exceed_probability(6, 6, 6) == 0.0


def test_report_sections_hand_values():
    inp = _inputs()
    t = build_report_table(inp)
    cov = t[t["section"] == "coverage_risk"]
    assert cov[["service", "step", "gpus", "shortfall_gpus"]].values.tolist() == [["chat", 6, 6, 1]]
    assert cov["probability"].iloc[0] == pytest.approx(0.5)
    assert "2 free" in cov["reason"].iloc[0]
    # idle: 8 - 6 at steps 0-1, 8 - 4 - 2 at steps 2-5, 8 - 6 at steps 6-7: 2 GPUs all along, below one node's 8
    assert t[t["section"] == "idle_window"].empty
    idle = idle_windows(inp, min_gpus=2)
    assert idle[["start_step", "end_step", "gpus"]].values.tolist() == [[0, 8, 2]]
    assert idle["value"].iloc[0] == pytest.approx(8.0)
    assert idle["end_ts"].iloc[0] == pd.Timestamp("2025-03-16 20:00", tz="UTC")
    risk = t[t["section"] == "job_at_risk"].set_index("job_id")
    # A: starts step 2 (17:00) on 4 GPUs, P90 3 h -> 20:00 > deadline step 5 (18:30, no real instant given)
    assert sorted(risk.index) == ["A", "B"]
    assert risk.loc["A", "reason"].startswith(
        "P90 finish 2025-03-16 20:00:00Z is 1.5 h after its deadline 2025-03-16 18:30:00Z (on 4 GPUs, the planned "
        "size: P50 2.00 h, P90 3.00 h, forecast; P50 end 2025-03-16 19:00:00Z also late)")
    # B needs all 8 GPUs while chat needs at least 2 at every step: it can never fit
    never = ("cannot fit on this cluster while real-time minimum is 2 GPUs: needs 8 GPUs, 8 GPUs are up and the "
             "real-time services need at least 2 at every step of the horizon (P90 demand within band and swap cap; "
             "band minimums alone 0), so at most 6 are ever free for batch work")
    assert risk.loc["B", "reason"] == never
    eta = t[t["section"] == "queue_eta"].set_index("job_id")
    assert eta.loc["A", "start_ts"] == pd.Timestamp("2025-03-16 17:00", tz="UTC")
    # alone, A fits first at 17:00 (chat needs 6 before): its start is its earliest feasible step
    assert eta.loc["A", "reason"] == ("starts at its earliest feasible step; one step earlier, at 2025-03-16 16:30Z "
                                      "running jobs and real-time need leave 2 of 8 GPUs (needs 4): real-time needs 6")
    assert eta.loc["B", "reason"] == "never in this plan: " + never and pd.isna(eta.loc["B", "start_ts"])
    out = t[t["section"] == "queue_outlook"]
    assert out["gpus"].tolist() == [0, 0, 4, 4, 4, 4, 0, 0]
    assert out["value"].tolist() == [2, 2, 1, 1, 1, 1, 1, 1]


def test_page_says_not_proven_optimal_and_degraded(tmp_path):
    paths = write_risk_report(tmp_path, _inputs("time_limit"), "run-x")
    page = paths["risk_report.md"].read_text()
    assert "**Not proven optimal**" in page and "after 5 s" in page
    assert "**DEGRADED**" in page
    for png in ("gantt.png", "demand.png", "outlook.png"):
        assert (tmp_path / png).stat().st_size > 1000 and f"]({png})" in page
    assert set(pd.read_parquet(paths["risk_report.parquet"])["section"]) == {
        "rt_calibration", "rt_exceedance", "coverage_risk", "job_at_risk", "queue_eta", "queue_outlook"}
    assert "Not proven" not in write_risk_report(tmp_path, _inputs("optimal"), "run-y")["risk_report.md"].read_text()


def test_not_proven_note_gives_the_planners_reason_and_the_deadline():
    from pipelines.report.status import not_proven_text

    why = ("best verified plan (lp_rounding), proven gap 2.844% against the LP relaxation bound: the work budget for "
           "time_limit_s=10 does not cover the root node of a master of 2,190 columns")
    plan = replace(_plan("time_limit"), message=why)
    # the work budget, not a clock, stopped it: the planner's own words, not "stopped on its time limit"
    assert not_proven_text(plan, 10, "2.84 %") == f"**Not proven optimal** (gap 2.84 %): {why}."
    assert not_proven_text(_plan("deadline"), 30, "1.2 %") == (
        "**Stopped by the wall-clock deadline**: time_limit_s (30 s) ran out before the planner's work budget was "
        "done, so this plan (gap 1.2 %) depends on how loaded the machine was and may not reproduce.")


def test_plan_tables_and_metrics():
    problem, plan = _problem(), _plan()
    t = queue.plan_tables(problem, plan, T0)
    jobs = t[t["row_type"] == "job"].set_index("job_id")
    assert jobs.loc["A", ["start_step", "end_step", "block_offset", "gpus"]].tolist() == [2, 6, 0, 4]
    assert pd.isna(jobs.loc["B", "start_step"])
    svc = t[t["row_type"] == "service_step"]
    assert svc["gpus"].tolist() == [6, 6, 2, 2, 2, 2, 6, 6]
    grid = t[t["row_type"] == "gpu_step"]
    assert len(grid) == 64
    at2 = grid[grid["step"] == 2].sort_values("gpu")["owner"].tolist()
    assert at2 == ["A"] * 4 + ["", ""] + ["service:chat"] * 2
    demand = pd.DataFrame({"service": "chat", "step": range(8), "demand_gpus_p50": [5, 5, 2, 2, 2, 2, 6, 6],
                           "demand_gpus_p90": [6, 6, 2, 2, 2, 2, 7, 6]})
    m = queue.planned_metrics(problem, plan, demand)
    # batch 4 GPUs x 4 steps x 0.5 h = 8; served min(plan, P50) = (5+5+2*4+6+6) x 0.5 = 15; N x h = 32
    assert m["planned_utilization_pct"] == pytest.approx(100 * 23 / 32)
    assert m["planned_value"] == pytest.approx(8.0)
    assert m["planned_rt_unmet_gpu_h"] == pytest.approx(0.5)
    assert m["jobs_started"] == 1 and m["jobs_total"] == 2
    assert m["idle_gpu_h"] == pytest.approx(32 - 8 - 16)
    # real-time planned 16 GPU-h, of which 15 serve the P50: 1 GPU-h of margin toward the P90 (steps 0 and 1 plan
    # 6 GPUs against a P50 of 5: 2 GPU-steps x 0.5 h); with utilisation and idle it adds up to N x h
    assert m["rt_margin_gpu_h"] == pytest.approx(1.0)
    assert m["planned_utilization_pct"] / 100 * 32 + m["rt_margin_gpu_h"] + m["idle_gpu_h"] == pytest.approx(32)


SHIPPED_336H_MSG = ("degraded", "weekly seasonality needs more than 336 hourly points; got 336; weekly component "
                             "fitted from fewer than two weekly periods (unreplicated)")


def test_page_layout_rounding_and_gap_wording(tmp_path):
    inp = _inputs("optimal")
    plan = Plan(planner="milp", status="optimal", assignments=inp.plan.assignments,
                service_gpus=inp.plan.service_gpus, objective=3309.9876, bound=3312.378112003569, gap=0.0007,
                solve_s=0.1, model=None, n_gpus=8, horizon_steps=8)
    inp = ReportInputs(problem=inp.problem, plan=plan, start_ts=T0, jobs=inp.jobs, demand=inp.demand,
                       rt_status={"chat": SHIPPED_336H_MSG})
    page = write_risk_report(tmp_path, inp, "run-z")["risk_report.md"].read_text()
    assert ("status **optimal** within the 0.1 % gap tolerance (gap 0.07 %), objective 3309.99, "
            "bound 3312.38, solve 0.1 s.") in page
    heads = [ln for ln in page.splitlines() if ln.startswith("#")]
    # issue 27: the headline, what to do first and the waiting groups first; the detail (folded in the HTML); plots last
    assert heads == ["# Risk report — run-z", "## Headline", "## What to do first", "## Waiting jobs by reason",
                     "## Real-time coverage risk", "## Jobs at risk", "## Estimated start of every queued job",
                     "## Long holders", "## Idle windows", "## Queue outlook", "## Plots"]
    pos = {k: page.index(k) for k in ("## Headline", "| Planned utilisation | 71.9 % of 32 GPU-h",
                                      "## What to do first", "## Real-time coverage risk", "## Jobs at risk",
                                      "## Idle windows", "## Queue outlook",
                                      "| step | time | batch GPUs | jobs waiting | reason |", "## Plots",
                                      "![Real-time demand forecast", "![Queue outlook", "![Plan: GPUs by node")}
    assert list(pos.values()) == sorted(pos.values())  # headline first, the plots after every table
    # every plot linked from the headline
    assert "| Plots | [demand](demand.png) · [outlook](outlook.png) · [gantt](gantt.png) |" in page
    # one name per meaning: P90 finish (jobs at risk) vs planned end (queue table)
    assert "| job_id | kind | planned GPUs | start_ts | p90_finish_ts | deadline_ts | reason |" in page
    assert "| job_id | kind | priority | planned GPUs | start_ts | planned_end_ts | deadline_ts | reason |" in page
    # the shipped 336 h series: degraded status explained in plain words
    assert "- `chat`: **DEGRADED**: weekly seasonality needs more than 336 hourly points" in page
    assert "— degraded" not in page
    # utilisation, the real-time margin above P50 and idle add up: 71.9 + 3.1 + 25.0 = 100 % of 32 GPU-h
    assert ("| Planned utilisation | 71.9 % of 32 GPU-h (batch GPU-h + real-time GPU-h serving the P50 demand); "
            "real-time GPUs above the P50 demand (the margin toward the P90): 3.1 % (1 GPU-h); idle: 25.0 % |") in page
    assert ("What this means: The traffic history has 336 hourly points (two weeks or less), so the weekly "
            "pattern (each hour of the week) is in effect fitted from one week only") in page
    assert "keep extra real-time headroom (a higher `min_gpus`)" in page


def test_status_text_cases():
    from pipelines.report import status_text

    p = _plan()
    assert status_text(p, 0.001) == "**optimal** within the 0.1 % gap tolerance (gap 1.25 %)"
    p0 = Plan(planner="milp", status="optimal", assignments=p.assignments, service_gpus=p.service_gpus,
              objective=8.0, bound=8.0, gap=0.0, solve_s=0.1, model=None, n_gpus=8, horizon_steps=8)
    assert status_text(p0, 0.001) == "**optimal** (gap 0 %)"
    assert status_text(_plan("time_limit"), 0.001) == "**time_limit** (gap 1.25 %)"


def test_wait_reason_names_allowed_sizes():
    # B may run on 4 or 8 GPUs: the 8-GPU size never fits (chat needs 2), the 4-GPU size fits alone from 17:00,
    # where A and chat leave only 2 idle
    problem = _problem({"job_id": "B", "kind": "quantization", "priority": 2, "release_step": 0,
                        "sizes": [{"gpus": 4, "duration_steps": 4}, {"gpus": 8, "duration_steps": 2}]})
    inp = _inputs()
    t = build_report_table(ReportInputs(problem=problem, plan=inp.plan, start_ts=T0, jobs=inp.jobs,
                                        demand=inp.demand))
    eta = t[t["section"] == "queue_eta"].set_index("job_id")
    assert eta.loc["B", "gpus"] == 4
    assert eta.loc["B", "reason"] == (
        "after the 4 h horizon (not before 2025-03-16 20:00Z): at 2025-03-16 17:00Z, its earliest feasible step, 2 "
        "of 8 GPUs are idle and it needs 4 (aligned block GPUs 4-7 on node-00; free of batch work); elsewhere batch "
        "jobs hold 4 GPUs then: A (4 GPUs until 2025-03-16 19:00Z); real-time holds 2 GPUs")


def test_reasons_pluralise_one_gpu_and_one_step():
    problem = Problem.from_dict({
        "cluster": {"n_gpus": 2, "gpus_per_node": 2, "step_minutes": 30, "horizon_steps": 2},
        "services": [{"service": "chat", "demand_gpus": [1, 1], "min_gpus": 0, "max_gpus": 2,
                      "swap_cap_gpus": 2, "current_gpus": 1}],
        "jobs": [{"job_id": "C", "kind": "training", "priority": 2, "release_step": 0, "gpus": 1,
                  "duration_steps": 1},
                 {"job_id": "D", "kind": "training", "priority": 1, "release_step": 0, "gpus": 1,
                  "duration_steps": 1}],
    })
    plan = Plan(planner="milp", status="optimal",
                assignments=(JobAssignment("C", 0, 1, 0, 1), JobAssignment("D", 1, 2, 0, 1)),
                service_gpus={"chat": (1, 0)}, objective=3.0, bound=3.0, gap=0.0, solve_s=0.1, model=None,
                n_gpus=2, horizon_steps=2)
    demand = pd.DataFrame({"service": "chat", "step": [0, 1], "demand_gpus_p50": [1, 1], "demand_gpus_p90": [1, 1]})
    jobs = pd.DataFrame({"job_id": ["C", "D"], "kind": "training", "priority": [2.0, 1.0], "state": "queued",
                         "duration_p10_h": 0.5, "duration_p50_h": 0.5, "duration_p90_h": 0.5})
    t = build_report_table(ReportInputs(problem=problem, plan=plan, start_ts=T0, jobs=jobs, demand=demand))
    eta = t[t["section"] == "queue_eta"].set_index("job_id")
    assert eta.loc["C", "reason"] == "starts at release"
    assert eta.loc["D", "reason"] == (
        "at 2025-03-16 16:00Z, its earliest feasible step, 0 of 2 GPUs are idle and it needs 1 (aligned block GPU 0 "
        "on node-00; until it starts it is held by C (1 GPU until 2025-03-16 16:30Z)); real-time holds 1 GPU")
    # step 1: 2 GPUs - 1 (D) - 0 (chat) = 1 idle; chat planned 0 < P90 1 -> 1 GPU short, 1 free
    idle = idle_windows(ReportInputs(problem=problem, plan=plan, start_ts=T0, jobs=jobs, demand=demand), min_h=0.5,
                        min_gpus=1)
    assert idle["reason"].tolist() == ["1 GPU idle for 0.5 h (0.5 GPU-h); an aligned block of 1 GPU stays free of "
                                       "batch work throughout"]
    cov = t[t["section"] == "coverage_risk"]
    assert cov["reason"].tolist() == ["1 GPU short of P90 but 1 free: covered by re-planning within the swap cap"]


def test_page_real_time_section_states_a_level_shift():
    # F09: the profile's message (forecasters.realtime.fit_profile) for a drop to half, and for one whose
    # step could not be estimated (degraded): the section says the level changed, by how much, since when
    from dataclasses import replace

    from pipelines.report import explain_rt_status, render_page

    msg = ("level shift x0.50 since 2025-09-22T00:00Z (72 h, 100% of hours moved the same way): the forecast "
           "follows the new level (a step term from 2025-09-22T00:00Z in the regression, estimated on 72 h)")
    inp = replace(_inputs(), rt_status={"chat": ("level_shift", msg)})
    page = render_page(inp, build_report_table(inp), {}, "run-s")
    assert f"- `chat`: **LEVEL SHIFT**: {msg}" in page and "**DEGRADED**" not in page
    assert ("  - What this means: Traffic fell to 0.50× its usual level for each hour of the week from "
            "2025-09-22T00:00Z on (72 h so far), and stayed there: this is a new level, not a run of outliers. "
            "The forecast (and the GPUs planned for this service) follows the new level.") in page
    rise = explain_rt_status("level_shift", msg.replace("x0.50", "x1.60"))
    assert rise.startswith("Traffic rose to 1.60×") and "`max_gpus`" in rise
    stuck = explain_rt_status("degraded", "level shift x0.50 since 2025-09-22T00:00Z (72 h, 100% of hours moved "
                                          "the same way): NOT modelled (10 usable hours after the change)")
    assert "could NOT be moved to the new level" in stuck and stuck.endswith("check the forecast-against-actual "
                                                                             "plot.")
    assert explain_rt_status("ok", "") is None


def test_a_model_without_a_registered_version_is_named_for_what_it_is():
    from pipelines.report.status import model_text

    assert model_text("training", {"version": 3, "alias": "champion"}) == "training v3 (champion)"
    note = "no champion yet (no nightly retraining): fitted at plan time"
    assert model_text("scheduler", {"version": None, "note": note}) == f"scheduler: {note}"  # not "scheduler vNone"
    assert model_text("scheduler", {}) == "scheduler: not registered"


def test_a_service_is_shown_on_the_same_gpus_while_they_stay_free():
    from pipelines.report.grid import display_grid

    # 4 GPUs, chat holds 2 at every step; X (2 GPUs on 2-3) runs at step 1 only. chat starts on 1, 0, the GPUs
    # no block takes later (optimizer.placement.service_placement looks ahead; the old top-down start on 3, 2
    # moved both replicas when X came), and stays there; at step 3 it grows to 3 GPUs and the new one is the
    # top free GPU
    problem = Problem.from_dict({
        "cluster": {"n_gpus": 4, "gpus_per_node": 4, "step_minutes": 30, "horizon_steps": 4},
        "services": [{"service": "chat", "demand_gpus": [2, 2, 2, 3], "min_gpus": 0, "max_gpus": 4,
                      "swap_cap_gpus": 4, "current_gpus": 2}],
        "jobs": [{"job_id": "X", "kind": "training", "priority": 1, "release_step": 1, "gpus": 2,
                  "duration_steps": 1}]})
    plan = Plan(planner="milp", status="optimal", assignments=(JobAssignment("X", 1, 2, 2, 2),),
                service_gpus={"chat": (2, 2, 2, 3)}, objective=1.0, bound=1.0, gap=0.0, solve_s=0.1, model=None,
                n_gpus=4, horizon_steps=4)
    c = "service:chat"
    assert display_grid(problem, plan) == [[c, c, "", ""], [c, c, "X", "X"], [c, c, "", ""], [c, c, "", c]]
