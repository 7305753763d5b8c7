"""Heterogeneous clusters (issue 26): the version-2 problem file, the verifier's type rules, eligible baselines.

Hand-solvable cases on small typed clusters; the random ones check every planner's plan against the verifier.
"""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.eligibility import block_options
from optimizer.errors import InputError
from optimizer.objective import objective_value
from optimizer.plan import JobAssignment, Plan
from optimizer.planners import PLANNERS, plan
from optimizer.problem import Cluster, Job, Node, PlanSettings, Problem, RunningJob, Service, SizeOption
from optimizer.problem.fileform import PROBLEM_VERSION
from optimizer.verify import verify


def _typed(jobs, running=(), services=(), nodes=None, speed=(), H=6, settings=None) -> Problem:
    """Default: h1 (4 × h100), a1 and a2 (2 × a100 each, domains r1 and r2), t1 (1 × t4): 9 GPUs padded to 16."""
    nodes = nodes or (Node("a1", 2, "a100", "r1"), Node("h1", 4, "h100"), Node("a2", 2, "a100", "r2"),
                      Node("t1", 1, "t4"))
    return Problem(Cluster(0, 8, 30, H, nodes=nodes, gpu_speed=speed), settings or PlanSettings(),
                   tuple(services), tuple(jobs), tuple(running))


def test_layout_is_largest_node_first_padded_to_a_power_of_two():
    c = _typed(()).cluster
    assert [n.name for n in c.nodes] == ["h1", "a1", "a2", "t1"]  # stable among the 2-GPU nodes
    assert c.node_offsets == (0, 4, 6, 8)
    assert (c.n_gpus, c.gpus_per_node, c.layout_down) == (16, 4, tuple(range(9, 16)))
    assert _typed(()).down_gpus == tuple(range(9, 16))


def test_version_2_file_round_trips_and_version_1_reads_as_one_type():
    p = _typed((Job("J", "training", 1.0, 0, (SizeOption(2, 4),), gpu_types=("a100",),
                    durations_by_type=(("a100", 3),), same_domain=True),),
               speed=(("h100", 2.0),))
    d = p.to_dict()
    assert d["version"] == PROBLEM_VERSION == 2
    assert d["cluster"]["nodes"][0] == {"name": "h1", "gpus": 4, "gpu_type": "h100"}
    assert d["cluster"]["gpu_speed"] == {"h100": 2.0}
    assert d["down_gpus"] == []  # the padding is the layout's, not written
    assert d["jobs"][0]["gpu_types"] == ["a100"] and d["jobs"][0]["durations_by_type"] == {"a100": 3}
    assert Problem.from_dict(d) == p
    old = Problem.from_dict({"cluster": {"n_gpus": 8, "gpus_per_node": 4, "gpu_type": "mixed"},
                             "jobs": [{"job_id": "A", "kind": "training", "priority": 1, "gpus": 2,
                                       "duration_steps": 3}]})
    assert not old.cluster.typed and old.cluster.gpu_types == ("",)
    assert old.to_dict()["version"] == 2 and "nodes" not in old.to_dict()["cluster"]


def test_bad_typed_input_names_the_field():
    with pytest.raises(InputError, match=r"node 'x': gpus = 3 is not a power of two"):
        Node("x", 3, "h100")
    with pytest.raises(InputError, match=r"cluster.nodes and cluster.gpu_speed need version = 2"):
        Problem.from_dict({"cluster": {"nodes": [{"name": "n", "gpus": 2}]}})
    with pytest.raises(InputError, match=r"gpu_speed names GPU type 'H100', which no node has; "
                                         r"the cluster's types are \['h100', 'a100', 't4'\]"):
        _typed((), speed=(("H100", 2.0),))  # a typo would plan h100 at speed 1
    with pytest.raises(InputError, match=r"job 'J': gpu_types \['b200'\] name no node's type"):
        _typed((Job("J", "training", 1.0, 0, (SizeOption(1, 1),), gpu_types=("b200",)),))
    with pytest.raises(InputError, match=r"job 'J': durations_by_type\['t4'\] names a type it cannot run on"):
        _typed((Job("J", "training", 1.0, 0, (SizeOption(1, 1),), gpu_types=("a100",),
                    durations_by_type=(("t4", 2),)),))


