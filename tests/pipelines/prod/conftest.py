"""A real PostgreSQL server for the production-store tests, started by ``scripts/postgres-lab.sh`` (stopped by PID).

Without PostgreSQL's binaries the tests skip, except under ``$CI`` where they fail (``.ci/run`` installs the
``postgresql`` package). The port: ``$GPUPLAN_PG_PORT``, else a free one. Each test gets its own databases
(:func:`fresh_database`), so tests never see each other's registry or flow runs.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "postgres-lab.sh"


def _have_binaries() -> bool:
    return bool(glob.glob("/usr/lib/postgresql/*/bin/initdb")) or shutil.which("initdb") is not None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """``{"port", "dir", "pid", "psql"}`` of a running lab server; stopped (by its postmaster PID) at the end."""
    if not _have_binaries():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL binaries (initdb) missing under $CI: .ci/run installs the postgresql package")
        pytest.skip("PostgreSQL binaries (initdb) not installed")
    port = int(os.environ.get("GPUPLAN_PG_PORT") or _free_port())
    # not under pytest's tmp folder: /tmp/pytest-of-root is 0700, and the cluster's owner (an unprivileged user)
    # must reach its folder
    base = Path(tempfile.mkdtemp(prefix="gpuplan-pg-"))
    os.chmod(base, 0o755)
    folder = base / "cluster"
    env = {**os.environ, "GPUPLAN_PG_PORT": str(port), "GPUPLAN_PG_DIR": str(folder)}
    r = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    values = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    psql = sorted(glob.glob("/usr/lib/postgresql/*/bin/psql")) or [shutil.which("psql")]
    try:
        yield {"port": port, "dir": folder, "pid": int(values["GPUPLAN_PG_PID"]), "psql": psql[-1], "env": env}
    finally:
        s = subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, text=True, timeout=120)
        assert s.returncode == 0, s.stdout + s.stderr
        shutil.rmtree(base, ignore_errors=True)


def fresh_database(pg: dict, prefix: str) -> str:
    """Create a new database owned by the ``gpuplan`` role; returns its name."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    subprocess.run([pg["psql"], "-q", "-h", "127.0.0.1", "-p", str(pg["port"]), "-U", "postgres", "-d", "postgres",
                    "-v", "ON_ERROR_STOP=1", "-c", f"create database {name} owner gpuplan"], check=True,
                   capture_output=True, timeout=60)
    return name


@pytest.fixture(scope="session")
def pg_mlflow_store(postgres, tmp_path_factory):
    """One MLflow database and shared artifact folder for the session (MLflow's schema migration on a new
    PostgreSQL database costs ~25 s; tests keep apart by model names and experiments)."""
    return {"db": fresh_database(postgres, "mlflow"), "artifacts": tmp_path_factory.mktemp("shared") / "mlflow-artifacts"}


@pytest.fixture()
def pg_mlflow(postgres, pg_mlflow_store, tmp_path, monkeypatch):
    """Environment of one test on the session's MLflow database, artifacts in its shared folder."""
    env = {"GPUPLAN_TRACKING_URI": f"postgresql://gpuplan@127.0.0.1:{postgres['port']}/{pg_mlflow_store['db']}",
           "GPUPLAN_ARTIFACT_ROOT": str(pg_mlflow_store["artifacts"]),
           "GPUPLAN_RUNS_DIR": str(tmp_path / "runs"), "GPUPLAN_MODELS_DIR": str(tmp_path / "models"),
           "DO_NOT_TRACK": "1", "MLFLOW_DISABLE_TELEMETRY": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return env


@pytest.fixture()
def pg_database(postgres):
    """Factory: ``pg_database(prefix) -> name`` of a new database (:func:`fresh_database`)."""
    return lambda prefix: fresh_database(postgres, prefix)
