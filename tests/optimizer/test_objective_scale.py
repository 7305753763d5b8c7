"""Case F01 (HiGHS #1100, PR #2577): objective coefficients must not carry the priorities' units.

The §5 objective is homogeneous in priority (the unmet-demand penalty is ``κ · max p``), so the
model is built in units of the largest priority: any common factor on the priorities gives the
same model, the same plan, and an objective (and bound) multiplied by that factor. Priorities
outside ``[1e-300, 1e300]``, more than a factor 1e6 apart, or so large that the objective would
overflow are refused with one line naming the job and ``priority``.

Field instances (``/work/shared/cases/field-2``): ``data/examples/valley.json`` with job A's
priority set to 1e-300, 1e-9 and 1e308. Hand-derived plan for any priority p (test_valley.py):
A (4 GPUs, 4 steps) on steps 2..5, service chat at its demand [6,6,2,2,2,2,6,6], objective
``p · 4 · (γ^2 + γ^3 + γ^4 + γ^5) = p · 15.721992514987502``.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from optimizer.decomposition import build_count_model
from optimizer.errors import InputError
from optimizer.examples import random_problem
from optimizer.milp import build_model
from optimizer.objective import objective_value, unmet_gpu_steps
from optimizer.planners import plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption
from optimizer.verify import verify

ROOT = Path(__file__).resolve().parents[2]
FIELD = Path("/work/shared/cases/field-2")
VALLEY = ROOT / "data" / "examples" / "valley.json"
VALLEY_OBJECTIVE_P1 = 4 * sum(0.995**t for t in range(2, 6))  # 15.721992514987502
SCALES = (1e-299, 1e-150, 1e-9, 1.0, 1e9, 1e150, 1e300)  # largest priority of the scaled problem


def valley(priority: float, **settings) -> Problem:
    """valley.json with job A's priority replaced (what the field files are)."""
    d = json.loads(VALLEY.read_text())
    d["jobs"][0]["priority"] = priority
    d["settings"].update(settings)
    return Problem.from_dict(d)


def coefficient_range(cost: np.ndarray) -> float:
    """max |c| / min |c| over the nonzero objective coefficients of a built model."""
    c = np.abs(np.asarray(cost, dtype=np.float64))
    c = c[c > 0]
    return float(c.max() / c.min())


def scaled(p: Problem, factor: float) -> Problem:
    """``p`` with every queued and running priority multiplied by ``factor``."""
    return replace(p, jobs=tuple(replace(j, priority=j.priority * factor) for j in p.jobs),
                   running=tuple(replace(r, priority=r.priority * factor) for r in p.running))


def test_field_files_are_valley_with_only_the_priority_changed():
    base = json.loads(VALLEY.read_text())
    for name, prio in (("valley_prio_1e-300.json", 1e-300), ("valley_prio_1e-9.json", 1e-9),
                       ("valley_prio_1e308.json", 1e308)):
        d = json.loads((FIELD / name).read_text())
        assert d["jobs"][0]["priority"] == prio
        d["jobs"][0]["priority"] = 1
        assert d == base, name


@pytest.mark.parametrize("method", ["decomposed", "full"])
@pytest.mark.parametrize("name,prio", [("valley_prio_1e-300.json", 1e-300), ("valley_prio_1e-9.json", 1e-9)])
def test_field_valley_tiny_priorities_give_the_priority_1_plan(name, prio, method):
    """Before: 1e-300 gave "optimal" with A unstarted and chat cut to [2,0,0,0,0,2,0,2] (unmet
    demand on an idle cluster); 1e-9 fell back to FIFO (A unstarted, chat held at 6)."""
    d = json.loads((FIELD / name).read_text())
    d["settings"].update(mip_rel_gap=0.0, milp_method=method)
    p = Problem.from_dict(d)
    r = plan(p, "milp")
    a = r.job("A")
    assert r.status == "optimal" and not r.fallback
    assert (a.start_step, a.end_step, a.gpus) == (2, 6, 4) and a.block_offset in (0, 4)
    assert r.service_gpus["chat"] == (6, 6, 2, 2, 2, 2, 6, 6)
    assert unmet_gpu_steps(r, p) == 0.0
    assert math.isfinite(r.objective) and r.objective > 0
    assert r.objective == objective_value(r, p)  # reported in the user's units, by objective.py
    assert r.objective == pytest.approx(prio * VALLEY_OBJECTIVE_P1, rel=1e-12)
    assert r.bound == pytest.approx(r.objective, rel=1e-6) and r.gap == pytest.approx(0.0, abs=1e-6)
    assert verify(r, p) == []