def test_duration_on_a_type_uses_durations_by_type_then_speed():
    p = _typed((Job("J", "training", 1.0, 0, (SizeOption(2, 5), SizeOption(4, 3)),
                    durations_by_type=(("a100", 4),)),), speed=(("h100", 2.0),))
    j, c = p.jobs[0], p.cluster
    assert [j.duration_on(j.sizes[0], t, c) for t in ("a100", "h100", "t4")] == [4, 3, 5]  # ceil(5 / 2) = 3
    assert j.duration_on(j.sizes[1], "h100", c) == 2  # ceil(3 / 2); durations_by_type is the requested size's


def _plan_of(p: Problem, *assign: JobAssignment) -> Plan:
    return Plan("hand", "feasible", assign, {}, 0.0, None, None, 0.0, None, n_gpus=p.n_gpus,
                horizon_steps=p.horizon_steps)


def test_a_job_on_an_ineligible_gpu_is_rejected_naming_job_node_type_and_step():
    p = _typed((Job("J", "training", 1.0, 1, (SizeOption(2, 2),), gpu_types=("a100",)),))
    assert verify(_plan_of(p, JobAssignment("J", 1, 3, 4, 2)), p) == []  # a1
    assert verify(_plan_of(p, JobAssignment("J", 1, 3, 2, 2)), p) == [
        "job 'J': step 1: node 'h1' is of type 'h100', not one of its gpu_types ['a100']"]


def test_a_gang_across_types_or_parts_of_nodes_is_rejected():
    p = _typed((Job("G", "training", 1.0, 0, (SizeOption(4, 2),)), Job("K", "training", 1.0, 0, (SizeOption(8, 1),))))
    # 4 GPUs on a1 + a2: whole nodes of one type (domains differ, not asked)
    assert verify(_plan_of(p, JobAssignment("G", 0, 2, 4, 4), JobAssignment("K", None, None, None, None)), p) == []
    v = verify(_plan_of(p, JobAssignment("G", None, None, None, None), JobAssignment("K", 0, 1, 0, 8)), p)
    assert v == ["job 'K': step 0: gang on nodes of types ['h100', 'a100'] (['h1', 'a1', 'a2']): a gang is whole "
                 "nodes of one type"]
    same = _typed((Job("G", "training", 1.0, 0, (SizeOption(4, 2),), same_domain=True),))
    assert verify(_plan_of(same, JobAssignment("G", 0, 2, 4, 4)), same) == [
        "job 'G': gang spans domains ['r1', 'r2'], same_domain asks for one"]


