"""Independent plan verifier (DESIGN §5.2).

Deliberately shares no code with the MILP builder or the baselines: it re-derives every rule
from the problem and reads only the plan.

Checks: every queued and running job appears exactly once; started jobs use one of their sizes
with its duration, start at or after release and inside the horizon, on an aligned
power-of-two block inside the cluster that avoids down GPUs; running jobs keep their block and
planned remaining steps; (1) one task per GPU per step and batch GPUs + real-time GPUs ≤ GPUs up
at every step; (2) each service's allocation stays in its band (and meets demand when
``demand_hard``); (4) the swap cap holds from ``current_gpus``; (3, 5) contiguity and no
preemption follow from each job being one block over consecutive steps.
"""

from __future__ import annotations

from typing import cast

from optimizer.plan import Plan
from optimizer.problem import Problem


def verify(plan: Plan, problem: Problem) -> list[str]:
    """Return human-readable violations of ``plan`` on ``problem`` (empty list = valid)."""
    v: list[str] = []
    H, N = problem.cluster.horizon_steps, problem.cluster.n_gpus
    down = set(problem.down_gpus)
    queued = {j.job_id: j for j in problem.jobs}
    running = {r.job_id: r for r in problem.running}
    seen: dict[str, int] = {}
    for a in plan.assignments:
        seen[a.job_id] = seen.get(a.job_id, 0) + 1
    for jid, n in seen.items():
        if n > 1:
            v.append(f"job {jid!r}: listed {n} times")
        if jid not in queued and jid not in running:
            v.append(f"job {jid!r}: not in the problem")
    for jid in list(queued) + list(running):
        if jid not in seen:
            v.append(f"job {jid!r}: missing from the plan")

    owner: list[dict[int, str]] = [dict() for _ in range(H)]
    batch_used = [0] * H

    def occupy(jid: str, start: int, end: int, off: int, gpus: int) -> None:
        for t in range(max(0, start), min(H, end)):
            batch_used[t] += gpus
            for g in range(off, off + gpus):
                if g in owner[t]:
                    v.append(f"step {t}: GPU {g} used by both {owner[t][g]!r} and {jid!r} (one task per GPU)")
                else:
                    owner[t][g] = jid

    for a in plan.assignments:
        jid = a.job_id
        if jid in running:
            r = running[jid]
            want = (0, max(1, r.remaining_steps), r.block_offset, r.gpus)
            got = (a.start_step, a.end_step, a.block_offset, a.gpus)
            if got != want:
                v.append(f"running job {jid!r}: moved or stopped: plan has (start, end, offset, gpus) = {got}, "
                         f"must stay {want}")
                continue
            occupy(jid, 0, want[1], r.block_offset, r.gpus)
            continue
        if jid not in queued:
            continue
        job = queued[jid]
        fields = (a.start_step, a.end_step, a.block_offset, a.gpus)
        if a.start_step is None:
            if any(f is not None for f in fields):
                v.append(f"job {jid!r}: not started but end_step/block_offset/gpus are set: {fields}")
            continue
        if any(f is None for f in fields) or not all(isinstance(f, int) for f in fields):
            v.append(f"job {jid!r}: start_step, end_step, block_offset, gpus must all be integers: {fields}")
            continue
        t, e, o, g = cast(tuple[int, int, int, int], fields)  # narrowed by the check above
        size = next((s for s in job.sizes if s.gpus == g), None)
        if size is None:
            v.append(f"job {jid!r}: {g} GPUs is not one of its sizes {[s.gpus for s in job.sizes]}")
            continue
        if e - t != size.duration_steps:
            v.append(f"job {jid!r}: runs {e - t} steps on {g} GPUs, its duration is {size.duration_steps} "
                     "(no preemption)")
        if t < job.release_step:
            v.append(f"job {jid!r}: starts at step {t} before its release step {job.release_step}")
        if not 0 <= t < H:
            v.append(f"job {jid!r}: start_step {t} outside the horizon [0, {H})")
        if g < 1 or g & (g - 1):
            v.append(f"job {jid!r}: {g} GPUs is not a power of two")
        if o % g:
            v.append(f"job {jid!r}: block_offset {o} not aligned to its size {g}")
        if o < 0 or o + g > N:
            v.append(f"job {jid!r}: block {o}..{o + g - 1} outside the cluster of {N} GPUs")
            continue
        if (not problem.settings.multi_node_blocks and
                o // problem.cluster.gpus_per_node != (o + g - 1) // problem.cluster.gpus_per_node):
            v.append(f"job {jid!r}: block {o}..{o + g - 1} spans nodes but multi_node_blocks is disabled")
        bad = sorted(down.intersection(range(o, o + g)))
        if bad:
            v.append(f"job {jid!r}: block {o}..{o + g - 1} uses down GPU(s) {bad}")
        occupy(jid, t, e, o, g)

    up = N - len(down)
    rt_used = [0] * H
    hard = problem.settings.demand_hard
    for s in problem.services:
        if s.service not in plan.service_gpus:
            v.append(f"service {s.service!r}: missing from the plan")
            continue
        alloc = plan.service_gpus[s.service]
        if len(alloc) != H:
            v.append(f"service {s.service!r}: {len(alloc)} steps of GPUs, horizon is {H}")
            continue
        prev = s.current_gpus
        for t, x in enumerate(alloc):
            rt_used[t] += x
            if not s.min_gpus <= x <= s.max_gpus:
                v.append(f"service {s.service!r}: step {t}: {x} GPUs outside its band [{s.min_gpus}, {s.max_gpus}]")
            if abs(x - prev) > s.swap_cap_gpus:
                v.append(f"service {s.service!r}: step {t}: changes {prev} -> {x} GPUs, swap cap is {s.swap_cap_gpus}")
            if hard and x < s.demand_gpus[t]:
                v.append(f"service {s.service!r}: step {t}: {x} GPUs below hard demand {s.demand_gpus[t]}")
            prev = x
    for name in plan.service_gpus:
        if name not in {s.service for s in problem.services}:
            v.append(f"service {name!r}: not in the problem")
    for t in range(H):
        if batch_used[t] + rt_used[t] > up:
            v.append(f"step {t}: batch {batch_used[t]} + real-time {rt_used[t]} GPUs exceed the {up} GPUs up")
    return v
