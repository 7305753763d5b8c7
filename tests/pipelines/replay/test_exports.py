"""pipelines.replay.jobs: the export writers, read back through the real parsers.

The replayed week (``data/fixtures/openb/replay_week.csv``) is exported day by day with
:func:`day_exports` and parsed with ``parse_sacct``, ``parse_squeue_json``,
``parse_kueue_workloads`` and ``parse_query_range``. Expected job sets are computed here from the
CSV's own columns (plain pandas comparisons, not the module's state logic); the counts and elapsed
times are pinned by hand from the CSV rows quoted in the comments. Days are 0-based of N = 7, so
T_d = 2025-03-10T16:00Z + d days and T_6 = 2025-03-16T16:00Z (the Prometheus fixture's end).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pipelines.io.errors import InputError
from pipelines.replay.day import day_exports, export_time
from pipelines.replay.jobs import REPLAY_COLUMNS, go_float, replay_jobs
from pipelines.replay.kueue_exports import kueue_list_text
from pipelines.replay.prometheus_exports import prometheus_text
from pipelines.replay.slurm_exports import sacct_text, squeue_json_text
from pipelines.workspace.sources.kueue import parse_kueue_workloads
from pipelines.workspace.sources.prometheus import parse_query_range
from pipelines.workspace.sources.slurm import parse_sacct
from pipelines.workspace.sources.slurm_squeue import parse_squeue_json

ROOT = Path(__file__).resolve().parents[3]
WEEK = ROOT / "data" / "fixtures" / "openb" / "replay_week.csv"
PROM = ROOT / "data" / "fixtures" / "servegen" / "prometheus.json"
TZ = "Asia/Shanghai"
N = 7
#: First sample of the Prometheus fixture: 2025-03-02T16:10:00Z (T_6 - 14 days + 600 s).
PROM_FIRST = pd.Timestamp("2025-03-02T16:10:00Z")


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    frame = pd.read_csv(WEEK, dtype=str, keep_default_na=False)
    for col in ("submitted_at", "started_at", "ended_at"):
        frame[col] = pd.to_datetime(frame[col].replace("", None), utc=True)
    frame["job_id"] = frame["job_id"].astype(int)
    return frame


@pytest.fixture(scope="module")
def week() -> pd.DataFrame:
    return replay_jobs(pd.read_csv(WEEK, dtype=str, keep_default_na=False))


@pytest.fixture(scope="module")
def body() -> str:
    return PROM.read_text()


@pytest.fixture(scope="module")
def days(week, body) -> dict[int, dict[str, str]]:
    return {d: day_exports(week, d, N, body, TZ) for d in range(N)}


def _T(d: int) -> pd.Timestamp:
    return pd.Timestamp("2025-03-10T16:00:00Z") + pd.Timedelta(days=d)


def _window_ids(raw: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> set[str]:
    """slurmdbd's -S/-E selection written out: eligible (= submit) < end and (not ended by end or ended >= start)."""
    ended = raw["ended_at"].notna() & (raw["ended_at"] <= end)
    keep = (raw["submitted_at"] < end) & (~ended | (raw["ended_at"] >= start))
    return {str(i) for i in raw.loc[keep, "job_id"]}


def _running_ids(raw: pd.DataFrame, t: pd.Timestamp) -> set[int]:
    started = raw["started_at"].notna() & (raw["started_at"] <= t)
    return set(raw.loc[started & (raw["ended_at"].isna() | (raw["ended_at"] > t)), "job_id"])


# ---------------------------------------------------------------- day_exports -> sacct


def test_export_times_step_a_day_and_end_at_the_prometheus_end(days):
    assert [days[d]["T"] for d in range(N)] == [f"2025-03-{10 + d}T16:00:00Z" for d in range(N)]
    assert export_time(6, 7) == pd.Timestamp("2025-03-16T16:00:00Z")
    assert export_time(0, 3) == pd.Timestamp("2025-03-14T16:00:00Z")
    assert sorted(days[0]) == ["T", "kueue", "prometheus", "sacct", "squeue"]