def test_eligible_blocks_per_type():
    p = _typed((Job("J", "training", 1.0, 0, (SizeOption(2, 4),), gpu_types=("a100", "h100")),),
               speed=(("h100", 2.0),))
    opts = {t: (d, np.flatnonzero(m).tolist()) for d, m, t in block_options(p, p.jobs[0], p.jobs[0].sizes[0])}
    assert opts == {"h100": (2, [0, 1]), "a100": (4, [2, 3])}  # 2-blocks at GPU 0, 2 (h1) and 4, 6 (a1, a2)


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_job_eligible_only_for_the_idle_type_starts_at_once_while_the_busy_types_queue_waits(planner):
    # h1 is busy with R for 4 steps; H1 and H2 want h100, T wants t4 (idle): T starts at 0, H1 at 4, H2 after it
    p = _typed((Job("H1", "training", 3.0, 0, (SizeOption(4, 2),), gpu_types=("h100",)),
                Job("H2", "training", 2.0, 0, (SizeOption(4, 1),), gpu_types=("h100",)),
                Job("T", "training", 1.0, 0, (SizeOption(1, 2),), gpu_types=("t4",))),
               running=(RunningJob("R", "training", 1.0, 4, 0, 4),), H=8)
    got = plan(p, planner)
    assert verify(got, p) == []
    starts = {a.job_id: (a.start_step, a.block_offset) for a in got.assignments}
    # strict FIFO never overtakes (DESIGN §5.1): T, last in arrival order, waits for H2's start
    assert starts["T"] == ((6, 8) if planner == "fifo" else (0, 8))
    assert starts["H1"] == (4, 0) and starts["H2"] == (6, 0)
    if planner == "milp":  # the pool master proves it: nothing better exists
        assert got.status == "optimal" and got.source != "fallback"


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_two_node_gang_is_never_split_across_types(planner):
    # 4 GPUs wanted on a100 (2-GPU nodes): only a1 + a2 as a gang; h1's 4 GPUs are not eligible
    p = _typed((Job("G", "training", 1.0, 0, (SizeOption(4, 2),), gpu_types=("a100",)),
                Job("F", "training", 1.0, 0, (SizeOption(2, 1),))), H=4)
    got = plan(p, planner)
    assert verify(got, p) == []
    starts = {a.job_id: (a.start_step, a.block_offset) for a in got.assignments}
    assert starts["G"] == (0, 4)
    assert starts["F"] == (0, 0)  # first fit: h1


def test_a_faster_type_earns_the_same_work_sooner():
    # J: 4 reference steps on 2 GPUs; on h100 (speed 2) 2 steps. γ = 1: the same value either way, 1 × 2 × 4
    p = _typed((Job("J", "training", 1.0, 0, (SizeOption(2, 4),)),), speed=(("h100", 2.0),),
               settings=PlanSettings(decay_per_step=1.0))
    on_h = _plan_of(p, JobAssignment("J", 0, 2, 0, 2))
    on_a = _plan_of(p, JobAssignment("J", 0, 4, 4, 2))
    assert verify(on_h, p) == [] and verify(on_a, p) == []
    assert objective_value(on_h, p) == objective_value(on_a, p) == 8.0
    assert verify(_plan_of(p, JobAssignment("J", 0, 4, 0, 2)), p) == [
        "job 'J': runs 4 steps on 2 GPUs of type 'h100', its duration is 2 (no preemption)"]


