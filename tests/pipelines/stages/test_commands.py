"""The reviewable commands file of a plan: exact lines, and consistency with a verified plan when re-read."""

from __future__ import annotations

import pandas as pd

from pipelines.stages.commands import commands_table, commands_text

START = pd.Timestamp("2025-03-16T16:00:00Z").to_pydatetime()


def _tables() -> pd.DataFrame:
    rows = [
        {"row_type": "job", "job_id": "101", "start_step": 0, "end_step": 2, "gpus": 4, "running": False, "node": "n1"},
        {"row_type": "job", "job_id": "102", "start_step": 0, "end_step": 3, "gpus": 16, "running": False,
         "node": "n1,n2"},
        {"row_type": "job", "job_id": "103", "start_step": 4, "end_step": 6, "gpus": 2, "running": False, "node": "n2"},
        {"row_type": "job", "job_id": "104", "start_step": None, "end_step": None, "gpus": 8, "running": False,
         "node": None},
        {"row_type": "job", "job_id": "900", "start_step": 0, "end_step": 5, "gpus": 8, "running": True, "node": "n3"},
        {"row_type": "gpu_step", "job_id": None, "start_step": None, "end_step": None, "gpus": None, "running": None,
         "node": "n1"},
    ]
    return pd.DataFrame(rows)


def _jobs() -> pd.DataFrame:
    return pd.DataFrame({"job_id": ["101", "102", "103", "104", "900"],
                         "kind": ["training", "training", "quantization", "batch_inference", "training"],
                         "state": ["queued", "queued", "queued", "queued", "running"]})


def test_actions_times_and_slurm_lines():
    table = commands_table(_tables(), _jobs(), START, 30, 30, "Asia/Shanghai")
    assert list(zip(table["job_id"], table["action"])) == [
        ("101", "start_now"), ("102", "start_now"), ("103", "hold_until"), ("104", "not_in_horizon")]
    # step 4 = 18:00Z = 02:00 next day in Shanghai (UTC+8)
    assert table.set_index("job_id").loc["103", "planned_start_local"] == "2025-03-17T02:00:00"
    text = commands_text(table, _tables(), {"102": "ann"}, "slurm", "run-1", START, 30, 30, "Asia/Shanghai")
    cmds = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert cmds == [
        "scontrol update JobId=101 ReqNodeList=n1 StartTime=now",
        "scontrol create reservation ReservationName=gpuplan-102 StartTime=now Duration=90 "
        "Nodes=n1,n2 Users=ann",
        "scontrol update JobId=102 ReservationName=gpuplan-102 StartTime=now",
        "scontrol update JobId=103 StartTime=2025-03-17T02:00:00 ReqNodeList=n2",
    ]
    assert "# 104: batch_inference" in text and "900" not in text  # running jobs need nothing


def test_kueue_lines_and_a_wider_interval():
    jobs = _jobs().assign(job_id=["ns/a", "ns/b", "ns/c", "ns/d", "ns/r"])
    tables = _tables().assign(job_id=["ns/a", "ns/b", "ns/c", "ns/d", "ns/r", None])
    # a 2-hour interval: the step-4 job (2 h after the start) is still later; steps 0..3 are "now"
    table = commands_table(tables, jobs, START, 30, 120, "UTC")
    assert list(table["action"]) == ["start_now", "start_now", "hold_until", "not_in_horizon"]
    text = commands_text(table, tables, {}, "kueue", "run-2", START, 120, 30, "UTC")
    cmds = [ln for ln in text.splitlines() if ln.startswith("kubectl")]
    assert cmds[0] == ("kubectl patch workloads.kueue.x-k8s.io -n ns a --type=merge -p '{\"spec\":{\"active\":true}}'"
                       "   # admission order 1")
    assert cmds[2].endswith("'{\"spec\":{\"active\":false}}'   # re-activate at 2025-03-16T18:00Z")
    assert len(cmds) == 3