@pytest.mark.parametrize(("d", "counts"), [
    # day 0: the 7 days before T_0 hold trace day 118 only: 135 jobs, 4 running at T_0
    (0, {"failed": 74, "completed": 35, "cancelled": 22, "running": 4}),
    # day 1: the 116 jobs of day 119 + the 4 running at T_0 (800127, 800128, 800135 failed on day 1)
    (1, {"failed": 79, "completed": 29, "cancelled": 9, "running": 3}),
    # day 6: 97 submitted on day 124 + 5 running at T_5
    (6, {"failed": 47, "completed": 32, "cancelled": 15, "running": 8}),
])
def test_sacct_of_a_day_is_the_jobs_of_its_window_with_their_state_at_T(days, raw, d, counts):
    res = parse_sacct(days[d]["sacct"], TZ)
    assert res.errors == []
    frame = res.frame
    start = _T(d) - pd.Timedelta(days=7 if d == 0 else 1)
    assert set(frame["job_id"]) == _window_ids(raw, start, _T(d))
    assert frame["state"].value_counts().to_dict() == counts
    assert "pending" not in set(frame["state"])  # nothing is pending at a day boundary (README)
    running = frame[frame["state"] == "running"]
    assert {int(i) for i in running["job_id"]} == _running_ids(raw, _T(d))
    assert running["ended_at"].isna().all()
    # every row's times are the CSV's (local Asia/Shanghai text read back as UTC)
    by_id = raw.set_index("job_id")
    for row in frame.itertuples(index=False):
        src = by_id.loc[int(row.job_id)]
        assert row.submitted_at == src["submitted_at"]
        if row.state in ("completed", "failed"):
            assert (row.started_at, row.ended_at) == (src["started_at"], src["ended_at"])
            assert row.elapsed_s == (src["ended_at"] - src["started_at"]).total_seconds()


def test_sacct_elapsed_of_running_jobs_at_T(days):
    day0 = parse_sacct(days[0]["sacct"], TZ).frame.set_index("job_id")
    # 800077 (openb-pod-0563) started 2025-03-10T07:21:38Z: at T_0 = 16:00:00Z it has run 08:38:22.
    assert day0.at["800077", "elapsed_s"] == 8 * 3600 + 38 * 60 + 22
    assert "|2025-03-10T15:21:38|Unknown|08:38:22|UNLIMITED|RUNNING|" in days[0]["sacct"]  # local = UTC+8
    # 800571 (openb-pod-1556, never ends) started 2025-03-14T14:16:37Z: at T_6 2-01:43:23 (days prefix).
    day6 = parse_sacct(days[6]["sacct"], TZ).frame.set_index("job_id")
    assert day6.at["800571", "elapsed_s"] == 2 * 86400 + 3600 + 43 * 60 + 23
    assert "|2025-03-14T22:16:37|Unknown|2-01:43:23|UNLIMITED|RUNNING|" in days[6]["sacct"]


