"""Cheap checks before building a MILP: infeasibility diagnosis and model-size estimate.

- The problem is feasible exactly when, at every step, the services' smallest valid allocations
  (:func:`optimizer.capacity.service_bounds`) plus the running jobs fit in the GPUs that are up
  (queued jobs may always wait).
- :func:`diagnose` returns those reasons as sentences naming the step and the numbers (case
  C14a: "real-time demand (hard) plus running jobs exceed the cluster at step 18: 72 > 64 ...");
  :func:`check_feasible` raises :class:`InfeasibleProblemError` with them.
- :func:`estimate_size` counts start binaries, columns, rows and nonzeros of the full model and
  of the decomposed master from the problem alone, in O(jobs x sizes), and :func:`check_size`
  refuses a model above ``settings.max_binaries`` (case C17a) or above :data:`MAX_MODEL_COLUMNS`
  columns or :data:`MAX_MODEL_NONZEROS` nonzeros, every column counted (case F05), before
  anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optimizer.capacity import running_gpus_per_step, service_bounds, service_need, up_gpus
from optimizer.errors import InputError
from optimizer.problem import Problem


class InfeasibleProblemError(InputError):
    """No valid plan exists; the message names the step (or service) and the numbers.

    ``conflict``: the first step where the services' smallest allocations plus the running jobs exceed the
    GPUs up (:func:`capacity_conflict`), None when the reason is another one (one service's band).
    """

    def __init__(self, message: str, conflict: CapacityConflict | None = None):
        super().__init__(message)
        self.conflict = conflict


@dataclass(frozen=True)
class CapacityConflict:
    """The first step where real time's smallest allocations plus the running jobs exceed the GPUs up (GPUs).

    ``need = realtime + running`` > ``up``; ``minimums``: each service's smallest allocation at ``step``
    (band, swap cap, current_gpus and hard demand) beside its ``min_gpus``: ``(service, smallest, min_gpus)``;
    ``preemptible_running``: GPUs of the preemptible running jobs at ``step`` (a stop could free them).
    """

    step: int
    need: int
    up: int
    realtime: int
    running: int
    minimums: tuple[tuple[str, int, int], ...]
    preemptible_running: int
    more_steps: int = 0  #: further steps with the same conflict after ``step``

    @property
    def shortfall(self) -> int:
        """GPUs missing at ``step``."""
        return self.need - self.up


def capacity_conflict(problem: Problem, lowest: np.ndarray | None = None) -> CapacityConflict | None:
    """The first step where the services' smallest valid allocations plus the running jobs exceed the GPUs up.

    ``lowest``: the services' smallest allocations per step, shape (services, horizon_steps), as
    :func:`optimizer.capacity.service_bounds` gives them (computed here when None).
    """
    if not problem.services:
        return None
    L = service_bounds(problem)[0] if lowest is None else lowest
    run = running_gpus_per_step(problem)
    cap = up_gpus(problem)
    bad = np.nonzero(L.sum(axis=0) + run > cap)[0]
    if not len(bad):
        return None
    t = int(bad[0])
    pre = sum(r.gpus for r in problem.running if r.preemptible and t < r.planned_steps)
    return CapacityConflict(t, int(L[:, t].sum() + run[t]), int(cap), int(L[:, t].sum()), int(run[t]),
                            tuple((s.service, int(L[i, t]), int(s.min_gpus)) for i, s in enumerate(problem.services)),
                            int(pre), len(bad) - 1)


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
    c = capacity_conflict(problem, L)
    if c is not None:
        label = "real-time demand (hard)" if hard else "real-time minimums"
        down = f", {len(problem.down_gpus)} GPUs down" if problem.down_gpus else ""
        per = ", ".join(f"{name} {low}" for name, low, _ in c.minimums)
        reasons.append(
            f"{label} plus running jobs exceed the cluster at step {c.step}: {c.need} > {c.up} "
            f"(real-time {c.realtime}, running {c.running}, capacity {c.up}{down}, shortfall {c.shortfall}; "
            f"smallest allocation per service given band, swap cap and current_gpus: {per})"
            + (f"; {c.more_steps} more steps" if c.more_steps else "")
        )
    return reasons


def check_feasible(problem: Problem) -> None:
    """Raise :class:`InfeasibleProblemError` (naming step and numbers) when no plan is valid."""
    reasons = diagnose(problem)
    if reasons:
        raise InfeasibleProblemError("infeasible: " + "; ".join(reasons), capacity_conflict(problem))


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


#: Largest model (all columns: start counts or start binaries, running counts, service GPUs and
#: unmet demand) the MILP planner builds; above it the problem is refused before anything is
#: built (DESIGN §5, budget and size). Basis, measured with benchmarks/bench_model_size.py on the
#: 2-core machine: the master costs 1.5–3.5 µs and 1.2–1.6 kB per column to build and HiGHS
#: 2.5–6 µs per column to load and presolve it and return the warm start, so 150,000 columns are
#: about 0.5 s, 250 MB and 1 s before the solve starts; but the root LP relaxation alone took
#: 12 s for 65,000 columns (30 jobs, 1,440 one-minute steps) and over 90 s for 190,000 (90
#: jobs), so a larger model returns no more than its warm start inside the default 30-s budget.
#: A 100,000-step horizon with one service (200,000 columns) is refused.
MAX_MODEL_COLUMNS = 150_000

#: Largest number of constraint-matrix nonzeros the MILP planner builds (same benchmark). The full
#: x[j, s, o, t] model holds up to d x (s + 1) nonzeros per column: 8.4 million nonzeros (30 jobs,
#: 120 steps) took 2.0 s and 650 MB to build and 4.3 s for HiGHS to return the warm start; HiGHS
#: presolve does not always check its time limit (HiGHS issues #885, #1501: the old master of
#: ``day_1min_steps``, 19 million nonzeros, stayed 61 s in presolve under a 5-s limit). 2,000,000
#: nonzeros keep build and presolve to about a second each.
MAX_MODEL_NONZEROS = 2_000_000


@dataclass(frozen=True)
class SizeEstimate:
    """Upper bounds on the MILP's size, from the problem alone (before pruning against running jobs).

    ``binaries``: start variables x_{j,s,o,t} of the full model (identical jobs aggregated);
    ``cols`` its columns (binaries + service GPUs and unmet demand); ``rows`` its rows;
    ``nonzeros`` its constraint-matrix entries. ``master_cols`` and ``master_nonzeros``: the same
    for the decomposed master (start counts y_{g,s,t}, running counts, services;
    :mod:`optimizer.decomposition`). ``service_cols``: the 2 x services x steps columns of the
    services alone (part of both).
    """

    binaries: int
    cols: int
    rows: int
    nonzeros: int = 0
    master_cols: int = 0
    master_nonzeros: int = 0
    service_cols: int = 0

    def for_method(self, method: str) -> tuple[int, int]:
        """(columns, nonzeros) of the model ``method`` ("decomposed" or "full") builds first."""
        return (self.master_cols, self.master_nonzeros) if method == "decomposed" else (self.cols, self.nonzeros)


def job_groups(problem: Problem) -> list[list[int]]:
    """Indices of queued jobs that are interchangeable (same priority, release, sizes and ``preemptible``).

    ``preemptible`` is part of the key so a group is all preemptible or all not (the surprise reserve,
    :func:`optimizer.milp.add_surprise_reserve`, counts only non-preemptible starts); without preemptible jobs
    the groups are the same as without it.

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
        key = (j.priority, j.release_step, j.sizes, j.preemptible)
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
        key = (j.priority, j.release_step, j.sizes, j.preemptible)
        shareable = j.release_step + wait_steps >= min(last_drop, H)
        if out and key == prev and shareable:
            out[-1].append(k)
        else:
            out.append([k])
        prev = key
    return out


def estimate_size(problem: Problem) -> SizeEstimate:
    """Count the models' columns, rows and nonzeros from the problem alone, in O(jobs x sizes) (no allocation).

    Per group of interchangeable jobs and size s with duration d and n = H - release possible
    starts: the full model has (aligned blocks free of down GPUs) x n binaries, each with at most
    d x (s / smallest size + 1) + 1 nonzeros (GPU cells, GPU count, start once); the master has n
    start counts and n running counts with about (4 + 1 + block levels + 1) x n nonzeros
    (:func:`optimizer.decomposition.add_running_counts`). Services add 2 x S x H columns and
    about 5 x S x H nonzeros (band, GPU count, swap cap) to both; with ``max_wait_steps`` the
    no-overtaking rows add, per group, the later groups' starts and each own start once per
    step after it (:func:`optimizer.milp.add_max_wait`).
    """
    H, N = problem.horizon_steps, problem.n_gpus
    down = np.zeros(N, dtype=bool)
    down[list(problem.down_gpus)] = True
    ok_blocks: dict[int, int] = {}
    binaries = nz_full = 0
    y_cols = nz_master = 0
    groups = job_groups(problem)
    used_sizes = sorted({s.gpus for j in problem.jobs for s in j.sizes})
    min_size = min(used_sizes, default=N)
    W = problem.settings.max_wait_steps
    y_of: list[int] = []  # start columns per group (master; full model: times aligned blocks)
    x_of: list[int] = []
    for g in groups:
        j = problem.jobs[g[0]]
        starts = max(0, H - j.release_step)
        y_of.append(starts * len(j.sizes))
        x_of.append(0)
        for s in j.sizes:
            if s.gpus not in ok_blocks:
                ok_blocks[s.gpus] = int((~down.reshape(-1, s.gpus).any(axis=1)).sum())
            binaries += ok_blocks[s.gpus] * starts
            x_of[-1] += ok_blocks[s.gpus] * starts
            nz_full += ok_blocks[s.gpus] * starts * (min(s.duration_steps, H) * (s.gpus // min_size + 1) + 1)
            levels = sum(1 for b in used_sizes if 1 < b <= s.gpus)
            y_cols += starts
            nz_master += starts * (4 + 1 + levels + 1)
    if W is not None:  # add_max_wait: rows tau >= release + W of each group; later groups' starts once,
        # each own start t once per row from max(t, release + W): W x n + n (n + 1) / 2 per size, n rows
        for gi, g in enumerate(groups):
            j = problem.jobs[g[0]]
            n = H - (j.release_step + W)
            if n <= 0:
                continue
            own = W * n + n * (n + 1) // 2
            nz_master += sum(y_of) - y_of[gi] + own * len(j.sizes)
            nz_full += sum(x_of) - x_of[gi] + own * sum(ok_blocks[s.gpus] for s in j.sizes)
    S = len(problem.services)
    svc_cols = 2 * S * H
    svc_nz = 5 * S * H
    cols = binaries + svc_cols
    rows = (N // min_size) * H + H + len(groups) + 3 * S * H
    guard_cols = 0
    W = problem.settings.max_wait_steps
    if W is not None and groups:
        # starvation guard (optimizer.milp.add_max_wait): σ, Q, G per group and step, and per
        # protected step up to two binaries ("no room", "group started"; in cols, not in the start
        # binaries), a room row and a reservation row
        guarded = sum(max(0, H - problem.jobs[g[0]].release_step - W) for g in groups[:-1])
        guard_cols = 3 * len(groups) * H + 2 * guarded
        cols += guard_cols
        rows += 3 * len(groups) * H + 3 * guarded
    return SizeEstimate(binaries=binaries, cols=cols, rows=rows, nonzeros=nz_full + svc_nz,
                        master_cols=2 * y_cols + svc_cols + guard_cols, master_nonzeros=nz_master + svc_nz,
                        service_cols=svc_cols)


def check_size(problem: Problem) -> SizeEstimate:
    """Refuse a MILP that the chosen path (``settings.milp_method``) cannot build and solve usefully, before anything is built.

    Raises :class:`ModelTooLargeError` (one line: the count, the limit, what to change for that
    path) when the model the path builds has more than :data:`MAX_MODEL_COLUMNS` columns or
    :data:`MAX_MODEL_NONZEROS` nonzeros, every column counted: start variables, running counts,
    service GPUs and unmet demand (case F05: a 1,000,000-step horizon with one service and no job
    is 2,000,000 columns). ``"decomposed"`` (the default) builds the count master
    (``master_cols``, ``master_nonzeros``) and the full model only as a fallback, within
    ``settings.full_model_max_binaries``, so the full model's size is not held against it (issue
    17: a 1,024-GPU, 400-job problem has a 28,500-column master but 5.5 million full-model start
    binaries, and was refused). ``"full"`` builds the full x[j, s, o, t] model: refused also when
    its start binaries exceed ``settings.max_binaries`` (case C17a), with the decomposed method
    named first in the advice. O(jobs x sizes).
    """
    est = estimate_size(problem)
    H = problem.horizon_steps
    method = problem.settings.milp_method
    sm = problem.cluster.step_minutes
    if method == "full":
        limit = problem.settings.max_binaries
        if est.binaries > limit:
            raise ModelTooLargeError(
                f"model too large: the full MILP would have about {est.binaries:,} start binaries "
                f"({len(problem.jobs)} jobs x up to {H} start steps x aligned blocks on {problem.n_gpus} GPUs), "
                f"above max_binaries {limit:,}; use milp_method 'decomposed' (its master would have about "
                f"{est.master_cols:,} columns), or a shorter horizon (e.g. {max(1, H // 4)} steps) or coarser "
                f"steps (e.g. {sm * 2}-minute)"
            )
    cols, nonzeros = est.for_method(method)
    what = "master" if method == "decomposed" else "full model"
    for count, cap, unit in ((cols, MAX_MODEL_COLUMNS, "columns"), (nonzeros, MAX_MODEL_NONZEROS, "nonzeros")):
        if count <= cap:
            continue
        k = -(-count // cap)  # columns and nonzeros grow about linearly with the horizon
        n_j, n_s = len(problem.jobs), len(problem.services)
        detail = (f"{n_j} job{'s' * (n_j != 1)} and {n_s} service{'s' * (n_s != 1)} over {H:,} steps"
                  + (f", {est.service_cols:,} of them service columns" if unit == "columns" else ""))
        alt = ""
        if method == "full" and est.master_cols <= MAX_MODEL_COLUMNS and est.master_nonzeros <= MAX_MODEL_NONZEROS:
            alt = f"use milp_method 'decomposed' (about {est.master_cols:,} columns), or "
        else:
            alt = "use "
        raise ModelTooLargeError(
            f"model too large: the MILP {what} would have about {count:,} {unit} ({detail}), above the limit "
            f"of {cap:,} {unit}; {alt}horizon_steps of at most {max(1, H * cap // count):,} or step_minutes of "
            f"{sm * k} instead of {sm} ({-(-H // k):,} steps for the same span)"
        )
    return est
