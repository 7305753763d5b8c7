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
