"""Field faults of issues 28 and 32 in the ingest path, each as its kind with its expected value.

Cases (``../shared/cases/field-3/<case>/README.md``): 001 pending squeue array, 006 Kueue workload
evicted yet holding its quota, 017 queue export clock going back, 019 negative traffic, 020 a ``|``
inside a job name; and issue 28's: the Jean Zay queue beside the openb history ingested twice and
planned, a Prometheus export whose every series is rejected (exit 2, counts in samples).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from optimizer.problem import Cluster
from pipelines.stages import realtime
from pipelines.stages import traffic as traffic_stage
from pipelines.stages.problem import build_problem
from pipelines.stages.queue import store as store_queue
from pipelines.stages.solve import check_plan, solve
from pipelines.workspace.ingest import export_clock_note, ingest, workspace_data
from pipelines.workspace.load import load_workspace
from pipelines.workspace.sources import tabular
from pipelines.workspace.sources.slurm import array_task_ids, parse_sacct
from pipelines.workspace.sources.slurm_squeue import parse_squeue_json
from pipelines.workspace.store import Store

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "data" / "fixtures"
SHARED = Path(os.environ.get("GPUPLAN_SHARED_DATA", ROOT.parent / "shared" / "data"))
REAL = SHARED.parent / "cases" / "field-3" / "real-inputs"
T = pd.Timestamp("2025-03-16T16:00:00Z")


def _workspace(tmp_path: Path, **paths: str):
    """The openb-slurm example workspace in ``tmp_path`` with its sources' paths replaced (role=path)."""
    text = (FIX / "workspaces" / "openb-slurm" / "gpuplan.toml").read_text()
    text = text.replace('"../../../traffic/', f'"{ROOT / "data" / "traffic"}/').replace('"../../', f'"{FIX}/')
    default = {"history": str(FIX / "openb" / "sacct.txt"), "queue": str(FIX / "openb" / "squeue.json"),
               "traffic": str(FIX / "servegen" / "prometheus.json")}
    for role, path in paths.items():
        text = text.replace(f'path = "{default[role]}"', f'path = "{path}"')
    (tmp_path / "gpuplan.toml").write_text(text)
    return load_workspace(tmp_path)


def _squeue_with(extra: list[dict]) -> dict:
    doc = json.loads((FIX / "openb" / "squeue.json").read_text())
    base = next(j for j in doc["jobs"] if j["job_id"] == 700216)
    for over in extra:
        doc["jobs"].append({**copy.deepcopy(base), **over})
    return doc


# ------------------------------------------------------------------ arrays (001; issue 28)


def test_array_spec_grammar():
    assert array_task_ids("x", "0-7") == (list(range(8)), None)
    assert array_task_ids("x", "1-9:2") == ([1, 3, 5, 7, 9], None)
    assert array_task_ids("x", "1,3,5-7%2") == ([1, 3, 5, 6, 7], 2)
    assert array_task_ids("x", "412-9999")[0][::9587] == [412, 9999]
    from pipelines.workspace.sources.slurm import BadField

    for bad, why in (("7-3", "runs backwards"), ("a-b", "is not an array spec"), ("1-5%0", "has limit %0"),
                     ("0-200000", "more than 100000 tasks")):
        with pytest.raises(BadField, match=why):
            array_task_ids("array_task_string", bad)


