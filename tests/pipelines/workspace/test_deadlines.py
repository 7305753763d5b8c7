"""Job deadlines from the workspace's sources into the store's ``deadline_at`` and the problem's ``deadline_step``.

Real-format inputs: squeue of Slurm 21.08 (rivosinc, v0.0.37: a real plain-integer ``deadline``), 22.05 (the lab
cluster, v0.0.38: ``deadline: 0``), 23.11 (Talapas, v0.0.40: ``{"set": true, "infinite": false, "number": 0}``)
and the openb fixture (v0.0.40); sacct (no deadline field); CSV tables; a Kueue workload's annotation.
"""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from optimizer.problem import Cluster
from pipelines.io.errors import InputError
from pipelines.stages.problem import passed_deadlines, problem_document
from pipelines.stages.queue import store as store_queue
from pipelines.workspace.ingest import ingest, workspace_data
from pipelines.workspace.load import load_workspace
from pipelines.workspace.sources.kueue import parse_kueue_workloads
from pipelines.workspace.sources.slurm import parse_sacct
from pipelines.workspace.sources.slurm_squeue import parse_squeue_json
from pipelines.workspace.sources.tabular import parse_jobs

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "data" / "fixtures"
LAB = ROOT / "tests" / "fixtures" / "slurm-lab"
REAL = ROOT.parent / "shared" / "cases" / "field-3" / "real-inputs"
T0 = pd.Timestamp("2025-03-16T16:00:00Z")
EPOCH = int(pd.Timestamp("2025-03-16T18:10:00Z").timestamp())


def _deadlines(frame):
    return {j: (None if pd.isna(d) else d.isoformat()) for j, d in zip(frame["job_id"], frame["deadline_at"])}


def test_squeue_2205_plain_integer_deadline_and_zero():
    doc = json.loads((LAB / "squeue.json").read_text())
    assert {j["deadline"] for j in doc["jobs"]} == {0}
    res = parse_squeue_json(json.dumps(doc), now=pd.Timestamp("2026-12-02T02:00Z"))
    assert res.frame["deadline_at"].isna().all() and str(res.frame["deadline_at"].dtype) == "datetime64[us, UTC]"
    pending = next(j for j in doc["jobs"] if j["job_id"] == 17)
    pending["deadline"] = EPOCH
    got = _deadlines(parse_squeue_json(json.dumps(doc), now=pd.Timestamp("2026-12-02T02:00Z")).frame)
    assert got["17"] == "2025-03-16T18:10:00+00:00" and got["16"] is None


@pytest.mark.skipif(not REAL.is_dir(), reason=f"needs the shared real inputs ({REAL})")
def test_squeue_2108_real_deadline():
    got = _deadlines(parse_squeue_json((REAL / "squeue_rivosinc_v0037.json").read_text()).frame)
    assert got["26515966"] is None  # deadline 0
    assert {got[f"58948420_{i}"] for i in range(1, 11)} == {"2024-10-24T20:37:28+00:00"}  # 1729802248


@pytest.mark.skipif(not REAL.is_dir(), reason=f"needs the shared real inputs ({REAL})")
@pytest.mark.parametrize(("value", "expected"), [
    ({"set": True, "infinite": False, "number": 0}, None),  # as Talapas' 23.11 sends "none"
    ({"set": True, "infinite": False, "number": EPOCH}, "2025-03-16T18:10:00+00:00"),
    ({"set": False, "infinite": False, "number": EPOCH}, None),
    ({"set": True, "infinite": True, "number": 0}, None),
])
def test_squeue_2302_plus_set_infinite_number(value, expected):
    doc = json.loads((REAL / "squeue_talapas_v0040.json").read_text())
    assert doc["jobs"][0]["deadline"] == {"set": True, "infinite": False, "number": 0}
    doc["jobs"][0]["deadline"] = value
    frame = parse_squeue_json(json.dumps(doc)).frame
    assert _deadlines(frame)["7725337_411"] == expected  # the running array task (job_id 7745162)


def test_squeue_bad_deadline_rejects_the_item_naming_the_field():
    doc = json.loads((FIX / "openb" / "squeue.json").read_text())
    doc["jobs"][0]["deadline"] = "tomorrow"
    res = parse_squeue_json(json.dumps(doc))
    assert res.errors == ["jobs[0] (job 700041): deadline 'tomorrow' is not a number "
                          "(expected N or {\"set\": true, \"infinite\": false, \"number\": N})"]


def test_sacct_has_no_deadline():
    res = parse_sacct((LAB / "sacct-utc.txt").read_text(), "UTC")
    assert len(res.frame) > 0 and res.frame["deadline_at"].isna().all()


def test_csv_deadline_with_and_without_the_column():
    res = parse_jobs(pd.read_csv(io.StringIO(
        "job_id,submitted_at,gpus,deadline_at\n"
        "a,2025-03-16T10:00:00Z,4,2025-03-17T02:10:00+08:00\nb,2025-03-16T10:00:00,4,\n")), "Asia/Shanghai")
    assert res.errors == [] and _deadlines(res.frame) == {"a": "2025-03-16T18:10:00+00:00", "b": None}
    plain = parse_jobs(pd.read_csv(io.StringIO("job_id,submitted_at,gpus\na,2025-03-16T10:00:00Z,4\n")), "UTC")
    assert _deadlines(plain.frame) == {"a": None}
    pq = pd.DataFrame({"job_id": ["a"], "submitted_at": [T0], "deadline_at": [pd.Timestamp("2025-03-16T18:10Z")]})
    assert _deadlines(parse_jobs(pq, "UTC", csv=False).frame) == {"a": "2025-03-16T18:10:00+00:00"}


