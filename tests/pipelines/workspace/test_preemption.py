"""Preemptible jobs from a workspace's sources (issue 30): ``[preemption]`` rules, per-job fields, into the problem.

Real-format inputs: the lab cluster's Slurm 22.05 ``squeue --json`` and sacct export, Talapas' Slurm 23.11
``squeue`` (its real partition ``preempt``), the openb Kueue workload list, CSV tables.
"""

from __future__ import annotations

import copy
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from optimizer.problem import Cluster, Problem
from pipelines.io.errors import InputError
from pipelines.stages.problem import problem_document
from pipelines.workspace.config import PreemptionConfig
from pipelines.workspace.preemption import parse_minutes, queue_preemption
from pipelines.workspace.sources.kueue import parse_kueue_workloads
from pipelines.workspace.sources.slurm import parse_sacct
from pipelines.workspace.sources.slurm_squeue import parse_squeue_json
from pipelines.workspace.sources.tabular import parse_jobs

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "tests" / "fixtures" / "slurm-lab"
REAL = ROOT.parent / "shared" / "cases" / "field-3" / "real-inputs"
T0 = pd.Timestamp("2025-03-16T16:00:00Z")


def _flags(frame, cfg):
    got, notes = queue_preemption(frame, cfg)
    return dict(zip(frame["job_id"], got["preemptible"])), got, notes


def test_default_marks_nothing_preemptible():
    res = parse_squeue_json((LAB / "squeue.json").read_text(), now=pd.Timestamp("2026-12-02T02:00Z"))
    flags, got, notes = _flags(res.frame, PreemptionConfig())
    assert not any(flags.values()) and notes == []
    assert got["restart_min"].eq(0).all() and got["checkpoint_interval_min"].isna().all()


def test_squeue_2205_qos_and_partition_mark_queued_and_running_jobs():
    res = parse_squeue_json((LAB / "squeue.json").read_text(), now=pd.Timestamp("2026-12-02T02:00Z"))
    active = res.frame[res.frame["state"].isin(["pending", "running"])].reset_index(drop=True)
    cfg = PreemptionConfig(qos=["LOW"], partitions=[], checkpoint_interval_min=60, restart_min=5)
    flags, got, _ = _flags(active, cfg)
    # the lab queue: 17 pending in QoS low; 4, 14, 15_0 running and 16, 18, 19, 15_2..15_8 pending in normal/high
    assert {j for j, f in flags.items() if f} == {"17"}
    assert dict(zip(active["job_id"], active["state"]))["17"] == "pending"
    row = got[active["job_id"] == "17"].iloc[0]
    assert (row["checkpoint_interval_min"], row["restart_min"]) == (60.0, 5.0)
    by_part = _flags(active, PreemptionConfig(partitions=["a100"]))[0]
    # partition a100: running 14 and array task 15_0, pending tasks 15_2 .. 15_8
    assert {j for j, f in by_part.items() if f} == {"14", "15_0", "15_2", "15_4", "15_6", "15_8"}


def test_squeue_2311_partition_preempt_of_a_real_cluster():
    res = parse_squeue_json((REAL / "squeue_talapas_v0040.json").read_text())
    flags, _, _ = _flags(res.frame, PreemptionConfig(partitions=["preempt"]))
    assert len(flags) == len(res.frame) > 1 and all(flags.values())
    assert set(res.frame["state"]) == {"running", "pending"}


SACCT = (
    "JobID|JobName|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|Timelimit|State|ReqTRES|"
    "AllocTRES|NodeList|Comment\n"
    "31|ft|alice|research|a100|scavenger|10|2026-12-02T00:00:00|2026-12-02T00:00:00|Unknown|Unknown|00:00:00|"
    "02:00:00|PENDING|billing=1,gres/gpu=4|||\n"
    "32|ft2|bob|research|a100|normal|10|2026-12-02T00:00:00|2026-12-02T00:00:00|2026-12-02T00:10:00|Unknown|"
    "00:50:00|02:00:00|RUNNING|billing=1,gres/gpu=4|billing=1,gres/gpu=4|a100-0|"
    "gpuplan.preemptible=true,checkpoint=45m,restart=90s\n"
    "33|ft3|carol|research|a100|scavenger|10|2026-12-02T00:00:00|2026-12-02T00:00:00|Unknown|Unknown|00:00:00|"
    "02:00:00|PENDING|billing=1,gres/gpu=4|||gpuplan.preemptible=false\n"
    "34|ft4|dan|research|a100|scavenger|10|2026-12-02T00:00:00|2026-12-02T00:00:00|Unknown|Unknown|00:00:00|"
    "02:00:00|PENDING|billing=1,gres/gpu=4|||gpuplan.checkpoint=soon\n"
)


