"""One entry point for every planner: ``plan(problem, planner) -> Plan`` (always verified).

``milp`` runs, in order: the infeasibility diagnosis (:func:`optimizer.diagnose.check_feasible`,
raises naming step and numbers), the size check (:func:`optimizer.diagnose.check_size`, raises
before anything is allocated), the three baselines (each verified), the model build, and one
HiGHS solve warm-started from the best verified plan among the baselines, the demand-following
greedy plans (:func:`optimizer.baselines.greedy_plans`), the LP-guided greedy plan
(:func:`optimizer.decomposition.lp_guided_plan`) and ``warm_start`` (so its objective is
never below the best baseline's). Its plan is verified; when the solve ends without a usable
plan (no incumbent, infeasible, unbounded-or-infeasible, solver error, unknown status, or a plan
the verifier rejects) the best baseline plan is returned with ``source="fallback"``
(``fallback=True``), the MILP's own outcome as ``status`` and a message giving it. An unverified
plan is never returned.

Budget: the sub-steps (LP-guided start, master, block packing, full model) share one deadline,
``time_limit_s`` for the whole plan. Without ``settings.mip_work_limit`` the clock decides where
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
from optimizer.diagnose import check_feasible, check_size, coverage_shortfalls, estimate_size
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


def plan(problem: Problem, planner: str = "milp", warm_start: Plan | None = None) -> Plan:
    """Plan ``problem`` with ``planner`` in :data:`PLANNERS`; the returned plan passed the verifier.

    Raises :class:`optimizer.errors.InputError` for an unknown planner,
    :class:`optimizer.diagnose.InfeasibleProblemError` when no valid plan exists, and
    :class:`optimizer.diagnose.ModelTooLargeError` (milp) when the model would exceed
    ``settings.max_binaries``.
    """
    if planner not in PLANNERS:
        raise InputError(f"planner {planner!r} is unknown; choose one of {', '.join(PLANNERS)}")
    check_feasible(problem)
    notes = _notes(problem)
    if planner != "milp":
        return replace(_verified(baseline_plan(problem, planner), problem), notes=notes)
    return _plan_milp(problem, warm_start, notes)


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


def _plan_milp(problem: Problem, warm_start: Plan | None, notes: tuple[str, ...]) -> Plan:
    t0 = time.perf_counter()
    st = problem.settings
    scale = problem.max_priority()  # the models' objective unit (DESIGN §5, case F01)
    check_size(problem)
    base = best_baseline(problem)
    seeds = [base] + [g for g in greedy_plans(problem) if not verify(g, problem)]
    if warm_start is not None and not verify(warm_start, problem):
        seeds.append(warm_start)
    seeds.sort(key=lambda p: p.objective, reverse=True)
    extra = list(notes)
    if st.max_wait_steps is not None:
        extra.append(f"max_wait_steps={st.max_wait_steps}: a job that has waited that long gets EASY's reservation "
                     "(later jobs may run before it only where it has no room; DESIGN §5)")

    work = st.mip_work_limit is not None
    solves: list[SolveOutcome] = []  # every SolveOutcome behind this plan, to report wall-clock stops

    def left() -> float:
        # one deadline for the whole plan; under a work limit it only decides when the plan as a
        # whole reaches time_limit_s, and then the plan is flagged (clocked)
        return max(0.05, st.time_limit_s - (time.perf_counter() - t0))

    def clocked() -> bool:
        hit = any(o.wall_clock_limited for o in solves)
        if hit and work and not any(n.startswith("a solve reached the wall-clock") for n in extra):
            extra.append(f"a solve reached the wall-clock limit of {st.time_limit_s:g} s for the whole plan "
                         f"before its work limit (mip_work_limit={st.mip_work_limit}): this plan may not reproduce")
        return hit

    def fallback(status: str, why: str, size: dict | None) -> Plan:
        hit = clocked()
        return _verified(replace(
            base, planner="milp", status=SolveStatus(status), source=PlanSource.FALLBACK, model=size,
            solver_status=status,
            solve_s=time.perf_counter() - t0,
            message=f"MILP {status}: {why}; returning the best baseline plan ({base.planner})",
            notes=tuple(extra), wall_clock_limited=hit,
        ), problem)

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

    if st.milp_method == "decomposed":
        cm = build_count_model(problem)
        size = dict(cm.size, method="decomposed")
        guided = lp_guided_plan(cm, time_limit_s=left() if work else min(2.0, left() / 4), log=solves)
        if guided is not None and not verify(guided, problem):
            seeds.append(guided)
            seeds.sort(key=lambda p: p.objective, reverse=True)
        start = next((x for x in (count_vector(cm, s) for s in seeds) if x is not None), None)
        out = solve(cm.model, time_limit_s=left(), mip_rel_gap=st.mip_rel_gap, threads=st.threads,
                    random_seed=st.random_seed, start=start, mip_work_limit=st.mip_work_limit)
        solves.append(out)
        if out.x is None or out.status not in ("optimal", "time_limit"):
            return fallback(out.status, out.message or out.status, size)
        picks, svc = count_picks(cm, out.x)
        offs = pack_offsets(cm.occ, picks, time_limit_s=left() if work else min(5.0, left()),
                            seed=st.random_seed, threads=st.threads, mip_work_limit=st.mip_work_limit, log=solves)
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
        binaries = estimate_size(problem).binaries
        if binaries > st.full_model_max_binaries:
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
            extra.append(
                f"decomposition: the master's starts could not be packed into aligned blocks and the full "
                f"model ({binaries} binaries) is above full_model_max_binaries={st.full_model_max_binaries}: "
                f"kept the best placement the master admits ({best.planner}) under the master's bound")
            chosen = replace(best, planner="milp", status=SolveStatus.TIME_LIMIT, source=PlanSource.REPAIR, model=size,
                             bound=bound, gap=mip_gap(best.objective, bound), solver_status=out.status,
                             solve_s=time.perf_counter() - t0, notes=tuple(extra),
                             message="master solved but its starts could not be packed; best admitted placement "
                                     "kept (not proven optimal)",
                             wall_clock_limited=clocked())
            return _verified(chosen, problem)
        extra.append("decomposition: the master's starts could not be packed into aligned blocks; "
                     "solved the full model instead")

    bm = build_model(problem)
    size = dict(bm.size, method="full")
    start = next((x for x in (plan_to_vector(bm, s) for s in seeds) if x is not None), None)
    out = solve_model(bm, start, time_limit_s=left())
    solves.append(out)
    if out.x is None or out.status not in ("optimal", "time_limit"):
        return fallback(out.status, out.message or out.status, size)
    starts, svc = solution_starts(bm, out.x)
    plan_, why = finish(out, starts, svc, size, PlanSource.MILP)
    if plan_ is not None:
        return plan_
    return fallback(out.status, why, size)
