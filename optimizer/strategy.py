"""The ``milp`` planner's strategy: :class:`MilpRun`, one method per stage, under one :class:`Budget`.

:meth:`MilpRun.plan` runs, in order: the three baselines (each verified, always to the end: the answer of last
resort), the greedy warm starts (:func:`optimizer.baselines.greedy_plans`, plus ``warm_start`` valued again on
this problem), then with ``milp_method="decomposed"`` the count master (:mod:`optimizer.decomposition`): its LP
relaxation (a proven bound) and the plans rounded from it, the master MILP warm-started from the best verified
plan, the packing of its starts onto aligned blocks, and when they cannot be packed the master-guided repair;
otherwise, or when the repair leaves the full model to decide, the full x[j, s, o, t] model
(:mod:`optimizer.milp`). Every answer passes the verifier; a plan below the best baseline is never returned.

Budget (DESIGN §5, issue 29): ``settings.budget`` ``"time"`` (default) gives the master MILP (every master
size: no scale path) the wall clock left before its kill time, with no work limit; the plan then depends on
load and a clock stop is its normal end (status ``time_limit``, no ``deadline`` warning). An answer with a gap
above ``mip_rel_gap`` while more than :data:`EARLY_STOP_SHARE` of the limit is left carries an ``early stop:`` note.

``budget="work"`` (case F05, issue 17): work decides what is done, the clock is only a safety stop.
Every MILP solve stops at its deterministic work limit (``settings.mip_work_limit`` HiGHS limit checks,
or by default :func:`optimizer.solver.auto_work_limit` of the model's columns and ``time_limit_s``,
sized so that the plan ends inside ``time_limit_s`` on the loaded 2-core bench machine); the
master's LP relaxation (a proven bound; its roundings join the warm starts), every rounding order,
the greedy warm starts and the baselines run to their end. Single-threaded with a fixed seed the plan
therefore does not depend on machine speed or load. The wall-clock deadline ``time_limit_s`` after
:func:`optimizer.planners.plan` is called stays a hard stop: every HiGHS solve runs in a child process killed
at its allowance, which ends :func:`finish_reserve_s` before the deadline (:func:`optimizer.solver.solve`),
and heuristics stop placing jobs at it. When it fires (a solve stopped on the clock, or a step cut
short or skipped for lack of time) the plan has ``wall_clock_limited`` True, status ``deadline`` (unless
proven optimal) and a warning note: that plan did depend on load. Masters above
:data:`SCALE_MIN_MASTER_COLUMNS` columns take the scale path: the plan is the best rounding or warm
start under the LP bound, with no branch-and-bound; otherwise, unless the best plan is already within
``mip_rel_gap`` of the LP bound, the master MILP runs and the plan is the better of its packed
solution and the best warm start, under the least bound found.

When the solve ends without a usable plan (no incumbent, infeasible, unbounded-or-infeasible, solver error,
unknown status, or a plan the verifier rejects) the best baseline plan is returned with ``source="fallback"``
(``fallback=True``), the MILP's own outcome as ``status`` and a message giving it. When the master's starts
cannot be packed into aligned blocks, the full model is solved up to ``settings.full_model_max_binaries``;
above it the plan is the best verified placement that the master admits
(:func:`optimizer.decomposition.master_admits`: the master-guided repair, the greedy plans, the warm start or a
baseline), status ``"time_limit"`` (not proven optimal), source ``"repair"``, with the master's dual bound when
the plan's objective is within it. A plan from the master whose starts were packed has source
``"decomposition"``; one from the full model ``"milp"``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace

import numpy as np

from optimizer.baselines import assemble_plan, baseline_plan, greedy_plans
from optimizer.capacity import Capacity, least_unmet_by_step
from optimizer.decomposition import (
    CountModel,
    build_count_model,
    count_picks,
    count_vector,
    lp_rounded_plans,
    master_admits,
    master_guided_plan,
    pack_offsets,
    solve_master_lp,
)
from optimizer.diagnose import MAX_MODEL_COLUMNS, MAX_MODEL_NONZEROS, estimate_size
from optimizer.milp import build_model, plan_to_vector, solution_starts
from optimizer.objective import objective_value
from optimizer.plan import SOURCE_OF_PLANNER, Plan, PlanSource
from optimizer.problem import Problem
from optimizer.ranking import below, best_baseline, min_bound, rank, rt_excess, verified
from optimizer.reserve import reserve_excess, surprise_room
from optimizer.solver import WORK_MIN_CHECKS, SolveOutcome, SolveStatus, auto_work_limit, mip_gap, solve
from optimizer.verify import verify

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

#: An answer with a gap above ``mip_rel_gap`` returned while more than this share of ``time_limit_s`` is left
#: carries an ``early stop:`` note saying why (:meth:`MilpRun.early_stop_note`; issue 29's rule).
EARLY_STOP_SHARE = 0.2

#: With ``budget="time"``, the master MILP's HiGHS time limit is at most this share of the seconds left
#: before the kill time: the rest is for the block packing (its MILP when first fit fails) and the repair.
MASTER_CLOCK_SHARE = 0.85

#: How far past ``time_limit_s`` the baselines inside a MILP plan may run before they stop placing
#: jobs (seconds). They normally take milliseconds to a few seconds (0.5–2 s each at 4,096 GPUs x
#: 1,600 jobs, CPU), but on the loaded 2-core machine the three took 10.2 s of wall clock there, so a
#: 5-s plan returned after 10.4 s; stopped here, the call stays within ``time_limit_s`` + 5 s.
BASELINE_GRACE_S = 3.0


def finish_reserve_s(master_cols: int) -> float:
    """Seconds kept after the last solve for reading it, packing, assembling and verifying the plan.

    0.5 s plus 20 µs per master column (verification and packing grow with the plan: 0.3 s for a
    4,096-GPU, 1,600-job plan of a 113,000-column master on the 2-core machine).
    """
    return AFTER_SOLVE_S + 20e-6 * master_cols


@dataclass
class Budget:
    """What is left of one plan's time and work (DESIGN §5): work decides what is done, the clock is a safety stop.

    ``t0``: the ``time.perf_counter()`` value (s) when the plan was asked for; ``time_limit_s``: the whole
    plan's wall-clock allowance (s); ``mip_work_limit``: HiGHS limit checks per MILP solve from the settings,
    None for :func:`optimizer.solver.auto_work_limit`. Kept as the plan runs: ``spent`` (seconds per step,
    for the message when the time runs out), ``stopped`` (steps the deadline cut short or skipped: the plan
    then depends on load), ``solves`` (every :class:`~optimizer.solver.SolveOutcome` behind the plan) and
    ``kill_at`` (the ``perf_counter`` value by which every solve is stopped, set once the master is built).
    """

    t0: float
    time_limit_s: float
    mip_work_limit: int | None = None
    mode: str = "work"
    spent: dict[str, float] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)
    solves: list[SolveOutcome] = field(default_factory=list)
    kill_at: float | None = None
    mark: float = field(init=False)

    def __post_init__(self) -> None:
        self.mark = time.perf_counter()

    @property
    def deadline(self) -> float:
        """The ``perf_counter`` value (s) at which the plan reaches ``time_limit_s``."""
        return self.t0 + self.time_limit_s

    def left(self) -> float:
        """Seconds left before :attr:`deadline` (negative once past it)."""
        return self.deadline - time.perf_counter()

    def room(self) -> float:
        """Seconds left before :attr:`kill_at` (set by the caller once the master is built)."""
        assert self.kill_at is not None
        return self.kill_at - time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since :attr:`t0`."""
        return time.perf_counter() - self.t0

    def took(self, step: str) -> None:
        """Charge the seconds since the last mark to ``step``."""
        now = time.perf_counter()
        self.spent[step] = self.spent.get(step, 0.0) + now - self.mark
        self.mark = now

    def past(self, step: str, at: float) -> None:
        """Record ``step`` as cut short by the clock when the time is past ``at`` (a ``perf_counter`` value)."""
        if time.perf_counter() > at:
            self.stopped.append(step)

    def work_limit(self, n_cols: int) -> int | None:
        """HiGHS limit checks for a MILP solve of ``n_cols`` columns (None: no work limit, DESIGN §5).

        The setting, else in ``mode`` ``"work"`` :func:`auto_work_limit`, else (``"time"``) None: the clock decides.
        """
        if self.mip_work_limit is not None:
            return self.mip_work_limit
        if self.mode == "time":
            return None
        return auto_work_limit(n_cols, self.time_limit_s)

    @property
    def on_clock(self) -> bool:
        """True in ``mode`` ``"time"`` without an explicit work limit: the clock is the budget, not a safety stop."""
        return self.mode == "time" and self.mip_work_limit is None

    def limits(self) -> tuple[float, float]:
        """(HiGHS time limit, kill after) in seconds for a solve given what is left before :attr:`kill_at`."""
        room = max(0.0, self.room())
        margin = max(AFTER_SOLVE_S, AFTER_SOLVE_FRACTION * self.time_limit_s)
        return max(0.05, room - margin), room

    def clock_hit(self) -> bool:
        """True when the wall clock cut a step short or stopped a solve (the plan then depends on load)."""
        return bool(self.stopped) or any(o.wall_clock_limited for o in self.solves)

    def spent_text(self) -> str:
        """The seconds per step so far, e.g. ``"baselines 0.12 s, master build 0.30 s"``."""
        return ", ".join(f"{k} {v:.2f} s" for k, v in self.spent.items())


