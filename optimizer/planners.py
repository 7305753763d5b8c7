"""One entry point for every planner: ``plan(problem, planner) -> Plan`` (always verified).

``milp`` runs, in order: the size check (:func:`optimizer.diagnose.check_size`, raises before
anything is allocated, from the problem alone), the infeasibility diagnosis
(:func:`optimizer.diagnose.check_feasible`, raises naming step and numbers), then the strategy of
:class:`optimizer.strategy.MilpRun`: the three baselines (each verified), the greedy and LP-guided warm
starts, the master (or full) model solved under the work budget, with the best baseline plan as the answer
of last resort (``source="fallback"``). Its objective is never below the best baseline's
(:func:`best_baseline`); an unverified plan is never returned. On a typed cluster (``Cluster.nodes``) ``milp`` runs
:class:`optimizer.typed_milp.TypedMilpRun` (a master on (GPU type, node size) pools, then packing on nodes;
DESIGN §5 "Typed clusters"; with ``max_wait_steps`` set, with the starvation guard). The baselines ``fifo``, ``easy`` and
``priority`` are :func:`optimizer.baselines.baseline_plan`, stopped at ``time_limit_s``. ``fast`` is the fast mode
(:func:`optimizer.fast.fast_plan`, issue 29): the best verified of priority backfill and the MILP's greedy orders, in
milliseconds, legal by construction; the MILP seeds its search with the same candidates.
"""

from __future__ import annotations

import time
from dataclasses import replace

from optimizer.baselines import baseline_plan
from optimizer.capacity import Capacity
from optimizer.diagnose import check_feasible, check_size, coverage_shortfalls
from optimizer.errors import InputError
from optimizer.fast import FAST, fast_plan
from optimizer.plan import Plan
from optimizer.problem import Problem
from optimizer.ranking import UnverifiedPlanError, best_baseline, verified
from optimizer.strategy import MilpRun, deadline_status
from optimizer.typed_milp import TypedMilpRun

PLANNERS: tuple[str, ...] = ("milp", "fifo", "easy", "priority", FAST)

#: The planners' public face: :func:`plan` for every planner, :func:`best_baseline` (the MILP's answer of last
#: resort, also asked for by benchmarks and tests) and the error a plan failing verification raises.
__all__ = ["PLANNERS", "UnverifiedPlanError", "best_baseline", "plan"]


def _notes(problem: Problem) -> tuple[str, ...]:
    notes = list(coverage_shortfalls(problem))
    for jid, reason in problem.rejected_jobs:
        notes.append(f"rejected job {jid!r}: {reason}")
    return tuple(notes)


def plan(problem: Problem, planner: str = "milp", warm_start: Plan | None = None) -> Plan:
    """Plan ``problem`` with ``planner`` in :data:`PLANNERS`; the returned plan passed the verifier.

    ``settings.time_limit_s`` bounds the whole call (DESIGN §5, budget and size): a baseline
    planner stops placing jobs at it; ``milp`` checks the model size first, runs the three
    baselines (always to the end: they are the answer of last resort), then every further step
    (greedy warm starts, master build, LP-guided start, master solve, packing, full model) only
    with the budget left, giving the MILP solve what remains but at least
    :data:`optimizer.strategy.MIN_SOLVE_S`; when too little is left for that, it returns the best
    baseline plan with status ``time_limit`` and source ``fallback``. ``warm_start`` (milp only): a
    plan of another problem tried as a start.

    Raises :class:`optimizer.errors.InputError` for an unknown planner,
    :class:`optimizer.diagnose.ModelTooLargeError` (milp) when the model would exceed
    ``settings.max_binaries`` or the column and nonzero limits of
    :func:`optimizer.diagnose.check_size` (checked before anything else is computed), and
    :class:`optimizer.diagnose.InfeasibleProblemError` when no valid plan exists.
    """
    t0 = time.perf_counter()
    if planner not in PLANNERS:
        raise InputError(f"planner {planner!r} is unknown; choose one of {', '.join(PLANNERS)}")
    typed = problem.cluster.typed
    if planner == "milp" and not typed:
        check_size(problem)
    check_feasible(problem)
    notes = _notes(problem)
    capacity = Capacity.of(problem)  # once per plan, passed to every stage
    if planner == FAST:
        deadline = t0 + problem.settings.time_limit_s
        fp = fast_plan(problem, deadline, capacity)  # verified inside: the best-ranked candidate the verifier accepts
        return replace(fp, notes=(*notes, *fp.notes))
    if planner != "milp":
        deadline = t0 + problem.settings.time_limit_s
        return replace(verified(baseline_plan(problem, planner, deadline, capacity), problem), notes=notes)
    if typed:  # the pool master and packing (issue 26), with the starvation guard when max_wait_steps is set
        return deadline_status(TypedMilpRun(problem, warm_start, notes, t0, capacity).plan(), problem)
    return deadline_status(MilpRun(problem, warm_start, notes, t0, capacity).plan(), problem)
