"""The workspace's typed problem (issue 27): version-2 cluster, jobs' eligible types, running jobs on their type."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from optimizer.problem import Cluster, Node, Problem
from pipelines.io.errors import InputError
from pipelines.stages import problem as P
from pipelines.workspace.config import ServiceSettings

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
