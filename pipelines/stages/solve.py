"""Solve stage: plan a validated problem with a planner, and check the plan with the verifier."""

from __future__ import annotations

from optimizer.plan import Plan
from optimizer.planners import production_plan as run_planner
from optimizer.problem import Problem
from optimizer.verify import verify

#: Plan statuses that mean "no plan" when the plan also has no assignment and no service GPUs (C13 b).
NO_PLAN_STATUSES = ("no_solution", "infeasible", "unbounded_or_infeasible", "solver_error")


def solve(problem: Problem, planner: str, warm_start: Plan | None = None) -> Plan:
    """Plan ``problem`` with ``planner`` (:data:`optimizer.planners.PLANNERS`).

    ``warm_start``: a plan the MILP may start from when the verifier accepts it on ``problem``
    (:func:`optimizer.planners.plan`; a what-if passes the base plan).

    Raises:
        RuntimeError: the solver ended without any valid plan (C13 b): the message gives the status,
            the time limit and the solver's message.
        optimizer.errors.InputError: unknown planner.
    """
    result = run_planner(problem, planner, warm_start)
    if result.status in NO_PLAN_STATUSES and not result.assignments and not result.service_gpus:
        raise RuntimeError(
            f"no feasible allocation found: status {result.status} after time limit "
            f"{problem.settings.time_limit_s:g} s ({result.message})")
    return result


def check_plan(problem: Problem, plan: Plan) -> str:
    """Check ``plan`` with the independent verifier (:func:`optimizer.verify.verify`); return its status.

    Raises:
        RuntimeError: any violation (the plan is never written as valid), or status ``no_solution`` (C13 b).
    """
    if plan.status == "no_solution" and not plan.fallback:
        raise RuntimeError(f"no feasible allocation within the time limit of {problem.settings.time_limit_s:g} s")
    violations = verify(plan, problem)
    if violations:
        raise RuntimeError(f"plan failed verification ({len(violations)} violations): {violations[:3]}")
    return plan.status
