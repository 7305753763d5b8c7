"""The MILP solver: HiGHS behind our own outcome type, statuses, work budget and a killable child process.

:mod:`~optimizer.solver.highs`: the HiGHS call, :class:`SolveStatus` with its exhaustive map from HiGHS's
model statuses, :class:`SparseModel`, :class:`SolveOutcome`, :func:`check_solution`;
:mod:`~optimizer.solver.budget`: the deterministic work budget (:func:`auto_work_limit`, ``WORK_*``);
:mod:`~optimizer.solver.isolate`: :func:`solve`, the entry point, running HiGHS in a forked child killed at
its wall-clock allowance. The names below are the package's public face.
"""

from optimizer.solver.budget import (
    WORK_CPU_S_PER_CHECK,
    WORK_LOAD_FACTOR,
    WORK_MASTER_SHARE,
    WORK_MAX_CHECKS,
    WORK_MIN_CHECKS,
    WORK_ROOT_CHECKS,
    auto_work_limit,
)
from optimizer.solver.highs import (
    OUTCOMES,
    SolveOutcome,
    SolveStatus,
    SparseModel,
    check_solution,
    map_status,
    mip_gap,
    quiet_banner,
    use_threads,
)
from optimizer.solver.isolate import KILL_GRACE_S, isolation_available, solve, solve_isolated

__all__ = [
    "KILL_GRACE_S",
    "OUTCOMES",
    "WORK_CPU_S_PER_CHECK",
    "WORK_LOAD_FACTOR",
    "WORK_MASTER_SHARE",
    "WORK_MAX_CHECKS",
    "WORK_MIN_CHECKS",
    "WORK_ROOT_CHECKS",
    "SolveOutcome",
    "SolveStatus",
    "SparseModel",
    "auto_work_limit",
    "check_solution",
    "isolation_available",
    "map_status",
    "mip_gap",
    "quiet_banner",
    "solve",
    "solve_isolated",
    "use_threads",
]
