"""The HiGHS call: our own outcome type, one status StrEnum with an exhaustive map, gap for max and min.

One fresh ``highspy.Highs`` object per solve, dropped before returning (case C17b: repeated
solves in one process must not accumulate memory). The model is passed in one call through
``passModel`` with a column-wise sparse matrix (much faster than the modelling API for large
models, see ../shared/STACK.md). The work budget of a solve is :mod:`optimizer.solver.budget`; running it
in a killable child process, :mod:`optimizer.solver.isolate`.

Outcomes (``SolveOutcome.status``), from HiGHS's model status (cases C13, C14):

=====================  ===========================================================
``optimal``            kOptimal (within ``mip_rel_gap``) or kModelEmpty
``time_limit``         kTimeLimit (or another limit, e.g. the work limit ``mip_work_limit``,
                       which HiGHS reports as kInterrupt) with a feasible incumbent;
                       ``SolveOutcome.wall_clock_limited`` tells whether the wall clock
                       (kTimeLimit) stopped it
``no_solution``        kTimeLimit (or another limit) without a feasible incumbent
``infeasible``         kInfeasible
``unbounded_or_infeasible``  kUnboundedOrInfeasible (presolve could not tell which)
``unbounded``          kUnbounded (a modelling error in our use)
``solver_error``       kLoadError, kModelError, kPresolveError, kSolveError, kPostsolveError,
                       kMemoryLimit, or an exception raised by highspy
``unknown``            anything else (kNotset, kUnknown, a status added in a later HiGHS)
=====================  ===========================================================
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from enum import StrEnum

import highspy
import numpy as np
from scipy import sparse

from optimizer.solver.budget import WorkBudget


class SolveStatus(StrEnum):
    """How a solve ended, from HiGHS's model status (:func:`map_status`) through :class:`SolveOutcome` to :attr:`optimizer.plan.Plan.status`.

    A ``StrEnum``: ``SolveStatus.OPTIMAL == "optimal"``. The solver's outcomes are :data:`OUTCOMES` (the table
    above); two more are set only on a plan: ``FEASIBLE``, a valid plan made without a solver (a baseline or
    greedy plan), and ``DEADLINE``, a MILP plan that the wall-clock safety stop cut short (DESIGN §5). Where
    a plan came from is :class:`optimizer.plan.PlanSource`, not a status.
    """

    OPTIMAL = "optimal"  # MILP solved to the gap tolerance
    TIME_LIMIT = "time_limit"  # MILP stopped on its time or work limit with an incumbent: not proven optimal
    DEADLINE = "deadline"  # the wall-clock deadline (time_limit_s) stopped the plan before its work budget: load-dependent
    NO_SOLUTION = "no_solution"  # MILP stopped on its limit without an incumbent
    INFEASIBLE = "infeasible"
    UNBOUNDED_OR_INFEASIBLE = "unbounded_or_infeasible"
    UNBOUNDED = "unbounded"
    SOLVER_ERROR = "solver_error"
    UNKNOWN = "unknown"  # a HiGHS status we do not map; never a crash
    FEASIBLE = "feasible"  # a valid plan made without a solver (fifo, easy, priority, greedy)



#: The outcomes of a solve (:attr:`SolveOutcome.status`), in the order of the table above.
OUTCOMES: tuple[SolveStatus, ...] = (
    SolveStatus.OPTIMAL,
    SolveStatus.TIME_LIMIT,
    SolveStatus.NO_SOLUTION,
    SolveStatus.INFEASIBLE,
    SolveStatus.UNBOUNDED_OR_INFEASIBLE,
    SolveStatus.UNBOUNDED,
    SolveStatus.SOLVER_ERROR,
    SolveStatus.UNKNOWN,
)

_LIMIT_STATUSES = {
    "kTimeLimit",
    "kIterationLimit",
    "kSolutionLimit",
    "kInterrupt",
    "kHighsInterrupt",
    "kObjectiveBound",
    "kObjectiveTarget",
}
_ERROR_STATUSES = {"kLoadError", "kModelError", "kPresolveError", "kSolveError", "kPostsolveError", "kMemoryLimit"}


#: HiGHS model statuses that map to one outcome whatever the incumbent (the limits are in :data:`_LIMIT_STATUSES`).
_FIXED_STATUSES: dict[str, SolveStatus] = {
    "kOptimal": SolveStatus.OPTIMAL,
    "kModelEmpty": SolveStatus.OPTIMAL,
    "kInfeasible": SolveStatus.INFEASIBLE,
    "kUnboundedOrInfeasible": SolveStatus.UNBOUNDED_OR_INFEASIBLE,
    "kUnbounded": SolveStatus.UNBOUNDED,
    **{name: SolveStatus.SOLVER_ERROR for name in _ERROR_STATUSES},
}


def map_status(highs_status_name: str, has_incumbent: bool) -> SolveStatus:
    """Map a HiGHS model status name (e.g. ``"kTimeLimit"`` or ``"HighsModelStatus.kTimeLimit"``) to one of :data:`OUTCOMES`.

    A limit (:data:`_LIMIT_STATUSES`) is ``time_limit`` with an incumbent (``has_incumbent``), else
    ``no_solution``. Unknown names (kNotset, kUnknown, a status added in a later HiGHS) map to
    ``unknown``; this function never raises.
    """
    name = highs_status_name.rsplit(".", 1)[-1]
    if name in _LIMIT_STATUSES:
        return SolveStatus.TIME_LIMIT if has_incumbent else SolveStatus.NO_SOLUTION
    return _FIXED_STATUSES.get(name, SolveStatus.UNKNOWN)


def mip_gap(primal: float | None, bound: float | None) -> float | None:
    """Relative MIP gap as a fraction: ``|primal - bound| / |primal|`` (case C13c).

    Right for both senses: primal 1000 / bound 950 (minimise) and primal -1000 / bound -950
    (the same model maximising -cost) both give 0.05. Returns 0.0 when both are 0, None when
    either is missing or non-finite or the primal is 0 with a non-zero bound.
    """
    if primal is None or bound is None:
        return None
    p, b = float(primal), float(bound)
    if not (math.isfinite(p) and math.isfinite(b)):
        return None
    diff = abs(p - b)
    if diff <= 1e-12 * max(1.0, abs(p)):
        return 0.0
    if p == 0.0:
        return None
    return diff / abs(p)


@dataclass(frozen=True)
class SparseModel:
    """A MILP in arrays, ready for HiGHS.

    ``cost (n,)``, ``col_lower (n,)``, ``col_upper (n,)``, ``integer (n,) bool``; constraint
    matrix ``A (m, n)`` as a ``scipy.sparse`` matrix (any format); ``row_lower (m,)``,
    ``row_upper (m,)``; ``maximize`` the sense; ``offset`` a constant added to the objective.
    """

    cost: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    A: object
    row_lower: np.ndarray
    row_upper: np.ndarray
    maximize: bool = True
    offset: float = 0.0

    @property
    def n_cols(self) -> int:
        """Number of columns (variables)."""
        return int(len(self.cost))

    @property
    def n_rows(self) -> int:
        """Number of rows (constraints)."""
        return int(len(self.row_lower))


@dataclass(frozen=True)
class SolveOutcome:
    """The result of one solve.

    ``status`` one of :data:`OUTCOMES` (a :class:`SolveStatus`); ``highs_status`` the raw HiGHS model status name;
    ``objective`` the incumbent's objective (None without one); ``bound`` the dual bound;
    ``gap`` from :func:`mip_gap`; ``solve_s`` wall seconds of ``run()``; ``x`` the column values
    (None without an incumbent); ``message`` a readable sentence; ``wall_clock_limited`` True when
    HiGHS stopped on ``time_limit_s`` (kTimeLimit); ``nodes`` branch-and-bound nodes; ``work`` the
    HiGHS MIP limit checks counted (the unit of ``mip_work_limit``; 0 without a work limit or for a
    pure LP); ``iterations`` HiGHS's simplex iteration count (``simplex_iteration_count``: of the LP
    for a pure LP; 0 when the child was killed).
    """

    status: SolveStatus
    highs_status: str
    objective: float | None
    bound: float | None
    gap: float | None
    solve_s: float
    x: np.ndarray | None = field(default=None, compare=False, repr=False)
    message: str = ""
    wall_clock_limited: bool = False
    nodes: int = 0
    work: int = 0
    iterations: int = 0

    @property
    def has_solution(self) -> bool:
        """True when the solve returned a solution vector ``x``."""
        return self.x is not None


@contextlib.contextmanager
def quiet_banner():
    """Discard C-level stdout while the first HiGHS object is made: HiGHS 1.16 prints a two-line version banner there even with ``output_flag`` off, which would corrupt ``--json`` on stdout and clutter stderr.

    Only object construction is wrapped; solver messages are off anyway.
    """
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # pragma: no cover - no real fd 1
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def check_solution(model: SparseModel, x: np.ndarray, objective: float, tol: float = 1e-6) -> str:
    """Why ``x`` is not a feasible point of ``model`` with objective ``objective`` ("" when it is).

    Guards against solver results that are inconsistent with the model: with a start solution
    (``setSolution``) and presolve on, HiGHS 1.16 was seen to return its start vector as "optimal"
    with a wrong objective (128 for a point whose objective is 0, on the 8-GPU valley case).
    """
    scale = max(1.0, abs(objective))
    obj = float(np.dot(model.cost, x) + model.offset)
    if abs(obj - objective) > tol * scale:
        return f"reported objective {objective:.9g} but the solution's objective is {obj:.9g}"
    if np.any(x < model.col_lower - tol) or np.any(x > model.col_upper + tol):
        return "solution violates column bounds"
    integer = np.asarray(model.integer, dtype=bool)
    if integer.any() and np.any(np.abs(x[integer] - np.rint(x[integer])) > 1e-5):
        return "solution is not integral"
    ax = sparse.csr_matrix(model.A) @ x
    if np.any(ax < model.row_lower - tol * 10) or np.any(ax > model.row_upper + tol * 10):
        return "solution violates constraints"
    return ""


def highs_lp(model: SparseModel) -> highspy.HighsLp:
    """``model`` as one ``highspy.HighsLp`` (column-wise matrix, sense, offset, integrality) for ``passModel``."""
    A = sparse.csc_matrix(model.A, shape=(model.n_rows, model.n_cols))
    A.sort_indices()
    lp = highspy.HighsLp()
    lp.num_col_ = model.n_cols
    lp.num_row_ = model.n_rows
    lp.col_cost_ = np.asarray(model.cost, dtype=np.float64)
    lp.col_lower_ = np.asarray(model.col_lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(model.col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(model.row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(model.row_upper, dtype=np.float64)
    lp.offset_ = float(model.offset)
    lp.sense_ = highspy.ObjSense.kMaximize if model.maximize else highspy.ObjSense.kMinimize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_ = model.n_cols
    lp.a_matrix_.num_row_ = model.n_rows
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(np.float64)
    integer = np.asarray(model.integer, dtype=bool)
    if integer.any():
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if b else highspy.HighsVarType.kContinuous for b in integer
        ]
    return lp


def solve_once(
    model: SparseModel,
    time_limit_s: float,
    mip_rel_gap: float,
    threads: int,
    random_seed: int,
    start: np.ndarray | None,
    presolve: bool,
    mip_work_limit: int | None = None,
    allow_restart: bool = True,
    on_event=None,
) -> SolveOutcome:
    """One HiGHS solve of ``model`` in this process, with a fresh ``Highs`` object dropped before returning.

    Arguments as :func:`optimizer.solver.isolate.solve` (``presolve`` on or off); ``on_event(kind, objective,
    bound, x)`` receives every improving solution and bound change (:class:`~optimizer.solver.budget.WorkBudget`).
    Never raises for solver trouble: a highspy exception becomes status ``solver_error``.
    """
    t0 = time.perf_counter()
    h = None
    try:
        use_threads(highspy, int(threads))
        with quiet_banner():
            h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("time_limit", float(time_limit_s))
        h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
        h.setOptionValue("threads", int(threads))
        h.setOptionValue("random_seed", int(random_seed))
        h.setOptionValue("presolve", "on" if presolve else "off")
        if not allow_restart:
            h.setOptionValue("mip_allow_restart", False)

        integer = np.asarray(model.integer, dtype=bool)
        st = h.passModel(highs_lp(model))
        if st == highspy.HighsStatus.kError:
            return SolveOutcome(SolveStatus.SOLVER_ERROR, "passModel", None, None, None, time.perf_counter() - t0,
                                message="HiGHS refused the model (passModel error)")
        if start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = np.asarray(start, dtype=np.float64).tolist()
            sol.value_valid = True
            h.setSolution(sol)
        budget = None
        if integer.any() and (mip_work_limit is not None or on_event is not None):
            budget = WorkBudget(h, highspy, mip_work_limit, on_event)
        t1 = time.perf_counter()
        with budget.running() if budget is not None else contextlib.nullcontext():
            h.run()
        run_s = time.perf_counter() - t1
        ms = h.getModelStatus()
        name = str(ms).rsplit(".", 1)[-1]
        info = h.getInfo()
        # primal_solution_status: 0 none, 1 infeasible point, 2 feasible
        has_inc = int(getattr(info, "primal_solution_status", 0)) == 2
        status = map_status(name, has_inc)
        x = None
        obj = None
        bound = None
        if has_inc and status in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT, SolveStatus.UNKNOWN):
            x = np.array(h.getSolution().col_value, dtype=np.float64)
            obj = float(info.objective_function_value)
            if integer.any():
                bound = float(info.mip_dual_bound)
            else:
                bound = obj
        gap = mip_gap(obj, bound)
        if status == SolveStatus.OPTIMAL and gap is None and obj is not None:
            gap = 0.0
        nodes = int(getattr(info, "mip_node_count", 0) or 0) if integer.any() else 0
        iters = int(getattr(info, "simplex_iteration_count", 0) or 0)
        return SolveOutcome(status, name, obj, bound, gap, run_s, x,
                            _message(status, name, time_limit_s, mip_work_limit),
                            wall_clock_limited=(name == "kTimeLimit"), nodes=max(0, nodes),
                            work=budget.checks if (budget is not None and mip_work_limit is not None) else 0,
                            iterations=max(0, iters))
    except Exception as exc:  # noqa: BLE001 - solver trouble becomes an outcome, never a crash
        return SolveOutcome(SolveStatus.SOLVER_ERROR, "exception", None, None, None, time.perf_counter() - t0,
                            message=f"HiGHS raised {type(exc).__name__}: {exc}")
    finally:
        if h is not None:
            with contextlib.suppress(Exception):
                h.clear()
        del h


_SCHEDULER_LOCK = threading.Lock()
_scheduler_threads: int | None = None


def scheduler_threads() -> int | None:
    """The thread count HiGHS's global scheduler in this process was sized for (None before any in-process solve)."""
    return _scheduler_threads


