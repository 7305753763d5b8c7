"""settings.budget (issue 29, DESIGN §5): "time" (default) puts the wall clock in charge, "work" keeps the deterministic budget."""

from __future__ import annotations

import types
from dataclasses import replace

import pytest

from optimizer import strategy
from optimizer.errors import InputError
from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, SizeOption
from optimizer.solver import SolveStatus, auto_work_limit
from optimizer.strategy import EARLY_STOP_SHARE, Budget, deadline_status


@pytest.fixture
def clock(monkeypatch):
    """A hand-driven ``time.perf_counter`` for the strategy module: set ``clock.now``."""
    c = types.SimpleNamespace(now=100.0)
    monkeypatch.setattr(strategy, "time", types.SimpleNamespace(perf_counter=lambda: c.now))
    return c


def test_default_is_time_and_a_bad_mode_is_one_line():
    assert PlanSettings().budget == "time"
    with pytest.raises(InputError, match=r"^settings: budget = 'clock' must be 'time' or 'work'$"):
        PlanSettings(budget="clock")


def test_the_mode_travels_in_the_problem_file():
    p = Problem(Cluster(4, 4, 30, 4), PlanSettings(budget="work"), (), (Job("A", "training", 1.0, 0, (SizeOption(1, 2),)),))
    d = p.to_dict()
    assert d["settings"]["budget"] == "work" and Problem.from_dict(d) == p


def test_work_limit_per_mode(clock):
    on_clock = Budget(t0=100.0, time_limit_s=30.0, mode="time")
    assert on_clock.work_limit(2_000) is None and on_clock.on_clock
    capped = Budget(t0=100.0, time_limit_s=30.0, mip_work_limit=7, mode="time")
    assert capped.work_limit(2_000) == 7 and not capped.on_clock  # an explicit limit caps both modes
    work = Budget(t0=100.0, time_limit_s=30.0, mode="work")
    assert work.work_limit(2_000) == auto_work_limit(2_000, 30.0) and not work.on_clock


def _problem(budget: str) -> Problem:
    return Problem(Cluster(4, 4, 30, 4), PlanSettings(time_limit_s=30.0, budget=budget), (),
                   (Job("A", "training", 1.0, 0, (SizeOption(2, 2),)),))


def _plan(gap: float | None, wall_clock_limited: bool = False) -> Plan:
    return Plan("milp", SolveStatus.TIME_LIMIT, (JobAssignment("A", 0, 2, 0, 2),), {}, 4.0,
                None if gap is None else 4.0 * (1 + gap), gap, 1.0, None, message="why it stopped",
                wall_clock_limited=wall_clock_limited, n_gpus=4, horizon_steps=4)


def test_an_early_return_above_the_gap_says_why(clock):
    """30 s limit: at 1 s in (29 s left > 20 %) a 5 % gap gets the note; at 25 s in (5 s left) or in the gap, none."""
    run = strategy.MilpRun(_problem("time"), None, (), 100.0, None)  # type: ignore[arg-type]
    clock.now = 101.0
    note = run.early_stop_note(_plan(0.05)).notes[-1]
    assert note == ("early stop: returned with proven gap 5.000% > mip_rel_gap 0.001 and 29.0 s of "
                    "time_limit_s=30 s left (budget=time): why it stopped")
    assert run.early_stop_note(_plan(None)).notes[-1].startswith("early stop: returned with no proven bound")
    assert run.early_stop_note(_plan(0.0005)).notes == ()
    clock.now = 100.0 + 30.0 * (1 - EARLY_STOP_SHARE) + 0.5
    assert run.early_stop_note(_plan(0.05)).notes == ()


def test_work_mode_adds_no_clock_dependent_note(clock):
    run = strategy.MilpRun(_problem("work"), None, (), 100.0, None)  # type: ignore[arg-type]
    clock.now = 101.0
    assert run.early_stop_note(_plan(0.05)).notes == ()


def test_a_clock_stop_is_a_deadline_only_under_the_work_budget():
    p = _plan(0.05, wall_clock_limited=True)
    assert deadline_status(p, _problem("time")).status == "time_limit"
    work = deadline_status(p, _problem("work"))
    assert work.status == "deadline" and work.notes[-1].startswith("warning: the wall-clock deadline")
    assert deadline_status(p, replace(_problem("time"), settings=replace(_problem("time").settings,
                                                                          mip_work_limit=5))).status == "deadline"
