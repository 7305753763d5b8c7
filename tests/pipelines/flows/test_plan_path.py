"""One plan path: the workspace and its settings are read once per flow run; the side is chosen in one place."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pipelines.config.settings import job_side, shipped_workspace, workspace_defaults
from pipelines.workspace.config import DEMO_WORKSPACE
from pipelines.workspace.load import init_text, load_workspace


def test_the_side_is_the_queue_format_and_a_demo_copy_is_not_the_shipped_folder(tmp_path, copy_slurm_fixture):
    demo = load_workspace(DEMO_WORKSPACE)
    assert job_side(demo) == "shipped" and shipped_workspace(demo)
    (tmp_path / "gpuplan.toml").write_text(init_text(demo=True))
    copy = load_workspace(tmp_path)
    assert job_side(copy) == "shipped" and not shipped_workspace(copy)
    given = workspace_defaults(copy)  # before environment overrides (the tests' session sets GPUPLAN_MODELS_DIR)
    assert given["runs_dir"] == tmp_path.resolve() / "runs"  # not the clone's runs/ (the bug of issue 25)
    assert given["models_dir"] == copy.store_dir / "models"
    assert "runs_dir" not in workspace_defaults(demo)
    assert job_side(load_workspace(copy_slurm_fixture(tmp_path / "slurm"))) == "store"


def count_workspace_parses(monkeypatch) -> list[str]:
    """Record every ``gpuplan.toml`` text ``tomllib.loads`` parses (what :func:`pipelines.workspace.load.parse_workspace` calls)."""
    parses: list[str] = []
    real = tomllib.loads

    def counting(text: str, *args, **kwargs):
        if "[sources.queue]" in text:  # a gpuplan.toml, not another TOML file (Prefect's, pyproject.toml)
            parses.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(tomllib, "loads", counting)
    return parses


@pytest.mark.heavy
def test_gpuplan_toml_is_parsed_once_per_gpuplan_run(tmp_path, iso_env, monkeypatch, copy_slurm_fixture):
    """One ``gpuplan run`` (the command's checks, then the flow run and all its tasks): one parse."""
    from typer.testing import CliRunner

    from pipelines.cli.app import app

    ws = copy_slurm_fixture(tmp_path / "ws")
    parses = count_workspace_parses(monkeypatch)
    res = CliRunner().invoke(app, ["run", "--workspace", str(ws), "--out", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    assert len(parses) == 1
    assert (tmp_path / "runs" / "latest" / "plan.parquet").is_file()


@pytest.mark.heavy
def test_gpuplan_toml_is_parsed_once_per_run_of_the_flow(tmp_path, iso_env, monkeypatch, copy_slurm_fixture):
    """The flow called on its own (a served deployment's run): one parse, though every task uses the workspace."""
    from pipelines.flows.plan import run_all

    ws = copy_slurm_fixture(tmp_path / "ws")
    parses = count_workspace_parses(monkeypatch)
    res = run_all(out_dir=str(tmp_path / "runs"), workspace=str(ws))
    assert len(parses) == 1
    assert res["status"] in ("optimal", "feasible") and Path(res["run_dir"]).parent == tmp_path / "runs"


@pytest.mark.heavy
def test_the_workspace_s_replan_planner_is_the_planner_of_the_run(tmp_path, iso_env, copy_slurm_fixture):
    """``[replan] planner = "fast"``: the run plans with the fast mode (issue 29), verified like every plan."""
    import json

    from pipelines.flows.plan import run_all

    ws = copy_slurm_fixture(tmp_path / "ws")
    with (ws / "gpuplan.toml").open("a") as f:
        f.write('\n[replan]\nplanner = "fast"\n')
    assert load_workspace(ws).config.replan.planner == "fast"
    res = run_all(out_dir=str(tmp_path / "runs"), workspace=str(ws))
    summary = json.loads((Path(res["run_dir"]) / "summary.json").read_text())
    assert summary["planner"] == "fast" and summary["status"] == "feasible"
    assert res["planner"] == "fast" and res["source"] in ("greedy", "priority")
    from pipelines.cli.run import result_lines
    from pipelines.config.settings import load_settings

    lines = result_lines(res, load_settings(str(ws)), 1.0)
    status = next(ln for ln in lines if ln.startswith("plan status:"))
    assert status == f"plan status:   feasible, fast mode: best candidate {res['source']} (verified)"
    # a workspace run names its commands file, the operator's main output (operator trial)
    assert f"commands:      {Path(res['run_dir']) / 'commands.sh'} (review, then apply by hand)" in lines
    report = (Path(res["run_dir"]) / "risk_report.md").read_text()
    assert f"planner `fast` (best candidate: `{res['source']}`)" in report


def test_an_unknown_replan_planner_is_refused_in_one_line(tmp_path):
    from pipelines.io.errors import InputError

    (tmp_path / "gpuplan.toml").write_text(init_text(demo=True) + '\n[replan]\nplanner = "quick"\n')
    with pytest.raises(InputError) as err:
        load_workspace(tmp_path)
    assert str(err.value).endswith("gpuplan.toml: replan.planner: 'quick' is not allowed: input should be 'milp', "
                                   "'fast', 'fifo', 'easy' or 'priority'")
    assert "\n" not in str(err.value)