def _random_typed(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    kinds = [("h100", 8), ("h100", 4), ("a100", 4), ("a100", 2), ("t4", 2), ("t4", 1)]
    nodes = []
    for i in range(int(rng.integers(2, 7))):
        t, g = kinds[int(rng.integers(0, len(kinds)))]
        down = (0,) if rng.random() < 0.1 else ()
        nodes.append(Node(f"n{i}", g, t, f"r{i % 2}", down))
    types = sorted({n.gpu_type for n in nodes})
    H = int(rng.integers(4, 16))
    jobs = []
    for k in range(int(rng.integers(1, 10))):
        g = int(rng.choice([1, 2, 4, 8]))
        el = tuple(sorted(set(rng.choice(types, size=int(rng.integers(0, len(types) + 1))).tolist())))
        jobs.append(Job(f"J{k}", "training", float(rng.choice([1, 2, 3])), int(rng.integers(0, H)),
                        (SizeOption(g, int(rng.integers(1, H))),), gpu_types=el,
                        same_domain=bool(rng.random() < 0.3)))
    speed = tuple((t, float(rng.choice([1.0, 1.5, 2.0]))) for t in types)
    total = sum(n.gpus for n in nodes)
    services = (Service("s", tuple(int(x) for x in rng.integers(0, max(1, total // 4), size=H)), 0, total // 2,
                        int(rng.integers(1, 4)), int(rng.integers(0, max(1, total // 4)))),) if rng.random() < 0.7 else ()
    try:
        return _typed(jobs, services=services, nodes=tuple(nodes), speed=speed, H=H)
    except InputError:  # a job bigger than the cluster: drop jobs until it is valid
        return _typed((), services=services, nodes=tuple(nodes), speed=speed, H=H)


@pytest.mark.parametrize("planner", PLANNERS)
def test_every_planner_plan_on_random_typed_problems_passes_the_verifier(planner):
    started = 0
    for seed in range(60):
        p = _random_typed(seed)
        got = plan(p, planner)
        assert verify(got, p) == [], f"seed {seed}"
        started += sum(1 for a in got.assignments if a.start_step is not None)
    assert started > 60


def test_milp_on_random_typed_problems_is_never_below_the_best_baseline():
    # the pool master + packing (optimizer.typed_milp) returns the better of its plan and the best baseline
    for seed in range(30):
        p = _random_typed(seed)
        m = plan(p, "milp")
        assert m.objective >= max(plan(p, b).objective for b in ("fifo", "easy", "priority")) - 1e-9, f"seed {seed}"


def test_fast_on_random_typed_problems_ranks_at_least_priority_and_the_milp_ranks_at_least_fast():
    # the fast mode is the best verified of priority backfill and the greedy orders; the pool MILP is seeded with them
    from optimizer.capacity import least_unmet_rt
    from optimizer.ranking import rank

    for seed in range(30):
        p = _random_typed(seed)
        least = least_unmet_rt(p)
        rf, rp, rm = (rank(plan(p, n), p, least) for n in ("fast", "priority", "milp"))
        assert rf[0] > rp[0] or (rf[0] == rp[0] and rf[1] >= rp[1] - 1e-9), f"seed {seed}"
        assert rm[0] > rf[0] or (rm[0] == rf[0] and rm[1] >= rf[1] - 1e-9), f"seed {seed}"


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_job_larger_than_all_gpus_of_its_types_is_named_in_every_planners_notes(planner):
    # a100: a1 + a2 = 4 GPUs; B asks 8 on a100, never startable; C (4 on a100) fits as a gang of a1 + a2
    p = _typed((Job("B", "training", 1.0, 0, (SizeOption(8, 2),), gpu_types=("a100",)),
                Job("C", "training", 1.0, 0, (SizeOption(4, 1),), gpu_types=("a100",))), H=4)
    got = plan(p, planner)
    assert [n for n in got.notes if n.startswith("job ")] == [
        "job 'B': needs 8 GPUs of its types (a100); at most 4 are up on nodes of one type: it cannot start in any plan"]
    assert {a.job_id: a.start_step for a in got.assignments}["B"] is None


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_deadline_before_the_earliest_possible_end_is_named_in_every_planners_notes(planner):
    # D: 2 GPUs, 4 steps, h100 at speed 2 -> 2 steps there; released at step 1, so the earliest end is step 3:
    # a deadline at step 2 is out of reach, at step 3 it is not. E (any type, 3 steps at speed 1, so 2 on h100,
    # from step 0) ends at step 2 at the earliest: a deadline at step 1 is out of reach.
    # F has no deadline. Every one is still planned (a deadline is not a planning constraint).
    jobs = (Job("D", "training", 1.0, 1, (SizeOption(2, 4),), deadline_step=2),
            Job("D3", "training", 1.0, 1, (SizeOption(2, 4),), deadline_step=3),
            Job("E", "training", 1.0, 0, (SizeOption(1, 3), SizeOption(2, 5)), deadline_step=1),
            Job("F", "training", 1.0, 0, (SizeOption(1, 2),)))
    p = _typed(jobs, speed=(("h100", 2.0),), H=8)
    got = plan(p, planner)
    assert verify(got, p) == []
    assert [n for n in got.notes if n.startswith("job ")] == [
        "job 'D': its deadline, step 2, is before its earliest possible end, step 3 (released at step 1, 2 steps at "
        "the shortest): it misses its deadline in every plan",
        "job 'E': its deadline, step 1, is before its earliest possible end, step 2 (released at step 0, 2 steps at "
        "the shortest): it misses its deadline in every plan"]
