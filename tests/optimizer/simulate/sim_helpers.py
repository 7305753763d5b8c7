"""Small helpers for the simulator tests: a tiny greedy planner written here, independent of
the optimizer's planners, so the hand-computed simulations do not depend on them."""

from __future__ import annotations

from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Cluster, PlanSettings, Problem
from optimizer.scenarios import Scenario, SimJob, SimService


def greedy_plan(problem: Problem, warm_start: Plan | None = None) -> Plan:
    """Start queued jobs (problem order) at step 0 on the lowest free aligned block when the
    block is free and capacity holds for the job's whole planned run; services get their
    forecast demand, cut to the GPUs the running jobs leave (the tests keep it within band and
    swap cap). Other jobs: not started."""
    H, N = problem.cluster.horizon_steps, problem.cluster.n_gpus
    down = set(problem.down_gpus)
    busy = [sum(r.gpus for r in problem.running if t < r.planned_steps) for t in range(H)]
    svc = {}
    for s in problem.services:
        svc[s.service] = tuple(
            min(s.demand_gpus[t], N - len(down) - busy[t] - sum(v[t] for v in svc.values())) for t in range(H)
        )
    rt = [sum(v[t] for v in svc.values()) for t in range(H)]
    owner = [[False] * N for _ in range(H)]
    used = [0] * H
    out = []
    for r in problem.running:
        for t in range(min(H, r.planned_steps)):
            used[t] += r.gpus
            for g in range(r.block_offset, r.block_offset + r.gpus):
                owner[t][g] = True
        out.append(JobAssignment(r.job_id, 0, r.planned_steps, r.block_offset, r.gpus, running=True))
    for j in problem.jobs:
        size = j.sizes[0]
        steps = range(min(H, size.duration_steps))
        placed = None
        if j.release_step == 0:
            for o in range(0, N - size.gpus + 1, size.gpus):
                blk = range(o, o + size.gpus)
                if any(g in down for g in blk):
                    continue
                if all(not owner[t][g] for t in steps for g in blk) and all(
                    used[t] + size.gpus + rt[t] <= N - len(down) for t in steps
                ):
                    placed = o
                    break
        if placed is None:
            out.append(JobAssignment(j.job_id, None, None, None, None))
            continue
        for t in steps:
            used[t] += size.gpus
            for g in range(placed, placed + size.gpus):
                owner[t][g] = True
        out.append(JobAssignment(j.job_id, 0, size.duration_steps, placed, size.gpus))
    return Plan("greedy", "feasible", tuple(out), svc, 0.0, None, None, 0.0, None, n_gpus=N, horizon_steps=H)


def tiny_scenario() -> Scenario:
    """4 GPUs (one node), 4-step horizon, 4-step window, 30-min steps.

    Service ``s``: actual demand [1, 2, 2, 1], forecast 1 every step (under-forecast at steps 1-2).
    Jobs: A (2 GPUs, p 2, arrives 0, runs 3 steps, forecast 2), C (4 GPUs, p 1, arrives 0, never
    fits next to the service), B (1 GPU, p 1, arrives 1, 1 step, forecast exact).
    """
    cluster = Cluster(n_gpus=4, gpus_per_node=4, step_minutes=30, horizon_steps=4)
    svc = SimService(
        service="s",
        min_gpus=0,
        max_gpus=4,
        swap_cap_gpus=1,
        initial_gpus=1,
        demand_true=(1, 2, 2, 1, 1, 1, 1, 1),
        demand_forecast=(1,) * 8,
    )
    jobs = (
        SimJob("A", "training", 2.0, 0, 2, 3, 2),
        SimJob("C", "training", 1.0, 0, 4, 1, 1),
        SimJob("B", "quantization", 1.0, 1, 1, 1, 1),
    )
    return Scenario("tiny", 0, cluster, PlanSettings(), 4, (svc,), jobs)
