"""``gpuplan whatif RUN_FOLDER``: the hand-solved what-ifs of tests/optimizer/test_whatif.py through the CLI
(JSON document, text, errors), on a run folder written the way ``gpuplan run`` writes one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optimizer.planners import plan
from optimizer.problem import Problem
from pipelines.cli.app import app

#: The hand problem (8 GPUs on two 4-GPU nodes, 8 steps; worked in tests/optimizer/test_whatif.py), shared by
#: the what-if tests: tests/data/whatif_hand.json.
HAND = json.loads((Path(__file__).resolve().parents[2] / "data" / "whatif_hand.json").read_text())
CHAT = {
    "cluster": {"n_gpus": 4, "gpus_per_node": 4, "step_minutes": 30, "horizon_steps": 4},
    "settings": {"time_limit_s": 20, "threads": 1},
    "services": [{"service": "chat", "demand_gpus": [2, 2, 2, 2], "min_gpus": 0, "max_gpus": 4,
                  "swap_cap_gpus": 4, "current_gpus": 2}],
    "jobs": [], "running": [],
}


def run_folder(root: Path, doc: dict, nodes: list[str]) -> Path:
    """A run folder as ``gpuplan run`` leaves it (problem.json, plan.json, summary.json), solved with the MILP."""
    folder = root / "20250316T1600Z_test"
    folder.mkdir()
    prob = Problem.from_dict(doc)
    (folder / "problem.json").write_text(json.dumps(prob.to_dict()))
    (folder / "plan.json").write_text(json.dumps(plan(prob, "milp").to_dict()))
    (folder / "summary.json").write_text(json.dumps({"plan_start": "2025-03-16T16:00:00+00:00", "planner": "milp",
                                                     "cluster": {"nodes": nodes}}))
    (root / "latest").symlink_to(folder.name)
    return root / "latest"


@pytest.fixture()
def hand(tmp_path):
    return run_folder(tmp_path, HAND, ["gpu-a", "gpu-b"])


def _json(*args) -> dict:
    res = CliRunner().invoke(app, ["whatif", *map(str, args), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_add_gpus_json_hand_solved(hand):
    doc = _json(hand, "--add-gpus", "8")
    assert set(doc) >= {"base", "whatif", "delta", "jobs"} and doc["changes"] == ["+8 GPUs"]
    a = next(j for j in doc["jobs"] if j["job_id"] == "A")
    assert (a["start_ts_base"], a["start_ts_whatif"], a["delta_h"]) == ("2025-03-16T17:30:00Z",
                                                                        "2025-03-16T16:00:00Z", -1.5)
    assert a["reason"] == "starts earlier: runs on added GPUs: added-00,added-01 GPUs [8, 16)"
    assert (a["nodes_base"], a["nodes_whatif"]) == ("gpu-a,gpu-b", "added-00,added-01")
    b, w, d = doc["base"], doc["whatif"], doc["delta"]
    # batch GPU-h: R 4x2 + B 4x3 + A 8x2 GPU-steps = 36 x 0.5 h = 18; over 8 GPUs x 4 h, then 16 GPUs x 4 h
    assert b["planned_utilization_pct"] == pytest.approx(56.25) and w["planned_utilization_pct"] == pytest.approx(28.125)
    assert b["planned_value"] == pytest.approx(30.0) and d["planned_value"] == pytest.approx(0.0)  # 4x4 + 6 + 8
    assert (b["gpus_up"], w["gpus_up"], d["gpus_up"]) == (8, 16, 8)
    assert (b["jobs_started"], w["jobs_started"], b["idle_gpu_h"], w["idle_gpu_h"]) == (2, 2, 14.0, 46.0)
    assert b["verified"] is True and w["verified"] is True and w["status"] == "optimal"


def test_drain_node_lets_its_running_job_finish_and_starts_nothing_new_there(hand):
    # case 022: Slurm's drain. R (running on gpu-b) keeps its GPUs until its planned end; B keeps 16:00Z on gpu-a;
    # A (8 GPUs) can no longer start: the only change
    doc = _json(hand, "--drain-node", "gpu-b")
    assert doc["changes"] == ["gpu-b drained"]
    jobs = {j["job_id"]: j for j in doc["jobs"]}
    assert sorted(jobs) == ["A"] and jobs["A"]["start_ts_whatif"] is None
    assert "R" not in json.dumps(doc["jobs"])  # not lost, not requeued
    assert doc["whatif"]["gpus_up"] == 4


def test_fail_node_requeues_the_jobs_on_it(hand):
    doc = _json(hand, "--fail-node", "gpu-b")
    assert doc["changes"] == ["gpu-b failed"]
    jobs = {j["job_id"]: j for j in doc["jobs"]}
    assert jobs["R"]["change"] == "requeued" and jobs["R"]["start_ts_whatif"] == "2025-03-16T16:00:00Z"
    assert jobs["R"]["reason"].startswith("was running on GPUs [4, 8) (gpu-b failed): lost, requeued")
    assert (jobs["B"]["start_ts_base"], jobs["B"]["start_ts_whatif"]) == ("2025-03-16T16:00:00Z",
                                                                          "2025-03-16T17:00:00Z")
    assert jobs["A"]["start_ts_whatif"] is None
    w = doc["whatif"]
    # 4 GPUs up x 4 h = 16 GPU-h; R 4 GPU-h + B 6 GPU-h; value 4 x 4 + 6
    assert (w["gpus_up"], w["jobs_started"], w["jobs_waiting"], w["jobs_total"]) == (4, 2, 1, 3)
    assert w["planned_utilization_pct"] == pytest.approx(62.5) and w["planned_value"] == pytest.approx(22.0)


def test_text_output_says_which_job_starts_earlier(hand):
    res = CliRunner().invoke(app, ["whatif", str(hand), "--add-gpus", "8"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "+8 GPUs" in out and "jobs whose plan changed" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("A "))
    assert "03-16 17:30Z -> 03-16 16:00Z" in line and "(-1.5 h)" in line and "runs on added GPUs: added-00,added-01 GPUs [8, 16)" in line
    assert "both verified" in out


def test_several_changes_at_once(hand, tmp_path):
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"job_id": "N", "kind": "training", "priority": 2, "gpus": 4, "duration_h": 1.2}))
    doc = _json(hand, "--cancel", "A", "--priority", "B=3", "--add-job", job)
    assert doc["changes"] == ["cancel A", "priority B = 3", "add job N"]
    jobs = {j["job_id"]: j for j in doc["jobs"]}
    assert jobs["A"]["change"] == "cancelled" and jobs["A"]["start_ts_whatif"] is None
    assert jobs["N"]["change"] == "added" and jobs["N"]["gpus_whatif"] == 4
    assert jobs["B"]["reason"].startswith("priority 1 -> 3")
    assert doc["whatif"]["jobs_total"] == 2  # B and N queued (A cancelled, R running)


def test_demand_scale_coverage(tmp_path):
    folder = run_folder(tmp_path, CHAT, ["n0"])
    doc = _json(folder, "--demand-scale", "chat=3")
    # demand 2 -> 6 GPUs per step, the service's band ends at 4: 4 of 6 covered, 2 GPUs x 4 steps x 0.5 h unmet
    assert doc["whatif"]["rt_covered_p90_pct"] == pytest.approx(100 * 4 / 6)
    assert doc["delta"]["rt_covered_p90_pct"] == pytest.approx(100 * 4 / 6 - 100)
    assert doc["whatif"]["planned_rt_unmet_gpu_h"] == pytest.approx(4.0) and doc["jobs"] == []


@pytest.mark.parametrize(("args", "line"), [
    (["--cancel", "Z"], "error: --cancel Z: no queued or running job 'Z' in the run (3 jobs, e.g. A, B, R)"),
    (["--drain-node", "gpu-z"], "error: --drain-node gpu-z: no node 'gpu-z' in the run (nodes: gpu-a, gpu-b)"),
    (["--fail-node", "gpu-z"], "error: --fail-node gpu-z: no node 'gpu-z' in the run (nodes: gpu-a, gpu-b)"),
    (["--demand-scale", "chat=2"], "error: --demand-scale chat=2: no service 'chat' in the run (services: none)"),
    (["--fail-gpus", "8-x"], "error: --fail-gpus '8-x': expected GPU indices such as 8-15, 3 or 8-11,20-23 "
                             "(inclusive ranges); '8-x' is not one"),
    (["--fail-gpus", "7-4"], "error: --fail-gpus '7-4': range 7-4 ends before it starts"),
    (["--fail-gpus", "6-9"], "error: --fail-gpus 6-9: GPU 8 is outside the cluster of 8 GPUs (0-7)"),
    (["--priority", "A"], "error: --priority 'A': expected JOB=NUMBER"),
    (["--priority", "A=x"], "error: --priority 'A=x': 'x' is not a number"),
    (["--add-job", "/nonexistent/job.json"], "error: --add-job /nonexistent/job.json: no such file"),
])
def test_bad_input_is_one_line_exit_2(hand, args, line):
    res = CliRunner().invoke(app, ["whatif", str(hand), *args])
    assert res.exit_code == 2, res.output
    assert res.stdout == "" and res.stderr.splitlines() == [line]


def test_not_a_run_folder(tmp_path):
    res = CliRunner().invoke(app, ["whatif", str(tmp_path), "--add-gpus", "8"])
    assert res.exit_code == 2
    assert res.stderr.strip() == (f"error: RUN_FOLDER {tmp_path}: no problem.json in it (not a run folder written by "
                                  "'gpuplan run' or the replan deployment)")


def test_the_runs_folder_given_for_a_run_folder_names_its_latest(tmp_path):
    """``gpuplan whatif runs`` (the folder of the run folders): the error says to give one, e.g. runs/latest."""
    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / "problem.json").write_text("{}")
    for given in (tmp_path, tmp_path / "latest" / ".."):
        res = CliRunner().invoke(app, ["whatif", str(given), "--add-gpus", "8"])
        assert res.exit_code == 2
        assert res.stderr.strip() == (
            f"error: RUN_FOLDER {given}: no problem.json in it (not a run folder written by 'gpuplan run' or the "
            f"replan deployment); it holds run folders: give one, such as {tmp_path / 'latest'}")


def _with_deadline(folder: Path, p90_h: float) -> Path:
    """jobs.parquet of the hand run: A (8 GPUs) due 2025-03-16 18:30:00Z with the given P90, B without a deadline."""
    import pandas as pd

    start = pd.Timestamp("2025-03-16T16:00:00Z")
    pd.DataFrame([
        {"job_id": "A", "kind": "training", "priority": 1.0, "state": "queued", "deadline_at": start + pd.Timedelta("2.5h"),
         "gpus_requested": 8, "duration_p10_h": 0.8, "duration_p50_h": 0.9, "duration_p90_h": p90_h, "size_options": ""},
        {"job_id": "B", "kind": "quantization", "priority": 1.0, "state": "queued", "deadline_at": pd.NaT,
         "gpus_requested": 4, "duration_p10_h": 1.4, "duration_p50_h": 1.5, "duration_p90_h": 1.6, "size_options": ""},
    ]).assign(submitted_at=start - pd.Timedelta("1h"), started_at=pd.NaT, source="generated", gpus_pred=0,
              flags="").assign(gpus_pred=lambda d: d["gpus_requested"]).to_parquet(folder / "jobs.parquet")
    return folder


def test_a_whatif_that_makes_a_job_miss_its_deadline_says_so(hand):
    """Base: A starts at step 3 (17:30Z) on 8 GPUs, P90 1.0 h: finishes 18:30:00Z, exactly its deadline (not late).
    Draining gpu-b leaves 4 GPUs up: A (8 GPUs) never starts, so it now misses its deadline."""
    _with_deadline(hand.resolve(), p90_h=1.0)
    doc = _json(hand, "--drain-node", "gpu-b")
    assert doc["base"]["jobs_missing_deadline"] == 0 and doc["whatif"]["jobs_missing_deadline"] == 1
    assert doc["delta"]["jobs_missing_deadline"] == 1
    a = {j["job_id"]: j for j in doc["jobs"]}["A"]
    assert a["misses_deadline_whatif"] and not a["misses_deadline_base"]
    assert a["deadline_at"] == "2025-03-16T18:30:00Z" and a["p90_finish_whatif"] is None
    text = CliRunner().invoke(app, ["whatif", str(hand), "--drain-node", "gpu-b"]).stdout
    assert "MISSES DEADLINE 2025-03-16T18:30:00Z (not started)" in text
    # the first line, what the change "buys", says what it costs in deadlines (a trial's new user missed it)
    assert doc["summary"][0].endswith("; jobs missing their deadline (P90) 0 -> 1, now missing: A")
    assert text.splitlines()[0].endswith("; jobs missing their deadline (P90) 0 -> 1, now missing: A")


def test_deadline_compared_with_the_p90_at_the_planned_start(hand):
    """With P90 1.01 h the base plan's A already ends at 18:30:36Z, after its 18:30:00Z deadline."""
    _with_deadline(hand.resolve(), p90_h=1.01)
    doc = _json(hand, "--add-gpus", "8")  # A moves to step 0 on the new GPUs: 16:00Z + 1.01 h = 17:00:36Z, in time
    assert doc["base"]["jobs_missing_deadline"] == 1 and doc["whatif"]["jobs_missing_deadline"] == 0
    assert doc["summary"][0].endswith("; jobs missing their deadline (P90) 1 -> 0")


