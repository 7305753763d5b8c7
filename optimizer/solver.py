"""A thin HiGHS wrapper: our own outcome type, an exhaustive status map, gap for max and min.

One fresh ``highspy.Highs`` object per solve, dropped before returning (case C17b: repeated
solves in one process must not accumulate memory). The model is passed in one call through
``passModel`` with a column-wise sparse matrix (much faster than the modelling API for large
models, see ../shared/STACK.md).

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
import multiprocessing
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field, replace

import highspy
import numpy as np
from scipy import sparse

OUTCOMES: tuple[str, ...] = (
    "optimal",
    "time_limit",
    "no_solution",
    "infeasible",
    "unbounded_or_infeasible",
    "unbounded",
    "solver_error",
    "unknown",
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


def map_status(highs_status_name: str, has_incumbent: bool) -> str:
    """Map a HiGHS model status name (e.g. ``"kTimeLimit"``) to one of :data:`OUTCOMES`.

    Unknown names map to ``"unknown"``; this function never raises.
    """
    name = highs_status_name.rsplit(".", 1)[-1]
    if name in ("kOptimal", "kModelEmpty"):
        return "optimal"
    if name in _LIMIT_STATUSES:
        return "time_limit" if has_incumbent else "no_solution"
    if name == "kInfeasible":
        return "infeasible"
    if name == "kUnboundedOrInfeasible":
        return "unbounded_or_infeasible"
    if name == "kUnbounded":
        return "unbounded"
    if name in _ERROR_STATUSES:
        return "solver_error"
    return "unknown"


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

    ``status`` one of :data:`OUTCOMES`; ``highs_status`` the raw HiGHS model status name;
    ``objective`` the incumbent's objective (None without one); ``bound`` the dual bound;
    ``gap`` from :func:`mip_gap`; ``solve_s`` wall seconds of ``run()``; ``x`` the column values
    (None without an incumbent); ``message`` a readable sentence; ``wall_clock_limited`` True when
    HiGHS stopped on ``time_limit_s`` (kTimeLimit); ``nodes`` branch-and-bound nodes; ``work`` the
    HiGHS MIP limit checks counted (the unit of ``mip_work_limit``; 0 without a work limit or for a
    pure LP); ``iterations`` HiGHS's simplex iteration count (``simplex_iteration_count``: of the LP
    for a pure LP; 0 when the child was killed).
    """

    status: str
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