def test_case_001_pending_squeue_array_is_8_pending_tasks_of_1_gpu(tmp_path):
    doc = _squeue_with([{"job_id": 800000, "name": "sweep",
                         "array_job_id": {"set": True, "infinite": False, "number": 800000},
                         "array_task_id": {"set": False, "infinite": False, "number": 0}, "array_task_string": "0-7",
                         "tres_req_str": "cpu=4,mem=30517M,node=1,billing=4,gres/gpu=1", "tres_per_node": "gres/gpu:1"}])
    (tmp_path / "squeue.json").write_text(json.dumps(doc))
    ws = _workspace(tmp_path, queue=str(tmp_path / "squeue.json"))
    queue = ingest(ws)["sources"]["queue"]
    q = workspace_data(ws).queue.set_index("job_id")
    tasks = q[q.index.str.startswith("800000")]
    # the expected value first (the code before the fix stored one record '800000_[0-7]' of 1 GPU)
    assert sorted(tasks.index) == [f"800000_{t}" for t in range(8)]
    assert set(tasks["state"]) == {"pending"} and tasks["gpus"].sum() == 8
    # 9 items read, the array record became 8 task records: 7 running + 1 pending + 8 tasks = 16 added
    assert {k: queue[k] for k in ("unit", "read", "added", "rejected", "array_records_expanded", "array_tasks")} == {
        "unit": "jobs", "read": 9, "added": 16, "rejected": 0, "array_records_expanded": 1, "array_tasks": 8}


def test_squeue_array_limit_and_step_become_tasks_with_their_limit():
    doc = _squeue_with([{"job_id": 800100, "array_job_id": {"set": True, "infinite": False, "number": 800100},
                         "array_task_id": {"set": False, "infinite": False, "number": 0},
                         "array_task_string": "2-10:4%1"}])
    res = parse_squeue_json(json.dumps(doc))
    tasks = res.frame[res.frame["job_id"].str.startswith("800100")]
    assert list(tasks["job_id"]) == ["800100_2", "800100_6", "800100_10"]
    assert [json.loads(a)["array_max_running"] for a in tasks["annotations"]] == ["1", "1", "1"]
    assert (res.arrays_expanded, res.array_tasks) == (1, 3)


def test_sacct_array_placeholder_with_limit_is_expanded():
    text = ("JobID|JobName|Submit|State|ReqTRES|NodeList\n"
            "123_[4-9%2]|sweep|2025-01-01T00:00:00|PENDING|billing=1,gres/gpu:a100=2|None assigned\n")
    res = parse_sacct(text, "UTC")
    assert (res.read, res.errors, res.arrays_expanded, res.array_tasks) == (1, [], 1, 6)
    assert list(res.frame["job_id"]) == [f"123_{t}" for t in range(4, 10)]
    assert set(res.frame["gpus"]) == {2} and set(res.frame["gpu_type"]) == {"a100"}
    assert {json.loads(a)["array_max_running"] for a in res.frame["annotations"]} == {"2"}


# ------------------------------------------------------------------ sacct fields (020; issue 28)


PIPE = """\
JobID|JobName|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|Timelimit|State|ReqTRES|AllocTRES|NodeList|Comment
920001|crazy|name|u1|acct|gpu|normal|1000|2025-03-14T09:00:00|2025-03-14T09:00:00|2025-03-14T09:05:00|2025-03-14T11:05:00|02:00:00|04:00:00|COMPLETED|billing=4,cpu=4,gres/gpu=4,gres/gpu:g2=4,mem=1G,node=1|billing=4,cpu=4,gres/gpu=4,gres/gpu:g2=4,mem=1G,node=1|openb-node-0022|
920002|plain|u1|acct|gpu|normal|1000|2025-03-14T10:00:00|2025-03-14T10:00:00|2025-03-14T10:05:00|2025-03-14T12:05:00|02:00:00|04:00:00|COMPLETED|billing=4,cpu=4,gres/gpu=4,gres/gpu:g2=4,mem=1G,node=1|billing=4,cpu=4,gres/gpu=4,gres/gpu:g2=4,mem=1G,node=1|openb-node-0022|
"""


def test_case_020_pipe_in_job_name_is_read_when_only_jobname_can_hold_it():
    # field-3/020 sacct_pipe.txt: 19 fields on an 18-column header, the last (Comment) empty
    res = parse_sacct(PIPE, "Asia/Shanghai")
    assert (res.read, res.errors) == (2, [])
    job = res.frame.set_index("job_id").loc["920001"]
    assert (job.job_name, job.user, job.account, job.gpus, job.gpu_type, job.elapsed_s) == (
        "crazy|name", "u1", "acct", 4, "g2", 7200.0)
    assert job.submitted_at == pd.Timestamp("2025-03-14T01:00:00Z")  # 09:00 Asia/Shanghai


