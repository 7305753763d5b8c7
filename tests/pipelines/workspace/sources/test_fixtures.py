"""The real-format fixtures under data/fixtures/ are what scripts/make_fixtures.py derives, byte for byte.

Two re-derivations into a temporary folder: from the committed snapshots alone (no shared data;
always runs when the shipped inputs are there) and from the public traces in the shared folder
(``../shared/data`` beside the clone as in CI, or ``$GPUPLAN_SHARED_DATA``; skipped when absent).
The remaining tests pin hand-checked values of the committed files.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
FIX = ROOT / "data" / "fixtures"
SHARED = Path(os.environ.get("GPUPLAN_SHARED_DATA", ROOT.parent / "shared" / "data"))
OUTPUTS = ("openb/sacct.txt", "openb/squeue.json", "openb/workloads.json", "openb/nodes.csv",
           "openb/pod_requests.csv", "servegen/prometheus.json", "openb/replay_week.csv")
SHIPPED_INPUTS = (ROOT / "data" / "traces" / "alibaba_openb_window.csv", ROOT / "data" / "traffic" / "services.json",
                  FIX / "openb" / "nodes.csv", FIX / "openb" / "pod_requests.csv", FIX / "servegen" / "prometheus.json",
                  FIX / "openb" / "replay_week.csv")
SHARED_INPUTS = (SHARED / "alibaba-openb-gpu-2023" / "openb_node_list_gpu_node.csv",
                 SHARED / "alibaba-openb-gpu-2023" / "openb_pod_list_default.csv",
                 SHARED / "servegen-bailian-llm-2025" / "aggregate_10min.csv")
#: T = the end of the Prometheus fixture: 2025-03-17 00:00 Asia/Shanghai.
T_UNIX = 1_742_140_800


def _script():
    spec = importlib.util.spec_from_file_location("make_fixtures", ROOT / "scripts" / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def _rederive(tmp_path: Path, shared: Path, capsys) -> dict:
    out = tmp_path / "out"
    assert _script().main(["--shared", str(shared), "--out", str(out)]) == 0
    for rel in OUTPUTS:
        assert (out / rel).read_bytes() == (FIX / rel).read_bytes(), f"{rel} differs from a re-derivation"
    return json.loads(capsys.readouterr().out)


@pytest.mark.skipif(not all(p.is_file() for p in SHIPPED_INPUTS), reason="a shipped input or snapshot is absent")
def test_rederivation_from_committed_snapshots_is_byte_identical(tmp_path, capsys):
    summary = _rederive(tmp_path, tmp_path / "no-shared-data", capsys)
    assert (summary["T_local"], summary["T_window_s"], summary["T_unix"]) == ("2025-03-17T00:00:00", 107580, T_UNIX)
    assert (summary["history"], summary["running_at_T"], summary["pending_at_T"]) == (209, 7, 1)
    assert (summary["history_completed"], summary["history_failed"], summary["history_cancelled_pending"]) == (39, 158, 12)
    assert (summary["replay_jobs_that_waited"], summary["replay_peak_gpus_busy"]) == (0, 13)
    assert (summary["max_pending_any_minute"], summary["max_active_with_history"]) == (1, 10)
    week = summary["replay_week"]
    assert (week["jobs"], week["waited"]) == (916, 0)
    assert week["final_states"] == {"FAILED": 627, "COMPLETED": 203, "CANCELLED": 85, "RUNNING": 1}
    days = week["days"]
    assert [d["T"] for d in days] == [f"2025-03-{10 + d}T16:00:00Z" for d in range(7)]
    assert [d["submitted"] for d in days] == [135, 116, 152, 83, 123, 210, 97]
    assert [(d["pending"], d["running"], d["ended"]) for d in days] == [
        (0, 4, 131), (0, 3, 248), (0, 5, 398), (0, 3, 483), (0, 7, 602), (0, 5, 814), (0, 8, 908)]


@pytest.mark.skipif(not all(p.is_file() for p in SHARED_INPUTS),
                    reason="needs the shared public traces (../shared/data or $GPUPLAN_SHARED_DATA)")
def test_rederivation_from_shared_data_is_byte_identical(tmp_path, capsys):
    summary = _rederive(tmp_path, SHARED, capsys)
    assert summary["prometheus_series"] == {"m-mid": 2016, "m-small": 2016}
    assert summary["prometheus_zero_samples"] == {"m-mid": 84, "m-small": 37}
    assert summary["replay_week_trace_days"] == [118, 124]  # the 7 creation days with the most non-LS GPU pods


def test_replay_week_hand_checked_rows():
    with (FIX / "openb" / "replay_week.csv").open() as fh:
        rows = {r["pod"]: r for r in csv.DictReader(fh)}
    # openb-pod-0432: created 1538 s into trace day 118 (= 2025-03-09T16:00Z, day 124's end is 2025-03-16T16:00Z),
    # ran 10197213 - 10196739 = 474 s; pod_phase Running but deleted before the trace end -> COMPLETED.
    assert rows["openb-pod-0432"] == {
        "job_id": "800001", "pod": "openb-pod-0432", "qos": "Guaranteed", "gpus": "1", "cpu_milli": "12000",
        "memory_mib": "24576", "node": "openb-node-0026", "node_model": "G2", "submitted_at": "2025-03-09T16:25:38Z",
        "started_at": "2025-03-09T16:25:38Z", "ended_at": "2025-03-09T16:33:32Z", "final_state": "COMPLETED"}
    # openb-pod-0436: never scheduled, deleted 60 s after creation -> cancelled while pending, no node.
    assert [rows["openb-pod-0436"][k] for k in ("node", "started_at", "ended_at", "final_state")] == [
        "", "", "2025-03-09T16:32:17Z", "CANCELLED"]
    # openb-pod-1556 is still running at the trace end: it never ends.
    assert [rows["openb-pod-1556"][k] for k in ("ended_at", "final_state")] == ["", "RUNNING"]


def _sacct() -> list[list[str]]:
    return [line.split("|") for line in (FIX / "openb" / "sacct.txt").read_text().splitlines()]


def test_sacct_header_lines_and_a_hand_checked_job():
    rows = _sacct()
    assert rows[0] == ["JobID", "JobName", "User", "Account", "Partition", "QOS", "Priority", "Submit", "Eligible",
                       "Start", "End", "Elapsed", "Timelimit", "State", "ReqTRES", "AllocTRES", "NodeList", "Comment"]
    assert all(len(r) == 18 for r in rows)
    jobs = [r for r in rows[1:] if "." not in r[0]]
    steps = [r for r in rows[1:] if "." in r[0]]
    assert len(jobs) == 217 and len(steps) == 2 * (217 - 13)  # 13 never started: 12 cancelled, 1 pending
    # openb-pod-1390: created 638 s after the window start (18:07:00 local), ran 859 - 638 = 221 s, Failed;
    # 3152 milli-CPU -> 4 CPUs, 5600 MiB; smallest fitting node: the first G2 node.
    assert rows[1] == ["700001", "openb-pod-1390", "openb", "openb", "gpu", "be", "1000", "2025-03-15T18:17:38",
                       "2025-03-15T18:17:38", "2025-03-15T18:17:38", "2025-03-15T18:21:19", "00:03:41", "UNLIMITED",
                       "FAILED", "billing=4,cpu=4,gres/gpu=1,mem=5600M,node=1",
                       "billing=4,cpu=4,gres/gpu:g2=1,gres/gpu=1,mem=5600M,node=1", "openb-node-0026", ""]
    assert rows[2][:4] == ["700001.batch", "batch", "", "openb"] and rows[2][13:16] == [
        "FAILED", "", "cpu=4,gres/gpu:g2=1,gres/gpu=1,mem=5600M,node=1"]
    assert rows[3][0] == "700001.extern" and rows[3][13] == "COMPLETED"


def test_sacct_states_at_export_time():
    by_id = {r[0]: r for r in _sacct()[1:]}
    # openb-pod-1556 (Guaranteed) still ran at the trace end: running at T since 80197 s -> 27383 s elapsed.
    assert by_id["700085"][9:14] == ["2025-03-16T16:23:37", "Unknown", "07:36:23", "UNLIMITED", "RUNNING"]
    # openb-pod-1736 was never scheduled; created 360 s before T, still pending at T.
    assert by_id["700216"][9:14] == ["Unknown", "Unknown", "00:00:00", "UNLIMITED", "PENDING"]
    assert by_id["700216"][15:17] == ["", "None assigned"]
    # openb-pod-1482: deleted 45 s after creation without being scheduled: cancelled while pending.
    assert by_id["700043"][7:14] == ["2025-03-16T12:19:44"] * 2 + ["2025-03-16T12:20:29"] * 2 + [
        "00:00:00", "UNLIMITED", "CANCELLED"]
    states = [r[13] for r in _sacct()[1:] if "." not in r[0]]
    assert {s: states.count(s) for s in set(states)} == {"COMPLETED": 39, "FAILED": 158, "CANCELLED": 12,
                                                           "RUNNING": 7, "PENDING": 1}


def test_squeue_json_shape():
    text = (FIX / "openb" / "squeue.json").read_text()
    assert '"data_parser": "data_parser\\/v0.0.40"' in text  # Slurm escapes '/'
    doc = json.loads(text)
    assert list(doc) == ["jobs", "last_backfill", "last_update", "meta", "errors", "warnings"]
    jobs = {j["job_id"]: j for j in doc["jobs"]}
    assert sorted(jobs) == [700041, 700085, 700174, 700212, 700213, 700215, 700216, 700217]
    run, pend = jobs[700085], jobs[700216]
    assert run["job_state"] == ["RUNNING"] and pend["job_state"] == ["PENDING"]
    assert run["start_time"] == {"set": True, "infinite": False, "number": T_UNIX - 27383}
    assert run["end_time"]["number"] == T_UNIX - 27383 + 365 * 86400  # unlimited: start + 1 year (slurmctld)
    assert run["time_limit"] == {"set": False, "infinite": True, "number": 0}
    assert run["tres_alloc_str"] == "cpu=12,mem=24G,node=1,billing=12,gres/gpu=1,gres/gpu:g2=1"
    assert pend["submit_time"]["number"] == T_UNIX - 360 and pend["start_time"]["number"] == 0
    assert pend["tres_alloc_str"] == "" and pend["nodes"] == ""
    assert (run["qos"], run["priority"]["number"], pend["priority"]["number"]) == ("guaranteed", 4000, 1000)


def test_workloads_json_shape():
    doc = json.loads((FIX / "openb" / "workloads.json").read_text())
    assert (doc["apiVersion"], doc["kind"], len(doc["items"])) == ("v1", "List", 209 - 12 + 7 + 1)
    names = {i["metadata"]["ownerReferences"][0]["name"]: i for i in doc["items"]}
    assert "openb-pod-1482" not in names  # deleted while pending: its Workload went with the Job
    wl = names["openb-pod-1390"]
    uid = wl["metadata"]["ownerReferences"][0]["uid"]
    assert wl["metadata"]["name"] == "job-openb-pod-1390-" + hashlib.sha1(
        f"Job\nbatch\nopenb-pod-1390\n{uid}".encode()).hexdigest()[:5]
    assert wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "3152m", "memory": "5600Mi", "nvidia.com/gpu": "1"}
    conds = {c["type"]: c for c in wl["status"]["conditions"]}
    assert conds["Admitted"]["lastTransitionTime"] == "2025-03-15T10:17:38Z"
    assert (conds["Finished"]["reason"], conds["Finished"]["lastTransitionTime"]) == ("Failed", "2025-03-15T10:21:19Z")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "g2"
    assert names["openb-pod-1736"]["status"] == {}
    assert "Finished" not in {c["type"] for c in names["openb-pod-1556"]["status"]["conditions"]}


def test_prometheus_body_ends_at_export_time():
    text = (FIX / "servegen" / "prometheus.json").read_text()
    doc = json.loads(text)
    assert (doc["status"], doc["data"]["resultType"]) == ("success", "matrix")
    series = {s["metric"]["service"]: s["values"] for s in doc["data"]["result"]}
    assert list(series) == ["m-mid", "m-small"]
    for values in series.values():
        ts = [v[0] for v in values]
        assert ts[-1] == T_UNIX and ts[0] == T_UNIX - 14 * 86400 + 600
        assert all(b - a == 600 for a, b in zip(ts, ts[1:], strict=False))
        assert all(isinstance(v[1], str) for v in values)
    assert series["m-mid"][0] == [1740931800, "986.565"]  # aggregate_10min.csv row m-mid, t_s 0


def test_node_snapshot_and_sizes():
    with (FIX / "openb" / "nodes.csv").open() as fh:
        nodes = list(csv.DictReader(fh))
    assert [n["name"] for n in nodes] == ["openb-node-0022", "openb-node-0023", "openb-node-0024"] + [
        f"openb-node-00{i}" for i in range(26, 31)]
    assert {n["gpus"] for n in nodes} == {"8"}
    assert sum((FIX / rel).stat().st_size for rel in OUTPUTS) < 2_000_000
