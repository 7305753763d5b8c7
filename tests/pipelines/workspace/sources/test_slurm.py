"""Slurm adapter: sacct --parsable2 exports and squeue --json snapshots -> canonical job records.

The inputs are written out as text, modeled on real output:

* sacct: the field layout of ``sacct --parsable2 --format=...`` with its header (sacct(1),
  https://slurm.schedmd.com/sacct.html: JobID forms ``123.batch``/``123_4``/``123+0``, Timelimit
  ``UNLIMITED``/``Partition_Limit``, times ``YYYY-MM-DDTHH:MM:SS``), durations and the
  ``CANCELLED by <uid>`` state as printed by ``src/sacct/print.c`` (SchedMD/slurm), pending jobs
  with ``Unknown`` times, ``None assigned`` nodes and an empty AllocTRES.
* squeue --json: the v0.0.39 shape of Slurm 23.02 (plain epoch times, ``job_state`` a string,
  ``{"set", "infinite", "number"}`` ids and limits, ``tres_per_node`` ``gres:gpu:8``) and the
  v0.0.41 shape of Slurm 24.05 (every number an object, ``job_state`` a list), as dumped by real
  clusters; each job keeps only the keys the adapter reads plus a few neighbours.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from pipelines.io.errors import InputError
from pipelines.workspace.sources import slurm
from pipelines.workspace.sources.records import JOB_RECORD
from pipelines.workspace.sources.slurm import SACCT_COMMAND, SACCT_FORMAT, parse_sacct
from pipelines.workspace.sources.slurm_squeue import parse_squeue_json


def utc(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def by_id(frame: pd.DataFrame) -> dict[str, pd.Series]:
    return {row.job_id: row for _, row in frame.iterrows()}


# --- sacct: one export with every kind of line ------------------------------------------------------

# Line numbers matter: 1 header, 3-5 / 7 / 10 steps, 11 blank.
SACCT = """\
JobID|JobName|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|Timelimit|State|ReqTRES|AllocTRES|NodeList|Comment
4100|train-7b|alice|llm|gpu|normal|4294|2024-05-01T08:00:00|2024-05-01T08:00:00|2024-05-01T08:05:00|2024-05-02T10:05:00|1-02:00:00|2-00:00:00|COMPLETED|billing=32,cpu=32,gres/gpu=4,mem=256G,node=1|billing=32,cpu=32,gres/gpu:a100=4,gres/gpu=4,mem=256G,node=1|gpu01|gpuplan.kind=training,variant=lora,params_b=7
4100.batch|batch||llm||||2024-05-01T08:05:00|2024-05-01T08:05:00|2024-05-01T08:05:00|2024-05-02T10:05:00|1-02:00:00||COMPLETED||cpu=32,gres/gpu:a100=4,gres/gpu=4,mem=256G,node=1|gpu01|
4100.extern|extern||llm||||2024-05-01T08:05:00|2024-05-01T08:05:00|2024-05-01T08:05:00|2024-05-02T10:05:00|1-02:00:00||COMPLETED||billing=32,cpu=32,gres/gpu:a100=4,gres/gpu=4,mem=256G,node=1|gpu01|
4100.0|python||llm||||2024-05-01T08:05:02|2024-05-01T08:05:02|2024-05-01T08:05:02|2024-05-02T10:04:58|1-01:59:56||COMPLETED||cpu=32,gres/gpu:a100=4,gres/gpu=4,mem=256G,node=1|gpu01|
4101_3|sweep|bob|vision|gpu|normal|1200|2024-05-01T09:00:00|2024-05-01T09:00:00|2024-05-01T09:10:00|2024-05-01T09:40:30|00:30:30|01:00:00|CANCELLED by 1234|billing=8,cpu=8,gres/gpu=1,mem=32G,node=1|billing=8,cpu=8,gres/gpu=1,mem=32G,node=1|gpu02|
4101_3.batch|batch||vision||||2024-05-01T09:10:00|2024-05-01T09:10:00|2024-05-01T09:10:00|2024-05-01T09:40:30|00:30:30||CANCELLED||cpu=8,gres/gpu=1,mem=32G,node=1|gpu02|
4102+0|hetjob|carol|llm|gpu|high|5000|2024-05-01T10:00:00|2024-05-01T10:00:00|2024-05-01T10:02:00|Unknown|03:15:00|12:00:00|RUNNING|billing=64,cpu=64,gres/gpu:h100=8,mem=512G,node=2|billing=64,cpu=64,gres/gpu:h100=8,mem=512G,node=2|gpu[03-04]|
4102+1|hetjob|carol|llm|cpu|high|5000|2024-05-01T10:00:00|2024-05-01T10:00:00|2024-05-01T10:02:00|Unknown|03:15:00|12:00:00|RUNNING|billing=4,cpu=4,mem=16G,node=1|billing=4,cpu=4,mem=16G,node=1|cpu07|
4102+0.0|python||llm||||2024-05-01T10:02:05|2024-05-01T10:02:05|2024-05-01T10:02:05|Unknown|03:14:55||RUNNING||cpu=64,gres/gpu:h100=8,mem=512G,node=2|gpu[03-04]|

