"""CLI contract for bad input (DESIGN §7.1, README): exit 2 with exactly one line on standard error,
nothing on standard output, and no work done (no solve, no folders created)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli.app import app
from pipelines.cli.profile import MAX_HORIZON_H

ROOT = Path(__file__).resolve().parents[3]
M_SMALL = ROOT / "data" / "traffic" / "servegen_m-small_hourly.csv"


def _bad(args: list[str]) -> str:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "line"), [
    (["plan", "--json"], "error: Missing option '--problem'. (see 'gpuplan plan --help')"),
    (["plan", "--problem", "p.json", "--bogus"],
     "error: No such option: --bogus (Possible options: --out) (see 'gpuplan plan --help')"),
    (["profile", "--traffic", "t.csv", "--horizon-h", "abc"],
     "error: Invalid value for '--horizon-h': Input should be a valid integer, unable to parse string as an "
     "integer (see 'gpuplan profile --help')"),
    (["run", "--bogus"], "error: No such option: --bogus (Possible options: --out) (see 'gpuplan run --help')"),
])
def test_usage_errors_are_one_line_exit_2(args, line):
    assert _bad(args) == line


def test_profile_horizon_limit():
    assert MAX_HORIZON_H == 336
    for h in ("100000", "337", "0"):
        assert _bad(["profile", "--traffic", str(M_SMALL), "--horizon-h", h, "--json"]) == (
            f"error: --horizon-h must be between 1 and 336 hours (two weeks); got {h}")


def test_plan_out_folder_checked_before_reading_or_solving(tmp_path):
    # the problem file does not exist either: the --out error coming first shows the order
    out = tmp_path / "nope" / "plan.parquet"
    assert _bad(["plan", "--problem", str(tmp_path / "missing.json"), "--out", str(out)]) == (
        f"error: --out {out}: parent folder {tmp_path / 'nope'} does not exist; create it first")
    assert _bad(["plan", "--problem", str(tmp_path / "missing.json"), "--out", str(tmp_path)]) == (
        f"error: --out {tmp_path} is a folder; give a file path such as {tmp_path / 'plan.parquet'}")
    js = tmp_path / "plan.json"  # the plan file is parquet: a JSON name is refused, not written as parquet
    assert _bad(["plan", "--problem", str(tmp_path / "missing.json"), "--out", str(js)]) == (
        f"error: --out {js}: the plan is written as parquet, expected a path ending in .parquet "
        f"(such as {tmp_path / 'plan.parquet'}; --json prints JSON on stdout)")
    assert not js.exists()
    bare = tmp_path / ".parquet"  # a hidden file without a suffix: the example is a real name, not ".parquet.parquet"
    assert _bad(["plan", "--problem", str(tmp_path / "missing.json"), "--out", str(bare)]) == (
        f"error: --out {bare}: give a file name before .parquet (such as {tmp_path / 'plan.parquet'}; --json "
        "prints JSON on stdout)")


def test_run_out_creates_only_the_last_level(tmp_path):
    out = tmp_path / "x" / "y"
    assert _bad(["run", "--out", str(out)]) == (
        f"error: --out {out}: parent folder {tmp_path / 'x'} does not exist; create it first")
    assert not (tmp_path / "x").exists()
    f = tmp_path / "file"
    f.write_text("")
    assert _bad(["run", "--out", str(f)]) == f"error: --out {f} is a file; give a folder for the run folders"
