"""``gpuplan plan``: the JSON document, the plan parquet, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from pipelines.cli.app import app
from pipelines.io.plan_io import read_plan_summary

ROOT = Path(__file__).resolve().parents[3]
VALLEY = ROOT / "data" / "examples" / "valley.json"
KEYS = {"status", "objective", "bound", "gap", "solve_s", "model", "jobs", "services", "violations"}


def _run(*args):
    return CliRunner().invoke(app, ["plan", *map(str, args)])


def test_valley_json_document():
    """stdout holds exactly one JSON document (run as a real process: HiGHS's banner must not leak)."""
    exe = Path(sys.executable).with_name("gpuplan")
    proc = subprocess.run([str(exe), "plan", "--problem", str(VALLEY), "--planner", "milp", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert KEYS <= set(doc)
    assert doc["status"] == "optimal" and doc["violations"] == []
    assert doc["objective"] == pytest.approx(4 * sum(0.995**t for t in range(2, 6)), rel=1e-9)
    assert doc["gap"] == pytest.approx(0.0, abs=1e-6)
    assert set(doc["model"]) >= {"rows", "cols", "binaries"} and doc["model"]["binaries"] > 0
    (job,) = doc["jobs"]
    assert job["job_id"] == "A" and job["start_step"] == 2 and job["end_step"] == 6
    assert job["gpus"] == 4 and job["block_offset"] in (0, 4)
    assert doc["services"] == [{"service": "chat", "gpus": [6, 6, 2, 2, 2, 2, 6, 6]}]


def test_fifo_json_job_not_started_is_null():
    res = _run("--problem", VALLEY, "--planner", "fifo", "--json")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["status"] == "feasible" and doc["source"] == "fifo" and doc["bound"] is None and doc["gap"] is None
    assert doc["jobs"] == [{"job_id": "A", "start_step": None, "end_step": None, "block_offset": None, "gpus": None}]


def test_out_writes_plan_parquet_atomically(tmp_path):
    out = tmp_path / "plan.parquet"
    res = _run("--problem", VALLEY, "--planner", "milp", "--out", out)
    assert res.exit_code == 0, res.output
    assert out.exists() and [p.name for p in tmp_path.iterdir()] == ["plan.parquet"]  # no temp left
    df = pq.read_table(out).to_pandas()
    jobs = df[df["row_type"] == "job"]
    assert jobs["job_id"].tolist() == ["A"] and int(jobs["start_step"].iloc[0]) == 2
    svc = df[df["row_type"] == "service_step"].sort_values("step")
    assert svc["gpus"].astype(int).tolist() == [6, 6, 2, 2, 2, 2, 6, 6]
    assert (df["row_type"] == "gpu_step").sum() == 8 * 8
    meta = read_plan_summary(out)
    assert meta["status"] == "optimal" and meta["planner"] == "milp"


def _bad(tmp_path, content: str, *extra):
    f = tmp_path / "p.json"
    f.write_text(content)
    res = _run("--problem", f, *extra)
    assert res.exit_code == 2, res.output
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output
    return lines[0]


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    base = json.loads(VALLEY.read_text())
    assert "is not valid JSON" in _bad(tmp_path, "{", "--json")
    assert "line 1 column 2" in _bad(tmp_path, "{")
    d = json.loads(json.dumps(base))
    d["jobs"][0]["gpus"] = 3
    assert "job 'A': gpus = 3 is not a power of two" in _bad(tmp_path, json.dumps(d))
    d = json.loads(json.dumps(base))
    d["services"][0]["demand_gpus"] = [1, 2]
    assert "service 'chat': demand_gpus has 2 entries; horizon_steps is 8" in _bad(tmp_path, json.dumps(d))
    d = json.loads(json.dumps(base))
    d["jobs"][0]["colour"] = "red"
    assert "unknown key(s) 'colour'" in _bad(tmp_path, json.dumps(d))
    d = json.loads(json.dumps(base))
    d["cluster"]["n_gpus"] = 64
    d["jobs"].append({"job_id": "X", "kind": "training", "priority": 1, "gpus": 96, "duration_steps": 2})
    assert "job 'X': requests 96 GPUs; cluster has 64" in _bad(tmp_path, json.dumps(d))
    d = json.loads(json.dumps(base))
    d["services"][0].update(min_gpus=8, current_gpus=8, swap_cap_gpus=0)
    d["jobs"] = []
    d["running"] = [{"job_id": "R", "kind": "training", "priority": 1, "gpus": 4, "block_offset": 0,
                     "remaining_steps": 3}]
    assert "exceed the cluster at step 0: 12 > 8" in _bad(tmp_path, json.dumps(d))
    assert "planner 'bogus' is unknown" in _bad(tmp_path, VALLEY.read_text(), "--planner", "bogus")


def test_missing_problem_file(tmp_path):
    res = _run("--problem", tmp_path / "nope.json")
    assert res.exit_code == 2 and "problem file not found" in res.stderr