def test_pipe_two_free_text_columns_could_hold_is_refused_naming_job_and_cause():
    both = ("JobID|Submit|State|ReqTRES|JobName|Comment\n"
            "5|2025-01-01T00:00:00|PENDING|gres/gpu=1|a|b|c\n")
    assert parse_sacct(both, "UTC").errors == [
        "line 2: job 5: 7 fields for 6 header columns: sacct does not escape a '|' inside a free-text column "
        "(JobName, Comment); a '|' inside one of them could be in either; rename the job or export with a "
        "--delimiter that no job name holds"]
    none = ("JobID|JobName|Submit|State|ReqTRES\n"
            "6|x|2025-01-01T00:00:00|PENDING|gres/gpu=1|extra\n")
    assert parse_sacct(none, "UTC").errors == [
        "line 2: job 6: 6 fields for 5 header columns: sacct does not escape a '|' inside a free-text column "
        "(JobName); no free-text column can hold the extra fields"]


def test_zero_second_job_with_nodes_ran_and_one_without_nodes_did_not():
    text = ("JobID|Submit|Start|End|Elapsed|State|AllocTRES|NodeList\n"
            "1|2025-01-01T00:00:00|2025-01-01T00:01:00|2025-01-01T00:01:00|00:00:00|COMPLETED|gres/gpu=1|n1\n"
            "2|2025-01-01T00:00:00|2025-01-01T00:01:00|2025-01-01T00:01:00|00:00:00|CANCELLED by 0||None assigned\n")
    jobs = parse_sacct(text, "UTC").frame.set_index("job_id")
    assert (jobs.loc["1", "elapsed_s"], jobs.loc["1", "started_at"]) == (0.0, pd.Timestamp("2025-01-01T00:01:00Z"))
    assert pd.isna(jobs.loc["2", "started_at"]) and pd.isna(jobs.loc["2", "elapsed_s"])


# ------------------------------------------------------------------ Kueue (006)


