"""One entry point for every planner: ``plan(problem, planner) -> Plan`` (always verified).

``milp`` runs, in order: the size check (:func:`optimizer.diagnose.check_size`, raises before
anything is allocated, from the problem alone), the infeasibility diagnosis
(:func:`optimizer.diagnose.check_feasible`, raises naming step and numbers), the three baselines
(each verified), the model build, and one
HiGHS solve warm-started from the best verified plan among the baselines, the demand-following
greedy plans (:func:`optimizer.baselines.greedy_plans`), the LP-guided greedy plan
(:func:`optimizer.decomposition.lp_guided_plan`) and ``warm_start`` (so its objective is
never below the best baseline's). Its plan is verified; when the solve ends without a usable
plan (no incumbent, infeasible, unbounded-or-infeasible, solver error, unknown status, or a plan
the verifier rejects) the best baseline plan is returned with ``source="fallback"``
(``fallback=True``), the MILP's own outcome as ``status`` and a message giving it. An unverified
plan is never returned.

Budget (DESIGN §5, case F05): every step shares one deadline, ``time_limit_s`` after :func:`plan`
is called. The three baselines always run to the end (they are the answer of last resort, and
event-driven they take milliseconds: 0.04 s each on a 1,440-step, 30-job day); the greedy warm
starts, the LP-guided start, the block-packing MILP and the full model run only while at least
:data:`MIN_SOLVE_S` is left for the MILP; the master (or full model) solve gets the rest minus
:data:`AFTER_SOLVE_S`. With less than :data:`MIN_SOLVE_S` left before the solve, the best baseline
plan is returned with status ``time_limit``, source ``fallback`` and a message giving the time
each step took. Without ``settings.mip_work_limit`` the clock decides where
each solve stops, so the plan depends on machine speed. With it, every MILP solve stops on that
work limit and the deadline only matters if the plan as a whole reaches it; single-threaded with a
fixed seed the plan is then reproducible, and ``Plan.wall_clock_limited`` (plus a note) says when
the deadline was reached after all.

When the master's starts cannot be packed into aligned blocks, the full model is solved up to
``settings.full_model_max_binaries``; above it the plan is the best verified placement that the
master admits (:func:`optimizer.decomposition.master_admits`: the master-guided repair, the
greedy plans, the warm start or a baseline), status ``"time_limit"`` (not proven optimal), source
``"repair"``, with the master's dual bound when the plan's objective is within it. A plan from the
master whose starts were packed has source ``"decomposition"``; one from the full model ``"milp"``.
"""

from __future__ import annotations

import time
from dataclasses import replace

from optimizer.baselines import BASELINES, assemble_plan, baseline_plan, greedy_plans
from optimizer.decomposition import (
    build_count_model,
    count_picks,
    count_vector,
    lp_guided_plan,
    master_admits,
    master_guided_plan,
    pack_offsets,
)
from optimizer.diagnose import (
    MAX_MODEL_COLUMNS,
    MAX_MODEL_NONZEROS,
    check_feasible,
    check_size,
    coverage_shortfalls,
    estimate_size,
)
from optimizer.errors import InputError
from optimizer.milp import build_model, plan_to_vector, solution_starts, solve_model
from optimizer.plan import Plan, PlanSource, SolveStatus
from optimizer.problem import Problem
from optimizer.solver import SolveOutcome, mip_gap, solve
from optimizer.verify import verify

PLANNERS: tuple[str, ...] = ("milp", "fifo", "easy", "priority")


class UnverifiedPlanError(RuntimeError):
    """A planner produced a plan the verifier rejects (a bug); the message lists the violations."""


def _verified(p: Plan, problem: Problem) -> Plan:
    v = verify(p, problem)
    if v:
        raise UnverifiedPlanError(f"{p.planner} plan fails verification: " + "; ".join(v[:5]))
    return p


def _notes(problem: Problem) -> tuple[str, ...]:
    notes = list(coverage_shortfalls(problem))
    for jid, reason in problem.rejected_jobs:
        notes.append(f"rejected job {jid!r}: {reason}")
    return tuple(notes)