def solve(
    model: SparseModel,
    *,
    time_limit_s: float = 30.0,
    mip_rel_gap: float = 1e-3,
    threads: int = 1,
    random_seed: int = 0,
    start: np.ndarray | None = None,
    presolve: bool = True,
    mip_work_limit: int | None = None,
    isolate: bool | None = None,
    kill_after_s: float | None = None,
    allow_restart: bool = True,
) -> SolveOutcome:
    """Solve ``model`` with a fresh HiGHS object; never raises for solver trouble.

    ``isolate`` (default :func:`isolation_available`): run HiGHS in a child process that is killed
    when ``kill_after_s`` wall seconds (default ``time_limit_s`` + :data:`KILL_GRACE_S`) have passed
    since the call, so the call returns within that bound whatever HiGHS does (its own time limit is
    checked rarely in presolve probing and root cut separation: 172 s and 143 s past a 30-s limit on
    a 512-GPU master, ERGO-Code/HiGHS #885, #1278, #2226). The child streams every improving MIP
    solution and the dual bound to this process, so a killed solve still returns its last incumbent
    (checked with :func:`check_solution`) and last bound, status ``time_limit`` (or ``no_solution``),
    ``highs_status`` ``"killed"`` and ``wall_clock_limited`` True (see :func:`solve_isolated`).

    ``mip_work_limit``: a deterministic work budget, counted in HiGHS MIP *limit checks* — the
    points where HiGHS itself tests its time and node limits (between root cut rounds, around
    heuristics, at nodes), observed through the ``kCallbackMipInterrupt`` callback, which HiGHS
    calls at each of them in the main MIP (not in its sub-MIPs). The solve is interrupted at the
    ``mip_work_limit``-th check (HiGHS status kInterrupt; the incumbent is kept). HiGHS 1.16 has no
    deterministic work measure of its own (work units are planned upstream, HiGHS issue #3133) and
    ``mip_max_nodes`` leaves root-node work unbounded (root cut loops, restarts and sub-MIP
    heuristics took 10–20 s on 600-column masters). The time per check depends on the instance:
    measured on the 2-core bench machine, 16–40 ms on the bench's 500–800-column masters (at most
    1.4 s between two checks) and about 130 ms on a 120-job, 64-GPU master. With ``threads=1`` and a fixed
    ``random_seed`` the outcome then does not depend on machine speed or load, provided
    ``time_limit_s`` (then only a deadline) is not reached (``wall_clock_limited`` says when it
    was). None = no work limit (the clock decides). Pure LPs ignore it (they solve in well under
    a second and stop on ``time_limit_s`` only).

    ``allow_restart`` False sets HiGHS's ``mip_allow_restart`` off (no restart of the root after
    presolve reductions found there): on the count masters of benchmarks/bench_scale.py it halved
    the CPU time to a 1 % gap at 64 GPUs x 30 jobs (5.7 s to 2.8 s) and ended with smaller gaps at 128
    and 256 GPUs (2-core machine, load 8).

    ``start`` (n,) is a complete feasible column vector passed as the initial incumbent
    (``Highs.setSolution``). When the result with a start fails :func:`check_solution`, the
    solve is repeated once without the start (``message`` says so). A highspy exception becomes
    ``status="solver_error"`` with the exception text in ``message``.
    """
    t0 = time.perf_counter()
    if model.n_cols == 0:  # nothing to decide (no jobs, no services): HiGHS is not needed
        ok = bool(np.all(np.asarray(model.row_lower) <= 0.0) and np.all(np.asarray(model.row_upper) >= 0.0))
        obj = float(model.offset)
        if ok:
            return SolveOutcome("optimal", "kModelEmpty", obj, obj, 0.0, 0.0, np.zeros(0), "empty model")
        return SolveOutcome("infeasible", "kModelEmpty", None, None, None, 0.0, None, "the model is infeasible")
    iso = isolation_available() if isolate is None else bool(isolate)
    grace = KILL_GRACE_S + 1e-6 * int(sparse.csc_matrix(model.A).nnz)  # loading a large model takes longer
    kill_s = float(time_limit_s) + grace if kill_after_s is None else float(kill_after_s)
    kill_at = t0 + kill_s

    def once(limit_s: float, start_: np.ndarray | None) -> SolveOutcome:
        args = (model, limit_s, mip_rel_gap, threads, random_seed, start_, presolve, mip_work_limit, allow_restart)
        if iso:
            return solve_isolated(args, kill_at)
        return _solve_once(*args)

    out = once(time_limit_s, start)
    if out.x is not None and out.objective is not None:
        why = check_solution(model, out.x, out.objective)
        if why and start is not None and kill_at - time.perf_counter() > 0.1:
            left = max(1e-3, min(time_limit_s - (time.perf_counter() - t0), kill_at - time.perf_counter()))
            again = once(left, None)
            note = f"warm start discarded ({why})"
            if again.x is not None and again.objective is not None:
                why2 = check_solution(model, again.x, again.objective)
                if why2:
                    return _replace(again, status="solver_error", x=None, objective=None,
                                    message=f"{note}; HiGHS returned an inconsistent solution: {why2}")
            return _replace(again, solve_s=time.perf_counter() - t0, message=f"{again.message}; {note}",
                            wall_clock_limited=again.wall_clock_limited or out.wall_clock_limited)
        if why:
            return _replace(out, status="solver_error", x=None, objective=None,
                            message=f"HiGHS returned an inconsistent solution: {why}")
    return out


def _replace(o: SolveOutcome, **kw) -> SolveOutcome:
    return replace(o, **kw)


