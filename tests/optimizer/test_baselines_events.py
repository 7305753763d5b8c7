"""The event-driven earliest-fit search of the baselines (case F05) gives exactly the plans of the
step-by-step scan it replaced: the old scan is kept here as a private reference and both are run on
seeded random problems (running jobs, down GPUs, services whose reservation rises and falls,
jobs of several sizes and release steps)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from optimizer.baselines import (
    Board,
    baseline_plan,
    demand_following_target,
    greedy_place,
    reserved_service_gpus,
)
from optimizer.capacity import fixed_occupancy, running_gpus_per_step, up_gpus
from optimizer.placement import service_placement, swap_excess
from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption
from optimizer.verify import verify

# ----------------------------------------------------------------------------- reference (the pre-F05 scan)


class _RefBoard:
    """The board as it was before F05: earliest() tries every step from t0."""

    def __init__(self, problem: Problem, service_gpus: np.ndarray) -> None:
        H, N = problem.horizon_steps, problem.n_gpus
        self.H, self.N = H, N
        self.occ = fixed_occupancy(problem)
        rt = service_gpus.sum(axis=0) if len(service_gpus) else np.zeros(H, dtype=np.int64)
        self.free_count = up_gpus(problem) - running_gpus_per_step(problem) - rt

    def fit_at(self, t: int, gpus: int, duration: int) -> int | None:
        te = min(t + duration, self.H)
        if np.any(self.free_count[t:te] < gpus):
            return None
        blocked = self.occ[t:te].reshape(te - t, self.N // gpus, gpus).any(axis=(0, 2))
        free = np.flatnonzero(~blocked)
        return int(free[0]) * gpus if len(free) else None

    def earliest(self, t0: int, gpus: int, duration: int) -> tuple[int, int] | None:
        for t in range(max(0, t0), self.H):
            o = self.fit_at(t, gpus, duration)
            if o is not None:
                return t, o
        return None

    def place(self, t: int, o: int, gpus: int, duration: int, sign: int = 1) -> None:
        te = min(t + duration, self.H)
        self.occ[t:te, o : o + gpus] = sign > 0
        self.free_count[t:te] -= sign * gpus


def _ref_fifo(problem: Problem, board: _RefBoard) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    prev = 0
    for j in sorted(problem.jobs, key=lambda j: (j.release_step, j.job_id)):
        s = j.requested
        hit = board.earliest(max(j.release_step, prev), s.gpus, s.duration_steps)
        if hit is None:
            break
        board.place(hit[0], hit[1], s.gpus, s.duration_steps)
        out[j.job_id] = hit
        prev = hit[0]
    return out


def _ref_backfill(problem: Problem, board: _RefBoard, key: Callable[[Job], tuple]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    order = sorted(problem.jobs, key=key)
    for t in range(board.H):
        queue = [j for j in order if j.job_id not in out and j.release_step <= t]
        while queue:
            hs = queue[0].requested
            o = board.fit_at(t, hs.gpus, hs.duration_steps)
            if o is None:
                break
            board.place(t, o, hs.gpus, hs.duration_steps)
            out[queue.pop(0).job_id] = (t, o)
        if not queue:
            continue
        hs = queue[0].requested
        res = board.earliest(t + 1, hs.gpus, hs.duration_steps)
        for j in queue[1:]:
            s = j.requested
            o = board.fit_at(t, s.gpus, s.duration_steps)
            if o is None:
                continue
            board.place(t, o, s.gpus, s.duration_steps)
            if res is not None:
                again = board.earliest(t + 1, hs.gpus, hs.duration_steps)
                if again is None or again[0] > res[0]:
                    board.place(t, o, s.gpus, s.duration_steps, sign=-1)
                    continue
            out[j.job_id] = (t, o)
    return out


def _ref_greedy(problem: Problem, svc: np.ndarray, jobs: list[Job]) -> dict[str, tuple[int, int, int]]:
    g = problem.settings.decay_per_step
    board = _RefBoard(problem, svc)
    starts: dict[str, tuple[int, int, int]] = {}
    for j in jobs:
        best = None
        for s in j.sizes:
            hit = board.earliest(j.release_step, s.gpus, s.duration_steps)
            if hit is not None:
                value = j.priority * s.efficiency * s.gpus * sum(
                    g**tau for tau in range(hit[0], hit[0] + s.duration_steps))
                if best is None or (value, -hit[0]) > best[:2]:
                    best = (value, -hit[0], s, hit)
        if best is not None:
            _, _, s, (t, o) = best
            board.place(t, o, s.gpus, s.duration_steps)
            starts[j.job_id] = (t, o, s.gpus)
    return starts


# ----------------------------------------------------------------------------- random problems


def _random_problem(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    N = int(rng.choice([4, 8, 16, 32]))
    H = int(rng.integers(4, 60))
    sizes = [g for g in (1, 2, 4, 8, 16) if g <= N]
    down = tuple(sorted(rng.choice(N, size=int(rng.integers(0, 2)), replace=False).tolist()))
    running: list[RunningJob] = []
    taken = set(down)
    for k in range(int(rng.integers(0, 3))):
        g = int(rng.choice(sizes[:3]))
        o = int(rng.integers(0, N // g)) * g
        if taken.intersection(range(o, o + g)):
            continue
        taken.update(range(o, o + g))
        running.append(RunningJob(f"R{k}", "training", 1.0, g, o, int(rng.integers(0, H + 3))))
    services: list[Service] = []
    for i in range(int(rng.integers(0, 3))):
        base = rng.integers(0, max(1, N // 4), size=H)
        dem = tuple(int(x) for x in np.maximum(0, base + rng.integers(-1, 3, size=H)))
        services.append(Service(f"s{i}", dem, 0, N // 2, int(rng.integers(1, 4)), int(rng.integers(0, N // 4 + 1))))
    jobs = []
    for k in range(int(rng.integers(0, 14))):
        n_sizes = int(rng.integers(1, 3))
        gs = sorted(set(int(x) for x in rng.choice(sizes, size=n_sizes)), reverse=bool(rng.integers(0, 2)))
        opts = tuple(SizeOption(g, int(rng.integers(1, max(2, H // 2))), 1.0 if i == 0 else 0.8)
                     for i, g in enumerate(gs))
        jobs.append(Job(f"J{k:02d}", "training", float(rng.choice([1, 2, 3])), int(rng.integers(0, H + 2)), opts))
    st = PlanSettings(decay_per_step=float(rng.choice([0.99, 1.0])))
    return Problem(Cluster(N, min(N, 8), 30, H), st, tuple(services), tuple(jobs), tuple(running), down)


SEEDS = range(300)


def _held(p: Problem, svc: np.ndarray, starts: dict[str, tuple[int, int, int]]) -> bool:
    """True when the reference scan's (start, offset, gpus) make a service exceed its swap cap at GPU level."""
    dur = {j.job_id: {s.gpus: s.duration_steps for s in j.sizes} for j in p.jobs}
    ref = Plan("ref", "feasible", tuple(
        [JobAssignment(r.job_id, 0, r.planned_steps, r.block_offset, r.gpus, running=True) for r in p.running]
        + [JobAssignment(k, t, t + dur[k][g], o, g) for k, (t, o, g) in starts.items()]),
        {s.service: tuple(int(x) for x in svc[i]) for i, s in enumerate(p.services)}, 0.0, None, None, 0.0, None,
        n_gpus=p.n_gpus, horizon_steps=p.horizon_steps)
    return swap_excess(p, service_placement(p, ref)) > 0