#: Shortest time a MILP solve is given (seconds). Enough for HiGHS to load and presolve a model under
#: the size limits of :func:`optimizer.diagnose.check_size` and return the warm start as its
#: incumbent: measured 0.3–0.6 s for the 65,700-column master of ``day_1min_steps`` and about 3 s for
#: 500,000 columns (benchmarks/bench_model_size.py). With less budget left the MILP is not started.
MIN_SOLVE_S = 1.0

#: Time kept back from the master solve for what follows it (reading the solution, first-fit
#: block packing, verification; well under 0.1 s measured on ``day_1min_steps``), plus HiGHS's
#: own overshoot of its limit (0.3–0.9 s measured, mostly loading the model and checking the result).
AFTER_SOLVE_S = 0.5


def plan(problem: Problem, planner: str = "milp", warm_start: Plan | None = None) -> Plan:
    """Plan ``problem`` with ``planner`` in :data:`PLANNERS`; the returned plan passed the verifier.

    ``settings.time_limit_s`` bounds the whole call (DESIGN §5, budget and size): a baseline
    planner stops placing jobs at it; ``milp`` checks the model size first, runs the three
    baselines (always to the end: they are the answer of last resort), then every further step
    (greedy warm starts, master build, LP-guided start, master solve, packing, full model) only
    with the budget left, giving the MILP solve what remains but at least :data:`MIN_SOLVE_S`;
    when too little is left for that, it returns the best baseline plan with status
    ``time_limit`` and source ``fallback``.

    Raises :class:`optimizer.errors.InputError` for an unknown planner,
    :class:`optimizer.diagnose.ModelTooLargeError` (milp) when the model would exceed
    ``settings.max_binaries`` or the column and nonzero limits of
    :func:`optimizer.diagnose.check_size` (checked before anything else is computed), and
    :class:`optimizer.diagnose.InfeasibleProblemError` when no valid plan exists.
    """
    t0 = time.perf_counter()
    if planner not in PLANNERS:
        raise InputError(f"planner {planner!r} is unknown; choose one of {', '.join(PLANNERS)}")
    if planner == "milp":
        check_size(problem)
    check_feasible(problem)
    notes = _notes(problem)
    if planner != "milp":
        deadline = t0 + problem.settings.time_limit_s
        return replace(_verified(baseline_plan(problem, planner, deadline), problem), notes=notes)
    return _plan_milp(problem, warm_start, notes, t0)


def best_baseline(problem: Problem) -> Plan:
    """The verified baseline plan with the highest objective (ties: fifo, easy, priority order).

    With ``settings.max_wait_steps`` set, only baseline plans that also satisfy the starvation
    guard count (:func:`optimizer.verify.max_wait_violations`); FIFO never overtakes, so one always does.
    """
    plans = [_verified(baseline_plan(problem, b), problem) for b in BASELINES]
    if problem.settings.max_wait_steps is not None:
        plans = [p for p in plans if not verify(p, problem, guard=True)]
    return max(plans, key=lambda p: p.objective)  # max keeps the first of equals


def _below(a: float, b: float, scale: float, rel: float = 1e-9) -> bool:
    """True when objective ``a`` is below ``b`` by more than ``rel`` in units of the largest priority ``scale``.

    Objectives are compared as ``a / scale`` and ``b / scale`` with the tolerance ``rel · max(1, |b| / scale)``,
    so the test does not depend on the priorities' units (case F01: an absolute 1e-9 swamps an objective
    of 1e-8 when priorities are 1e-9).
    """
    a_, b_ = a / scale, b / scale
    return a_ < b_ - rel * max(1.0, abs(b_))


