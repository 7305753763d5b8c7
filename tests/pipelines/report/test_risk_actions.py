"""What to do first about each job at risk (issue 27): options computed from a hand-solvable plan.

8 GPUs on one node, 30-min steps, 8 steps from 16:00Z; the service ``chat`` needs 2 GPUs at every step (its P90
demand, band 1-4), so the real-time minimum is 2 and at most 6 GPUs are ever free for batch work.
``X`` (4 GPUs) runs steps 0-2 on GPUs 0-3, ``L`` (4 GPUs, 4 steps) follows it on the same block, steps 2-6, and its
P90 (2.2 h) ends at 19:12Z, after its deadline 18:30:00Z; ``W`` needs 8 GPUs and never fits.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd

from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Problem
from pipelines.report import ReportInputs, build_report_table, plan_view, write_risk_report
from pipelines.report.actions import at_risk_actions
from pipelines.report.waits import wait_group

T0 = datetime(2025, 3, 16, 16, tzinfo=UTC)
H = 8


def _inputs() -> ReportInputs:
    problem = Problem.from_dict({
        "cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": H},
        "settings": {"time_limit_s": 5},
        "services": [{"service": "chat", "demand_gpus": [2] * H, "min_gpus": 1, "max_gpus": 4, "swap_cap_gpus": 2,
                      "current_gpus": 2}],
        "jobs": [{"job_id": "X", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4, "duration_steps": 2},
                 {"job_id": "L", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4, "duration_steps": 4,
                  "deadline_step": 5},
                 {"job_id": "W", "kind": "batch_inference", "priority": 1, "release_step": 0, "gpus": 8,
                  "duration_steps": 1}]})
    plan = Plan(planner="milp", status="optimal", assignments=(JobAssignment("X", 0, 2, 0, 4),
                                                                JobAssignment("L", 2, 6, 0, 4),
                                                                JobAssignment("W", None, None, None, None)),
                service_gpus={"chat": (2,) * H}, objective=1.0, bound=1.0, gap=0.0, solve_s=0.1, model=None,
                n_gpus=8, horizon_steps=H)
    demand = pd.DataFrame([{"service": "chat", "step": t, "demand_gpus_p50": 2, "demand_gpus_p90": 2}
                           for t in range(H)])
    jobs = pd.DataFrame({"job_id": ["X", "L", "W"], "kind": ["training", "training", "batch_inference"],
                         "priority": [1.0, 1.0, 1.0], "state": "queued", "duration_p10_h": [0.9, 1.8, 0.4],
                         "duration_p50_h": [1.0, 2.0, 0.5], "duration_p90_h": [1.0, 2.2, 0.6],
                         "deadline_at": [pd.NaT, pd.Timestamp("2025-03-16 18:30", tz="UTC"), pd.NaT]})
    return ReportInputs(problem=problem, plan=plan, start_ts=T0, jobs=jobs, demand=demand,
                        rt_status={"chat": ("ok", "")}, written_at=T0)


def test_options_of_a_late_job_and_a_job_that_never_fits():
    inp = _inputs()
    view = plan_view(inp)
    table = build_report_table(inp)
    risk = table[table["section"] == "job_at_risk"]
    assert risk["job_id"].tolist() == ["L", "W"]
    late, never = at_risk_actions(inp, view, risk, "runs/r1")
    # real-time minimum 2 of 8 GPUs: 6 left for batch work
    assert (late.rt_min_gpus, late.max_batch_gpus, never.rt_min_gpus, never.max_batch_gpus) == (2, 6, 2, 6)
    # L: 2 GPUs (8 steps at the same GPU-hours) fit from step 0 on GPUs 4-5: idle 8 - 4 - 2 = 2 at every step and
    # no batch job there; its P90 at 2 GPUs is 2 x 2.2 = 4.4 h: 20:24Z
    assert not late.never_fits and late.smaller is not None
    assert (late.smaller.gpus, late.smaller.start_step, late.smaller.offset, late.smaller.duration_steps) == (2, 0, 4, 8)
    assert late.smaller.p90_end == pd.Timestamp("2025-03-16 20:24", tz="UTC") and late.smaller.scaled
    assert late.problem == "P90 finish 2025-03-16 19:12:00Z after its deadline 2025-03-16 18:30:00Z"
    assert dict(late.commands) == {
        "run it on 2 GPUs": "gpuplan whatif runs/r1 --cancel L --add-job runs/r1/whatif-L-2gpus.json",
        "raise its priority above every queued job": "gpuplan whatif runs/r1 --priority L=2"}
    # W: 8 GPUs > 6; one more node of 8 GPUs leaves 16 - 2 = 14; 4 GPUs (2 steps) fit from step 6 on GPUs 0-3,
    # where X and L have ended and 8 - 2 = 6 GPUs are idle (at steps 0-5 only 2 are)
    assert never.never_fits and never.smaller is not None
    assert (never.smaller.gpus, never.smaller.start_step, never.smaller.offset) == (4, 6, 0)
    assert dict(never.commands) == {
        "run it on 4 GPUs": "gpuplan whatif runs/r1 --cancel W --add-job runs/r1/whatif-W-4gpus.json",
        "add 8 GPUs": "gpuplan whatif runs/r1 --add-gpus 8"}


def test_the_page_lists_the_actions_and_writes_the_add_job_files(tmp_path):
    (tmp_path / "profile_chat.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # written by the forecast stage before the report
    paths = write_risk_report(tmp_path, _inputs(), "run-a", run_folder=tmp_path)
    page = paths["risk_report.md"].read_text()
    html = paths["risk_report.html"].read_text()
    # the profile plots the run writes are linked (as files beside the page, not embedded)
    assert "[profile_chat](profile_chat.png)" in page and "Also written: [profile_chat.png](profile_chat.png)" in page
    assert html.count('href="profile_chat.png"') == 2 and "data:image/png;base64,iVBORw0KGgo" in html
    head, todo = page.index("## Headline"), page.index("## What to do first")
    assert head < todo < page.index("## Waiting jobs by reason") < page.index("## Estimated start of every queued job")
    assert "- **`W`** (batch_inference, priority 1, 8 GPUs): never fits: needs 8 GPUs, at most 6 of 8 are ever free" in page
    assert f"`gpuplan whatif {tmp_path} --add-gpus 8`" in page
    todo_section = page[todo:page.index("## Waiting jobs by reason")]
    assert todo_section.count("Each `gpuplan whatif` re-plans the whole queue: its first lines say what the change "
                              "costs other jobs (later starts, deadlines missed) before you act on it.") == 1
    assert json.loads((tmp_path / "whatif-L-2gpus.json").read_text()) == {
        "job_id": "L-2gpus", "kind": "training", "priority": 1.0, "release_step": 0, "gpus": 2, "duration_steps": 8,
        "deadline_step": 5}
    assert json.loads((tmp_path / "whatif-W-4gpus.json").read_text())["gpus"] == 4


def test_waiting_jobs_grouped_with_their_holders():
    inp = _inputs()
    view = plan_view(inp)
    groups = {j.job_id: wait_group(inp, j, inp.plan.job(j.job_id).start_step, view) for j in inp.problem.jobs}
    # X starts at release; L waits for X's block (GPUs 0-3 until 17:00Z); W never fits
    assert groups == {"X": None, "L": ("busy", ["X"]), "W": ("never", [])}


def test_a_wait_group_row_names_its_job_count_in_words(tmp_path):
    """The "waits for" cell ends with the group's count as "N job(s)", not "(N)" (read as part of the reason)."""
    page = write_risk_report(tmp_path, _inputs(), "run-w", run_folder=tmp_path)["risk_report.md"].read_text()
    assert "| never fits: its smallest size is more than the GPUs up minus the real-time minimum: 1 job | never: W |" in page
    assert "real-time minimum (1)" not in page


def test_the_whatif_lines_name_the_executable_when_gpuplan_is_not_on_path(tmp_path, monkeypatch):
    """A new user who ran ``bash scripts/run.sh`` has no ``gpuplan`` on PATH: the report says which file to run."""
    import shutil
    import sys

    from pipelines.report.actions import gpuplan_path_hint

    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "gpuplan").write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "executable", str(bindir / "python"))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert gpuplan_path_hint() == (f" `gpuplan` is not on your PATH: run these as `{bindir}/gpuplan whatif ...`, "
                                   f"or after `source {bindir}/activate`.")
    paths = write_risk_report(tmp_path, _inputs(), "run-a", run_folder=tmp_path)
    assert f"or after `source {bindir}/activate`." in paths["risk_report.md"].read_text()
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/local/bin/gpuplan")
    assert gpuplan_path_hint() == ""
