"""The deterministic work limit of optimizer.solver (mip_work_limit, counted in HiGHS limit checks)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from optimizer.solver import SparseModel, solve


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
    assert full.status == "optimal" and full.work > 300  # the same model needs far more work to prove
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
