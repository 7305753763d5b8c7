"""The per-step GPU owner grid of a plan, for display (the Gantt plot and the plan tables)."""

from __future__ import annotations

from typing import Any

from optimizer.placement import service_placement


def display_grid(problem: Any, plan: Any) -> list[list[str]]:
    """Owner per step and GPU for display, shape (horizon_steps, n_gpus).

    Batch jobs on their blocks, GPUs in ``problem.down_gpus`` as ``"down"``, then each service on the GPUs
    of the core's GPU-level plan (:func:`optimizer.placement.service_placement`, the placement the verifier
    checks against the swap cap) as ``"service:<name>"``, ``""`` idle.
    """
    grid = [list(r) for r in plan.owner_grid(problem.n_gpus, problem.horizon_steps)]
    down = set(getattr(problem, "down_gpus", ()) or ())
    placed = service_placement(problem, plan)
    for t, row in enumerate(grid):
        for g in down:
            row[g] = "down"
        for svc, steps in placed.items():
            for g in steps[t]:
                row[g] = f"service:{svc}"
    return grid
