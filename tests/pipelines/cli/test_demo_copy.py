"""A workspace made with ``gpuplan init WS --demo`` is a workspace like any other (issue 25, found by a new user)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pipelines.cli.app import app


def test_run_of_a_demo_copy_writes_under_its_runs_folder(tmp_path, iso_env, monkeypatch):
    """``gpuplan run --workspace WS`` hands the flow ``WS/runs`` (not ``./runs``), as ``run --help`` says."""
    ws = tmp_path / "ws"
    assert CliRunner().invoke(app, ["init", str(ws), "--demo"]).exit_code == 0
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    seen: dict = {}

    def fake_run_all(out_dir=None, workspace=None, ingested=False, **_):
        seen.update(out_dir=out_dir, workspace=workspace)
        run_dir = Path(out_dir) / "20250316T1600Z_x"
        return {"run_dir": str(run_dir), "latest": str(Path(out_dir) / "latest"), "latest_moved": True,
                "status": "optimal", "source": "milp", "fallback": False, "mlflow_run_id": "r", "workspace": workspace,
                "nodes": ["n"], "n_gpus": 8}

    monkeypatch.setattr("pipelines.flows.plan.run_all", fake_run_all)
    res = CliRunner().invoke(app, ["run", "--workspace", str(ws)])
    assert res.exit_code == 0, res.output
    assert seen == {"out_dir": str((ws / "runs").resolve()), "workspace": str(ws.resolve())}
    assert not (here / "runs").exists()


def test_replay_into_a_demo_copy_is_refused_in_one_line(tmp_path):
    ws = tmp_path / "ws"
    assert CliRunner().invoke(app, ["init", str(ws), "--demo"]).exit_code == 0
    res = CliRunner().invoke(app, ["replay", "--workspace", str(ws), "--days", "1", "--json"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines() if hasattr(res, "stderr") else res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --workspace") and "shipped demo" in lines[0]
    assert not (ws / "store").exists() and not (ws / "exports").exists()
    json.dumps({})  # nothing printed on stdout