@pytest.mark.parametrize("planner", ["fifo", "easy", "priority"])
def test_baselines_match_the_step_by_step_scan(planner):
    """300 random problems per baseline: the same (start, offset) for every job."""
    ref_of = {
        "fifo": _ref_fifo,
        "easy": lambda p, b: _ref_backfill(p, b, lambda j: (j.release_step, j.job_id)),
        "priority": lambda p, b: _ref_backfill(p, b, lambda j: (-j.priority, j.release_step, j.job_id)),
    }[planner]
    started = held = 0
    for seed in SEEDS:
        p = _random_problem(seed)
        svc = reserved_service_gpus(p)
        want = ref_of(p, _RefBoard(p, svc))
        made = baseline_plan(p, planner)
        got = {a.job_id: (a.start_step, a.block_offset) for a in made.assignments
               if not a.running and a.start_step is not None}
        if _held(p, svc, {k: (t, o, p.job(k).requested.gpus) for k, (t, o) in want.items()}):
            # the scan's blocks would make a service swap more GPUs than its cap at GPU level: re-packed or
            # delayed (optimizer.placement.hold_services), and verified
            held += 1
            assert verify(made, p) == [], f"seed {seed}"
            continue
        assert got == want, f"seed {seed}"
        started += len(got)
    assert started > 650  # the problems do place jobs (not a vacuous comparison)
    assert held == {"fifo": 10, "easy": 7, "priority": 9}[planner]  # of the 300 (measured)


