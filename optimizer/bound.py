"""A true offline upper bound on a scenario's value metric (issue 15; DESIGN §6.3).

:func:`offline_bound` solves, with full knowledge of the whole window — every arrival, every
actual duration and every step's actual real-time demand — the LP relaxation of the
whole-window time-indexed model:

- a variable ``x[j, s]`` in [0, 1] for every batch job ``j`` arriving inside the window and every
  start step ``s`` in ``[arrival_j, n_steps - 1]``; ``sum_s x[j, s] <= 1`` (a job starts once);
- capacity, every step ``t`` of the window:
  ``sum_{j, s <= t < s + d_j} gpus_j x[j, s] <= n_gpus - rt[t]`` with
  ``rt[t] = min(n_gpus, sum_services min(demand_true[t], max_gpus))``: the real-time demand that a
  planner can serve (its band's maximum) is served in full;
- objective, the benchmark's value (:mod:`optimizer.metrics`): ``sum priority_j x gpus_j x
  (min(s + d_j, n_steps) - s) x step_h x x[j, s]`` — priority-weighted batch GPU-hours executed
  inside the window, a run cut at the window end counting its in-window part.

Relaxed against every planner: integrality (fractional starts), GPU placement (no nodes, blocks or
fragmentation), the swap cap, node failures (capacity never lost) and all forecasts (the truth is
known). So no schedule that serves every step's servable real-time demand can score more. A
planner that leaves real-time demand unmet frees capacity the bound does not have and *can* score
above it; the benchmark marks such a row (``value_of_bound_pct`` above 100) rather than hiding it.

Optionally (``mip_max_nodes``) the same model with binary starts is given to HiGHS's branch and
bound for that many nodes; its dual bound (never above the LP's) is returned when smaller. Every
real schedule starts each job once at a whole step, so it is a point of that integer model and the
dual bound stays a bound. The benchmark uses one node (the root with HiGHS's cuts; single thread,
fixed seed, no time limit: deterministic), 0.8-9.9 % below the LP on seed 0 at 0.7-23 s per
scenario, against 0.1-0.3 s for the LP alone (``benchmarks/bench_bound.py``).

Pure: no files, no clock in the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import highspy
import numpy as np
from scipy import sparse

from optimizer.errors import InputError
from optimizer.scenarios.types import Scenario
from optimizer.solver import quiet_banner, use_threads


@dataclass(frozen=True)
class OfflineBound:
    """The bound of one scenario.

    ``value``: the bound on the value metric (priority x GPU-hours), the smaller of the LP and
    (when run) the MIP dual bound. ``lp_value``: the LP relaxation's optimum. ``mip_dual_bound``:
    HiGHS's dual bound after ``mip_max_nodes`` nodes (None when not run). ``n_columns`` /
    ``n_rows``: model size. ``rt_gpu_h``: the real-time GPU-hours the bound serves.
    """

    value: float
    lp_value: float
    mip_dual_bound: float | None
    n_columns: int
    n_rows: int
    rt_gpu_h: float


def usable_gpus(sc: Scenario) -> int:
    """GPUs the bound may use: ``n_gpus``, or on a typed cluster its nodes' healthy GPUs (not the padding).

    The bound ignores GPU types (a relaxation: still an upper bound on a typed scenario).
    """
    return sc.cluster.n_gpus - len(sc.cluster.layout_down)


def servable_rt(sc: Scenario) -> np.ndarray:
    """Real-time GPUs the bound serves per window step: ``min(n_gpus, sum_s min(demand_true_s[t], max_gpus_s))``; shape (n_steps,), ints."""
    rt = np.zeros(sc.n_steps, dtype=int)
    for s in sc.services:
        rt += np.minimum(np.asarray(s.demand_true[: sc.n_steps], dtype=int), int(s.max_gpus))
    return np.minimum(rt, usable_gpus(sc))


def _model(sc: Scenario):
    """(cost, A (csc), row upper bounds, n_jobs) of the time-indexed LP; see the module docstring."""
    W, N = sc.n_steps, usable_gpus(sc)
    h = sc.cluster.step_minutes / 60.0
    free = N - servable_rt(sc)
    jobs = [j for j in sc.jobs if j.arrival_step < W]
    cost, rows, cols, vals = [], [], [], []
    c = 0
    for k, j in enumerate(jobs):
        for s in range(j.arrival_step, W):
            end = min(s + j.true_steps, W)
            cost.append(j.priority * j.gpus * (end - s) * h)
            rows.append(k)  # the job's "start once" row
            cols.append(c)
            vals.append(1.0)
            for t in range(s, end):
                rows.append(len(jobs) + t)  # capacity row of step t
                cols.append(c)
                vals.append(float(j.gpus))
            c += 1
    n_rows = len(jobs) + W
    A = sparse.csc_matrix((vals, (rows, cols)), shape=(n_rows, c))
    upper = np.concatenate([np.ones(len(jobs)), free.astype(float)])
    return np.asarray(cost, dtype=float), A, upper, len(jobs)


def _solve(cost: np.ndarray, A, upper: np.ndarray, integer: bool, max_nodes: int | None) -> tuple[float, float | None]:
    """(objective, dual bound or None) of ``max cost x  s.t. 0 <= A x <= upper, 0 <= x <= 1``."""
    use_threads(highspy, 1)  # the solver's scheduler bookkeeping: a later solve with other threads resets it
    with quiet_banner():
        h = highspy.Highs()
    h.silent()
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    lp = highspy.HighsLp()
    n, m = A.shape[1], A.shape[0]
    lp.num_col_, lp.num_row_ = n, m
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.ones(n)
    lp.row_lower_ = np.full(m, -highspy.kHighsInf)
    lp.row_upper_ = upper
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, m
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(np.float64)
    if integer:
        lp.integrality_ = [highspy.HighsVarType.kInteger] * n
        h.setOptionValue("mip_max_nodes", int(max_nodes or 1))
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    if integer:
        bound = float(info.mip_dual_bound)
        return float(info.objective_function_value), bound if math.isfinite(bound) else None
    if status != highspy.HighsModelStatus.kOptimal:
        raise InputError(f"offline bound: the LP relaxation ended with status {h.modelStatusToString(status)}")
    return float(info.objective_function_value), None


def offline_bound(sc: Scenario, *, mip_max_nodes: int | None = None) -> OfflineBound:
    """The offline upper bound on ``sc``'s value metric (priority x GPU-hours over ``sc.n_steps``).

    See the module docstring for the model and what it relaxes. ``mip_max_nodes``: also run
    HiGHS's branch and bound on the integer model for that many nodes and return its dual bound
    when it is lower (None: LP only; the benchmark uses 1). The LP value is rounded *up* to 4
    decimals so that solver round-off cannot make it cut below a schedule's exact value.
    Raises :class:`InputError` when the LP does not solve to optimality (it always has the
    feasible point x = 0, so this signals a solver failure).
    """
    cost, A, upper, _ = _model(sc)
    rt_h = float(servable_rt(sc).sum()) * sc.cluster.step_minutes / 60.0
    if A.shape[1] == 0:
        return OfflineBound(0.0, 0.0, None, 0, A.shape[0], rt_h)
    lp_val, _ = _solve(cost, A, upper, False, None)
    lp_val = math.ceil(lp_val * 1e4 - 1e-6) / 1e4
    dual = None
    value = lp_val
    if mip_max_nodes is not None:
        _, dual = _solve(cost, A, upper, True, mip_max_nodes)
        if dual is not None:
            dual = math.ceil(dual * 1e4 - 1e-6) / 1e4
            value = min(value, dual)
    return OfflineBound(value=value, lp_value=lp_val, mip_dual_bound=dual, n_columns=A.shape[1],
                        n_rows=A.shape[0], rt_gpu_h=rt_h)