def test_case_006_evicted_workload_holding_its_quota_keeps_its_8_gpus_held(tmp_path):
    doc = json.loads((FIX / "openb" / "workloads.json").read_text())
    base = next(i for i in doc["items"] if i["metadata"]["name"] == "job-openb-pod-1467-c338e")
    w = copy.deepcopy(base)
    w["metadata"].update(name="stuck-jobset", uid="00000000-0000-0000-0000-000000014811",
                         creationTimestamp="2025-03-15T19:55:00Z")
    w["spec"]["podSets"][0]["count"] = 2
    for c in w["spec"]["podSets"][0]["template"]["spec"]["containers"]:
        c["resources"]["limits"]["nvidia.com/gpu"] = "4"
        c["resources"]["requests"]["nvidia.com/gpu"] = "4"
    w["status"]["admission"]["podSetAssignments"][0]["count"] = 2
    w["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": "2025-03-15T20:00:00Z"},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": "2025-03-15T20:00:00Z"},
        {"type": "PodsReady", "status": "False", "reason": "PodsReady", "lastTransitionTime": "2025-03-16T14:10:00Z"},
        {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout", "lastTransitionTime": "2025-03-16T14:20:00Z"}]
    doc["items"].append(w)
    (tmp_path / "workloads.json").write_text(json.dumps(doc))
    text = (FIX / "workspaces" / "openb-kueue" / "gpuplan.toml").read_text()
    text = text.replace('"../../../traffic/', f'"{ROOT / "data" / "traffic"}/').replace('"../../', f'"{FIX}/')
    text = text.replace(str(FIX / "openb" / "workloads.json"), str(tmp_path / "workloads.json"))
    (tmp_path / "gpuplan.toml").write_text(text)
    ws = load_workspace(tmp_path)
    ingest(ws)
    q = workspace_data(ws).queue.set_index("job_id")
    held = q.loc["openb/stuck-jobset"]
    assert (held.state, held.gpus, held.started_at) == ("running", 8, pd.Timestamp("2025-03-15T20:00:00Z"))
    assert json.loads(held.annotations)["kueue_quota_held"] == "Evicted:PodsReadyTimeout"


# ------------------------------------------------------------------ clock (017)


def test_case_017_queue_export_clock_going_back_is_named(tmp_path):
    exports = tmp_path / "q"
    exports.mkdir()
    a = exports / "squeue-A.json"
    a.write_text((FIX / "openb" / "squeue.json").read_text())  # last_update 16:00Z
    ws = _workspace(tmp_path, queue=str(exports / "squeue-*.json"))
    assert ingest(ws)["sources"]["queue"]["clock_note"] == ""
    doc = json.loads(a.read_text())
    doc["last_update"]["number"] = 1742137200  # 15:00Z
    (exports / "squeue-B.json").write_text(json.dumps(doc))
    a.unlink()
    note = ingest(ws)["sources"]["queue"]["clock_note"]
    assert note == ("queue export clock went back: squeue-B.json says 2025-03-16T15:00Z, earlier than the stored "
                    "snapshot's 2025-03-16T16:00Z (squeue-A.json), by 60 min; taken as the current queue (check the "
                    "login node's clock)")
    assert ingest(ws)["sources"]["queue"]["clock_note"] == note  # B again (the replan's own ingest): kept
    data = workspace_data(ws)
    assert (data.snapshot_file, data.snapshot_at, data.snapshot_note) == ("squeue-B.json",
                                                                          pd.Timestamp("2025-03-16T15:00Z"), note)
    assert export_clock_note({"exported_at": "2025-03-16T15:00:00+00:00"}, pd.Timestamp("2025-03-16T15:30Z"), "c") == ""


# ------------------------------------------------------------------ traffic (019; issue 28)


def test_case_019_negative_prometheus_samples_are_refused_and_counted_in_samples(tmp_path):
    doc = json.loads((FIX / "servegen" / "prometheus.json").read_text())
    series = next(r for r in doc["data"]["result"] if r["metric"].get("service") == "m-small")
    for v in series["values"][-12:]:
        v[1] = "-3.5"
    (tmp_path / "prom.json").write_text(json.dumps(doc))
    ws = _workspace(tmp_path, traffic=str(tmp_path / "prom.json"))
    traffic = ingest(ws)["sources"]["traffic"]
    assert (Store(ws.store_dir).traffic()["value"] < 0).sum() == 0  # the code before the fix stored all 12
    assert {k: traffic[k] for k in ("unit", "read", "added", "rejected", "error_lines")} == {
        "unit": "samples", "read": 4032, "added": 4020, "rejected": 12, "error_lines": 1}
    assert traffic["errors"][0].startswith('prom.json: series {service="m-small"}: 12 negative sample(s) refused, '
                                           'the first -3.5 at ')


def test_negative_csv_traffic_rows_are_refused():
    from pipelines.workspace.config import ServiceSettings  # noqa: F401  (services carry .service/.file)

    class Svc:
        service, file = "chat", "t.csv"

    frame = pd.DataFrame({"ts": ["2025-01-01T00:00Z", "2025-01-01T01:00Z"], "value": [5.0, -1.0]})
    res = tabular.parse_traffic(frame, "t.csv", [Svc()])
    assert (res.read, res.unit, res.errors, res.frame["value"].tolist()) == (
        2, "samples", ["line 3: value -1.0 is negative (expected traffic >= 0)"], [5.0])


def test_prometheus_export_with_every_series_rejected_exits_2_naming_it(tmp_path):
    doc = json.loads((FIX / "servegen" / "prometheus.json").read_text())
    for r in doc["data"]["result"]:
        r["metric"] = {"app": r["metric"]["service"]}  # the configured label is missing from every series
    (tmp_path / "prom.json").write_text(json.dumps(doc))
    _workspace(tmp_path, traffic=str(tmp_path / "prom.json"))
    res = subprocess.run([str(Path(sys.executable).parent / "gpuplan"), "ingest", "--workspace", str(tmp_path),
                          "--json"], capture_output=True, text=True, timeout=180)
    assert res.returncode == 2, res.stderr
    traffic = json.loads(res.stdout)["sources"]["traffic"]
    assert {k: traffic[k] for k in ("unit", "read", "added", "rejected", "error_lines", "unreadable_files")} == {
        "unit": "samples", "read": 4032, "added": 0, "rejected": 4032, "error_lines": 3,
        "unreadable_files": ["prom.json"]}
    assert traffic["errors"][-1] == "prom.json: nothing usable: all 4032 samples rejected (see the lines above)"
    assert res.stderr.strip().endswith("could not be read (their records are not in the store; see errors): "
                                       "traffic: prom.json")


# ------------------------------------------------------------------ store schema end to end (issue 28)


@pytest.mark.skipif(not REAL.is_dir(), reason=f"needs the shared real inputs ({REAL})")
def test_jeanzay_queue_beside_the_openb_history_ingests_twice_and_plans(tmp_path):
    _workspace(tmp_path, queue=str(REAL / "squeue_jeanzay_v0039_gpu.json"))
    # Jean Zay's job runs on data-center-ia830: that node takes openb-node-0030's place (8 nodes x 8 GPUs)
    cfg = tmp_path / "gpuplan.toml"
    cfg.write_text(cfg.read_text().replace("openb-node-0030 = 8", "data-center-ia830 = 8"))
    ws = load_workspace(tmp_path)
    first = ingest(ws)["sources"]
    assert (first["history"]["added"], first["queue"]["added"]) == (217, 1)
    second = ingest(ws)  # was: ArrowNotImplementedError: Unsupported cast from string to null
    assert [second["sources"][r]["added"] + second["sources"][r]["updated"] for r in second["sources"]] == [0, 0, 0]
    data = workspace_data(ws)
    assert len(data.history) == 218 and data.history.set_index("job_id").loc["1618871", "gpu_type"] is None
    assert data.queue.set_index("job_id").loc["1618871", ["state", "gpus"]].tolist() == ["running", 8]
    services = ws.services()
    traffic = realtime.ingest_traffic(services, traffic_stage.hourly_traffic(data.traffic, services, "rate_per_s"))
    start = T.to_pydatetime()
    fit = realtime.fit_realtime_forecasts(services, traffic.frame, start)
    c = ws.config.cluster
    demand = realtime.demand_frame(services, fit.profiles, traffic.frame, start, c.step_minutes, c.horizon_steps)
    jobs, notes = store_queue.forecast_cluster_queue(data.history, data.queue, ws, start, c.step_minutes)
    assert (notes["dropped_running_elsewhere"], len(jobs)) == (0, 1)
    problem = build_problem(Cluster(c.n_gpus, c.node_gpus, c.step_minutes, c.horizon_steps), services,
                            jobs, demand, start, time_limit_s=20.0)
    assert [(r.job_id, r.gpus) for r in problem.running] == [("1618871", 8)]
    assert check_plan(problem, solve(problem, "milp")) in ("optimal", "feasible")


def test_running_job_started_after_a_snapshot_whose_clock_went_back_has_elapsed_0_not_negative():
    doc = json.loads((FIX / "openb" / "squeue.json").read_text())
    doc["last_update"]["number"] = 1742137200  # 15:00Z; some running jobs started after it (controller's clock)
    jobs = parse_squeue_json(json.dumps(doc)).frame
    running = jobs[jobs["state"] == "running"]
    late = running[running["started_at"] > pd.Timestamp("2025-03-16T15:00Z")]
    assert len(late) >= 1 and set(late["elapsed_s"]) == {0.0}
    assert (running["elapsed_s"] >= 0).all()