def test_the_count_line_names_every_kind_of_change_so_it_adds_up():
    from pipelines.report.whatif import change_counts_text

    kinds = ["earlier"] * 3 + ["later"] * 2 + ["moved"] * 4 + ["cancelled", "unchanged", "added"]
    assert change_counts_text([{"change": k} for k in kinds]) == (
        "3 earlier, 2 later, 4 re-packed at the same start, 1 added, 1 cancelled, 1 with a new priority, start "
        "unchanged")
    assert change_counts_text([]) == "none"


def test_fail_text_counts_every_changed_job(hand):
    # gpu-b failing: R (running there) is requeued, B moves from 16:00 to 17:00, A no longer starts (later)
    res = CliRunner().invoke(app, ["whatif", str(hand), "--fail-node", "gpu-b"])
    assert res.exit_code == 0, res.output
    assert "jobs whose plan changed: 3 (2 later, 1 requeued; start times UTC):" in res.stdout.splitlines()


def test_time_limit_option_replans_with_that_budget_and_refuses_a_bad_one(hand):
    doc = _json(hand, "--add-gpus", "8", "--time-limit", "60")
    assert doc["time_limit_s"] == 60.0 and doc["whatif"]["status"] == "optimal"
    assert not any(n.startswith("the what-if plan is not proven optimal") for n in doc["notes"])
    for bad in ("0", "-5", "nan"):
        res = CliRunner().invoke(app, ["whatif", str(hand), "--add-gpus", "8", "--time-limit", bad])
        assert res.exit_code == 2 and res.output.strip().splitlines()[-1].startswith("error: --time-limit must be a "
                                                                                       "positive number of seconds")


