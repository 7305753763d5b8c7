"""``gpuplan replay``: five days of exports -> ingest -> gated nightly retraining -> replan on the replayed openb week.

One replay (about a minute) on the session's Prefect server; then a stale replan; then the gate forced
both ways on the replay's store.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def replayed(tmp_path_factory, prefect_server):
    root = tmp_path_factory.mktemp("replay")
    iso = {"GPUPLAN_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}", "GPUPLAN_RUNS_DIR": str(root / "runs"),
           "DO_NOT_TRACK": "1", "MLFLOW_DISABLE_TELEMETRY": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env = {**os.environ, **iso, "PREFECT_API_URL": prefect_server["url"], "PREFECT_HOME": prefect_server["home"],
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("GPUPLAN_MODELS_DIR", None)
    ws = root / "ws"
    res = subprocess.run([str(VENV_BIN / "gpuplan"), "replay", "--workspace", str(ws), "--days", "5", "--json"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return {"doc": json.loads(res.stdout), "ws": ws, "env": env, "root": root}


def test_five_days_history_grows_plans_start_at_each_snapshot_and_verify(replayed):
    days = replayed["doc"]["days"]
    assert [d["day"] for d in days] == [0, 1, 2, 3, 4]
    ts = [pd.Timestamp(d["T"]) for d in days]
    assert ts[-1] == pd.Timestamp("2025-03-15T20:40:00Z")
    assert all(b - a == pd.Timedelta(days=1) for a, b in zip(ts, ts[1:]))
    rows = [d["history_rows"] for d in days]
    assert all(b > a for a, b in zip(rows, rows[1:])), rows  # each night sees more history
    # the horizon starts at that day's queue export, floored to the 30-minute step
    assert [pd.Timestamp(d["plan_start_ts"]) for d in days] == [t.floor("30min") for t in ts]
    assert all(d["verified"] and d["plan_status"] in ("optimal", "feasible") for d in days)
    # the champion moves only with a promotion; a kept version leaves the previous champion
    champion = None
    for d in days:
        champion = d["version"] if d["promoted"] else champion
        assert d["champion_version"] == champion, d
    assert days[0]["promoted"] and days[0]["reason"].startswith("first version")
    assert [int(d["version"]) for d in days] == [1, 2, 3, 4, 5]


def test_commands_of_a_replayed_day_name_real_jobs_and_nodes_and_match_the_plan(replayed):
    day0 = Path(replayed["doc"]["days"][0]["run_dir"])
    text = (day0 / "commands.sh").read_text()
    starts = dict(re.findall(r"^scontrol update JobId=(\S+) ReqNodeList=(\S+) StartTime=now$", text, re.M))
    plan = pd.read_parquet(day0 / "plan.parquet")
    jobs = plan[(plan["row_type"] == "job") & ~plan["running"].fillna(False).astype(bool)]
    assert starts == {j: n for j, n, s in zip(jobs["job_id"], jobs["node"], jobs["start_step"]) if s == 0}
    assert starts == {"800287": "openb-node-0022"}
    from pipelines.workspace.sources.slurm_squeue import parse_squeue_json

    exported = parse_squeue_json((replayed["ws"] / "exports" / "squeue-20250311T2040.json").read_text()).frame
    assert exported.set_index("job_id").loc["800287", "state"] == "pending"  # the export's real pending job
    nodes = set(json.loads((day0 / "summary.json").read_text())["cluster"]["nodes"])
    assert set(starts.values()) <= nodes


def test_stale_snapshot_fails_the_replan_and_keeps_the_previous_plan(replayed):
    latest = Path(replayed["env"]["GPUPLAN_RUNS_DIR"]) / "replan" / "latest"
    before = os.readlink(latest)
    code = ("from datetime import datetime, UTC; from pipelines.flows.plan import plan_flow; "
            f"plan_flow(scheduled_at=datetime(2025, 3, 15, 23, 40, tzinfo=UTC), workspace={str(replayed['ws'])!r})")
    res = subprocess.run([sys.executable, "-c", code], env=replayed["env"], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0
    assert "queue export squeue-20250315T2040.json is 3 h 0 min old (taken 2025-03-15T20:40:00Z" in res.stderr
    assert os.readlink(latest) == before


def test_gate_forced_both_ways_on_the_replayed_store(replayed, monkeypatch):
    from forecasters.scheduler import fit_scheduler_model
    from pipelines.config.settings import load_settings
    from pipelines.models import scheduler as scheduler_forecaster
    from pipelines.stages.retrain import split_at_cutoff
    from pipelines.workspace.load import load_workspace
    from pipelines.workspace.store import Store

    ws = load_workspace(replayed["ws"])
    settings = load_settings(workspace=ws.root, models_dir=replayed["root"] / "gate_models")
    cutoff = pd.Timestamp("2025-03-15T20:40:00Z").to_pydatetime()
    jobs = Store(ws.store_dir).jobs()
    # a champion trained on runtimes 20 times too long: the new version must replace it
    bad = fit_scheduler_model(jobs.assign(elapsed_s=jobs["elapsed_s"] * 20), timezone=ws.config.cluster.timezone)
    scheduler_forecaster.save_champion(settings, bad, {"version": "bad"})
    _, doc = scheduler_forecaster.nightly_fit(settings, ws, cutoff)
    assert doc["promoted"] and doc["champion_version_before"] == "bad" and "<= champion" in doc["reason"]
    # a champion fitted on the holdout itself (it has seen the answers): the new version must not replace it
    _, _, holdout = split_at_cutoff(jobs, cutoff, ws.config.retrain.holdout_days)
    good = fit_scheduler_model(holdout, timezone=ws.config.cluster.timezone)
    scheduler_forecaster.save_champion(settings, good, {"version": "oracle"})
    _, doc = scheduler_forecaster.nightly_fit(settings, ws, cutoff)
    assert not doc["promoted"] and "kept as challenger" in doc["reason"]


def test_each_nightly_version_carries_a_description_and_its_holdout_metrics(replayed):
    from mlflow import MlflowClient

    uri = replayed["env"]["GPUPLAN_TRACKING_URI"]
    c = MlflowClient(tracking_uri=uri, registry_uri=uri)
    days = replayed["doc"]["days"]
    versions = sorted(c.search_model_versions("name LIKE 'gpuplan-scheduler-ws-%'"), key=lambda v: int(v.version))
    assert [str(v.version) for v in versions] == [d["version"] for d in days] == ["1", "2", "3", "4", "5"]
    for v, d in zip(versions, days):
        assert pd.Timestamp(v.tags["cutoff"]) == pd.Timestamp(d["T"]) and v.tags["promoted"] == str(d["promoted"])
        assert v.description.startswith(f"Scheduler-history runtime forecaster of {replayed['ws']}")
        assert d["reason"] in v.description
        if "holdout.mae_h" in v.tags:  # a holdout with finished runs was scored
            assert float(v.tags["holdout.mae_h"]) >= 0 and "holdout.pinball_p90_h" in v.tags
    assert sum("holdout.mae_h" in v.tags for v in versions) >= 4
    from pipelines.workspace.load import read_or_create_workspace_id

    ws_id = read_or_create_workspace_id(Path(replayed["ws"]))
    exp = c.get_experiment_by_name(f"gpuplan-forecaster-scheduler-ws-{ws_id[:12]}")  # keyed by the workspace id
    names = sorted(r.info.run_name for r in c.search_runs([exp.experiment_id]))
    today = pd.Timestamp.now(tz="UTC").strftime("%Y-%m-%d")
    assert names == [f"scheduler ws cutoff={pd.Timestamp(d['T']):%Y-%m-%d %H:%M}Z {today}" for d in days]