def test_consecutive_sacct_windows_share_only_the_jobs_running_at_the_boundary(days, raw):
    frames = {d: parse_sacct(days[d]["sacct"], TZ).frame.set_index("job_id") for d in range(N)}
    for d in range(N - 1):
        shared = set(frames[d].index) & set(frames[d + 1].index)
        # no job ends exactly at a T_d, so the overlap is exactly the jobs running at T_d
        assert shared == {str(i) for i in _running_ids(raw, _T(d))}
        assert set(frames[d].loc[sorted(shared), "state"]) == {"running"}
    assert [len(set(frames[d].index) & set(frames[d + 1].index)) for d in range(N - 1)] == [4, 3, 5, 3, 7, 5]
    # 800162 (openb-pod-0730) 2025-03-10T18:46:08Z -> 2025-03-11T16:29:27Z: RUNNING at T_1 (21:13:52 so far),
    # COMPLETED in day 2's export with its whole run 21:43:19.
    assert frames[1].loc["800162", ["state", "elapsed_s"]].tolist() == ["running", 21 * 3600 + 13 * 60 + 52]
    assert frames[2].loc["800162", ["state", "elapsed_s"]].tolist() == ["completed", 21 * 3600 + 43 * 60 + 19]
    assert frames[2].at["800162", "ended_at"] == pd.Timestamp("2025-03-11T16:29:27Z")
    # 800135 ran 9 s before T_0 and failed 3 min 18 s after its start, on day 1.
    assert frames[0].loc["800135", ["state", "elapsed_s"]].tolist() == ["running", 9]
    assert frames[1].loc["800135", ["state", "elapsed_s"]].tolist() == ["failed", 198]
    # the daily windows together hold every job submitted before T_6 (916), each job's last
    # appearance carrying its state at T_6
    last = pd.concat([frames[d].assign(day=d) for d in range(N)]).reset_index().groupby("job_id").last()
    assert len(last) == 916
    assert last["state"].value_counts().to_dict() == {"failed": 625, "completed": 198, "cancelled": 85,
                                                      "running": 8}


def test_day0_window_reaches_back_seven_days(week, body):
    # 3 replay days: T_0 = 2025-03-14T16:00Z; its sacct goes back to 2025-03-07, before the first job,
    # so it holds every job submitted by T_0: 602 ended + 7 running (the counts at that T in the README).
    frame = parse_sacct(day_exports(week, 0, 3, body, TZ)["sacct"], TZ).frame
    assert len(frame) == 609
    assert (frame["state"] == "running").sum() == 7


# ---------------------------------------------------------------- squeue, Kueue, Prometheus


@pytest.mark.parametrize(("d", "expected"), [
    (0, {800077, 800127, 800128, 800135}),
    (6, {800164, 800259, 800571, 800875, 800911, 800912, 800913, 800915}),
])
def test_squeue_is_the_running_and_pending_jobs_at_T(days, raw, d, expected):
    res = parse_squeue_json(days[d]["squeue"], now=_T(d))
    assert res.errors == []
    frame = res.frame.set_index("job_id")
    assert {int(i) for i in frame.index} == expected == _running_ids(raw, _T(d))
    assert set(frame["state"]) == {"running"}
    starts = raw.set_index("job_id")["started_at"]
    for job_id, row in frame.iterrows():
        assert row["started_at"] == starts[int(job_id)]
        assert row["elapsed_s"] == (_T(d) - starts[int(job_id)]).total_seconds()


@pytest.mark.parametrize(("d", "counts"), [
    (0, {"failed": 74, "completed": 35, "running": 4}),
    (6, {"failed": 625, "completed": 198, "running": 8}),
])
def test_kueue_list_holds_every_workload_submitted_by_T(days, raw, d, counts):
    res = parse_kueue_workloads(days[d]["kueue"])
    assert res.errors == []
    frame = res.frame
    assert frame["state"].value_counts().to_dict() == counts
    # every job submitted by T, less those cancelled while pending (their Workload went with the Job)
    t = _T(d)
    gone = raw["started_at"].isna() & raw["ended_at"].notna() & (raw["ended_at"] <= t)
    expected = raw[(raw["submitted_at"] <= t) & ~gone]
    assert set(frame["job_name"]) == set(expected["pod"])
    states = frame.set_index("job_name")["state"]
    assert {p for p, s in states.items() if s == "running"} == set(
        raw.loc[raw["job_id"].isin(_running_ids(raw, t)), "pod"])
    # a finished Workload's state is the job's final state
    ended = expected[expected["ended_at"].notna() & (expected["ended_at"] <= t)]
    assert {states[p] for p in ended.loc[ended["final_state"] == "FAILED", "pod"]} == {"failed"}
    assert {states[p] for p in ended.loc[ended["final_state"] == "COMPLETED", "pod"]} == {"completed"}


