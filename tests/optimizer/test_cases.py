"""Failure cases C13, C14, C17, C19, C21, C22 (docs/cases.md) with their right values."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse

import optimizer.decomposition as decomposition
import optimizer.planners as planners
import optimizer.strategy as strategy
from optimizer.diagnose import InfeasibleProblemError, ModelTooLargeError, check_size, estimate_size
from optimizer.milp import build_model, plan_to_vector
from optimizer.plan import Plan
from optimizer.planners import best_baseline, plan
from optimizer.problem import (
    Cluster,
    Job,
    PlanSettings,
    Problem,
    RunningJob,
    Service,
    SizeOption,
    round_up_pow2,
    split_valid_jobs,
)
from optimizer.solver import OUTCOMES, SolveOutcome, SparseModel, map_status, mip_gap, solve
from optimizer.verify import verify

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"


def r64(time_limit_s: float = 30.0, n_jobs: int = 150, seed: int = 7, **settings) -> Problem:
    """Reference instance R64: 8 x 8 GPUs, 48 steps, batch sizes {1..32}, durations 1-12,
    3 elastic services with diurnal demand."""
    rng = np.random.default_rng(seed)
    sizes = (1, 2, 4, 8, 16, 32)
    jobs = tuple(
        Job(f"J{k:03d}", "training", float(rng.choice([1, 2, 3, 5])), int(rng.integers(0, 24)),
            (SizeOption(int(rng.choice(sizes, p=[.3, .25, .2, .15, .07, .03])), int(rng.integers(1, 13))),))
        for k in range(n_jobs)
    )
    t = np.arange(48)
    services = []
    for i, (lo, hi) in enumerate(((4, 16), (2, 10), (2, 6))):
        dem = tuple(int(v) for v in np.round(lo + (hi - lo) * (1 + np.cos(2 * np.pi * (t / 2 - 14 - i) / 24)) / 2))
        services.append(Service(f"svc{i}", dem, 0, 64, 4, dem[0]))
    st = PlanSettings(time_limit_s=time_limit_s, **settings)
    return Problem(Cluster(64, 8, 30, 48), st, tuple(services), jobs, ())


# ----------------------------------------------------------------------------- C13


def test_c13c_gap_is_a_fraction_for_min_and_max():
    assert mip_gap(1000.0, 950.0) == pytest.approx(0.05)  # minimise cost
    assert mip_gap(-1000.0, -950.0) == pytest.approx(0.05)  # same model, maximise -cost
    assert mip_gap(2963.335, 2963.335) == 0.0
    assert mip_gap(None, 1.0) is None and mip_gap(1.0, float("inf")) is None


def test_c13ab_time_limit_with_and_without_incumbent_through_the_wrapper():
    p = r64(n_jobs=40)  # R64 with 40 of its 150 jobs: the full model still takes far over 1 ms
    bm = build_model(p)
    start = plan_to_vector(bm, best_baseline(p))
    assert start is not None
    with_inc = solve(bm.model, time_limit_s=0.001, start=start)
    assert with_inc.status == "time_limit"
    assert with_inc.x is not None and with_inc.objective == pytest.approx(float(bm.model.cost @ start), rel=1e-9)
    assert "not proven optimal" in with_inc.message
    without = solve(bm.model, time_limit_s=0.001)
    assert without.status == "no_solution" and without.x is None and without.objective is None
    assert "0.001 s" in without.message and "without a feasible allocation" in without.message


def test_c13a_planner_time_limit_returns_verified_incumbent_marked_not_optimal():
    p = r64(time_limit_s=0.01, n_jobs=40, milp_method="full")
    r = plan(p, "milp")
    assert r.status == "time_limit" or r.fallback  # either way: verified, never claimed optimal
    assert not r.proven_optimal and verify(r, p) == []
    assert r.objective >= best_baseline(p).objective - 1e-9


def test_c13b_no_incumbent_falls_back_to_best_baseline(monkeypatch):
    p = Problem.from_dict(json.loads((EXAMPLES / "valley.json").read_text()))

    def no_solution(*a, **k):
        return SolveOutcome("no_solution", "kTimeLimit", None, None, None, 0.001,
                            message="stopped at the time limit of 0.001 s without a feasible allocation")

    monkeypatch.setattr(strategy, "solve", no_solution)  # master and full model
    monkeypatch.setattr(decomposition, "solve", no_solution)  # the LP relaxation too: no bound either
    r = plan(p, "milp")
    assert r.status == "no_solution" and r.source == "fallback" and r.fallback and r.planner == "milp" and r.solver_status == "no_solution"
    assert "no_solution" in r.message and "0.001 s" in r.message and "best baseline" in r.message
    assert verify(r, p) == [] and r.bound is None and r.gap is None


# ----------------------------------------------------------------------------- C14


def test_c14a_hard_demand_above_capacity_named_before_solving():
    p = r64(n_jobs=10)
    # three services totalling 72 GPUs at step 18 (and at most 60 elsewhere)
    dem = [[20] * 48, [20] * 48, [20] * 48]
    for i, v in enumerate((30, 24, 18)):
        dem[i][18] = v
    services = tuple(Service(f"svc{i}", tuple(d), 0, 64, 64, d[0]) for i, d in enumerate(dem))
    hard = replace(p, services=services, settings=replace(p.settings, demand_hard=True))
    with pytest.raises(InfeasibleProblemError) as ei:
        plan(hard, "milp")
    msg = str(ei.value)
    assert "step 18" in msg and "72 > 64" in msg and "shortfall 8" in msg and "capacity 64" in msg
    # soft demand: not infeasible; the plan is made and the shortfall is noted, 8 GPUs unmet
    soft = replace(hard, settings=replace(hard.settings, demand_hard=False, mip_rel_gap=0.01))
    r = plan(soft, "fifo")
    assert any("step 18: 72 > 64" in n for n in r.notes)
    unmet18 = sum(max(0, s.demand_gpus[18] - r.service_gpus[s.service][18]) for s in soft.services)
    assert unmet18 >= 8


def test_c14a_minimums_plus_running_jobs_exceed_cluster():
    p = Problem(Cluster(8, 8, 30, 4), PlanSettings(), (Service("chat", (2, 2, 2, 2), 6, 8, 8, 6),), (),
                (RunningJob("R", "training", 1.0, 4, 0, 3),))
    with pytest.raises(InfeasibleProblemError, match=r"real-time minimums plus running jobs exceed the cluster at "
                                                     r"step 0: 10 > 8 \(real-time 6, running 4"):
        plan(p, "fifo")


def test_c14_unreachable_band_names_service_and_step():
    p = Problem(Cluster(8, 8, 30, 4), PlanSettings(), (Service("chat", (2, 2, 2, 2), 6, 8, 1, 2),), ())
    with pytest.raises(InfeasibleProblemError, match=r"service 'chat'.*step 0: needs at least 6 GPUs but at most 3"):
        plan(p, "milp")


def test_c14b_unbounded_or_infeasible_is_not_infeasible():
    m = SparseModel(np.array([-1.0]), np.array([0.0]), np.array([np.inf]), np.array([True]),
                    sparse.csc_matrix((0, 1)), np.zeros(0), np.zeros(0), maximize=False)
    out = solve(m)
    assert out.status == "unbounded_or_infeasible"
    assert out.x is None and "modelling error" in out.message


def test_c14c_infeasible_toy():
    m = SparseModel(np.array([1.0]), np.array([0.0]), np.array([10.0]), np.array([True]),
                    sparse.csc_matrix(np.array([[1.0], [1.0]])), np.array([2.0, -np.inf]), np.array([np.inf, 1.0]),
                    maximize=False)
    assert solve(m).status == "infeasible"


def test_c14_every_highs_status_maps_to_a_distinct_outcome_and_unknown_never_crashes():
    import highspy

    seen = {}
    for name in highspy.HighsModelStatus.__members__:
        seen[name] = map_status(name, has_incumbent=True)
        assert seen[name] in OUTCOMES
    assert seen["kInfeasible"] == "infeasible"
    assert seen["kUnboundedOrInfeasible"] == "unbounded_or_infeasible"
    assert seen["kUnbounded"] == "unbounded"
    assert seen["kTimeLimit"] == "time_limit" and map_status("kTimeLimit", False) == "no_solution"
    assert seen["kSolveError"] == "solver_error" and seen["kOptimal"] == "optimal"
    assert map_status("kSomethingNew", True) == "unknown"
    assert map_status("HighsModelStatus.kNotset", False) == "unknown"


# ----------------------------------------------------------------------------- C17


def test_c17a_oversized_model_refused_with_estimate_and_suggestion():
    jobs = tuple(Job(f"J{k}", "batch_inference", float(k + 1), 0, (SizeOption(1, 1 + k % 12),)) for k in range(600))
    p = Problem(Cluster(512, 8, 30, 168), PlanSettings(milp_method="full"), (), jobs, ())
    est = estimate_size(p)
    assert est.binaries == 600 * 168 * 512 == 51_609_600
    # the master: 600 groups (distinct priorities) x 168 starts x (start count + running count)
    assert est.master_cols == 600 * 168 * 2 == 201_600
    with pytest.raises(ModelTooLargeError) as ei:
        plan(p, "milp")
    msg = str(ei.value)
    assert "51,609,600" in msg and "2,000,000" in msg and "milp_method 'decomposed'" in msg
    assert "shorter horizon" in msg and "coarser" in msg
    # the default decomposed path is refused for its own master, with advice for that master
    with pytest.raises(ModelTooLargeError) as ei:
        plan(replace(p, settings=PlanSettings()), "milp")
    msg = str(ei.value)
    assert "master would have about 201,600 columns" in msg and "max_binaries" not in msg
    assert "horizon_steps of at most 125" in msg


def test_c17a_limit_is_configurable_and_counts_pruned_blocks():
    jobs = (Job("A", "training", 1.0, 2, (SizeOption(4, 2), SizeOption(8, 1, 0.9))),)
    p = Problem(Cluster(16, 8, 30, 10), PlanSettings(max_binaries=23, milp_method="full"), (), jobs, (),
                down_gpus=(0,))
    # size 4: blocks 1..3 (block 0 has a down GPU) x starts 2..9 = 24; size 8: 1 block x 8 = 8
    assert estimate_size(p).binaries == 32
    with pytest.raises(ModelTooLargeError, match="about 32 start binaries"):
        check_size(p)
    # max_binaries is about the full model: the decomposed path (default) does not build it first
    check_size(replace(p, settings=PlanSettings(max_binaries=23)))


def test_issue17_default_path_judged_on_its_master_not_the_full_model():
    """1,024 GPUs, 48 steps, 400 jobs of 8 GPUs x 4 steps released at 0 with distinct priorities.
    Full model: 400 x 48 starts x 128 aligned blocks = 2,457,600 start binaries (> 2,000,000).
    Master: 400 x 48 start counts + 400 x 48 running counts (span 0..min(47 + 4, 48)) = 38,400
    columns, nonzeros 400 x 48 x (4 + 1 + 1 block level + 1) = 134,400; both under the limits."""
    jobs = tuple(Job(f"J{k:03d}", "training", 1.0 + k, 0, (SizeOption(8, 4),)) for k in range(400))
    p = Problem(Cluster(1024, 8, 30, 48), PlanSettings(), (), jobs, ())
    est = check_size(p)  # no error: the decomposed master is what gets built
    assert est.binaries == 2_457_600
    assert est.master_cols == 38_400 and est.master_nonzeros == 134_400
    with pytest.raises(ModelTooLargeError) as ei:
        check_size(replace(p, settings=PlanSettings(milp_method="full")))
    msg = str(ei.value)
    assert "about 2,457,600 start binaries" in msg and "milp_method 'decomposed' (its master would have about 38,400" in msg


def _rss_kb() -> int:
    with open(f"/proc/{os.getpid()}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_c17b_repeated_solves_do_not_grow_memory():
    from optimizer.examples import random_problem

    p = random_problem(16, 8, 12, seed=3, settings=PlanSettings(threads=1, mip_rel_gap=0.0))
    rss = []
    for _ in range(25):
        plan(p, "milp")
        rss.append(_rss_kb())
    assert rss[-1] <= 1.2 * rss[4] + 2048  # KiB: fresh Highs per solve, references dropped


# ----------------------------------------------------------------------------- C19


def c19(max_wait: int | None = 6, small_priority: float = 1.0, method: str = "decomposed") -> Problem:
    """8-GPU node; 4 running 1-GPU jobs with 2 steps left; L (8 GPUs, 6 steps) queued at 0; four
    1-GPU 2-step jobs arriving at every step 0-23; maximum wait 6."""
    running = tuple(RunningJob(f"R{i}", "training", 1.0, 1, i, 2) for i in range(4))
    jobs = [Job("L", "training", 1.0, 0, (SizeOption(8, 6),))]
    jobs += [Job(f"s{t:02d}_{k}", "batch_inference", small_priority, t, (SizeOption(1, 2),))
             for t in range(24) for k in range(4)]
    st = PlanSettings(max_wait_steps=max_wait, mip_rel_gap=0.0, milp_method=method)
    return Problem(Cluster(8, 8, 30, 24), st, (), tuple(jobs), running)


@pytest.mark.parametrize("method", ["decomposed", "full"])
def test_c19_large_job_starts_at_2_and_no_small_job_runs_2_to_7(method):
    p = c19(method=method)
    r = plan(p, "milp")
    a = r.job("L")
    assert (a.start_step, a.end_step, a.block_offset) == (2, 8, 0)
    grid = r.owner_grid()
    assert {grid[t][g] for t in range(2, 8) for g in range(8)} == {"L"}
    assert verify(r, p) == []


def test_c19_max_wait_prevents_starvation_by_higher_priority_small_jobs():
    """With small jobs worth more per GPU-step, the unconstrained MILP starts L only at the end of
    the horizon, if at all: the small jobs saturate the 8 GPUs to the last step (24 x 8 GPU-steps
    offered against 184 free), so a start of L at t <= 20 displaces at least 4 in-horizon steps x 8
    GPUs of priority-2 work (>= 64) for its 48 (priority 1 x 8 GPUs x 6 steps, valued whole since
    the terminal value, DESIGN §5); only a start from step 21 on, whose run lies mostly beyond the
    horizon, can pay. With max_wait 6 L is reserved from step 6 (EASY's reservation, DESIGN §5): small jobs
    started from then on may run only where L has no room, so L starts by step 7 at the latest
    (2-step jobs started before step 6 end by then); the optimum starts it at step 6."""
    free = plan(c19(max_wait=None, small_priority=2.0), "milp")
    assert free.job("L").start_step is None or free.job("L").start_step >= 21
    guarded = plan(c19(max_wait=6, small_priority=2.0), "milp")
    assert guarded.job("L").start_step is not None and guarded.job("L").start_step <= 6
    assert guarded.objective <= free.objective  # the guard costs value, as it should


# ----------------------------------------------------------------------------- C21 / C22


def test_c21_job_larger_than_cluster_rejected_others_planned():
    d = {
        "cluster": {"n_gpus": 64, "gpus_per_node": 8, "horizon_steps": 8},
        "services": [],
        "jobs": [
            {"job_id": "A", "kind": "training", "priority": 1, "gpus": 96, "duration_steps": 2},
            {"job_id": "B", "kind": "training", "priority": 1, "gpus": 0, "duration_steps": 2},
            {"job_id": "C", "kind": "quantization", "priority": 2, "gpus": 8, "duration_steps": 3},
        ],
    }
    p, rejected = split_valid_jobs(d)
    assert dict(rejected)["A"].endswith("requests 96 GPUs; cluster has 64 (gpus)")
    assert "gpu_count must be >= 1" in dict(rejected)["B"]
    r = plan(p, "milp")
    assert r.job("C").start_step == 0 and r.job("C").gpus == 8
    assert any("rejected job 'A'" in n and "requests 96 GPUs; cluster has 64" in n for n in r.notes)
    with pytest.raises(KeyError):
        r.job("A")


def test_c22_rounded_requests_give_only_aligned_power_of_two_blocks():
    requests = [3, 6, 0.6, 2.3, 5.0, 8.0000001]
    sizes = [round_up_pow2(x, 64, allow_multi_node=False, gpus_per_node=8)[0] for x in requests]
    assert sizes == [4, 8, 1, 4, 8, 8]
    jobs = tuple(Job(f"J{k}", "training", 1.0, 0, (SizeOption(s, 2),)) for k, s in enumerate(sizes))
    p = Problem(Cluster(16, 8, 30, 6), PlanSettings(multi_node_blocks=False), (), jobs, ())
    for planner in planners.PLANNERS:
        r = plan(p, planner)
        for a in r.assignments:
            if a.started:
                assert a.gpus in (1, 2, 4, 8) and a.block_offset % a.gpus == 0
                assert a.block_offset // 8 == (a.block_offset + a.gpus - 1) // 8  # one node


def test_plan_json_round_trip_of_a_real_plan():
    p = c19(max_wait=None)
    r = plan(p, "easy")
    assert Plan.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_unpackable_master_solution_falls_through_to_the_full_model(monkeypatch):
    """If the master's starts cannot be packed into aligned blocks, the full model decides."""
    monkeypatch.setattr(strategy, "pack_offsets", lambda *a, **k: None)
    p = Problem.from_dict(json.loads((EXAMPLES / "valley.json").read_text()))
    r = plan(p, "milp")
    assert r.status == "optimal" and r.model["method"] == "full"
    assert r.job("A").start_step == 2 and any("solved the full model instead" in n for n in r.notes)


def test_unpackable_master_above_the_full_model_size_keeps_the_best_verified_placement(monkeypatch):
    """Above full_model_max_binaries the full model is not built: the master-guided placement
    (or a better warm start) is kept, marked not proven optimal, under the master's bound."""
    monkeypatch.setattr(strategy, "pack_offsets", lambda *a, **k: None)
    monkeypatch.setattr(strategy, "build_model", lambda *a, **k: pytest.fail("the full model was built"))
    p = Problem.from_dict(json.loads((EXAMPLES / "valley.json").read_text()))
    p = replace(p, settings=replace(p.settings, full_model_max_binaries=0))
    r = plan(p, "milp")
    assert r.status == "time_limit" and r.model["method"] == "decomposed" and not r.fallback
    assert not verify(r, p)
    # the master-guided repair starts the 4-GPU job A at step 2 (the valley) like the exact plan
    assert r.job("A").start_step == 2
    g = p.settings.decay_per_step  # A: 4 GPUs on steps 2-5 (hand-derived, as in test_valley)
    assert r.objective == pytest.approx(4 * sum(g**t for t in range(2, 6)))
    assert r.bound >= r.objective - 1e-9 and r.gap == pytest.approx(mip_gap(r.objective, r.bound))
    assert any("full_model_max_binaries=0" in n for n in r.notes)


def test_repair_path_keeps_max_wait_and_never_reports_a_bound_below_its_plan(monkeypatch):
    """C19 with small jobs worth more: a warm start that starves L (the greedy plans; the verifier
    rejects them under max_wait_steps, and the master does not admit them) must not be kept by the
    repair path; the kept plan starts L by step 6, and its objective is within the master's bound."""
    monkeypatch.setattr(strategy, "pack_offsets", lambda *a, **k: None)
    p = c19(max_wait=6, small_priority=2.0)
    p = replace(p, settings=replace(p.settings, full_model_max_binaries=0))
    r = plan(p, "milp")
    assert r.job("L").start_step is not None and r.job("L").start_step <= 6
    assert r.bound is not None and r.objective <= r.bound * (1 + 1e-6)
    exact = plan(c19(max_wait=6, small_priority=2.0), "milp")
    assert r.objective <= exact.objective + 1e-9


def test_changing_thread_count_between_solves_still_solves():
    """HiGHS sizes one global scheduler per process; a solve with another ``threads`` value must
    not come back unsolved (it did: model status kNotset)."""
    m = SparseModel(np.array([1.0, 1.0]), np.zeros(2), np.array([3.0, 3.0]), np.array([True, True]),
                    sparse.csc_matrix(np.array([[1.0, 2.0]])), np.array([-np.inf]), np.array([4.0]))
    for threads in (1, 2, 1, 2):
        out = solve(m, threads=threads)
        assert out.status == "optimal" and out.objective == pytest.approx(3.0)  # max x0 + x1, x0 + 2 x1 <= 4, x <= 3
