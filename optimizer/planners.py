"""One entry point for every planner: ``plan(problem, planner) -> Plan`` (always verified).

``milp`` runs, in order: the size check (:func:`optimizer.diagnose.check_size`, raises before
anything is allocated, from the problem alone), the infeasibility diagnosis
(:func:`optimizer.diagnose.check_feasible`, raises naming step and numbers), then the strategy of
:class:`optimizer.strategy.MilpRun`: the three baselines (each verified), the greedy and LP-guided warm
starts, the master (or full) model solved under the work budget, with the best baseline plan as the answer
of last resort (``source="fallback"``). Its objective is never below the best baseline's
(:func:`best_baseline`); an unverified plan is never returned. With a preemptible job in the problem the MILP and
the fast mode keep the surprise reserve (:mod:`optimizer.reserve`, issue 30) and are compared with priority
backfill run under it instead, so they may rank below a plain baseline, which ignores the reserve. On a typed cluster (``Cluster.nodes``) ``milp`` runs
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
from optimizer.preemption import bench_order, plan_stopping
from optimizer.problem import Problem
from optimizer.ranking import UnverifiedPlanError, best_baseline, verified
from optimizer.strategy import MilpRun, deadline_status
from optimizer.typed_milp import TypedMilpRun

PLANNERS: tuple[str, ...] = ("milp", "fifo", "easy", "priority", FAST)

#: The planners' public face: :func:`plan` for every planner, :func:`best_baseline` (the MILP's answer of last
#: resort, also asked for by benchmarks and tests) and the error a plan failing verification raises.
__all__ = ["PLANNERS", "UnverifiedPlanError", "best_baseline", "plan", "production_plan"]


def never_fits_on_its_types(problem: Problem) -> list[str]:
    """On a typed cluster, one note per queued job whose smallest size exceeds the GPUs up of all its types together.

    Such a job can never start (a block lies inside one node or covers whole nodes of one type), so every planner
    leaves it waiting; the note says why, e.g. ``job 'B': needs 8 GPUs of its types (a100); at most 4 are up``.
    An untyped cluster refuses a job larger than the cluster when the problem is read.
    """
    c = problem.cluster
    if not c.typed:
        return []
    down = set(problem.down_gpus)
    up: dict[str, int] = {}
    for o, nd in zip(c.node_offsets, c.nodes, strict=True):
        up[nd.gpu_type] = up.get(nd.gpu_type, 0) + sum(1 for g in range(o, o + nd.gpus)
                                                         if g not in down and g - o not in nd.down)
    out = []
    for j in problem.jobs:
        most = max((n for t, n in up.items() if j.eligible(t)), default=0)
        need = min(s.gpus for s in j.sizes)
        if need > most:
            of = f" of its types ({', '.join(j.gpu_types)})" if j.gpu_types else ""
            out.append(f"job {j.job_id!r}: needs {need} GPU{'s' if need != 1 else ''}{of}; at most {most} "
                       f"{'is' if most == 1 else 'are'} up on nodes of one type: it cannot start in any plan")
    return out


def deadlines_out_of_reach(problem: Problem) -> list[str]:
    """One note per queued job whose ``deadline_step`` is before the earliest step it could end.

    The earliest end is ``release_step`` + its shortest run: the fewest steps over its sizes and the GPU types it may
    run on (:meth:`Job.duration_on`). A deadline is not a planning constraint (DESIGN §3.1: it is carried for the
    risk report), so such a job is still planned; the note says that no plan meets it, e.g. ``job 'J': its deadline,
    step 3, is before its earliest possible end, step 5 (released at step 1, 4 steps at the shortest): it misses its
    deadline in every plan``.
    """
    c = problem.cluster
    out = []
    for j in problem.jobs:
        if j.deadline_step is None:
            continue
        shortest = min(j.duration_on(s, t, c) for s in j.sizes for t in c.gpu_types if j.eligible(t))
        end = j.release_step + shortest
        if end > j.deadline_step:
            out.append(f"job {j.job_id!r}: its deadline, step {j.deadline_step}, is before its earliest possible end, "
                       f"step {end} (released at step {j.release_step}, {shortest} step{'s' if shortest != 1 else ''} "
                       "at the shortest): it misses its deadline in every plan")
    return out


def _notes(problem: Problem) -> tuple[str, ...]:
    notes = list(coverage_shortfalls(problem))
    for jid, reason in problem.rejected_jobs:
        notes.append(f"rejected job {jid!r}: {reason}")
    notes.extend(never_fits_on_its_types(problem))
    notes.extend(deadlines_out_of_reach(problem))
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


def production_plan(problem: Problem, planner: str = "milp", warm_start: Plan | None = None) -> Plan:
    """The production replan (``gpuplan plan``, the pipelines' solve stage): :func:`plan` with the stop rule first.

    When the problem has preemptible running jobs and the services' step-0 demand exceeds the GPUs no running
    job holds (:func:`optimizer.preemption.rt_shortfall` > 0), the jobs
    :func:`optimizer.preemption.surge_stops` picks in ``planner``'s order
    (:func:`optimizer.preemption.bench_order`: the baselines lowest priority first, the others least lost value)
    are stopped, ``planner`` plans without them and the plan lists them in ``Plan.stops`` (DESIGN §5, issue 30):
    the same function the simulator's surge replan uses (:func:`optimizer.preemption.plan_stopping`). Otherwise
    this is :func:`plan` itself (same plan). The plan with stops is verified on ``problem``. Raises what
    :func:`plan` raises, and :class:`UnverifiedPlanError` when the plan with its stops fails the verifier.
    """
    out = plan_stopping(problem, lambda p: plan(p, planner, warm_start), bench_order(planner))
    return verified(out, problem) if out.stops else out
