"""Solve stage: plan a validated problem with a planner, and check the plan with the verifier."""

from __future__ import annotations

from optimizer.diagnose import CapacityConflict, InfeasibleProblemError
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
        optimizer.diagnose.InfeasibleProblemError: no valid plan exists; its ``hint`` (:func:`infeasible_hint`)
            says what the operator can change, the CLI's second line.
    """
    try:
        result = run_planner(problem, planner, warm_start)
    except InfeasibleProblemError as exc:
        if exc.conflict is not None:
            exc.hint = infeasible_hint(exc.conflict)
        raise
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


def infeasible_hint(c: CapacityConflict) -> str:
    """What the operator can do when real time's smallest allocations plus the running jobs exceed the GPUs up.

    One line with the numbers in conflict (GPUs needed at the step against GPUs up), e.g. ``what you can do: at step 0
    the services need at least 61 GPUs (m-small 1, m-mid 60 (min_gpus 60)) and running jobs hold 7 (none
    preemptible): 68 GPUs needed, 64 up, 4 short; mark checkpointing jobs preemptible ([preemption] qos or
    partitions in gpuplan.toml, or gpuplan.preemptible=true on the job) so the plan may stop them, lower a
    service's min_gpus, or add GPUs``.
    """
    per = ", ".join(f"{name} {low}" + (f" (min_gpus {mn})" if mn == low and low > 0 else "")
                    for name, low, mn in c.minimums)
    pre = ("none preemptible" if c.preemptible_running == 0 else
           f"{c.preemptible_running} of them on preemptible jobs, not enough")
    return (f"what you can do: at step {c.step} the services need at least {c.realtime} GPUs ({per}) and running "
            f"jobs hold {c.running} ({pre}): {c.need} GPUs needed, {c.up} up, {c.shortfall} short; mark "
            "checkpointing jobs preemptible ([preemption] qos or partitions in gpuplan.toml, or "
            "gpuplan.preemptible=true on the job) so the plan may stop them, lower a service's min_gpus, or add GPUs")
