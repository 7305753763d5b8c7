"""The work budget of a MILP solve: HiGHS limit checks counted and the solve interrupted at the limit (DESIGN §5).

:class:`WorkBudget` counts the checks on one ``Highs`` object (and defers Ctrl-C during the solve);
:func:`auto_work_limit` sizes the default budget from the model's columns and the plan's time limit, with the
``WORK_*`` constants measured on the 2-core bench machine.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading

import numpy as np

_DEFERRED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class WorkBudget:
    """Counts HiGHS's MIP limit checks on one ``Highs`` object and interrupts the solve at the ``limit``-th (see :func:`optimizer.solver.isolate.solve`); with ``on_event`` also reports every improving solution and bound change.

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
