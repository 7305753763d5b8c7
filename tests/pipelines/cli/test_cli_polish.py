"""CLI polish (issue 14): flags render as flags, bench lists its scenarios and prints its table on stdout,
plan text uses one range convention and says verified."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.bench.tables import COLUMNS_NOTE
from pipelines.cli.app import app
from pipelines.cli.bench import SCENARIO_NAMES
from pipelines.cli.plan import OBJECTIVE_NOTE, RANGE_NOTE

ROOT = Path(__file__).resolve().parents[3]
VALLEY = ROOT / "data" / "examples" / "valley.json"
COMMANDS = ("init", "ingest", "run", "train", "predict", "profile", "plan", "bench", "serve", "replay", "whatif")


def _help(*args: str) -> str:
    res = CliRunner().invoke(app, [*args, "--help"], terminal_width=120)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize("cmd", COMMANDS)
def test_flags_render_as_flags(cmd):
    out = _help(cmd)
    assert "<bool>" not in out and "BOOLEAN" not in out
    assert re.search(r"^\s+--help\s{2,}Show this message and exit\.$", out, re.M)
    if "--json" in out:  # a flag: the option, then its help text, no value placeholder
        assert re.search(r"^\s+--json\s{2,}[A-Z]", out, re.M), out


def test_whatif_help_names_the_values():
    out = _help("whatif")
    for opt in ("--add-gpus N", "--drain-node NAME", "--fail-gpus RANGE", "--add-job FILE", "--cancel JOB",
                "--priority JOB=P", "--demand-scale SERVICE=F"):
        assert opt in out
    assert "whatif" in _help()


def test_bench_help_lists_the_scenarios():
    from optimizer.scenarios import SCENARIOS

    assert SCENARIO_NAMES == SCENARIOS
    out = " ".join(_help("bench").split())
    assert ("--scenario NAME 'all' or comma-separated scenario names: " + ", ".join(SCENARIOS)
            + "; also openb-het-a, openb-het-b (the typed openb windows, only when named)." in out)


def test_bench_prints_its_table_on_stdout(tmp_path):
    res = CliRunner().invoke(app, ["bench", "--scenario", "mixed", "--planners", "fifo,easy", "--quick", "--out",
                                   str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split()[:5] == ["scenario", "planner", "util", "%", "vs"]
    rows = [x.split()[:2] for x in lines[2:]]
    # the clairvoyant row is labelled a reference, and the line below the table says it is not a bound (issue 33)
    assert rows == [["mixed", "fifo"], ["mixed", "easy"], ["mixed", "clairvoyant"], ["util", "%:"],
                    ["clairvoyant", "(reference):"]]
    assert "(reference)" in lines[4] and lines[5] == COLUMNS_NOTE and "not a bound" in lines[6]
    assert "verified plans" not in res.stdout and "verified plans" in res.stderr  # progress stays on stderr


def test_plan_text_one_range_convention_and_verified():
    res = CliRunner().invoke(app, ["plan", "--problem", str(VALLEY)])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "status optimal, verified (0 violations)" in out
    assert "ranges are half-open [first, end)" in out
    assert f"{RANGE_NOTE}; a step is 30 min, step 0 the start of the plan" in out.splitlines()
    assert out.splitlines()[1] == OBJECTIVE_NOTE and ", mip_work_limit none," in out  # units; no Python None
    assert re.search(r"^  A: steps \[2, 6\) on GPUs \[(0, 4|4, 8)\) \(4 GPUs\)$", out, re.M), out
    assert not re.search(r"steps \d+-\d+|\d+\.\.\d+", out)  # no inclusive or dotted ranges left
    res = CliRunner().invoke(app, ["plan", "--problem", str(VALLEY), "--planner", "fifo"])
    assert "status feasible, verified (0 violations)" in res.stdout
    assert "  A: not started in the horizon [0, 8)" in res.stdout.splitlines()


def test_train_text_says_when_the_scheduler_model_gives_every_job_one_duration():
    from pipelines.cli.train import _workspace_text

    metrics = {"n": 34, "mae_h": 0.031, "pinball_p50_h": 0.016, "pinball_p90_h": 0.029, "coverage_p90": 0.97}
    doc = {"workspace": "/ws", "n_train": 159, "n_test": 34, "baselines": {}, "metrics": {**metrics,
                                                                                        "p50_spread_q90_q10": 1.0}}
    note = ("note: the model's P50 hardly differs between jobs (90th/10th percentile 1.00 over 34 runs): 159 "
            "training runs were too few or too alike for the job features to matter")
    assert note in _workspace_text(doc)
    # a model whose P50s spread by 1.1 or more says nothing of the kind
    assert "hardly differs" not in _workspace_text({**doc, "metrics": {**metrics, "p50_spread_q90_q10": 1.1}})


def test_bench_without_fifo_or_priority_says_why_their_columns_are_empty(tmp_path):
    res = CliRunner().invoke(app, ["bench", "--scenario", "mixed", "--planners", "easy", "--quick", "--out",
                                   str(tmp_path)])
    assert res.exit_code == 0, res.output
    line = ('"vs FIFO": – (fifo was not among --planners; add it, e.g. --planners easy,fifo, to compare)')
    assert res.stdout.splitlines()[-1] == line
    md = (tmp_path / "bench.md").read_text()
    assert ('"vs FIFO" and "vs priority": – (fifo and priority were not among --planners; add them, e.g. '
            '--planners easy,fifo,priority, to compare)') in md.splitlines()
    res2 = CliRunner().invoke(app, ["bench", "--scenario", "mixed", "--planners", "fifo,priority", "--quick", "--out",
                                    str(tmp_path / "b")])
    assert res2.exit_code == 0 and "was not among --planners" not in res2.stdout
    assert "not among --planners" not in (tmp_path / "b" / "bench.md").read_text()