def test_a_what_if_plan_that_is_not_proven_optimal_says_so_with_the_planners_reason(hand, monkeypatch):
    from dataclasses import replace as dc_replace

    from pipelines.stages import whatif as wi

    real = wi.solve_stage.solve
    why = "the work budget for time_limit_s=20 does not cover the root node (auto_work_limit 0: no branch-and-bound)"
    monkeypatch.setattr(wi.solve_stage, "solve",
                        lambda *a, **k: dc_replace(real(*a, **k), status="time_limit", message=why))
    doc = _json(hand, "--add-gpus", "8")
    assert (f"the what-if plan is not proven optimal (status time_limit: {why}); a job it leaves waiting or starts "
            "late may still fit earlier: ask again with a larger --time-limit"
            ) in doc["notes"]


def test_the_first_lines_say_what_the_change_buys_and_no_job_moves_for_nothing(hand):
    """+8 GPUs on the hand case: A starts 1.5 h earlier on the added GPUs (the same planned GPU-h, so the
    same value) and every other job keeps its base start and block (issue 29's tie-break)."""
    doc = _json(hand, "--add-gpus", "8")
    assert [j["change"] for j in doc["jobs"]] == ["earlier"]
    assert doc["summary"] == ["the change buys: plan value +0.0 (+0.0%), jobs started +0; idle GPU-h +32.0 (GPUs the plan "
                              "leaves unused: a cost, not a gain) (no planned "
                              "value: 1 job changes, e.g. start earlier, for the same priority x GPU-h)"]
    text = CliRunner().invoke(app, ["whatif", str(hand), "--add-gpus", "8"]).stdout.splitlines()
    assert text[0] == doc["summary"][0] and text[1].startswith("what-if on run ")