def test_sacct_qos_and_comment_fields():
    res = parse_sacct(SACCT, "UTC")
    assert res.errors == []
    cfg = PreemptionConfig(qos=["scavenger"], checkpoint_interval_min=120)
    flags, got, notes = _flags(res.frame, cfg)
    # 31: its QoS; 32: its comment (QoS normal); 33: its comment says no (QoS scavenger); 34: a bad comment
    assert flags == {"31": True, "32": True, "33": False, "34": False}
    g = got.set_index(res.frame["job_id"])
    assert (g.loc["31", "checkpoint_interval_min"], g.loc["31", "restart_min"]) == (120.0, 0.0)
    assert (g.loc["32", "checkpoint_interval_min"], g.loc["32", "restart_min"]) == (45.0, 1.5)
    assert notes == ["job 34: gpuplan.checkpoint 'soon' is not a duration (expected e.g. 60m, 1h, 90s or minutes): "
                     "planned as not preemptible"]


def _workloads():
    return json.loads((ROOT / "data" / "fixtures" / "openb" / "workloads.json").read_text())


def _active(items):
    return [i for i in items if not any(c["type"] == "Finished" and c["status"] == "True"
                                        for c in i.get("status", {}).get("conditions", []))]


def test_kueue_label_and_workload_priority_class():
    doc = _workloads()
    doc["items"] = copy.deepcopy(_active(doc["items"]))
    be = [i for i in doc["items"] if i["spec"].get("priorityClassName") == "be"]
    other = [i for i in doc["items"] if i["spec"].get("priorityClassName") != "be"]
    assert be and other
    other[0]["metadata"].setdefault("labels", {})["gpuplan.preemptible"] = "true"
    other[0]["metadata"].setdefault("annotations", {})["gpuplan.checkpoint"] = "1h"
    # a pod template's annotation (Kueue copies the Job's pod template into the podSet)
    other[1]["spec"]["podSets"][0]["template"].setdefault("metadata", {}).setdefault("annotations", {}).update(
        {"gpuplan.preemptible": "yes", "gpuplan.restart": "45m"})
    res = parse_kueue_workloads(json.dumps(doc))
    flags, got, _ = _flags(res.frame, PreemptionConfig(qos=["BE"], restart_min=10))
    ref = {f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in be}
    labelled = f"{other[0]['metadata']['namespace']}/{other[0]['metadata']['name']}"
    podset = f"{other[1]['metadata']['namespace']}/{other[1]['metadata']['name']}"
    assert {j for j, f in flags.items() if f} == ref | {labelled, podset}
    g = got.set_index(res.frame["job_id"])
    assert g.loc[labelled, "checkpoint_interval_min"] == 60.0 and g.loc[labelled, "restart_min"] == 10.0
    assert math.isnan(g.loc[podset, "checkpoint_interval_min"]) and g.loc[podset, "restart_min"] == 45.0
    assert all(math.isnan(g.loc[j, "checkpoint_interval_min"]) for j in ref)


def _csv(text):
    return parse_jobs(pd.read_csv(io.StringIO(text)), "UTC")


def test_csv_columns_and_without_them():
    res = _csv("job_id,submitted_at,gpus,preemptible,checkpoint_interval_min,restart_min\n"
               "a,2025-03-16T10:00:00Z,4,true,30,0\nb,2025-03-16T10:00:00Z,4,false,,\n"
               "c,2025-03-16T10:00:00Z,4,,,\nd,2025-03-16T10:00:00Z,4,1,90,12.5\n")
    assert res.errors == []
    assert json.loads(res.frame["annotations"].iloc[0]) == {"checkpoint": "30m", "preemptible": "true", "restart": "0m"}
    flags, got, _ = _flags(res.frame, PreemptionConfig())
    assert flags == {"a": True, "b": False, "c": False, "d": True}
    assert got["checkpoint_interval_min"].tolist()[3] == 90.0 and got["restart_min"].tolist()[3] == 12.5
    plain = _csv("job_id,submitted_at,gpus\na,2025-03-16T10:00:00Z,4\n")
    assert json.loads(plain.frame["annotations"].iloc[0]) == {}
    assert not _flags(plain.frame, PreemptionConfig())[0]["a"]


