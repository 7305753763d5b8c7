"""The per-step GPU owner grid of a plan, for display (the Gantt plot and the plan tables)."""

from __future__ import annotations

from typing import Any


def display_grid(problem: Any, plan: Any) -> list[list[str]]:
    """Owner per step and GPU for display, shape (horizon_steps, n_gpus).

    Batch jobs on their blocks, GPUs in ``problem.down_gpus`` as ``"down"``, then each service's
    counted GPUs as ``"service:<name>"`` (services are counted, not placed, by the model), ``""`` idle.
    A service keeps the GPUs it was shown on the step before while they stay free (its highest ones
    first when it shrinks); only the GPUs it newly needs come from the highest free GPUs, so a replica
    is shown moving only when a batch block takes its GPU (the old top-down refill showed every
    replica moving whenever a batch job came or went below it).
    """
    grid = [list(r) for r in plan.owner_grid(problem.n_gpus, problem.horizon_steps)]
    down = set(getattr(problem, "down_gpus", ()) or ())
    prev: dict[str, list[int]] = {}
    for t, row in enumerate(grid):
        for g in down:
            row[g] = "down"
        free = {g for g, o in enumerate(row) if not o}
        kept: dict[str, list[int]] = {}
        for svc, alloc in plan.service_gpus.items():  # first, every service keeps what it still can
            keep = sorted((g for g in prev.get(svc, []) if g in free), reverse=True)[:int(alloc[t])]
            free -= set(keep)
            kept[svc] = keep
        for svc, alloc in plan.service_gpus.items():  # then the new GPUs, from the top free GPU down
            new = sorted(free, reverse=True)[:max(0, int(alloc[t]) - len(kept[svc]))]
            free -= set(new)
            kept[svc] = kept[svc] + new
            for g in kept[svc]:
                row[g] = f"service:{svc}"
        prev = kept
    return grid
