"""Workspace config (gpuplan.toml), the record store (upserts, atomicity) and ingest of CSV sources."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipelines.config.settings import job_side
from pipelines.io.errors import InputError
from pipelines.stages import traffic as traffic_stage
from pipelines.stages.queue import store as store_queue
from pipelines.workspace import store as store_mod
from pipelines.workspace.ingest import ingest, workspace_data
from pipelines.workspace.load import init_text, load_workspace, parse_workspace
from pipelines.workspace.sources import tabular
from pipelines.workspace.store import JOBS, Store

BASE = """
[cluster]
nodes = { a1 = 4, a2 = 4 }
timezone = "Europe/Berlin"

[[services]]
service = "chat"
capacity_per_gpu_per_h = 1000
min_gpus = 1
max_gpus = 4
swap_cap_gpus = 1

[sources.history]
format = "csv"
path = "hist/*.csv"

[sources.queue]
format = "csv"
path = "queue.csv"

[sources.traffic]
format = "csv"
path = "traffic.csv"
"""

HIST = """job_id,submitted_at,started_at,ended_at,state,gpus,user,time_limit_h,variant
1,2025-03-01T10:00:00,2025-03-01T10:05:00,2025-03-01T11:05:00,COMPLETED,2,ann,2,lora
2,2025-03-01T10:10:00,2025-03-01T10:15:00,2025-03-01T10:45:00,TIMEOUT,1,bob,0.5,
3,2025-03-01T10:20:00,2025-03-01T10:25:00,2025-03-01T10:35:00,CANCELLED by 7,1,bob,1,
"""


def _ws(tmp_path: Path, text: str = BASE):
    (tmp_path / "gpuplan.toml").write_text(text)
    return load_workspace(tmp_path)


def test_a_service_band_the_conversion_cannot_use_is_refused_naming_the_entry_exit_2(tmp_path, iso_env):
    from typer.testing import CliRunner

    from pipelines.cli.app import app

    bad = BASE.replace("swap_cap_gpus = 1\n", "swap_cap_gpus = 1\nreplica_gpus = 2\n")  # min_gpus 1, replicas of 2
    with pytest.raises(InputError) as err:
        _ws(tmp_path, bad)
    assert str(err.value) == f"{tmp_path / 'gpuplan.toml'}: services.0: min_gpus 1 is not a multiple of replica_gpus 2"
    res = CliRunner().invoke(app, ["ingest", "--workspace", str(tmp_path)])
    assert res.exit_code == 2
    assert res.output.strip().splitlines()[-1] == f"error: {err.value}"


def test_config_errors_name_key_and_file(tmp_path):
    with pytest.raises(InputError, match=r"gpuplan.toml: cluster.timezone: 'Mars/Olympus' is not an IANA time zone"):
        _ws(tmp_path, BASE.replace("Europe/Berlin", "Mars/Olympus"))
    with pytest.raises(InputError, match=r"gpuplan.toml: cluster.colour: unknown key"):
        _ws(tmp_path, BASE.replace('[cluster]\n', '[cluster]\ncolour = "red"\n'))
    with pytest.raises(InputError, match=r"cluster: Value error|nodes have different GPU counts \[4, 8\]"):
        _ws(tmp_path, BASE.replace("a2 = 4", "a2 = 8"))
    with pytest.raises(InputError, match=r"3 nodes x 4 GPUs = 12 GPUs is not a power of two"):
        _ws(tmp_path, BASE.replace("a2 = 4", "a2 = 4, a3 = 4"))
    with pytest.raises(InputError, match=r"sources.traffic: required key missing"):
        _ws(tmp_path, BASE[:BASE.index("[sources.traffic]")])
    with pytest.raises(InputError, match=r"history.format = 'prometheus-json' is not a history format"):
        _ws(tmp_path, BASE.replace('format = "csv"\npath = "hist', 'format = "prometheus-json"\npath = "hist'))
    with pytest.raises(InputError, match=r"gpuplan.toml: not valid TOML"):
        _ws(tmp_path, BASE + "\n[cluster\n")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty: no gpuplan.toml \(create one with 'gpuplan init"):
        load_workspace(tmp_path / "empty")
    with pytest.raises(InputError, match=r"nowhere: no such folder"):
        load_workspace(tmp_path / "nowhere")


def test_cluster_nodes_and_init_templates(tmp_path):
    ws = _ws(tmp_path)
    assert ws.config.cluster.node_names == ["a1", "a2"]
    assert (ws.config.cluster.n_gpus, ws.config.cluster.node_gpus) == (8, 4)
    plain = parse_workspace(init_text(), tmp_path)
    assert plain.config.cluster.n_gpus == 16 and plain.source("history").format == "slurm-sacct"
    demo = parse_workspace(init_text(demo=True), tmp_path)
    assert job_side(demo) == "shipped" and [s.service for s in demo.services()] == ["m-small", "m-mid"]
    assert len(demo.source_files("traffic")) == 2


def test_tabular_jobs_states_aliases_and_bad_line():
    text = HIST + "4,not-a-time,,,,1,ann,,\n5,2025-03-01T12:00:00,,,,4,ann,3,\n"
    from io import StringIO

    res = tabular.parse_jobs(pd.read_csv(StringIO(text), dtype={"job_id": str}), "Europe/Berlin")
    assert res.read == 5
    assert res.errors == ["line 5: submitted_at 'not-a-time' is not a time (expected ISO 8601)"]
    f = res.frame.set_index("job_id")
    assert list(f["state"]) == ["completed", "timeout", "cancelled", "pending"]
    assert list(f["censored"]) == [False, False, True, False]
    # Berlin is UTC+1 in March: local 10:00 -> 09:00 UTC; elapsed from start/end; limit from hours
    assert f.loc["1", "submitted_at"] == pd.Timestamp("2025-03-01T09:00:00Z")
    assert f.loc["1", "elapsed_s"] == 3600.0 and f.loc["2", "time_limit_s"] == 1800.0
    assert json.loads(f.loc["1", "annotations"]) == {"variant": "lora"}
    assert f.loc["5", "gpus"] == 4


def _write_sources(root: Path, hist: str = HIST, queue: str | None = None) -> None:
    (root / "hist").mkdir(exist_ok=True)
    (root / "hist" / "a.csv").write_text(hist)
    (root / "queue.csv").write_text(queue or "job_id,submitted_at,state,gpus,user\n"
                                             "9,2025-03-02T08:00:00,PENDING,2,ann\n"
                                             "10,2025-03-02T08:30:00,PENDING,3,bob\n")
    rows = ["ts,value,service"] + [f"2025-03-{d:02d}T{h:02d}:00:00Z,{100 + h},chat" for d in (1, 2) for h in range(24)]
    (root / "traffic.csv").write_text("\n".join(rows) + "\n")


def test_ingest_is_idempotent_and_updates_changed_records(tmp_path):
    ws = _ws(tmp_path)
    _write_sources(tmp_path)
    first = ingest(ws)["sources"]
    assert first["history"] == {"unit": "jobs", "read": 3, "added": 3, "updated": 0, "unchanged": 0, "older": 0,
                                "superseded": 0, "rejected": 0, "error_lines": 0, "errors": [],
                                "unreadable_files": [], "array_records_expanded": 0, "array_tasks": 0}
    assert first["queue"]["added"] == 2 and first["traffic"]["added"] == 48
    again = ingest(ws)["sources"]
    assert [again[r]["added"] + again[r]["updated"] for r in ("history", "queue", "traffic")] == [0, 0, 0]
    # and the report says why: every record read again is already stored
    assert [again[r]["unchanged"] for r in ("history", "queue", "traffic")] == [3, 2, 48]
    # job 9 has since finished: sacct/the history export now shows it; the queue no longer does
    (tmp_path / "hist" / "b.csv").write_text("job_id,submitted_at,started_at,ended_at,state,gpus,user\n"
                                             "9,2025-03-02T08:00:00,2025-03-02T08:10:00,2025-03-02T09:10:00,"
                                             "COMPLETED,2,ann\n")
    (tmp_path / "queue.csv").write_text("job_id,submitted_at,state,gpus,user\n10,2025-03-02T08:30:00,RUNNING,3,bob\n")
    third = ingest(ws)["sources"]
    assert (third["history"]["added"], third["history"]["updated"]) == (0, 1)
    assert (third["queue"]["added"], third["queue"]["updated"]) == (0, 1)
    st = Store(ws.store_dir)
    jobs = st.jobs()
    assert len(jobs) == 5 and jobs.set_index("job_id").loc["9", "state"] == "completed"
    assert list(st.queue()["job_id"]) == ["10"]
    data = workspace_data(ws)
    assert data.from_store and len(data.history) == 5 and len(data.traffic) == 48


def test_failed_ingest_leaves_store_intact(tmp_path, monkeypatch):
    ws = _ws(tmp_path)
    _write_sources(tmp_path)
    ingest(ws)
    before = Store(ws.store_dir).jobs()
    files_before = sorted(p.relative_to(tmp_path) for p in ws.store_dir.rglob("*.parquet"))
    # new records in two months: the second partition's write fails after the first was staged
    (tmp_path / "hist" / "c.csv").write_text("job_id,submitted_at,state,gpus\n"
                                             "20,2025-03-05T00:00:00,COMPLETED,1\n21,2025-04-05T00:00:00,COMPLETED,1\n")
    real = store_mod.pq.write_table
    calls = {"n": 0}

    def flaky(table, where, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real(table, where, *a, **k)

    monkeypatch.setattr(store_mod.pq, "write_table", flaky)
    with pytest.raises(OSError, match="disk full"):
        ingest(ws)
    pd.testing.assert_frame_equal(Store(ws.store_dir).jobs(), before)
    assert sorted(p.relative_to(tmp_path) for p in ws.store_dir.rglob("*.parquet")) == files_before


def test_store_upsert_counts_and_partitions(tmp_path):
    st = Store(tmp_path / "s")
    recs = tabular.parse_jobs(pd.DataFrame({"job_id": ["a", "b"], "submitted_at": ["2025-01-31T23:00:00Z",
                                                                                   "2025-02-01T01:00:00Z"],
                                            "state": ["PENDING", "PENDING"], "gpus": [1, 2]}), "UTC").frame
    assert st.upsert(JOBS, recs) == {"": store_mod.UpsertCount(2, 0)}
    parts = sorted(str(p.relative_to(tmp_path / "s")) for p in (tmp_path / "s").rglob("part.parquet"))
    assert parts == ["jobs/source=table/month=2025-01/part.parquet", "jobs/source=table/month=2025-02/part.parquet"]
    assert st.upsert(JOBS, recs) == {"": store_mod.UpsertCount(0, 0)}
    changed = recs.assign(gpus=[1, 4])
    assert st.upsert(JOBS, changed) == {"": store_mod.UpsertCount(0, 1)}
    assert list(st.jobs().sort_values("job_id")["gpus"]) == [1, 4]


def test_queue_kinds_priorities_and_forecast_rows():
    q = tabular.parse_jobs(pd.DataFrame({
        "job_id": ["1", "2", "3", "4"], "submitted_at": ["2025-03-02T08:00:00Z"] * 4,
        "started_at": [None, "2025-03-02T09:00:00Z", None, None], "state": ["PENDING", "RUNNING", "PENDING", "PENDING"],
        "gpus": [3, 2, 0, 8], "qos": ["BE", "high", None, None], "partition": [None, None, "quant", None],
        "kind": [None, None, None, "batch_inference"]}), "UTC").frame
    assert store_queue.queue_kinds(q, {"be": "batch_inference"}, {"quant": "quantization"}, "training") == [
        "batch_inference", "training", "quantization", "batch_inference"]
    assert store_queue.queue_priorities(q, {"HIGH": 8}, 1.0) == [1.0, 8.0, 1.0, 1.0]
    pred = pd.DataFrame({"duration_p10_h": [0.1, 1.0, 1.0, 2.0], "duration_p50_h": [0.2, 2.0, 2.0, 3.0],
                         "duration_p90_h": [1.0, 3.0, 3.0, 4.0], "flags": ["", "", "", ""]})
    start = pd.Timestamp("2025-03-02T10:00:00Z").to_pydatetime()
    jobs, notes = store_queue.queue_forecasts(pred, q, ["t"] * 4, [1.0] * 4, 30, start)
    assert notes == {"dropped_no_gpus": 1, "rounded_up_gpus": 1}
    assert list(jobs["job_id"]) == ["1", "2", "4"] and list(jobs["gpus_requested"]) == [4, 2, 8]
    # a step minimum (0.5 h) for short forecasts; the running job: 1 h already run + its remaining time
    assert list(jobs["duration_p50_h"]) == [0.5, 3.0, 3.0]
    assert list(jobs["state"]) == ["queued", "running", "queued"]


def test_hourly_traffic_rates_and_counts():
    from pipelines.workspace.config import ServiceSettings
    from pipelines.workspace.sources.records import traffic_frame

    svc = [ServiceSettings(service="s", file="", timezone="UTC", capacity_per_gpu_per_h=1.0, headroom=0.0, min_gpus=0,
                           max_gpus=4, swap_cap_gpus=1)]
    samples = traffic_frame([{"service": "s", "ts": "2025-01-01T00:00:00Z", "value": 1.0},
                             {"service": "s", "ts": "2025-01-01T00:30:00Z", "value": 3.0},
                             {"service": "s", "ts": "2025-01-01T01:00:00Z", "value": float("nan")},
                             {"service": "s", "ts": "2025-01-01T02:10:00Z", "value": 5.0}])
    rate = traffic_stage.hourly_traffic(samples, svc, "rate_per_s")["s"]
    assert list(rate["ts"]) == ["2025-01-01T00:00:00Z", "2025-01-01T02:00:00Z"]
    assert list(rate["value"]) == [2.0 * 3600, 5.0 * 3600]
    assert list(traffic_stage.hourly_traffic(samples, svc, "per_hour")["s"]["value"]) == [2.0, 5.0]


def test_one_job_in_both_exports_is_one_record_and_never_goes_back(tmp_path):
    ws = _ws(tmp_path)
    # job 9 runs: sacct (history) and squeue (queue) both list it, with different elapsed times
    _write_sources(tmp_path, hist=HIST + "9,2025-03-02T08:00:00,2025-03-02T08:10:00,,RUNNING,2,ann,,\n",
                   queue="job_id,submitted_at,started_at,state,gpus,user,elapsed_s\n"
                         "9,2025-03-02T08:00:00,2025-03-02T08:10:00,RUNNING,2,ann,600\n")
    first = ingest(ws)["sources"]
    assert (first["history"]["added"], first["queue"]["added"]) == (3, 1)  # job 9 counted once, as the queue's
    assert Store(ws.store_dir).jobs().set_index("job_id").loc["9", "elapsed_s"] == 600.0
    again = ingest(ws)["sources"]
    assert (again["history"]["updated"], again["queue"]["updated"]) == (0, 0)
    # it finished (history), but an old queue export still says running: the finished record stays
    (tmp_path / "hist" / "b.csv").write_text("job_id,submitted_at,started_at,ended_at,state,gpus,user\n"
                                             "9,2025-03-02T08:00:00,2025-03-02T08:10:00,2025-03-02T09:10:00,"
                                             "COMPLETED,2,ann\n")
    third = ingest(ws)["sources"]
    assert (third["history"]["updated"], third["queue"]["updated"]) == (1, 0)
    st = Store(ws.store_dir)
    assert st.jobs().set_index("job_id").loc["9", "state"] == "completed"
    assert st.queue().empty


def test_a_corrected_timezone_replaces_records_instead_of_duplicating_them(tmp_path):
    ws = _ws(tmp_path)
    _write_sources(tmp_path)
    ingest(ws)
    # the operator fixes [cluster] timezone: every naive time shifts by Berlin's offset (+1 h in March)
    ws2 = _ws(tmp_path, BASE.replace("Europe/Berlin", "UTC"))
    rep = ingest(ws2)["sources"]
    assert (rep["history"]["added"], rep["history"]["updated"]) == (0, 3)
    jobs = Store(ws2.store_dir).jobs().set_index("job_id")
    assert len(jobs) == 5  # 3 history + 2 queue, none twice
    assert jobs.loc["1", "submitted_at"] == pd.Timestamp("2025-03-01T10:00:00Z")


def test_an_export_with_fewer_columns_keeps_what_a_richer_one_recorded(tmp_path):
    st = Store(tmp_path / "s")
    rich = tabular.parse_jobs(pd.DataFrame({
        "job_id": ["a"], "submitted_at": ["2025-01-01T00:00:00Z"], "state": ["RUNNING"],
        "started_at": ["2025-01-01T00:05:00Z"], "gpus": [4], "user": ["ann"], "qos": ["high"],
        "gpu_type": ["a100"], "variant": ["lora"]}), "UTC").frame
    st.upsert(JOBS, rich)
    poor = tabular.parse_jobs(pd.DataFrame({
        "job_id": ["a"], "submitted_at": ["2025-01-01T00:00:00Z"], "state": ["COMPLETED"],
        "started_at": ["2025-01-01T00:05:00Z"], "ended_at": ["2025-01-01T01:05:00Z"], "gpus": [4]}), "UTC").frame
    assert st.upsert(JOBS, poor) == {"": store_mod.UpsertCount(0, 1)}
    row = st.jobs().iloc[0]
    assert (row["state"], row["user"], row["qos"], row["gpu_type"], row["elapsed_s"]) == (
        "completed", "ann", "high", "a100", 3600.0)
    assert json.loads(row["annotations"]) == {"variant": "lora"}
    assert st.upsert(JOBS, poor) == {"": store_mod.UpsertCount(0, 0)}  # and again: nothing changes


def test_only_this_clusters_partitions_and_nodes_are_planned():
    q = tabular.parse_jobs(pd.DataFrame({
        "job_id": ["1", "2", "3", "4"], "submitted_at": ["2025-03-02T08:00:00Z"] * 4,
        "started_at": [None, "2025-03-02T09:00:00Z", "2025-03-02T09:00:00Z", None],
        "state": ["PENDING", "RUNNING", "RUNNING", "PENDING"], "gpus": [1, 2, 2, 1],
        "partition": ["gpu", "gpu", "gpu", "cpu"], "nodes": [None, "a1", "other-07", None]}), "UTC").frame
    kept, dropped = store_queue.on_this_cluster(q, ["a1", "a2"], ["GPU"])
    assert list(kept["job_id"]) == ["1", "2"]
    assert dropped == {"dropped_other_partition": 1, "dropped_running_elsewhere": 1}
    kept, dropped = store_queue.on_this_cluster(q, ["a1", "a2"], None)
    assert list(kept["job_id"]) == ["1", "2", "4"] and dropped["dropped_running_elsewhere"] == 1


def test_a_stored_ended_job_is_never_turned_back_by_a_later_stale_export(tmp_path):
    st = Store(tmp_path / "s")
    base = {"job_id": ["a"], "submitted_at": ["2025-01-01T00:00:00Z"], "started_at": ["2025-01-01T00:05:00Z"],
            "gpus": [2]}
    done = tabular.parse_jobs(pd.DataFrame({**base, "state": ["COMPLETED"], "ended_at": ["2025-01-01T01:05:00Z"]}),
                              "UTC").frame
    stale = tabular.parse_jobs(pd.DataFrame({**base, "state": ["RUNNING"]}), "UTC").frame
    assert st.upsert(JOBS, done) == {"": store_mod.UpsertCount(1, 0)}
    assert st.upsert(JOBS, stale) == {"": store_mod.UpsertCount(0, 0)}
    assert st.jobs().iloc[0]["state"] == "completed"


def _counts(c):
    return (c.added, c.updated, c.unchanged, c.older, c.superseded)


def test_upsert_names_what_happened_to_every_row_it_did_not_add(tmp_path):
    """Operator trial (issue 30 brief, item 8): 'read 324 added 313' left 11 records unexplained. Per origin the
    five counts add up to the rows given: a duplicate row of this upsert, a stored row read again, a stale one."""
    st = Store(tmp_path / "s")
    base = {"submitted_at": ["2025-01-01T00:00:00Z"] * 3, "gpus": [2, 2, 2]}
    hist = tabular.parse_jobs(pd.DataFrame({**base, "job_id": ["a", "b", "c"], "state": ["COMPLETED", "RUNNING",
                                            "PENDING"], "started_at": ["2025-01-01T00:05:00Z",
                                                                       "2025-01-01T00:05:00Z", None],
                                            "ended_at": ["2025-01-01T01:05:00Z", None, None]}), "UTC").frame
    queue = hist.iloc[1:].reset_index(drop=True)  # b and c again, as the queue export lists them
    got = st.upsert(JOBS, pd.concat([hist, queue], ignore_index=True), ["history"] * 3 + ["queue"] * 2)
    # b and c: the queue's (later among equals) are kept and added there; history's two are superseded
    assert {k: _counts(v) for k, v in got.items()} == {"history": (1, 0, 0, 0, 2), "queue": (2, 0, 0, 0, 0)}
    # the same three again, and a stale a (pending: earlier in its life than the stored completed a)
    stale = hist.iloc[:1].assign(state="pending", started_at=pd.NaT, ended_at=pd.NaT)
    again = st.upsert(JOBS, pd.concat([hist.iloc[1:], stale], ignore_index=True))
    assert _counts(again[""]) == (0, 0, 2, 1, 0) and again[""] == store_mod.UpsertCount(0, 0)


def test_gpuplan_ingest_names_the_records_it_did_not_add():
    from pipelines.cli.ingest import not_added_lines

    r = {"unit": "jobs", "read": 324, "added": 313, "updated": 0, "rejected": 0, "unchanged": 2, "older": 1,
         "superseded": 8}
    assert not_added_lines(r) == [
        "         the other 11 jobs: 2 already stored, unchanged; 1 older than the stored record (the stored one is "
        "kept); 8 also read from another export or source in this ingest (one record per job is kept, the one "
        "furthest along its life, and counted there)"]
    assert not_added_lines({**r, "added": 321, "unchanged": 0, "older": 0, "superseded": 0}) == [
        "         the other 3 jobs: 3 not accounted for"]
    assert not_added_lines({**r, "added": 314, "rejected": 10}) == []