@pytest.mark.parametrize(("cell", "message"), [
    ("preemptible\nmaybe", "line 2: preemptible 'maybe' is not true or false"),
    ("checkpoint_interval_min\n0", "line 2: checkpoint_interval_min 0.0 must be > 0 minutes"),
    ("checkpoint_interval_min\nhourly", "line 2: checkpoint_interval_min 'hourly' is not a number of minutes"),
    ("restart_min\n-5", "line 2: restart_min -5.0 must be >= 0 minutes"),
])
def test_csv_bad_preemption_values_refuse_the_file(cell, message):
    head, value = cell.split("\n")
    with pytest.raises(InputError) as err:
        _csv(f"job_id,submitted_at,gpus,{head}\na,2025-03-16T10:00:00Z,4,{value}\n")
    assert str(err.value) == message


def test_parse_minutes_units():
    assert [parse_minutes(v, "x", positive=True) for v in ("60m", "1h", "90s", "1.5h", "45", 20)] == [
        60.0, 60.0, 1.5, 90.0, 45.0, 20.0]
    with pytest.raises(ValueError, match="must be >= 0"):
        parse_minutes(-1, "x", positive=False)


def _jobs(rows):
    base = {"kind": "training", "priority": 1.0, "submitted_at": T0 - pd.Timedelta(hours=3), "deadline_at": pd.NaT,
            "source": "slurm", "gpus_requested": 2, "duration_p10_h": 1.0, "duration_p50_h": 4.0,
            "duration_p90_h": 6.0, "gpus_pred": 2, "flags": "", "size_options": None}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_problem_fields_in_steps_exact():
    jobs = _jobs([
        # queued: interval 45 min -> 2 steps (rounded up), restart 10 min -> 1 step
        {"job_id": "q1", "state": "queued", "started_at": pd.NaT, "preemptible": True,
         "checkpoint_interval_min": 45.0, "restart_min": 10.0},
        {"job_id": "q2", "state": "queued", "started_at": pd.NaT, "preemptible": False,
         "checkpoint_interval_min": math.nan, "restart_min": 0.0},
        # running 122 min with a 45-min interval: 122 mod 45 = 32 min since the checkpoint -> 2 steps
        {"job_id": "r1", "state": "running", "started_at": T0 - pd.Timedelta(minutes=122), "preemptible": True,
         "checkpoint_interval_min": 45.0, "restart_min": 30.0},
        # running 90 min, interval 30: at a checkpoint -> 0 since (field left out), restart 0
        {"job_id": "r2", "state": "running", "started_at": T0 - pd.Timedelta(minutes=90), "preemptible": True,
         "checkpoint_interval_min": 30.0, "restart_min": 0.0},
        # running 70 min without an interval: all 70 min -> 3 steps
        {"job_id": "r3", "state": "running", "started_at": T0 - pd.Timedelta(minutes=70), "preemptible": True,
         "checkpoint_interval_min": math.nan, "restart_min": 61.0},
    ])
    doc = problem_document(Cluster(16, 8, 30, 8), [], jobs, pd.DataFrame(columns=["service", "step"]),
                           T0.to_pydatetime(), time_limit_s=5)
    q = {j["job_id"]: j for j in doc["jobs"]}
    assert {k: v for k, v in q["q1"].items() if k in ("preemptible", "checkpoint_interval_steps", "restart_steps")} \
        == {"preemptible": True, "checkpoint_interval_steps": 2, "restart_steps": 1}
    assert not {"preemptible", "checkpoint_interval_steps", "restart_steps"} & set(q["q2"])
    r = {j["job_id"]: j for j in doc["running"]}
    keys = ("preemptible", "checkpoint_interval_steps", "restart_steps", "steps_since_checkpoint")
    assert {k: r["r1"].get(k) for k in keys} == {"preemptible": True, "checkpoint_interval_steps": 2,
                                                 "restart_steps": 1, "steps_since_checkpoint": 2}
    assert {k: r["r2"].get(k) for k in keys} == {"preemptible": True, "checkpoint_interval_steps": 1,
                                                 "restart_steps": None, "steps_since_checkpoint": None}
    assert {k: r["r3"].get(k) for k in keys} == {"preemptible": True, "checkpoint_interval_steps": None,
                                                 "restart_steps": 3, "steps_since_checkpoint": 3}
    p = Problem.from_dict(doc)
    run = {x.job_id: x for x in p.running}
    assert (run["r1"].lost_steps, run["r2"].lost_steps, run["r3"].lost_steps) == (3, 0, 6)