def _stopped() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The fixture with running job 901 stopped at step 0 (issue 30): no start, no block, no node in the plan."""
    tables = pd.concat([_tables(), pd.DataFrame([{"row_type": "job", "job_id": "901", "start_step": None,
                                                  "end_step": None, "gpus": None, "running": True, "node": None}])],
                       ignore_index=True)
    jobs = pd.concat([_jobs(), pd.DataFrame({"job_id": ["901"], "kind": ["training"], "state": ["running"]})],
                     ignore_index=True)
    return tables, jobs


def test_a_stop_at_step_0_is_one_requeue_line_and_the_header_says_so():
    tables, jobs = _stopped()
    table = commands_table(tables, jobs, START, 30, 30, "UTC", stops=(("901", 2),))
    assert list(zip(table["job_id"], table["action"]))[0] == ("901", "stop_now")
    text = commands_text(table, tables, {"102": "ann"}, "slurm", "run-1", START, 30, 30, "UTC")
    cmds = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert cmds[0] == "scontrol requeue JobId=901"
    assert [c for c in cmds if "requeue" in c] == ["scontrol requeue JobId=901"]
    assert "(no preemption)" not in text and "Running jobs keep their GPUs except the 1 stopped below" in text
    assert "900" not in text  # the running job not stopped needs nothing


def test_no_stop_no_requeue_line_and_the_file_as_before():
    tables, jobs = _stopped()
    before = commands_text(commands_table(_tables(), _jobs(), START, 30, 30, "UTC"), _tables(), {}, "slurm", "r",
                           START, 30, 30, "UTC")
    assert "requeue" not in before and "Running jobs keep their GPUs (no preemption) and need nothing." in before
    assert commands_table(_tables(), _jobs(), START, 30, 30, "UTC", stops=()).equals(
        commands_table(_tables(), _jobs(), START, 30, 30, "UTC"))


def test_kueue_stop_is_the_workload_eviction_then_a_later_reactivation():
    tables, jobs = _stopped()
    tables = tables.assign(job_id=["ns/a", "ns/b", "ns/c", "ns/d", "ns/r", None, "ns/s"])
    jobs = jobs.assign(job_id=["ns/a", "ns/b", "ns/c", "ns/d", "ns/r", "ns/s"])
    table = commands_table(tables, jobs, START, 30, 30, "UTC", stops=(("ns/s", 1),))
    lines = commands_text(table, tables, {}, "kueue", "run-2", START, 30, 30, "UTC").splitlines()
    patch = "kubectl patch workloads.kueue.x-k8s.io -n ns s --type=merge -p"
    assert [ln for ln in lines if ln.startswith("kubectl")][0] == (
        patch + " '{\"spec\":{\"active\":false}}'   # evict (stop) now")
    assert "# later, when a plan starts it again: " + patch + " '{\"spec\":{\"active\":true}}'" in lines


def test_the_surge_plan_of_a_problem_gives_exactly_the_requeue_of_the_cheapest_job():
    """End to end from the problem of tests/optimizer/test_preemption_production.py: the plan stops P2 (not P1, not
    the non-preemptible N), and its plan tables give one requeue line, for P2; the calm problem gives none."""
    import sys
    from pathlib import Path

    from optimizer.planners import production_plan
    from optimizer.problem import Problem
    from pipelines.stages.outputs import jobs_from_problem, plan_tables

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "optimizer"))
    from test_preemption_production import surge_doc

    for demand0, expect in ((4, ["scontrol requeue JobId=P2"]), (2, [])):
        prob = Problem.from_dict(surge_doc(demand0))
        plan = production_plan(prob, "milp")
        tables = plan_tables(prob, plan, START)
        table = commands_table(tables, jobs_from_problem(prob), START, 30, 30, "UTC", stops=plan.stops)
        text = commands_text(table, tables, {}, "slurm", "run-p", START, 30, 30, "UTC")
        assert [ln for ln in text.splitlines() if "requeue" in ln and not ln.startswith("#")] == expect
        assert ("(no preemption)" in text) == (not expect)
        if expect:
            assert "# P2: training, stopped at 2025-03-16T16:00Z" in text


def test_preemptible_jobs_running_and_none_stopped_the_header_says_so():
    """Issue 30: with preemption on and nothing stopped, the header no longer says "(no preemption)"."""
    table = commands_table(_tables(), _jobs(), START, 30, 30, "UTC")
    text = commands_text(table, _tables(), {}, "slurm", "r", START, 30, 30, "UTC", preemptible_running=2)
    assert "(no preemption)" not in text
    assert text.splitlines()[3:5] == [
        "# newest file. Preemption is on and no job is stopped at this step (2 preemptible running; real-time",
        "# demand fits at step 0): running jobs keep their GPUs and need nothing."]
    assert "requeue" not in text


def test_preemptible_jobs_only_queued_the_header_says_preemption_is_on_and_none_stopped():
    """Operator trial: with preemptible jobs queued and none running the header said "(no preemption)"."""
    table = commands_table(_tables(), _jobs(), START, 30, 30, "UTC")
    text = commands_text(table, _tables(), {}, "slurm", "r", START, 30, 30, "UTC", preemptible_queued=3)
    assert text.splitlines()[3:5] == [
        "# newest file. Preemption is on and no job is stopped at this step (no running job is preemptible; 3",
        "# queued): running jobs keep their GPUs and need nothing."]
    assert "(no preemption)" not in text


def test_a_stop_row_carries_the_gpus_the_stopped_job_holds():
    tables, jobs = _stopped()
    jobs = jobs.assign(gpus_requested=[1, 2, 4, 8, 8, 4])
    table = commands_table(tables, jobs, START, 30, 30, "UTC", stops=(("901", 2),))
    row = table.iloc[0]
    assert (row["job_id"], row["action"], row["gpus"], row["nodes"]) == ("901", "stop_now", 4, "")
    table = commands_table(tables, jobs, START, 30, 30, "UTC", stops=(("901", 2),), stop_nodes={"901": "n4,n5"})
    row = table.iloc[0]
    assert (row["job_id"], row["action"], row["gpus"], row["nodes"]) == ("901", "stop_now", 4, "n4,n5")
    text = commands_text(table, tables, {}, "slurm", "r", START, 30, 30, "UTC")
    assert "# 901: training, stopped at 2025-03-16T16:00Z, frees 4 GPU(s) on n4,n5" in text.splitlines()


def test_the_nodes_of_a_stopped_job_are_those_of_its_block_in_the_problem():
    """Operator trial: commands.tsv stop rows had no nodes. The surge problem on two 4-GPU nodes gpu-a, gpu-b:
    P2 holds GPUs 2-3 (gpu-a) and is stopped; on 1-GPU nodes its block spans two nodes."""
    import sys
    from pathlib import Path

    from optimizer.planners import production_plan
    from optimizer.problem import Problem
    from pipelines.stages.outputs import jobs_from_problem, plan_tables, running_nodes

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "optimizer"))
    from test_preemption_production import surge_doc

    doc = surge_doc(4)
    doc["cluster"]["gpus_per_node"] = 4
    prob = Problem.from_dict(doc)
    plan = production_plan(prob, "milp")
    assert plan.stops == (("P2", 2),)
    where = running_nodes(prob, ["gpu-a", "gpu-b"])
    assert where == {"P1": "gpu-a", "P2": "gpu-a", "N": "gpu-b"}
    jobs = jobs_from_problem(prob)
    jobs = pd.concat([jobs, pd.DataFrame({"job_id": ["P1", "P2", "N"], "kind": "training", "state": "running",
                                          "gpus_requested": 2})], ignore_index=True)
    table = commands_table(plan_tables(prob, plan, START, ["gpu-a", "gpu-b"]), jobs, START, 30, 30, "UTC",
                           stops=plan.stops, stop_nodes=where)
    stop = table[table["action"] == "stop_now"]
    assert stop[["job_id", "gpus", "nodes"]].values.tolist() == [["P2", 2, "gpu-a"]]
    doc["cluster"]["gpus_per_node"] = 1
    assert running_nodes(Problem.from_dict(doc), [f"n{i}" for i in range(8)]) == {
        "P1": "n0,n1", "P2": "n2,n3", "N": "n4,n5"}