4103|wait|dave|llm|gpu|normal|900|2024-05-01T11:00:00|Unknown|Unknown|Unknown|00:00:00|UNLIMITED|PENDING|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1||None assigned|
4104_[5-10]|sweep2|bob|vision|gpu|normal|800|2024-05-01T11:30:00|2024-05-01T11:30:00|Unknown|Unknown|00:00:00|30:00|PENDING|billing=8,cpu=8,gres/gpu:v100=1,mem=32G,node=1||None assigned|
4105|eval|erin|llm|gpu|normal|1000|2024-05-01T12:00:00|2024-05-01T12:00:00|None|2024-05-01T12:20:00|00:00:00|04:00:00|CANCELLED by 0|billing=16,cpu=16,gres/gpu=4,mem=128G,node=1||None assigned|gpuplan.kind=batch_inference
4106|long|frank|llm|gpu|normal|700|2024-05-01T00:00:00|2024-05-01T00:00:00|2024-05-01T00:00:10|2024-05-03T00:00:19|2-00:00:09|2-00:00:00|TIMEOUT|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|gpu05|
4107|pre|gina|vision|gpu|low|100|2024-05-01T13:00:00|2024-05-01T13:00:00|2024-05-01T13:00:30|2024-05-01T13:45:00|44:30|08:00:00|PREEMPTED|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|gpu06|gpuplan.kind=rendering
4108|nf|gina|vision|gpu|low|100|2024-05-01T14:00:00|2024-05-01T14:00:00|2024-05-01T14:00:00|2024-05-01T14:10:00|00:10:00|08:00:00|NODE_FAIL|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|gpu06|
"""


@pytest.fixture(scope="module")
def sacct_jobs() -> dict[str, pd.Series]:
    result = parse_sacct(SACCT, timezone="UTC")
    assert result.errors == []
    return by_id(result.frame)


def test_sacct_steps_are_skipped_and_not_counted():
    result = parse_sacct(SACCT, timezone="UTC")
    assert result.read == 10  # 17 lines: 1 header, 5 steps, 1 blank
    assert result.rejected == 0
    assert list(result.frame["job_id"]) == ["4100", "4101_3", "4102+0", "4102+1", "4103", "4104_5", "4104_6",
                                            "4104_7", "4104_8", "4104_9", "4104_10", "4105", "4106", "4107", "4108"]
    assert (result.arrays_expanded, result.array_tasks) == (1, 6)
    assert list(result.frame.columns) == list(JOB_RECORD)


def test_sacct_completed_job_fields(sacct_jobs):
    job = sacct_jobs["4100"]
    assert job.source == "slurm"
    assert job.submitted_at == utc("2024-05-01T08:00:00")
    assert job.eligible_at == utc("2024-05-01T08:00:00")
    assert job.started_at == utc("2024-05-01T08:05:00")
    assert job.ended_at == utc("2024-05-02T10:05:00")
    assert (job.state, job.censored) == ("completed", False)
    assert job.elapsed_s == 26 * 3600.0  # 1-02:00:00
    assert job.time_limit_s == 48 * 3600.0  # 2-00:00:00
    assert (job.gpus, job.gpu_type, job.nodes) == (4, "a100", "gpu01")
    assert (job.user, job.account, job.partition, job.qos, job.priority) == ("alice", "llm", "gpu", "normal", 4294.0)
    assert job.job_name == "train-7b"
    assert job.kind == "training"
    assert json.loads(job.annotations) == {"kind": "training", "variant": "lora", "params_b": "7"}


def test_sacct_array_task_cancelled_after_start_is_censored(sacct_jobs):
    job = sacct_jobs["4101_3"]
    assert (job.state, job.censored) == ("cancelled", True)
    assert job.elapsed_s == 1830.0
    assert job.started_at == utc("2024-05-01T09:10:00")
    assert (job.gpus, job.gpu_type) == (1, None)
    assert job.kind is None and job.annotations == "{}"


def test_sacct_cancelled_before_start_is_not_censored(sacct_jobs):
    job = sacct_jobs["4105"]
    assert (job.state, job.censored) == ("cancelled", False)
    assert pd.isna(job.started_at) and math.isnan(job.elapsed_s)
    assert job.ended_at == utc("2024-05-01T12:20:00")
    assert job.gpus == 4  # AllocTRES empty: ReqTRES
    assert job.kind == "batch_inference"


def test_sacct_timeout_not_censored_preempted_and_node_fail_censored(sacct_jobs):
    assert (sacct_jobs["4106"].state, sacct_jobs["4106"].censored) == ("timeout", False)
    assert sacct_jobs["4106"].elapsed_s == 2 * 86400.0 + 9
    assert (sacct_jobs["4107"].state, sacct_jobs["4107"].censored) == ("preempted", True)
    assert sacct_jobs["4107"].elapsed_s == 44 * 60.0 + 30  # MM:SS
    assert (sacct_jobs["4108"].state, sacct_jobs["4108"].censored) == ("node_fail", True)
    assert sacct_jobs["4108"].elapsed_s == 600.0


def test_sacct_unknown_kind_is_kept_as_annotation_only(sacct_jobs):
    job = sacct_jobs["4107"]
    assert job.kind is None
    assert json.loads(job.annotations) == {"kind": "rendering"}


def test_sacct_het_components_are_jobs(sacct_jobs):
    lead, cpu = sacct_jobs["4102+0"], sacct_jobs["4102+1"]
    assert (lead.state, lead.censored, lead.elapsed_s) == ("running", False, 3 * 3600.0 + 15 * 60)
    assert pd.isna(lead.ended_at)
    assert (lead.gpus, lead.gpu_type, lead.nodes) == (8, "h100", "gpu[03-04]")  # typed entry only
    assert (cpu.gpus, cpu.gpu_type, cpu.partition) == (0, None, "cpu")
    assert lead.time_limit_s == 12 * 3600.0


def test_sacct_pending_job_and_array_placeholder(sacct_jobs):
    job = sacct_jobs["4103"]
    assert (job.state, job.censored) == ("pending", False)
    assert pd.isna(job.eligible_at) and pd.isna(job.started_at) and pd.isna(job.ended_at)
    assert math.isnan(job.elapsed_s) and math.isnan(job.time_limit_s)  # UNLIMITED
    assert (job.gpus, job.nodes) == (2, None)  # ReqTRES; None assigned
    assert "4104_[5-10]" not in sacct_jobs  # the placeholder is expanded: one pending record per task
    for task in range(5, 11):
        placeholder = sacct_jobs[f"4104_{task}"]
        assert placeholder.state == "pending"
        assert (placeholder.gpus, placeholder.gpu_type) == (1, "v100")  # one task's request
        assert placeholder.time_limit_s == 1800.0  # 30:00


# --- sacct: formats --------------------------------------------------------------------------------

DURATIONS = """\
JobID|Submit|Start|End|Elapsed|Timelimit|State|AllocTRES
1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-04T04:05:06|3-04:05:06|UNLIMITED|COMPLETED|gres/gpu=1
2|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:05:06|05:06|Partition_Limit|COMPLETED|gres/gpu=1
3|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:05:07|05:06.250|INVALID|COMPLETED|gres/gpu=1
4|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:02:03|01:02:03||COMPLETED|gres/gpu=1
5|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-02T00:00:01|00:00:01|1-00:00:00|COMPLETED|gres/gpu=1
"""


def test_sacct_duration_formats_and_no_limit_values():
    frame = parse_sacct(DURATIONS, timezone="UTC").frame
    assert list(frame["elapsed_s"]) == [3 * 86400 + 4 * 3600 + 5 * 60 + 6.0, 306.0, 306.25, 3723.0, 1.0]
    limits = list(frame["time_limit_s"])
    assert all(math.isnan(v) for v in limits[:4])  # UNLIMITED, Partition_Limit, INVALID, empty
    assert limits[4] == 86400.0
    # optional columns absent: None / NaN / ""
    assert frame["user"].isna().all() and frame["priority"].isna().all() and (frame["job_name"] == "").all()


GRES = """\
JobID|Submit|State|ReqTRES|AllocTRES
1|2024-06-01T00:00:00|RUNNING|gres/gpu=4|billing=8,cpu=8,gres/gpu=4,mem=64G,node=1
2|2024-06-01T00:00:00|RUNNING|gres/gpu=4|billing=8,cpu=8,gres/gpu:a100=4,mem=64G,node=1
3|2024-06-01T00:00:00|RUNNING|gres/gpu=4|billing=8,cpu=8,gres/gpu=4,gres/gpu:a100=4,mem=64G,node=1
4|2024-06-01T00:00:00|RUNNING|gres/gpu=3|billing=8,cpu=8,gres/gpu:v100=1,gres/gpu=3,gres/gpu:a100=2,mem=64G,node=1
5|2024-06-01T00:00:00|RUNNING|gres/gpu=1|billing=8,cpu=8,gres/gpumem=80G,gres/gpu=1,mem=64G,node=1
6|2024-06-01T00:00:00|PENDING|billing=2,cpu=2,gres/gpu:l40s=2,mem=8G,node=1|
7|2024-06-01T00:00:00|RUNNING|billing=2,cpu=2,mem=8G,node=1|billing=2,cpu=2,mem=8G,node=1
"""


def test_sacct_gres_untyped_typed_and_both():
    frame = parse_sacct(GRES, timezone="UTC").frame
    assert list(frame["gpus"]) == [4, 4, 4, 3, 1, 2, 0]  # untyped is the total when both appear
    assert list(frame["gpu_type"]) == [None, "a100", "a100", "a100,v100", None, "l40s", None]


# The same three records in another column order (reversed, names in other cases) ...
SMALL = """\
JobID|JobName|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|Timelimit|State|ReqTRES|AllocTRES|NodeList|Comment
7001|a|u1|acct|gpu|normal|10|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:01:00|2024-06-01T01:01:00|01:00:00|02:00:00|COMPLETED|cpu=1,gres/gpu=1,mem=4G,node=1|cpu=1,gres/gpu:l4=1,mem=4G,node=1|gpu01|gpuplan.kind=batch_inference
7001.batch|batch||acct||||2024-06-01T00:01:00|2024-06-01T00:01:00|2024-06-01T00:01:00|2024-06-01T01:01:00|01:00:00||COMPLETED||cpu=1,gres/gpu:l4=1,mem=4G,node=1|gpu01|
7002|b|u2|acct|gpu|normal|20|2024-06-01T00:10:00|Unknown|Unknown|Unknown|00:00:00|Partition_Limit|PENDING|cpu=2,gres/gpu=2,mem=8G,node=1||None assigned|
7003|c|u3|acct|gpu|normal|30|2024-06-01T00:20:00|2024-06-01T00:20:00|2024-06-01T00:21:00|2024-06-01T00:31:00|00:10:00|01:00:00|FAILED|cpu=1,gres/gpu=1,mem=4G,node=1|cpu=1,gres/gpu=1,mem=4G,node=1|gpu02|
"""
SMALL_REORDERED = """\
comment|NodeList|ALLOCTRES|reqtres|State|TimeLimit|Elapsed|End|Start|Eligible|SUBMIT|Priority|QOS|Partition|Account|User|JobName|jobid
gpuplan.kind=batch_inference|gpu01|cpu=1,gres/gpu:l4=1,mem=4G,node=1|cpu=1,gres/gpu=1,mem=4G,node=1|COMPLETED|02:00:00|01:00:00|2024-06-01T01:01:00|2024-06-01T00:01:00|2024-06-01T00:00:00|2024-06-01T00:00:00|10|normal|gpu|acct|u1|a|7001
|gpu01|cpu=1,gres/gpu:l4=1,mem=4G,node=1||COMPLETED||01:00:00|2024-06-01T01:01:00|2024-06-01T00:01:00|2024-06-01T00:01:00|2024-06-01T00:01:00||||acct||batch|7001.batch
|None assigned||cpu=2,gres/gpu=2,mem=8G,node=1|PENDING|Partition_Limit|00:00:00|Unknown|Unknown|Unknown|2024-06-01T00:10:00|20|normal|gpu|acct|u2|b|7002
|gpu02|cpu=1,gres/gpu=1,mem=4G,node=1|cpu=1,gres/gpu=1,mem=4G,node=1|FAILED|01:00:00|00:10:00|2024-06-01T00:31:00|2024-06-01T00:21:00|2024-06-01T00:20:00|2024-06-01T00:20:00|30|normal|gpu|acct|u3|c|7003
"""
# ... and as sacct --parsable (a '|' after the last field) with CRLF line ends.
SMALL_PARSABLE_CRLF = (
    "JobID|JobName|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|Timelimit|State|ReqTRES|AllocTRES|NodeList|Comment|\r\n"
    "7001|a|u1|acct|gpu|normal|10|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:01:00|2024-06-01T01:01:00|01:00:00|02:00:00|COMPLETED|cpu=1,gres/gpu=1,mem=4G,node=1|cpu=1,gres/gpu:l4=1,mem=4G,node=1|gpu01|gpuplan.kind=batch_inference|\r\n"
    "7001.batch|batch||acct||||2024-06-01T00:01:00|2024-06-01T00:01:00|2024-06-01T00:01:00|2024-06-01T01:01:00|01:00:00||COMPLETED||cpu=1,gres/gpu:l4=1,mem=4G,node=1|gpu01||\r\n"
    "7002|b|u2|acct|gpu|normal|20|2024-06-01T00:10:00|Unknown|Unknown|Unknown|00:00:00|Partition_Limit|PENDING|cpu=2,gres/gpu=2,mem=8G,node=1||None assigned||\r\n"
    "7003|c|u3|acct|gpu|normal|30|2024-06-01T00:20:00|2024-06-01T00:20:00|2024-06-01T00:21:00|2024-06-01T00:31:00|00:10:00|01:00:00|FAILED|cpu=1,gres/gpu=1,mem=4G,node=1|cpu=1,gres/gpu=1,mem=4G,node=1|gpu02||\r\n"
)


def test_sacct_column_order_and_case_do_not_matter():
    base = parse_sacct(SMALL, timezone="UTC")
    other = parse_sacct(SMALL_REORDERED, timezone="UTC")
    assert (base.read, base.errors, other.read, other.errors) == (3, [], 3, [])
    pd.testing.assert_frame_equal(base.frame, other.frame)
    assert list(base.frame["gpus"]) == [1, 2, 1]
    assert base.frame["state"].tolist() == ["completed", "pending", "failed"]


def test_sacct_crlf_and_trailing_delimiter_give_identical_records():
    base = parse_sacct(SMALL, timezone="UTC")
    other = parse_sacct(SMALL_PARSABLE_CRLF, timezone="UTC")
    assert (other.read, other.errors) == (3, [])
    pd.testing.assert_frame_equal(base.frame, other.frame)
    assert other.frame.loc[0, "annotations"] == '{"kind": "batch_inference"}'  # no '|' or '\r' left in the last field


MALFORMED = """\
JobID|JobName|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|Timelimit|State|ReqTRES|AllocTRES|NodeList|Comment
8001|ok1|u|a|gpu|normal|1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|01:00:00|02:00:00|COMPLETED||gres/gpu=1|n1|

