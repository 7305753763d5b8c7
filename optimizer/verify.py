"""Independent plan verifier (DESIGN §5.2).

Deliberately shares no code with the MILP builder or the baselines: it re-derives every rule
from the problem and reads only the plan.

Checks: every queued and running job appears exactly once; started jobs use one of their sizes
with its duration, start at or after release and inside the horizon, on an aligned
power-of-two block inside the cluster that avoids down GPUs; running jobs keep their block and
planned remaining steps; (1) one task per GPU per step and batch GPUs + real-time GPUs ≤ GPUs up
at every step; (2) each service's allocation stays in its band (and meets demand when
``demand_hard``); (4) the swap cap holds from ``current_gpus`` on counts and, on the GPU-level plan of
the services (:func:`optimizer.placement.service_placement`), as GPUs swapped = max(added, released)
between consecutive steps (:func:`placement_violations`); (3, 5) contiguity and no
preemption follow from each job being one block over consecutive steps; and, with
``settings.max_wait_steps`` set, the starvation guard (EASY's reservation, DESIGN §5) on plans
made under it (every planner but the baselines, which follow their own queue rules; see
:func:`verify`).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from optimizer.placement import ServicePlacement, service_placement
from optimizer.plan import Plan
from optimizer.problem import Job, Problem

BASELINE_PLANNERS: tuple[str, ...] = ("fifo", "easy", "priority")
"""Planners with their own queue rule (DESIGN §5.1), to which the starvation guard does not apply by default."""


def verify(plan: Plan, problem: Problem, *, guard: bool | None = None) -> list[str]:
    """Return human-readable violations of ``plan`` on ``problem`` (empty list = valid).

    ``guard``: check the starvation guard (:func:`max_wait_violations`) when the problem sets
    ``max_wait_steps``. None (default) checks it on every plan except those of the baseline
    planners in :data:`BASELINE_PLANNERS` (FIFO never overtakes; EASY and priority backfill keep
    their own reservation rule, stated on their requested-size blocks and peak reservations).
    """
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
        counted = gpus - len(down.intersection(range(off, off + gpus)))  # a draining job's down GPUs are not up
        for t in range(max(0, start), min(H, end)):
            batch_used[t] += counted
            for g in range(off, off + gpus):
                if g in owner[t]:
                    v.append(f"step {t}: GPU {g} used by both {owner[t][g]!r} and {jid!r} (one task per GPU)")
                else:
                    owner[t][g] = jid

    stopped = dict(plan.stops)
    v.extend(_stop_violations(plan, problem, stopped))
    for a in plan.assignments:
        jid = a.job_id
        if jid in running and jid in stopped:
            if (a.start_step, a.end_step, a.block_offset, a.gpus) != (None, None, None, None):
                v.append(f"running job {jid!r}: stopped at step 0 but the plan still gives it "
                         f"(start, end, offset, gpus) = {(a.start_step, a.end_step, a.block_offset, a.gpus)}")
            continue
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
        typed = problem.cluster.typed and 0 <= o and o + g <= N and g >= 1
        gpu_type = _block_type(problem, jid, job, t, o, g, v) if typed else ""
        want_d = job.duration_on(size, gpu_type, problem.cluster) if gpu_type is not None else size.duration_steps
        if e - t != want_d:
            on = f" of type {gpu_type!r}" if typed and gpu_type else ""
            v.append(f"job {jid!r}: runs {e - t} steps on {g} GPUs{on}, its duration is {want_d} "
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
        if (not problem.settings.multi_node_blocks and not problem.cluster.typed and
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
            if hard and x < s.demand_gpus[t] and not s.typed_capacity:  # typed capacity: below, on served
                v.append(f"service {s.service!r}: step {t}: {x} GPUs below hard demand {s.demand_gpus[t]}")
            prev = x
    for name in plan.service_gpus:
        if name not in {s.service for s in problem.services}:
            v.append(f"service {name!r}: not in the problem")
    for t in range(H):
        if batch_used[t] + rt_used[t] > up:
            v.append(f"step {t}: batch {batch_used[t]} + real-time {rt_used[t]} GPUs exceed the {up} GPUs up")
    v.extend(placement_violations(plan, problem, service_placement(problem, plan)))
    if hard and any(s.typed_capacity for s in problem.services):
        served = served_requests_per_h(plan, problem)
        for s in problem.services:
            base = min(r for _, r in s.capacity_by_type) if s.typed_capacity else 0.0
            for t, d in enumerate(s.demand_gpus if s.typed_capacity and s.service in plan.service_gpus else ()):
                if served[s.service][t] < d * base - 1e-9:
                    v.append(f"service {s.service!r}: step {t}: serves {served[s.service][t]:g} requests/h "
                             f"below hard demand {d * base:g} (per-type capacity)")
    if guard is None:
        guard = plan.planner not in BASELINE_PLANNERS
    if guard and problem.settings.max_wait_steps is not None:
        v.extend(max_wait_violations(plan, problem))
    return v


def _stop_violations(plan: Plan, problem: Problem, stopped: dict[str, int]) -> list[str]:
    """Findings on the plan's stops (issue 30, DESIGN §5.2), re-derived from the problem alone.

    A stop is allowed only of a running job marked ``preemptible``, only when the services' step-0 demand
    (each at most its band's top and ``current_gpus + swap_cap_gpus``) exceeds the GPUs up that no running
    job holds, only when the job is needed (the other stops free less than that shortfall), with
    ``lost_steps = steps_since_checkpoint + restart_steps``; never on a cluster with per-type capacity services.
    """
    if not stopped:
        return []
    v: list[str] = []
    if len(stopped) != len(plan.stops):
        v.append("stops: a job is listed twice")
    running = {r.job_id: r for r in problem.running}
    down = set(problem.down_gpus)
    up_of = {jid: sum(1 for g in range(r.block_offset, r.block_offset + r.gpus) if g not in down)
             for jid, r in running.items()}
    want = sum(min(s.demand_gpus[0], s.max_gpus, s.current_gpus + s.swap_cap_gpus) for s in problem.services)
    free = problem.cluster.n_gpus - len(down) - sum(up_of.values())
    short = want - free
    freed = sum(up_of.get(j, 0) for j in stopped)
    typed = any(s.typed_capacity for s in problem.services)
    for jid, lost in stopped.items():
        r = running.get(jid)
        if r is None:
            v.append(f"stop of job {jid!r}: not a running job (only a running job may be stopped)")
            continue
        if not r.preemptible:
            v.append(f"stop of job {jid!r}: not preemptible (no preemption of a non-preemptible job)")
        if typed:
            v.append(f"stop of job {jid!r}: services with per-type capacity: stops are not supported")
        if short <= 0:
            v.append(f"stop of job {jid!r}: no real-time need at step 0 (services want {want} GPUs, {free} are free)")
        elif freed - up_of[jid] >= short:
            v.append(f"stop of job {jid!r}: not needed (the other stops free {freed - up_of[jid]} GPUs of a "
                     f"shortfall of {short})")
        if lost != r.lost_steps:
            v.append(f"stop of job {jid!r}: lost_steps = {lost}, the rule gives {r.lost_steps} "
                     f"({r.steps_since_checkpoint} since the checkpoint + {r.restart_steps} restart)")
    return v


def _block_type(problem: Problem, jid: str, job: Job, t: int, o: int, g: int, v: list[str]) -> str | None:
    """The GPU type of a started block on a typed cluster, appending its violations to ``v`` (issue 26).

    Rules: the block lies inside one node, or covers whole nodes (a gang) all of one type, and of one
    domain when the job asks ``same_domain``; with ``multi_node_blocks`` off it lies inside one node; its
    type is one of the job's ``gpu_types`` (empty = any). Returns the type (None when the nodes differ in
    type, so no duration applies). A GPU of no node (layout padding) is reported as down by :func:`verify`.
    """
    c = problem.cluster
    covered: dict[int, int] = {}
    for gpu in range(o, o + g):
        k = c.node_of(gpu)
        if k is not None:
            covered[k] = covered.get(k, 0) + 1
    if not covered:
        return None
    nodes = [c.nodes[k] for k in sorted(covered)]
    if len(nodes) > 1:
        part = [c.nodes[k].name for k in sorted(covered) if covered[k] != c.nodes[k].gpus]
        if part:
            v.append(f"job {jid!r}: block {o}..{o + g - 1} covers part of node(s) {part}: a block lies inside "
                     "one node or covers whole nodes")
        if not problem.settings.multi_node_blocks:
            v.append(f"job {jid!r}: block {o}..{o + g - 1} spans nodes but multi_node_blocks is disabled")
        if job.same_domain and len({n.domain for n in nodes}) > 1:
            v.append(f"job {jid!r}: gang spans domains {sorted({n.domain for n in nodes})}, "
                     "same_domain asks for one")
    types = list(dict.fromkeys(n.gpu_type for n in nodes))
    if len(types) > 1:
        v.append(f"job {jid!r}: step {t}: gang on nodes of types {types} ({[n.name for n in nodes]}): "
                 "a gang is whole nodes of one type")
    for n in nodes:
        if not job.eligible(n.gpu_type):
            v.append(f"job {jid!r}: step {t}: node {n.name!r} is of type {n.gpu_type!r}, not one of its "
                     f"gpu_types {list(job.gpu_types)}")
    return types[0] if len(types) == 1 else None


def placement_violations(plan: Plan, problem: Problem, placement: ServicePlacement) -> list[str]:
    """Violations of a GPU-level service plan ``placement`` (service -> per step its GPU indices) against ``plan``.

    Checked from the data alone, whatever rule made it: each service holds exactly its planned count at
    every step, on GPUs inside the cluster, not down, not inside a batch block at that step, no GPU held
    twice; and between consecutive steps t - 1, t (t >= 1) the GPUs swapped, ``max(GPUs added, GPUs
    released)``, are at most the service's ``swap_cap_gpus`` (a count change above the cap is left to the
    count rule of :func:`verify`, which names it; DESIGN §5; step 0 is checked on counts by
    :func:`verify`, as a problem does not say which GPUs a service holds now). ``verify`` runs it on the
    GPU-level plan of :func:`optimizer.placement.service_placement` (what ``plan.parquet`` shows).
    """
    v: list[str] = []
    H, N = problem.cluster.horizon_steps, problem.cluster.n_gpus
    down_np = np.zeros(N, dtype=bool)
    down_np[[g for g in problem.down_gpus if 0 <= g < N]] = True
    ids: list[str] = []
    grid = np.full((H, N), -1, dtype=np.int64)  # the first job listed on each GPU and step (as verify's owner)
    for a in plan.assignments:
        t0, t1, o, n = a.start_step, a.end_step, a.block_offset, a.gpus
        if not (type(t0) is int and type(t1) is int and type(o) is int and type(n) is int):
            continue  # not started, or malformed (named by verify)
        cells = grid[max(0, t0):min(H, t1), max(0, o):max(0, o + n)]
        cells[cells < 0] = len(ids)
        ids.append(a.job_id)
    free_count: list[int] = (~down_np[None, :] & (grid < 0)).sum(axis=1).tolist()
    down: list[bool] = down_np.tolist()  # plain lists: the per-GPU lookups below are faster than on numpy
    job_at: list[list[int]] = grid.tolist()
    holder: list[dict[int, str]] = [{} for _ in range(H)]  # per step: GPU -> the first service on it
    same_row = [False] + (grid[1:] == grid[:-1]).all(axis=1).tolist()
    rt_total = [sum(int(a[t]) for a in plan.service_gpus.values() if len(a) == H) for t in range(H)]
    for s in problem.services:
        if s.service not in placement or s.service not in plan.service_gpus:
            continue
        steps, alloc = placement[s.service], plan.service_gpus[s.service]
        if len(alloc) != H:
            continue  # named by verify
        if len(steps) != H:
            v.append(f"service {s.service!r}: GPU-level plan has {len(steps)} steps, horizon is {H}")
            continue
        types = _gpu_types(problem) if s.typed_capacity else None
        allowed = {k for k, _ in s.capacity_by_type}
        clean = False  # the step before had no GPU-level violation of this service
        for t, gs in enumerate(steps):
            if clean and same_row[t] and gs is steps[t - 1] and holder[t].keys().isdisjoint(gs):
                holder[t].update(dict.fromkeys(gs, s.service))  # a step equal to a clean one before it is clean
                continue
            n_before = len(v)
            n_held = len(set(gs))
            short = n_held < int(alloc[t]) and free_count[t] < rt_total[t]
            if n_held != int(alloc[t]) and not short:  # a step over capacity is reported on counts
                v.append(f"service {s.service!r}: step {t}: holds {n_held} GPUs at GPU level, "
                         f"its allocation is {int(alloc[t])}")
            row = job_at[t]
            for g in gs:
                if not 0 <= g < N:
                    v.append(f"service {s.service!r}: step {t}: GPU {g} outside the cluster of {N} GPUs")
                elif down[g]:
                    v.append(f"service {s.service!r}: step {t}: GPU {g} is down")
                elif types is not None and types[g] not in allowed:
                    v.append(f"service {s.service!r}: step {t}: GPU {g} is of type {types[g]!r}, not one of its "
                             f"types {sorted(allowed)} (capacity_per_gpu_per_h)")
                elif row[g] >= 0:
                    v.append(f"step {t}: GPU {g} used by both {ids[row[g]]!r} and service {s.service!r} "
                             "(one task per GPU)")
                elif g in holder[t]:
                    v.append(f"step {t}: GPU {g} held by both services {holder[t][g]!r} and {s.service!r}")
                else:
                    holder[t][g] = s.service
            if t and gs is not steps[t - 1]:
                before, after = set(steps[t - 1]), set(gs)
                added, released = len(after - before), len(before - after)
                n = max(added, released)
                if n > s.swap_cap_gpus and abs(len(after) - len(before)) <= s.swap_cap_gpus:  # else on counts
                    v.append(f"service {s.service!r}: step {t}: swaps {n} GPUs at GPU level (added {added}, "
                             f"released {released}), swap cap is {s.swap_cap_gpus}")
            clean = len(v) == n_before
    return v


def _gpu_types(problem: Problem) -> list[str]:
    """GPU type of every GPU index of a typed cluster (``""`` on padding), from the nodes alone."""
    out = [""] * problem.cluster.n_gpus
    for o, n in zip(problem.cluster.node_offsets, problem.cluster.nodes, strict=True):
        out[o:o + n.gpus] = [n.gpu_type] * n.gpus
    return out


def served_requests_per_h(plan: Plan, problem: Problem) -> dict[str, list[float]]:
    """Per service and step, the requests per hour its GPU-level plan serves: ``min(capacity held, demand)``.

    Capacity held = Σ over its GPUs of the GPU type's ``capacity_per_gpu_per_h`` (issue 26; a service without
    per-type capacity: its GPUs × its scalar rate, 1 request per GPU-hour when none is given); demand =
    ``demand_gpus × the slowest listed type's rate`` (:class:`optimizer.problem.Service`). From the plan's
    GPU-level placement (:func:`optimizer.placement.service_placement`) and the nodes' types, not from any
    planner's figures.
    """
    placement = service_placement(problem, plan)
    types = _gpu_types(problem) if problem.cluster.typed else []
    out: dict[str, list[float]] = {}
    for s in problem.services:
        rates = dict(s.capacity_by_type)
        base = min(rates.values()) if rates else (s.capacity_per_gpu_per_h or 1.0)
        steps = placement.get(s.service, ())
        row = []
        for t, d in enumerate(s.demand_gpus):
            gs = steps[t] if t < len(steps) else ()
            held = sum(rates.get(types[g], 0.0) for g in gs) if rates else base * len(gs)
            row.append(min(held, d * base))
        out[s.service] = row
    return out


def _service_need(problem: Problem) -> list[list[int]]:
    """Per service and step, the fewest GPUs meeting its demand now and later within band and swap cap.

    Forward from ``current_gpus`` (a drop of at most c per step), backward for ramp-ups
    (``n_t >= n_{t+1} - c``), capped by the largest allocation reachable from ``current_gpus``.
    """
    H = problem.cluster.horizon_steps
    out = []
    for s in problem.services:
        c = s.swap_cap_gpus
        lo = [min(max(d, s.min_gpus), s.max_gpus) for d in s.demand_gpus]
        hi = [s.max_gpus] * H
        prev_lo = prev_hi = s.current_gpus
        for t in range(H):
            lo[t] = max(lo[t], prev_lo - c)
            hi[t] = min(hi[t], prev_hi + c)
            prev_lo, prev_hi = lo[t], hi[t]
        for t in range(H - 2, -1, -1):
            lo[t] = max(lo[t], lo[t + 1] - c)
            hi[t] = min(hi[t], hi[t + 1] + c)
        out.append([min(a, b) for a, b in zip(lo, hi, strict=True)])
    return out


def max_wait_violations(plan: Plan, problem: Problem) -> list[str]:
    """The starvation guard of DESIGN §5 (``settings.max_wait_steps`` = W), checked on the plan alone.

    Arrival order: (release_step, job_id). ``π_j = r_j + W``. At step t the reserved job h is the
    first job in arrival order with ``π_h <= t`` that has not started by t. Its overtakers are the
    jobs after it in arrival order that started at or after ``π_h``; its board holds every other
    queued job (those before it, and those after it that started before ``π_h``), running jobs,
    down GPUs and each service at its need (the fewest GPUs meeting its demand within band and
    swap cap). If an overtaker runs at t, h must have no room at t: at some step of
    ``[t, min(t + d_h, H))`` the board leaves fewer than ``s_h`` GPUs (requested size and
    duration). One violation per such step. Returns [] without ``max_wait_steps``.
    """
    W = problem.settings.max_wait_steps
    if W is None:
        return []
    H, N = problem.cluster.horizon_steps, problem.cluster.n_gpus
    up = N - len(problem.down_gpus)
    base = [up] * H
    for r in problem.running:
        for t in range(min(H, max(1, r.remaining_steps))):
            base[t] -= r.gpus
    for need in _service_need(problem):
        for t in range(H):
            base[t] -= need[t]
    order = sorted(problem.jobs, key=lambda j: (j.release_step, j.job_id))
    rank = {j.job_id: i for i, j in enumerate(order)}
    runs: dict[str, tuple[int, int, int]] = {}  # job_id -> (start, end, gpus) of queued jobs started
    for a in plan.assignments:
        if (a.job_id in rank and not a.running and a.start_step is not None and a.end_step is not None
                and a.gpus is not None):
            runs[a.job_id] = (int(a.start_step), int(a.end_step), int(a.gpus))
    out: list[str] = []
    for t in range(H):
        head = next((j for j in order if j.release_step + W <= t
                     and (j.job_id not in runs or runs[j.job_id][0] > t)), None)
        if head is None:
            continue
        pi = head.release_step + W
        over = sorted(jid for jid, (st, en, _) in runs.items()
                      if rank[jid] > rank[head.job_id] and st >= pi and st <= t < en)
        if not over:
            continue
        s, d = head.requested.gpus, head.requested.duration_steps
        room = True
        for tau in range(t, min(t + d, H)):
            board = sum(g for jid, (st, en, g) in runs.items() if jid != head.job_id and st <= tau < en
                        and (rank[jid] < rank[head.job_id] or st < pi))
            if base[tau] - board < s:
                room = False
                break
        if room:
            k = over[0]
            out.append(f"step {t}: job {k!r} (after {head.job_id!r} in arrival order, started at step "
                       f"{runs[k][0]}) runs while {head.job_id!r}, reserved since step {pi} "
                       f"(max_wait_steps={W}), waits with room for its {s} GPUs at steps {t}..{min(t + d, H) - 1}: "
                       "the overtaking delays the reserved job")
    return out
