"""Per-type service capacity on typed clusters (issue 26): ``capacity_per_gpu_per_h`` per GPU type.

Hand-solvable: a100 node ``a1`` (2 GPUs, offsets 0-1) and h100 node ``h1`` (1 GPU, offset 2; offset 3 is
padding). Service ``chat`` serves 100 requests per GPU-hour on a100 and 200 on h100, and needs 200 requests
per hour: 2 a100 GPUs or 1 h100 GPU (``demand_gpus`` = 2, GPUs of its slowest type). Job ``J`` needs both
a100 GPUs for the whole horizon. The only plan that serves all the demand and runs ``J`` puts ``chat`` on
the h100.
"""

from __future__ import annotations

import pytest

from optimizer.errors import InputError
from optimizer.metrics import compute
from optimizer.objective import objective_value, run_decay
from optimizer.placement import gpus_swapped, service_placement
from optimizer.planners import plan
from optimizer.problem import Cluster, Node, Problem
from optimizer.scenarios import Scenario, SimJob, SimService
from optimizer.simulate import planner_fn, simulate
from optimizer.verify import placement_violations, served_requests_per_h, verify


def _problem(*, current: int = 1, cap: int = 1, running: list | None = None, release: int = 0,
             rates: dict | float | None = None) -> Problem:
    return Problem.from_dict({
        "version": 2,
        "cluster": {"nodes": [{"name": "a1", "gpus": 2, "gpu_type": "a100"},
                              {"name": "h1", "gpus": 1, "gpu_type": "h100"}],
                    "step_minutes": 30, "horizon_steps": 4},
        "settings": {"budget": "work"},
        "services": [{"service": "chat", "demand_gpus": [2, 2, 2, 2], "min_gpus": 0, "max_gpus": 3,
                      "swap_cap_gpus": cap, "current_gpus": current,
                      "capacity_per_gpu_per_h": {"a100": 100, "h100": 200} if rates is None else rates}],
        "jobs": [{"job_id": "J", "kind": "training", "priority": 1, "gpus": 2, "duration_steps": 4,
                  "gpu_types": ["a100"], "release_step": release}],
        "running": running or [],
    })


def test_serving_moves_to_the_faster_type_so_the_a100_job_runs():
    p = _problem()
    got = plan(p, "milp")
    assert verify(got, p) == []
    j = got.job("J")
    assert (j.start_step, j.end_step, j.block_offset) == (0, 4, 0)  # both a100 GPUs from step 0
    assert got.service_gpus["chat"] == (1, 1, 1, 1)
    assert service_placement(p, got)["chat"] == ((2,),) * 4  # on the h100
    assert served_requests_per_h(got, p)["chat"] == [200.0] * 4  # = the demand: 2 x 100 requests/h
    gamma = p.settings.decay_per_step
    assert got.objective == pytest.approx(2 * run_decay(gamma, 0, 4))  # J's reward, nothing unmet
    assert objective_value(got, p) == pytest.approx(got.objective)
    best_base = max(plan(p, b).objective for b in ("fifo", "easy", "priority"))
    assert got.objective >= best_base - 1e-9


def test_service_moves_to_the_faster_type_within_its_swap_cap():
    # R holds the h100 at step 0, so chat serves on the two a100s; J is released at step 1. At step 1 chat
    # moves to the h100 (1 added, 2 released: 2 GPUs swapped = its cap) and J takes the a100 node.
    p = _problem(current=2, cap=2, release=1,
                 running=[{"job_id": "R", "kind": "training", "priority": 1, "gpus": 1, "block_offset": 2,
                           "remaining_steps": 1}])
    got = plan(p, "milp")
    assert verify(got, p) == []
    assert got.service_gpus["chat"] == (2, 1, 1, 1)
    steps = service_placement(p, got)["chat"]
    assert steps == ((0, 1), (2,), (2,), (2,))
    assert gpus_swapped(steps[0], steps[1]) == 2
    j = got.job("J")
    assert (j.start_step, j.block_offset) == (1, 0)
    assert served_requests_per_h(got, p)["chat"] == [200.0] * 4


