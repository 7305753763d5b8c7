"""A flow run without PREFECT_API_URL (``gpuplan run``'s mode) beside a running Prefect server with the same home.

The temporary server of that run must use its own database (``<PREFECT_HOME>/gpuplan-ephemeral.db``), not the
``prefect.db`` of the running server; its run still logs at INFO and publishes its artifacts (there), and the
terminal shows none of those INFO lines.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

DRIVER = """
import json, sys
from pipelines.flows.plan import plan_flow
state = plan_flow(problem_path=sys.argv[1], out_dir=sys.argv[2], return_state=True)
print(json.dumps({"flow_run_id": str(state.state_details.flow_run_id), "ok": state.is_completed()}))
"""


@pytest.mark.heavy
def test_ephemeral_run_beside_a_server_uses_its_own_database_and_stays_quiet(prefect_server, iso_env, make_problem,
                                                                              tmp_path):
    home = Path(prefect_server["home"])  # the running server's PREFECT_HOME: its database is home/prefect.db
    env = {**os.environ, **iso_env, "PREFECT_HOME": str(home)}
    for var in ("PREFECT_API_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL", "GPUPLAN_PREFECT_DB_DEFAULTED",
                "PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"):
        env.pop(var, None)  # as an operator's shell: no server configured, gpuplan's own defaults
    out = tmp_path / "runs"
    res = subprocess.run([sys.executable, "-c", DRIVER, str(make_problem(8)), str(out)], env=env,
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout.strip().splitlines()[-1])
    assert doc["ok"] and len(res.stdout.strip().splitlines()) == 1
    # quiet terminal: no Prefect INFO line (they go to the API only)
    assert "INFO" not in res.stderr.replace("INFO mlflow.store.db.utils", ""), res.stderr[-2000:]
    assert "Beginning flow run" not in res.stderr and "headline" not in res.stderr
    # the running server never saw this flow run ...
    try:
        urllib.request.urlopen(f"{prefect_server['url']}/flow_runs/{doc['flow_run_id']}", timeout=10)
        raise AssertionError("the flow run is in the running server's database")
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
    # ... it is in the temporary server's own file, with its INFO lines and both artifacts
    db = home / "gpuplan-ephemeral.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        fid = doc["flow_run_id"]
        assert con.execute("select count(*) from flow_run where id = ?", (fid,)).fetchone() == (1,)
        msgs = [m for (m,) in con.execute("select message from log where flow_run_id = ? and level = 20", (fid,))]
        keys = sorted(k for (k,) in con.execute("select key from artifact where flow_run_id = ?", (fid,)))
    finally:
        con.close()
    run_dir = (out / "latest").resolve()
    assert f"published run folder {run_dir} (status optimal, verified); latest moved to it" in msgs
    assert keys == ["estimated-starts-demo", "plan-summary-demo"]