def test_without_the_columns_the_problem_has_no_preemption_fields():
    jobs = _jobs([{"job_id": "q", "state": "queued", "started_at": pd.NaT},
                  {"job_id": "r", "state": "running", "started_at": T0 - pd.Timedelta(minutes=50)}])
    doc = problem_document(Cluster(16, 8, 30, 8), [], jobs, pd.DataFrame(columns=["service", "step"]),
                           T0.to_pydatetime(), time_limit_s=5)
    text = json.dumps(doc)
    assert not any(k in text for k in ("preemptible", "checkpoint", "restart_steps"))
    flagged = jobs.assign(preemptible=False, checkpoint_interval_min=math.nan, restart_min=0.0)
    assert json.dumps(problem_document(Cluster(16, 8, 30, 8), [], flagged, pd.DataFrame(columns=["service", "step"]),
                                       T0.to_pydatetime(), time_limit_s=5)) == text


def _workspace(tmp_path, extra=""):
    from pipelines.workspace.load import load_workspace

    text = (ROOT / "data" / "fixtures" / "workspaces" / "openb-slurm" / "gpuplan.toml").read_text()
    text = text.replace('"../../../traffic/', f'"{ROOT / "data" / "traffic"}/').replace(
        '"../../', f'"{ROOT / "data" / "fixtures"}/')
    (tmp_path / "gpuplan.toml").write_text(text + extra)
    return load_workspace(tmp_path)


def _fixture_problem(ws):
    from pipelines.stages.queue import store as store_queue
    from pipelines.workspace.ingest import ingest, workspace_data

    ingest(ws)
    data = workspace_data(ws)
    c = ws.config.cluster
    jobs, notes = store_queue.forecast_cluster_queue(data.history, data.queue, ws, T0.to_pydatetime(), c.step_minutes)
    doc = problem_document(Cluster(c.n_gpus, c.node_gpus, c.step_minutes, c.horizon_steps), [], jobs,
                           pd.DataFrame(columns=["service", "step"]), T0.to_pydatetime(), time_limit_s=5)
    return jobs, notes, doc


def test_openb_slurm_workspace_qos_be_into_the_problem(tmp_path):
    ws = _workspace(tmp_path, '\n[preemption]\nqos = ["be"]\ncheckpoint_interval_min = 45\nrestart_min = 10\n')
    jobs, notes, doc = _fixture_problem(ws)
    assert notes["preemptible_jobs"] == 6 and "preemption_errors" not in notes
    keys = ("preemptible", "checkpoint_interval_steps", "restart_steps", "steps_since_checkpoint")
    running = {r["job_id"]: tuple(r.get(k) for k in keys) for r in doc["running"]}
    # elapsed at 16:00Z (squeue start_time): 700174 122.9 min (mod 45 = 32.9 -> 2 steps), the others < 30 min
    assert running == {"700041": (None,) * 4, "700085": (None,) * 4, "700174": (True, 2, 1, 2),
                       "700212": (True, 2, 1, 1), "700213": (True, 2, 1, 1), "700215": (True, 2, 1, 1),
                       "700217": (True, 2, 1, 1)}
    assert [(j["job_id"], j.get("preemptible"), j.get("checkpoint_interval_steps"), j.get("restart_steps"))
            for j in doc["jobs"]] == [("700216", True, 2, 1)]
    Problem.from_dict(doc)  # valid


