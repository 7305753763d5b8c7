"""Baseline planners (DESIGN §5.1): FIFO, EASY backfill and priority backfill.

Real-time rule, shared by all three baselines: each service holds a *static reservation* of its
peak demand over the horizon (clipped to its band), as a Slurm or Kubernetes operator would
reserve a fixed partition for inference. Because the swap cap applies to every plan, the
reservation is reached from ``current_gpus`` by at most ``swap_cap_gpus`` per step (and never
below the service's smallest valid allocation, see :func:`optimizer.capacity.service_bounds`);
when the reservations plus running jobs do not fit the cluster at some step, services are cut
back toward that smallest allocation.

Batch jobs use their requested (first) size. A job is placed at a step where an aligned block
of that size is free for every in-horizon step of its run (and the GPU count fits next to the
reservation), at the lowest free aligned offset.

- ``fifo``: jobs strictly in arrival order (release_step, then job_id); each starts at the
  earliest step >= its release and >= its predecessor's start (no overtaking); once a job cannot
  start inside the horizon, no later job starts either.
- ``easy``: EASY backfill (Lifka 1995; Slurm's sched/backfill): walking the steps, the head of
  the released queue (arrival order) starts if it fits; otherwise it gets a reservation at its
  earliest possible start, and a later released job may start now only if the head's earliest
  start does not move later.
- ``priority``: the same backfill with the queue ordered by priority (high first), then arrival.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from optimizer.capacity import Capacity, fixed_occupancy, running_gpus_per_step, service_bounds, up_gpus
from optimizer.eligibility import BlockOption, block_options, duration_at
from optimizer.objective import objective_value, run_decay
from optimizer.placement import gpu_weights, hold_services
from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Job, Problem
from optimizer.reserve import surprise_room
from optimizer.solver import SolveStatus


def reserved_service_gpus(problem: Problem, target: np.ndarray | None = None,
                          capacity: Capacity | None = None) -> np.ndarray:
    """Service allocations per step that head for ``target`` within every service rule.

    ``target`` (n_services, horizon_steps); default: each service's peak demand, clipped to
    its band, at every step (the static reservation). Returns an int array of the same shape
    that respects band, swap cap from ``current_gpus`` and (with running jobs) the GPUs up.
    ``capacity``: :meth:`optimizer.capacity.Capacity.of` of ``problem`` when the caller has it.
    """
    H = problem.horizon_steps
    S = len(problem.services)
    L, U = service_bounds(problem) if capacity is None else (capacity.lower, capacity.upper)
    if S == 0:
        return np.zeros((0, H), dtype=np.int64)
    if target is None:
        target = np.array(
            [[min(max(max(s.demand_gpus), s.min_gpus), s.max_gpus)] * H for s in problem.services],
            dtype=np.int64,
        )
    if any(s.typed_capacity for s in problem.services):  # per-type capacity: no more than its types' GPUs
        occ = fixed_occupancy(problem) if capacity is None else capacity.occupancy
        target = np.array(target, dtype=np.int64, copy=True)
        for i, s in enumerate(problem.services):
            w = gpu_weights(problem, s)
            if w is not None:
                target[i] = np.minimum(target[i], (~occ & (w > 0)[None, :]).sum(axis=1))
    avail = (up_gpus(problem) - running_gpus_per_step(problem) if capacity is None else capacity.free).tolist()
    # plain int lists: the walk is sequential, and numpy scalars in it cost about 1.5 s per 100,000 steps
    lows, highs, targets = L.tolist(), U.tolist(), np.asarray(target).tolist()
    caps = [s.swap_cap_gpus for s in problem.services]
    prev = [s.current_gpus for s in problem.services]
    rows: list[list[int]] = [[0] * H for _ in range(S)]
    for t in range(H):
        lo = [max(lows[i][t], prev[i] - caps[i]) for i in range(S)]
        want = [min(max(targets[i][t], lo[i]), min(highs[i][t], prev[i] + caps[i])) for i in range(S)]
        excess = sum(want) - avail[t]
        for i in range(S - 1, -1, -1):
            if excess <= 0:
                break
            cut = min(excess, want[i] - lo[i])
            want[i] -= cut
            excess -= cut
        if excess > 0:  # the greedy walked into a corner: the smallest trajectory always fits
            return L.copy()
        for i in range(S):
            rows[i][t] = want[i]
        prev = want
    return np.array(rows, dtype=np.int64).reshape(S, H)


class Board:
    """Occupancy of the horizon for baseline placement.

    A (horizon_steps, n_gpus) bool grid plus a per-step count of GPUs left for batch work after
    real-time reservations and running jobs, and the steps where room frees up.

    Earliest-fit search is event-driven: a block that fits at step t > t0 also fits at t - 1
    unless some GPU or some GPU count frees up at t (``frees[t]``: a GPU busy at t - 1 is free at t,
    or the count left for batch work rises), because the window [t - 1, t - 1 + d) is then no
    more occupied than [t, t + d). So only t0 and the steps with ``frees`` set are tried, and the
    answer is the one a scan of every step gives. ``frees`` is kept up to date by :meth:`place`
    (a block changes it only at its first step and the step after its last).

    ``np_room`` (horizon_steps,) int, optional: the surprise reserve (issue 30, :func:`optimizer.reserve.surprise_room`),
    the GPUs new non-preemptible blocks may hold per step; a block placed or searched with ``reserve=True`` must
    also fit in it (``np_free``, with its own rises ``np_frees`` as events). None (the baselines): no such count.
    """

    def __init__(self, problem: Problem, service_gpus: np.ndarray, capacity: Capacity | None = None,
                 np_room: np.ndarray | None = None) -> None:
        H, N = problem.horizon_steps, problem.n_gpus
        self.H, self.N = H, N
        self.occ = fixed_occupancy(problem) if capacity is None else capacity.occupancy.copy()
        rt = service_gpus.sum(axis=0) if len(service_gpus) else np.zeros(H, dtype=np.int64)
        free = up_gpus(problem) - running_gpus_per_step(problem) if capacity is None else capacity.free
        self.free_count = free - rt
        self.version = 0  # bumped by every place(): cached searches are valid for one version
        self.frees = np.zeros(H, dtype=bool)
        if H > 1:
            self.frees[1:] = (self.occ[:-1] & ~self.occ[1:]).any(axis=1) | (self.free_count[1:] > self.free_count[:-1])
        self.type_res = type_reservations(problem, service_gpus, self.occ) \
            if any(s.typed_capacity for s in problem.services) else []
        self.np_free = None if np_room is None else np.asarray(np_room, dtype=np.int64).copy()
        self.np_frees = np.zeros(H, dtype=bool)
        if self.np_free is not None and H > 1:
            self.np_frees[1:] = self.np_free[1:] > self.np_free[:-1]

    def _update_frees(self, t: int) -> None:
        if 0 < t < self.H:
            self.frees[t] = bool((self.occ[t - 1] & ~self.occ[t]).any() or self.free_count[t] > self.free_count[t - 1])
            if self.np_free is not None:
                self.np_frees[t] = bool(self.np_free[t] > self.np_free[t - 1])

    def fit_at(self, t: int, gpus: int, duration: int, allowed: np.ndarray | None = None,
               reserve: bool = False) -> int | None:
        """Lowest aligned offset where ``gpus`` GPUs are free over steps [t, min(t+duration, H)), or None.

        ``allowed``: (n_gpus // gpus,) bool, the blocks the job may use (typed clusters,
        :func:`optimizer.eligibility.block_options`); None = every block. ``reserve``: a non-preemptible job under
        the surprise reserve (it must also fit ``np_free``; ignored without ``np_room``).
        """
        te = min(t + duration, self.H)
        if np.any(self.free_count[t:te] < gpus):
            return None
        if reserve and self.np_free is not None and np.any(self.np_free[t:te] < gpus):
            return None
        blocked = self.occ[t:te].reshape(te - t, self.N // gpus, gpus).any(axis=(0, 2))
        if allowed is not None:
            blocked |= ~allowed
        for mask, res in self.type_res:  # the GPUs of a type reserved for typed-capacity services stay free
            slack = int(((~self.occ[t:te] & mask[None, :]).sum(axis=1) - res[t:te]).min())
            blocked |= mask.reshape(-1, gpus).sum(axis=1) > slack
        free = np.flatnonzero(~blocked)
        return int(free[0]) * gpus if len(free) else None

    def fit_options(self, t: int, gpus: int, options: list[BlockOption], reserve: bool = False) -> tuple[int, int] | None:
        """First fit over the eligible blocks of every option: the lowest (offset, duration) free at ``t``, or None (``reserve`` as :meth:`fit_at`)."""
        best: tuple[int, int] | None = None
        for d, mask, _ in options:
            o = self.fit_at(t, gpus, d, mask, reserve)
            if o is not None and (best is None or o < best[0]):
                best = (o, d)
        return best

    def earliest_options(self, t0: int, gpus: int, options: list[BlockOption],
                         reserve: bool = False) -> tuple[int, int, int] | None:
        """Earliest (step, offset, duration) over the options (lowest offset among equal steps), or None (``reserve`` as :meth:`fit_at`)."""
        best: tuple[int, int, int] | None = None
        for d, mask, _ in options:
            hit = self.earliest(t0, gpus, d, mask, reserve)
            if hit is not None and (best is None or hit < best[:2]):
                best = (hit[0], hit[1], d)
        return best

    def next_frees(self, t: int, reserve: bool = False) -> int:
        """The first step > t where room frees up (``frees``, and ``np_frees`` with ``reserve``), or H when there is none."""
        hit = np.flatnonzero(self._events(reserve)[t + 1 :])
        return t + 1 + int(hit[0]) if len(hit) else self.H

    def _events(self, reserve: bool) -> np.ndarray:
        """(H,) bool: the steps where room frees up for a block (``np_frees`` too for one under the reserve)."""
        return self.frees | self.np_frees if reserve and self.np_free is not None else self.frees

    def earliest(self, t0: int, gpus: int, duration: int, allowed: np.ndarray | None = None,
                 reserve: bool = False) -> tuple[int, int] | None:
        """Earliest (step, offset) with step >= t0 where the block fits, or None inside the horizon.

        Tries t0 and then only the steps where room frees up (see the class docstring): the same
        answer as trying every step, in O(events) fit checks instead of O(H). ``reserve`` as :meth:`fit_at`.
        """
        t0 = max(0, t0)
        if t0 >= self.H:
            return None
        o = self.fit_at(t0, gpus, duration, allowed, reserve)
        if o is not None:
            return t0, o
        for t in (np.flatnonzero(self._events(reserve)[t0 + 1 :]) + (t0 + 1)).tolist():
            o = self.fit_at(t, gpus, duration, allowed, reserve)
            if o is not None:
                return t, o
        return None

    def place(self, t: int, o: int, gpus: int, duration: int, sign: int = 1, reserve: bool = False) -> None:
        """Occupy (sign=1) or release (sign=-1) a block over its in-horizon steps (``reserve``: a non-preemptible one, also counted in ``np_free``)."""
        te = min(t + duration, self.H)
        self.occ[t:te, o : o + gpus] = sign > 0
        self.free_count[t:te] -= sign * gpus
        if reserve and self.np_free is not None:
            self.np_free[t:te] -= sign * gpus
        self.version += 1
        self._update_frees(t)
        self._update_frees(te)


def type_reservations(problem: Problem, service_gpus: np.ndarray, occ: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """GPUs of each type reserved for the services with per-type capacity (issue 26): ``[(type mask (n_gpus,), (H,))]``.

    Each such service's count at a step (``service_gpus`` (S, H)) is put on its listed types, step by step:
    it keeps the types it had at the step before where their GPUs not in ``occ`` (running, down) allow, adds
    the rest on its fastest types first, then moves kept GPUs of a slower type to a faster one while its swap
    cap has room (the rule of :func:`optimizer.placement.service_placement`); the baselines thus reserve a
    service on its preferred type. A batch block may not take a type's GPUs below its reservation
    (:meth:`Board.fit_at`).
    """
    H = problem.horizon_steps
    types = problem.cluster.gpu_types
    masks = {ty: np.zeros(problem.n_gpus, dtype=bool) for ty in types}
    for o, n in zip(problem.cluster.node_offsets, problem.cluster.nodes, strict=True):
        masks[n.gpu_type][o:o + n.gpus] = True
    res = {ty: np.zeros(H, dtype=np.int64) for ty in types}
    cap = {ty: (~occ & masks[ty][None, :]).sum(axis=1) for ty in types}
    for i, s in enumerate(problem.services):
        if not s.typed_capacity:
            continue
        order = sorted((ty for ty in types if s.weight(ty) > 0), key=lambda ty: -s.weight(ty))
        prev: dict[str, int] | None = None
        for t in range(H):
            a = int(service_gpus[i][t])
            room = {ty: int(cap[ty][t] - res[ty][t]) for ty in order}
            cur = {ty: min(prev[ty], room[ty]) if prev else 0 for ty in order}
            for ty in reversed(order):  # shrink from the slowest
                cut = min(cur[ty], max(0, sum(cur.values()) - a))
                cur[ty] -= cut
            kept = sum(cur.values())
            for ty in order:  # add on the fastest
                cur[ty] += min(room[ty] - cur[ty], a - sum(cur.values()))
            if prev is not None:
                moves = s.swap_cap_gpus - (max(a, sum(prev.values())) - kept)
                for fast in order:
                    for slow in reversed(order):
                        if s.weight(slow) >= s.weight(fast):
                            break
                        m = max(0, min(moves, cur[slow], room[fast] - cur[fast]))
                        cur[slow] -= m
                        cur[fast] += m
                        moves -= m
            for ty in order:
                res[ty][t] += cur[ty]
            prev = cur
    return [(masks[ty], res[ty]) for ty in types if res[ty].any()]


Placement = dict[str, tuple[int, int]]  # job_id -> (start_step, block_offset)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() > deadline


def _fifo(problem: Problem, board: Board, deadline: float | None = None) -> tuple[Placement, bool]:
    """FIFO placement; returns (placement, stopped) with ``stopped`` True when ``deadline`` cut it short."""
    out: Placement = {}
    prev = 0
    for j in sorted(problem.jobs, key=lambda j: (j.release_step, j.job_id)):
        if _past(deadline):
            return out, True
        s = j.requested
        hit = board.earliest_options(max(j.release_step, prev), s.gpus, block_options(problem, j, s))
        if hit is None:
            break  # no overtaking: nobody behind it may start earlier
        board.place(hit[0], hit[1], s.gpus, hit[2])
        out[j.job_id] = hit[:2]
        prev = hit[0]
    return out, False


def _backfill(
    problem: Problem, board: Board, key: Callable[[Job], tuple], deadline: float | None = None
) -> tuple[Placement, bool]:
    """EASY/priority backfill walking the steps; returns (placement, stopped) as :func:`_fifo`.

    The walk visits only the steps where its outcome can change: a job's release, a step where
    room frees up on the board (:attr:`Board.frees`), and the step after one where something was
    placed. At any other step t nothing starts: the head did not fit at t - 1 and the board is
    no freer at t; a job that did not fit at t - 1 does not fit at t; and one refused at t - 1
    for delaying the head would delay it again (occupancy after the current step only shrinks
    with time, so it would take the same lowest block, one step later). The plan is therefore
    the one a walk over every step gives.
    """
    out: Placement = {}
    order = sorted(problem.jobs, key=key)
    H = board.H
    options = {j.job_id: block_options(problem, j, j.requested) for j in order}

    def opts(j: Job) -> list[BlockOption]:
        return options[j.job_id]

    def rv(j: Job) -> bool:  # under the surprise reserve (a board with np_room, a non-preemptible job)
        return board.np_free is not None and not j.preemptible

    releases = sorted({j.release_step for j in order if j.release_step < H})
    ri = 0
    cached: tuple[str, int, tuple[int, int, int] | None] | None = None  # (head id, board version, earliest)
    t = releases[0] if releases else H
    while t < H and len(out) < len(order):
        if _past(deadline):
            return out, True
        placed = False
        queue = [j for j in order if j.job_id not in out and j.release_step <= t]
        while queue:  # start heads for as long as they fit
            hs = queue[0].requested
            fit = board.fit_options(t, hs.gpus, opts(queue[0]), rv(queue[0]))
            if fit is None:
                break
            board.place(t, fit[0], hs.gpus, fit[1], reserve=rv(queue[0]))
            out[queue.pop(0).job_id] = (t, fit[0])
            placed = True
        if queue:
            # the head does not fit: reserve its earliest start; backfill what does not delay it.
            # One pass suffices: backfilling only removes space, so a job refused here stays refused.
            head = queue[0]
            hs = head.requested
            if (cached is not None and cached[:2] == (head.job_id, board.version)
                    and (cached[2] is None or cached[2][0] >= t + 1)):
                res = cached[2]
            else:
                res = board.earliest_options(t + 1, hs.gpus, opts(head), rv(head))
                cached = (head.job_id, board.version, res)
            for j in queue[1:]:
                s = j.requested
                fit = board.fit_options(t, s.gpus, opts(j), rv(j))
                if fit is None:
                    continue
                o, d = fit
                board.place(t, o, s.gpus, d, reserve=rv(j))
                # nothing fitted the head in [t+1, res) and the board only grew, so the head's
                # earliest start moves later exactly when it no longer fits at res
                if res is not None and board.fit_options(res[0], hs.gpus, opts(head), rv(head)) is None:
                    board.place(t, o, s.gpus, d, sign=-1, reserve=rv(j))
                    continue
                out[j.job_id] = (t, o)
                placed = True
        while ri < len(releases) and releases[ri] <= t:
            ri += 1
        nxt = board.next_frees(t, reserve=board.np_free is not None)
        if ri < len(releases):
            nxt = min(nxt, releases[ri])
        t = t + 1 if placed else nxt
    return out, False


def _arrival(j: Job) -> tuple:
    return (j.release_step, j.job_id)


def _by_priority(j: Job) -> tuple:
    return (-j.priority, j.release_step, j.job_id)


def assemble_plan(
    problem: Problem,
    planner: str,
    status: str,
    starts: dict[str, tuple[int, int, int]],
    service_gpus: np.ndarray,
    solve_s: float,
    **extra,
) -> Plan:
    """Build a :class:`Plan` from job starts and service allocations.

    Job starts are ``job_id -> (start_step, block_offset, gpus)``; service allocations have shape
    (n_services, horizon_steps); the objective is computed by
    :func:`optimizer.objective.objective_value`. Extra keyword arguments go to :class:`Plan`. When the
    offsets make a service swap more GPUs than its cap at GPU level, the blocks are re-packed (same starts,
    sizes and ends) to keep the services on their GPUs (:func:`optimizer.placement.hold_services`).
    """
    assignments = []
    for r in problem.running:
        assignments.append(JobAssignment(r.job_id, 0, r.planned_steps, r.block_offset, r.gpus, running=True))
    for j in problem.jobs:
        if j.job_id in starts:
            t, o, g = starts[j.job_id]
            d = duration_at(problem, j, int(g), int(o))
            assignments.append(JobAssignment(j.job_id, int(t), int(t) + d, int(o), int(g)))
        else:
            assignments.append(JobAssignment(j.job_id, None, None, None, None))
    svc = {s.service: tuple(int(x) for x in service_gpus[i]) for i, s in enumerate(problem.services)}
    plan = Plan(
        planner=planner,
        status=status,
        assignments=tuple(assignments),
        service_gpus=svc,
        objective=0.0,
        bound=extra.pop("bound", None),
        gap=extra.pop("gap", None),
        solve_s=solve_s,
        model=extra.pop("model", None),
        n_gpus=problem.n_gpus,
        horizon_steps=problem.horizon_steps,
        **extra,
    )

    plan = hold_services(problem, plan)  # blocks off the services' GPUs where that keeps a swap cap at GPU level
    return replace(plan, objective=objective_value(plan, problem))


def baseline_plan(problem: Problem, planner: str, deadline: float | None = None,
                  capacity: Capacity | None = None, np_room: np.ndarray | None = None) -> Plan:
    """Plan ``problem`` with baseline ``planner`` in {"fifo", "easy", "priority"}.

    ``deadline`` (a ``time.perf_counter()`` value) stops the placement when passed: jobs not yet
    placed stay unstarted (still a valid plan) and the plan's message says so. The plan is
    unverified (:func:`optimizer.planners.plan` verifies). Raises ValueError for another name.
    ``capacity``: :meth:`optimizer.capacity.Capacity.of` of ``problem`` when the caller has it.
    ``np_room``: the surprise reserve (:func:`optimizer.reserve.surprise_room`, (horizon_steps,) GPUs) that
    non-preemptible jobs must keep: given only by the fast mode's and the MILP's priority-backfill candidate
    (issue 30); the baselines themselves run with None (Slurm/Kueue behaviour, no reserve).
    """
    t0 = time.perf_counter()
    svc = reserved_service_gpus(problem, capacity=capacity)
    board = Board(problem, svc, capacity, np_room)
    if planner == "fifo":
        placed, stopped = _fifo(problem, board, deadline)
    elif planner == "easy":
        placed, stopped = _backfill(problem, board, _arrival, deadline)
    elif planner == "priority":
        placed, stopped = _backfill(problem, board, _by_priority, deadline)
    else:
        raise ValueError(f"unknown baseline planner {planner!r}; expected fifo, easy or priority")
    jobs = {j.job_id: j for j in problem.jobs}
    starts = {jid: (t, o, jobs[jid].requested.gpus) for jid, (t, o) in placed.items()}
    msg = (f"{planner} stopped at the time limit after placing {len(placed)} of {len(problem.jobs)} jobs; "
           "the rest are not started" if stopped else "")
    return assemble_plan(problem, planner, SolveStatus.FEASIBLE, starts, svc, time.perf_counter() - t0, message=msg)


BASELINES: tuple[str, ...] = ("fifo", "easy", "priority")


def demand_following_target(problem: Problem) -> np.ndarray:
    """Per service and step, the smallest level >= demand that the swap cap can follow.

    Ramps up ahead of a rise (``T_t = max(D_t, T_{t+1} - c)``), clipped to the band. Shape (S, H).
    """
    H = problem.horizon_steps
    out = np.zeros((len(problem.services), H), dtype=np.int64)
    for i, s in enumerate(problem.services):
        nxt = 0
        row = [0] * H
        demand, c, lo, hi = s.demand_gpus, s.swap_cap_gpus, s.min_gpus, s.max_gpus
        for t in range(H - 1, -1, -1):
            nxt = max(demand[t], nxt - c)
            row[t] = min(max(nxt, lo), hi)
        out[i] = row
    return out


def greedy_place(
    problem: Problem, service_gpus: np.ndarray, jobs: list[Job], planner: str = "greedy", deadline: float | None = None,
    capacity: Capacity | None = None, fixed: dict[str, tuple[int, int, int, int]] | None = None,
    np_room: np.ndarray | None = None,
) -> Plan:
    """Place ``jobs`` one by one, in the given order, each at its earliest fitting start.

    Each job starts after its release with the size of highest §5 reward there; services are
    fixed at ``service_gpus`` (S, H). A warm-start candidate for the MILP (unverified; the
    planner verifies). Past ``deadline`` (a ``time.perf_counter()`` value) the jobs not yet
    placed stay unstarted. ``capacity``: :meth:`optimizer.capacity.Capacity.of` of ``problem`` when the caller has it.
    ``fixed``: ``job_id -> (start_step, block_offset, gpus, duration_steps)`` of queued jobs already placed (a
    committed plan's starts, :func:`optimizer.fast.place_arrivals`): occupied first, kept as they are, and ``jobs``
    fill the room they leave. ``np_room``: the surprise reserve (:func:`optimizer.reserve.surprise_room`,
    (horizon_steps,) GPUs): non-preemptible jobs (fixed ones included) are counted in it and placed only where
    they fit it (issue 30); None: no reserve.
    """
    t0 = time.perf_counter()
    g = problem.settings.decay_per_step
    board = Board(problem, service_gpus, capacity, np_room)
    preemptible = {j.job_id for j in problem.jobs if j.preemptible}
    starts: dict[str, tuple[int, int, int]] = {}
    for jid, (t, o, gpus, d) in (fixed or {}).items():
        board.place(t, o, gpus, d, reserve=jid not in preemptible)
        starts[jid] = (t, o, gpus)
    for j in jobs:
        if j.job_id in starts:
            continue
        if _past(deadline):
            break
        best = None
        rv = not j.preemptible
        for s in j.sizes:
            hit = board.earliest_options(j.release_step, s.gpus, block_options(problem, j, s), rv)
            if hit is not None:
                # the work of the run (s.duration_steps reference steps) earned over its d steps on that type
                value = j.priority * s.efficiency * s.gpus * (s.duration_steps / hit[2]) * run_decay(g, hit[0], hit[2]) \
                    if problem.cluster.typed else j.priority * s.efficiency * s.gpus * run_decay(g, hit[0], s.duration_steps)
                if best is None or (value, -hit[0]) > best[:2]:
                    best = (value, -hit[0], s, hit)
        if best is not None:
            _, _, s, (t, o, d) = best
            board.place(t, o, s.gpus, d, reserve=rv)
            starts[j.job_id] = (t, o, s.gpus)
    return assemble_plan(problem, planner, SolveStatus.FEASIBLE, starts, service_gpus, time.perf_counter() - t0)


def greedy_plans(problem: Problem, deadline: float | None = None, capacity: Capacity | None = None) -> list[Plan]:
    """Warm-start candidates for the MILP (not baselines).

    Services follow their demand (:func:`demand_following_target`) instead of holding the peak,
    and :func:`greedy_place` puts jobs in three orders: priority (then release), reward per
    GPU-step (priority x efficiency), and size x duration (largest first). Past ``deadline`` (a
    ``time.perf_counter()`` value) no further order is started (fewer candidates come back).
    ``capacity``: :meth:`optimizer.capacity.Capacity.of` of ``problem`` when the caller has it.
    With a preemptible job in the problem the orders keep the surprise reserve
    (:func:`optimizer.reserve.surprise_room`, issue 30), so they stay feasible starts of the MILP that has its rows.
    """
    svc = reserved_service_gpus(problem, demand_following_target(problem), capacity)
    np_room = surprise_room(problem)
    orders = (
        lambda j: (-j.priority, j.release_step, j.job_id),
        lambda j: (-j.priority * max(s.efficiency for s in j.sizes), j.release_step, j.job_id),
        lambda j: (-max(s.gpus * s.duration_steps for s in j.sizes), -j.priority, j.job_id),
    )
    out: list[Plan] = []
    for key in orders:
        if _past(deadline):
            break
        out.append(greedy_place(problem, svc, sorted(problem.jobs, key=key), deadline=deadline, capacity=capacity,
                                np_room=np_room))
    return out