def test_a_fast_mode_run_is_replanned_with_the_fast_mode_and_neither_a_budget_nor_time_limit_advice(tmp_path):
    """A run planned with ``planner = "fast"``: the what-if uses the fast mode too (status feasible, never proven
    optimal); its header names no time budget and its notes do not suggest a larger --time-limit (found by the
    operator trial)."""
    folder = run_folder(tmp_path, HAND, ["gpu-a", "gpu-b"])
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps({**summary, "planner": "fast"}))
    doc = _json(folder, "--add-gpus", "8")
    assert doc["planner"] == "fast" and doc["whatif"]["status"] == "feasible"
    assert not any("--time-limit" in n for n in doc.get("notes", []))
    res = CliRunner().invoke(app, ["whatif", str(folder), "--add-gpus", "8"])
    assert res.exit_code == 0, res.output
    header = next(ln for ln in res.output.splitlines() if ln.startswith("what-if on run"))
    assert header.endswith("planner fast): +8 GPUs") and "budget" not in header


def test_a_job_the_what_if_stops_is_stopped_at_step_0_requeued_not_not_started(tmp_path):
    """Operator trial (issue 30): the surge problem of tests/optimizer/test_preemption_production.py, its base plan
    solved without stops (``plan``); the what-if re-plan (production path) stops P2 (2 GPUs, loses 1 + 1 steps).
    It said "16:00Z -> not started ... no longer starts within the horizon"."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "optimizer"))
    from test_preemption_production import surge_doc

    folder = run_folder(tmp_path, surge_doc(4), ["gpu-a"])
    doc = _json(folder, "--priority", "Q=3")
    (p2,) = [j for j in doc["jobs"] if j["job_id"] == "P2"]
    assert (p2["change"], p2["stopped_base"], p2["stopped_whatif"], p2["start_ts_whatif"]) == (
        "stopped", False, True, None)
    assert p2["reason"] == ("stopped at step 0 (requeued): preemptible, and real-time demand at step 0 exceeds the "
                            "GPUs no running job holds; loses 2 step(s) on 2 GPU(s): 2 GPU-h lost")
    assert doc["summary"][1] == "stops at step 0: base 0, what-if 1 (P2, 2 GPU-h lost)"
    res, line = _whatif_line(folder, "--priority", "Q=3")
    assert line.startswith("  P2             03-16 16:00Z -> stopped at step 0 (requeued)")
    assert "not started" not in line
    assert "(1 stopped at step 0 (requeued), 1 with a new priority, start unchanged; start times UTC)" in res.stdout


def _whatif_line(folder: Path, *args: str, job: str = "P2"):
    """``gpuplan whatif FOLDER ARGS`` through the CLI (exit 0 asserted): the result and the text line of ``job``."""
    res = CliRunner().invoke(app, ["whatif", str(folder), *args])
    assert res.exit_code == 0, res.output
    return res, next(ln for ln in res.stdout.splitlines() if ln.startswith(f"  {job} "))


def _stopped_base_folder(tmp_path: Path) -> Path:
    """The surge problem's run folder with its published plan made as production makes it: P2 stopped at step 0."""
    import sys

    from optimizer.planners import production_plan

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "optimizer"))
    from test_preemption_production import surge_doc

    folder = run_folder(tmp_path, surge_doc(4), ["gpu-a"])
    prob = Problem.from_dict(surge_doc(4))
    base = production_plan(prob, "milp")
    assert base.stops == (("P2", 2),)
    (folder / "plan.json").write_text(json.dumps(base.to_dict()))
    return folder


