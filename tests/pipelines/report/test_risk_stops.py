"""The risk report's preemption section (issue 30): the job stopped now and why, the jobs a later replan could stop.

The problem of ``tests/optimizer/test_preemption_production.py``: 8 GPUs, 30-min steps from 16:00Z; P1 (priority 2,
2 GPUs, 3 since the last checkpoint or start + 1 restart), P2 (priority 1, 2 GPUs, 1 + 1), N (2 GPUs, not preemptible); chat holds 2
and wants 4 at step 0 with 2 GPUs free: the plan stops P2 (2 steps x 2 GPUs x 0.5 h = 2 GPU-h lost).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from optimizer.planners import production_plan
from optimizer.preemption import running_at, since_after, stop_outlook
from optimizer.problem import Problem
from pipelines.report import write_risk_report
from pipelines.report.risks import build_report_table
from pipelines.stages.outputs import report_inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "optimizer"))
from test_preemption_production import surge_doc  # noqa: E402

T0 = datetime(2025, 3, 16, 16, tzinfo=UTC)


def _inputs(demand0=4, preemptible=True):
    d = surge_doc(demand0)
    if not preemptible:
        for r in d["running"]:
            r.pop("preemptible", None)
    problem = Problem.from_dict(d)
    return report_inputs(problem, production_plan(problem, "priority"), T0, written_at=T0)


def test_stop_now_row_and_page_name_the_job_the_shortfall_and_the_loss(tmp_path):
    inp = _inputs()
    table = build_report_table(inp)
    now = table[table["section"] == "stop_now"]
    assert now["job_id"].tolist() == ["P2"] and int(now["count"].iloc[0]) == 2
    assert float(now["value"].iloc[0]) == 2.0 and int(now["shortfall_gpus"].iloc[0]) == 2
    page = write_risk_report(tmp_path, inp, "run-s")["risk_report.md"].read_text()
    assert "## Preemption (opt-in)" in page and "2 of 3 running jobs are preemptible" in page
    assert ("real-time short of 2 GPUs at step 0 (the services take 4 GPUs at step 0 (chat 4: demand within band and swap cap), 2 GPUs up are free of running jobs); after the stops real-time has all 4 GPUs it takes at step 0; "
            "loses 2 steps (1 since the last checkpoint or start + 1 restart) on 2 GPUs: 2 GPU-h lost") in page
    # a plan that still gives real-time less than it takes at step 0 says by how much (operator trial, issue 30)
    short = replace(inp, plan=replace(inp.plan, service_gpus={"chat": (3,) + tuple(inp.plan.service_gpus["chat"][1:])}))
    (reason,) = build_report_table(short).query("section == 'stop_now'")["reason"]
    assert "; after the stops real-time has 3 of the 4 GPUs it takes at step 0: still short of 1 GPU; loses" in reason


def test_later_stops_on_the_p90_demand():
    inp = _inputs()
    plan, problem = inp.plan, inp.problem
    # the priority plan keeps chat at its peak, 4 GPUs, and leaves Q waiting. Chat's P90 at 6 GPUs from step 1: it
    # may take min(6, 8, 4 + 4) = 6 at step 1; P1 and N hold 4, 4 are free: 2 short. Only P1 is preemptible: it is
    # picked (its checkpoint is due at step 1: 3 + 1 = 4 = the interval, so a stop then loses only its restart)
    want = {"chat": (4, 6, 6, 6)}
    assert plan.service_gpus["chat"] == (4, 4, 4, 4)
    assert since_after(3, 4, 1, 1) == 0 and [r.job_id for r in running_at(plan, problem, 1)] == ["N", "P1"]
    (x,) = stop_outlook(plan, problem, want, "priority")
    assert (x.job_id, x.step, x.gpus, x.lost_steps, x.shortfall_gpus) == ("P1", 1, 2, 1, 2)
    assert stop_outlook(plan, problem, {"chat": (4, 2, 2, 2)}, "priority") == ()
    demand = inp.demand.copy()
    demand.loc[demand["step"] >= 1, "demand_gpus_p90"] = 6.0
    later = build_report_table(replace(inp, demand=demand))
    later = later[later["section"] == "stop_later"]
    assert later["job_id"].tolist() == ["P1"] and int(later["step"].iloc[0]) == 1
    assert later["reason"].iloc[0] == ("if real-time demand reaches its P90 at step 1 (2025-03-16 16:30Z): short of "
                                       "2 GPUs; a stop then loses 1 step on 2 GPUs: 1 GPU-h lost")


def test_no_preemptible_job_no_section(tmp_path):
    inp = _inputs(preemptible=False)
    table = build_report_table(inp)
    assert not table["section"].isin(["stop_now", "stop_later"]).any()
    assert "Preemption" not in write_risk_report(tmp_path, inp, "run-n")["risk_report.md"].read_text()


def test_gpuplan_run_prints_one_line_per_stop_from_the_run_folder(tmp_path):
    """`gpuplan run`'s console lines (pipelines.cli.run.stop_now_lines) read the stops of the published risk table."""
    from pipelines.catalog import RunCatalog
    from pipelines.cli.run import stop_now_lines

    run = RunCatalog(tmp_path)
    run.save("risk_report_table", build_report_table(_inputs()))
    assert stop_now_lines(run) == [
        "stop now:      P2 (2 GPUs): real-time short of 2 GPUs at step 0 (the services take 4 GPUs at step 0 (chat 4: demand within band and swap cap), 2 GPUs up are free of running jobs); after the stops "
        "real-time has all 4 GPUs it takes at step 0; loses 2 steps "
        "(1 since the last checkpoint or start + 1 restart) on 2 GPUs: 2 GPU-h lost"]
    (tmp_path / "none").mkdir()
    quiet = RunCatalog(tmp_path / "none")
    quiet.save("risk_report_table", build_report_table(_inputs(preemptible=False)))
    assert stop_now_lines(quiet) == []
    assert stop_now_lines(RunCatalog(tmp_path / "empty")) == []