def _solve_once(
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
        st = h.passModel(lp)
        if st == highspy.HighsStatus.kError:
            return SolveOutcome("solver_error", "passModel", None, None, None, time.perf_counter() - t0,
                                message="HiGHS refused the model (passModel error)")
        if start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = np.asarray(start, dtype=np.float64).tolist()
            sol.value_valid = True
            h.setSolution(sol)
        budget = None
        if integer.any() and (mip_work_limit is not None or on_event is not None):
            budget = _WorkBudget(h, highspy, mip_work_limit, on_event)
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
        if has_inc and status in ("optimal", "time_limit", "unknown"):
            x = np.array(h.getSolution().col_value, dtype=np.float64)
            obj = float(info.objective_function_value)
            if integer.any():
                bound = float(info.mip_dual_bound)
            else:
                bound = obj
        gap = mip_gap(obj, bound)
        if status == "optimal" and gap is None and obj is not None:
            gap = 0.0
        nodes = int(getattr(info, "mip_node_count", 0) or 0) if integer.any() else 0
        iters = int(getattr(info, "simplex_iteration_count", 0) or 0)
        return SolveOutcome(status, name, obj, bound, gap, run_s, x,
                            _message(status, name, time_limit_s, mip_work_limit),
                            wall_clock_limited=(name == "kTimeLimit"), nodes=max(0, nodes),
                            work=budget.checks if (budget is not None and mip_work_limit is not None) else 0,
                            iterations=max(0, iters))
    except Exception as exc:  # noqa: BLE001 - solver trouble becomes an outcome, never a crash
        return SolveOutcome("solver_error", "exception", None, None, None, time.perf_counter() - t0,
                            message=f"HiGHS raised {type(exc).__name__}: {exc}")
    finally:
        if h is not None:
            with contextlib.suppress(Exception):
                h.clear()
        del h


_DEFERRED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _WorkBudget:
    """Counts HiGHS's MIP limit checks on one ``Highs`` object and interrupts the solve at the ``limit``-th (see :func:`solve`); with ``on_event`` also reports every improving solution and bound change.

    ``limit`` None: no work limit (only counting and reporting). ``on_event(kind, objective,
    dual_bound, x)``: called with ``"incumbent"`` and the solution (n,) at each improving MIP
    solution (``kCallbackMipImprovingSolution``; HiGHS hands the solution in the original model's
    columns) and with ``"bound"`` (``x`` None) at a limit check where the dual bound moved.

    HiGHS swallows an exception raised while it is in a Python callback and reports kSolveError,
    so Ctrl-C (SIGINT) or SIGTERM arriving during the solve would turn into a "solver error" and a
    baseline fallback. While :meth:`running` is active (main thread only; elsewhere Python delivers
    no signals) SIGINT/SIGTERM are only recorded; the next check interrupts the solve, and on exit
    the signal is delivered to the previous handler as if it had arrived just after the solve.
    Any other exception raised in the callback is kept and re-raised the same way.
    """

    def __init__(self, h, highspy, limit: int | None, on_event=None) -> None:
        self.checks = 0
        self.limit = None if limit is None else int(limit)
        self.error: BaseException | None = None
        self.signals: list[int] = []
        self.on_event = on_event
        self.last_bound: float | None = None
        h.setCallback(self._on_check, None)
        h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)
        if on_event is not None:
            self._improving = highspy.cb.HighsCallbackType.kCallbackMipImprovingSolution
            h.startCallback(self._improving)

    def _on_check(self, cb_type, _message, data_out, data_in, _user_data) -> None:
        try:
            if self.on_event is not None and cb_type == self._improving:
                x = np.array(data_out.mip_solution, dtype=np.float64)
                self.on_event("incumbent", float(data_out.objective_function_value),
                              float(data_out.mip_dual_bound), x)
                return
            self.checks += 1
            if self.on_event is not None:
                b = float(data_out.mip_dual_bound)
                if math.isfinite(b) and b != self.last_bound:
                    self.last_bound = b
                    self.on_event("bound", float(data_out.mip_primal_bound), b, None)
            if (self.limit is not None and self.checks >= self.limit) or self.signals:
                data_in.user_interrupt = True
        except BaseException as exc:  # noqa: BLE001 - kept and re-raised after run()
            self.error = exc
            data_in.user_interrupt = True

    @contextlib.contextmanager
    def running(self):
        """Defer SIGINT/SIGTERM during ``run()`` (see the class docstring); re-raise afterwards."""
        saved: dict[int, object] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in _DEFERRED_SIGNALS:
                saved[sig] = signal.signal(sig, lambda signum, _frame: self.signals.append(signum))
        try:
            yield
        finally:
            for sig, prev in saved.items():
                signal.signal(sig, prev)
        for signum in self.signals[:1]:
            prev = saved.get(signum)
            if callable(prev):
                prev(signum, None)
            elif prev == signal.SIG_DFL:
                signal.raise_signal(signum)
        if self.error is not None:
            raise self.error


#: Wall seconds per CPU second assumed for a single-threaded solve on the loaded 2-core bench machine.
#: At load average 8 with equal nice values a process gets about a quarter of a core (factor 4);
#: measured with benchmarks/bench_scale.py run at nice 10 beside other users' work at load 10.6: 23.8 s
#: wall for a 64 x 30 plan whose HiGHS child used 2.9 s of CPU (factor 8.2); with 4 more busy loops at
#: nice 10 (load 10.9) 2.1 s of CPU took 27 s (factor 13). 8 keeps 64 x 30 above the 208 checks its
#: 1 % gap needs (277 at 30 s) while the plan fits its limit at factor 8 and nearly at 13. The
#: default work budget (:func:`auto_work_limit`) is sized so that the master solve ends in its share
#: of ``time_limit_s`` at that rate; the wall-clock deadline is then only a safety stop (DESIGN §5).
WORK_LOAD_FACTOR = 8.0