def test_field_valley_1e308_is_refused_in_one_line():
    """Before: "objective nan" (w = 8e308 = inf; HiGHS returned kUnknown). 15.7 × 1e308 is not a
    float, so no plan could report its objective: the priority is refused, naming the job, the
    field and the supported range."""
    with pytest.raises(InputError) as e:
        Problem.from_dict(json.loads((FIELD / "valley_prio_1e308.json").read_text()))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("job 'A': priority = 1e+308 is outside the supported range [1e-300, 1e+300]")


@pytest.mark.parametrize("top", SCALES)
def test_built_models_do_not_depend_on_the_priorities_units(top):
    """valley and a 30-job random problem (priorities 1-5, a diurnal service, 2 running jobs) with
    the priorities rescaled so the largest is 1e-299 .. 1e300: the full model's and the master's
    objective coefficients are those of the unscaled model, and their range max|c| / min|c|
    stays below 1e6 (measured: 4.1 on valley, 260 on the random problem)."""
    for base, want in ((valley(1.0), 4.2), (random_problem(16, 30, 24, seed=5), 1e6)):
        p = scaled(base, top / base.max_priority())
        assert p.max_priority() == pytest.approx(top, rel=1e-15)
        for build in (lambda q: build_model(q).model.cost, lambda q: build_count_model(q).model.cost):
            cost, ref = build(p), build(base)
            np.testing.assert_allclose(cost, ref, rtol=1e-12, atol=0.0)
            assert coefficient_range(cost) < want
        assert build_model(p).objective_scale == pytest.approx(top, rel=1e-15)


def test_valley_coefficients_hand_derived_at_priority_1e_minus_9():
    """The range bound above is not vacuous: at priority 1e-9 valley's coefficients are, in units of
    the largest priority, A's rewards 4 · Σγ^τ over its whole 4-step run (largest at start 0: 15.88;
    smallest at start 7, run valued past the horizon (terminal value): 4 γ^7 Σ_{0..3} γ^τ = 15.34)
    and w = κ = 8, now the smallest magnitude: range 15.88 / 8; unnormalised they were 1e-9 times
    that, below HiGHS's 1e-7 reduced-cost tolerance."""
    g = 0.995
    cost = build_model(valley(1e-9)).model.cost
    assert np.abs(cost).max() == pytest.approx(4 * sum(g**t for t in range(4)), rel=1e-12)
    assert np.abs(cost[cost > 0]).min() == pytest.approx(4 * g**7 * sum(g**t for t in range(4)), rel=1e-12)
    assert coefficient_range(cost) == pytest.approx(4 * sum(g**t for t in range(4)) / 8.0, rel=1e-12)
    assert sorted(set(np.round(cost[cost < 0], 12))) == [-8.0]  # w / P = κ on every unmet-demand column


@pytest.mark.parametrize("factor", [1e-200, 1e-12, 1e12, 1e200])
def test_random_problem_plan_is_invariant_to_a_common_priority_factor(factor):
    """Constructed instance: 8 jobs on 8 GPUs with a diurnal service; any common factor on the
    priorities gives the same starts and service GPUs, and an objective times that factor."""
    st = PlanSettings(mip_rel_gap=0.0, threads=1, time_limit_s=60)
    base = random_problem(8, 8, 12, seed=11, settings=st, max_duration_steps=4)
    ref = plan(base, "milp")
    r = plan(scaled(base, factor), "milp")
    assert r.status == ref.status == "optimal" and not r.fallback
    assert [(a.job_id, a.start_step, a.gpus) for a in r.assignments] == \
        [(a.job_id, a.start_step, a.gpus) for a in ref.assignments]
    assert r.service_gpus == ref.service_gpus
    assert r.objective == pytest.approx(ref.objective * factor, rel=1e-9)
    assert r.objective == objective_value(r, scaled(base, factor))
    assert r.bound == pytest.approx(ref.bound * factor, rel=1e-6)


