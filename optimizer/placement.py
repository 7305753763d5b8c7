"""Real-time replicas on concrete GPUs: the GPU-level plan of the services, and keeping them on their GPUs.

The planners decide how many GPUs each service holds per step (``Plan.service_gpus``); batch jobs get
aligned blocks. :func:`service_placement` puts each service's GPUs on concrete GPU indices by one fixed
rule (the rule ``plan.parquet``'s ``gpu_step`` rows show and :func:`optimizer.verify.verify` checks):

- at step 0 each service takes the highest free GPUs (free = not in a batch block, not down), in the
  problem's service order;
- at step t > 0 every service first keeps the GPUs it held at t - 1 that are still free (its highest
  ones when it shrinks), then each takes the GPUs it newly needs from the highest free GPUs.

A service's **GPUs swapped** between steps t - 1 and t is ``max(GPUs added, GPUs released)``
(:func:`gpus_swapped`), so a move of one replica is one swap and a change of count by k is k swaps; the
swap cap bounds it (DESIGN §5 "Swap cap at GPU level"). Under the rule above a service only moves when a
batch block starting at t takes a GPU it held at t - 1; :func:`hold_services` re-packs a plan's batch
blocks (same jobs, starts, sizes and ends; new aligned offsets) so that no block lands on a service's GPUs
when another aligned block is free, whenever the plan as made breaks a swap cap at GPU level.

Step 0 is checked on counts only (``|a_0 - current_gpus| <= cap``): a problem says how many GPUs a
service holds now, not which.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from optimizer.eligibility import block_options, block_type
from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Problem, Service

#: Per service (problem order), per step, the GPU indices it holds (ascending).
ServicePlacement = dict[str, tuple[tuple[int, ...], ...]]


def batch_busy(problem: Problem, assignments: tuple[JobAssignment, ...] | list[JobAssignment]) -> np.ndarray:
    """(horizon_steps, n_gpus) bool: the GPU is down or inside a started batch block at that step (clipped to both)."""
    H, N = problem.horizon_steps, problem.n_gpus
    busy = np.zeros((H, N), dtype=bool)
    if problem.down_gpus:
        busy[:, [g for g in problem.down_gpus if 0 <= g < N]] = True
    for a in assignments:
        t0, t1, o, g = a.start_step, a.end_step, a.block_offset, a.gpus
        if not (type(t0) is int and type(t1) is int and type(o) is int and type(g) is int):
            continue  # not started, or malformed (the verifier names it)
        busy[max(0, t0):min(H, t1), max(0, o):o + g] = True
    return busy


def next_use(busy: np.ndarray) -> np.ndarray:
    """(H, n_gpus) int: the first step >= t at which the GPU is busy (``busy``'s shape), H when never."""
    H = busy.shape[0]
    idx = np.where(busy, np.arange(H, dtype=np.int64)[:, None], H)
    return np.minimum.accumulate(idx[::-1], axis=0)[::-1]


def gpu_weights(problem: Problem, service: Service) -> np.ndarray | None:
    """(n_gpus,) float: demand GPUs one GPU of each index serves (:meth:`Service.weight`, 0 on a type not listed).

    None for a service without per-type capacity (every GPU serves one: the rule of the module docstring).
    """
    if not service.typed_capacity:
        return None
    out = np.zeros(problem.n_gpus)
    for o, n in zip(problem.cluster.node_offsets, problem.cluster.nodes, strict=True):
        out[o:o + n.gpus] = service.weight(n.gpu_type)
    return out


def _weights(problem: Problem, names: list[str]) -> list[np.ndarray | None]:
    by_name = {s.service: s for s in problem.services}
    return [gpu_weights(problem, by_name[n]) for n in names]


def _place_step(free: np.ndarray, prev: list[np.ndarray] | None, counts: list[int],
                later: np.ndarray, caps: list[int], horizon: int,
                weights: list[np.ndarray | None] | None = None) -> tuple[list[np.ndarray], bool]:
    """One step of the rule (module docstring): keep, add, then move ahead of a block within the swap cap.

    ``free``: (n_gpus,) bool, modified (the GPUs given out are cleared); ``prev``: each service's GPUs at the
    step before (None at step 0); ``counts``: GPUs each service holds at this step; ``later``: (n_gpus,) the
    next step a batch block takes each GPU (:func:`next_use`, ``horizon`` when never); ``caps``: each
    service's swap cap. Kept and new GPUs are chosen by the latest next batch use, then the highest index. A service whose
    kept GPUs a block takes later moves them, while its swap cap has room at this step, to free GPUs taken
    later still (so a block's start never has to move more replicas at once than the cap allows). A service
    gets fewer than its count only when the step has too few free GPUs (rejected on counts anyway).
    Returns the GPUs per service and whether some service's moves ahead were cut short by its cap (the next
    step may move more even when nothing else changes).

    ``weights`` (per service, :func:`gpu_weights`; None = every GPU alike): a service with per-type capacity
    only takes GPUs of weight > 0, by largest weight first (then the order above), and after the moves ahead
    moves, while its swap cap has room, kept GPUs of its lowest weight to free GPUs of a larger one (a move to
    the faster type; a change of type counts as swaps).
    """
    n = free.shape[0]
    H = horizon
    rank = np.lexsort((np.arange(n), later))[::-1]  # GPUs by latest next use, then highest index
    ws = weights if weights is not None else [None] * len(counts)
    orders = []
    for w in ws:
        if w is None:
            orders.append(rank)
            continue
        o = rank[np.argsort(-w[rank], kind="stable")]
        orders.append(o[w[o] > 0])
    # services with per-type capacity first (they may use only some GPUs), then the others, each in problem order
    seq = [i for i in range(len(counts)) if ws[i] is not None] + [i for i in range(len(counts)) if ws[i] is None]
    kept: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * len(counts)
    for i in seq:
        a = counts[i]
        if prev is None or a <= 0:
            continue
        mine = np.zeros(n, dtype=bool)
        mine[prev[i]] = True
        k = orders[i][(mine & free)[orders[i]]][:a]
        free[k] = False
        kept[i] = k
    added: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * len(counts)
    for i in seq:
        need = max(0, counts[i] - len(kept[i]))
        new = orders[i][free[orders[i]]][:need]
        free[new] = False
        added[i] = new
    limited = False
    for i, a in enumerate(counts):
        if prev is None or not len(kept[i]):
            continue
        room = caps[i] - (max(a, len(prev[i])) - len(kept[i]))  # swaps left at this step: max(added, released)
        doomed = kept[i][later[kept[i]] < H]
        if room <= 0 or not len(doomed):
            continue
        doomed = doomed[np.argsort(later[doomed], kind="stable")]  # taken soonest first
        wi = ws[i]
        spare = rank[free[rank]] if wi is None else rank[(free & (wi > 0))[rank]]  # taken latest first
        m = 0
        while m < min(room, len(doomed), len(spare)) and later[spare[m]] > later[doomed[m]]:
            m += 1
        limited |= m == room and m < min(len(doomed), len(spare)) and bool(later[spare[m]] > later[doomed[m]])
        if m:
            free[spare[:m]] = False
            free[doomed[:m]] = True
            kept[i] = np.setdiff1d(kept[i], doomed[:m])
            added[i] = np.concatenate([added[i], spare[:m]])
    for i, w in enumerate(ws):  # moves to a faster type, within the swap cap's room left at this step
        if w is None or prev is None or not len(kept[i]):
            continue
        room = caps[i] - (max(counts[i], len(prev[i])) - len(kept[i]))
        while len(kept[i]):
            spare = orders[i][free[orders[i]]]
            worst = kept[i][np.argmin(w[kept[i]])]
            if not len(spare) or w[spare[0]] <= w[worst]:
                break
            if room <= 0:
                limited = True
                break
            free[spare[0]] = False
            free[worst] = True
            kept[i] = kept[i][kept[i] != worst]
            added[i] = np.concatenate([added[i], spare[:1]])
            room -= 1
    return [np.sort(np.concatenate([k, d])) for k, d in zip(kept, added, strict=True)], limited


_CACHE: list[tuple[Problem, Plan, ServicePlacement]] = []  # the last few plans placed (a plan is placed by
# assemble_plan's check and again by the verifier): identity-keyed, both objects are immutable


def service_placement(problem: Problem, plan: Plan) -> ServicePlacement:
    """The GPU-level plan of the services (module docstring rule): service -> per step its GPU indices (ascending).

    Services missing from ``plan.service_gpus`` are left out; a step beyond a service's allocation list counts 0.
    """
    for p_, q_, out in _CACHE:
        if p_ is problem and (q_ is plan or (q_.service_gpus == plan.service_gpus
                                             and q_.assignments == plan.assignments)):
            return out
    out = _service_placement(problem, plan)
    _CACHE.insert(0, (problem, plan, out))
    del _CACHE[4:]
    return out


def _service_placement(problem: Problem, plan: Plan) -> ServicePlacement:
    H = problem.horizon_steps
    busy = batch_busy(problem, plan.assignments)
    later = next_use(busy)
    names = [s.service for s in problem.services if s.service in plan.service_gpus]
    caps = [s.swap_cap_gpus for s in problem.services if s.service in plan.service_gpus]
    alloc = [tuple(plan.service_gpus[n]) for n in names]
    weights = _weights(problem, names) if any(s.typed_capacity for s in problem.services) else None
    steps: list[list[tuple[int, ...]]] = [[] for _ in names]
    prev: list[np.ndarray] | None = None
    last_counts: list[int] = []
    limited = True
    same_busy = np.zeros(H, dtype=bool)
    if H > 1:
        same_busy[1:] = (busy[1:] == busy[:-1]).all(axis=1)
    for t in range(H):
        counts = [int(a[t]) if t < len(a) else 0 for a in alloc]
        if prev is not None and not limited and counts == last_counts and same_busy[t]:
            # nothing changed and nothing was left to move: the GPUs a free step keeps (the free GPUs' next
            # uses are the same at t as at t - 1), so the same placement
            for i in range(len(names)):
                steps[i].append(steps[i][-1])
            continue
        new, limited = _place_step(~busy[t], prev, counts, later[t], caps, H, weights)
        for i in range(len(names)):
            if prev is not None and np.array_equal(new[i], prev[i]):
                steps[i].append(steps[i][-1])  # one tuple object while a service stays put
            else:
                steps[i].append(tuple(new[i].tolist()))
        prev = new
        last_counts = counts
    return {n: tuple(steps[i]) for i, n in enumerate(names)}


def served_demand_gpus(problem: Problem, placement: ServicePlacement) -> dict[str, np.ndarray]:
    """Per service, (horizon_steps,) float: demand GPUs its GPU-level plan serves (Σ :func:`gpu_weights`).

    A service without per-type capacity serves one per GPU (its count); missing steps count 0.
    """
    H = problem.horizon_steps
    out = {}
    for s in problem.services:
        steps = placement.get(s.service, ())
        w = gpu_weights(problem, s)
        out[s.service] = np.array([(len(steps[t]) if w is None else float(w[list(steps[t])].sum()))
                                   if t < len(steps) else 0.0 for t in range(H)])
    return out


def gpus_swapped(before: tuple[int, ...], after: tuple[int, ...]) -> int:
    """GPUs swapped between two consecutive steps: ``max(GPUs added, GPUs released)`` (DESIGN §5)."""
    b, a = set(before), set(after)
    return max(len(a - b), len(b - a))


def swap_excess(problem: Problem, placement: ServicePlacement) -> int:
    """Sum over services and steps t >= 1 of the GPUs swapped above the service's swap cap (0 = within every cap)."""
    caps = {s.service: s.swap_cap_gpus for s in problem.services}
    out = 0
    for name, steps in placement.items():
        for t in range(1, len(steps)):
            if steps[t] is not steps[t - 1]:  # a service that stays put keeps one tuple object
                out += max(0, gpus_swapped(steps[t - 1], steps[t]) - caps[name])
    return out


def _same_kind(problem: Problem, a: JobAssignment) -> np.ndarray | None:
    """(n_gpus // gpus,) bool: the blocks of ``a``'s size the job may use on the GPU type it has, or None.

    On a typed cluster a re-packed block keeps its type and so its duration; None on an untyped one (every block).
    """
    if not problem.cluster.typed or a.gpus is None or a.block_offset is None:
        return None
    job = next((j for j in problem.jobs if j.job_id == a.job_id), None)
    size = None if job is None else next((x for x in job.sizes if x.gpus == a.gpus), None)
    if job is None or size is None:
        return np.zeros(problem.n_gpus // a.gpus, dtype=bool)
    ty = block_type(problem, a.block_offset)
    for _, mask, t in block_options(problem, job, size):
        if t == ty and mask is not None:
            return mask
    return np.zeros(problem.n_gpus // a.gpus, dtype=bool)


def _repack(problem: Problem, plan: Plan) -> tuple[JobAssignment, ...] | None:
    """The plan's batch blocks re-packed step by step so that blocks avoid the services' GPUs; None when a block finds no room.

    Chronological: at each step t the blocks starting at t (largest first, then their old offset) take the
    aligned offset free of batch blocks and down GPUs over their whole run that overlaps the fewest GPUs the
    services held at t - 1 (then the lowest offset, as batch blocks pack from offset 0 and services from the
    top); then the services are placed for t by the module's rule. Running jobs keep their blocks.
    """
    H, N = problem.horizon_steps, problem.n_gpus
    gpn = problem.cluster.gpus_per_node
    fixed = [a for a in plan.assignments if a.running or a.start_step is None]
    busy = batch_busy(problem, fixed)
    starts = sorted((a for a in plan.assignments if not a.running and a.start_step is not None),
                    key=lambda a: (a.start_step, -(a.gpus or 0), a.block_offset))
    names = [s.service for s in problem.services if s.service in plan.service_gpus]
    caps = [s.swap_cap_gpus for s in problem.services if s.service in plan.service_gpus]
    alloc = [tuple(plan.service_gpus[n]) for n in names]
    weights = _weights(problem, names) if any(s.typed_capacity for s in problem.services) else None
    moved: dict[str, JobAssignment] = {}
    prev: list[np.ndarray] | None = None
    k = 0
    for t in range(H):
        held = np.zeros(N, dtype=bool)
        if prev is not None:
            for gs in prev:
                held[gs] = True
        while k < len(starts) and starts[k].start_step == t:
            a = starts[k]
            k += 1
            g, end = int(a.gpus or 0), min(H, int(a.end_step or 0))
            if g < 1 or N % g:
                return None
            window = busy[t:end].reshape(end - t, N // g, g).any(axis=(0, 2))
            kind = _same_kind(problem, a)
            ok = np.flatnonzero(~window if kind is None else ~window & kind)
            if not problem.settings.multi_node_blocks and g > gpn:
                return None
            if ok.size == 0:
                return None
            # priority: fewest GPUs the services held at t - 1, then best fit as a buddy allocator (the fullest
            # enclosing aligned region of 2g, then 4g, ... GPUs at t), then the lowest offset
            keys: list[np.ndarray] = [held.reshape(N // g, g).sum(axis=1)[ok]]
            L = 2 * g
            while L <= N:
                keys.append(-busy[t].reshape(N // L, L).sum(axis=1)[(ok * g) // L])
                L *= 2
            keys.append(ok)
            o = int(ok[np.lexsort(keys[::-1])[0]]) * g  # lexsort's primary key is its last
            busy[t:end, o:o + g] = True
            moved[a.job_id] = replace(a, block_offset=o)
        counts = [int(x[t]) if t < len(x) else 0 for x in alloc]
        prev, _ = _place_step(~busy[t], prev, counts, np.full(N, H), caps, H, weights)  # the future is not packed yet
    return tuple(moved.get(a.job_id, a) for a in plan.assignments)


def _pack_by_size(problem: Problem, plan: Plan, best_fit: bool) -> tuple[JobAssignment, ...] | None:
    """The plan's batch blocks re-packed largest first (then by start): each takes an aligned offset free over its run.

    ``best_fit``: the offset whose enclosing aligned regions (2g, 4g, ... GPUs) are the most occupied over its
    run, as a buddy allocator; else the lowest free offset. Running jobs keep their blocks. None when a block
    finds no room (the services are placed afterwards by :func:`service_placement`, which looks ahead).
    """
    H, N = problem.horizon_steps, problem.n_gpus
    gpn = problem.cluster.gpus_per_node
    fixed = [a for a in plan.assignments if a.running or a.start_step is None]
    busy = batch_busy(problem, fixed)
    starts = sorted((a for a in plan.assignments if not a.running and a.start_step is not None),
                    key=lambda a: (-(a.gpus or 0), a.start_step, a.block_offset))
    moved: dict[str, JobAssignment] = {}
    for a in starts:
        g, t, end = int(a.gpus or 0), int(a.start_step or 0), min(H, int(a.end_step or 0))
        if g < 1 or N % g or (not problem.settings.multi_node_blocks and g > gpn):
            return None
        window = busy[t:end].reshape(end - t, N // g, g).any(axis=(0, 2))
        kind = _same_kind(problem, a)
        ok = np.flatnonzero(~window if kind is None else ~window & kind)
        if ok.size == 0:
            return None
        keys: list[np.ndarray] = []
        L = 2 * g
        while best_fit and L <= N:
            keys.append(-busy[t:end].reshape(end - t, N // L, L).sum(axis=(0, 2))[(ok * g) // L])
            L *= 2
        keys.append(ok)
        o = int(ok[np.lexsort(keys[::-1])[0]]) * g
        busy[t:end, o:o + g] = True
        moved[a.job_id] = replace(a, block_offset=o)
    return tuple(moved.get(a.job_id, a) for a in plan.assignments)


def _first_excess(problem: Problem, placement: ServicePlacement) -> tuple[int, str] | None:
    """(step, service) of the first step t >= 1 (then service order) where a service swaps more GPUs than its cap."""
    caps = {s.service: s.swap_cap_gpus for s in problem.services}
    H = problem.horizon_steps
    for t in range(1, H):
        for name, steps in placement.items():
            if len(steps) == H and gpus_swapped(steps[t - 1], steps[t]) > caps[name]:
                return t, name
    return None


def defer_blocked_starts(problem: Problem, plan: Plan) -> Plan:
    """Delay the batch starts that would make a service swap more GPUs than its cap at GPU level.

    While :func:`swap_excess` is above 0: at the first (step t, service) over its cap, the queued block starting
    at t that covers most of the GPUs the service held at t - 1 (ties: the largest job id) is moved to the
    earliest later start with an aligned block free of batch blocks and down GPUs over its run, room for the
    services' counts at every step of it, and no swap excess; failing that, the job is left unstarted. Used
    when re-packing (:func:`hold_services`) cannot keep the cap: a block that can only go on a service's GPUs
    and would displace more replicas at once than the cap allows must wait. Returns ``plan`` itself when no
    start is in the way; the caller re-values the objective.
    """
    H, N = problem.horizon_steps, problem.n_gpus
    rt = np.zeros(H, dtype=np.int64)
    for a in plan.service_gpus.values():
        if len(a) == H:
            rt += np.asarray(a, dtype=np.int64)
    cur = plan
    for _ in range(len(plan.assignments) + 1):
        placement = service_placement(problem, cur)
        hit = _first_excess(problem, placement)
        if hit is None:
            return cur
        t, name = hit
        held = set(placement[name][t - 1])
        cands = [a for a in cur.assignments if not a.running and a.start_step == t and a.block_offset is not None
                 and a.gpus is not None and held.intersection(range(a.block_offset, a.block_offset + a.gpus))]
        if not cands:
            return cur
        victim = max(cands, key=lambda a: (len(held.intersection(range(a.block_offset or 0,
                                                                          (a.block_offset or 0) + (a.gpus or 0)))),
                                           a.job_id))
        others = tuple(a for a in cur.assignments if a.job_id != victim.job_id)
        g = int(victim.gpus or 0)
        d = int(victim.end_step or 0) - t  # its duration on its type, which a move keeps
        kind = _same_kind(problem, victim)
        moved = replace(victim, start_step=None, end_step=None, block_offset=None, gpus=None)
        busy = batch_busy(problem, others)
        for t2 in range(t + 1, H):
            end = min(H, t2 + d)
            if np.any((~busy[t2:end]).sum(axis=1) - g < rt[t2:end]):
                continue
            window = busy[t2:end].reshape(end - t2, N // g, g).any(axis=(0, 2))
            ok = np.flatnonzero(~window if kind is None else ~window & kind)
            done = False
            for k in ok:
                cand = replace(victim, start_step=t2, end_step=t2 + d, block_offset=int(k) * g)
                trial = replace(cur, assignments=tuple(cand if a.job_id == victim.job_id else a
                                                       for a in cur.assignments))
                if swap_excess(problem, service_placement(problem, trial)) == 0:
                    moved, done = cand, True
                    break
            if done:
                break
        cur = replace(cur, assignments=tuple(moved if a.job_id == victim.job_id else a for a in cur.assignments))
    return cur


def hold_services(problem: Problem, plan: Plan) -> Plan:
    """``plan`` with its batch blocks re-packed when that lowers its GPU-level swap excess; else ``plan`` itself.

    Three re-packings are tried in order, the first within every cap kept (else the one with the least
    excess, when below the plan's own): chronological and service-aware (:func:`_repack`), largest block
    first by best fit, largest block first by lowest offset (:func:`_pack_by_size`); jobs, starts, sizes,
    ends and service counts are then unchanged, so the objective is too. When none keeps every cap, the
    starts in the way are delayed (:func:`defer_blocked_starts`; the objective changes: the caller re-values
    it). A plan already within every service's swap cap at GPU level (:func:`swap_excess` 0) is returned as is.
    """
    if not problem.services or not plan.service_gpus:
        return plan
    best, least = plan, swap_excess(problem, service_placement(problem, plan))
    for make in (lambda: _repack(problem, plan), lambda: _pack_by_size(problem, plan, True),
                 lambda: _pack_by_size(problem, plan, False)):
        if least == 0:
            break
        assignments = make()
        if assignments is None:
            continue
        cand = replace(plan, assignments=assignments)
        excess = swap_excess(problem, service_placement(problem, cand))
        if excess < least:
            best, least = cand, excess
    return best if least == 0 else defer_blocked_starts(problem, best)