#: Share of ``time_limit_s`` the default work budget gives the master MILP (the rest: baselines,
#: greedy starts, master build, LP relaxation, packing and verification, and slack).
WORK_MASTER_SHARE = 0.5

#: CPU seconds per HiGHS limit check per ``n_cols ** 1.5`` (see :func:`auto_work_limit`).
WORK_CPU_S_PER_CHECK = 2.74e-8

#: Root-node work (presolve, root LP, first cut rounds and heuristics) in limit-check equivalents.
WORK_ROOT_CHECKS = 390

#: Least and most default work budget of a MILP solve (HiGHS limit checks; below the least, none).
WORK_MIN_CHECKS = 20
WORK_MAX_CHECKS = 20_000


def auto_work_limit(n_cols: int, time_limit_s: float) -> int:
    """The default deterministic work budget of one MILP solve, in HiGHS limit checks (``mip_work_limit``).

    ``n_cols`` the model's columns, ``time_limit_s`` the plan's wall-clock limit (s). The budget is a
    function of these two numbers only (never of the clock), so a plan does not depend on how much
    CPU the machine gave it. It is sized from a CPU model measured on the 2-core bench machine
    (benchmarks/bench_scale.py masters of 2,190–14,268 columns, 64–512 GPUs; DESIGN §5):
    ``cpu_s(W) = WORK_CPU_S_PER_CHECK · n_cols**1.5 · (WORK_ROOT_CHECKS + W)``, which matched the
    child's CPU time within 25 % (64 GPUs: 2.8 s at 600 checks; 256: 8.9 s at 50, 31.9 s at 1,000;
    512: 18.5 s at 100, 28.2 s at 300). ``W`` is chosen so that ``cpu_s(W)`` fills
    ``WORK_MASTER_SHARE · time_limit_s / WORK_LOAD_FACTOR`` (the master's share of the limit on the
    loaded machine), capped at ``WORK_MAX_CHECKS``. Returns 0 when fewer than ``WORK_MIN_CHECKS`` checks fit (the
    root node alone would overrun the share): the planner then runs no branch-and-bound
    (DESIGN §5). Raises ValueError for ``n_cols`` < 0 or ``time_limit_s`` <= 0.
    """
    if n_cols < 0:
        raise ValueError(f"n_cols = {n_cols} must be >= 0")
    if not time_limit_s > 0:
        raise ValueError(f"time_limit_s = {time_limit_s} must be > 0")
    cpu_s = WORK_MASTER_SHARE * float(time_limit_s) / WORK_LOAD_FACTOR
    per_check = WORK_CPU_S_PER_CHECK * max(1, int(n_cols)) ** 1.5
    w = math.floor(cpu_s / per_check) - WORK_ROOT_CHECKS
    return 0 if w < WORK_MIN_CHECKS else int(min(WORK_MAX_CHECKS, w))


_SCHEDULER_LOCK = threading.Lock()
_scheduler_threads: int | None = None


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


def _message(status: str, name: str, time_limit_s: float, mip_work_limit: int | None = None) -> str:
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


#: Seconds a child solve may run past its HiGHS ``time_limit`` before it is killed (when the caller
#: gives no ``kill_after_s``): HiGHS's usual overshoot of its limit, loading and checking the model,
#: was 0.1–0.4 s on an idle 2-core machine and 1.7 s at load average 3.8 (DESIGN §5).
KILL_GRACE_S = 2.0

_MP_CONTEXT = None
_MP_LOCK = threading.Lock()


def isolation_available() -> bool:
    """True when solves can run in a killable child process (:func:`solve_isolated`).

    False inside a daemonic process (multiprocessing forbids it children; e.g. a Dask worker
    started by its nanny), and after this process itself ran a HiGHS solve with more than one
    thread (its thread pool cannot be forked, see :func:`_context`): there :func:`solve` runs HiGHS
    in this process, where only HiGHS's own time limit applies.
    """
    if multiprocessing.current_process().daemon:
        return False
    return _scheduler_threads is None or _scheduler_threads <= 1


