"""The offline upper bound (optimizer.bound) on a problem solved by hand."""

from __future__ import annotations

from optimizer.bound import offline_bound, servable_rt
from optimizer.problem import Cluster, PlanSettings
from optimizer.scenarios import Scenario, SimJob, SimService


def _hand_scenario(rt_max_gpus: int = 8) -> Scenario:
    # 8 GPUs, a 4-step window of 30 min. Real-time demand 0, 0, 4, 4 GPUs -> free 8, 8, 4, 4.
    # A: priority 1, 8 GPUs, 2 steps, arrives at 0. B: priority 4, 4 GPUs, 4 steps, arrives at 1.
    # C arrives at step 4, after the window: no column.
    svc = SimService("rt", 0, rt_max_gpus, 8, 0, demand_true=(0, 0, 4, 4, 4, 4), demand_forecast=(0, 0, 4, 4, 4, 4))
    jobs = (
        SimJob("A", "training", 1.0, 0, 8, 2, 2),
        SimJob("B", "training", 4.0, 1, 4, 4, 4),
        SimJob("C", "training", 8.0, 4, 8, 1, 1),
    )
    return Scenario(name="hand", seed=0, cluster=Cluster(n_gpus=8, horizon_steps=2), settings=PlanSettings(),
                    n_steps=4, services=(svc,), jobs=jobs)


def test_lp_bound_of_the_hand_problem():
    # Columns: A starts 0..3 (4), B starts 1..3 (3). Value of a start (priority x GPUs x in-window steps x 0.5 h):
    # A@0 = 8, B@1 = 4 x 4 x 3 x 0.5 = 24, B@2 = 16. Integer optimum 24 (B@1 alone, or A@0 then B@2).
    # LP: x[A@0] = t, step 1 gives 8t + 4 x[B@1] <= 8; for t in [0.5, 1] the best is
    # x[B@1] = 2 - 2t, x[B@2] = 2t - 1 (steps 2-3 hold 4): 8t + 24(2 - 2t) + 16(2t - 1) = 32 - 8t,
    # largest at t = 0.5: 28. For t < 0.5, x[B@1] <= 1 gives 8t + 24 < 28.
    b = offline_bound(_hand_scenario())
    assert (b.lp_value, b.value, b.mip_dual_bound) == (28.0, 28.0, None)
    assert (b.n_columns, b.n_rows) == (7, 2 + 4)  # start-once rows of A and B, 4 capacity rows
    assert b.rt_gpu_h == 4.0  # (4 + 4) GPU-steps x 0.5 h


def test_mip_dual_bound_tightens_to_the_integer_optimum():
    b = offline_bound(_hand_scenario(), mip_max_nodes=1000)
    assert (b.lp_value, b.mip_dual_bound, b.value) == (28.0, 24.0, 24.0)


def test_the_root_node_alone_reaches_the_integer_optimum_of_the_hand_problem():
    # the benchmark's setting (BenchConfig.bound_mip_nodes = 1): HiGHS's root node closes the LP's gap here
    b = offline_bound(_hand_scenario(), mip_max_nodes=1)
    assert (b.lp_value, b.mip_dual_bound, b.value) == (28.0, 24.0, 24.0)


def test_real_time_beyond_the_band_is_not_reserved():
    # With the band capped at 2 GPUs only 2 of the 4 demanded GPUs can ever be served: free 8, 8, 6, 6.
    sc = _hand_scenario(rt_max_gpus=2)
    assert list(servable_rt(sc)) == [0, 0, 2, 2]
    # B@1 (24) plus half of A@0 (4) still fits steps 0-1; steps 2-3 now have 2 GPUs left after B:
    # A@2 cannot use them (8 GPUs) beyond x = 0.25 -> 0.25 x 8 = 2. LP = 24 + 4 + 2 = 30.
    assert offline_bound(sc).lp_value == 30.0


def test_a_bound_in_this_process_does_not_spoil_a_later_solve_with_more_threads():
    # the bound runs HiGHS in this process on 1 thread; HiGHS sizes one global scheduler per process, so a later
    # (forked) 2-thread solve came back unsolved (kNotset) unless the solver knew to reset it
    import numpy as np
    import pytest
    from scipy import sparse

    from optimizer.solver import SparseModel, solve

    offline_bound(_hand_scenario())
    m = SparseModel(np.array([1.0, 1.0]), np.zeros(2), np.array([3.0, 3.0]), np.array([True, True]),
                    sparse.csc_matrix(np.array([[1.0, 2.0]])), np.array([-np.inf]), np.array([4.0]))
    out = solve(m, threads=2)
    assert out.status == "optimal" and out.objective == pytest.approx(3.0)  # max x0 + x1, x0 + 2 x1 <= 4, x <= 3
