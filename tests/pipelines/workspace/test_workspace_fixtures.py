"""End to end on the real-format fixtures (data/fixtures): ingest a Slurm and a Kueue workspace, plan the cluster.

The fixtures are the Alibaba openb pods replayed on a 64-GPU slice (data/fixtures/README.md): 217
sacct jobs (209 finished before the export time T, 7 running and 1 pending at T), the same jobs as
squeue JSON (8) and as a Kueue workload list (205: Kueue deletes a workload cancelled before
admission), and ServeGen traffic as a Prometheus query_range body (2 series x 2,016 samples).
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from optimizer.problem import Cluster
from pipelines.stages import outputs, realtime
from pipelines.stages import traffic as traffic_stage
from pipelines.stages.commands import commands_table, commands_text
from pipelines.stages.problem import build_problem
from pipelines.stages.queue import store as store_queue
from pipelines.stages.solve import check_plan, solve
from pipelines.workspace.ingest import ingest, workspace_data
from pipelines.workspace.load import load_workspace

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "data" / "fixtures" / "workspaces"
T = pd.Timestamp("2025-03-16T16:00:00Z")


def _copy(name: str, tmp_path: Path):
    """The example workspace ``name`` with its relative paths made absolute, in ``tmp_path`` (its store there)."""
    text = (EXAMPLES / name / "gpuplan.toml").read_text()
    text = text.replace('"../../../traffic/', f'"{ROOT / "data" / "traffic"}/').replace(
        '"../../', f'"{ROOT / "data" / "fixtures"}/')
    (tmp_path / "gpuplan.toml").write_text(text)
    return load_workspace(tmp_path)


def test_slurm_workspace_ingest_counts_and_idempotence(tmp_path):
    ws = _copy("openb-slurm", tmp_path)
    rep = ingest(ws)["sources"]
    # sacct: 217 jobs (job steps not counted); the 8 pending/running ones are kept from squeue
    assert {r: (v["read"], v["added"], v["updated"], v["rejected"]) for r, v in rep.items()} == {
        "history": (217, 209, 0, 0), "queue": (8, 8, 0, 0), "traffic": (4032, 4032, 0, 0)}
    again = ingest(ws)["sources"]
    assert [again[r]["added"] + again[r]["updated"] for r in again] == [0, 0, 0]
    data = workspace_data(ws)
    assert data.from_store and len(data.history) == 217
    assert sorted(data.queue["state"].value_counts().items()) == [("pending", 1), ("running", 7)]
    finished = data.history[~data.history["state"].isin(("pending", "running"))]
    assert finished["state"].value_counts().to_dict() == {"failed": 158, "completed": 39, "cancelled": 12}


def test_kueue_workspace_ingest_counts(tmp_path):
    ws = _copy("openb-kueue", tmp_path)
    rep = ingest(ws)["sources"]
    # one file is both sources: each workload is one record, counted under the queue (ties go to it)
    assert {r: (v["read"], v["added"], v["rejected"]) for r, v in rep.items()} == {
        "history": (205, 0, 0), "queue": (205, 205, 0), "traffic": (4032, 4032, 0)}
    data = workspace_data(ws)
    assert sorted(data.queue["state"].value_counts().items()) == [("pending", 1), ("running", 7)]


@pytest.mark.parametrize("name", ["openb-slurm", "openb-kueue"])
def test_plan_of_the_fixture_cluster_is_verified_and_uses_its_nodes(tmp_path, name):
    ws = _copy(name, tmp_path)
    ingest(ws)
    data = workspace_data(ws)
    services = ws.services()
    traffic = realtime.ingest_traffic(services, traffic_stage.hourly_traffic(data.traffic, services, "rate_per_s"))
    start = T.to_pydatetime()
    fit = realtime.fit_realtime_forecasts(services, traffic.frame, start)
    # the profile plot of a service whose traffic runs past the plan's start (a live pull newer than the
    # queue export) starts at the forecast origin, not before it (was: "forecast start ... before the origin")
    prof = fit.profiles[services[0].service]
    early = realtime.profile_outlook(prof, pd.Timestamp(prof.origin).to_pydatetime() - timedelta(hours=5))
    assert early["ts"].iloc[0] == pd.Timestamp(prof.origin) and len(early) == realtime.PROFILE_PLOT_H
    c = ws.config.cluster
    demand = realtime.demand_frame(services, fit.profiles, traffic.frame, start, c.step_minutes, c.horizon_steps)
    jobs, notes = store_queue.forecast_cluster_queue(data.history, data.queue, ws, start, c.step_minutes)
    assert notes["dropped_no_gpus"] == 0 and len(jobs) == 8
    assert jobs.set_index("job_id")["state"].value_counts().to_dict() == {"running": 7, "queued": 1}
    problem = build_problem(Cluster(c.n_gpus, c.node_gpus, c.step_minutes, c.horizon_steps), services,
                            jobs, demand, start, time_limit_s=20.0)
    assert (problem.cluster.n_gpus, len(problem.running), len(problem.jobs)) == (64, 7, 1)
    plan = solve(problem, "milp")
    assert check_plan(problem, plan) in ("optimal", "feasible")
    tables = outputs.plan_tables(problem, plan, start, c.node_names)
    placed = tables[tables["row_type"] == "job"].set_index("job_id")["node"]
    # every running job sits on the node its scheduler reports (the fixture's 7 ran on openb-node-0026)
    reported = data.queue.set_index("job_id")["nodes"]
    running = [r.job_id for r in problem.running]
    if name == "openb-slurm":
        assert {j: placed[j] for j in running} == {j: reported[j] for j in running}
    assert set(tables.loc[tables["row_type"] == "gpu_step", "node"]) == set(c.node_names)
    # the commands file names the real job ids and nodes, and re-read it agrees with the verified plan
    table = commands_table(tables, jobs, start, c.step_minutes, 30, c.timezone)
    users = dict(zip(data.queue["job_id"].astype(str), data.queue["user"].fillna("")))
    text = commands_text(table, tables, users, "slurm" if name == "openb-slurm" else "kueue", "t", start, 30,
                         c.step_minutes, c.timezone)
    job_rows = tables[(tables["row_type"] == "job") & ~tables["running"].fillna(False).astype(bool)].set_index("job_id")
    if name == "openb-slurm":
        got = {m.group(1): m.group(2) for m in re.finditer(
            r"^scontrol update JobId=(\S+) ReqNodeList=(\S+) StartTime=now$", text, re.M)}
        assert got == {j: job_rows.loc[j, "node"] for j in job_rows.index if job_rows.loc[j, "start_step"] == 0}
        assert set(got) <= set(data.queue["job_id"]) and set(got.values()) <= set(c.node_names)
        assert got == {"700216": "openb-node-0022"}
    else:
        got = re.findall(r"^kubectl patch workloads.kueue.x-k8s.io -n (\S+) (\S+) .*active.:true", text, re.M)
        assert [f"{ns}/{n}" for ns, n in got] == [j for j in job_rows.index if job_rows.loc[j, "start_step"] == 0]


def test_the_queue_is_the_export_taken_last_not_the_newest_file(tmp_path):
    ws = _copy("openb-slurm", tmp_path)
    text = (ROOT / "data" / "fixtures" / "openb" / "squeue.json").read_text()
    exports = tmp_path / "q"
    exports.mkdir()
    # an older snapshot (last_update one hour earlier, no jobs), written to disk AFTER the real one
    (exports / "squeue-b.json").write_text(text)
    older = '{"jobs": [], "last_update": {"set": true, "infinite": false, "number": 1742137200}, "errors": []}'
    (exports / "squeue-a.json").write_text(older)
    cfg = (tmp_path / "gpuplan.toml").read_text().replace(str(ROOT / "data" / "fixtures" / "openb" / "squeue.json"),
                                                          str(exports / "squeue-*.json"))
    (tmp_path / "gpuplan.toml").write_text(cfg)
    ws = load_workspace(tmp_path)
    ingest(ws)
    data = workspace_data(ws)
    assert data.snapshot_file == "squeue-b.json" and data.snapshot_at == T
    assert len(data.queue) == 8


def test_an_unreadable_export_is_reported_exit_2_and_the_store_is_kept(tmp_path):
    import json
    import subprocess
    import sys

    ws = _copy("openb-slurm", tmp_path)
    ingest(ws)
    before = len(workspace_data(ws).history)
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobs": [], "errors": [{"description": "Unable to contact slurm controller", "error_number": 1}]}')
    cfg = (tmp_path / "gpuplan.toml").read_text().replace(str(ROOT / "data" / "fixtures" / "openb" / "squeue.json"),
                                                          str(bad))
    (tmp_path / "gpuplan.toml").write_text(cfg)
    res = subprocess.run([str(Path(sys.executable).parent / "gpuplan"), "ingest", "--workspace", str(tmp_path),
                          "--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    doc = json.loads(res.stdout)
    assert doc["sources"]["queue"]["unreadable_files"] == ["bad.json"]
    assert res.stderr.strip() == ("error: 1 export(s) could not be read (their records are not in the store; see "
                                  "errors): queue: bad.json")
    assert len(workspace_data(load_workspace(tmp_path)).history) == before