def test_gpuplan_run_says_no_job_stopped_when_preemption_is_on_and_nothing_is_stopped(tmp_path):
    """Operator trial: with preemptible jobs and no stop `gpuplan run` printed nothing about preemption."""
    from pipelines.catalog import RunCatalog
    from pipelines.cli.run import stop_now_lines

    def lines(name, doc):
        (tmp_path / name).mkdir()
        run = RunCatalog(tmp_path / name)
        prob = Problem.from_dict(doc)
        run.save("risk_report_table", build_report_table(report_inputs(prob, production_plan(prob, "priority"), T0,
                                                                       written_at=T0)))
        run.save_problem(prob)
        return stop_now_lines(run)

    # chat wants 2 at step 0 and holds 2: it fits, P1 and P2 run on
    assert lines("calm", surge_doc(2)) == [
        "stop now:      no job stopped (2 preemptible running; real-time demand fits at step 0)"]
    queued_only = surge_doc(2)
    for r in queued_only["running"]:
        r.pop("preemptible", None)
    queued_only["jobs"][0] |= {"preemptible": True, "checkpoint_interval_steps": 2}
    assert lines("queued", queued_only) == ["stop now:      no job stopped (no running job is preemptible; 1 queued)"]
    assert lines("plain", _inputs(preemptible=False).problem.to_dict()) == []


def test_the_headline_what_to_do_first_and_estimated_starts_name_the_stop(tmp_path):
    """Operator trial: the headline and "What to do first" ignored the stop and the stopped job was absent from the
    estimated starts. P2 (4 steps left, loses 1 since its checkpoint + 1 restart) is stopped; the plan has no
    restart for it in the horizon."""
    inp = _inputs()
    assert inp.plan.stops == (("P2", 2),)
    page = write_risk_report(tmp_path, inp, "run-s")["risk_report.md"].read_text()
    jobs = next(ln for ln in page.splitlines() if ln.startswith("| Jobs |"))
    assert jobs.endswith("; 3 running, of which **1 stopped at step 0** (preemptible, requeued: P2) |")
    first = page.split("## What to do first\n\n")[1].splitlines()
    assert first[0] == ("- **Stop `P2` now** (training, 2 GPUs, preemptible): real-time is short of 2 GPUs at step 0; "
                        "2 GPU-h lost; it goes back to the queue with its remaining work. Apply its line under "
                        "\"stop now\" in `commands.sh` (gpuplan never runs it).")
    assert first[1].startswith("- **`Q`**")
    eta = page.split("## Estimated start of every queued job")[1].split("## Long holders")[0]
    assert ("Stopped at step 0 (1; not in the table above):\n\n- `P2`: stopped at step 0 (6 steps of work left with "
            "the lost work); requeued, not yet planned: the next replan plans its restart like any queued job.") in eta
    (tmp_path / "calm").mkdir()
    calm = write_risk_report(tmp_path / "calm", _inputs(demand0=2), "run-c")["risk_report.md"].read_text()
    assert "stopped at step 0" not in calm and "Stop `" not in calm and "Stopped at step 0" not in calm


