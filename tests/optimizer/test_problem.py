"""Problem validation: every refusal names the job/service and the field; C21/C22 helpers."""

from __future__ import annotations

import copy
import json

import pytest

from domain.units import hours_to_steps
from optimizer.errors import InputError
from optimizer.plan import JobAssignment, Plan
from optimizer.problem import (
    Problem,
    round_up_pow2,
    split_valid_jobs,
)

BASE = {
    "cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 8},
    "settings": {"decay_per_step": 0.995, "penalty_ratio": 8, "time_limit_s": 30, "mip_rel_gap": 0.001},
    "services": [
        {"service": "chat", "demand_gpus": [6, 6, 2, 2, 2, 2, 6, 6], "min_gpus": 0, "max_gpus": 8,
         "swap_cap_gpus": 4, "current_gpus": 6}
    ],
    "jobs": [{"job_id": "A", "kind": "training", "priority": 1, "release_step": 0, "gpus": 4, "duration_steps": 4}],
    "running": [{"job_id": "R", "kind": "quantization", "priority": 2, "gpus": 4, "block_offset": 0,
                 "remaining_steps": 2}],
}


def _bad(mutate, *fragments):
    d = copy.deepcopy(BASE)
    mutate(d)
    with pytest.raises(InputError) as ei:
        Problem.from_dict(d)
    msg = str(ei.value)
    for f in fragments:
        assert f in msg, msg
    return msg


def test_round_trip_json():
    p = Problem.from_dict(BASE)
    assert Problem.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert p.jobs[0].sizes[0].gpus == 4 and p.running[0].planned_steps == 2
    assert p.unmet_penalty() == 16.0  # kappa 8 * max priority 2


def test_sizes_option_round_trip():
    d = copy.deepcopy(BASE)
    d["jobs"][0] = {"job_id": "A", "kind": "training", "priority": 1,
                    "sizes": [{"gpus": 4, "duration_steps": 4}, {"gpus": 8, "duration_steps": 2, "efficiency": 0.9}]}
    p = Problem.from_dict(d)
    assert [(s.gpus, s.duration_steps, s.efficiency) for s in p.jobs[0].sizes] == [(4, 4, 1.0), (8, 2, 0.9)]
    assert Problem.from_dict(p.to_dict()) == p


def test_refusals_name_job_or_service_and_field():
    _bad(lambda d: d["jobs"][0].update(gpus=3), "job 'A'", "gpus", "power of two")
    _bad(lambda d: d["jobs"][0].update(gpus=16), "job 'A'", "requests 16 GPUs; cluster has 8")
    _bad(lambda d: d["jobs"][0].update(gpus=0), "job 'A'", "gpu_count must be >= 1")
    _bad(lambda d: d["jobs"][0].update(priority=0), "job 'A'", "priority")
    _bad(lambda d: d["jobs"][0].update(priority=-1), "job 'A'", "priority")
    _bad(lambda d: d["jobs"][0].update(duration_steps=0), "job 'A'", "duration_steps")
    _bad(lambda d: d["jobs"][0].update(kind="realtime"), "job 'A'", "kind")
    _bad(lambda d: d["jobs"][0].update(colour="red"), "job 'A'", "unknown key", "colour")
    _bad(lambda d: d["jobs"][0].update(sizes=[{"gpus": 4, "duration_steps": 1}]), "job 'A'", "either")
    _bad(lambda d: d["services"][0].update(demand_gpus=[1, 2]), "service 'chat'", "demand_gpus has 2", "8")
    _bad(lambda d: d["services"][0].update(min_gpus=9, max_gpus=9), "service 'chat'", "min_gpus")
    _bad(lambda d: d["services"][0].update(max_gpus=-1), "service 'chat'", "max_gpus")
    _bad(lambda d: d["services"][0].update(demand_gpus=[1, 2, 3, 4, 5, 6, 7, 1.5]), "service 'chat'", "demand_gpus[7]")
    _bad(lambda d: d["services"][0].update(extra=1), "service 'chat'", "unknown key", "extra")
    _bad(lambda d: d["running"][0].update(block_offset=2), "running job 'R'", "block_offset", "aligned")
    _bad(lambda d: d["running"][0].update(block_offset=8), "running job 'R'", "block_offset")
    _bad(lambda d: d["cluster"].update(n_gpus=12), "cluster", "n_gpus", "power of two")
    _bad(lambda d: d["settings"].update(penalty_ratio=3), "settings", "penalty_ratio")
    _bad(lambda d: d["settings"].update(bogus=3), "settings", "unknown key", "bogus")
    _bad(lambda d: d.update(extra=[]), "problem", "unknown key", "extra")
    _bad(lambda d: d["jobs"].append(dict(d["jobs"][0])), "job 'A'", "listed twice")
    _bad(lambda d: d.update(down_gpus=[8]), "down_gpus[0]")


def test_multi_node_blocks_disabled_refuses_spanning_job():
    d = copy.deepcopy(BASE)
    d["cluster"].update(n_gpus=16)
    d["settings"]["multi_node_blocks"] = False
    d["jobs"][0]["gpus"] = 16
    with pytest.raises(InputError, match="job 'A'.*more than one 8-GPU node"):
        Problem.from_dict(d)


