"""The MILP on typed clusters (issue 26, optimizer/typed_milp.py): pool master, packing on nodes, exactness.

Hand-solvable cases, random heterogeneous problems (hypothesis, seeded), and an independent enumeration of
every eligible (size, block, start) on tiny typed clusters that the MILP's optimum must equal.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from optimizer.capacity import Capacity, least_unmet_by_step
from optimizer.planners import plan
from optimizer.problem import Job, Node, PlanSettings, Problem, RunningJob, SizeOption
from optimizer.typed_milp import build_pool_master, pack_starts, pools
from optimizer.verify import verify
from tests.optimizer.test_properties import fast
from tests.optimizer.test_typed import _random_typed, _typed


def test_pools_are_type_and_node_size():
    p = _typed((Job("J", "training", 1.0, 0, (SizeOption(1, 1),)),))
    assert pools(p) == [("h100", 4), ("a100", 2), ("t4", 1)]
    pm = build_pool_master(p, least_unmet_by_step(p), Capacity.of(p))
    # J (1 GPU, any type): one class per pool (its blocks inside one node of that pool), 6 starts each
    assert sorted((v.gpu_type, v.use.tolist(), len(v.starts)) for v in pm.xs) == [
        ("a100", [0, 1, 0], 6), ("h100", [1, 0, 0], 6), ("t4", [0, 0, 1], 6)]
    assert pm.row_families["pool_capacity"] == 3 * 6


def test_a_faster_type_is_chosen_when_it_earns_the_work_sooner():
    # J: 4 reference steps on 2 GPUs, h100 at speed 2 runs it in 2. γ = 0.5: earlier work is worth more, so the
    # MILP puts it on h100 (offset 0): 1 × 2 × (4 / 2) × (1 + 0.5) = 6 against 2 × (1 + .5 + .25 + .125) = 3.75
    p = _typed((Job("J", "training", 1.0, 0, (SizeOption(2, 4),)),), speed=(("h100", 2.0),),
               settings=PlanSettings(decay_per_step=0.5))
    got = plan(p, "milp")
    a = next(x for x in got.assignments if x.job_id == "J")
    assert (a.start_step, a.end_step, a.block_offset) == (0, 2, 0)
    assert got.objective == pytest.approx(6.0) and got.status == "optimal"


def test_a_gang_start_the_pool_cannot_pack_is_delayed_not_lost():
    # two 2-GPU a100 nodes (a1, a2); R holds GPU 4 (a1) for 2 steps. The master sees 3 free a100 GPUs at step 0:
    # G (a 4-GPU gang of a1 + a2) cannot start before 2, and packing G at 2 after a 1-GPU job placed on a2 ...
    # the repaired plan is valid and the MILP value is never below the best baseline
    p = _typed((Job("G", "training", 2.0, 0, (SizeOption(4, 2),), gpu_types=("a100",)),
                Job("S", "training", 1.0, 0, (SizeOption(1, 3),), gpu_types=("a100",))),
               running=(RunningJob("R", "training", 1.0, 1, 4, 2),), H=6)
    got = plan(p, "milp")
    assert verify(got, p) == []
    starts = {a.job_id: (a.start_step, a.block_offset) for a in got.assignments}
    assert starts["G"] == (2, 4)  # the gang after R, on a1 + a2
    assert starts["S"] == (4, 4)  # S after G (S first would hold a node until step 3 and push G to 3)
    assert got.objective >= max(plan(p, b).objective for b in ("fifo", "easy", "priority")) - 1e-9


def test_packing_repairs_a_start_that_does_not_fit_its_class():
    # hand-made master point: two 2-GPU starts on the same a100 class at step 0, but only one 2-GPU a100 node is up
    p = _typed((Job("A", "training", 1.0, 0, (SizeOption(2, 2),), gpu_types=("a100",)),
                Job("B", "training", 1.0, 0, (SizeOption(2, 2),), gpu_types=("a100",))),
               running=(RunningJob("R", "training", 1.0, 2, 6, 6),), H=6)
    pm = build_pool_master(p, least_unmet_by_step(p), Capacity.of(p))
    x = np.zeros(pm.model.n_cols)
    for v in pm.xs:
        x[v.cols[v.starts == 0]] = 1.0
    starts, delayed, dropped = pack_starts(p, pm, x, np.zeros((0, 6), np.int64), Capacity.of(p))
    assert starts == {"A": (0, 4, 2), "B": (2, 4, 2)} and (delayed, dropped) == (1, 0)


def test_milp_on_random_typed_problems_passes_the_verifier_and_beats_or_equals_the_best_baseline():
    better = 0
    for seed in range(30):
        p = _random_typed(seed)
        m = plan(p, "milp")
        best = max(plan(p, b).objective for b in ("fifo", "easy", "priority"))
        assert verify(m, p) == [], f"seed {seed}"
        assert m.objective >= best - 1e-9, f"seed {seed}"
        better += m.objective > best + 1e-6
    assert better == 7  # measured: strictly better (by > 1e-6) than every baseline on 7 of the 30 seeds (the rest
    # equal, or a baseline already within mip_rel_gap = 0.1 % of the pool master's LP bound)


@fast(40)
@given(st.integers(min_value=100, max_value=10_000))
def test_milp_on_random_typed_problems_hypothesis(seed):
    p = _random_typed(seed)
    m = plan(p, "milp")
    assert verify(m, p) == []
    assert m.objective >= max(plan(p, b).objective for b in ("fifo", "easy", "priority")) - 1e-9


# ----------------------------------------------------------------------------- independent enumeration


def enumerate_best(p: Problem) -> float:
    """Best DESIGN §5 value of a typed, service-free problem by trying every eligible (size, block, start) of
    every job. Eligibility is derived here from the nodes alone: a block of g GPUs at an aligned offset lies in
    one node, or covers whole nodes of one type (one domain when asked); no down or running GPU; reward
    ``p · e · g · (d / d') · Σ_{τ=t}^{t+d'-1} γ^τ`` with d' the type's duration."""
    c, H, gamma = p.cluster, p.horizon_steps, p.settings.decay_per_step
    owner = {}
    for k, (o, n) in enumerate(zip(c.node_offsets, c.nodes, strict=True)):
        for i in range(n.gpus):
            owner[o + i] = k
    fixed = {(t, g) for g in p.down_gpus for t in range(H)}
    for r in p.running:
        fixed |= {(t, g) for t in range(min(H, r.planned_steps)) for g in range(r.block_offset, r.block_offset + r.gpus)}

    def node_type(o: int, g: int, job: Job) -> str | None:
        ks = [owner.get(x) for x in range(o, o + g)]
        if None in ks:
            return None
        nodes = [c.nodes[k] for k in dict.fromkeys(ks)]
        if len(nodes) > 1 and (sum(n.gpus for n in nodes) != g or not p.settings.multi_node_blocks):
            return None
        if len({n.gpu_type for n in nodes}) > 1 or (job.same_domain and len({n.domain for n in nodes}) > 1):
            return None
        return nodes[0].gpu_type

    options = []
    for j in p.jobs:
        opts = [None]
        for s in j.sizes:
            for o in range(0, c.n_gpus, s.gpus):
                ty = node_type(o, s.gpus, j)
                if ty is None or (j.gpu_types and ty not in j.gpu_types):
                    continue
                d = j.duration_on(s, ty, c)
                for t in range(j.release_step, H):
                    cells = frozenset((tau, g) for tau in range(t, min(t + d, H)) for g in range(o, o + s.gpus))
                    if cells & fixed:
                        continue
                    value = j.priority * s.efficiency * s.gpus * (s.duration_steps / d) * sum(
                        gamma**tau for tau in range(t, t + d))
                    opts.append((cells, value))
        options.append(opts)
    best = 0.0
    for combo in itertools.product(*options):
        used: set = set()
        total = 0.0
        for opt in combo:
            if opt is None:
                continue
            if used & opt[0]:
                break
            used |= opt[0]
            total += opt[1]
        else:
            best = max(best, total)
    return best


@st.composite
def tiny_typed(draw) -> Problem:
    kinds = [("h100", 2), ("a100", 2), ("a100", 1), ("t4", 1)]
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        ty, g = kinds[draw(st.integers(0, 3))]
        nodes.append(Node(f"n{i}", g, ty, f"r{draw(st.integers(0, 1))}"))
    types = sorted({n.gpu_type for n in nodes})
    H = draw(st.integers(2, 4))
    total = sum(n.gpus for n in nodes)
    jobs = []
    for k in range(draw(st.integers(1, 3))):
        g = draw(st.sampled_from([x for x in (1, 2, 4) if x <= total]))
        el = tuple(draw(st.lists(st.sampled_from(types), unique=True, max_size=len(types))))
        jobs.append(Job(f"J{k}", "training", float(draw(st.sampled_from([1, 2, 3]))), draw(st.integers(0, H - 1)),
                        (SizeOption(g, draw(st.integers(1, H))),), gpu_types=tuple(sorted(el)),
                        same_domain=draw(st.booleans())))
    speed = tuple((t, draw(st.sampled_from([1.0, 2.0]))) for t in types)
    gamma = draw(st.sampled_from([1.0, 0.9]))
    return _typed(jobs, nodes=tuple(nodes), speed=speed, H=H, settings=PlanSettings(decay_per_step=gamma))


@fast(150)
@given(tiny_typed())
def test_milp_optimum_equals_an_independent_enumeration_on_tiny_typed_instances(p):
    best = enumerate_best(p)
    got = plan(p, "milp")
    assert verify(got, p) == []
    assert got.status == "optimal"
    assert got.objective == pytest.approx(best, rel=1e-7, abs=1e-7)


def test_typed_greedy_warm_starts_leave_the_pool_master_most_of_the_time(monkeypatch):
    # the greedy orders may start only within GREEDY_SHARE (1/4) of the time left, not up to deadline - 1 s as on
    # the homogeneous path (the whole-cluster openb replan spent 31 of its 60 s there and never built a bound)
    import time

    import optimizer.typed_milp as tm
    from optimizer.baselines import greedy_plans

    seen = []

    def spy(problem, deadline=None, capacity=None):
        seen.append(deadline - time.perf_counter())
        return greedy_plans(problem, deadline, capacity)

    monkeypatch.setattr(tm, "greedy_plans", spy)
    p = _typed((Job("J", "training", 1.0, 0, (SizeOption(2, 4),)),), settings=PlanSettings(time_limit_s=60.0))
    got = plan(p, "milp")
    assert len(seen) == 1 and seen[0] <= tm.GREEDY_SHARE * 60.0
    assert not verify(got, p) and got.status == "optimal"
