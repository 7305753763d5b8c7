"""The fast mode (issue 29): a horizon heuristic in milliseconds, legal by construction, the MILP's first start.

``fast_plan(problem) -> Plan`` plans the whole horizon without a solver. It sees the whole queue before placing
any job and returns the best, by the ranking every planner shares (:func:`optimizer.ranking.rank`: real-time first,
then the DESIGN §5 objective), of these candidates:

- the three greedy orders of :func:`optimizer.baselines.greedy_plans` (priority, reward per GPU-step, size x
  duration, largest first), each placing every job at its earliest fitting start and size with real-time
  capacity reserved against the **demand curve** (:func:`optimizer.baselines.demand_following_target`: the
  smallest level the swap cap can follow, ramping up ahead of a rise), not the daily peak; blocks are aligned
  power-of-two blocks inside one node (or whole nodes of one type for a gang), so the free space left keeps the
  buddy shapes later jobs need (:class:`optimizer.baselines.Board`);
- priority backfill (:func:`optimizer.baselines.baseline_plan` ``"priority"``), so the fast plan is never below it.

Every candidate is built by the same placement board the baselines use (one task per GPU per step, blocks of the
job's allowed sizes, eligible GPU types, down GPUs avoided, no preemption, services within their band and swap
cap), and each is checked by the independent verifier (:func:`optimizer.verify.verify`, the starvation guard
included when ``settings.max_wait_steps`` is set); a candidate the verifier rejects is dropped, and FIFO (which
never overtakes) is the answer when no candidate passes the guard. The MILP (:class:`optimizer.strategy.MilpRun`,
:class:`optimizer.typed_milp.TypedMilpRun`) seeds its search with the same candidates (best baseline and greedy
orders), so its plan ranks at least as high as the fast plan's.

Measured speed and the bars: ``benchmarks/bench_fast.py`` (docs/benchmark.md, "Fast mode").
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from optimizer.baselines import baseline_plan, greedy_place, greedy_plans
from optimizer.capacity import Capacity, least_unmet_rt
from optimizer.plan import Plan, PlanSource
from optimizer.problem import Problem
from optimizer.ranking import rank, verified
from optimizer.reserve import surprise_room
from optimizer.verify import verify

#: The planner name of fast plans (:data:`optimizer.planners.PLANNERS`).
FAST = "fast"


def fast_candidates(problem: Problem, deadline: float | None = None, capacity: Capacity | None = None) -> list[Plan]:
    """The fast mode's candidate plans, unverified: priority backfill, then the greedy orders of :func:`optimizer.baselines.greedy_plans`.

    ``deadline`` (a ``time.perf_counter()`` value): no further greedy order is started once passed (priority
    backfill always runs, stopping its own placement there). Each plan covers ``problem.horizon_steps`` steps.
    With a preemptible job in the problem every candidate keeps the surprise reserve (issue 30,
    :func:`optimizer.reserve.surprise_room`: non-preemptible starts leave the GPUs a one-step surprise may claim).
    """
    cap = capacity if capacity is not None else Capacity.of(problem)
    return [baseline_plan(problem, "priority", deadline, cap, surprise_room(problem)), *greedy_plans(problem, deadline, cap)]


def fast_plan(problem: Problem, deadline: float | None = None, capacity: Capacity | None = None) -> Plan:
    """The fast mode's plan of ``problem`` (module docstring), **verified**: the best-ranked candidate the verifier accepts.

    Candidates (:func:`fast_candidates`) are ranked (:func:`optimizer.ranking.rank`) and verified in that order,
    the starvation guard included (``settings.max_wait_steps``); the first accepted is returned with planner
    ``"fast"``, its candidate's assignments, service GPUs and objective, ``source`` the candidate's (``priority``
    or ``greedy``), and a note naming it. With none accepted (a guard no candidate keeps), FIFO, which never
    overtakes. ``solve_s``: wall seconds of the whole call.

    Raises:
        optimizer.ranking.UnverifiedPlanError: FIFO itself fails the verifier (a bug).
    """
    t0 = time.perf_counter()
    cap = capacity if capacity is not None else Capacity.of(problem)
    cands = fast_candidates(problem, deadline, cap)
    least = least_unmet_rt(problem)
    order = sorted(range(len(cands)), key=lambda i: (rank(cands[i], problem, least), -i), reverse=True)
    best = next((cands[i] for i in order if not verify(cands[i], problem, guard=True)), None)
    if best is None:
        best = verified(baseline_plan(problem, "fifo", None, cap), problem)
    source = best.source if best.source is not None else PlanSource.GREEDY
    note = (f"fast mode: best verified of {len(cands)} candidates (priority backfill, greedy orders): "
            f"{best.planner}")
    return replace(best, planner=FAST, source=source, solve_s=time.perf_counter() - t0, notes=(*best.notes, note))


def place_arrivals(problem: Problem, committed: Plan, job_ids: set[str] | frozenset[str],
                   capacity: Capacity | None = None) -> Plan:
    """``committed`` with the queued jobs ``job_ids`` it leaves unstarted placed by the fast mode in the room it leaves.

    For an arrival between replans (the rolling horizon's option, :func:`optimizer.simulate.simulate`
    ``place_arrivals``): every start of ``committed`` (a plan of ``problem``, e.g. the previous plan shifted to this
    step) is kept, the services keep its GPUs per step, and the jobs of ``job_ids`` are placed one by one, highest
    priority first (then release, id), each at its earliest fitting start and size
    (:func:`optimizer.baselines.greedy_place` on a board holding the committed blocks). Planner
    ``committed.planner``, source ``greedy``; unverified (the caller verifies before committing). Non-preemptible
    arrivals keep the surprise reserve (:func:`optimizer.reserve.surprise_room`, issue 30).
    """
    H = problem.horizon_steps
    fixed = {a.job_id: (a.start_step, a.block_offset, a.gpus, a.end_step - a.start_step)
             for a in committed.assignments
             if not a.running and a.start_step is not None and a.block_offset is not None and a.gpus is not None
             and a.end_step is not None}
    svc = np.array([committed.service_gpus[s.service] for s in problem.services], dtype=np.int64).reshape(-1, H)
    new = sorted((j for j in problem.jobs if j.job_id in job_ids and j.job_id not in fixed),
                 key=lambda j: (-j.priority, j.release_step, j.job_id))
    placed = greedy_place(problem, svc, new, committed.planner, capacity=capacity, fixed=fixed,
                          np_room=surprise_room(problem))
    return replace(placed, source=PlanSource.GREEDY, message="arrivals placed by the fast mode on the committed plan")