def test_c21_oversized_and_zero_jobs_rejected_individually_others_kept():
    d = copy.deepcopy(BASE)
    d["cluster"] = {"n_gpus": 64, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 8}
    d["jobs"] += [
        {"job_id": "JA", "kind": "training", "priority": 1, "gpus": 96, "duration_steps": 2},
        {"job_id": "JB", "kind": "training", "priority": 1, "gpus": 0, "duration_steps": 2},
    ]
    with pytest.raises(InputError, match="requests 96 GPUs; cluster has 64"):
        Problem.from_dict(d)
    p, rejected = split_valid_jobs(d)
    assert [j.job_id for j in p.jobs] == ["A"]
    assert [r[0] for r in rejected] == ["JA", "JB"]
    assert "requests 96 GPUs; cluster has 64" in rejected[0][1]
    assert "gpu_count must be >= 1" in rejected[1][1]
    assert p.rejected_jobs == tuple(rejected)


def test_c21_durations_clip_to_one_step():
    assert hours_to_steps(-0.4, 30) == 1
    assert hours_to_steps(0.2, 30) == 1
    assert hours_to_steps(0.0, 30) == 1
    assert hours_to_steps(1.0, 30) == 2
    assert hours_to_steps(1.0000001, 30) == 2  # rounded to 1e-6 before ceil
    assert hours_to_steps(1.1, 30) == 3


@pytest.mark.parametrize(
    "x,expected", [(3, 4), (6, 8), (0.6, 1), (2.3, 4), (5.0, 8), (8.0000001, 8), (1, 1), (8, 8)]
)
def test_c22_round_up_pow2(x, expected):
    size, note = round_up_pow2(x, max_gpus=64, allow_multi_node=False, gpus_per_node=8)
    assert size == expected
    assert (note == "") == (float(x) == expected)
    if note:
        assert f"-> {expected} GPUs" in note


@pytest.mark.parametrize("x", [16.0, 9.0])
def test_c22_rejected_when_multi_node_disabled(x):
    with pytest.raises(InputError, match="multi-node blocks are disabled"):
        round_up_pow2(x, max_gpus=64, allow_multi_node=False, gpus_per_node=8)


def test_c22_edges():
    assert round_up_pow2(16.0, 64, allow_multi_node=True)[0] == 16
    with pytest.raises(InputError, match="cluster has 64"):
        round_up_pow2(65, 64, allow_multi_node=True)
    for x in (0, -2, 0.0000004):
        with pytest.raises(InputError, match="gpu_count must be >= 1"):
            round_up_pow2(x, 64)
    with pytest.raises(InputError, match="finite"):
        round_up_pow2(float("nan"), 64)


def test_plan_owner_grid_and_round_trip():
    plan = Plan(
        planner="fifo", status="heuristic",
        assignments=(JobAssignment("R", 0, 2, 0, 4, running=True), JobAssignment("A", 2, 6, 4, 4),
                     JobAssignment("Z", None, None, None, None)),
        service_gpus={"chat": (4,) * 8}, objective=1.5, bound=None, gap=None, solve_s=0.01, model=None,
        n_gpus=8, horizon_steps=8,
    )
    grid = plan.owner_grid()
    assert len(grid) == 8 and len(grid[0]) == 8
    assert grid[0][:4] == ["R"] * 4 and grid[2][:4] == [""] * 4
    assert grid[2][4:] == ["A"] * 4 and grid[6][4:] == [""] * 4
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert plan.job("A").start_step == 2
    with pytest.raises(KeyError, match="'Q'"):
        plan.job("Q")
    with pytest.raises(ValueError, match="status"):
        Plan("x", "done", (), {}, 0.0, None, None, 0.0, None)


def test_plan_status_and_source_apart_and_old_files_read():
    plan = Plan(planner="fifo", status="feasible", assignments=(), service_gpus={}, objective=0.0, bound=None,
                gap=None, solve_s=0.0, model=None)
    assert plan.source == "fifo" and not plan.fallback and not plan.proven_optimal
    doc = plan.to_dict()
    assert doc["status"] == "feasible" and doc["source"] == "fifo" and doc["fallback"] is False
    old = {"planner": "easy", "status": "heuristic", "objective": 1.0}
    assert (Plan.from_dict(old).status, Plan.from_dict(old).source) == ("feasible", "easy")
    old_fb = {"planner": "milp", "status": "fallback", "fallback": True, "objective": 1.0, "solver_status": "no_solution"}
    fb = Plan.from_dict(old_fb)
    assert fb.status == "no_solution" and fb.source == "fallback" and fb.fallback and not fb.proven_optimal
    assert Plan.from_dict(json.loads(json.dumps(fb.to_dict()))) == fb


def test_a_running_job_may_sit_on_down_gpus_it_drains_them():
    """Case 022 (Slurm drain): a running job on down GPUs keeps them until its planned end; they are not up, so
    only its up GPUs count as running (``up - running`` = the free GPUs at each step)."""
    from optimizer.capacity import fixed_occupancy, running_gpus_per_step, up_gpus

    d = {"cluster": {"n_gpus": 8, "gpus_per_node": 4, "step_minutes": 30, "horizon_steps": 4},
         "services": [], "jobs": [],
         "running": [{"job_id": "R", "kind": "training", "priority": 1.0, "gpus": 4, "block_offset": 4,
                      "remaining_steps": 2}],
         "down_gpus": [4, 5, 6, 7]}
    p = Problem.from_dict(d)
    assert p.down_gpus == (4, 5, 6, 7) and [r.job_id for r in p.running] == ["R"]
    assert up_gpus(p) == 4 and running_gpus_per_step(p).tolist() == [0, 0, 0, 0]
    assert fixed_occupancy(p)[:, 4:].all() and not fixed_occupancy(p)[:, :4].any()
