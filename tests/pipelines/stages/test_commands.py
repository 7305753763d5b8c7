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

