"""``gpuplan run``'s temporary Prefect server (issue 29): started before prefect is imported, used by the flow run.

The mechanism, not a timing: in a fresh process with no ``PREFECT_API_URL``, :func:`start_if_wanted` launches the
server and sets ``PREFECT_API_URL`` while prefect is still not imported; the flow run then goes to that server
(its INFO line and its artifact are in the server's database), Prefect never launches a temporary server of its
own (``prefect.server.api.server`` stays unimported in the client), and the server process ends with the client.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

DRIVER = r"""
import json, os, sys
from pipelines.flows import early_server
server = early_server.start_if_wanted()
doc = {"pid": server.process.pid, "url": os.environ["PREFECT_API_URL"],
       "prefect_before": sorted(m for m in sys.modules if m.split(".")[0] == "prefect")}
server.wait_ready()
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

@flow(name="early-server-probe")
def probe():
    get_run_logger().info("probe line 17")
    create_markdown_artifact("# probe", key="probe-artifact")
    return 6 * 7

state = probe(return_state=True)
doc["result"] = state.result()
doc["flow_run_id"] = str(state.state_details.flow_run_id)
doc["prefect_server_imported"] = "prefect.server.api.server" in sys.modules
print(json.dumps(doc))
"""


@pytest.mark.heavy
def test_gpuplan_run_server_starts_before_prefect_import_and_gets_the_flow_run(iso_env, tmp_path):
    env = {**os.environ, **iso_env, "PREFECT_HOME": str(tmp_path / "prefect-home")}
    for var in ("PREFECT_API_URL", "PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL",
                "GPUPLAN_PREFECT_DB_DEFAULTED", "GPUPLAN_EARLY_SERVER"):
        env.pop(var, None)  # as an operator's shell: no server configured
    res = subprocess.run([sys.executable, "-c", DRIVER], env=env, capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout.strip().splitlines()[-1])
    assert doc["prefect_before"] == []  # the server was launched before prefect was imported
    assert doc["url"].startswith("http://127.0.0.1:") and doc["url"].endswith("/api")
    assert doc["result"] == 42
    assert doc["prefect_server_imported"] is False  # Prefect did not start a temporary server of its own
    # at exit Prefect's log and event workers drained first (threading's exit hooks), then the server was stopped
    # by its id (atexit): the process is gone and the run's INFO line and artifact are in the server's database,
    # gpuplan's ephemeral file in PREFECT_HOME (pipelines.config.settings._ephemeral_database)
    assert not os.path.exists(f"/proc/{doc['pid']}")
    db = tmp_path / "prefect-home" / "gpuplan-ephemeral.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        fid = doc["flow_run_id"]
        assert con.execute("select count(*) from flow_run where id = ?", (fid,)).fetchone() == (1,)
        msgs = [m for (m,) in con.execute("select message from log where flow_run_id = ? and level = 20", (fid,))]
        keys = [k for (k,) in con.execute("select key from artifact where flow_run_id = ?", (fid,))]
    finally:
        con.close()
    assert "probe line 17" in msgs
    assert keys == ["probe-artifact"]


def test_no_early_server_when_a_server_is_configured(monkeypatch):
    from pipelines.flows import early_server

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:17150/api")
    assert early_server.start_if_wanted() is None
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.setenv("GPUPLAN_EARLY_SERVER", "0")
    assert early_server.wanted() is False
    monkeypatch.delenv("GPUPLAN_EARLY_SERVER")
    monkeypatch.setenv("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", "false")
    assert early_server.wanted() is False