def use_threads(highspy, threads: int) -> None:
    """HiGHS keeps one global thread scheduler per process, sized by the first solve: a later solve asking for another ``threads`` value returns model status kNotset without solving.

    Reset the scheduler when the requested count changes (solves in one process run one at a time;
    the lock keeps two callers from resetting at once). Every in-process HiGHS solve calls this first
    (:mod:`optimizer.bound` too): an untracked one sizes the scheduler without this process knowing, and a
    later forked solve with another ``threads`` came back kNotset (a test-order failure of
    ``test_changing_thread_count_between_solves_still_solves`` after the bound tests).
    """
    global _scheduler_threads
    with _SCHEDULER_LOCK:
        if _scheduler_threads is not None and _scheduler_threads != threads:
            highspy.Highs.resetGlobalScheduler(True)
        _scheduler_threads = threads


def _message(status: SolveStatus, name: str, time_limit_s: float, mip_work_limit: int | None = None) -> str:
    if name == "kInterrupt" and mip_work_limit is not None:
        limit = f"its work limit of {mip_work_limit} HiGHS limit checks"
    elif name == "kTimeLimit":
        limit = f"the time limit of {time_limit_s:g} s"
    else:
        limit = f"a HiGHS limit ({name})"
    return {
        "optimal": "solved to the requested gap",
        "time_limit": f"stopped at {limit} with a feasible plan: not proven optimal",
        "no_solution": f"stopped at {limit} without a feasible allocation",
        "infeasible": "the model is infeasible",
        "unbounded_or_infeasible": "HiGHS reports unbounded or infeasible: a modelling error, not a capacity problem",
        "unbounded": "HiGHS reports unbounded: a modelling error",
        "solver_error": f"HiGHS failed ({name})",
    }.get(status, f"HiGHS returned status {name}, which this wrapper does not map")


def replace_outcome(o: SolveOutcome, **kw) -> SolveOutcome:
    """``o`` with the fields ``kw`` changed (:func:`dataclasses.replace`)."""
    return replace(o, **kw)