def test_a_swap_cap_of_one_keeps_the_service_on_a100_and_the_job_waits():
    # same as above with cap 1: chat cannot release 2 a100s and take the h100 in one step (2 swaps), and with
    # 1 swap it holds the h100 plus one a100 (300 requests/h) at step 1: J needs both a100s, so it starts at 2
    p = _problem(current=2, cap=1, release=1,
                 running=[{"job_id": "R", "kind": "training", "priority": 1, "gpus": 1, "block_offset": 2,
                           "remaining_steps": 1}])
    got = plan(p, "milp")
    assert verify(got, p) == []
    steps = service_placement(p, got)["chat"]
    assert all(gpus_swapped(a, b) <= 1 for a, b in zip(steps, steps[1:], strict=False))
    assert got.job("J").start_step == 2
    assert served_requests_per_h(got, p)["chat"] == [200.0] * 4


def test_verifier_rejects_a_service_gpu_of_a_type_it_does_not_list():
    p = _problem(rates={"h100": 200})
    got = plan(p, "milp")
    assert verify(got, p) == []
    bad = {"chat": ((0,), (2,), (2,), (2,))}
    v = placement_violations(got, p, bad)
    assert any("service 'chat': step 0: GPU 0 is of type 'a100', not one of its types ['h100']" in x for x in v)


def test_the_scalar_form_is_read_and_plans_as_before():
    p = _problem(rates=100)
    assert p.services[0].capacity_per_gpu_per_h == 100.0 and not p.services[0].typed_capacity
    assert Problem.from_dict(p.to_dict()) == p
    got = plan(p, "milp")
    assert verify(got, p) == []
    assert got.job("J").start_step is None  # one GPU serves one: chat keeps 2 of the 3 GPUs, J never fits


def test_bad_capacity_is_refused_naming_service_and_type():
    with pytest.raises(InputError, match=r"service 'chat': capacity_per_gpu_per_h names GPU type 'b200'"):
        _problem(rates={"a100": 100, "b200": 300})
    with pytest.raises(InputError, match=r"capacity_per_gpu_per_h\['a100'\] = -1"):
        _problem(rates={"a100": -1})
    p = _problem()
    assert Problem.from_dict(p.to_dict()) == p


def test_simulator_serves_on_the_faster_type_and_counts_its_capacity():
    # the hand case in the simulator over 4 steps: chat (200 requests/h = 2 a100 GPUs) and J (both a100s,
    # 4 steps). The MILP keeps chat on the h100: J completes and every demand GPU-hour is served
    cluster = Cluster(n_gpus=0, step_minutes=30, horizon_steps=4,
                      nodes=(Node("a1", 2, "a100"), Node("h1", 1, "h100")))
    sc = Scenario(name="typed-capacity", seed=0, cluster=cluster, settings=_problem().settings, n_steps=5,
                  services=(SimService("chat", 0, 3, 1, 1, (2,) * 9, (2,) * 9,
                                       capacity_by_type=(("a100", 100.0), ("h100", 200.0))),),
                  jobs=(SimJob("J", "training", 1.0, 0, 2, 4, 4, gpu_types=("a100",)),))
    res = simulate(sc, planner_fn("milp"), name="milp", rt_margin_alpha=None)
    m = compute(res)
    assert m.jobs_completed == 1 and m.rt_sla_pct == 100.0 and m.rt_unmet_gpu_h == 0.0
    # steps 0-3: J on both a100s and chat on the h100 (1 GPU serving 2 demand GPUs); step 4 after J ends: chat
    # on 2 GPUs (h100 + a100, 3 demand GPUs for a demand of 2: 2 x 2/3 GPUs utilised)
    assert res.service_gpus["chat"] == [1, 1, 1, 1, 2] and res.service_served["chat"] == [2, 2, 2, 2, 3]
    assert m.utilization_pct == pytest.approx(100.0 * (2 * 4 + 4 + 2 * 2 / 3) / (3 * 5), abs=1e-4)
    base = compute(simulate(sc, planner_fn("priority"), name="priority", rt_margin_alpha=None))
    assert base.jobs_completed == 0  # priority backfill reserves 2 GPUs (its count on the slowest type)