@pytest.mark.parametrize(("d", "per_service"), [(0, 8 * 144), (3, 11 * 144), (6, 14 * 144)])
def test_prometheus_body_ends_at_T(days, d, per_service):
    res = parse_query_range(days[d]["prometheus"], "service")
    assert res.errors == []
    frame = res.frame
    assert frame.groupby("service").size().to_dict() == {"m-mid": per_service, "m-small": per_service}
    assert frame["ts"].max() == _T(d)
    assert frame["ts"].min() == PROM_FIRST  # the fixture starts 8 days before T_0: 14-day-or-less bodies


def test_last_day_prometheus_is_the_committed_body(days, body):
    assert days[6]["prometheus"] == body


# ---------------------------------------------------------------- writers on a chosen T


def test_a_pending_job_mid_day_in_every_export(week):
    # 2025-03-09T16:32:00Z: 800001 (16:25:38 -> 16:33:32) runs, 800002 (16:26:29 -> 16:30:11) has
    # failed, 800003 (openb-pod-0436, never scheduled, created 16:31:17, deleted 16:32:17) is pending.
    t = pd.Timestamp("2025-03-09T16:32:00Z")
    sacct = parse_sacct(sacct_text(week, t, t - pd.Timedelta(hours=1), TZ), TZ).frame.set_index("job_id")
    assert sacct["state"].to_dict() == {"800001": "running", "800002": "failed", "800003": "pending"}
    assert sacct.at["800001", "elapsed_s"] == 382
    assert pd.isna(sacct.at["800003", "started_at"]) and sacct.at["800003", "nodes"] is None
    squeue = parse_squeue_json(squeue_json_text(week, t), now=t).frame.set_index("job_id")
    assert squeue["state"].to_dict() == {"800001": "running", "800003": "pending"}
    kueue = parse_kueue_workloads(kueue_list_text(week, t)).frame.set_index("job_name")
    assert kueue["state"].to_dict() == {"openb-pod-0432": "running", "openb-pod-0433": "failed",
                                        "openb-pod-0436": "pending"}
    # a minute later 800003 was cancelled: CANCELLED (never started) in sacct, gone from Kueue
    t2 = t + pd.Timedelta(minutes=1)
    later = parse_sacct(sacct_text(week, t2, t, TZ), TZ).frame.set_index("job_id")
    assert later.at["800003", "state"] == "cancelled" and pd.isna(later.at["800003", "started_at"])
    assert "openb-pod-0436" not in set(parse_kueue_workloads(kueue_list_text(week, t2)).frame["job_name"])


def _tiny() -> pd.DataFrame:
    rows = [
        # ends exactly at the window start: sacct lists it (time_end >= start)
        (1, "a", "BE", "2025-01-01T00:00:00Z", "2025-01-01T00:00:00Z", "2025-01-01T10:00:00Z", "COMPLETED"),
        # ended one second before the window start: not listed
        (2, "b", "BE", "2025-01-01T00:00:00Z", "2025-01-01T00:00:00Z", "2025-01-01T09:59:59Z", "FAILED"),
        # submitted exactly at T: not listed by sacct (eligible < endtime) but pending in squeue at T
        (3, "c", "Guaranteed", "2025-01-01T12:00:00Z", "", "", "PENDING"),
        # submitted after T: in no export
        (4, "d", "Burstable", "2025-01-01T12:00:01Z", "2025-01-01T12:00:01Z", "", "RUNNING"),
    ]
    out = []
    for job_id, pod, qos, sub, start, end, final in rows:
        started = start != ""
        out.append({"job_id": job_id, "pod": pod, "qos": qos, "gpus": 2, "cpu_milli": 1500, "memory_mib": 0,
                    "node": "n1" if started else "", "node_model": "A100" if started else "",
                    "submitted_at": sub, "started_at": start, "ended_at": end, "final_state": final})
    return pd.DataFrame(out, columns=list(REPLAY_COLUMNS))