class MilpRun:
    """One ``milp`` plan of ``problem``: the stages of the module docstring, one method each.

    ``warm_start``: a plan of another problem (the last replan, a what-if's base), valued again here and added
    to the starts when it verifies; ``notes``: the problem's notes (coverage shortfalls, rejected jobs);
    ``t0``: the ``time.perf_counter()`` value when the plan was asked for; ``capacity``: the problem's capacity
    arrays (:meth:`optimizer.capacity.Capacity.of`, once per plan, passed to every stage). State as the run goes: ``budget``
    (:class:`Budget`), ``notes`` (the plan's notes so far), ``base`` (the best baseline), ``seeds`` (verified
    starts, best first), ``size`` (the current model's size and work counters, :attr:`Plan.model`), and on the
    master path ``cm``, ``lp_bound``, ``best``, ``bound``, ``master`` (its outcome), ``picks`` and ``svc``.
    A stage returns the plan when it decides the answer, None when the next stage is to run.
    """

    def __init__(self, problem: Problem, warm_start: Plan | None, notes: tuple[str, ...], t0: float,
                 capacity: Capacity) -> None:
        self.problem = problem
        self.capacity = capacity
        self.settings = st = problem.settings
        self.scale = problem.max_priority()  # the models' objective unit (DESIGN §5, case F01)
        self.warm_start = warm_start
        self.budget = Budget(t0, st.time_limit_s, st.mip_work_limit, st.budget)
        self.notes = list(notes)
        if st.max_wait_steps is not None:
            self.notes.append(f"max_wait_steps={st.max_wait_steps}: a job that has waited that long gets EASY's "
                              "reservation (later jobs may run before it only where it has no room; DESIGN §5)")
        self.size: dict | None = None
        self.lp_bound: float | None = None
        self.bound: float | None = None

    def plan(self) -> Plan:
        """:meth:`stages`, with :meth:`early_stop_note` on the answer (DESIGN §5, issue 29)."""
        return self.early_stop_note(self.stages())

    def early_stop_note(self, p: Plan) -> Plan:
        """``p`` with an ``early stop:`` note saying why it returned early with a gap above ``mip_rel_gap``.

        Added with ``budget="time"`` when the gap is above ``mip_rel_gap`` (or there is no bound) while more than
        :data:`EARLY_STOP_SHARE` of ``time_limit_s`` is left (rule of issue 29: an early return always says why).
        """
        st, b = self.settings, self.budget
        left = b.left()
        if not b.on_clock or (p.gap is not None and p.gap <= st.mip_rel_gap) or left <= EARLY_STOP_SHARE * st.time_limit_s:
            return p  # with a work limit the message names it (a note with the clock would break reproducibility)
        gap = "no proven bound" if p.gap is None else f"proven gap {p.gap:.3%} > mip_rel_gap {st.mip_rel_gap:g}"
        note = (f"early stop: returned with {gap} and {left:.1f} s of time_limit_s={st.time_limit_s:g} s left "
                f"(budget=time): {p.message}")
        return replace(p, notes=(*p.notes, note))

    def stages(self) -> Plan:
        """Baselines, greedy starts; then the master path (LP, rounding, master, packing, repair) or the full model."""
        self.baselines()
        self.greedy_starts()
        if self.budget.left() < MIN_SOLVE_S:
            return self.out_of_time("the MILP was built")
        if self.settings.milp_method == "decomposed":
            self.build_master()
            self.lp_relaxation()
            for stage in (self.lp_answer, self.master_solve, self.packing, self.repair):
                answer = stage()
                if answer is not None:
                    return answer
        return self.full_model()

    # ------------------------------------------------------------------ ranking against U*

    def rt_first(self, p: Plan) -> bool:
        """``p`` leaves no more real-time demand unmet than ``U*``."""
        return rt_excess(p, self.problem, self.least) == 0.0

    def rank_seeds(self) -> None:
        """Sort :attr:`seeds` best first (:func:`optimizer.ranking.rank`)."""
        self.seeds.sort(key=lambda p: rank(p, self.problem, self.least), reverse=True)

    def worse(self, a: Plan, b: Plan) -> bool:
        """``a`` is below ``b``: more unmet real-time demand above U*, or, equal there, a lower objective."""
        ea, eb = rt_excess(a, self.problem, self.least), rt_excess(b, self.problem, self.least)
        return ea > eb or (ea == eb and below(a.objective, b.objective, self.scale))

    # ------------------------------------------------------------------ the stages

    def baselines(self) -> None:
        """``U*`` by service and step (once per plan, for the rankings and every model build) and the best baseline."""
        b = self.budget
        self.u_star = least_unmet_by_step(self.problem, self.capacity)
        self.least = int(self.u_star.sum())
        self.base = best_baseline(self.problem, b.deadline + BASELINE_GRACE_S, self.least, self.capacity)
        self.np_room = surprise_room(self.problem)
        if self.np_room is not None:
            self.base = self.reserve_base(b.deadline + BASELINE_GRACE_S)
        b.past("baselines", b.deadline + BASELINE_GRACE_S)
        b.took("baselines")

    def keeps_reserve(self, p: Plan) -> bool:
        """``p`` keeps the surprise reserve (issue 30, :func:`optimizer.reserve.reserve_excess`; always True without it)."""
        return self.np_room is None or reserve_excess(p, self.problem, self.np_room) == 0

    def reserve_base(self, deadline: float) -> Plan:
        """The answer of last resort under the surprise reserve: the best of priority backfill keeping the reserve and the best baseline when it keeps it too.

        The plain baselines (Slurm/Kueue behaviour) do not keep the reserve; the MILP's plans are compared with
        this one instead (:meth:`finish`), so a plan of the reserved model is never refused for ranking below a
        plan the reserve forbids. With ``max_wait_steps`` the reserved backfill counts only when it keeps the guard.
        """
        problem = self.problem
        cands = [self.base] if self.keeps_reserve(self.base) else []
        rp = verified(baseline_plan(problem, "priority", deadline, self.capacity, self.np_room), problem)
        if problem.settings.max_wait_steps is None or not verify(rp, problem, guard=True):
            cands.append(rp)
        if not cands:
            return self.base
        self.notes.append("surprise reserve (issue 30): a preemptible job in the problem, so non-preemptible starts "
                          "leave each service min(max_gpus, demand + swap_cap_gpus) GPUs (DESIGN §5)")
        return max(cands, key=lambda p: rank(p, problem, self.least))

    def greedy_starts(self) -> None:
        """The verified starts: the best baseline, the greedy plans and the warm start, best first."""
        b, problem = self.budget, self.problem
        greedy = greedy_plans(problem, b.deadline - MIN_SOLVE_S, self.capacity)
        self.seeds = [self.base] + [g for g in greedy if not verify(g, problem)]
        b.past("greedy warm starts", b.deadline - MIN_SOLVE_S)
        ws = self.warm_start
        if ws is not None and not verify(ws, problem):
            # a warm start comes from another problem (the last replan, a what-if's base): its objective field is
            # that problem's, so it is valued again on this one before it competes with the other starts
            self.seeds.append(replace(ws, objective=objective_value(ws, problem)))
        if self.np_room is not None:  # only starts that keep the surprise reserve (feasible points of the models)
            kept = [s for s in self.seeds if self.keeps_reserve(s)]
            self.seeds = kept or self.seeds
        self.rank_seeds()
        b.took("greedy warm starts")

    def build_master(self) -> None:
        """The count master; every later solve is stopped :func:`finish_reserve_s` before the deadline."""
        b = self.budget
        self.cm: CountModel = build_count_model(self.problem, self.u_star, self.capacity)
        self.size = dict(self.cm.size, method="decomposed")  # the work counters travel with the size
        b.took("master build")
        b.kill_at = b.deadline - finish_reserve_s(self.cm.model.n_cols)
        # the scale path (no branch-and-bound) is a work-budget rule; on the clock the master MILP gets the time left
        self.at_scale = self.cm.model.n_cols > SCALE_MIN_MASTER_COLUMNS and not b.on_clock
        self.w_master = b.work_limit(self.cm.model.n_cols)
        self.size["mip_work_limit"] = self.w_master

    def lp_relaxation(self) -> None:
        """The master's LP relaxation, run to its end (the deadline kills it): a proven bound and rounded plans."""
        b = self.budget
        assert self.size is not None
        if b.room() < 0.1:
            b.stopped.append("LP relaxation")
            return
        hl, kill = b.limits()
        lp = solve_master_lp(self.cm, time_limit_s=hl, kill_after_s=kill)
        b.solves.append(lp)
        self.size["lp_iterations"] = lp.iterations
        b.took("LP relaxation")
        if lp.status == SolveStatus.OPTIMAL and lp.objective is not None and lp.x is not None:
            self.lp_bound = lp.objective * self.scale
            self.lp_rounding(lp.x)
        else:
            self.notes.append(f"the master's LP relaxation did not solve in its {hl:.1f} s ({lp.status}): "
                              "no LP bound")

    def lp_rounding(self, x: np.ndarray) -> None:
        """The verified plans rounded from the LP solution ``x`` join the starts."""
        b = self.budget
        assert b.kill_at is not None
        for g in lp_rounded_plans(self.cm, x, deadline=b.kill_at):
            if not verify(g, self.problem):
                self.seeds.append(g)
        b.past("LP rounding", b.kill_at)
        self.rank_seeds()
        b.took("LP rounding")

    def lp_answer(self) -> Plan | None:
        """The best start under the LP bound when it is the answer (within the gap, scale path, no work or time left)."""
        st, b, cm = self.settings, self.budget, self.cm
        self.best = self.seeds[0]
        lp_gap = mip_gap(self.best.objective, self.lp_bound) if self.rt_first(self.best) else None  # under the row
        if lp_gap is not None and (self.at_scale or self.w_master == 0 or lp_gap <= st.mip_rel_gap):
            # proven within the requested gap, or a master this large (where branch-and-bound did not
            # improve on the rounded plans, DESIGN §5), or one whose root node alone would not fit the
            # work budget: the LP bound and the best rounded plan
            why = ("within mip_rel_gap" if lp_gap <= st.mip_rel_gap else
                   f"master of {cm.model.n_cols:,} columns is above {SCALE_MIN_MASTER_COLUMNS:,} "
                   "(scale path: no branch-and-bound)" if self.at_scale else
                   f"the work budget for time_limit_s={st.time_limit_s:g} does not cover the root node of a "
                   f"master of {cm.model.n_cols:,} columns (auto_work_limit 0: no branch-and-bound)")
            return self.bounded(self.best, self.lp_bound, "LP relaxation", why)
        if b.left() < MIN_SOLVE_S or b.room() < MIN_SOLVE_S:
            if self.lp_bound is not None:
                return self.bounded(self.best, self.lp_bound, "LP relaxation", "no time left for the master MILP",
                                    out_of_time=True)
            return self.out_of_time("the master solve")
        return None

    def master_solve(self) -> Plan | None:
        """The master MILP warm-started from the best verified start; an answer only when it gives no plan."""
        st, b, cm = self.settings, self.budget, self.cm
        assert self.size is not None
        start = next((x for x in (count_vector(cm, s) for s in self.seeds) if x is not None), None)
        hl, kill = b.limits()
        if b.on_clock:  # on the clock the master leaves MASTER_CLOCK_SHARE of the room to packing and repair
            hl = max(0.05, min(hl, MASTER_CLOCK_SHARE * b.room()))
        out = solve(cm.model, time_limit_s=hl, mip_rel_gap=st.mip_rel_gap, threads=st.threads,
                    random_seed=st.random_seed, start=start, mip_work_limit=self.w_master, kill_after_s=kill,
                    allow_restart=False)
        b.solves.append(out)
        self.size.update(mip_checks=out.work, mip_nodes=out.nodes)
        b.took("master solve")
        self.master = out
        master_bound = None if out.bound is None else out.bound * self.scale
        self.bound = min_bound(self.lp_bound, master_bound)
        if out.x is None or out.status not in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT):
            if self.bound is not None:
                return self.bounded(self.best, self.bound, "LP relaxation",
                                    f"the master MILP gave no plan ({out.status})")
            return self.fallback(out.status, out.message or out.status)
        self.picks, self.svc = count_picks(cm, out.x)
        return None

    def packing(self) -> Plan | None:
        """The master's starts packed onto aligned blocks (first fit; the packing MILP with time left); None unpacked."""
        st, b, out = self.settings, self.budget, self.master
        pack_room = b.room()
        pack_milp = pack_room >= MIN_SOLVE_S
        offs = pack_offsets(self.cm.occ, self.picks, time_limit_s=max(0.05, pack_room), seed=st.random_seed,
                            threads=st.threads, mip_work_limit=self.w_master, log=b.solves,
                            milp=pack_milp, kill_after_s=max(0.05, pack_room))
        if offs is None and not pack_milp:
            b.stopped.append("block packing")
        b.took("block packing")
        if offs is None:
            return None
        starts = {jid: (t, offs[jid], g) for jid, (t, g, _d) in self.picks.items()}
        plan_, why = self.finish(out, starts, self.svc, PlanSource.DECOMPOSITION, bound=self.bound)
        if plan_ is not None and not self.worse(plan_, self.best):
            return plan_
        if self.bound is not None:
            return self.bounded(self.best, self.bound, "LP relaxation and master MILP",
                                why or "the master's plan is below the best heuristic plan")
        if plan_ is not None:
            return plan_
        return self.fallback(out.status, why)

    def repair(self) -> Plan | None:
        """The master-guided repair joins the starts; the best admitted placement when the full model cannot run."""
        st, b = self.settings, self.budget
        guided = master_guided_plan(self.problem, self.picks, self.svc, self.capacity)
        if not verify(guided, self.problem):
            self.seeds.append(guided)
            self.rank_seeds()
        b.took("master-guided repair")
        est = estimate_size(self.problem)
        too_big = est.nonzeros > MAX_MODEL_NONZEROS or est.cols > MAX_MODEL_COLUMNS
        if est.binaries > st.full_model_max_binaries or too_big or b.left() < MIN_SOLVE_S:
            if est.binaries > st.full_model_max_binaries:
                why = f"is above full_model_max_binaries={st.full_model_max_binaries}"
            elif too_big:
                why = (f"({est.cols:,} columns, {est.nonzeros:,} nonzeros) is above the size limits "
                       f"({MAX_MODEL_COLUMNS:,} columns, {MAX_MODEL_NONZEROS:,} nonzeros)")
            else:
                why = f"does not fit the {b.left():.2f} s left of time_limit_s={st.time_limit_s:g}"
            return self.admitted(est.binaries, why)
        self.notes.append("decomposition: the master's starts could not be packed into aligned blocks; "
                          "solved the full model instead")
        return None

    def admitted(self, binaries: int, why: str) -> Plan:
        """The best start the master admits (guard rows, demand band, swap cap, block levels), under its bound."""
        b, out = self.budget, self.master
        # only placements the master admits: the master's bound covers only these
        admitted = [s for s in self.seeds if master_admits(self.cm, s)]
        if not admitted:
            return self.fallback(out.status, "its starts could not be packed into aligned blocks and no verified "
                                 "placement satisfies the master's rows")
        best = admitted[0]
        bound = self.bound
        bound = bound if bound is not None and not below(bound, best.objective, self.scale, rel=1e-6) else None
        self.notes.append(
            f"decomposition: the master's starts could not be packed into aligned blocks and the full "
            f"model ({binaries} binaries) {why}: "
            f"kept the best placement the master admits ({best.planner}) under the master's bound")
        chosen = replace(best, planner="milp", status=SolveStatus.TIME_LIMIT, source=PlanSource.REPAIR,
                         model=self.size, bound=bound, gap=mip_gap(best.objective, bound), solver_status=out.status,
                         solve_s=b.elapsed(), notes=tuple(self.notes),
                         message="master solved but its starts could not be packed; best admitted placement "
                                 "kept (not proven optimal)",
                         wall_clock_limited=self.clocked() or b.left() < MIN_SOLVE_S)
        return verified(chosen, self.problem)

    def full_model(self) -> Plan:
        """The full x[j, s, o, t] model, warm-started from the best start it accepts; the fallback without a plan."""
        st, b = self.settings, self.budget
        bm = build_model(self.problem, self.u_star, self.capacity)
        self.size = dict(bm.size, method="full")
        b.took("full model build")
        if b.left() < MIN_SOLVE_S:
            return self.out_of_time("the full model solve")
        start = next((x for x in (plan_to_vector(bm, s) for s in self.seeds) if x is not None), None)
        reserve = finish_reserve_s(bm.model.n_cols)
        out = solve(bm.model, time_limit_s=max(0.05, b.left() - reserve - AFTER_SOLVE_S),
                    mip_rel_gap=st.mip_rel_gap, threads=st.threads, random_seed=st.random_seed, start=start,
                    mip_work_limit=self.full_work_limit(bm.model.n_cols),
                    kill_after_s=max(0.05, b.left() - reserve))
        b.solves.append(out)
        if out.x is None or out.status not in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT):
            return self.fallback(out.status, out.message or out.status)
        starts, svc = solution_starts(bm, out.x)
        plan_, why = self.finish(out, starts, svc, PlanSource.MILP)
        if plan_ is not None:
            return plan_
        return self.fallback(out.status, why)

    def full_work_limit(self, n_cols: int) -> int | None:
        """The full model's work limit: :meth:`Budget.work_limit`, at least :data:`WORK_MIN_CHECKS` when there is one."""
        w = self.budget.work_limit(n_cols)
        return None if w is None else max(WORK_MIN_CHECKS, w)

    # ------------------------------------------------------------------ the answers

    def clocked(self) -> bool:
        """:meth:`Budget.clock_hit`, adding the wall-clock note once when it did."""
        hit = self.budget.clock_hit()
        if hit and not self.budget.on_clock and not any(n.startswith("a solve reached the wall-clock") for n in self.notes):
            what = ", ".join(self.budget.stopped) or "a HiGHS solve"
            self.notes.append(f"a solve reached the wall-clock limit of {self.settings.time_limit_s:g} s for the "
                              f"whole plan before its work budget was done ({what}): this plan may not reproduce")
        return hit

    def fallback(self, status: SolveStatus, why: str, out_of_time: bool = False) -> Plan:
        """The best baseline plan as the MILP's answer, with the MILP's own outcome ``status`` and ``why``."""
        hit = self.clocked() or out_of_time
        base = self.base
        return verified(replace(
            base, planner="milp", status=SolveStatus(status), source=PlanSource.FALLBACK, model=self.size,
            solver_status=status, solve_s=self.budget.elapsed(),
            message=f"MILP {status}: {why}; returning the best baseline plan ({base.planner})",
            notes=tuple(self.notes), wall_clock_limited=hit,
        ), self.problem)

    def out_of_time(self, before: str) -> Plan:
        """The fallback when less than :data:`MIN_SOLVE_S` is left before the step ``before``."""
        return self.fallback(SolveStatus.TIME_LIMIT, f"the time budget of {self.settings.time_limit_s:g} s (time_limit_s) was "
                             f"spent before {before} ({self.budget.spent_text()}; less than {MIN_SOLVE_S:g} s left)",
                             out_of_time=True)

    def bounded(self, plan_: Plan, bound: float | None, what: str, why: str, out_of_time: bool = False) -> Plan:
        """The verified plan ``plan_`` (the best warm start or rounded plan) as the MILP's answer, under ``bound``."""
        if bound is not None and below(bound, plan_.objective, self.scale, rel=1e-6):
            bound = None  # a bound below a verified plan is not a bound of it (never expected)
        gap = mip_gap(plan_.objective, bound)
        status = SolveStatus.OPTIMAL if gap is not None and gap <= self.settings.mip_rel_gap else SolveStatus.TIME_LIMIT
        source = SOURCE_OF_PLANNER.get(plan_.planner, PlanSource.GREEDY)  # lp_guided -> lp_rounding
        gap_txt = "no bound" if gap is None else f"proven gap {gap:.3%} against the {what} bound"
        return verified(replace(
            plan_, planner="milp", status=status, source=source, model=self.size, bound=bound, gap=gap,
            solver_status=str(status), solve_s=self.budget.elapsed(), notes=tuple(self.notes),
            message=f"best verified plan ({source.value}), {gap_txt}: {why}",
            wall_clock_limited=self.clocked() or out_of_time,
        ), self.problem)

    def finish(self, out: SolveOutcome, starts: dict, svc: np.ndarray, source: PlanSource,
               bound: float | None = None) -> tuple[Plan | None, str]:
        """The plan of a solve's ``starts`` and service GPUs ``svc``, or (None, why) when it fails or is below the base."""
        problem = self.problem
        status = SolveStatus.OPTIMAL if out.status == SolveStatus.OPTIMAL else SolveStatus.TIME_LIMIT
        hit = self.clocked()
        # the model is in units of the largest priority (DESIGN §5): its bound times P is in the user's
        if bound is None and out.bound is not None:
            bound = out.bound * self.scale
        # GPUs above a service's need serve nothing (its objective is the same, DESIGN §5): trimmed to the need,
        # min of two valid trajectories (band, swap cap), so the plan stays valid and no demand is left unmet
        if len(problem.services):
            svc = np.minimum(svc, self.capacity.need)
        p = assemble_plan(problem, "milp", status, starts, svc, self.budget.elapsed(),
                          bound=bound, gap=out.gap, model=self.size, message=out.message, notes=tuple(self.notes),
                          solver_status=out.status, source=source)
        if bound is not None and not below(bound, p.objective, self.scale, rel=1e-6):
            p = replace(p, gap=mip_gap(p.objective, bound))
        p = replace(p, wall_clock_limited=hit)
        v = verify(p, problem)
        if v:
            return None, "its plan failed verification (" + "; ".join(v[:3]) + ")"
        if self.worse(p, self.base):  # base satisfies the guard too (best_baseline)
            return None, f"its plan ({p.objective:.6g}) is below the best baseline's ({self.base.objective:.6g})"
        return p, ""


def deadline_status(p: Plan, problem: Problem) -> Plan:
    """A MILP plan the wall-clock safety stop cut short (``wall_clock_limited``, not proven optimal) gets status ``deadline`` and a warning note, logged on the ``gpuplan`` logger: its result depended on machine load (DESIGN §5)."""
    st = problem.settings
    if not p.wall_clock_limited or p.status == SolveStatus.OPTIMAL or (st.budget == "time" and st.mip_work_limit is None):
        return p  # with budget="time" the clock is the budget: stopping on it is the normal end (status time_limit)
    warn = (f"warning: the wall-clock deadline (time_limit_s={problem.settings.time_limit_s:g} s) stopped this plan "
            "before its work budget was done: the plan depends on machine load and may not reproduce")
    logging.getLogger("gpuplan").warning(warn)
    return replace(p, status=SolveStatus.DEADLINE, notes=(*p.notes, warn))
