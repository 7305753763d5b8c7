"""The deterministic work limit of optimizer.solver.budget (mip_work_limit, counted in HiGHS limit checks)."""

from __future__ import annotations

import os
import signal
from dataclasses import replace

import numpy as np
import pytest
from scipy import sparse

from optimizer.planners import plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, SizeOption
from optimizer.solver import SparseModel, budget, solve


def _knapsack(n: int = 35, m: int = 5, seed: int = 7) -> SparseModel:
    """A seeded multi-dimensional 0/1 knapsack that HiGHS needs ~1,500 nodes (~3,600 checks) to prove."""
    rng = np.random.default_rng(seed)
    w = rng.integers(10, 100, size=(m, n)).astype(float)
    v = (w.sum(0) / m + rng.integers(0, 20, size=n)).astype(float)
    return SparseModel(cost=v, col_lower=np.zeros(n), col_upper=np.ones(n), integer=np.ones(n, bool),
                       A=sparse.csr_matrix(w), row_lower=np.full(m, -np.inf), row_upper=w.sum(1) / 2)


def test_work_limit_interrupts_with_the_incumbent_and_not_on_the_clock():
    model = _knapsack()
    out = solve(model, time_limit_s=60.0, mip_rel_gap=0.0, mip_work_limit=5)
    assert out.status == "time_limit" and out.highs_status == "kInterrupt"
    assert out.work == 5 and not out.wall_clock_limited
    assert out.objective is not None and out.objective < out.bound
    assert "work limit of 5 HiGHS limit checks" in out.message
    full = solve(model, time_limit_s=60.0, mip_rel_gap=0.0)
    assert full.status == "optimal" and full.nodes > 1000  # the same model needs far more work to prove
    assert full.objective >= out.objective


def test_same_work_limit_gives_the_same_incumbent_and_bound():
    model = _knapsack()
    a = solve(model, time_limit_s=60.0, mip_rel_gap=0.0, mip_work_limit=300)
    b = solve(model, time_limit_s=60.0, mip_rel_gap=0.0, mip_work_limit=300)
    assert a.highs_status == b.highs_status == "kInterrupt"
    assert (a.objective, a.bound, a.nodes, a.work) == (b.objective, b.bound, b.nodes, b.work)
    assert np.array_equal(a.x, b.x)
    # HiGHS honours the interrupt within a few checks of asking
    assert 300 <= a.work <= 310


def test_wall_clock_still_stops_a_solve_under_a_large_work_limit():
    out = solve(_knapsack(n=60), time_limit_s=0.3, mip_rel_gap=0.0, mip_work_limit=10**9)
    assert out.highs_status == "kTimeLimit" and out.wall_clock_limited


@pytest.fixture
def ctrl_c_handler():
    """Python's own SIGINT handler (raises KeyboardInterrupt) for one test; the inherited one restored after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("isolate", [False, True], ids=["in_process", "isolated"])
def test_ctrl_c_during_a_work_limited_solve_is_raised_not_turned_into_a_solver_error(monkeypatch, ctrl_c_handler,
                                                                                      isolate):
    """HiGHS catches exceptions raised inside its callback (they would become kSolveError and a
    baseline fallback); the budget keeps Ctrl-C and re-raises it after run().

    Driven by an event, not a timer: SIGINT is sent from HiGHS's first limit check, so it arrives
    while the solve is running however fast or loaded the machine is (in the isolated mode the
    forked child sends it to its parent, the planner process). Ctrl-C's own handler is installed for
    the test: a process started in the background by a non-interactive shell (as CI may start this
    suite) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler at all.
    """
    target = os.getpid()
    sent: list[int] = []
    real_on_check = budget.WorkBudget._on_check

    def on_check_then_ctrl_c(self, cb_type, message, data_out, data_in, user_data):
        if not sent:
            sent.append(1)
            os.kill(target, signal.SIGINT)
        return real_on_check(self, cb_type, message, data_out, data_in, user_data)

    monkeypatch.setattr(budget.WorkBudget, "_on_check", on_check_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        solve(_knapsack(n=60), time_limit_s=30.0, mip_rel_gap=0.0, mip_work_limit=10**9, isolate=isolate)
    assert sent == [1] or isolate  # in the isolated mode the list filled in the child


def _queue() -> Problem:
    """16 GPUs, 24 steps, 14 jobs of 1-8 GPUs and 2-9 steps with mixed priorities and releases."""
    rng = np.random.default_rng(3)
    jobs = tuple(
        Job(f"J{k:02d}", "training", float(rng.choice([1, 2, 4])), int(rng.integers(0, 6)),
            (SizeOption(int(rng.choice([1, 2, 4, 8])), int(rng.integers(2, 10))),))
        for k in range(14)
    )
    st = PlanSettings(mip_rel_gap=0.0, mip_work_limit=3)
    return Problem(Cluster(16, 8, 30, 24), st, (), jobs, ())


def test_under_a_work_limit_the_deadline_does_not_change_the_plan():
    """Same problem, same work limit, deadlines 30 s and 60 s: the same plan (only solve_s differs)."""
    p = _queue()
    a = plan(replace(p, settings=replace(p.settings, time_limit_s=30.0)), "milp")
    b = plan(replace(p, settings=replace(p.settings, time_limit_s=60.0)), "milp")
    assert not a.wall_clock_limited and not b.wall_clock_limited
    da, db = a.to_dict(), b.to_dict()
    da.pop("solve_s"), db.pop("solve_s")
    assert da == db
    assert a.status == "time_limit"  # the work limit of 3 checks stopped the master before its proof
