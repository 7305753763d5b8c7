"""The per-step GPU owner grid of a plan, for display (the Gantt plot and the plan tables)."""

from __future__ import annotations

from typing import Any


def display_grid(problem: Any, plan: Any) -> list[list[str]]:
    """Owner per step and GPU for display, shape (horizon_steps, n_gpus).

    Batch jobs on their blocks, GPUs in ``problem.down_gpus`` as ``"down"``, then each service's
    counted GPUs on the highest free GPUs as ``"service:<name>"`` (services are counted, not
    placed), ``""`` idle.
    """
    grid = [list(r) for r in plan.owner_grid(problem.n_gpus, problem.horizon_steps)]
    down = set(getattr(problem, "down_gpus", ()) or ())
    for t, row in enumerate(grid):
        for g in down:
            row[g] = "down"
        free = [g for g, o in reversed(list(enumerate(row))) if not o]  # services from the top GPU down
        i = 0
        for svc, alloc in plan.service_gpus.items():
            for _ in range(int(alloc[t])):
                if i < len(free):
                    row[free[i]] = f"service:{svc}"
                    i += 1
    return grid
