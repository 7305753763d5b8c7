"""The ``whatif`` Prefect flow (issue 14): served with the other deployments, and a run against a real
Prefect server publishes the markdown and table artifacts, read back through the Prefect API."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

#: The hand problem (8 GPUs on two 4-GPU nodes, 8 steps; worked in tests/optimizer/test_whatif.py), shared by
#: the what-if tests: tests/data/whatif_hand.json.
HAND = json.loads((Path(__file__).resolve().parents[2] / "data" / "whatif_hand.json").read_text())

SCRIPT = """
import json, sys
from pipelines.flows.whatif import whatif_flow
doc = whatif_flow(run_folder=sys.argv[1], add_gpus=8, priority={"B": 2})
print(json.dumps({"changes": doc["changes"], "jobs": [j["job_id"] for j in doc["jobs"]]}))
"""


def _run_folder(root: Path) -> Path:
    from optimizer.planners import plan
    from optimizer.problem import Problem

    folder = root / "20250316T1600Z_flow"
    folder.mkdir()
    prob = Problem.from_dict(HAND)
    (folder / "problem.json").write_text(json.dumps(prob.to_dict()))
    (folder / "plan.json").write_text(json.dumps(plan(prob, "milp").to_dict()))
    (folder / "summary.json").write_text(json.dumps({"plan_start": "2025-03-16T16:00:00+00:00", "planner": "milp",
                                                     "cluster": {"nodes": ["gpu-a", "gpu-b"]}}))
    return folder


def test_whatif_is_a_served_deployment(iso_env):
    from pipelines.config.settings import load_settings
    from pipelines.flows.deployments import build_deployments

    deps = build_deployments(load_settings(), with_schedules=False)
    assert [d.name for d in deps] == ["nightly-retrain", "replan", "benchmark", "whatif"]
    wi = deps[-1]
    assert wi.schedules == [] or wi.schedules is None
    assert {"run_folder", "add_gpus", "drain_nodes", "fail_gpus", "add_jobs", "cancel", "priority",
            "demand_scale"} <= set(wi._parameter_openapi_schema.properties)


def test_flow_run_publishes_both_artifacts(srv_env, prefect_server, tmp_path, prefect_api):
    folder = _run_folder(tmp_path)
    env = {k: v for k, v in srv_env.items() if k != "PREFECT_LOGGING_LEVEL"}  # gpuplan's INFO default, as a served run
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(folder)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["changes"] == ["+8 GPUs", "priority B = 2"] and "A" in out["jobs"]

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def read():
        async with get_client() as c:
            return await c.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(
                any_=["whatif", "whatif-jobs"])))

    with temporary_settings({PREFECT_API_URL: prefect_server["url"]}):
        arts = asyncio.run(read())
    by_key = {a.key: a for a in arts}
    assert set(by_key) == {"whatif", "whatif-jobs"}
    md = by_key["whatif"]
    assert md.type == "markdown" and md.flow_run_id is not None
    assert "# What-if on run `20250316T1600Z_flow`" in md.data and "+8 GPUs" in md.data
    assert "| A | 03-16 17:30Z | 03-16 16:00Z | -1.5 | starts earlier: runs on added GPUs: added-00,added-01 GPUs [8, 16) |" in md.data
    table = by_key["whatif-jobs"]
    assert table.type == "table" and table.flow_run_id == md.flow_run_id
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    a = next(r for r in rows if r["job_id"] == "A")
    assert (a["start_ts_base"], a["start_ts_whatif"], a["delta_h"]) == ("2025-03-16T17:30:00Z",
                                                                        "2025-03-16T16:00:00Z", -1.5)
    # issue 33: the run page records the base run, the changes, the solve and the outcome
    logs = prefect_api("/logs/filter", {"logs": {"flow_run_id": {"any_": [str(md.flow_run_id)]}}, "limit": 200})
    msgs = [r["message"] for r in logs if r["level"] == 20 and r["message"].startswith("what-if ")]
    assert [m.split(":")[0] for m in msgs] == ["what-if base", "what-if changes", "what-if solve", "what-if outcome"]
    assert msgs[0].startswith(f"what-if base: run 20250316T1600Z_flow ({folder.resolve()}), plan start 2025-03-16")
    assert msgs[1] == "what-if changes: +8 GPUs, priority B = 2"
    assert msgs[2].startswith("what-if solve: status optimal (verified), objective ")
    assert msgs[3].startswith("what-if outcome: planned value ") and " job(s) moved" in msgs[3]
