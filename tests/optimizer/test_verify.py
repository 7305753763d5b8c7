"""The independent verifier names each kind of violation (one hand-made plan per rule)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption
from optimizer.verify import verify

P = Problem(
    Cluster(8, 4, 30, 6),
    PlanSettings(multi_node_blocks=True),
    (Service("chat", (2, 2, 2, 2, 2, 2), 1, 4, 1, 2),),
    (
        Job("A", "training", 1.0, 1, (SizeOption(4, 2), SizeOption(2, 3, 0.9))),
        Job("B", "quantization", 2.0, 0, (SizeOption(2, 2),)),
    ),
    (RunningJob("R", "training", 1.0, 2, 0, 2),),
    down_gpus=(7,),
)


def good(**changes) -> Plan:
    """R on GPUs 0-1 for steps 0-1, B on 2-3 for steps 0-1, A on 0-3 for steps 2-3; chat holds 2."""
    a = {
        "R": JobAssignment("R", 0, 2, 0, 2, running=True),
        "A": JobAssignment("A", 2, 4, 0, 4),
        "B": JobAssignment("B", 0, 2, 2, 2),
    }
    a.update(changes.pop("assign", {}))
    base = Plan("test", "heuristic", tuple(a.values()), {"chat": (2,) * 6}, 0.0, None, None, 0.0, None,
                n_gpus=8, horizon_steps=6)
    return replace(base, **changes)


def _one(plan: Plan, *fragments: str, problem: Problem = P) -> None:
    v = verify(plan, problem)
    assert v, "expected a violation"
    text = " | ".join(v)
    for f in fragments:
        assert f in text, text


def test_valid_plan_has_no_violations():
    assert verify(good(), P) == []


def test_one_task_per_gpu():
    _one(good(assign={"B": JobAssignment("B", 1, 3, 2, 2), "A": JobAssignment("A", 2, 4, 0, 4)}),
         "GPU 2 used by both", "one task per GPU")


def test_gpu_count_with_real_time():
    _one(good(service_gpus={"chat": (3, 4, 4, 4, 4, 4)}), "exceed the 7 GPUs up")


def test_band_swap_cap_and_hard_demand():
    _one(good(service_gpus={"chat": (2, 0, 1, 1, 1, 1)}), "outside its band [1, 4]")
    _one(good(service_gpus={"chat": (2, 4, 4, 4, 4, 4)}), "changes 2 -> 4 GPUs, swap cap is 1")
    hard = replace(P, settings=replace(P.settings, demand_hard=True))
    _one(good(service_gpus={"chat": (1, 1, 1, 1, 1, 1)}), "below hard demand 2", problem=hard)
    _one(good(service_gpus={}), "service 'chat': missing")
    _one(good(service_gpus={"chat": (2,) * 5}), "5 steps of GPUs, horizon is 6")


def test_blocks_sizes_alignment_release_duration():
    _one(good(assign={"A": JobAssignment("A", 2, 4, 2, 4)}), "block_offset 2 not aligned to its size 4")
    _one(good(assign={"A": JobAssignment("A", 2, 4, 0, 8)}), "8 GPUs is not one of its sizes [4, 2]")
    _one(good(assign={"A": JobAssignment("A", 0, 2, 4, 4)}), "before its release step 1")
    _one(good(assign={"A": JobAssignment("A", 2, 3, 0, 4)}), "runs 1 steps on 4 GPUs, its duration is 2")
    _one(good(assign={"A": JobAssignment("A", 2, 5, 2, 3)}), "3 GPUs is not one of its sizes")
    _one(good(assign={"A": JobAssignment("A", 6, 8, 0, 4)}), "outside the horizon")
    _one(good(assign={"A": JobAssignment("A", 2, 4, 4, 4)}), "uses down GPU(s) [7]")
    _one(good(assign={"A": JobAssignment("A", None, 4, None, None)}), "not started but")
    # the second size option with its own duration is fine
    assert verify(good(assign={"A": JobAssignment("A", 2, 5, 4, 2)}), P) == []


def test_running_job_stays_and_job_lists_are_complete():
    _one(good(assign={"R": JobAssignment("R", 0, 2, 2, 2, running=True)}), "running job 'R': moved or stopped")
    _one(good(assign={"R": JobAssignment("R", 0, 1, 0, 2, running=True)}), "running job 'R': moved or stopped")
    plan = good()
    _one(replace(plan, assignments=plan.assignments[:2]), "job 'B': missing from the plan")
    _one(replace(plan, assignments=plan.assignments + (JobAssignment("Z", None, None, None, None),)),
         "job 'Z': not in the problem")
    _one(replace(plan, assignments=plan.assignments + (plan.assignments[2],)), "job 'B': listed 2 times")


@pytest.mark.parametrize("remaining", [0, -3])
def test_running_job_with_remaining_below_1_is_planned_for_1_step(remaining):
    p = replace(P, running=(RunningJob("R", "training", 1.0, 2, 0, remaining),))
    assert verify(good(assign={"R": JobAssignment("R", 0, 1, 0, 2, running=True)}), p) == []


# --- Every rule breached at step 0 (the step the rolling horizon commits) and at the last step ---
# Each plan below breaks exactly one rule at exactly one step, and the whole violation list is
# compared, so a verifier that checks the wrong step, the wrong reference or skips an end of the
# horizon fails. LAST = the horizon's last step.

LAST = P.cluster.horizon_steps - 1  # 5


def _svc_problem(demand=(2,) * 6, lo=0, hi=8, cap=1, current=2, hard=False) -> Problem:
    """8 GPUs, no jobs, no down GPUs, one service ``chat``: only the service rules can fire."""
    return Problem(Cluster(8, 4, 30, 6), PlanSettings(multi_node_blocks=True, demand_hard=hard),
                   (Service("chat", demand, lo, hi, cap, current),), (), ())


def _svc_plan(alloc) -> Plan:
    return Plan("test", "feasible", (), {"chat": tuple(alloc)}, 0.0, None, None, 0.0, None,
                n_gpus=8, horizon_steps=6)


def test_swap_cap_at_step_0_is_measured_from_current_gpus():
    # issue 18 mutant 1: comparing step 0 with the plan's own first value accepts 2 -> 6.
    p = _svc_problem(current=2, cap=1)
    assert verify(_svc_plan((6,) * 6), p) == ["service 'chat': step 0: changes 2 -> 6 GPUs, swap cap is 1"]
    assert verify(_svc_plan((0,) * 6), p) == ["service 'chat': step 0: changes 2 -> 0 GPUs, swap cap is 1"]
    # exactly the cap is allowed, both ways
    assert verify(_svc_plan((3,) * 6), p) == []
    assert verify(_svc_plan((1,) * 6), p) == []


def test_swap_cap_at_the_last_step():
    p = _svc_problem(current=2, cap=1)
    assert verify(_svc_plan((2, 2, 2, 2, 2, 4)), p) == [
        "service 'chat': step 5: changes 2 -> 4 GPUs, swap cap is 1"]
    assert verify(_svc_plan((2, 2, 2, 2, 2, 0)), p) == [
        "service 'chat': step 5: changes 2 -> 0 GPUs, swap cap is 1"]
    assert verify(_svc_plan((2, 2, 2, 2, 2, 3)), p) == []


def test_band_at_step_0_and_the_last_step():
    p = _svc_problem(lo=2, hi=3, cap=1, current=2)
    assert verify(_svc_plan((1, 2, 2, 2, 2, 2)), p) == ["service 'chat': step 0: 1 GPUs outside its band [2, 3]"]
    assert verify(_svc_plan((2, 2, 2, 2, 2, 1)), p) == ["service 'chat': step 5: 1 GPUs outside its band [2, 3]"]
    p = _svc_problem(lo=2, hi=3, cap=1, current=3)
    assert verify(_svc_plan((4, 3, 3, 3, 3, 3)), p) == ["service 'chat': step 0: 4 GPUs outside its band [2, 3]"]
    assert verify(_svc_plan((3, 3, 3, 3, 3, 4)), p) == ["service 'chat': step 5: 4 GPUs outside its band [2, 3]"]
    # the band's ends themselves are inside it
    assert verify(_svc_plan((2, 3, 2, 3, 2, 3)), _svc_problem(lo=2, hi=3, cap=1, current=2)) == []


def test_hard_demand_at_step_0_and_the_last_step_uses_that_steps_demand():
    # distinct demand at the two ends, so reading demand of another step changes the answer
    p = _svc_problem(demand=(3, 2, 2, 2, 2, 4), cap=2, current=3, hard=True)
    assert verify(_svc_plan((3, 2, 2, 2, 3, 4)), p) == []
    assert verify(_svc_plan((2, 2, 2, 2, 3, 4)), p) == ["service 'chat': step 0: 2 GPUs below hard demand 3"]
    assert verify(_svc_plan((3, 2, 2, 2, 3, 3)), p) == ["service 'chat': step 5: 3 GPUs below hard demand 4"]
    # soft demand: the same plans are valid
    soft = _svc_problem(demand=(3, 2, 2, 2, 2, 4), cap=2, current=3, hard=False)
    assert verify(_svc_plan((2, 2, 2, 2, 3, 3)), soft) == []


def test_gpu_count_at_step_0_and_the_last_step():
    # P: 7 GPUs up; batch uses 4 GPUs at steps 0-3 (R+B, then A), none at steps 4-5
    wide = replace(P, services=(Service("chat", (2,) * 6, 1, 4, 4, 2),))
    assert verify(good(service_gpus={"chat": (3, 3, 3, 3, 3, 3)}), wide) == []
    assert verify(good(service_gpus={"chat": (4, 3, 3, 3, 3, 3)}), wide) == [
        "step 0: batch 4 + real-time 4 GPUs exceed the 7 GPUs up"]
    # A moved to steps 4-5 (on GPUs 0-3): the last step holds batch 4 + real-time 4
    late = {"A": JobAssignment("A", 4, 6, 0, 4)}
    assert verify(good(assign=late, service_gpus={"chat": (3, 3, 3, 3, 3, 3)}), wide) == []
    assert verify(good(assign=late, service_gpus={"chat": (3, 3, 3, 3, 3, 4)}), wide) == [
        "step 5: batch 4 + real-time 4 GPUs exceed the 7 GPUs up"]


def test_one_task_per_gpu_at_step_0_and_the_last_step():
    # B moved onto R's GPUs at step 0
    v = verify(good(assign={"B": JobAssignment("B", 0, 2, 0, 2)}), P)
    assert v == ["step 0: GPU 0 used by both 'R' and 'B' (one task per GPU)",
                 "step 0: GPU 1 used by both 'R' and 'B' (one task per GPU)",
                 "step 1: GPU 0 used by both 'R' and 'B' (one task per GPU)",
                 "step 1: GPU 1 used by both 'R' and 'B' (one task per GPU)"]
    # B at steps 4-5 on GPUs 2-3, A starting at the last step on GPUs 0-3: clash only at step 5
    # (A runs past the horizon; only the steps inside it are checked; chat drops to 1 GPU there so
    # the GPU count holds: 6 + 1 = 7). Assignments are checked in plan order R, A, B.
    v = verify(good(assign={"B": JobAssignment("B", 4, 6, 2, 2), "A": JobAssignment("A", 5, 7, 0, 4)},
                    service_gpus={"chat": (2, 2, 2, 2, 2, 1)}), P)
    assert v == ["step 5: GPU 2 used by both 'A' and 'B' (one task per GPU)",
                 "step 5: GPU 3 used by both 'A' and 'B' (one task per GPU)"]


def test_start_inside_the_horizon_at_both_ends():
    # B (release 0) may start at step 0 and at the last step; not at -1 or at H
    assert verify(good(assign={"B": JobAssignment("B", LAST, LAST + 2, 2, 2)}), P) == []
    assert verify(good(assign={"B": JobAssignment("B", 6, 8, 2, 2)}), P) == [
        "job 'B': start_step 6 outside the horizon [0, 6)"]
    assert verify(good(assign={"B": JobAssignment("B", -1, 1, 2, 2)}), P) == [
        "job 'B': starts at step -1 before its release step 0",
        "job 'B': start_step -1 outside the horizon [0, 6)"]


def test_release_at_step_0_and_the_last_step():
    # A is released at step 1: starting at step 0 is one step early
    # (on its 2-GPU size, GPUs 4-5, chat at 1 GPU so nothing else is breached)
    early = good(assign={"A": JobAssignment("A", 0, 3, 4, 2)}, service_gpus={"chat": (1,) * 6})
    assert verify(early, P) == ["job 'A': starts at step 0 before its release step 1"]
    assert verify(good(assign={"A": JobAssignment("A", 1, 4, 4, 2)}, service_gpus={"chat": (1,) * 6}), P) == []
    # a job released at the last step may start there, not one step before
    p = replace(P, jobs=P.jobs + (Job("L", "training", 1.0, LAST, (SizeOption(2, 1),)),))
    ok = good(assign={"L": JobAssignment("L", LAST, LAST + 1, 4, 2)})
    assert verify(ok, p) == []
    assert verify(good(assign={"L": JobAssignment("L", LAST - 1, LAST, 4, 2)}), p) == [
        "job 'L': starts at step 4 before its release step 5"]


def test_down_gpu_at_step_0_and_the_last_step():
    # GPU 7 is down for the whole horizon: a block over it is refused whenever it runs
    assert verify(good(assign={"B": JobAssignment("B", 0, 2, 6, 2)}), P) == [
        "job 'B': block 6..7 uses down GPU(s) [7]"]
    assert verify(good(assign={"B": JobAssignment("B", LAST, LAST + 2, 6, 2)}), P) == [
        "job 'B': block 6..7 uses down GPU(s) [7]"]


def test_running_job_must_start_at_step_0_and_keep_its_end():
    _one(good(assign={"R": JobAssignment("R", 1, 3, 0, 2, running=True)}),
         "running job 'R': moved or stopped: plan has (start, end, offset, gpus) = (1, 3, 0, 2), must stay (0, 2, 0, 2)")
    # a running job whose remaining run reaches the last step must be planned to the end
    p = replace(P, running=(RunningJob("R", "training", 1.0, 2, 0, 6),))
    full = good(assign={"R": JobAssignment("R", 0, 6, 0, 2, running=True), "A": JobAssignment("A", 2, 5, 2, 2),
                        "B": JobAssignment("B", 0, 2, 2, 2)})
    assert verify(full, p) == []
    _one(replace(full, assignments=tuple(
        JobAssignment("R", 0, 5, 0, 2, running=True) if a.job_id == "R" else a for a in full.assignments)),
         "must stay (0, 6, 0, 2)", problem=p)


# --- Rules the step tests above do not reach (found by a mutation run over optimizer/verify.py) ---

def _bare(n_gpus=8, per_node=4, down=(), multi=True, jobs=(), services=()) -> Problem:
    return Problem(Cluster(n_gpus, per_node, 30, 6), PlanSettings(multi_node_blocks=multi), services, jobs, (),
                   down_gpus=down)


def _plan(*assignments, services=None) -> Plan:
    return Plan("test", "feasible", tuple(assignments), services or {}, 0.0, None, None, 0.0, None,
                n_gpus=8, horizon_steps=6)


def test_a_job_left_unstarted_is_valid_and_half_set_fields_are_not():
    assert verify(good(assign={"A": JobAssignment("A", None, None, None, None)}), P) == []
    assert verify(good(assign={"A": JobAssignment("A", None, None, 0, None)}), P) == [
        "job 'A': not started but end_step/block_offset/gpus are set: (None, None, 0, None)"]


def test_non_integer_fields_are_named():
    assert verify(good(assign={"A": JobAssignment("A", 2.0, 4, 0, 4)}), P) == [
        "job 'A': start_step, end_step, block_offset, gpus must all be integers: (2.0, 4, 0, 4)"]


def test_duration_message_and_block_outside_the_cluster():
    assert verify(good(assign={"A": JobAssignment("A", 2, 3, 0, 4)}), P) == [
        "job 'A': runs 1 steps on 4 GPUs, its duration is 2 (no preemption)"]
    assert verify(good(assign={"B": JobAssignment("B", 0, 2, 8, 2)}), P) == [
        "job 'B': block 8..9 outside the cluster of 8 GPUs"]


def test_down_gpu_below_the_block_is_not_in_it():
    job = Job("W", "training", 1.0, 0, (SizeOption(2, 1),))
    assert verify(_plan(JobAssignment("W", 0, 1, 2, 2)), _bare(jobs=(job,), down=(1,))) == []
    assert verify(_plan(JobAssignment("W", 0, 1, 0, 2)), _bare(jobs=(job,), down=(1,))) == [
        "job 'W': block 0..1 uses down GPU(s) [1]"]


def test_every_job_and_service_is_checked_after_a_bad_one():
    # a bad entry early in the plan must not stop the checks of the ones after it
    v = verify(good(assign={"R": JobAssignment("R", 0, 2, 2, 2, running=True),
                            "A": JobAssignment("A", 2, 4, 0, 8), "B": JobAssignment("B", 0, 2, 8, 2)}), P)
    assert v == ["running job 'R': moved or stopped: plan has (start, end, offset, gpus) = (0, 2, 2, 2), "
                 "must stay (0, 2, 0, 2)",
                 "job 'A': 8 GPUs is not one of its sizes [4, 2]",
                 "job 'B': block 8..9 outside the cluster of 8 GPUs"]
    v = verify(good(assign={"A": JobAssignment("A", None, 4, None, None), "B": JobAssignment("B", 0, 2.5, 2, 2)}), P)
    assert v == ["job 'A': not started but end_step/block_offset/gpus are set: (None, 4, None, None)",
                 "job 'B': start_step, end_step, block_offset, gpus must all be integers: (0, 2.5, 2, 2)"]
    v = verify(good(assign={"A": JobAssignment("A", 2, 4, 0, 8), "B": JobAssignment("B", 0, 2, 0, 2)}), P)
    assert v[0] == "job 'A': 8 GPUs is not one of its sizes [4, 2]" and "GPU 0 used by both 'R' and 'B'" in v[1]


def test_two_services_add_up_and_each_is_checked():
    svcs = (Service("a", (1,) * 6, 0, 8, 8, 0), Service("b", (1,) * 6, 0, 8, 8, 0))
    p = _bare(services=svcs)
    assert verify(_plan(services={"a": (4,) * 6, "b": (4,) * 6}), p) == []
    assert verify(_plan(services={"a": (4,) * 6, "b": (5, 4, 4, 4, 4, 4)}), p) == [
        "step 0: batch 0 + real-time 9 GPUs exceed the 8 GPUs up"]
    # the first service missing, the second still checked; an unknown service is named
    v = verify(_plan(services={"b": (9,) * 6}), p)
    assert v[0] == "service 'a': missing from the plan"
    assert "service 'b': step 0: 9 GPUs outside its band [0, 8]" in v
    assert verify(_plan(services={"a": (1,) * 6, "b": (1,) * 6, "ghost": (1,) * 6}), p) == [
        "service 'ghost': not in the problem"]



# --- The starvation guard (max_wait_steps) at step 0 and at the last step ---
# 4 GPUs, 4 steps. BIG (released ``release``, ``gpus`` GPUs, 2 steps) is first in arrival order
# (equal releases are ordered by id); SMALL (1 GPU, 1 step, released with BIG or at 0) starts at ``at`` on GPU 3 while
# BIG is not started: SMALL overtakes BIG at ``at`` once BIG is reserved (release + W <= at), and
# that is a delay exactly when BIG's board leaves it room for its GPUs on [at, min(at + 2, H)).

GH = 4


def _guard_case(gpus=4, release=0, at=0, wait=0, running=(), services=(), alloc=None, planner="test",
                small_release=0):
    jobs = (Job("BIG", "training", 1.0, release, (SizeOption(gpus, 2),)),
            Job("SMALL", "training", 1.0, small_release, (SizeOption(1, 1),)))
    p = Problem(Cluster(4, 4, 30, GH), PlanSettings(max_wait_steps=wait), tuple(services), jobs, tuple(running))
    a = [JobAssignment("BIG", None, None, None, None), JobAssignment("SMALL", at, at + 1, 3, 1)]
    a += [JobAssignment(r.job_id, 0, max(1, r.remaining_steps), r.block_offset, r.gpus, running=True) for r in running]
    plan = Plan(planner, "feasible", tuple(a), alloc or {}, 0.0, None, None, 0.0, None, n_gpus=4, horizon_steps=GH)
    return plan, p


def _delay(t, gpus, pi, last, wait=0):
    return (f"step {t}: job 'SMALL' (after 'BIG' in arrival order, started at step {t}) runs while 'BIG', "
            f"reserved since step {pi} (max_wait_steps={wait}), waits with room for its {gpus} GPUs at steps "
            f"{t}..{last}: the overtaking delays the reserved job")


def test_guard_delay_at_step_0_and_no_room_because_of_a_running_job():
    plan, p = _guard_case(gpus=4, at=0)
    assert verify(plan, p) == [_delay(0, 4, 0, 1)]
    # R (1 GPU, remaining 0 = planned for 1 step) holds GPU 0 at step 0: BIG has only 3 GPUs there
    r = RunningJob("R", "training", 1.0, 1, 0, 0)
    assert verify(*_guard_case(gpus=4, at=0, running=(r,))) == []
    # ... and a 2-GPU BIG still has room at steps 0..1
    assert verify(*_guard_case(gpus=2, at=0, running=(r,))) == [_delay(0, 2, 0, 1)]


def test_guard_delay_at_the_last_step_checks_only_the_steps_left():
    # BIG and SMALL released at the last step: BIG's window [3, min(3 + 2, 4)) is the last step alone
    last = {"release": GH - 1, "at": GH - 1, "small_release": GH - 1}
    plan, p = _guard_case(gpus=4, **last)
    assert verify(plan, p) == [_delay(3, 4, 3, 3)]
    # R holds GPU 0 through the last step (remaining 4): no room for 4 GPUs at step 3
    r = RunningJob("R", "training", 1.0, 1, 0, GH)
    assert verify(*_guard_case(gpus=4, running=(r,), **last)) == []
    # R ending one step before (remaining 3) leaves BIG room at the last step
    r3 = RunningJob("R", "training", 1.0, 1, 0, GH - 1)
    assert verify(*_guard_case(gpus=4, running=(r3,), **last)) == [_delay(3, 4, 3, 3)]
    # SMALL released before BIG is ahead of it in arrival order: not an overtaker
    assert verify(*_guard_case(gpus=4, release=GH - 1, at=GH - 1)) == []


def test_guard_reserves_from_release_plus_max_wait_only():
    # BIG released at 1: SMALL at step 0 overtakes nobody reserved
    assert verify(*_guard_case(gpus=4, release=1, at=0)) == []
    # W = 1: BIG reserved from step 1; SMALL at 0 is history, SMALL at 1 delays it
    assert verify(*_guard_case(gpus=4, at=0, wait=1)) == []
    assert verify(*_guard_case(gpus=4, at=1, wait=1)) == [_delay(1, 4, 1, 2, wait=1)]
    # SMALL at the last step with W = 1: BIG's window is [3, 4)
    assert verify(*_guard_case(gpus=4, at=GH - 1, wait=1)) == [_delay(3, 4, 1, 3, wait=1)]
    # without max_wait_steps there is no guard
    assert verify(*_guard_case(gpus=4, at=0, wait=None)) == []


def test_guard_not_applied_to_baselines_unless_asked():
    plan, p = _guard_case(gpus=4, at=0, planner="fifo")
    assert verify(plan, p) == []
    assert verify(plan, p, guard=True) == [_delay(0, 4, 0, 1)]
    assert verify(replace(plan, planner="milp"), p, guard=False) == []


@pytest.mark.parametrize(("svc", "alloc", "gpus", "delayed"), [
    # forward from current_gpus: 4 -> need (3, 2, 1, 0); at step 0 BIG has 4 - 3 = 1 GPU: no room for 2
    (Service("chat", (0,) * 4, 0, 4, 1, 4), (3, 2, 1, 0), 2, False),
    (Service("chat", (0,) * 4, 0, 4, 1, 4), (3, 2, 1, 0), 1, True),
    # backward ramp-up: demand 3 at step 2 with cap 1 needs (1, 2, 3, 3): 3 GPUs left at step 0
    (Service("chat", (0, 0, 3, 3), 0, 4, 1, 0), (1, 2, 3, 3), 4, False),
    (Service("chat", (0, 0, 3, 3), 0, 4, 1, 0), (1, 2, 3, 3), 2, True),
    # capped by what is reachable from current 0: demand 4 needs only (1, 2, 3, 4)
    (Service("chat", (4,) * 4, 0, 4, 1, 0), (1, 2, 3, 4), 2, True),
    # band minimum 2 with demand 0: need 2, leaving 2 GPUs
    (Service("chat", (0,) * 4, 2, 4, 1, 2), (2,) * 4, 4, False),
    (Service("chat", (0,) * 4, 2, 4, 1, 2), (2,) * 4, 2, True),
])
def test_guard_counts_each_service_at_its_need_at_step_0(svc, alloc, gpus, delayed):
    plan, p = _guard_case(gpus=gpus, at=0, services=(svc,), alloc={"chat": alloc})
    assert verify(plan, p) == ([_delay(0, gpus, 0, 1)] if delayed else [])


# --- Survivors of the mutation run over the guard, node spans and the job/service loops ---


def test_block_within_a_node_and_block_spanning_nodes_with_multi_node_blocks_disabled():
    job = Job("W", "training", 1.0, 0, (SizeOption(2, 1),))
    p = _bare(multi=False, jobs=(job,))
    # 2 GPUs at offset 2 or 6: inside a node (GPUs 0-3, 4-7), though 2 and 6 are not multiples of 4
    assert verify(_plan(JobAssignment("W", 0, 1, 2, 2)), p) == []
    assert verify(_plan(JobAssignment("W", 0, 1, 6, 2)), p) == []
    # a misaligned block across the node boundary (GPUs 3-4) breaks both rules
    assert verify(_plan(JobAssignment("W", 0, 1, 3, 2)), p) == [
        "job 'W': block_offset 3 not aligned to its size 2",
        "job 'W': block 3..4 spans nodes but multi_node_blocks is disabled"]
    assert verify(_plan(JobAssignment("W", 0, 1, 3, 2)), _bare(multi=True, jobs=(job,))) == [
        "job 'W': block_offset 3 not aligned to its size 2"]


def test_checks_continue_after_an_unknown_job_a_non_integer_job_and_a_block_outside_the_cluster():
    jobs = (Job("X", "training", 1.0, 0, (SizeOption(2, 1),)), Job("Y", "training", 1.0, 1, (SizeOption(2, 1),)))
    p = _bare(jobs=jobs)
    late_y = JobAssignment("Y", 0, 1, 0, 2)  # released at 1
    assert verify(_plan(JobAssignment("Z", 0, 1, 0, 2), JobAssignment("X", 0, 1, 2, 2), late_y), p) == [
        "job 'Z': not in the problem", "job 'Y': starts at step 0 before its release step 1"]
    assert verify(_plan(JobAssignment("X", 0.5, 1, 2, 2), late_y), p) == [
        "job 'X': start_step, end_step, block_offset, gpus must all be integers: (0.5, 1, 2, 2)",
        "job 'Y': starts at step 0 before its release step 1"]
    assert verify(_plan(JobAssignment("X", 0, 1, 8, 2), late_y), p) == [
        "job 'X': block 8..9 outside the cluster of 8 GPUs", "job 'Y': starts at step 0 before its release step 1"]


def test_a_service_of_the_wrong_length_does_not_stop_the_next_service_check():
    svcs = (Service("a", (1,) * 6, 0, 8, 8, 0), Service("b", (1,) * 6, 0, 8, 8, 0))
    assert verify(_plan(services={"a": (1,) * 5, "b": (1, 1, 1, 1, 1, 9)}), _bare(services=svcs)) == [
        "service 'a': 5 steps of GPUs, horizon is 6", "service 'b': step 5: 9 GPUs outside its band [0, 8]",
        "step 5: batch 0 + real-time 9 GPUs exceed the 8 GPUs up"]


def _two(a_at, a_gpus=2, a_steps=1, big_at=None, small_at=0, wait=0, down=(), extra=()):
    """4 GPUs, 4 steps: BIG (4 GPUs, 2 steps), SMALL (1 GPU, 1 step) and, with ``a_at``, A (first by id), all released at 0."""
    jobs = (Job("BIG", "training", 1.0, 0, (SizeOption(4, 2),)), Job("SMALL", "training", 1.0, 0, (SizeOption(1, 1),)))
    a = [JobAssignment("BIG", big_at, big_at + 2, 0, 4) if big_at is not None else JobAssignment("BIG", None, None, None, None),
         JobAssignment("SMALL", small_at, small_at + 1, 3, 1)]
    if a_at is not None:
        jobs = (Job("A", "training", 1.0, 0, (SizeOption(a_gpus, a_steps),)), *jobs)
        a.append(JobAssignment("A", a_at, a_at + a_steps, 0, a_gpus))
    p = Problem(Cluster(4, 4, 30, GH), PlanSettings(max_wait_steps=wait), (), jobs, tuple(extra), down_gpus=down)
    a += [JobAssignment(r.job_id, 0, max(1, r.remaining_steps), r.block_offset, r.gpus, running=True) for r in extra]
    return Plan("test", "feasible", tuple(a), {}, 0.0, None, None, 0.0, None, n_gpus=4, horizon_steps=GH), p


def _bigdelay(t, pi, last, wait=0):
    return (f"step {t}: job 'SMALL' (after 'BIG' in arrival order, started at step {t}) runs while 'BIG', "
            f"reserved since step {pi} (max_wait_steps={wait}), waits with room for its 4 GPUs at steps "
            f"{t}..{last}: the overtaking delays the reserved job")


def test_guard_board_holds_earlier_jobs_from_their_start_to_their_end():
    # A (before BIG in arrival order) on GPUs 0-1 at step 0 only: BIG has no room at step 0
    assert verify(*_two(a_at=0)) == []
    # A gone at step 1: with W = 1, BIG (reserved from 1) has room at steps 1-2 while SMALL runs at 1
    assert verify(*_two(a_at=0, small_at=1, wait=1)) == [_bigdelay(1, 1, 2, wait=1)]


def test_guard_head_is_a_job_not_started_by_that_step():
    # everyone started at step 0 (A, SMALL) or nobody waits: no reserved job, no delay
    jobs = (Job("A", "training", 1.0, 0, (SizeOption(1, 1),)), Job("B", "training", 1.0, 0, (SizeOption(1, 1),)))
    p = Problem(Cluster(4, 4, 30, GH), PlanSettings(max_wait_steps=0), (), jobs, ())
    both = Plan("test", "feasible", (JobAssignment("A", 0, 1, 0, 1), JobAssignment("B", 0, 1, 1, 1)), {}, 0.0,
                None, None, 0.0, None, n_gpus=4, horizon_steps=GH)
    assert verify(both, p) == []
    # A running (steps 0-1) and B starting at 1 beside it; A starting at 1 together with B
    assert verify(replace(both, assignments=(JobAssignment("A", 0, 2, 0, 1), JobAssignment("B", 1, 2, 1, 1))),
                  replace(p, jobs=(replace(jobs[0], sizes=(SizeOption(1, 2),)), jobs[1]))) == []
    assert verify(replace(both, assignments=(JobAssignment("A", 1, 2, 0, 1), JobAssignment("B", 1, 2, 1, 1))), p) == []


def test_guard_the_reserved_job_does_not_block_itself_when_it_starts_late():
    # BIG starts at 1 (one step late) after SMALL ran at 0: at step 0 BIG had room at steps 0..1
    assert verify(*_two(a_at=None, big_at=1, small_at=0)) == [_bigdelay(0, 0, 1)]


def test_guard_counts_down_gpus_and_running_jobs_for_their_planned_steps():
    assert verify(*_two(a_at=None, small_at=0)) == [_bigdelay(0, 0, 1)]
    assert verify(*_two(a_at=None, small_at=0, down=(0,))) == []  # 3 GPUs up: no room for BIG
    # R (1 GPU) with 1 step left holds step 0 only: BIG reserved from 1 has room at steps 1-2
    r = RunningJob("R", "training", 1.0, 1, 2, 1)
    assert verify(*_two(a_at=None, small_at=1, wait=1, extra=(r,))) == [_bigdelay(1, 1, 2, wait=1)]


@pytest.mark.parametrize(("svc", "alloc", "release", "delayed"), [
    # demand 4 at the last step, cap 1 from 0: need (1, 2, 3, 4); at steps 1-2 a 2-GPU BIG has 2 then 1 GPUs
    (Service("chat", (0, 0, 0, 4), 0, 4, 1, 0), (1, 2, 3, 4), 1, False),
    # dropping from 4 by 1 per step: need (3, 2, 1, 0); at the last step BIG has all 4 GPUs
    (Service("chat", (0,) * 4, 0, 4, 1, 4), (3, 2, 1, 0), GH - 1, True),
])
def test_guard_service_need_after_step_0(svc, alloc, release, delayed):
    gpus = 2 if release == 1 else 4
    plan, p = _guard_case(gpus=gpus, release=release, at=release, small_release=release, services=(svc,),
                          alloc={"chat": alloc})
    last = min(release + 2, GH) - 1
    assert verify(plan, p) == ([_delay(release, gpus, release, last)] if delayed else [])
