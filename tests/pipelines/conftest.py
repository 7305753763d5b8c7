"""Fixtures for pipeline tests: isolated settings, small problem files, one real Prefect server.

The Prefect server (``prefect server start --host 127.0.0.1 --port <free>``, PREFECT_HOME in a
temporary folder) is started once per session, used by the few flow-level tests, and stopped by
its PID (docs/STACK.md: one pre-started server is far cheaper than ``prefect_test_harness``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def small_problem(horizon_steps: int = 8, n_gpus: int = 8) -> dict:
    """A small valid problem (DESIGN §3.1 valley case stretched to ``horizon_steps``)."""
    demand = [6 if (t < 2 or t >= horizon_steps - 2) else 2 for t in range(horizon_steps)]
    return {
        "cluster": {"n_gpus": n_gpus, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": horizon_steps},
        "settings": {"time_limit_s": 20, "threads": 1},
        "services": [{"service": "chat", "demand_gpus": demand, "min_gpus": 0, "max_gpus": n_gpus,
                      "swap_cap_gpus": 4, "current_gpus": 6}],
        "jobs": [{"job_id": "A", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4,
                  "duration_steps": 4},
                 {"job_id": "B", "kind": "quantization", "priority": 2, "release_step": 1, "gpus": 2,
                  "duration_steps": 2}],
        "running": [],
    }


def write_problem(path: Path, horizon_steps: int = 8) -> Path:
    path.write_text(json.dumps(small_problem(horizon_steps)))
    return path


@pytest.fixture()
def iso_env(tmp_path, monkeypatch):
    """Environment pointing every gpuplan path and the MLflow store into ``tmp_path``."""
    env = {
        "GPUPLAN_TRACKING_URI": f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}",
        "GPUPLAN_RUNS_DIR": str(tmp_path / "runs"),
        "GPUPLAN_MODELS_DIR": str(tmp_path / "models"),
        "DO_NOT_TRACK": "1",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    # a CLI call with --workspace sets $GPUPLAN_WORKSPACE for the process (pipelines.cli.support.use_workspace):
    # recorded here so it is removed after the test, not left to send later tests to this test's workspace
    # (setenv records the state before, even when unset; delenv alone records nothing for an unset variable)
    monkeypatch.setenv("GPUPLAN_WORKSPACE", "")
    monkeypatch.delenv("GPUPLAN_WORKSPACE")
    return env


def stop_process_group(proc: subprocess.Popen, sig: int) -> None:
    """Stop a process we started with ``start_new_session=True``: ``sig`` to its group (by its
    PID), SIGKILL after 30 s."""
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture()
def stop_group():
    """:func:`stop_process_group` for tests (conftest is not importable under importlib mode)."""
    return stop_process_group


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """A real Prefect server on 127.0.0.1:<free port>; yields ``{"url", "home", "pid"}``; stopped by PID."""
    home = tmp_path_factory.mktemp("prefect_home")
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1", "PREFECT_API_URL": url, "PREFECT_LOGGING_LEVEL": "WARNING"}
    # the test process's own choice of a temporary-server database (pipelines.config.settings) is not the server's
    for var in ("PREFECT_SERVER_DATABASE_CONNECTION_URL", "GPUPLAN_PREFECT_DB_DEFAULTED"):
        env.pop(var, None)
    log = open(home / "server.log", "w")
    proc = subprocess.Popen([str(VENV_BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port",
                             str(port), "--no-ui"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not _healthy(url):
            if proc.poll() is not None:
                raise RuntimeError(f"prefect server exited {proc.returncode}: {(home / 'server.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("prefect server not healthy after 180 s")
            time.sleep(0.5)
        yield {"url": url, "home": str(home), "pid": proc.pid}
    finally:
        stop_process_group(proc, signal.SIGTERM)
        log.close()


def server_env(prefect_server: dict, iso: dict) -> dict:
    """Environment for a subprocess that talks to the session's Prefect server."""
    return {**os.environ, **iso, "PREFECT_API_URL": prefect_server["url"], "PREFECT_HOME": prefect_server["home"],
            "PREFECT_LOGGING_LEVEL": "WARNING"}


@pytest.fixture()
def make_problem(tmp_path):
    """Factory: ``make_problem(horizon_steps) -> Path`` of a small problem file in ``tmp_path``."""
    return lambda horizon_steps=8: write_problem(tmp_path / f"problem_{horizon_steps}.json", horizon_steps)


@pytest.fixture()
def srv_env(prefect_server, iso_env):
    """Subprocess environment bound to the session Prefect server and the isolated gpuplan paths."""
    return server_env(prefect_server, iso_env)


SLURM_FIXTURE_WORKSPACE = ROOT / "data" / "fixtures" / "workspaces" / "openb-slurm"


@pytest.fixture()
def copy_slurm_fixture():
    """Copy the openb Slurm fixture workspace into a folder, its relative paths made absolute (its store there).

    Returns a function ``(folder: Path) -> Path`` that writes ``folder/gpuplan.toml`` and returns ``folder``.
    """
    def copy(folder: Path) -> Path:
        text = (SLURM_FIXTURE_WORKSPACE / "gpuplan.toml").read_text()
        text = text.replace('"../../../traffic/', f'"{ROOT / "data" / "traffic"}/').replace(
            '"../../', f'"{ROOT / "data" / "fixtures"}/')
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "gpuplan.toml").write_text(text)
        return folder
    return copy


def api_post(url: str, path: str, body: dict) -> object:
    """POST ``body`` (JSON) to ``<url><path>`` of a Prefect server's REST API; the decoded JSON answer."""
    req = urllib.request.Request(url.rstrip("/") + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture()
def prefect_api(prefect_server):
    """``post(path, body)`` against the session server's REST API (``/logs/filter``, ``/artifacts/filter``, ...)."""
    return lambda path, body: api_post(prefect_server["url"], path, body)