def test_openb_slurm_workspace_without_preemption_writes_the_problem_it_wrote_before(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    jobs, notes, plain = _fixture_problem(_workspace(tmp_path / "a"))
    assert not set(jobs.columns) & {"preemptible", "checkpoint_interval_min", "restart_min"}
    # the store's deadline_at (microseconds) leaves the run folder's jobs/queue parquet in its old type
    assert str(jobs["deadline_at"].dtype) == "datetime64[ns, UTC]"
    assert "preemptible_jobs" not in notes
    text = json.dumps(plain, sort_keys=True)
    assert not any(k in text for k in ("preemptible", "checkpoint", "restart_steps"))
    # a rule that names no job's QoS changes nothing either
    _, _, other = _fixture_problem(_workspace(tmp_path / "b", '\n[preemption]\nqos = ["nosuch"]\nrestart_min = 5\n'))
    assert json.dumps(other, sort_keys=True) == text


@pytest.mark.parametrize(("extra", "message"), [
    ("checkpoint_interval_min = 0", "preemption.checkpoint_interval_min: Input should be greater than 0"),
    ("restart_min = -1", "preemption.restart_min: Input should be greater than or equal to 0"),
    ('qos = "be"', "preemption.qos: Input should be a valid list"),
    ("kueue_label = \"x\"", "preemption.kueue_label: unknown key"),
])
def test_bad_preemption_settings_are_one_line_naming_the_key(tmp_path, extra, message):
    with pytest.raises(InputError) as err:
        _workspace(tmp_path, f"\n[preemption]\n{extra}\n")
    assert str(err.value) == f"{tmp_path / 'gpuplan.toml'}: {message}"


def test_csv_queue_through_ingest_and_the_store_into_the_problem(tmp_path):
    (tmp_path / "queue.csv").write_text(
        "job_id,submitted_at,started_at,state,gpus,qos,preemptible,checkpoint_interval_min,restart_min,deadline_at\n"
        "c1,2025-03-16T12:00:00Z,2025-03-16T13:00:00Z,running,4,be,true,50,20,\n"  # 180 min: 180 mod 50 = 30 -> 1
        "c2,2025-03-16T12:00:00Z,,pending,2,be,,,,2025-03-16T19:00:00Z\n"  # no own fields: not preemptible
        "c3,2025-03-16T12:00:00Z,,pending,2,be,1,,,\n")  # own flag, no interval: none
    _workspace(tmp_path)
    cfg = tmp_path / "gpuplan.toml"
    text = cfg.read_text()
    old = 'format = "slurm-squeue-json"\npath = "' + str(ROOT / "data" / "fixtures" / "openb" / "squeue.json") + '"'
    assert old in text
    cfg.write_text(text.replace(old, 'format = "csv"\npath = "queue.csv"'))
    from pipelines.workspace.load import load_workspace

    _, notes, doc = _fixture_problem(load_workspace(tmp_path))
    assert notes["preemptible_jobs"] == 2
    run = {r["job_id"]: r for r in doc["running"]}["c1"]
    assert {k: run.get(k) for k in ("preemptible", "checkpoint_interval_steps", "restart_steps",
                                     "steps_since_checkpoint")} == {
        "preemptible": True, "checkpoint_interval_steps": 2, "restart_steps": 1, "steps_since_checkpoint": 1}
    queued = {j["job_id"]: j for j in doc["jobs"]}
    assert "preemptible" not in queued["c2"] and queued["c2"]["deadline_step"] == 6
    assert queued["c3"]["preemptible"] is True and "checkpoint_interval_steps" not in queued["c3"]


def test_a_rounded_up_time_since_checkpoint_stays_below_the_interval_without_a_restart_cost(tmp_path):
    """No restart cost: 700174's 32.9 minutes since its checkpoint round up to 2 steps, the interval itself; the
    problem's rule is since < interval + restart, so it is capped at 1 and the problem reads (it raised before)."""
    ws = _workspace(tmp_path, '\n[preemption]\nqos = ["be"]\ncheckpoint_interval_min = 45\n')
    _jobs, _notes, doc = _fixture_problem(ws)
    keys = ("preemptible", "checkpoint_interval_steps", "restart_steps", "steps_since_checkpoint")
    running = {r["job_id"]: tuple(r.get(k) for k in keys) for r in doc["running"]}
    assert running["700174"] == (True, 2, None, 1) and running["700212"] == (True, 2, None, 1)
    Problem.from_dict(doc)  # valid


@pytest.mark.parametrize(("extra", "message"), [
    ("\n[preemption]\ncheckpoint_interval_min = true\n", "preemption.checkpoint_interval_min: expected a number, not true"),
    ("\n[preemption]\nrestart_min = false\n", "preemption.restart_min: expected a number, not false"),
    ("\n[replan]\nmax_input_age_min = true\n", "replan.max_input_age_min: expected a number, not true"),
])
def test_a_boolean_where_a_number_is_expected_is_refused_naming_the_key(tmp_path, extra, message):
    """TOML ``true`` is not 1: pydantic read it as 1.0 (an operator set ``checkpoint_interval_min = true``, exit 0)."""
    with pytest.raises(InputError) as err:
        _workspace(tmp_path, extra)
    assert str(err.value) == f"{tmp_path / 'gpuplan.toml'}: {message}"


def _two_squeue_exports(tmp_path, comment: str):
    """``q1.json``: the openb squeue fixture with job 700174's comment set to ``comment``; ``q2.json``: the fixture as
    is (the same job, comment "" again). Returns the fixture's path (the workspace's source before the switch)."""
    src = ROOT / "data" / "fixtures" / "openb" / "squeue.json"
    doc = json.loads(src.read_text())
    marked = copy.deepcopy(doc)
    for j in marked["jobs"]:
        if str(j["job_id"]) == "700174":
            j["comment"] = comment
    (tmp_path / "q1.json").write_text(json.dumps(marked))
    (tmp_path / "q2.json").write_text(json.dumps(doc))
    return src


def test_an_emptied_squeue_comment_clears_the_job_s_own_marking_in_the_store(tmp_path):
    """Two real-format squeue exports (the openb fixture): 700174 marked preemptible, then its comment emptied.

    The store must not keep the first export's ``gpuplan.preemptible=true`` (the old merge kept a field the new
    record lacked): the second problem has 700174 not preemptible; its other annotation keys stay.
    """
    from pipelines.workspace.load import load_workspace
    from pipelines.workspace.store import Store

    src = _two_squeue_exports(tmp_path, "gpuplan.preemptible=true,checkpoint=45m,restart=10m")
    ws = _workspace(tmp_path)
    cfg = tmp_path / "gpuplan.toml"
    text = cfg.read_text()
    old = 'path = "' + str(src) + '"'
    assert old in text
    cfg.write_text(text.replace(old, 'path = "q1.json"'))
    _, _, first = _fixture_problem(load_workspace(tmp_path))
    r = {x["job_id"]: x for x in first["running"]}["700174"]
    assert (r.get("preemptible"), r.get("checkpoint_interval_steps"), r.get("restart_steps")) == (True, 2, 1)
    cfg.write_text(text.replace(old, 'path = "q2.json"'))
    ws = load_workspace(tmp_path)
    _, notes, second = _fixture_problem(ws)
    r = {x["job_id"]: x for x in second["running"]}["700174"]
    assert "preemptible" not in r and "checkpoint_interval_steps" not in r and "restart_steps" not in r
    assert "preemptible_jobs" not in notes
    stored = Store(ws.store_dir).jobs()
    ann = json.loads(stored.loc[stored["job_id"] == "700174", "annotations"].iloc[0])
    assert not set(ann) & {"preemptible", "checkpoint", "restart"}


def test_an_emptied_comment_leaves_the_qos_rule_s_marking_with_the_workspace_defaults(tmp_path):
    """Issue 30 item 1: the newest record's comment is the truth, but a cleared comment clears only what the comment
    said: 700174 (QoS be) stays preemptible by ``[preemption] qos``, its interval and restart the workspace's (45 min,
    10 min: 2 and 1 steps of 30 min) instead of the comment's 120 min and 60 min (4 and 2 steps)."""
    from pipelines.workspace.load import load_workspace

    src = _two_squeue_exports(tmp_path, "gpuplan.preemptible=true,checkpoint=120m,restart=60m")
    _workspace(tmp_path, '\n[preemption]\nqos = ["be"]\ncheckpoint_interval_min = 45\nrestart_min = 10\n')
    cfg = tmp_path / "gpuplan.toml"
    text = cfg.read_text()
    old = 'path = "' + str(src) + '"'
    keys = ("preemptible", "checkpoint_interval_steps", "restart_steps")
    got = []
    for name in ("q1.json", "q2.json"):
        cfg.write_text(text.replace(old, f'path = "{name}"'))
        _, _, problem = _fixture_problem(load_workspace(tmp_path))
        r = {x["job_id"]: x for x in problem["running"]}["700174"]
        got.append(tuple(r.get(k) for k in keys))
    assert got == [(True, 4, 2), (True, 2, 1)]
