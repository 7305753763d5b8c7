"""The default plan does not depend on machine load for a given work budget (issue 17, DESIGN §5).

A slow (loaded) machine is emulated with a planner clock that runs ``k`` times faster than the real
one: every ``time.perf_counter()`` the planner, the decomposition and the baselines read says ``k``
times more time has passed, and the HiGHS solves get their wall-clock limits scaled to match (a
limit of ``L`` planner seconds is ``L / k`` real seconds), so the whole plan sees a machine ``k``
times slower. As long as the deadline does not fire, objective, bound, status and assignments
must be identical to the plan made with the real clock; when it fires, the plan says so.
"""

from __future__ import annotations

import time
import types
from dataclasses import replace

import pytest

from optimizer import baselines, decomposition, planners, strategy
from optimizer.examples import random_problem
from optimizer.problem import PlanSettings
from optimizer.solver import WORK_MIN_CHECKS, auto_work_limit
from optimizer.verify import verify

#: A master (1,222 columns) that HiGHS needs 625 limit checks and 169 nodes to prove optimal at
#: ``mip_rel_gap`` 0 (12 s at load 9 on the 2-core machine): any budget below that stops it early.
PROBLEM = random_problem(32, 24, 32, seed=1, settings=PlanSettings(time_limit_s=240.0, mip_rel_gap=0.0, budget="work"))

#: The default budget of this test (instead of :func:`auto_work_limit`'s 20,000 checks at 240 s)
#: so that the solve stops on work after about a second.
WORK = 40


def _slow_machine(monkeypatch: pytest.MonkeyPatch, k: float, modules: tuple = (planners, strategy, decomposition, baselines)) -> None:
    """Make the planner see a machine ``k`` times slower (see the module docstring); ``modules``: whose clock."""
    t0 = time.perf_counter()
    fake = types.SimpleNamespace(perf_counter=lambda: t0 + k * (time.perf_counter() - t0))
    for mod in modules:
        monkeypatch.setattr(mod, "time", fake)

    def scaled(solve):
        def run(model, **kw):
            for key in ("time_limit_s", "kill_after_s"):
                if kw.get(key) is not None:
                    kw[key] = kw[key] / k
            return solve(model, **kw)
        return run

    monkeypatch.setattr(strategy, "solve", scaled(strategy.solve))
    monkeypatch.setattr(decomposition, "solve", scaled(decomposition.solve))


def _decided(p) -> tuple:
    return (p.objective, p.bound, str(p.status), str(p.source), p.assignments, p.service_gpus, p.model)


def test_the_plan_is_identical_when_the_machine_is_eight_times_slower(monkeypatch):
    monkeypatch.setattr(strategy, "auto_work_limit", lambda n_cols, time_limit_s: WORK)
    real = planners.plan(PROBLEM, "milp")
    assert real.model["mip_work_limit"] == WORK and WORK <= real.model["mip_checks"] <= WORK + 10
    assert str(real.status) == "time_limit" and not real.wall_clock_limited  # stopped on work, not proven
    _slow_machine(monkeypatch, 8.0)
    slow = planners.plan(PROBLEM, "milp")
    assert not slow.wall_clock_limited and slow.solve_s > real.solve_s  # the planner saw a slower machine
    assert _decided(slow) == _decided(real)
    assert verify(slow, PROBLEM) == []


def test_when_the_deadline_fires_the_plan_says_it_depends_on_load(monkeypatch, caplog):
    monkeypatch.setattr(strategy, "auto_work_limit", lambda n_cols, time_limit_s: WORK)
    # 240 planner seconds are 0.012 real seconds for the MILP's steps; the baselines keep the real clock, so
    # under any load they finish (at 20,000 x they had 12 ms and, on a loaded CI machine, placed nothing)
    _slow_machine(monkeypatch, 20_000.0, modules=(planners, strategy, decomposition))
    r = planners.plan(PROBLEM, "milp")
    assert r.wall_clock_limited and str(r.status) == "deadline"
    warn = "warning: the wall-clock deadline (time_limit_s=240 s) stopped this plan before its work budget was done"
    assert r.notes[-1].startswith(warn) and warn in caplog.text
    assert verify(r, PROBLEM) == [] and r.objective >= planners.best_baseline(PROBLEM).objective


def test_the_default_budget_is_sized_from_columns_and_time_limit_only():
    """auto_work_limit's numbers by hand: CPU share 0.5 x limit / 8; per check 2.74e-8 x n**1.5 s."""
    # 2,190 columns (64 GPUs x 30 jobs), 30 s: floor(1.875 / (2.74e-8 x 102,486.5)) - 390 = 667 - 390
    assert auto_work_limit(2190, 30.0) == 277
    # 8,586 columns (256 x 120), 30 s: floor(1.875 / 0.02180) - 390 = 86 - 390 < 20: no branch-and-bound
    assert auto_work_limit(8586, 30.0) == 0
    # 600 s at 14,268 columns: floor(37.5 / 0.046698) - 390 = 803 - 390
    assert auto_work_limit(14268, 600.0) == 413
    assert auto_work_limit(10, 30.0) == 20_000  # capped
    assert WORK_MIN_CHECKS == 20
    with pytest.raises(ValueError, match="time_limit_s = 0 must be > 0"):
        auto_work_limit(100, 0)


def test_an_explicit_work_limit_still_wins_over_the_default():
    p = replace(PROBLEM, settings=replace(PROBLEM.settings, mip_work_limit=25))
    r = planners.plan(p, "milp")
    assert r.model["mip_work_limit"] == 25 and 25 <= r.model["mip_checks"] <= 35
