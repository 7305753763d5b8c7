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

Budget (DESIGN §5, case F05, issue 17): work decides what is done, the clock is only a safety stop.
Every MILP solve stops at its deterministic work limit (``settings.mip_work_limit`` HiGHS limit checks,
or by default :func:`optimizer.solver.auto_work_limit` of the model's columns and ``time_limit_s``,
sized so that the plan ends inside ``time_limit_s`` on the loaded 2-core bench machine); the
master's LP relaxation (a proven bound; its roundings join the warm starts), every rounding order,
the greedy warm starts and the baselines run to their end. Single-threaded with a fixed seed the plan
therefore does not depend on machine speed or load. The wall-clock deadline ``time_limit_s`` after
:func:`plan` is called stays a hard stop: every HiGHS solve runs in a child process killed at its
allowance, which ends :func:`finish_reserve_s` before the deadline (:func:`optimizer.solver.solve`),
and heuristics stop placing jobs at it. When it fires (a solve stopped on the clock, or a step cut
short or skipped for lack of time) the plan has ``wall_clock_limited`` True, status ``deadline`` (unless
proven optimal) and a warning note: that plan did depend on load. Masters above
:data:`SCALE_MIN_MASTER_COLUMNS` columns take the scale path: the plan is the best rounding or warm
start under the LP bound, with no branch-and-bound; otherwise, unless the best plan is already within
``mip_rel_gap`` of the LP bound, the master MILP runs and the plan is the better of its packed
solution and the best warm start, under the least bound found.

When the master's starts cannot be packed into aligned blocks, the full model is solved up to
``settings.full_model_max_binaries``; above it the plan is the best verified placement that the
master admits (:func:`optimizer.decomposition.master_admits`: the master-guided repair, the
greedy plans, the warm start or a baseline), status ``"time_limit"`` (not proven optimal), source
``"repair"``, with the master's dual bound when the plan's objective is within it. A plan from the
master whose starts were packed has source ``"decomposition"``; one from the full model ``"milp"``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np

