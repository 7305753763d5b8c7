"""Prefect's server on PostgreSQL serving the replan to two ``gpuplan serve`` workers (issue 32).

One ``prefect server start`` with ``PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://...`` (its own
database on the lab server), MLflow on PostgreSQL too, two ``gpuplan serve`` processes (two containers) on one
runs folder. Two deployment runs of ``plan/replan`` for the same slot: both complete, exactly one run folder is
published for the slot, ``latest`` points at it, one MLflow plan run, and the other run logs
``replan of slot S skipped: ...`` (mechanism: the runs folder's slot claim,
:func:`pipelines.io.run_folder.claim_slot`). Waits are on events read from the server (healthy, deployment
registered, flow run final), with a deadline as a safety stop only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _post(url: str, body: dict) -> object:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _until(what: str, probe, deadline_s: float, procs: list[subprocess.Popen], logs: list[Path]):
    """Poll ``probe()`` (an event read from the server) until it returns a value; a safety deadline only."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for p, log in zip(procs, logs):
            if p.poll() is not None:
                raise AssertionError(f"{what}: a process exited {p.returncode}: {log.read_text()[-3000:]}")
        try:
            got = probe()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what}: not seen within {deadline_s} s: " + " | ".join(
        log.read_text()[-1500:] for log in logs))


@pytest.fixture()
def prefect_on_postgres(postgres, pg_database, tmp_path, stop_group):
    """A ``prefect server start`` on its own PostgreSQL database; yields ``{"url", "env"}``; stopped by its PID."""
    db = pg_database("prefect")
    port = int(os.environ.get("GPUPLAN_PREFECT_PORT") or _free_port())
    url = f"http://127.0.0.1:{port}/api"
    home = tmp_path / "prefect_home"
    home.mkdir()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
           "PREFECT_API_DATABASE_CONNECTION_URL": f"postgresql+asyncpg://gpuplan@127.0.0.1:{postgres['port']}/{db}",
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    for var in ("PREFECT_SERVER_DATABASE_CONNECTION_URL", "GPUPLAN_PREFECT_DB_DEFAULTED", "PREFECT_API_URL"):
        env.pop(var, None)
    log_path = tmp_path / "prefect-server.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([str(VENV_BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port),
                             "--no-ui"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _until("prefect server healthy", lambda: _get(url + "/health") is True, 180, [proc], [log_path])
        yield {"url": url, "home": str(home), "db": db}
    finally:
        stop_group(proc, signal.SIGTERM)
        log.close()


def test_two_serve_workers_on_prefect_over_postgres_plan_a_slot_once(prefect_on_postgres, pg_mlflow, make_problem,
                                                                     stop_group, tmp_path):
    url = prefect_on_postgres["url"]
    env = {**os.environ, **pg_mlflow, "PREFECT_API_URL": url, "GPUPLAN_SERVE_SCHEDULES": "0",
           "PREFECT_HOME": prefect_on_postgres["home"]}
    for var in ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL",
                "GPUPLAN_PREFECT_DB_DEFAULTED", "MLFLOW_TRACKING_URI"):
        env.pop(var, None)
    procs, logs, files = [], [], []
    t0 = time.monotonic()
    try:
        for i in (1, 2):
            path = tmp_path / f"serve-{i}.log"
            f = open(path, "w")
            files.append(f)
            logs.append(path)
            procs.append(subprocess.Popen([str(VENV_BIN / "gpuplan"), "serve"], cwd=tmp_path, env=env, stdout=f,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        dep = _until("deployment plan/replan registered",
                     lambda: _post(url + "/deployments/filter", {"deployments": {"name": {"any_": ["replan"]}}}),
                     240, procs, logs)
        assert len(dep) == 1  # both workers serve the one deployment
        for path in logs:  # both workers are serving (their start line), before any run is created
            _until(f"{path.name} serving", lambda p=path: "serving nightly-retrain" in p.read_text(), 240, procs, logs)
        out_dir = tmp_path / "shared-runs"
        problem = make_problem(8)
        params = {"problem_path": str(problem), "out_dir": str(out_dir), "scheduled_at": "2025-09-01T10:00:00+00:00"}
        runs = [_post(url + f"/deployments/{dep[0]['id']}/create_flow_run", {"parameters": params})["id"]
                for _ in range(2)]

        def finals():
            states = [_get(url + f"/flow_runs/{r}")["state"] for r in runs]
            return states if all(s and s["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") for s in states) \
                else None

        states = _until("both flow runs final", finals, 300, procs, logs)
        assert [s["type"] for s in states] == ["COMPLETED", "COMPLETED"], [s["message"] for s in states]
        wall_s = time.monotonic() - t0
    finally:
        for p in procs:
            stop_group(p, signal.SIGINT)
        for f in files:
            f.close()
    published = sorted(p.name for p in out_dir.iterdir() if re.match(r"^\d{8}T\d{4}Z_", p.name))
    assert len(published) == 1 and published[0].startswith("20250901T1000Z_")
    assert (out_dir / "latest").resolve().name == published[0]
    msgs = [r["message"] for r in _post(url + "/logs/filter", {"logs": {"flow_run_id": {"any_": runs}}, "limit": 200})]
    skipped = [m for m in msgs if m.startswith("replan of slot 20250901T1000Z skipped: ")]
    assert len(skipped) == 1 and (skipped[0].endswith("running in another process") or
                                  skipped[0].endswith(f"already published as {published[0]}")), skipped
    assert sum(m.startswith("published run folder ") for m in msgs) == 1
    from pipelines.config.settings import load_settings
    from pipelines.tracking import runs as tracking_runs

    plans = [r for r in tracking_runs.finished_runs(load_settings(), "plans")
             if r.data.params.get("run_dir", "").startswith(str(out_dir))]
    assert len(plans) == 1  # one MLflow plan run of this folder, on PostgreSQL
    print(f"two workers + two runs on Prefect/PostgreSQL: {wall_s:.1f} s")