def _plan_milp(problem: Problem, warm_start: Plan | None, notes: tuple[str, ...], t0: float) -> Plan:
    st = problem.settings
    scale = problem.max_priority()  # the models' objective unit (DESIGN §5, case F01)
    deadline = t0 + st.time_limit_s
    spent: dict[str, float] = {}  # seconds per step, for the message when the budget runs out
    mark = [time.perf_counter()]

    def took(step: str) -> None:
        now = time.perf_counter()
        spent[step] = spent.get(step, 0.0) + now - mark[0]
        mark[0] = now

    base = best_baseline(problem)
    took("baselines")
    seeds = [base] + [g for g in greedy_plans(problem, deadline - MIN_SOLVE_S) if not verify(g, problem)]
    if warm_start is not None and not verify(warm_start, problem):
        seeds.append(warm_start)
    seeds.sort(key=lambda p: p.objective, reverse=True)
    took("greedy warm starts")
    extra = list(notes)
    if st.max_wait_steps is not None:
        extra.append(f"max_wait_steps={st.max_wait_steps}: a job that has waited that long gets EASY's reservation "
                     "(later jobs may run before it only where it has no room; DESIGN §5)")

    work = st.mip_work_limit is not None
    solves: list[SolveOutcome] = []  # every SolveOutcome behind this plan, to report wall-clock stops

    def left() -> float:
        # one deadline for the whole plan; under a work limit it only decides when the plan as a
        # whole reaches time_limit_s, and then the plan is flagged (clocked)
        return deadline - time.perf_counter()

    def solve_limit() -> float:
        return max(MIN_SOLVE_S, left() - AFTER_SOLVE_S)

    def clocked() -> bool:
        hit = any(o.wall_clock_limited for o in solves)
        if hit and work and not any(n.startswith("a solve reached the wall-clock") for n in extra):
            extra.append(f"a solve reached the wall-clock limit of {st.time_limit_s:g} s for the whole plan "
                         f"before its work limit (mip_work_limit={st.mip_work_limit}): this plan may not reproduce")
        return hit

    def fallback(status: str, why: str, size: dict | None, out_of_time: bool = False) -> Plan:
        hit = clocked() or out_of_time
        return _verified(replace(
            base, planner="milp", status=SolveStatus(status), source=PlanSource.FALLBACK, model=size,
            solver_status=status,
            solve_s=time.perf_counter() - t0,
            message=f"MILP {status}: {why}; returning the best baseline plan ({base.planner})",
            notes=tuple(extra), wall_clock_limited=hit,
        ), problem)

    def out_of_time(before: str, size: dict | None) -> Plan:
        steps = ", ".join(f"{k} {v:.2f} s" for k, v in spent.items())
        return fallback("time_limit", f"the time budget of {st.time_limit_s:g} s (time_limit_s) was spent "
                        f"before {before} ({steps}; less than {MIN_SOLVE_S:g} s left)", size, out_of_time=True)

    def finish(out, starts, svc, size, source: PlanSource) -> tuple[Plan | None, str]:
        status = SolveStatus.OPTIMAL if out.status == "optimal" else SolveStatus.TIME_LIMIT
        hit = clocked()
        # the model is in units of the largest priority (DESIGN §5): its bound times P is in the user's
        p = assemble_plan(problem, "milp", status, starts, svc, time.perf_counter() - t0,
                          bound=None if out.bound is None else out.bound * scale, gap=out.gap, model=size, message=out.message, notes=tuple(extra),
                          solver_status=out.status, source=source)
        p = replace(p, wall_clock_limited=hit)
        v = verify(p, problem)
        if v:
            return None, "its plan failed verification (" + "; ".join(v[:3]) + ")"
        if _below(p.objective, base.objective, scale):  # base satisfies the guard too (best_baseline)
            return None, f"its plan ({p.objective:.6g}) is below the best baseline's ({base.objective:.6g})"
        return p, ""

    est = estimate_size(problem)
    if left() < MIN_SOLVE_S:
        return out_of_time("the MILP was built", None)
    if st.milp_method == "decomposed":
        cm = build_count_model(problem)
        size = dict(cm.size, method="decomposed")
        took("master build")
        lp_s = left() - MIN_SOLVE_S if work else min(2.0, (left() - MIN_SOLVE_S) / 4)
        if lp_s >= 0.1:
            guided = lp_guided_plan(cm, time_limit_s=lp_s, log=solves)
            if guided is not None and not verify(guided, problem):
                seeds.append(guided)
                seeds.sort(key=lambda p: p.objective, reverse=True)
            took("LP-guided start")
        if left() < MIN_SOLVE_S:
            return out_of_time("the master solve", size)
        start = next((x for x in (count_vector(cm, s) for s in seeds) if x is not None), None)
        out = solve(cm.model, time_limit_s=solve_limit(), mip_rel_gap=st.mip_rel_gap, threads=st.threads,
                    random_seed=st.random_seed, start=start, mip_work_limit=st.mip_work_limit)
        solves.append(out)
        took("master solve")
        if out.x is None or out.status not in ("optimal", "time_limit"):
            return fallback(out.status, out.message or out.status, size)
        picks, svc = count_picks(cm, out.x)
        # first fit always runs (milliseconds); the packing MILP only with budget left
        offs = pack_offsets(cm.occ, picks, time_limit_s=left() if work else min(5.0, left() - AFTER_SOLVE_S),
                            seed=st.random_seed, threads=st.threads, mip_work_limit=st.mip_work_limit, log=solves,
                            milp=left() >= MIN_SOLVE_S)
        took("block packing")
        if offs is not None:
            starts = {jid: (t, offs[jid], g) for jid, (t, g, _d) in picks.items()}
            plan_, why = finish(out, starts, svc, size, PlanSource.DECOMPOSITION)
            if plan_ is not None:
                return plan_
            return fallback(out.status, why, size)
        guided = master_guided_plan(problem, picks, svc)
        if not verify(guided, problem):
            seeds.append(guided)
            seeds.sort(key=lambda p: p.objective, reverse=True)
        took("master-guided repair")
        binaries = est.binaries
        too_big = est.nonzeros > MAX_MODEL_NONZEROS or est.cols > MAX_MODEL_COLUMNS
        if binaries > st.full_model_max_binaries or too_big or left() < MIN_SOLVE_S:
            # only placements the master admits (guard rows, demand band, swap cap, block levels):
            # the master's bound covers only these
            admitted = [s for s in seeds if master_admits(cm, s)]
            if not admitted:
                return fallback(out.status, "its starts could not be packed into aligned blocks and no verified "
                                "placement satisfies the master's rows", size)
            best = admitted[0]
            master_bound = None if out.bound is None else out.bound * scale
            bound = master_bound if master_bound is not None and not _below(
                master_bound, best.objective, scale, rel=1e-6) else None
            if binaries > st.full_model_max_binaries:
                why = f"is above full_model_max_binaries={st.full_model_max_binaries}"
            elif too_big:
                why = (f"({est.cols:,} columns, {est.nonzeros:,} nonzeros) is above the size limits "
                       f"({MAX_MODEL_COLUMNS:,} columns, {MAX_MODEL_NONZEROS:,} nonzeros)")
            else:
                why = f"does not fit the {left():.2f} s left of time_limit_s={st.time_limit_s:g}"
            extra.append(
                f"decomposition: the master's starts could not be packed into aligned blocks and the full "
                f"model ({binaries} binaries) {why}: "
                f"kept the best placement the master admits ({best.planner}) under the master's bound")
            chosen = replace(best, planner="milp", status=SolveStatus.TIME_LIMIT, source=PlanSource.REPAIR, model=size,
                             bound=bound, gap=mip_gap(best.objective, bound), solver_status=out.status,
                             solve_s=time.perf_counter() - t0, notes=tuple(extra),
                             message="master solved but its starts could not be packed; best admitted placement "
                                     "kept (not proven optimal)",
                             wall_clock_limited=clocked() or left() < MIN_SOLVE_S)
            return _verified(chosen, problem)
        extra.append("decomposition: the master's starts could not be packed into aligned blocks; "
                     "solved the full model instead")

    bm = build_model(problem)
    size = dict(bm.size, method="full")
    took("full model build")
    if left() < MIN_SOLVE_S:
        return out_of_time("the full model solve", size)
    start = next((x for x in (plan_to_vector(bm, s) for s in seeds) if x is not None), None)
    out = solve_model(bm, start, time_limit_s=solve_limit())
    solves.append(out)
    if out.x is None or out.status not in ("optimal", "time_limit"):
        return fallback(out.status, out.message or out.status, size)
    starts, svc = solution_starts(bm, out.x)
    plan_, why = finish(out, starts, svc, size, PlanSource.MILP)
    if plan_ is not None:
        return plan_
    return fallback(out.status, why, size)
