"""Which verified plan is better (DESIGN §5, real time first): the ranking every planner path shares.

A plan ranks above another when it leaves less real-time demand unmet above ``U*`` (the least any valid plan
leaves, :func:`optimizer.capacity.least_unmet_rt`), then when its §5 objective is higher. :func:`best_baseline`
is the answer of last resort of the MILP (:mod:`optimizer.strategy`); :func:`verified` is the gate every
returned plan passes.
"""

from __future__ import annotations

from optimizer.baselines import BASELINES, baseline_plan
from optimizer.capacity import Capacity, least_unmet_rt
from optimizer.objective import unmet_gpu_steps
from optimizer.plan import Plan
from optimizer.problem import Problem
from optimizer.verify import verify


class UnverifiedPlanError(RuntimeError):
    """A planner produced a plan the verifier rejects (a bug); the message lists the violations."""


def verified(p: Plan, problem: Problem) -> Plan:
    """``p`` itself when the verifier accepts it on ``problem``; raises :class:`UnverifiedPlanError` (first 5 violations) otherwise."""
    v = verify(p, problem)
    if v:
        raise UnverifiedPlanError(f"{p.planner} plan fails verification: " + "; ".join(v[:5]))
    return p


def rt_excess(p: Plan, problem: Problem, least: int) -> float:
    """Unmet real-time GPU-steps of ``p`` above ``U*`` (``least``): 0 for a plan that serves real-time first."""
    return max(0.0, unmet_gpu_steps(p, problem) - least)


def rank(p: Plan, problem: Problem, least: int) -> tuple[float, float]:
    """Sort key, larger is better: real-time first (least unmet above ``U*``), then the §5 objective (DESIGN §5)."""
    return (-rt_excess(p, problem, least), p.objective)


def below(a: float, b: float, scale: float, rel: float = 1e-9) -> bool:
    """True when objective ``a`` is below ``b`` by more than ``rel`` in units of the largest priority ``scale``.

    Objectives are compared as ``a / scale`` and ``b / scale`` with the tolerance ``rel · max(1, |b| / scale)``,
    so the test does not depend on the priorities' units (case F01: an absolute 1e-9 swamps an objective
    of 1e-8 when priorities are 1e-9).
    """
    a_, b_ = a / scale, b / scale
    return a_ < b_ - rel * max(1.0, abs(b_))


def min_bound(*bounds: float | None) -> float | None:
    """The smallest of the finite bounds given (each a valid upper bound, so the least is the best); None without one."""
    ok = [b for b in bounds if b is not None and b == b and abs(b) != float("inf")]
    return min(ok) if ok else None


def best_baseline(problem: Problem, deadline: float | None = None, least: int | None = None,
                  capacity: Capacity | None = None) -> Plan:
    """The verified baseline plan ranked first: least unmet real-time demand above ``U*``, then the highest objective (ties: fifo, easy, priority order).

    With ``settings.max_wait_steps`` set, only baseline plans that also satisfy the starvation
    guard count (:func:`optimizer.verify.max_wait_violations`); FIFO never overtakes, so one always does.
    ``deadline`` (a ``time.perf_counter()`` value): each baseline stops placing jobs once it has
    passed (a valid plan with the rest unstarted, :func:`optimizer.baselines.baseline_plan`);
    priority backfill runs first, then EASY, then FIFO (FIFO is the fastest and never overtakes).
    ``least``: ``U*`` when the caller has it (:func:`optimizer.capacity.least_unmet_rt`), else computed here.
    ``capacity``: :meth:`optimizer.capacity.Capacity.of` of ``problem`` when the caller has it.
    Raises :class:`UnverifiedPlanError` when a baseline's plan fails verification (a bug).
    """
    made = {b: verified(baseline_plan(problem, b, deadline, capacity), problem) for b in reversed(BASELINES)}
    plans = [made[b] for b in BASELINES]
    if problem.settings.max_wait_steps is not None:
        plans = [p for p in plans if not verify(p, problem, guard=True)]
    least = least_unmet_rt(problem) if least is None else least
    return max(plans, key=lambda p: rank(p, problem, least))  # max keeps the first of equals
