"""The MILP strategy's Budget (optimizer.strategy.Budget): time left, steps charged, work per solve, clock stops."""

from __future__ import annotations

import types

import pytest

from optimizer import strategy
from optimizer.solver import SolveOutcome, SolveStatus, auto_work_limit
from optimizer.strategy import AFTER_SOLVE_FRACTION, AFTER_SOLVE_S, Budget


@pytest.fixture
def clock(monkeypatch):
    """A hand-driven ``time.perf_counter`` for the strategy module: set ``clock.now``."""
    c = types.SimpleNamespace(now=100.0)
    monkeypatch.setattr(strategy, "time", types.SimpleNamespace(perf_counter=lambda: c.now))
    return c


def _outcome(wall_clock_limited: bool) -> SolveOutcome:
    return SolveOutcome(SolveStatus.TIME_LIMIT, "kTimeLimit", 1.0, 2.0, 1.0, 0.1,
                        wall_clock_limited=wall_clock_limited)


def test_time_left_and_steps_charged(clock):
    b = Budget(t0=100.0, time_limit_s=10.0)
    assert b.deadline == 110.0 and b.left() == 10.0
    clock.now = 102.5
    b.took("baselines")
    clock.now = 103.0
    b.took("greedy warm starts")
    b.took("greedy warm starts")  # nothing more elapsed
    assert b.spent == {"baselines": 2.5, "greedy warm starts": 0.5}
    assert b.left() == 7.0 and b.elapsed() == 3.0
    assert b.spent_text() == "baselines 2.50 s, greedy warm starts 0.50 s"


def test_the_clock_is_reported_only_when_it_cut_a_step_or_stopped_a_solve(clock):
    b = Budget(t0=100.0, time_limit_s=10.0)
    b.past("baselines", at=101.0)
    b.solves.append(_outcome(False))
    assert not b.clock_hit() and b.stopped == []
    clock.now = 101.5
    b.past("LP rounding", at=101.0)
    assert b.stopped == ["LP rounding"] and b.clock_hit()
    c = Budget(t0=100.0, time_limit_s=10.0, solves=[_outcome(True)])
    assert c.clock_hit()


def test_work_per_solve_is_the_setting_else_auto_work_limit(clock):
    assert Budget(100.0, 30.0, mip_work_limit=7).work_limit(5_000) == 7
    assert Budget(100.0, 30.0, mip_work_limit=0).work_limit(5_000) == 0
    assert Budget(100.0, 30.0).work_limit(5_000) == auto_work_limit(5_000, 30.0)


def test_solve_limits_keep_the_overshoot_margin_before_kill_at(clock):
    b = Budget(t0=100.0, time_limit_s=60.0)
    b.kill_at = 150.0
    clock.now = 110.0
    margin = max(AFTER_SOLVE_S, AFTER_SOLVE_FRACTION * 60.0)
    assert b.room() == 40.0 and b.limits() == (pytest.approx(40.0 - margin), 40.0)
    clock.now = 151.0  # past kill_at: the shortest HiGHS limit, nothing left to kill after
    assert b.limits() == (0.05, 0.0)