def test_a_stop_in_both_plans_is_listed_as_still_stopped_and_the_summary_counts_the_stops(tmp_path):
    """Operator trial (issue 30): P2 stopped in the base and in the what-if (--priority Q=3 leaves the surge) was
    left out of the comparison; the first lines did not count the stops."""
    folder = _stopped_base_folder(tmp_path)
    doc = _json(folder, "--priority", "Q=3")
    assert doc["summary"][1] == "stops at step 0: base 1 (P2, 2 GPU-h lost), what-if 1 (P2, 2 GPU-h lost)"
    (p2,) = [j for j in doc["jobs"] if j["job_id"] == "P2"]
    assert (p2["change"], p2["stopped_base"], p2["stopped_whatif"], p2["start_ts_base"], p2["start_ts_whatif"]) == (
        "still_stopped", True, True, None, None)
    assert p2["reason"] == "still stopped at step 0 (requeued) in both plans; loses 2 step(s) on 2 GPU(s): 2 GPU-h lost"
    res, line = _whatif_line(folder, "--priority", "Q=3")
    assert line.startswith("  P2            stopped at step 0 (requeued) -> stopped at step 0 (requeued)")
    # a stop in both plans is listed but is not a change of the plan: the count says so (it read "changed: 2 (1 still
    # stopped ...)" beside "nothing: the plan is the base's")
    assert ("jobs whose plan changed: 1 (1 with a new priority, start unchanged; also listed: 1 still stopped at step 0 "
            "in both plans; start times UTC):") in res.stdout