def test_sacct_window_boundaries_follow_slurmdbd():
    t, start = pd.Timestamp("2025-01-01T12:00:00Z"), pd.Timestamp("2025-01-01T10:00:00Z")
    text = sacct_text(_tiny(), t, start, "UTC")
    frame = parse_sacct(text, "UTC").frame
    assert list(frame["job_id"]) == ["1"]
    # 1500 milli-CPU -> 2 CPUs; memory 0 is left out; typed GRES from the node's model
    assert text.splitlines()[1] == ("1|a|openb|openb|gpu|be|1000|2025-01-01T00:00:00|2025-01-01T00:00:00|"
                                    "2025-01-01T00:00:00|2025-01-01T10:00:00|10:00:00|UNLIMITED|COMPLETED|"
                                    "billing=2,cpu=2,gres/gpu=2,node=1|billing=2,cpu=2,gres/gpu:a100=2,gres/gpu=2,"
                                    "node=1|n1|")
    squeue = parse_squeue_json(squeue_json_text(_tiny(), t)).frame
    assert list(squeue["job_id"]) == ["3"] and list(squeue["state"]) == ["pending"]
    assert list(squeue["priority"]) == [4000.0] and list(squeue["gpus"]) == [2]


def test_prometheus_range_is_open_at_its_start():
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"service": "a"}, "values": [[1000, "1"], [1600, "2"], [2200, 1164.0]]},
        {"metric": {"service": "b"}, "values": [[1000, "5"]]},
    ]}}
    t = pd.Timestamp(2200, unit="s", tz="UTC")
    # range 1200 s: (1000, 2200]; series b has no sample left and is omitted; 1164.0 prints as Go does
    text = prometheus_text(doc, t, 1200 / 86400)
    assert text == ('{"status":"success","data":{"resultType":"matrix","result":'
                    '[{"metric":{"service":"a"},"values":[[1600,"2"],[2200,"1164"]]}]}}')
    assert go_float(986.565) == "986.565" and go_float(0.0) == "0"


# ---------------------------------------------------------------- refusals


def test_bad_input_is_refused_with_the_field_named(week, body):
    with pytest.raises(InputError, match="n_days <= 7"):
        day_exports(week, 0, 8, body, TZ)
    with pytest.raises(InputError, match="replay day 7 of 7"):
        day_exports(week, 7, 7, body, TZ)
    with pytest.raises(InputError, match="final_state COMPLETED needs started_at set and ended_at set"):
        replay_jobs(_tiny().assign(final_state=["COMPLETED", "FAILED", "COMPLETED", "RUNNING"]))
    with pytest.raises(InputError, match=r"row 1 \(job 1\): qos 'LS'"):
        replay_jobs(_tiny().assign(qos=["LS", "BE", "BE", "BE"]))
    with pytest.raises(InputError, match="row 3: submitted_at '2025-01-01T12:00:00' has no time zone"):
        replay_jobs(_tiny().assign(submitted_at=["2025-01-01T00:00:00Z"] * 2 + ["2025-01-01T12:00:00"] * 2))
    with pytest.raises(InputError, match="column\\(s\\) node_model missing"):
        replay_jobs(_tiny().drop(columns=["node_model"]))
    with pytest.raises(InputError, match="has no time zone"):
        sacct_text(_tiny(), pd.Timestamp("2025-01-01T12:00:00"), pd.Timestamp("2025-01-01T10:00:00Z"), "UTC")
    with pytest.raises(InputError, match="not an IANA time zone"):
        sacct_text(_tiny(), pd.Timestamp("2025-01-01T12:00:00Z"), pd.Timestamp("2025-01-01T10:00:00Z"), "Mars/Base")
