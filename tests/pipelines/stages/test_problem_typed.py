"""The workspace's typed problem (issue 27): version-2 cluster, jobs' eligible types, running jobs on their type."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from forecasters.scheduler import fit_scheduler_model
from optimizer.problem import Cluster, Node, Problem
from pipelines.io.errors import InputError
from pipelines.stages import problem as P
from pipelines.stages.queue.store import typed_durations
from pipelines.workspace.config import ServiceSettings
from pipelines.workspace.sources.records import job_frame

T0 = datetime(2025, 3, 16, 16, tzinfo=UTC)
SERVICES = [ServiceSettings(service="chat", capacity_per_gpu_per_h=1000, min_gpus=1, max_gpus=2, swap_cap_gpus=1)]
#: a4 (4 a100) listed first, h8 (8 h100) second, t2 (2 t4, down): the layout puts the largest first
CLUSTER = Cluster(n_gpus=0, step_minutes=30, horizon_steps=4, nodes=(
    Node("a4", 4, "a100_40gb"), Node("h8", 8, "h100_80gb"), Node("t2", 2, "t4_16gb", down=(0, 1))))
NODE_NAMES = ["a4", "h8", "t2"]  # the workspace's order, which node_hint indexes


def test_typed_document_layout_types_and_running_jobs_on_their_type():
    jobs = pd.DataFrame({
        "job_id": ["q-h", "q-any", "r-a", "r-h"], "kind": ["training"] * 4, "priority": [1.0] * 4,
        "state": ["queued", "queued", "running", "running"], "submitted_at": [pd.Timestamp(T0)] * 4,
        "started_at": [pd.NaT, pd.NaT, pd.Timestamp("2025-03-16 15:30", tz="UTC"),
                       pd.Timestamp("2025-03-16 15:30", tz="UTC")],
        "deadline_at": [pd.NaT] * 4, "gpus_requested": [8, 2, 2, 4], "gpus_pred": [8, 2, 2, 4],
        "duration_p10_h": [1.0] * 4, "duration_p50_h": [1.0] * 4, "duration_p90_h": [1.0] * 4,
        "node_hint": pd.array([None, None, 0, None], dtype="Int64"),
        "gpu_types": ["h100_80gb", None, "a100_40gb", "h100_80gb"]})
    demand = pd.DataFrame({"service": "chat", "step": range(4), "demand_gpus_p50": [1] * 4,
                           "demand_gpus_p90": [1] * 4, "current_gpus": 1})
    d = P.problem_document(CLUSTER, SERVICES, jobs, demand, T0, time_limit_s=5, node_names=NODE_NAMES)
    assert d["version"] == 2
    assert [(n["name"], n["gpus"], n["gpu_type"], n["down"]) for n in d["cluster"]["nodes"]] == [
        ("h8", 8, "h100_80gb", []), ("a4", 4, "a100_40gb", []), ("t2", 2, "t4_16gb", [0, 1])]
    assert [(j["job_id"], j.get("gpu_types")) for j in d["jobs"]] == [("q-any", None), ("q-h", ["h100_80gb"])]
    # layout: h8 GPUs 0-7, a4 8-11, t2 12-13, padding 14-15. r-h (4, h100) first: GPUs 0-3; r-a (2, a100,
    # reported on a4) on a4's first pair, 8-9
    assert {r["job_id"]: r["block_offset"] for r in d["running"]} == {"r-h": 0, "r-a": 8}
    problem = Problem.from_dict(d)
    assert problem.n_gpus == 16 and problem.jobs[1].gpu_types == ("h100_80gb",)


def test_running_job_without_room_of_its_type_is_refused():
    with pytest.raises(InputError, match=r"no free aligned block of 8 a100_40gb GPUs"):
        P.assign_running_typed([8], CLUSTER, ["a100_40gb"], [None])
    assert P.assign_running_typed([2, 2], CLUSTER, [None, "h100_80gb"], [None, "h8"]) == [2, 0]


def test_durations_by_type_become_steps_of_the_types_a_job_may_run_on():
    """1.2 h on h100 and 2.6 h on a100 at 30-min steps: 3 and 6 steps; t4 dropped (the job asked for h100|a100)."""
    jobs = pd.DataFrame({
        "job_id": ["q"], "kind": ["training"], "priority": [1.0], "state": ["queued"],
        "submitted_at": [pd.Timestamp(T0)], "started_at": [pd.NaT], "deadline_at": [pd.NaT],
        "gpus_requested": [2], "gpus_pred": [2], "duration_p10_h": [1.0], "duration_p50_h": [2.0],
        "duration_p90_h": [3.0], "node_hint": pd.array([None], dtype="Int64"), "gpu_types": ["h100_80gb|a100_40gb"],
        "durations_by_type": ['{"a100_40gb": 2.6, "h100_80gb": 1.2, "t4_16gb": 9.0}']})
    demand = pd.DataFrame({"service": "chat", "step": range(4), "demand_gpus_p50": [1] * 4,
                           "demand_gpus_p90": [1] * 4, "current_gpus": 1})
    d = P.problem_document(CLUSTER, SERVICES, jobs, demand, T0, time_limit_s=5, node_names=NODE_NAMES)
    assert d["jobs"][0]["durations_by_type"] == {"a100_40gb": 6, "h100_80gb": 3}
    assert d["jobs"][0]["duration_steps"] == 4
    job = Problem.from_dict(d).jobs[0]
    assert job.duration_on(job.requested, "h100_80gb", Problem.from_dict(d).cluster) == 3


def test_typed_durations_price_each_eligible_type_of_a_queued_job():
    """A history where every kind ran on a100 and h100, a100 2x longer: the queue's pending jobs get both types."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(400):
        k, fast = i % 8, bool(rng.random() < 0.5)
        run_h = (0.5 + k) * (1.0 if fast else 2.0) * float(rng.lognormal(0.0, 0.1))
        sub = pd.Timestamp("2025-03-01", tz="UTC") + pd.Timedelta(hours=i)
        rows.append({"source": "slurm", "job_id": str(i), "submitted_at": sub, "eligible_at": sub, "started_at": sub,
                     "ended_at": sub + pd.Timedelta(hours=run_h), "state": "completed", "censored": False,
                     "elapsed_s": run_h * 3600.0, "time_limit_s": None, "gpus": 2,
                     "gpu_type": "h100" if fast else "a100", "nodes": None, "user": f"u{k}", "account": "a",
                     "partition": "gpu", "qos": "normal", "priority": 1.0, "job_name": f"job{chr(97 + k)}", "kind": None,
                     "annotations": {}})
    history = job_frame(rows)
    model = fit_scheduler_model(history)
    queue = history.iloc[[0, 1, 2]].copy()
    queue["job_id"] = ["p-any", "p-h", "r"]
    queue["state"] = ["pending", "pending", "running"]
    queue["gpu_type"] = [None, None, "h100"]
    queue["ended_at"], queue["elapsed_s"] = pd.NaT, np.nan
    start = pd.Timestamp("2025-03-18", tz="UTC").to_pydatetime()
    queue["started_at"] = [pd.NaT, pd.NaT, pd.Timestamp(start) - pd.Timedelta(minutes=10)]
    out = typed_durations(model, queue, [None, "h100_80gb", "h100_80gb"], ["a100_40gb", "h100_80gb"], start, 30)
    by_any, by_h = json.loads(out[0]), json.loads(out[1])
    assert sorted(by_any) == ["a100_40gb", "h100_80gb"] and sorted(by_h) == ["h100_80gb"]
    assert by_any["a100_40gb"] / by_any["h100_80gb"] == pytest.approx(2.0, rel=0.10)
    assert out[2] is None  # running: it runs on one type
    assert typed_durations(model, queue, [None] * 3, ["a100_40gb"], start, 30) == [None] * 3  # one type
