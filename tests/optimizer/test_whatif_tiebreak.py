"""The what-if tie-break (optimizer.whatif.prefer_base) and the reason a job still waits (why_waiting), by hand."""

from __future__ import annotations

from optimizer.objective import objective_value
from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Cluster, Job, PlanSettings, Problem, SizeOption
from optimizer.verify import verify
from optimizer.whatif import prefer_base, tie_break, why_waiting

#: 4 GPUs (one node), 4 half-hour steps, no service; A and B 2 GPUs x 2 steps, released at step 0.
PROBLEM = Problem(Cluster(4, 4, 30, 4), PlanSettings(), (),
                  (Job("A", "training", 1.0, 0, (SizeOption(2, 2),)), Job("B", "training", 1.0, 0, (SizeOption(2, 2),))))


def _plan(*assignments: JobAssignment, problem: Problem = PROBLEM) -> Plan:
    p = Plan("milp", "time_limit", tuple(assignments), {}, 0.0, None, None, 0.0, None,
             n_gpus=problem.n_gpus, horizon_steps=problem.horizon_steps)
    return Plan("milp", "time_limit", p.assignments, {}, objective_value(p, problem), None, None, 0.0, None,
                n_gpus=problem.n_gpus, horizon_steps=problem.horizon_steps)


BASE = _plan(JobAssignment("A", 0, 2, 0, 2), JobAssignment("B", 0, 2, 2, 2))


def test_swapped_blocks_and_a_later_start_go_back_to_the_base_together():
    """New plan: A on B's block, B one step later on A's: each alone cannot go back (it would overlap the
    other), both together can, and the objective rises (B no longer decays a step)."""
    new = _plan(JobAssignment("A", 0, 2, 2, 2), JobAssignment("B", 1, 3, 0, 2))
    out, back = prefer_base(new, BASE, PROBLEM)
    assert back == ("A", "B")
    assert out.assignments == BASE.assignments and verify(out, PROBLEM) == []
    assert out.objective == objective_value(BASE, PROBLEM) > new.objective


def test_one_job_goes_back_when_the_other_keeps_what_the_change_bought():
    """A started earlier in the new plan (step 0 instead of 2): kept; B moved blocks at no gain: put back."""
    base = _plan(JobAssignment("A", 2, 4, 0, 2), JobAssignment("B", 0, 2, 2, 2))
    new = _plan(JobAssignment("A", 0, 2, 2, 2), JobAssignment("B", 0, 2, 0, 2))
    out, back = prefer_base(new, base, PROBLEM)
    assert back == () and out is new  # B's base block [2, 4) at steps 0-1 is A's now: nothing to put back
    new2 = _plan(JobAssignment("A", 0, 2, 0, 2), JobAssignment("B", 1, 3, 2, 2))
    out2, back2 = prefer_base(new2, base, PROBLEM)
    assert back2 == ("B",) and out2.assignments == (JobAssignment("A", 0, 2, 0, 2), JobAssignment("B", 0, 2, 2, 2))


def test_why_a_job_waits():
    """C needs 4 GPUs for 2 steps while A holds 2 GPUs the whole horizon: at most 2 free. D (2 GPUs) with one
    1-GPU job on GPU 0 and one on GPU 2: 2 GPUs free at once but no aligned 2-GPU block."""
    p = Problem(Cluster(4, 4, 30, 4), PlanSettings(), (),
                (Job("A", "training", 1.0, 0, (SizeOption(2, 4),)), Job("C", "training", 1.0, 0, (SizeOption(4, 2),))))
    plan = _plan(JobAssignment("A", 0, 4, 0, 2), JobAssignment("C", None, None, None, None), problem=p)
    assert why_waiting(p, plan, "C") == ("no 2-step window from its release (step 0) has 4 GPUs free (at most 2 free "
                                         "in any window for a size it allows; real-time and other jobs hold the rest)")
    q = Problem(Cluster(4, 4, 30, 4), PlanSettings(), (),
                (Job("E", "training", 1.0, 0, (SizeOption(1, 4),)), Job("F", "training", 1.0, 0, (SizeOption(1, 4),)),
                 Job("D", "training", 1.0, 0, (SizeOption(2, 2),))))
    plan_q = _plan(JobAssignment("E", 0, 4, 0, 1), JobAssignment("F", 0, 4, 2, 1),
                   JobAssignment("D", None, None, None, None), problem=q)
    assert why_waiting(q, plan_q, "D") == ("2 GPUs are free at once from step 0 but never as one aligned 2-GPU block "
                                           "(fragmentation)")


def test_tie_break_keeps_the_base_except_what_the_change_buys():
    """+4 GPUs (8 in all): the re-plan swapped A's and B's blocks (no gain) and started C at step 0 on the new
    GPUs (the gain). The answer: A and B on their base blocks, C on the new GPUs at step 0, objective = the
    re-plan's; only C is listed as changed."""
    p8 = Problem(Cluster(8, 4, 30, 4), PlanSettings(), (),
                 PROBLEM.jobs + (Job("C", "training", 1.0, 0, (SizeOption(2, 2),)),))
    carried = _plan(JobAssignment("A", 0, 2, 0, 2), JobAssignment("B", 0, 2, 2, 2), JobAssignment("C", 2, 4, 0, 2),
                    problem=p8)
    new = _plan(JobAssignment("A", 0, 2, 2, 2), JobAssignment("B", 0, 2, 0, 2), JobAssignment("C", 0, 2, 4, 2),
                problem=p8)
    out, back = tie_break(new, carried, p8)
    assert back == ("A", "B")
    assert out.assignments == (JobAssignment("A", 0, 2, 0, 2), JobAssignment("B", 0, 2, 2, 2),
                               JobAssignment("C", 0, 2, 4, 2))
    assert out.objective == new.objective > carried.objective and verify(out, p8) == []