from optimizer.baselines import BASELINES, assemble_plan, baseline_plan, greedy_plans
from optimizer.capacity import least_unmet_by_step, least_unmet_rt, service_need
from optimizer.decomposition import (
    build_count_model,
    count_picks,
    count_vector,
    lp_rounded_plans,
    master_admits,
    master_guided_plan,
    pack_offsets,
    solve_master_lp,
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
from optimizer.milp import build_model, plan_to_vector, solution_starts
from optimizer.objective import objective_value, unmet_gpu_steps
from optimizer.plan import SOURCE_OF_PLANNER, Plan, PlanSource, SolveStatus
from optimizer.problem import Problem
from optimizer.solver import WORK_MIN_CHECKS, SolveOutcome, auto_work_limit, mip_gap, solve
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

#: HiGHS's own overshoot of its time limit is left room for: this share of ``time_limit_s`` or
#: :data:`AFTER_SOLVE_S`, whichever is more (1.7 s measured at load 3.8); past it the solve is
#: killed anyway (:func:`optimizer.solver.solve`, ``kill_after_s``).
AFTER_SOLVE_FRACTION = 0.05

#: Masters with more columns than this take the scale path: the LP relaxation gets the budget, its
#: value is the proven bound and the plan is the best of its roundings and the warm starts, with no
#: branch-and-bound. Measured (benchmarks/bench_scale.py, 2-core machine at load 5-8): at 1,024 GPUs x
#: 400 jobs (28,522 columns) the LP took 3 s and its best rounding was within 0.46 % of it, while
#: the master MILP ran to its limit without improving on it (issue 17's table: no branch-and-bound
#: node above about 256 GPUs); at 256 x 120 (8,586 columns) branch-and-bound closed the gap to
#: 1.3 % within 30 s.
SCALE_MIN_MASTER_COLUMNS = 20_000


def finish_reserve_s(master_cols: int) -> float:
    """Seconds kept after the last solve for reading it, packing, assembling and verifying the plan.

    0.5 s plus 20 µs per master column (verification and packing grow with the plan: 0.3 s for a
    4,096-GPU, 1,600-job plan of a 113,000-column master on the 2-core machine).
    """
    return AFTER_SOLVE_S + 20e-6 * master_cols


def _min_bound(*bounds: float | None) -> float | None:
    """The smallest of the finite bounds given (each a valid upper bound, so the least is the best); None without one."""
    ok = [b for b in bounds if b is not None and b == b and abs(b) != float("inf")]
    return min(ok) if ok else None


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
    return _deadline_status(_plan_milp(problem, warm_start, notes, t0), problem)


def _deadline_status(p: Plan, problem: Problem) -> Plan:
    """A MILP plan the wall-clock safety stop cut short (``wall_clock_limited``, not proven optimal) gets status ``deadline`` and a warning note, logged on the ``gpuplan`` logger: its result depended on machine load (DESIGN §5)."""
    if not p.wall_clock_limited or p.status == SolveStatus.OPTIMAL:
        return p
    warn = (f"warning: the wall-clock deadline (time_limit_s={problem.settings.time_limit_s:g} s) stopped this plan "
            "before its work budget was done: the plan depends on machine load and may not reproduce")
    logging.getLogger("gpuplan").warning(warn)
    return replace(p, status=SolveStatus.DEADLINE, notes=(*p.notes, warn))


#: How far past ``time_limit_s`` the baselines inside a MILP plan may run before they stop placing
#: jobs (seconds). They normally take milliseconds to a few seconds (0.5–2 s each at 4,096 GPUs x
#: 1,600 jobs, CPU), but on the loaded 2-core machine the three took 10.2 s of wall clock there, so a
#: 5-s plan returned after 10.4 s; stopped here, the call stays within ``time_limit_s`` + 5 s.
BASELINE_GRACE_S = 3.0


def best_baseline(problem: Problem, deadline: float | None = None, least: int | None = None) -> Plan:
    """The verified baseline plan ranked first: least unmet real-time demand above ``U*``, then the highest objective (ties: fifo, easy, priority order).

    With ``settings.max_wait_steps`` set, only baseline plans that also satisfy the starvation
    guard count (:func:`optimizer.verify.max_wait_violations`); FIFO never overtakes, so one always does.
    ``deadline`` (a ``time.perf_counter()`` value): each baseline stops placing jobs once it has
    passed (a valid plan with the rest unstarted, :func:`optimizer.baselines.baseline_plan`);
    priority backfill runs first, then EASY, then FIFO (FIFO is the fastest and never overtakes).
    ``least``: ``U*`` when the caller has it (:func:`optimizer.capacity.least_unmet_rt`), else computed here.
    """
    made = {b: _verified(baseline_plan(problem, b, deadline), problem) for b in reversed(BASELINES)}
    plans = [made[b] for b in BASELINES]
    if problem.settings.max_wait_steps is not None:
        plans = [p for p in plans if not verify(p, problem, guard=True)]
    least = least_unmet_rt(problem) if least is None else least
    return max(plans, key=lambda p: _rank(p, problem, least))  # max keeps the first of equals


def _rt_excess(p: Plan, problem: Problem, least: int) -> float:
    """Unmet real-time GPU-steps of ``p`` above ``U*`` (``least``): 0 for a plan that serves real-time first."""
    return max(0.0, unmet_gpu_steps(p, problem) - least)


def _rank(p: Plan, problem: Problem, least: int) -> tuple[float, float]:
    """Sort key, larger is better: real-time first (least unmet above ``U*``), then the §5 objective (DESIGN §5)."""
    return (-_rt_excess(p, problem, least), p.objective)


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

    stopped: list[str] = []  # steps the wall-clock safety stop cut short (the plan then depends on load)

    def past(step: str, at: float) -> None:
        if time.perf_counter() > at:
            stopped.append(step)

    # U* (DESIGN §5, real time first): its split by service and step once per plan, for the rankings here
    # and for every model build below
    u_star = least_unmet_by_step(problem)
    least = int(u_star.sum())
    base = best_baseline(problem, deadline + BASELINE_GRACE_S, least)
    past("baselines", deadline + BASELINE_GRACE_S)

    def rt_first(p_: Plan) -> bool:
        return _rt_excess(p_, problem, least) == 0.0

    def ranked(plans: list[Plan]) -> None:
        plans.sort(key=lambda p_: _rank(p_, problem, least), reverse=True)

    def worse(a: Plan, b: Plan) -> bool:
        """``a`` is below ``b``: more unmet real-time demand above U*, or, equal there, a lower objective."""
        ea, eb = _rt_excess(a, problem, least), _rt_excess(b, problem, least)
        return ea > eb or (ea == eb and _below(a.objective, b.objective, scale))

    took("baselines")
    seeds = [base] + [g for g in greedy_plans(problem, deadline - MIN_SOLVE_S) if not verify(g, problem)]
    past("greedy warm starts", deadline - MIN_SOLVE_S)
    if warm_start is not None and not verify(warm_start, problem):
        # a warm start comes from another problem (the last replan, a what-if's base): its objective field is
        # that problem's, so it is valued again on this one before it competes with the other starts
        seeds.append(replace(warm_start, objective=objective_value(warm_start, problem)))
    ranked(seeds)
    took("greedy warm starts")
    extra = list(notes)
    if st.max_wait_steps is not None:
        extra.append(f"max_wait_steps={st.max_wait_steps}: a job that has waited that long gets EASY's reservation "
                     "(later jobs may run before it only where it has no room; DESIGN §5)")

    # the work budget decides what is done (DESIGN §5): every MILP solve stops at its work limit
    # (settings.mip_work_limit, or auto_work_limit from the model's size and time_limit_s), the LP and
    # every heuristic run to their end; the deadline is only a safety stop, reported when it fires
    solves: list[SolveOutcome] = []  # every SolveOutcome behind this plan, to report wall-clock stops

    def work_limit(n_cols: int) -> int:
        return st.mip_work_limit if st.mip_work_limit is not None else auto_work_limit(n_cols, st.time_limit_s)

    def left() -> float:
        # one deadline for the whole plan: it only decides when the plan as a whole reaches
        # time_limit_s, and then the plan is flagged (clocked)
        return deadline - time.perf_counter()

    def clocked() -> bool:
        hit = bool(stopped) or any(o.wall_clock_limited for o in solves)
        if hit and not any(n.startswith("a solve reached the wall-clock") for n in extra):
            what = ", ".join(stopped) or "a HiGHS solve"
            extra.append(f"a solve reached the wall-clock limit of {st.time_limit_s:g} s for the whole plan "
                         f"before its work budget was done ({what}): this plan may not reproduce")
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

    def bounded(plan_: Plan, bound: float | None, what: str, why: str, size: dict | None,
                out_of_time: bool = False) -> Plan:
        """The verified plan ``plan_`` (the best warm start or rounded plan) as the MILP's answer, under ``bound``."""
        if bound is not None and _below(bound, plan_.objective, scale, rel=1e-6):
            bound = None  # a bound below a verified plan is not a bound of it (never expected)
        gap = mip_gap(plan_.objective, bound)
        status = SolveStatus.OPTIMAL if gap is not None and gap <= st.mip_rel_gap else SolveStatus.TIME_LIMIT
        source = SOURCE_OF_PLANNER.get(plan_.planner, PlanSource.GREEDY)
        if plan_.planner == "lp_guided":
            source = PlanSource.LP_ROUNDING
        gap_txt = "no bound" if gap is None else f"proven gap {gap:.3%} against the {what} bound"
        return _verified(replace(
            plan_, planner="milp", status=status, source=source, model=size, bound=bound, gap=gap,
            solver_status=str(status), solve_s=time.perf_counter() - t0, notes=tuple(extra),
            message=f"best verified plan ({plan_.planner}), {gap_txt}: {why}",
            wall_clock_limited=clocked() or out_of_time,
        ), problem)

    def out_of_time(before: str, size: dict | None) -> Plan:
        steps = ", ".join(f"{k} {v:.2f} s" for k, v in spent.items())
        return fallback("time_limit", f"the time budget of {st.time_limit_s:g} s (time_limit_s) was spent "
                        f"before {before} ({steps}; less than {MIN_SOLVE_S:g} s left)", size, out_of_time=True)

    def finish(out, starts, svc, size, source: PlanSource, bound: float | None = None) -> tuple[Plan | None, str]:
        status = SolveStatus.OPTIMAL if out.status == "optimal" else SolveStatus.TIME_LIMIT
        hit = clocked()
        # the model is in units of the largest priority (DESIGN §5): its bound times P is in the user's
        if bound is None and out.bound is not None:
            bound = out.bound * scale
        # GPUs above a service's need serve nothing (its objective is the same, DESIGN §5): trimmed to the need,
        # min of two valid trajectories (band, swap cap), so the plan stays valid and no demand is left unmet
        if len(problem.services):
            svc = np.minimum(svc, service_need(problem))
        p = assemble_plan(problem, "milp", status, starts, svc, time.perf_counter() - t0,
                          bound=bound, gap=out.gap, model=size, message=out.message, notes=tuple(extra),
                          solver_status=out.status, source=source)
        if bound is not None and not _below(bound, p.objective, scale, rel=1e-6):
            p = replace(p, gap=mip_gap(p.objective, bound))
        p = replace(p, wall_clock_limited=hit)
        v = verify(p, problem)
        if v:
            return None, "its plan failed verification (" + "; ".join(v[:3]) + ")"
        if worse(p, base):  # base satisfies the guard too (best_baseline)
            return None, f"its plan ({p.objective:.6g}) is below the best baseline's ({base.objective:.6g})"
        return p, ""

    est = estimate_size(problem)
    if left() < MIN_SOLVE_S:
        return out_of_time("the MILP was built", None)
    if st.milp_method == "decomposed":
        cm = build_count_model(problem, u_star)
        size = dict(cm.size, method="decomposed")
        took("master build")
        reserve = finish_reserve_s(cm.model.n_cols)
        kill_at = deadline - reserve  # every solve is stopped by then, whatever HiGHS does

        def limits(share: float = 1.0) -> tuple[float, float]:
            """(HiGHS time limit, kill after) for a solve given ``share`` of what is left before ``kill_at``."""
            room = max(0.0, kill_at - time.perf_counter()) * share
            margin = max(AFTER_SOLVE_S, AFTER_SOLVE_FRACTION * st.time_limit_s) if share >= 1.0 else 0.0
            return max(0.05, room - margin), room

        # 1. the LP relaxation: a proven bound, and rounded plans (the scale path's plan)
        lp_bound: float | None = None
        at_scale = cm.model.n_cols > SCALE_MIN_MASTER_COLUMNS
        w_master = work_limit(cm.model.n_cols)
        counters = size  # the work counters travel with the model size (Plan.model)
        counters["mip_work_limit"] = w_master
        lp_room = kill_at - time.perf_counter()
        if lp_room < 0.1:
            stopped.append("LP relaxation")
        else:
            # the LP runs to its end (its result does not depend on the clock); the deadline kills it
            hl, kill = limits()
            lp = solve_master_lp(cm, time_limit_s=hl, kill_after_s=kill)
            solves.append(lp)
            counters["lp_iterations"] = lp.iterations
            took("LP relaxation")
            if lp.status == "optimal" and lp.objective is not None and lp.x is not None:
                lp_bound = lp.objective * scale
                for g in lp_rounded_plans(cm, lp.x, deadline=kill_at):
                    if not verify(g, problem):
                        seeds.append(g)
                past("LP rounding", kill_at)
                ranked(seeds)
                took("LP rounding")
            else:
                extra.append(f"the master's LP relaxation did not solve in its {hl:.1f} s ({lp.status}): "
                             "no LP bound")
        best = seeds[0]
        lp_gap = mip_gap(best.objective, lp_bound) if rt_first(best) else None  # the bound holds under the row
        if lp_gap is not None and (at_scale or w_master == 0 or lp_gap <= st.mip_rel_gap):
            # proven within the requested gap, or a master this large (where branch-and-bound did not
            # improve on the rounded plans, DESIGN §5), or one whose root node alone would not fit the
            # work budget: the LP bound and the best rounded plan
            why = ("within mip_rel_gap" if lp_gap is not None and lp_gap <= st.mip_rel_gap else
                   f"master of {cm.model.n_cols:,} columns is above {SCALE_MIN_MASTER_COLUMNS:,} "
                   "(scale path: no branch-and-bound)" if at_scale else
                   f"the work budget for time_limit_s={st.time_limit_s:g} does not cover the root node of a "
                   f"master of {cm.model.n_cols:,} columns (auto_work_limit 0: no branch-and-bound)")
            return bounded(best, lp_bound, "LP relaxation", why, size)
        if left() < MIN_SOLVE_S or kill_at - time.perf_counter() < MIN_SOLVE_S:
            if lp_bound is not None:
                return bounded(best, lp_bound, "LP relaxation", "no time left for the master MILP", size,
                               out_of_time=True)
            return out_of_time("the master solve", size)
        # 2. the master MILP, warm-started from the best verified plan, stopped at kill_at
        start = next((x for x in (count_vector(cm, s) for s in seeds) if x is not None), None)
        hl, kill = limits()
        out = solve(cm.model, time_limit_s=hl, mip_rel_gap=st.mip_rel_gap, threads=st.threads,
                    random_seed=st.random_seed, start=start, mip_work_limit=w_master, kill_after_s=kill,
                    allow_restart=False)
        solves.append(out)
        counters.update(mip_checks=out.work, mip_nodes=out.nodes)
        took("master solve")
        master_bound = None if out.bound is None else out.bound * scale
        bound = _min_bound(lp_bound, master_bound)
        if out.x is None or out.status not in ("optimal", "time_limit"):
            if bound is not None:
                return bounded(best, bound, "LP relaxation", f"the master MILP gave no plan ({out.status})", size)
            return fallback(out.status, out.message or out.status, size)
        picks, svc = count_picks(cm, out.x)
        # first fit always runs (milliseconds); the packing MILP only with budget left
        pack_room = kill_at - time.perf_counter()
        pack_milp = pack_room >= MIN_SOLVE_S
        offs = pack_offsets(cm.occ, picks, time_limit_s=max(0.05, pack_room), seed=st.random_seed,
                            threads=st.threads, mip_work_limit=w_master, log=solves,
                            milp=pack_milp, kill_after_s=max(0.05, pack_room))
        if offs is None and not pack_milp:
            stopped.append("block packing")
        took("block packing")
        if offs is not None:
            starts = {jid: (t, offs[jid], g) for jid, (t, g, _d) in picks.items()}
            plan_, why = finish(out, starts, svc, size, PlanSource.DECOMPOSITION, bound=bound)
            if plan_ is not None and not worse(plan_, best):
                return plan_
            if bound is not None:
                return bounded(best, bound, "LP relaxation and master MILP",
                               why or "the master's plan is below the best heuristic plan", size)
            if plan_ is not None:
                return plan_
            return fallback(out.status, why, size)
        guided = master_guided_plan(problem, picks, svc)
        if not verify(guided, problem):
            seeds.append(guided)
            ranked(seeds)
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
            bound = bound if bound is not None and not _below(bound, best.objective, scale, rel=1e-6) else None
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

    bm = build_model(problem, u_star)
    size = dict(bm.size, method="full")
    took("full model build")
    if left() < MIN_SOLVE_S:
        return out_of_time("the full model solve", size)
    start = next((x for x in (plan_to_vector(bm, s) for s in seeds) if x is not None), None)
    out = solve(bm.model, time_limit_s=max(0.05, left() - finish_reserve_s(bm.model.n_cols) - AFTER_SOLVE_S),
                mip_rel_gap=st.mip_rel_gap, threads=st.threads, random_seed=st.random_seed, start=start,
                mip_work_limit=max(WORK_MIN_CHECKS, work_limit(bm.model.n_cols)),
                kill_after_s=max(0.05, left() - finish_reserve_s(bm.model.n_cols)))
    solves.append(out)
    if out.x is None or out.status not in ("optimal", "time_limit"):
        return fallback(out.status, out.message or out.status, size)
    starts, svc = solution_starts(bm, out.x)
    plan_, why = finish(out, starts, svc, size, PlanSource.MILP)
    if plan_ is not None:
        return plan_
    return fallback(out.status, why, size)