def test_a_base_stop_the_what_if_does_not_make_reads_no_longer_stopped_keeps_running(tmp_path):
    """Operator trial (issue 30): with chat's demand halved there is no surge and P2 keeps running; it read
    "stopped at step 0 (requeued) -> 03-16 16:00Z  now starts: ..."."""
    folder = _stopped_base_folder(tmp_path)
    doc = _json(folder, "--demand-scale", "chat=0.5")
    assert doc["summary"][1] == "stops at step 0: base 1 (P2, 2 GPU-h lost), what-if 0"
    (p2,) = [j for j in doc["jobs"] if j["job_id"] == "P2"]
    assert (p2["change"], p2["stopped_base"], p2["stopped_whatif"]) == ("unstopped", True, False)
    assert p2["reason"] == ("no longer stopped: keeps running on its GPUs (the base plan stopped it at step 0: "
                            "loses 2 step(s) on 2 GPU(s): 2 GPU-h lost); why: in the what-if, real-time demand at "
                            "step 0 fits the GPUs no running job holds")
    assert "now starts" not in p2["reason"]
    res, line = _whatif_line(folder, "--demand-scale", "chat=0.5")
    assert line.startswith("  P2            stopped at step 0 (requeued) -> keeps running")
    assert "now starts" not in line
    assert "(1 no longer stopped (keeps running); start times UTC)" in res.stdout


def test_the_risk_reports_smaller_size_run_as_suggested_moves_no_other_job(tmp_path):
    """The demo run's report says qtrn-00006 on 16 GPUs "fits the plan as it is from 2025-03-17 00:30Z (GPUs 32-47)"
    (pinned in tests/pipelines/report/test_risk_html.py) and suggests ``--cancel qtrn-00006 --add-job`` its
    16-GPU entry. The re-plan of that (measured: start 03-16 19:30Z, 52 jobs moved, qtrn-00001 past its deadline)
    is within the 0.1 % gap of the insertion (objective 10,169.17 vs 10,162.19), so the what-if's answer is the
    report's placement: step 17 (00:30Z) on GPUs [32, 48), no other job changed, no deadline missed."""
    import shutil

    demo = Path(__file__).resolve().parents[2] / "fixtures" / "demo-run"
    folder = tmp_path / "20250316T1600Z_demo"
    shutil.copytree(demo, folder)
    job = tmp_path / "whatif-qtrn-00006-16gpus.json"
    job.write_text(json.dumps({"job_id": "qtrn-00006-16gpus", "kind": "training", "priority": 2.0,
                               "release_step": 0, "gpus": 16, "duration_steps": 8}))
    out = _json(str(folder), "--cancel", "qtrn-00006", "--add-job", str(job))
    assert [(j["job_id"], j["change"]) for j in out["jobs"]] == [("qtrn-00006", "cancelled"),
                                                                  ("qtrn-00006-16gpus", "added")]
    added = out["jobs"][1]
    assert (added["start_step_whatif"], added["start_ts_whatif"], added["gpus_whatif"]) == (
        17, "2025-03-17T00:30:00Z", 16)
    assert added["reason"] == "added; starts at 03-17 00:30Z on node-04,node-05 GPUs [32, 48)"
    assert out["whatif"]["jobs_missing_deadline"] == 0 and out["delta"]["jobs_started"] == 1


def test_the_stops_line_totals_the_gpu_h_lost_of_more_than_one_stop():
    """Operator trial (issue 30): with several stops the line had each job's cost and no total. Half-hour steps:
    P1 1 step x 2 GPUs = 1 GPU-h, P2 2 steps x 4 GPUs = 4 GPU-h; 5 in all."""
    from dataclasses import replace as _replace

    from optimizer.plan import Plan
    from pipelines.stages.whatif import stops_line

    empty = Plan("milp", "optimal", (), {}, 0.0, None, None, 0.0, None, n_gpus=8, horizon_steps=4)
    two = _replace(empty, stops=(("P1", 1), ("P2", 2)))
    one = _replace(empty, stops=(("P2", 2),))
    assert stops_line(two, one, {"P1": 2, "P2": 4}, 0.5) == (
        "stops at step 0: base 2 (P1, 1 GPU-h lost, P2, 4 GPU-h lost; 5 GPU-h lost in all), what-if 1 (P2, 4 GPU-h lost)")
