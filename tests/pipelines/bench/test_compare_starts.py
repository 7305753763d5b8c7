"""benchmarks/compare_starts.py: bad input is one line and exit 2, before any simulation; the table of a hand-checkable run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _mod():
    spec = importlib.util.spec_from_file_location("compare_starts", ROOT / "benchmarks" / "compare_starts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("argv", "line"), [
    (["--scenario", "nosuch"], "compare_starts: --scenario 'nosuch': expected one of mixed, diurnal_peak, big_gangs, "
                               "priority_skew, uniform_priority, scale_64x30, forecast_error, real_trace, real_trace_b"),
    (["--scenario", "mixed", "--seed", "-1"], "compare_starts: --seed -1: expected a seed >= 0"),
    (["--scenario", "mixed", "--planners", "milp"], "compare_starts: --planners 'milp': expected two comma-separated names"),
    (["--scenario", "mixed", "--planners", "milp,nosuch"],
     "compare_starts: --planners: unknown planner 'nosuch'; expected two of milp, fifo, easy, priority, fast"),
])
def test_bad_input_is_one_line_and_exit_2(argv, line, capsys):
    assert _mod().main(argv) == 2
    out = capsys.readouterr()
    assert out.err.strip() == line and out.out == ""


def test_two_baselines_on_mixed_seed_0_total_their_bench_values(capsys):
    # FIFO and EASY on mixed seed 0: the totals of the first starts are the bench's values for that seed
    # (docs/benchmark.md, "Seed 0, every row": 1094.0 and 1186.5; no node failure, so no restart)
    assert _mod().main(["--scenario", "mixed", "--planners", "fifo,easy"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "total (first starts, no restarts): fifo 1094.0, easy 1186.5"