def _context():
    """The ``fork`` multiprocessing context.

    ``fork`` rather than ``spawn`` or ``forkserver``: those re-import the caller's ``__main__`` in
    every child (a script without an ``if __name__ == "__main__"`` guard would run again) and
    import numpy, scipy and highspy again (0.5–1 s per solve), while a forked child starts in
    milliseconds with the model already in its memory (nothing is pickled on the way in). The
    child only runs HiGHS and writes to its pipe. HiGHS's thread pool is not inherited in a usable
    state by a forked child, so a process that ran a multi-threaded solve in itself
    (``isolate=False``, ``threads`` > 1) no longer isolates (:func:`isolation_available`).
    """
    global _MP_CONTEXT
    with _MP_LOCK:
        if _MP_CONTEXT is None:
            _MP_CONTEXT = multiprocessing.get_context("fork")
        return _MP_CONTEXT


def _die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``), so a solve never outlives a killed planner; exit at once if the parent is already gone. No-op elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG (linux/prctl.h)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent_pid:
        os._exit(0)


def _child_main(conn, args: tuple, parent_pid: int = 0) -> None:
    """Child side of :func:`solve_isolated`: solve, streaming events, then send the outcome."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it kills this process
    if parent_pid:
        _die_with_parent(parent_pid)

    def on_event(kind: str, objective: float, bound: float, x: np.ndarray | None) -> None:
        conn.send((kind, objective, bound, x))

    try:
        (model, time_limit_s, mip_rel_gap, threads, random_seed, start, presolve, mip_work_limit, allow_restart) = args
        out = _solve_once(model, time_limit_s, mip_rel_gap, threads, random_seed, start, presolve, mip_work_limit,
                          allow_restart, on_event=on_event)
        conn.send(("done", out))
    finally:
        conn.close()


def solve_isolated(args: tuple, kill_at: float) -> SolveOutcome:
    """Run ``_solve_once(*args)`` in a child process; kill it at ``kill_at`` (``time.perf_counter()`` value).

    ``args`` = (model, time_limit_s, mip_rel_gap, threads, random_seed, start, presolve,
    mip_work_limit, allow_restart). Returns the child's outcome when it finishes in time. Otherwise the child is
    killed (SIGKILL) and the outcome is built from what it streamed: the last improving solution
    (or, before the first, the ``start`` given), when it passes :func:`check_solution`, and the last
    dual bound, status ``time_limit`` with a
    solution and ``no_solution`` without, ``highs_status`` ``"killed"``, ``wall_clock_limited`` True.
    A child that dies otherwise gives ``solver_error``. Ctrl-C in this process kills the child and
    propagates; if this process dies (``kill -9``), Linux kills the child too (:func:`_die_with_parent`).
    """
    model = args[0]
    t0 = time.perf_counter()
    recv, send = _context().Pipe(duplex=False)
    proc = _context().Process(target=_child_main, args=(send, args, os.getpid()), daemon=True)
    inc: tuple[float, np.ndarray] | None = None
    bound: float | None = None
    done: SolveOutcome | None = None
    try:
        proc.start()
        send.close()
        while done is None:
            wait = kill_at - time.perf_counter()
            if wait <= 0 or not recv.poll(wait):
                break
            try:
                msg = recv.recv()
            except EOFError:  # the child died without sending its outcome
                break
            if msg[0] == "done":
                done = msg[1]
            elif msg[0] == "incumbent":
                inc = (msg[1], msg[3])
                bound = msg[2] if math.isfinite(msg[2]) else bound
            else:
                bound = msg[2]
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5.0)
        exitcode = proc.exitcode
        recv.close()
        with contextlib.suppress(ValueError):
            proc.close()
    elapsed = time.perf_counter() - t0
    if done is not None:
        return done
    if exitcode not in (None, -signal.SIGKILL) and time.perf_counter() < kill_at:
        return SolveOutcome("solver_error", "child", None, None, None, elapsed,
                            message=f"the HiGHS child process ended with exit code {exitcode}")
    x = obj = None
    start = args[5]
    if inc is None and start is not None:  # HiGHS had not reported its start yet: it is the incumbent
        s = np.asarray(start, dtype=np.float64)
        inc = (float(np.dot(model.cost, s) + model.offset), s)
    if inc is not None and not check_solution(model, inc[1], inc[0]):
        obj, x = inc
    status = "time_limit" if x is not None else "no_solution"
    integer = bool(np.asarray(model.integer, dtype=bool).any())
    b = bound if (integer and bound is not None) else None
    limit_s = float(args[1])
    return SolveOutcome(status, "killed", obj, b, mip_gap(obj, b), elapsed, x,
                        f"HiGHS (time limit {limit_s:.3g} s) was stopped from outside after {elapsed:.1f} s "
                        + ("with its last feasible plan: not proven optimal" if x is not None
                           else "without a feasible allocation"),
                        wall_clock_limited=True)