@pytest.mark.parametrize(("value", "message"), [
    ("2025-03-16T18:10:00", "line 3: deadline_at '2025-03-16T18:10:00' has no time zone (expected ISO 8601 with a "
                            "zone, e.g. 2025-03-16T18:00:00Z or 2025-03-17T02:00:00+08:00)"),
    ("soon", "line 3: deadline_at 'soon' is not a time (expected ISO 8601 with a zone, e.g. 2025-03-16T18:00:00Z)"),
])
def test_csv_bad_deadline_refuses_the_file_naming_row_and_field(value, message):
    text = f"job_id,submitted_at,gpus,deadline_at\na,2025-03-16T10:00:00Z,4,\nb,2025-03-16T10:00:00Z,4,{value}\n"
    with pytest.raises(InputError) as err:
        parse_jobs(pd.read_csv(io.StringIO(text)), "UTC")
    assert str(err.value) == message


def test_csv_naive_deadline_exits_2_in_ingest(tmp_path):
    (tmp_path / "queue.csv").write_text("job_id,submitted_at,gpus,deadline_at\n"
                                        "q1,2025-03-16T10:00:00Z,4,2025-03-16T18:10:00\n")
    text = (FIX / "workspaces" / "openb-slurm" / "gpuplan.toml").read_text()
    text = text.replace('"../../../traffic/', f'"{ROOT / "data" / "traffic"}/').replace('"../../', f'"{FIX}/')
    text = text.replace('format = "slurm-squeue-json"\npath = "' + str(FIX / "openb" / "squeue.json") + '"',
                        'format = "csv"\npath = "queue.csv"')
    assert 'path = "queue.csv"' in text
    (tmp_path / "gpuplan.toml").write_text(text)
    res = subprocess.run([str(Path(sys.executable).parent / "gpuplan"), "ingest", "--workspace", str(tmp_path),
                          "--json"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    queue = json.loads(res.stdout)["sources"]["queue"]
    assert queue["unreadable_files"] == ["queue.csv"]
    assert "queue.csv: line 2: deadline_at '2025-03-16T18:10:00' has no time zone" in queue["errors"][0]


def test_kueue_deadline_annotation():
    doc = json.loads((FIX / "openb" / "workloads.json").read_text())
    doc["items"] = copy.deepcopy(doc["items"][:3])
    doc["items"][0]["metadata"].setdefault("annotations", {})["gpuplan.deadline"] = "2025-03-16T18:10:00Z"
    doc["items"][1]["metadata"].setdefault("annotations", {})["gpuplan.deadline"] = "2025-03-16T18:10:00"
    res = parse_kueue_workloads(json.dumps(doc))
    ns = doc["items"][0]["metadata"]
    assert _deadlines(res.frame)[f"{ns['namespace']}/{ns['name']}"] == "2025-03-16T18:10:00+00:00"
    assert len(res.frame) == 2 and len(res.errors) == 1
    assert res.errors[0].endswith("gpuplan.deadline '2025-03-16T18:10:00' has no time zone (expected ISO 8601 with "
                                  "a zone, e.g. 2025-03-16T18:00:00Z)")


def test_squeue_deadline_through_the_store_into_deadline_step(tmp_path):
    doc = json.loads((FIX / "openb" / "squeue.json").read_text())
    for j in doc["jobs"]:
        if j["job_id"] == 700216:  # the pending job: 2 h 10 min after the plan start -> step 5 (rounded up)
            j["deadline"] = {"set": True, "infinite": False, "number": EPOCH}
        if j["job_id"] == 700041:  # a running job's deadline is kept in the store, not planned
            j["deadline"] = {"set": True, "infinite": False, "number": EPOCH}
    extra = copy.deepcopy(next(j for j in doc["jobs"] if j["job_id"] == 700216))
    extra.update(job_id=700299, deadline=int(T0.timestamp()) - 600)  # passed 10 min before the start
    doc["jobs"].append(extra)
    (tmp_path / "squeue.json").write_text(json.dumps(doc))
    text = (FIX / "workspaces" / "openb-slurm" / "gpuplan.toml").read_text()
    text = text.replace('"../../../traffic/', f'"{ROOT / "data" / "traffic"}/').replace('"../../', f'"{FIX}/')
    text = text.replace(f'path = "{FIX / "openb" / "squeue.json"}"', f'path = "{tmp_path / "squeue.json"}"')
    (tmp_path / "gpuplan.toml").write_text(text)
    ws = load_workspace(tmp_path)
    ingest(ws)
    data = workspace_data(ws)
    assert data.from_store
    stored = _deadlines(data.queue)
    assert stored["700216"] == stored["700041"] == "2025-03-16T18:10:00+00:00"
    assert stored["700299"] == "2025-03-16T15:50:00+00:00" and stored["700085"] is None
    c = ws.config.cluster
    jobs, _ = store_queue.forecast_cluster_queue(data.history, data.queue, ws, T0.to_pydatetime(), c.step_minutes)
    doc = problem_document(Cluster(c.n_gpus, c.node_gpus, c.step_minutes, c.horizon_steps), [], jobs,
                           pd.DataFrame(columns=["service", "step"]), T0.to_pydatetime(), time_limit_s=5)
    assert {j["job_id"]: j.get("deadline_step") for j in doc["jobs"]} == {"700216": 5, "700299": None}
    assert passed_deadlines(jobs, T0.to_pydatetime()) == ["700299's deadline 15:50Z has passed"]
