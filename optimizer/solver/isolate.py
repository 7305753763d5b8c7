"""Solving in a killable child process, so a solve returns by its wall-clock allowance whatever HiGHS does.

:func:`solve` is the solver's entry point: HiGHS (:func:`optimizer.solver.highs.solve_once`) in a forked child
(:func:`solve_isolated`, :func:`isolation_available`) killed at ``kill_after_s``, or in this process where
children cannot be forked; a result inconsistent with the model is solved once more without the start.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import signal
import threading
import time

import numpy as np
from scipy import sparse

from optimizer.solver.highs import (
    SolveOutcome,
    SolveStatus,
    SparseModel,
    check_solution,
    mip_gap,
    replace_outcome,
    scheduler_threads,
    solve_once,
)


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
            return SolveOutcome(SolveStatus.OPTIMAL, "kModelEmpty", obj, obj, 0.0, 0.0, np.zeros(0), "empty model")
        return SolveOutcome(SolveStatus.INFEASIBLE, "kModelEmpty", None, None, None, 0.0, None, "the model is infeasible")
    iso = isolation_available() if isolate is None else bool(isolate)
    grace = KILL_GRACE_S + 1e-6 * int(sparse.csc_matrix(model.A).nnz)  # loading a large model takes longer
    kill_s = float(time_limit_s) + grace if kill_after_s is None else float(kill_after_s)
    kill_at = t0 + kill_s

    def once(limit_s: float, start_: np.ndarray | None) -> SolveOutcome:
        args = (model, limit_s, mip_rel_gap, threads, random_seed, start_, presolve, mip_work_limit, allow_restart)
        if iso:
            return solve_isolated(args, kill_at)
        return solve_once(*args)

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
                    return replace_outcome(again, status=SolveStatus.SOLVER_ERROR, x=None, objective=None,
                                    message=f"{note}; HiGHS returned an inconsistent solution: {why2}")
            return replace_outcome(again, solve_s=time.perf_counter() - t0, message=f"{again.message}; {note}",
                            wall_clock_limited=again.wall_clock_limited or out.wall_clock_limited)
        if why:
            return replace_outcome(out, status=SolveStatus.SOLVER_ERROR, x=None, objective=None,
                            message=f"HiGHS returned an inconsistent solution: {why}")
    return out


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
    threads = scheduler_threads()
    return threads is None or threads <= 1


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
        out = solve_once(model, time_limit_s, mip_rel_gap, threads, random_seed, start, presolve, mip_work_limit,
                          allow_restart, on_event=on_event)
        conn.send(("done", out))
    finally:
        conn.close()


def solve_isolated(args: tuple, kill_at: float) -> SolveOutcome:
    """Run ``solve_once(*args)`` in a child process; kill it at ``kill_at`` (``time.perf_counter()`` value).

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
        return SolveOutcome(SolveStatus.SOLVER_ERROR, "child", None, None, None, elapsed,
                            message=f"the HiGHS child process ended with exit code {exitcode}")
    x = obj = None
    start = args[5]
    if inc is None and start is not None:  # HiGHS had not reported its start yet: it is the incumbent
        s = np.asarray(start, dtype=np.float64)
        inc = (float(np.dot(model.cost, s) + model.offset), s)
    if inc is not None and not check_solution(model, inc[1], inc[0]):
        obj, x = inc
    status = SolveStatus.TIME_LIMIT if x is not None else SolveStatus.NO_SOLUTION
    integer = bool(np.asarray(model.integer, dtype=bool).any())
    b = bound if (integer and bound is not None) else None
    limit_s = float(args[1])
    return SolveOutcome(status, "killed", obj, b, mip_gap(obj, b), elapsed, x,
                        f"HiGHS (time limit {limit_s:.3g} s) was stopped from outside after {elapsed:.1f} s "
                        + ("with its last feasible plan: not proven optimal" if x is not None
                           else "without a feasible allocation"),
                        wall_clock_limited=True)
