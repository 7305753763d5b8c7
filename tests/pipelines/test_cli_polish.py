"""CLI polish (issue 14): flags render as flags, bench lists its scenarios and prints its table on stdout,
plan text uses one range convention and says verified."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from pipelines.commands.bench import SCENARIO_NAMES

ROOT = Path(__file__).resolve().parents[2]
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
    assert "--scenario NAME 'all' or comma-separated scenario names: " + ", ".join(SCENARIOS) + "." in out


def test_bench_prints_its_table_on_stdout(tmp_path):
    res = CliRunner().invoke(app, ["bench", "--scenario", "mixed", "--planners", "fifo,easy", "--quick", "--out",
                                   str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split()[:5] == ["scenario", "planner", "util", "%", "vs"]
    rows = [x.split()[:2] for x in lines[2:]]
    assert rows == [["mixed", "fifo"], ["mixed", "easy"], ["mixed", "clairvoyant"]]
    assert "verified plans" not in res.stdout and "verified plans" in res.stderr  # progress stays on stderr


def test_plan_text_one_range_convention_and_verified():
    res = CliRunner().invoke(app, ["plan", "--problem", str(VALLEY)])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "status optimal, verified (0 violations)" in out
    assert "ranges are half-open [first, end)" in out
    assert re.search(r"^  A: steps \[2, 6\) on GPUs \[(0, 4|4, 8)\) \(4 GPUs\)$", out, re.M), out
    assert not re.search(r"steps \d+-\d+|\d+\.\.\d+", out)  # no inclusive or dotted ranges left
    res = CliRunner().invoke(app, ["plan", "--problem", str(VALLEY), "--planner", "fifo"])
    assert "status feasible, verified (0 violations)" in res.stdout
    assert "  A: not started in the horizon [0, 8)" in res.stdout.splitlines()