def test_summary_json_lists_the_stops_at_step_0_with_gpus_gpu_h_lost_and_reason():
    """Operator trial: summary.json had no record of the stops. P2: 2 GPUs, 1 + 1 steps lost x 0.5 h = 2 GPU-h."""
    import json

    from pipelines.stages.outputs import summary

    inp = _inputs()
    doc = json.loads(json.dumps(summary("run-s", T0, inp.problem, inp.plan, inp.demand, {}, report=inp)))
    assert doc["stops"] == [{
        "job_id": "P2", "kind": "training", "priority": 1.0, "gpus": 2, "steps_since_checkpoint": 1,
        "restart_steps": 1, "lost_steps": 2, "lost_gpu_h": 2.0, "shortfall_gpus": 2,
        "reason": build_report_table(inp).query("section == 'stop_now'")["reason"].iloc[0]}]
    assert doc["stops"][0]["reason"].startswith("real-time short of 2 GPUs at step 0 (")
    # without the report's inputs (a plain summary) the same list; without a stop an empty one
    assert summary("run-s", T0, inp.problem, inp.plan, inp.demand, {})["stops"] == doc["stops"]
    calm = _inputs(demand0=2)
    assert summary("run-c", T0, calm.problem, calm.plan, calm.demand, {}, report=calm)["stops"] == []
    plain = _inputs(preemptible=False)
    assert summary("run-n", T0, plain.problem, plain.plan, plain.demand, {})["stops"] == []


def test_every_output_states_a_stop_s_cost_as_gpu_h_lost(tmp_path):
    """Operator trial: the console and gpuplan plan said "loses 2 steps", the risk report "it loses 2 GPU-h" and
    "lost GPU-h", the headline "2 GPU-h lost", plan.json only lost_steps. One name and unit: "2 GPU-h lost" in text,
    ``lost_gpu_h`` in JSON (P2: 2 steps x 2 GPUs x 0.5 h = 2)."""
    import json

    from optimizer.preemption import stop_details
    from pipelines.catalog import RunCatalog
    from pipelines.cli.plan import stop_line
    from pipelines.cli.run import stop_now_lines
    from pipelines.flows import observe
    from pipelines.stages.outputs import summary

    inp = _inputs()
    table = build_report_table(inp)
    run = RunCatalog(tmp_path)
    run.save("risk_report_table", table)
    run.save_plan(inp.plan, inp.problem)
    run.save("summary", summary("run-s", T0, inp.problem, inp.plan, inp.demand, {}, report=inp, report_table=table))
    (line,) = stop_now_lines(run)
    assert line.endswith("on 2 GPUs: 2 GPU-h lost")
    (d,) = stop_details(inp.plan, inp.problem)
    assert stop_line(d, inp.problem.cluster.step_minutes).endswith("on 2 GPUs: 2 GPU-h lost")
    page = write_risk_report(tmp_path, inp, "run-s", table=table)["risk_report.md"].read_text()
    assert "at step 0; 2 GPU-h lost; it goes back to the queue" in page
    assert "| GPU-h lost |" in page and "lost GPU-h" not in page and "loses 2 GPU-h" not in page
    assert json.loads((tmp_path / "plan.json").read_text())["stops"] == [
        {"job_id": "P2", "lost_steps": 2, "gpus": 2, "lost_gpu_h": 2.0}]
    assert run.load_plan().stops == (("P2", 2),)
    assert run.load("summary")["stops"][0]["lost_gpu_h"] == 2.0
    assert observe.headline_rows(run.load("summary"), table)[-1] == ("stopped at step 0 (requeued)",
                                                                    "P2 (2 GPUs, 2 GPU-h lost)")
    (row,) = [r for r in observe.starts_rows(table, stops=run.load("summary")["stops"]) if r["job_id"] == "P2"]
    assert row["priority"] == 1.0 and row["reason"].endswith("on 2 GPUs: 2 GPU-h lost")