def _two_jobs(p_a: float, p_b: float, running_p: float | None = None) -> Problem:
    jobs = (Job("A", "training", p_a, 0, (SizeOption(2, 2),)), Job("B", "training", p_b, 0, (SizeOption(2, 2),)))
    running = (RunningJob("R", "training", running_p, 2, 4, 1),) if running_p is not None else ()
    return Problem(Cluster(8, 8, 30, 4), PlanSettings(), (), jobs, running)


def test_priorities_more_than_1e6_apart_are_refused_naming_the_low_job():
    """Constructed: A at 1, B at 1e-7 (B's reward per GPU-step, 1e-7 of w/8, sits at HiGHS's
    reduced-cost tolerance). At 1e-6 apart it is accepted and B is planned."""
    with pytest.raises(InputError) as e:
        _two_jobs(1.0, 1e-7)
    assert str(e.value) == ("job 'B': priority = 1e-07 is more than 1e+06 times below the largest priority 1 "
                            "(job 'A'); priorities must lie within a factor 1e+06 of each other (DESIGN §5)")
    p = _two_jobs(1.0, 1e-6)
    r = plan(p, "milp")
    assert r.job("A").start_step == 0 and r.job("B").start_step == 0  # 8 idle GPUs: both start at once
    assert r.objective == pytest.approx((1.0 + 1e-6) * 2 * (1 + 0.995), rel=1e-12)


def test_a_running_job_counts_for_the_spread():
    """A running job's priority sets w = κ · max p, so it counts: running R at 1e7 with queued jobs at 1."""
    with pytest.raises(InputError) as e:
        _two_jobs(1.0, 2.0, running_p=1e7)
    assert str(e.value).startswith("job 'A': priority = 1 is more than 1e+06 times below the largest priority "
                                   "1e+07 (job 'R')")


def test_objective_that_would_overflow_is_refused():
    """Constructed: priority 1e300 (in range) on a problem whose objective can reach 1e300 x (8 x 4
    GPU-steps + 8 x 1e7 unmet GPU-steps) > 1e306: refused naming the job and the largest usable priority."""
    svc = Service("chat", (10**7, 0, 0, 0), 0, 8, 8, 0)
    jobs = (Job("A", "training", 1e300, 0, (SizeOption(2, 2),)),)
    with pytest.raises(InputError) as e:
        Problem(Cluster(8, 8, 30, 4), PlanSettings(), (svc,), jobs, ())
    assert str(e.value).startswith("job 'A': priority = 1e+300 is too large for this problem: the objective can "
                                   "reach priority x 8e+07 GPU-steps, above 1e+306; priorities here must be at "
                                   "most 1.25e+298")
    Problem(Cluster(8, 8, 30, 4), PlanSettings(), (svc,), (replace(jobs[0], priority=1e298),), ())  # accepted


def test_simulator_aging_keeps_tiny_priorities_positive():
    """The simulator's age factor (case C19 adapter) was rounded in priority units: 1e-9 after 3
    waited steps (W = 6) became round(1.43e-9, 6) = 0, which validation refuses. The factor is
    rounded instead: 1e-9 x 1.428571."""
    from optimizer.simulate import aged_priority

    assert aged_priority(1e-9, 3, 6) == pytest.approx(1.428571e-9, rel=1e-15)
    assert aged_priority(1.0, 3, 6) == 1.428571 and aged_priority(2.0, 0, 6) == 2.0
    assert aged_priority(1e-9, 3, None) == 1e-9
