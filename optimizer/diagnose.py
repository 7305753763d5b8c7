"""Cheap checks before building a MILP: infeasibility diagnosis and model-size estimate.

- The problem is feasible exactly when, at every step, the services' smallest valid allocations
  (:func:`optimizer.capacity.service_bounds`) plus the running jobs fit in the GPUs that are up
  (queued jobs may always wait).
- :func:`diagnose` returns those reasons as sentences naming the step and the numbers (case
  C14a: "real-time demand (hard) plus running jobs exceed the cluster at step 18: 72 > 64 ...");
  :func:`check_feasible` raises :class:`InfeasibleProblemError` with them.
- :func:`estimate_size` counts start binaries (and rows, columns) from the problem alone, in
  O(jobs x sizes), and :func:`check_size` refuses a model above ``settings.max_binaries``
  (case C17a) before anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optimizer.capacity import running_gpus_per_step, service_bounds, service_need, up_gpus
from optimizer.errors import InputError
from optimizer.problem import Problem


class InfeasibleProblemError(InputError):
    """No valid plan exists; the message names the step (or service) and the numbers."""


class ModelTooLargeError(InputError):
    """The estimated MILP exceeds ``settings.max_binaries``; the message gives estimate and limit."""


def diagnose(problem: Problem) -> list[str]:
    """Reasons the problem has no valid plan (empty list when it has one).

    Each reason names the service or step and the numbers, e.g. ``"real-time minimums plus
    running jobs exceed the cluster at step 18: 72 > 64 (real-time 72, running 0, GPUs up 64,
    shortfall 8)"``. Only the first offending step per kind of reason is reported, with the
    number of further steps.
    """
    reasons: list[str] = []
    if not problem.services:
        return reasons
    L, U = service_bounds(problem)
    hard = problem.settings.demand_hard
    for i, s in enumerate(problem.services):
        bad = np.nonzero(L[i] > U[i])[0]
        if len(bad):
            t = int(bad[0])
            what = "band, swap cap and hard demand" if hard else "band and swap cap"
            reasons.append(
                f"service {s.service!r}: no allocation fits its {what} at step {t}: needs at least "
                f"{int(L[i, t])} GPUs but at most {int(U[i, t])} are allowed (demand {s.demand_gpus[t]}, "
                f"band [{s.min_gpus}, {s.max_gpus}], swap cap {s.swap_cap_gpus}, current_gpus "
                f"{s.current_gpus})" + (f"; {len(bad) - 1} more steps" if len(bad) > 1 else "")
            )
    if reasons:
        return reasons
    run = running_gpus_per_step(problem)
    cap = up_gpus(problem)
    need = L.sum(axis=0) + run
    bad = np.nonzero(need > cap)[0]
    if len(bad):
        t = int(bad[0])
        rt = int(L[:, t].sum())
        label = "real-time demand (hard)" if hard else "real-time minimums"
        down = f", {len(problem.down_gpus)} GPUs down" if problem.down_gpus else ""
        per = ", ".join(f"{s.service} {int(L[i, t])}" for i, s in enumerate(problem.services))
        reasons.append(
            f"{label} plus running jobs exceed the cluster at step {t}: {int(need[t])} > {cap} "
            f"(real-time {rt}, running {int(run[t])}, capacity {cap}{down}, shortfall {int(need[t]) - cap}; "
            f"smallest allocation per service given band, swap cap and current_gpus: {per})"
            + (f"; {len(bad) - 1} more steps" if len(bad) > 1 else "")
        )
    return reasons


def check_feasible(problem: Problem) -> None:
    """Raise :class:`InfeasibleProblemError` (naming step and numbers) when no plan is valid."""
    reasons = diagnose(problem)
    if reasons:
        raise InfeasibleProblemError("infeasible: " + "; ".join(reasons))


def coverage_shortfalls(problem: Problem) -> list[str]:
    """Steps where total real-time demand plus running jobs exceed the GPUs up (soft demand).

    Not infeasible (unmet demand is a penalised slack) but worth telling the operator.
    """
    if not problem.services:
        return []
    D = np.array([s.demand_gpus for s in problem.services], dtype=np.int64).sum(axis=0)
    need = D + running_gpus_per_step(problem)
    cap = up_gpus(problem)
    bad = np.nonzero(need > cap)[0]
    if not len(bad):
        return []
    t = int(bad[0])
    return [
        f"real-time demand plus running jobs exceed the cluster at step {t}: {int(need[t])} > {cap} "
        f"(shortfall {int(need[t]) - cap}); {len(bad)} step(s) cannot be fully served"
    ]


@dataclass(frozen=True)
class SizeEstimate:
    """Upper bound on the MILP's size before pruning against running jobs.

    ``binaries``: start variables x_{j,s,o,t} (identical jobs aggregated); ``cols`` all columns;
    ``rows`` all constraints.
    """

    binaries: int
    cols: int
    rows: int


def job_groups(problem: Problem) -> list[list[int]]:
    """Indices of queued jobs that are interchangeable (same priority, release and sizes).

    Interchangeable jobs share one set of start variables with "start at most k times"
    (removes symmetric solutions); job ids are assigned to the chosen starts afterwards.
    Groups are ordered by their first job's position; members keep file order.

    With ``settings.max_wait_steps`` set (the starvation guard, DESIGN §5, stated per job in
    arrival order (release_step, job_id)): a group is a run of interchangeable jobs that are
    adjacent in arrival order, listed in arrival order (the earliest start goes to the earliest
    arrival), and groups are in arrival order. A run is split into single jobs when it becomes
    protected (``release + W``) before the last step at which the GPUs left by running jobs and the
    services' need (:func:`optimizer.capacity.service_need`) drop: only where that capacity does
    not drop is the guard exact on a shared count (:func:`optimizer.milp.add_max_wait`).
    """
    W = problem.settings.max_wait_steps
    if W is not None:
        return _arrival_runs(problem, W)
    groups: dict[tuple, list[int]] = {}
    for k, j in enumerate(problem.jobs):
        key = (j.priority, j.release_step, j.sizes)
        groups.setdefault(key, []).append(k)
    return list(groups.values())


def _arrival_runs(problem: Problem, wait_steps: int) -> list[list[int]]:
    """Groups under ``max_wait_steps`` (see :func:`job_groups`)."""
    H = problem.horizon_steps
    free = up_gpus(problem) - running_gpus_per_step(problem) - service_need(problem).sum(axis=0)
    drops = np.flatnonzero(free[1:] < free[:-1]) + 1
    last_drop = int(drops.max()) if len(drops) else 0
    order = sorted(range(len(problem.jobs)), key=lambda k: (problem.jobs[k].release_step, problem.jobs[k].job_id))
    out: list[list[int]] = []
    prev = None
    for k in order:
        j = problem.jobs[k]
        key = (j.priority, j.release_step, j.sizes)
        shareable = j.release_step + wait_steps >= min(last_drop, H)
        if out and key == prev and shareable:
            out[-1].append(k)
        else:
            out.append([k])
        prev = key
    return out


def estimate_size(problem: Problem) -> SizeEstimate:
    """Count the model's binaries, columns and rows from the problem alone (no allocation)."""
    H, N = problem.horizon_steps, problem.n_gpus
    down = np.zeros(N, dtype=bool)
    down[list(problem.down_gpus)] = True
    ok_blocks: dict[int, int] = {}
    binaries = 0
    min_size = N
    groups = job_groups(problem)
    for g in groups:
        j = problem.jobs[g[0]]
        starts = max(0, H - j.release_step)
        for s in j.sizes:
            if s.gpus not in ok_blocks:
                ok_blocks[s.gpus] = int((~down.reshape(-1, s.gpus).any(axis=1)).sum())
            binaries += ok_blocks[s.gpus] * starts
            min_size = min(min_size, s.gpus)
    S = len(problem.services)
    cols = binaries + 2 * S * H
    rows = (N // min_size) * H + H + len(groups) + 3 * S * H
    W = problem.settings.max_wait_steps
    if W is not None and groups:
        # starvation guard (optimizer.milp.add_max_wait): σ, Q, G per group and step, and per
        # protected step up to two binaries ("no room", "group started"; in cols, not in the start
        # binaries), a room row and a reservation row
        guarded = sum(max(0, H - problem.jobs[g[0]].release_step - W) for g in groups[:-1])
        cols += 3 * len(groups) * H + 2 * guarded
        rows += 3 * len(groups) * H + 3 * guarded
    return SizeEstimate(binaries=binaries, cols=cols, rows=rows)


def check_size(problem: Problem) -> SizeEstimate:
    """Raise :class:`ModelTooLargeError` when the estimate exceeds ``settings.max_binaries``.

    The message gives the estimate, the limit and what to change (case C17a).
    """
    est = estimate_size(problem)
    limit = problem.settings.max_binaries
    if est.binaries > limit:
        H = problem.horizon_steps
        raise ModelTooLargeError(
            f"model too large: about {est.binaries:,} start binaries ({len(problem.jobs)} jobs x up to "
            f"{H} start steps x aligned blocks on {problem.n_gpus} GPUs) exceed max_binaries {limit:,}; "
            f"use a shorter horizon (e.g. {max(1, H // 4)} steps), coarser steps (e.g. "
            f"{problem.cluster.step_minutes * 2}-minute), GPU units of the smallest job size, or "
            "aggregate small jobs into larger ones"
        )
    return est
