"""C26: four concurrent replan flow runs on a fresh MLflow SQLite store; one hangs and is timed out."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.config.settings import load_settings
from pipelines.tracking import runs as tracking_runs
from pipelines.tracking import store as tracking_store

DRIVER = Path(__file__).with_name("_replan_driver.py")


def _flow_run_states(url: str, ids: list[str]) -> dict[str, str]:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def go():
        async with get_client() as c:
            return {i: (await c.read_flow_run(i)).state.type.value for i in ids}

    with temporary_settings({PREFECT_API_URL: url}):
        return asyncio.run(go())


def _plan_flow_runs(url: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def go():
        async with get_client() as c:
            return await c.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["plan"])))

    with temporary_settings({PREFECT_API_URL: url}):
        return asyncio.run(go())


@pytest.mark.heavy
def test_four_concurrent_replans_one_hangs(prefect_server, srv_env, make_problem, tmp_path):
    # the hung run's solve task is stopped by its 15-s timeout (what is tested); the three real solves get 600 s, a
    # safety stop: with 15 s each, four solves at once at load 10+ could be timed out too (a race with real time)
    env = {**srv_env, "GPUPLAN_SOLVE_TIMEOUT_S": "600"}
    settings = load_settings()
    assert settings.tracking_uri == f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    assert not (tmp_path / "mlruns" / "mlflow.db").exists()  # brand-new store
    tracking_store.init_store(settings)  # once, before the fan-out
    before = {r.id for r in _plan_flow_runs(prefect_server["url"])}
    procs = []
    for i, horizon in enumerate((8, 10, 12, 16)):
        prob = make_problem(horizon)
        args = [sys.executable, str(DRIVER), str(prob), str(tmp_path / "replan"), f"2025-09-01T0{i}:00:00+00:00"]
        if i == 2:
            args.append("--hang")
        run_env = {**env, "GPUPLAN_SOLVE_TIMEOUT_S": "15"} if i == 2 else env
        procs.append(subprocess.Popen(args, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            outs.append((p.returncode, json.loads(out.strip().splitlines()[-1]), err))
    finally:
        for p in procs:  # never leave a driver behind (by PID)
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    for i, (rc, doc, err) in enumerate(outs):
        if i == 2:
            assert rc == 3 and not doc["ok"], doc
            assert "TimeoutError" in doc["error"] or "timed out" in doc["error"].lower(), doc["error"]
        else:
            assert rc == 0 and doc["ok"], (doc, err[-2000:])
            assert "database is locked" not in err and "OperationalError" not in err
    runs = tracking_runs.finished_runs(settings, "plans")
    assert len(runs) == 3
    for r in runs:
        for m in ("objective", "solve_s", "planned_utilization_pct", "planned_value", "planned_rt_sla_pct", "proven_optimal"):
            assert m in r.data.metrics, (m, r.data.metrics)
        assert r.data.params["planner"] == "milp" and r.data.params["status"] in ("optimal", "time_limit")
    assert sorted(r.data.metrics["jobs_total"] for r in runs) == [2.0, 2.0, 2.0]
    new = [r for r in _plan_flow_runs(prefect_server["url"]) if r.id not in before]
    states = sorted(r.state.type.value for r in new)
    assert states == ["COMPLETED", "COMPLETED", "COMPLETED", "FAILED"], states
    failed = next(r for r in new if r.state.type.value == "FAILED")
    assert "timed out" in (failed.state.message or "").lower() or "timeout" in (failed.state.message or "").lower()
    # published folders: the three finished slots; the hung run left no half-written folder
    published = sorted(p.name.split("_")[0] for p in (tmp_path / "replan").iterdir() if not p.name.startswith("."))
    assert published == ["20250901T0000Z", "20250901T0100Z", "20250901T0300Z", "latest"]