8002|badsubmit|u|a|gpu|normal|1|2024-13-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|01:00:00|02:00:00|COMPLETED||gres/gpu=1|n1|
8003|ok2|u|a|gpu|normal|1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|01:00:00|02:00:00|COMPLETED||gres/gpu=1|n1|
8004|badelapsed|u|a|gpu|normal|1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|1:2:3:4|02:00:00|COMPLETED||gres/gpu=1|n1|
8005|badstate|u|a|gpu|normal|1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|01:00:00|02:00:00|EXPLODED||gres/gpu=1|n1|
8006|short|u|a|gpu|normal|1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|01:00:00|COMPLETED||gres/gpu=1|n1|
8007|ok3|u|a|gpu|normal|1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|01:00:00|02:00:00|COMPLETED||gres/gpu=1|n1|
8008|badlimit|u|a|gpu|normal|1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|01:00:00|00:61:00|COMPLETED||gres/gpu=1|n1|
8009|badgpu|u|a|gpu|normal|1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|01:00:00|02:00:00|COMPLETED||gres/gpu=two|n1|
8x10|badid|u|a|gpu|normal|1|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T00:00:00|2024-06-01T01:00:00|01:00:00|02:00:00|COMPLETED||gres/gpu=1|n1|
"""


def test_sacct_malformed_lines_are_rejected_with_their_line_number_and_the_rest_kept():
    result = parse_sacct(MALFORMED, timezone="UTC")
    assert result.read == 10
    assert list(result.frame["job_id"]) == ["8001", "8003", "8007"]
    assert result.errors == [
        "line 4: Submit '2024-13-01T00:00:00' is not a time (expected YYYY-MM-DDTHH:MM:SS, Unknown or None)",
        "line 6: Elapsed '1:2:3:4' is not a duration (expected [D-]HH:MM:SS, MM:SS or MM:SS.mmm)",
        "line 7: State 'EXPLODED' is not a Slurm job state (expected e.g. PENDING, RUNNING, COMPLETED, "
        "CANCELLED by <uid>, TIMEOUT)",
        "line 8: job 8006: 17 fields for 18 header columns (expected one per header column; a truncated line?)",
        "line 10: Timelimit '00:61:00' is not a duration (expected [D-]HH:MM:SS, MM:SS or MM:SS.mmm)",
        "line 11: AllocTRES 'gres/gpu=two' is not a TRES list with integer GPU counts (expected e.g. gres/gpu=4)",
        "line 12: JobID '8x10' is not a job id (expected 123, 123_4, 123+0 or 123_[5-10])",
    ]
    assert result.rejected == 7


DST = """\
JobID|Submit|Start|End|Elapsed|State|AllocTRES
9001|2024-03-10T02:30:00|2024-03-10T03:15:00|2024-03-10T04:15:00|01:00:00|COMPLETED|gres/gpu=1
9002|2024-11-03T01:30:00|2024-11-03T01:45:00|2024-11-03T03:00:00|02:15:00|COMPLETED|gres/gpu=1
9003|2024-01-15T09:00:00|Unknown|Unknown|00:00:00|PENDING|
"""


def test_sacct_local_times_across_daylight_saving_changes():
    jobs = by_id(parse_sacct(DST, timezone="America/New_York").frame)
    # 02:30 does not exist on 2024-03-10 in New York: moved forward to 03:00 EDT (UTC-4)
    assert jobs["9001"].submitted_at == utc("2024-03-10T07:00:00")
    assert jobs["9001"].started_at == utc("2024-03-10T07:15:00")
    # 01:30 occurs twice on 2024-11-03: the first (EDT, UTC-4); 03:00 is EST (UTC-5)
    assert jobs["9002"].submitted_at == utc("2024-11-03T05:30:00")
    assert jobs["9002"].started_at == utc("2024-11-03T05:45:00")
    assert jobs["9002"].ended_at == utc("2024-11-03T08:00:00")
    assert jobs["9002"].elapsed_s == (jobs["9002"].ended_at - jobs["9002"].started_at).total_seconds() == 8100.0
    assert jobs["9003"].submitted_at == utc("2024-01-15T14:00:00")  # EST
    assert jobs["9003"].gpus == 0  # AllocTRES empty and no ReqTRES column


def test_sacct_repeated_header_is_skipped_and_bom_ignored():
    header, first, rest = SMALL.split("\n", 2)
    text = "\ufeff" + header + "\n" + first + "\n" + header + "\n" + rest
    result = parse_sacct(text, timezone="UTC")
    assert (result.read, result.errors) == (3, [])


def test_sacct_without_start_column_infers_started_from_elapsed():
    text = ("JobID|Submit|Elapsed|State|AllocTRES\n"
            "1|2024-06-01T00:00:00|00:10:00|CANCELLED by 7|gres/gpu=1\n"
            "2|2024-06-01T00:00:00|00:00:00|CANCELLED by 7|\n")
    jobs = by_id(parse_sacct(text, timezone="UTC").frame)
    assert (jobs["1"].censored, jobs["1"].elapsed_s) == (True, 600.0)
    assert bool(jobs["2"].censored) is False
    assert math.isnan(jobs["2"].elapsed_s)


@pytest.mark.parametrize(("text", "message"), [
    ("", "sacct export is empty"),
    ("\n\n", "sacct export is empty"),
    ("JobName|User|AllocTRES\nx|y|\n", "line 1: sacct header lacks column(s) JobID, Submit, State"),
    ("JobID|Submit|State|Elapsed\n1|2024-06-01T00:00:00|PENDING|00:00:00\n",
     "line 1: sacct header has neither AllocTRES nor ReqTRES"),
    ("JobID|Submit|State|jobid|AllocTRES\n", "line 1: sacct header names column 'jobid' twice"),
    ("       JobID    Submit  State\n------------ ---------\n", "line 1: sacct header 'JobID    Submit  State' has no '|'"),
])
def test_sacct_unreadable_exports_raise(text, message):
    with pytest.raises(InputError) as err:
        parse_sacct(text, timezone="UTC")
    assert str(err.value).startswith(message)


def test_sacct_bad_timezone_raises():
    with pytest.raises(InputError, match="timezone 'Mars/Olympus' is not an IANA time zone"):
        parse_sacct(SMALL, timezone="Mars/Olympus")


def test_sacct_empty_export_gives_typed_empty_frame():
    result = parse_sacct("JobID|Submit|State|AllocTRES\n", timezone="UTC")
    assert (result.read, len(result.frame)) == (0, 0)
    assert str(result.frame["submitted_at"].dtype) == "datetime64[us, UTC]"


def test_sacct_command_is_the_documented_one():
    assert SACCT_FORMAT == ("JobID,JobName,User,Account,Partition,QOS,Priority,Submit,Eligible,Start,End,Elapsed,"
                            "Timelimit,State,ReqTRES,AllocTRES,NodeList,Comment")
    command = SACCT_COMMAND.format(starttime="2024-05-01T00:00:00", endtime="2024-05-02T00:00:00")
    assert "--parsable2" in command and "--noheader" not in command and "--duplicates" not in command
    doc = " ".join(slurm.__doc__.replace("\\\n", " ").split())
    assert command in doc


# --- squeue --json ---------------------------------------------------------------------------------

# Slurm 23.02 (data_parser v0.0.39): plain epoch times, job_state a string.
SQUEUE_V39 = """\
{
  "meta": {"plugins": {"data_parser": "data_parser/v0.0.39", "accounting_storage": "accounting_storage/slurmdbd"},
           "command": ["squeue", "--json"],
           "Slurm": {"version": {"major": 23, "micro": 6, "minor": 2}, "release": "23.02.6"}},
  "jobs": [
    {"account": "llm", "accrue_time": 1714550400, "array_job_id": {"set": true, "infinite": false, "number": 5000},
     "array_task_id": {"set": true, "infinite": false, "number": 4}, "array_task_string": "",
     "comment": "gpuplan.kind=training,params_b=70", "eligible_time": 1714550400, "end_time": 1714572300,
     "het_job_id": {"set": true, "infinite": false, "number": 0}, "het_job_offset": {"set": true, "infinite": false, "number": 0},
     "job_id": 5001, "job_state": "RUNNING", "name": "pretrain", "nodes": "gpu-ia830",
     "node_count": {"set": true, "infinite": false, "number": 1}, "partition": "gpu_p2",
     "priority": {"set": true, "infinite": false, "number": 239256}, "qos": "qos_gpu-t4", "start_time": 1714550700,
     "submit_time": 1714550400, "time_limit": {"set": true, "infinite": false, "number": 360},
     "tres_per_node": "gres:gpu:8", "tres_req_str": "cpu=8,mem=120000M,node=1,billing=80,gres/gpu=8",
     "tres_alloc_str": "cpu=16,mem=120000M,node=1,billing=80,gres/gpu=8", "user_name": "www26kf"},
    {"account": "llm", "array_job_id": {"set": true, "infinite": false, "number": 0},
     "array_task_id": {"set": false, "infinite": false, "number": 0}, "array_task_string": "", "comment": "",
     "eligible_time": 1714550500, "end_time": 1714640000,
     "het_job_id": {"set": true, "infinite": false, "number": 5010}, "het_job_offset": {"set": true, "infinite": false, "number": 1},
     "job_id": 5011, "job_state": "PENDING", "name": "het", "nodes": "", "partition": "gpu",
     "priority": 1200, "qos": "normal", "start_time": 1714600000, "submit_time": 1714550500, "time_limit": 120,
     "tres_per_node": "", "tres_req_str": "cpu=4,mem=16G,node=1,billing=4,gres/gpu:a100=2", "tres_alloc_str": "",
     "user_name": "carol"},
    {"array_job_id": {"set": true, "infinite": false, "number": 0}, "array_task_id": {"set": false, "infinite": false, "number": 0},
     "job_id": 5012, "job_state": "PENDING", "submit_time": 1714550600, "time_limit": 4294967295,
     "priority": 4294967294, "tres_alloc_str": "", "tres_req_str": "cpu=1,mem=1G,node=1,billing=1"}
  ],
  "warnings": [],
  "errors": []
}
"""

# Slurm 24.05 (data_parser v0.0.41): every number an object, job_state a list.
SQUEUE_V41 = """\
{
  "jobs": [
    {"job_id": 6000, "array_job_id": {"set": true, "infinite": false, "number": 6000},
     "array_task_id": {"set": false, "infinite": false, "number": 0}, "array_task_string": "5-10",
     "job_state": ["PENDING"], "submit_time": {"set": true, "infinite": false, "number": 1714560000},
     "start_time": {"set": true, "infinite": false, "number": 0}, "end_time": {"set": true, "infinite": false, "number": 0},
     "time_limit": {"set": false, "infinite": true, "number": 0}, "priority": {"set": false, "infinite": false, "number": 0},
     "tres_req_str": "cpu=2,mem=8G,node=1,billing=2,gres/gpu=1", "tres_alloc_str": "", "tres_per_node": "gres/gpu:1",
     "user_name": "bob", "account": "vision", "partition": "gpu", "qos": "normal", "name": "sweep", "nodes": "",
     "comment": ""},
    {"job_id": 6001, "array_job_id": {"set": true, "infinite": false, "number": 0},
     "array_task_id": {"set": false, "infinite": false, "number": 0}, "het_job_id": {"set": true, "infinite": false, "number": 0},
     "job_state": ["PENDING", "REQUEUED"], "submit_time": {"set": true, "infinite": false, "number": 1714560100},
     "time_limit": {"set": true, "infinite": false, "number": 60}, "priority": {"set": true, "infinite": false, "number": 77},
     "tres_alloc_str": "", "tres_per_node": "gres:gpu:a100:2", "node_count": {"set": true, "infinite": false, "number": 2},
     "user_name": "dave", "name": "multi"},
    {"job_id": 6002, "job_state": ["COMPLETED"], "submit_time": {"set": true, "infinite": false, "number": 1714560000},
     "start_time": {"set": true, "infinite": false, "number": 1714560060},
     "end_time": {"set": true, "infinite": false, "number": 1714563660},
     "time_limit": {"set": true, "infinite": false, "number": 120}, "tres_alloc_str": "cpu=4,mem=16G,node=1,gres/gpu=2",
     "nodes": "node1"},
    {"job_id": 6003, "job_state": ["CANCELLED"], "submit_time": {"set": true, "infinite": false, "number": 1714560000},
     "start_time": {"set": true, "infinite": false, "number": 1714561000},
     "end_time": {"set": true, "infinite": false, "number": 1714561000}, "tres_alloc_str": "",
     "tres_req_str": "cpu=4,mem=16G,node=1,gres/gpu=4"},
    {"job_id": 6004, "job_state": ["PREEMPTED"], "submit_time": {"set": true, "infinite": false, "number": 1714560000},
     "start_time": {"set": true, "infinite": false, "number": 1714560000},
     "end_time": {"set": true, "infinite": false, "number": 1714561800}, "tres_alloc_str": "cpu=4,gres/gpu:h100=4"},
    {"job_id": 6005, "job_state": ["RUNNING", "COMPLETING"], "submit_time": {"set": true, "infinite": false, "number": 1714560000},
     "start_time": {"set": true, "infinite": false, "number": 1714560000},
     "end_time": {"set": true, "infinite": false, "number": 1714567200}, "tres_alloc_str": "",
     "tres_req_str": "cpu=4,mem=16G,node=1", "tres_per_job": "gres/gpu:2"},
    {"job_id": 6006, "job_state": ["PENDING"], "submit_time": {"set": false, "infinite": false, "number": 0}},
    {"job_id": 6007, "job_state": ["EXPLODED"], "submit_time": {"set": true, "infinite": false, "number": 1714560000}}
  ],
  "last_backfill": {"set": true, "infinite": false, "number": 1714560000},
  "last_update": {"set": true, "infinite": false, "number": 1714563700},
  "meta": {"plugin": {"type": "openapi/slurmctld", "name": "Slurm OpenAPI slurmctld", "data_parser": "data_parser/v0.0.41",
                      "accounting_storage": "accounting_storage/slurmdbd"},
           "slurm": {"version": {"major": "24", "micro": "3", "minor": "05"}, "release": "24.05.3", "cluster": "cluster"}},
  "errors": [],
  "warnings": []
}
"""


def test_squeue_v39_plain_numbers_array_task_and_het_component():
    result = parse_squeue_json(SQUEUE_V39, now=utc("2024-05-01T09:05:00"))
    assert (result.read, result.errors) == (3, [])
    jobs = by_id(result.frame)
    assert list(jobs) == ["5000_4", "5010+1", "5012"]
    task = jobs["5000_4"]
    assert (task.state, task.censored) == ("running", False)
    assert task.submitted_at == utc("2024-05-01T08:00:00") and task.started_at == utc("2024-05-01T08:05:00")
    assert pd.isna(task.ended_at)  # squeue's end_time of a running job is its expected end
    assert task.elapsed_s == 3600.0  # now - start
    assert task.time_limit_s == 6 * 3600.0
    assert (task.gpus, task.gpu_type, task.priority) == (8, None, 239256.0)
    assert (task.user, task.account, task.partition, task.qos, task.nodes, task.job_name) == (
        "www26kf", "llm", "gpu_p2", "qos_gpu-t4", "gpu-ia830", "pretrain")
    assert task.kind == "training"
    assert json.loads(task.annotations) == {"kind": "training", "params_b": "70"}
    het = jobs["5010+1"]
    assert het.state == "pending" and pd.isna(het.started_at)  # start_time 1714600000 is an estimate
    assert (het.gpus, het.gpu_type, het.priority, het.time_limit_s, het.nodes) == (2, "a100", 1200.0, 7200.0, None)
    plain = jobs["5012"]
    assert math.isnan(plain.time_limit_s) and math.isnan(plain.priority)  # INFINITE / NO_VAL plain sentinels
    assert plain.gpus == 0


def test_squeue_running_elapsed_needs_now():
    job = by_id(parse_squeue_json(SQUEUE_V39).frame)["5000_4"]
    assert math.isnan(job.elapsed_s)


def test_squeue_v41_objects_state_lists_and_requests():
    result = parse_squeue_json(SQUEUE_V41)
    assert result.read == 8
    assert result.errors == [
        "jobs[6] (job 6006): submit_time {'set': False, 'infinite': False, 'number': 0} is not a time "
        "(expected epoch seconds > 0)",
        "jobs[7] (job 6007): job_state 'EXPLODED' is not a Slurm job state (expected e.g. PENDING, RUNNING, "
        "COMPLETED, CANCELLED by <uid>, TIMEOUT)",
    ]
    jobs = by_id(result.frame)
    assert list(jobs) == [f"6000_{t}" for t in range(5, 11)] + ["6001", "6002", "6003", "6004", "6005"]
    assert (result.arrays_expanded, result.array_tasks) == (1, 6)
    placeholder = jobs["6000_10"]
    assert (placeholder.state, placeholder.gpus) == ("pending", 1)
    assert math.isnan(placeholder.time_limit_s) and math.isnan(placeholder.priority)  # infinite; set: false
    assert pd.isna(placeholder.started_at) and placeholder.submitted_at == utc("2024-05-01T10:40:00")
    requeued = jobs["6001"]
    assert requeued.state == "pending"
    assert (requeued.gpus, requeued.gpu_type, requeued.time_limit_s) == (4, "a100", 3600.0)  # 2 per node * 2 nodes
    done = jobs["6002"]
    assert (done.state, done.censored, done.elapsed_s, done.gpus) == ("completed", False, 3600.0, 2)
    assert done.ended_at == utc("2024-05-01T11:41:00")
    cancelled = jobs["6003"]
    assert (cancelled.state, cancelled.censored, cancelled.gpus) == ("cancelled", False, 4)
    assert pd.isna(cancelled.started_at) and math.isnan(cancelled.elapsed_s)
    assert cancelled.ended_at == utc("2024-05-01T10:56:40")
    preempted = jobs["6004"]
    assert (preempted.state, preempted.censored, preempted.elapsed_s) == ("preempted", True, 1800.0)
    assert (preempted.gpus, preempted.gpu_type) == (4, "h100")
    completing = jobs["6005"]
    assert (completing.state, completing.gpus) == ("running", 2)  # tres_per_job
    assert pd.isna(completing.ended_at)


def test_squeue_errors_array_raises_first_error():
    text = json.dumps({"jobs": [], "warnings": [], "errors": [
        {"description": "Unable to query jobs", "error_number": 1007, "error": "Protocol authentication error",
         "source": "slurm_load_jobs()"},
        {"description": "second", "error_number": 1, "error": "x", "source": "y"}]})
    with pytest.raises(InputError) as err:
        parse_squeue_json(text)
    assert str(err.value) == ("squeue --json reported an error: Unable to query jobs: Protocol authentication error "
                              "(error_number 1007) in slurm_load_jobs()")


@pytest.mark.parametrize(("text", "message"), [
    ('{"jobs": [', "squeue --json output is not valid JSON: Expecting value at line 1 column 11"),
    ('{"jobs": [], "jobs": []}', 'squeue --json output: key "jobs" is given twice in one object'),
    ("[]", "squeue --json output is a JSON list (expected an object with a jobs list)"),
    ('{"errors": []}', "squeue --json output has no jobs list"),
])
def test_squeue_unreadable_documents_raise(text, message):
    with pytest.raises(InputError) as err:
        parse_squeue_json(text)
    assert str(err.value).startswith(message)


def test_squeue_now_must_be_tz_aware():
    with pytest.raises(ValueError, match="tz-aware"):
        parse_squeue_json(SQUEUE_V39, now=pd.Timestamp("2024-05-01T09:05:00"))


def test_sacct_states_the_jobs_own_marking_only_when_its_comment_column_has_a_comment():
    """Issue 30: sacct prints Comment empty unless AccountingStoreFlags=job_comment, so an all-empty column cannot
    clear a marking another export (squeue's comment) recorded; one commented job line says the cluster records them."""
    assert parse_sacct(SMALL, "UTC").marking_read is True  # 7001's gpuplan.kind=batch_inference
    empty = SMALL.replace("gpuplan.kind=batch_inference", "")
    assert parse_sacct(empty, "UTC").marking_read is False
    no_column = "\n".join(ln.rsplit("|", 1)[0] for ln in SMALL.splitlines()) + "\n"
    assert parse_sacct(no_column, "UTC").marking_read is False
