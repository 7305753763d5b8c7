"""``gpuplan plan`` with opt-in preemption (issue 30): bad preemption fields exit 2 in one line naming job and fields."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pipelines.cli.app import app


def _doc(running_extra=None):
    return {
        "cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 4},
        "services": [{"service": "chat", "demand_gpus": [2, 2, 2, 2], "max_gpus": 8, "swap_cap_gpus": 4,
                      "current_gpus": 2}],
        "jobs": [],
        "running": [{"job_id": "R", "kind": "training", "priority": 2, "gpus": 4, "block_offset": 0,
                     "remaining_steps": 2, **(running_extra or {})}],
    }


def _plan(tmp_path: Path, doc, *extra):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    return CliRunner().invoke(app, ["plan", "--problem", str(f), *extra])


def test_steps_since_checkpoint_past_the_interval_exits_2_in_one_line(tmp_path):
    res = _plan(tmp_path, _doc({"preemptible": True, "checkpoint_interval_steps": 2, "steps_since_checkpoint": 5}))
    assert res.exit_code == 2, res.output
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert lines == ["error: running job 'R': steps_since_checkpoint = 5 must be below checkpoint_interval_steps + "
                     "restart_steps = 2 + 0 (a checkpoint is written after every 2 steps of work)"]


def _surge(demand0=4, preemptible=True):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "optimizer"))
    from test_preemption_production import surge_doc

    d = surge_doc(demand0)
    if not preemptible:
        for r in d["running"]:
            r.pop("preemptible", None)
    return d


STOP_LINE = ("stops P2 (preemptible, 2 GPUs): real-time short of 2 GPUs at step 0; loses 2 steps "
             "(1 since the last checkpoint or start + 1 restart) on 2 GPUs: 2 GPU-h lost")


def test_surge_text_names_the_stop_and_the_preemptible_count(tmp_path):
    res = _plan(tmp_path, _surge(), "--planner", "milp")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert "running jobs: 3, 2 preemptible (only these may be stopped, when real time is short at step 0)" in lines
    assert [x for x in lines if x.startswith("stops ")] == [STOP_LINE]
    assert "  P2 (running): stopped at step 0, requeued with its remaining work" in lines


def test_surge_json_stops_list(tmp_path):
    res = _plan(tmp_path, _surge(), "--planner", "priority", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["verified"] is True and doc["violations"] == [] and doc["preemptible_running"] == 2
    assert doc["stops"] == [{"job_id": "P2", "gpus": 2, "steps_since_checkpoint": 1, "restart_steps": 1,
                             "lost_steps": 2, "shortfall_gpus": 2, "lost_gpu_h": 2.0}]


def test_no_surge_no_stop_and_the_plan_as_before(tmp_path):
    from optimizer.planners import plan
    from optimizer.problem import Problem

    for doc, extra in ((_surge(demand0=2), {"preemptible_running": 2}), (_surge(preemptible=False), {})):
        res = _plan(tmp_path, doc, "--planner", "fast", "--json")
        assert res.exit_code == 0, res.output
        got = json.loads(res.stdout)
        assert "stops" not in got
        before = json.loads(json.dumps({**plan(Problem.from_dict(doc), "fast").to_dict(), **extra, "verified": True}))
        got["solve_s"] = before["solve_s"] = 0.0
        assert got == before
        text = _plan(tmp_path, doc, "--planner", "fast").stdout
        assert "stops " not in text and ("preemptible" in text) == bool(extra)
