"""Checkpoint-aware preemption at a surge (issue 30, DESIGN §5, §6.2): the one rule every planner uses.

Only real-time demand the plan did not foresee may trigger a stop: in the surge replan, when the services'
actual step-0 demand exceeds what the GPUs not held by running jobs and the swap caps can give. The rule frees
enough GPUs for that shortfall by stopping preemptible running jobs, never a non-preemptible one and never more
than needed. Two orderings:

- ``"loss"`` (gpuplan: ``milp``, ``fast``, ``greedy``): the set of stops with the least total lost value
  ``sum priority x gpus x (steps_since_checkpoint + restart_steps)`` that frees the shortfall: a min-cost cover
  solved exactly (:func:`min_loss_cover`, a 0/1 knapsack dynamic programme over the GPUs freed), ties by fewer
  GPUs freed, then by the job-id order. Taking the cheapest jobs one by one is not the same: four 1-GPU jobs losing
  1.5 each cost 6 where one 4-GPU job losing 4 frees the same 4 GPUs;
- ``"priority"`` (the baselines, as Slurm ``PreemptMode=REQUEUE`` / Kueue priority preemption): lowest priority
  first, ties by job id.

Then every chosen job is checked, largest first, and dropped when the others still free enough GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from optimizer.diagnose import InfeasibleProblemError, capacity_conflict
from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Problem, RunningJob
from optimizer.scenarios import Scenario

ORDERS: tuple[str, ...] = ("loss", "priority")
"""Victim orderings of :func:`surge_stops`."""


def lost_value(r: RunningJob) -> float:
    """Value a stop of ``r`` loses now: ``priority x gpus x (steps_since_checkpoint + restart_steps)`` (priority x GPU-steps)."""
    return r.priority * r.gpus * r.lost_steps


def up_gpus_of(r: RunningJob, problem: Problem) -> int:
    """GPUs of ``r``'s block that are up (a draining job's down GPUs free nothing)."""
    down = set(problem.down_gpus)
    return sum(1 for g in range(r.block_offset, r.block_offset + r.gpus) if g not in down)


def step0_wants(problem: Problem) -> dict[str, int]:
    """GPUs each service can take at step 0: ``min(demand_gpus[0], max_gpus, current_gpus + swap_cap_gpus)`` (GPUs)."""
    return {s.service: min(s.demand_gpus[0], s.max_gpus, s.current_gpus + s.swap_cap_gpus) for s in problem.services}


def rt_shortfall(problem: Problem) -> int:
    """GPUs the services want at step 0 beyond the GPUs no running job holds (>= 0, or 0 when nothing is short).

    Each service ``i`` can take at step 0 at most ``min(demand_gpus[0], max_gpus, current_gpus + swap_cap_gpus)``;
    the GPUs it can get without a stop are the GPUs up minus the up GPUs of every running job. Queued jobs are
    not counted: they can always be left unstarted. Services with per-type capacity are not covered (0: no stop).
    """
    if any(s.typed_capacity for s in problem.services):
        return 0
    want = sum(step0_wants(problem).values())
    up = problem.cluster.n_gpus - len(set(problem.down_gpus))
    held = sum(up_gpus_of(r, problem) for r in problem.running)
    return max(0, want - (up - held))


def surge_stops(problem: Problem, order: str = "loss") -> tuple[str, ...]:
    """Running jobs to stop at step 0 of a surge problem so that real time gets the GPUs it is short of.

    ``problem``: the surge replan's problem (step-0 demand = actual demand). ``order``: ``"loss"`` or
    ``"priority"`` (module docstring). Only ``preemptible`` running jobs with at least one GPU up are candidates
    (a job past its cap of stops comes in as not preemptible: ``optimizer.simulate``). Returns the
    job ids to stop, sorted; empty when :func:`rt_shortfall` is 0. When all candidates together free less
    than the shortfall, all of them are stopped (each is then needed). Raises ``ValueError`` for an unknown order.
    """
    if order not in ORDERS:
        raise ValueError(f"order = {order!r} must be one of {', '.join(ORDERS)}")
    short = rt_shortfall(problem)
    if short <= 0:
        return ()
    cands = [r for r in problem.running if r.preemptible and up_gpus_of(r, problem) > 0]
    chosen: list[RunningJob] = []
    freed = 0
    if order == "loss":
        cands.sort(key=lambda r: (lost_value(r), r.job_id))
        picked = min_loss_cover([up_gpus_of(r, problem) for r in cands], [lost_value(r) for r in cands], short)
        chosen = [cands[i] for i in picked]
        freed = sum(up_gpus_of(r, problem) for r in chosen)
    else:
        cands.sort(key=lambda r: (r.priority, r.job_id))
        for r in cands:
            if freed >= short:
                break
            chosen.append(r)
            freed += up_gpus_of(r, problem)
    for r in sorted(chosen, key=lambda r: (-up_gpus_of(r, problem), r.job_id)):  # never more than needed
        g = up_gpus_of(r, problem)
        if freed - g >= short:
            chosen.remove(r)
            freed -= g
    return tuple(sorted(r.job_id for r in chosen))


def min_loss_cover(gpus: list[int], loss: list[float], need: int) -> list[int]:
    """Indices of the items with the least total ``loss`` whose ``gpus`` sum to at least ``need`` (exact).

    ``gpus``: GPUs each item frees (>= 1); ``loss``: its cost (>= 0); ``need`` (>= 1): GPUs to free. A 0/1
    knapsack cover solved by dynamic programming over the GPUs freed, capped at ``need`` (O(len x need) time and
    memory): among the covers of least loss, the one freeing the fewest GPUs, then the one found first in the
    items' order (callers sort by loss, then id). When all items together free less than ``need``, all of them
    (sorted). Returns sorted indices.
    """
    n = len(gpus)
    if sum(gpus) < need:
        return list(range(n))
    inf = float("inf")
    cost = np.full(need + 1, inf)
    freed = np.zeros(need + 1, dtype=np.int64)
    cost[0] = 0.0
    prev = np.full((n, need + 1), -1, dtype=np.int64)  # the state an item was added to, per item and state
    for i in range(n):
        w, c = gpus[i], float(loss[i])
        old_cost, old_freed = cost.copy(), freed.copy()
        for f in range(need + 1):
            if old_cost[f] == inf:
                continue
            nf = min(need, f + w)
            cand = (old_cost[f] + c, int(old_freed[f]) + w)
            if cand < (cost[nf], int(freed[nf])):
                cost[nf], freed[nf] = cand
                prev[i, nf] = f
    # back from the full cover: a state's final value was set by the last item that improved it, from the value
    # the state prev[j, f] had before item j
    picked, f, i = [], need, n - 1
    while f > 0:
        while prev[i, f] < 0:
            i -= 1
        picked.append(i)
        f, i = int(prev[i, f]), i - 1
    return sorted(picked)


def without_stopped(problem: Problem, stops: tuple[str, ...]) -> Problem:
    """``problem`` with the running jobs ``stops`` left out (their GPUs free): what the planner plans after the stops."""
    stopped = set(stops)
    return replace(problem, running=tuple(r for r in problem.running if r.job_id not in stopped))


def with_stops(plan: Plan, problem: Problem, stops: tuple[str, ...]) -> Plan:
    """A plan made on :func:`without_stopped` completed for ``problem``.

    Each stopped job is listed with no start (``running`` True) and in ``Plan.stops`` with its lost steps
    (:attr:`RunningJob.lost_steps`). Returns a new Plan (``plan`` itself when ``stops`` is empty).
    """
    if not stops:
        return plan
    by_id = {r.job_id: r for r in problem.running}
    extra = tuple(JobAssignment(j, None, None, None, None, running=True) for j in stops)
    return replace(plan, assignments=tuple(plan.assignments) + extra,
                   stops=tuple((j, by_id[j].lost_steps) for j in stops))


def plan_stopping(problem: Problem, plan_fn: Callable[[Problem], Plan], order: str | None) -> Plan:
    """Plan ``problem`` with the stop rule first: the one path of the simulator's surge replan and of production.

    ``plan_fn(problem) -> Plan`` is the planner. With ``order`` (``"loss"`` or ``"priority"``, :func:`bench_order`)
    the jobs :func:`surge_stops` picks are stopped: ``plan_fn`` plans :func:`without_stopped` and the plan is
    completed by :func:`with_stops` (``Plan.stops`` lists them with their lost steps). With ``order`` None, or no
    stop (no preemptible running job, or :func:`rt_shortfall` 0), this is ``plan_fn(problem)`` itself: the plan of
    a problem without preemption is the one it always was. The caller verifies the result on ``problem``. Raises
    ``ValueError`` for an unknown order, and whatever ``plan_fn`` raises.
    """
    stops = surge_stops(problem, order) if order else ()
    if not stops:
        return plan_fn(problem)
    try:
        reduced = plan_fn(without_stopped(problem, stops))
    except InfeasibleProblemError as e:  # the stops were not enough: say so, with the conflict of ``problem`` itself
        gpus = {r.job_id: r.gpus for r in problem.running}
        raise InfeasibleProblemError(
            f"{e} (even after stopping the preemptible running job(s) {', '.join(stops)}: "
            f"{sum(gpus[j] for j in stops)} GPUs freed)", capacity_conflict(problem)) from e
    return with_stops(reduced, problem, stops)


@dataclass(frozen=True)
class StopDetail:
    """One stop of a plan, with why and what it costs (issue 30): the outputs' line, the risk report's row.

    ``shortfall_gpus``: :func:`rt_shortfall` of the problem (GPUs real time is short of at step 0, before any stop);
    ``lost_steps`` = ``steps_since_checkpoint + restart_steps`` steps on ``gpus`` GPUs.
    """

    job_id: str
    gpus: int
    priority: float
    steps_since_checkpoint: int
    restart_steps: int
    lost_steps: int
    shortfall_gpus: int

    def lost_gpu_h(self, step_minutes: float) -> float:
        """GPU-hours the stop loses: ``lost_steps x gpus x step_minutes / 60``."""
        return self.lost_steps * self.gpus * step_minutes / 60.0


def stop_details(plan: Plan, problem: Problem) -> tuple[StopDetail, ...]:
    """One :class:`StopDetail` per ``plan.stops`` entry, in its order, from ``problem`` (the problem before the stops).

    Raises ``KeyError`` when a stopped job is not a running job of ``problem`` (the verifier refuses such a plan).
    """
    short = rt_shortfall(problem)
    by_id = {r.job_id: r for r in problem.running}
    return tuple(StopDetail(j, by_id[j].gpus, by_id[j].priority, by_id[j].steps_since_checkpoint,
                            by_id[j].restart_steps, n, short) for j, n in plan.stops)


def checkpoint_state(elapsed: int, overhead: int, interval: int | None) -> tuple[int, int]:
    """``(steps since the last checkpoint or the run's start, work steps checkpointed)`` after ``elapsed`` steps of a run.

    The one checkpoint rule (issue 30; the simulator's ``checkpoint_progress`` and :func:`since_after`): a run spends
    its first ``overhead`` steps restarting (a requeued run's ``restart_steps``; 0 for a first run), then writes a
    checkpoint after every ``interval`` steps of work; without an interval nothing is ever checkpointed.
    """
    ci = interval or 0
    k = (elapsed - overhead) // ci if ci and elapsed > overhead else 0
    return elapsed - (overhead + k * ci if k else 0), k * ci


def since_after(since: int, interval: int | None, restart_steps: int, steps: int) -> int:
    """``steps_since_checkpoint`` of a run ``steps`` steps later, by :func:`checkpoint_state`.

    Without an interval every step counts. With one, a run at ``since < interval`` is taken to be in its
    checkpoint cycle (a checkpoint every ``interval`` steps, no restart before it); at ``since >= interval`` it is a
    requeued run still before its first checkpoint, written after ``restart_steps + interval`` steps.
    """
    overhead = restart_steps if interval and since >= interval else 0
    return checkpoint_state(since + steps, overhead, interval)[0]


def running_at(plan: Plan, problem: Problem, t: int) -> tuple[RunningJob, ...]:
    """The batch jobs ``plan`` has on their blocks at step ``t`` (>= 0), as running jobs of a replan at ``t``.

    A running job of ``problem`` the plan keeps (not stopped) with ``planned_steps > t``, its
    ``steps_since_checkpoint`` aged by ``t`` (:func:`since_after`) and ``remaining_steps`` less ``t``; a queued job the
    plan starts at ``s <= t < end`` as a fresh run (``steps_since_checkpoint`` from ``t - s``, no restart before
    it), with its preemption fields. Sorted by job id.
    """
    stopped = {j for j, _ in plan.stops}
    out: list[RunningJob] = []
    for r in problem.running:
        if r.job_id not in stopped and r.planned_steps > t:
            out.append(replace(r, remaining_steps=r.planned_steps - t,
                               steps_since_checkpoint=since_after(r.steps_since_checkpoint, r.checkpoint_interval_steps,
                                                                  r.restart_steps, t)))
    jobs = {j.job_id: j for j in problem.jobs}
    for a in plan.assignments:
        j = jobs.get(a.job_id)
        if (j is None or a.running or a.start_step is None or a.end_step is None or a.block_offset is None
                or a.gpus is None or not a.start_step <= t < a.end_step):
            continue
        out.append(RunningJob(j.job_id, j.kind, j.priority, a.gpus, a.block_offset, a.end_step - t,
                              preemptible=j.preemptible, checkpoint_interval_steps=j.checkpoint_interval_steps,
                              restart_steps=j.restart_steps,
                              steps_since_checkpoint=since_after(0, j.checkpoint_interval_steps, 0, t - a.start_step)))
    return tuple(sorted(out, key=lambda r: r.job_id))


@dataclass(frozen=True)
class LaterStop:
    """A running job the stop rule would pick at a later replan (:func:`stop_outlook`).

    ``step``: the first step of the horizon at which it would be picked; ``shortfall_gpus``: :func:`rt_shortfall`
    there; ``lost_steps``: what a stop then loses (since the checkpoint + restart) on ``gpus`` GPUs.
    """

    job_id: str
    step: int
    gpus: int
    lost_steps: int
    shortfall_gpus: int


def stop_outlook(plan: Plan, problem: Problem, want: dict[str, tuple[int, ...]], order: str = "loss",
                 ) -> tuple[LaterStop, ...]:
    """The jobs :func:`surge_stops` would pick if real-time demand reached ``want`` at some step ``t >= 1`` of ``plan``.

    ``want``: service -> GPUs per step over the horizon (e.g. the P90 forecast, rounded up). At each step ``t`` the
    replan it stands for has the plan's batch jobs at ``t`` running (:func:`running_at`), each service holding the
    plan's GPUs of step ``t - 1`` (its swap cap counted from there) and wanting ``want[service][t]``; the rule picks
    by ``order`` (:func:`bench_order`). Each job is listed once, at its first such step; sorted by step, then id.
    Step 0 is the plan's own decision (``Plan.stops``). Raises ``KeyError`` when ``want`` misses a service.
    """
    seen: dict[str, LaterStop] = {}
    for t in range(1, problem.cluster.horizon_steps):
        running = running_at(plan, problem, t)
        if not any(r.preemptible for r in running if r.job_id not in seen):
            continue
        services = tuple(replace(s, demand_gpus=(int(want[s.service][t]),) + tuple(s.demand_gpus[1:]),
                                 current_gpus=int(plan.service_gpus[s.service][t - 1])) for s in problem.services)
        at = replace(problem, services=services, jobs=(), running=running)
        short = rt_shortfall(at)
        if short <= 0:
            continue
        by_id = {r.job_id: r for r in running}
        for jid in surge_stops(at, order):
            if jid not in seen:
                r = by_id[jid]
                seen[jid] = LaterStop(jid, t, r.gpus, r.lost_steps, short)
    return tuple(sorted(seen.values(), key=lambda x: (x.step, x.job_id)))


#: Checkpoint interval and restart cost given to every job the bench draws preemptible (issue 30): fixed, not
#: drawn, so that a share changes only which jobs may be stopped. 2 steps = 1 h between checkpoints on 30-min
#: steps; 1 step (30 min) to reload a checkpoint.
BENCH_CHECKPOINT_INTERVAL_STEPS = 2
BENCH_RESTART_STEPS = 1


def with_preemptible_share(scenario: Scenario, share: float, seed: int) -> Scenario:
    """``scenario`` with a share of its batch jobs marked preemptible (``gpuplan bench --preemptible-share``).

    Each job is drawn preemptible with probability ``share`` in [0, 1] from its own stream
    ``numpy.random.default_rng([seed, 30, *b"preempt"])``, separate from the scenario's, so the scenario's own
    draws are untouched; with ``share = 0`` the scenario itself is returned (every figure unchanged). A drawn job
    gets :data:`BENCH_CHECKPOINT_INTERVAL_STEPS` and :data:`BENCH_RESTART_STEPS`. Raises ``ValueError`` for a
    share outside [0, 1].
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"preemptible share = {share} must be in [0, 1]")
    if share == 0.0:
        return scenario
    rng = np.random.default_rng([int(seed), 30, *b"preempt"])
    draws = rng.random(len(scenario.jobs))
    jobs = tuple(
        replace(j, preemptible=True, checkpoint_interval_steps=BENCH_CHECKPOINT_INTERVAL_STEPS,
                restart_steps=BENCH_RESTART_STEPS) if u < share else j
        for j, u in zip(scenario.jobs, draws, strict=True)
    )
    return replace(scenario, jobs=jobs)


def bench_order(planner: str) -> str:
    """Victim order a planner uses at a surge: ``"priority"`` for the baselines (Slurm / Kueue), else ``"loss"``."""
    return "priority" if planner in ("fifo", "easy", "priority") else "loss"
