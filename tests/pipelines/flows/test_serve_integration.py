"""Integration (CI): a real Prefect server, `gpuplan serve`, a deployment triggered with
`prefect deployment run`, seen to complete; and case C28 on that served run (explicit MLflow store,
no ~/mlflow.db, no ./mlruns, no file-store deprecation)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from pipelines.config.settings import load_settings
from pipelines.tracking import runs as tracking_runs

VENV_BIN = Path(sys.executable).parent


def _client_call(url: str, fn):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def go():
        async with get_client() as c:
            return await fn(c)

    with temporary_settings({PREFECT_API_URL: url}):
        return asyncio.run(go())


def _wait_deployment(url: str, name: str, proc: subprocess.Popen, timeout_s: float = 180):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"gpuplan serve exited with {proc.returncode}")
        try:
            return _client_call(url, lambda c: c.read_deployment_by_name(name))
        except Exception:  # noqa: BLE001 - not registered yet
            time.sleep(1)
    raise AssertionError(f"deployment {name} not registered after {timeout_s} s")


@pytest.mark.heavy
def test_serve_trigger_complete_and_c28(prefect_server, srv_env, make_problem, stop_group, tmp_path, prefect_api):
    work, home = tmp_path / "cwd", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    tmp = tmp_path / "tmp"  # Prefect's Runner makes <tempdir>/runner_storage/<uuid> and leaves it
    tmp.mkdir()
    env = {**srv_env, "GPUPLAN_SERVE_SCHEDULES": "0", "HOME": str(home), "TMPDIR": str(tmp)}
    env.pop("MLFLOW_TRACKING_URI", None)
    for var in ("PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"):
        env.pop(var, None)  # gpuplan's own logging defaults, as an operator's `gpuplan serve` has them
    log = open(tmp_path / "serve.log", "w")
    serve = subprocess.Popen([str(VENV_BIN / "gpuplan"), "serve"], cwd=work, env=env, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    try:
        names = ["plan/replan", "train_forecasters/nightly-retrain", "benchmark/benchmark"]
        deps = [_wait_deployment(prefect_server["url"], n, serve) for n in names]
        assert [d.name for d in deps] == ["replan", "nightly-retrain", "benchmark"]
        problem = make_problem(8)
        out_dir = tmp_path / "replan_runs"
        trig = subprocess.run(
            [str(VENV_BIN / "prefect"), "deployment", "run", "plan/replan", "--param", f"problem_path={problem}",
             "--param", f"out_dir={out_dir}"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        assert trig.returncode == 0, trig.stdout + trig.stderr
        run_id = re.search(r"UUID:\s*([0-9a-f-]{36})", trig.stdout).group(1)
        deadline = time.monotonic() + 240
        state = None
        while time.monotonic() < deadline:
            fr = _client_call(prefect_server["url"], lambda c: c.read_flow_run(run_id))
            state = fr.state
            if state is not None and state.is_final():
                break
            time.sleep(2)
        assert state is not None and state.is_completed(), (state, (tmp_path / "serve.log").read_text()[-3000:])
        # a flow run's logs reach the server in batches after its final state: wait for its last line (an event),
        # before the worker is stopped; the deadline is a safety stop only
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
                r["message"].startswith("MLflow run ") for r in
                prefect_api("/logs/filter", {"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200})):
            assert serve.poll() is None, "gpuplan serve exited"
            time.sleep(0.5)
    finally:
        stop_group(serve, signal.SIGINT)  # the serve process group we started, by its PID
        log.close()
    latest = out_dir / "latest"
    assert latest.is_symlink() and (latest / "plan.parquet").is_file() and (latest / "risk_report.md").is_file()
    # C28: logged to the configured SQLite store, nothing stray, no file-store deprecation
    settings = load_settings()
    runs = tracking_runs.finished_runs(settings, "plans")
    assert len(runs) == 1 and runs[0].data.params["status"] in ("optimal", "time_limit")
    assert sorted(p.name for p in work.iterdir()) == []
    assert not (home / "mlflow.db").exists() and not (home / "mlruns").exists()
    text = (tmp_path / "serve.log").read_text().lower()
    assert "filesystem tracking backend" not in text and "maintenance mode" not in text
    assert "file store" not in text
    # issue 14: the run page shows what the run did, read back through the Prefect REST API
    run_dir = latest.resolve()
    logs = prefect_api("/logs/filter", {"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200})
    msgs = [r["message"] for r in logs if r["level"] == 20]
    assert f"published run folder {run_dir} (status {runs[0].data.params['status']}, verified); latest moved to it" in msgs
    assert any(m.startswith(f"inputs: problem file {problem} (2 jobs, 0 running, 1 services)") for m in msgs)
    assert any(m.startswith("headline: planned utilisation ") and "jobs started / waiting / at risk 2 / 0 / 0" in m
               for m in msgs)
    assert any(m.startswith("solve (milp): status ") for m in msgs) and any(m.startswith("verified: 2 ") for m in msgs)
    assert f"MLflow run {runs[0].info.run_id} in experiment gpuplan-plans ({settings.tracking_uri})" in msgs
    assert any(r["task_run_id"] for r in logs if r["level"] == 20)  # task runs log too, not only the flow
    arts = prefect_api("/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run_id]}}})
    by_key = {a["key"]: a for a in arts}
    assert sorted(by_key) == ["estimated-starts-demo", "plan-summary-demo"]
    assert by_key["plan-summary-demo"]["type"] == "markdown" and by_key["estimated-starts-demo"]["type"] == "table"
    md = by_key["plan-summary-demo"]["data"]
    assert md.startswith(f"# Plan {run_dir.name}\n") and f"- run folder: [{run_dir}]({run_dir.as_uri()})" in md
    assert f"- MLflow run: `{runs[0].info.run_id}` (experiment `gpuplan-plans`" in md and "## Jobs at risk (0)" in md
    table = json.loads(by_key["estimated-starts-demo"]["data"])
    eta = pd.read_parquet(run_dir / "risk_report.parquet").query("section == 'queue_eta'")
    assert [r["job_id"] for r in table] == ["B", "A"]  # the small problem: B at its release (step 1), A when 4 GPUs free up (step 2)
    assert [(r["gpus"], r["priority"]) for r in table] == [(2, 2.0), (4, 1.0)]
    assert {r["job_id"]: r["start_utc"] for r in table} == {
        j: f"{t:%Y-%m-%d %H:%M}Z" for j, t in zip(eta["job_id"], eta["start_ts"])}