def test_greedy_matches_the_step_by_step_scan():
    """Demand-following services make the room rise and fall from step to step."""
    held = 0
    for seed in SEEDS:
        p = _random_problem(seed)
        svc = reserved_service_gpus(p, demand_following_target(p))
        order = sorted(p.jobs, key=lambda j: (-j.priority, j.release_step, j.job_id))
        made = greedy_place(p, svc, order)
        got = {a.job_id: (a.start_step, a.block_offset, a.gpus) for a in made.assignments
               if not a.running and a.start_step is not None}
        want = _ref_greedy(p, svc, order)
        if _held(p, svc, want):  # re-packed or delayed to keep the swap cap at GPU level
            held += 1
            assert verify(made, p) == [], f"seed {seed}"
            continue
        assert got == want, f"seed {seed}"
    assert held == 27  # of the 300 (measured)


def test_earliest_matches_on_partly_filled_boards():
    rng = np.random.default_rng(11)
    checked = 0
    for seed in SEEDS:
        p = _random_problem(seed)
        svc = reserved_service_gpus(p, demand_following_target(p))
        new, ref = Board(p, svc), _RefBoard(p, svc)
        for _ in range(12):
            g = int(rng.choice([x for x in (1, 2, 4, 8) if x <= p.n_gpus]))
            d = int(rng.integers(1, p.horizon_steps + 1))
            t0 = int(rng.integers(0, p.horizon_steps + 1))
            hit = ref.earliest(t0, g, d)
            assert new.earliest(t0, g, d) == hit, f"seed {seed}"
            checked += 1
            if hit is not None:
                new.place(hit[0], hit[1], g, d)
                ref.place(hit[0], hit[1], g, d)
    assert checked == 12 * len(SEEDS)


def test_frees_marks_the_steps_where_room_opens():
    """4 GPUs, 6 steps: R holds GPUs 0-1 until step 3, the service steps down 2 -> 1 at step 4."""
    svc = Service("s", (2, 2, 2, 2, 1, 1), 0, 4, 1, 2)
    p = Problem(Cluster(4, 4, 30, 6), PlanSettings(), (svc,), (), (RunningJob("R", "training", 1.0, 2, 0, 3),))
    b = Board(p, reserved_service_gpus(p, demand_following_target(p)))
    assert b.free_count.tolist() == [0, 0, 0, 2, 3, 3]
    assert np.flatnonzero(b.frees).tolist() == [3, 4]
    b.place(3, 0, 2, 1)  # GPUs 0-1 stay busy at step 3 and free at 4: step 3 no longer frees room
    assert np.flatnonzero(b.frees).tolist() == [4]
    assert b.earliest(0, 2, 2) == (4, 0)
    assert b.earliest(0, 4, 1) is None  # never 4 GPUs left next to the service
    b.place(3, 0, 2, 1, sign=-1)
    assert np.flatnonzero(b.frees).tolist() == [3, 4] and b.earliest(0, 2, 2) == (3, 0)
