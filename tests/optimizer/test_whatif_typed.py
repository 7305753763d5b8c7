"""What-if on a typed cluster (issue 26): ``--add-gpus TYPE:N`` as typed nodes and ``--drain-node`` on a typed node.

The hand problem: node ``v0`` (4 x V100M32) and node ``t0`` (4 x T4), 8 steps, no service. R runs on all of
``v0`` for 3 more steps; V (4 GPUs, V100M32 only, 2 steps) and T (4 GPUs, T4 only, 2 steps) are queued.
- Base: T starts at 0 on ``t0``; V waits for R and starts at 3 on ``v0`` (no other V100M32 GPU).
- +8 V100M32 GPUs: V100M32 nodes have 4 GPUs, so two nodes ``added-00``, ``added-01``; V starts at 0 on one of
  them, T keeps step 0 on ``t0``, R keeps ``v0`` (its index moved with the new layout).
"""

from __future__ import annotations

import pytest

from optimizer.errors import InputError
from optimizer.planners import plan
from optimizer.problem import Cluster, Job, Node, PlanSettings, Problem, RunningJob, SizeOption
from optimizer.verify import verify
from optimizer.whatif import WhatIf, apply_whatif, grown_cluster, layout_map, typed_nodes_to_add


def _problem() -> Problem:
    cluster = Cluster(n_gpus=0, horizon_steps=8, nodes=(Node("v0", 4, "V100M32"), Node("t0", 4, "T4")))
    jobs = (Job("V", "training", 1.0, 0, (SizeOption(4, 2),), gpu_types=("V100M32",)),
            Job("T", "training", 1.0, 0, (SizeOption(4, 2),), gpu_types=("T4",)))
    running = (RunningJob("R", "training", 1.0, 4, 0, 3),)
    return Problem(cluster, PlanSettings(), (), jobs, running, ())


def _node(problem: Problem, offset: int | None) -> str | None:
    k = None if offset is None else problem.cluster.node_of(offset)
    return None if k is None else problem.cluster.nodes[k].name


def _starts(problem: Problem, p) -> dict:
    return {a.job_id: (a.start_step, _node(problem, a.block_offset)) for a in p.assignments}


@pytest.mark.parametrize("planner", ["priority", "milp"])
def test_add_v100_gpus_starts_the_v100_job_at_once_and_leaves_the_t4_job(planner):
    base = _problem()
    b = plan(base, planner)
    assert _starts(base, b) == {"R": (0, "v0"), "T": (0, "t0"), "V": (3, "v0")}
    nodes = typed_nodes_to_add(base.cluster, "V100M32", 8)
    assert [(n.name, n.gpus, n.gpu_type) for n in nodes] == [("added-00", 4, "V100M32"), ("added-01", 4, "V100M32")]
    applied = apply_whatif(base, WhatIf(add_nodes=nodes))
    p = applied.problem
    assert [n.name for n in p.cluster.nodes] == ["v0", "t0", "added-00", "added-01"]
    assert p.n_gpus == 16 and applied.physical_gpus == 16 and applied.added_gpu_ids == tuple(range(8, 16))
    new = plan(p, planner)
    assert verify(new, p) == []
    s = _starts(p, new)
    assert s["V"][0] == 0 and s["V"][1] in ("added-00", "added-01")  # 3 steps earlier, on an added node
    assert s["T"] == (0, "t0") and s["R"] == (0, "v0")  # the T4-only job and the running job unchanged
    assert WhatIf(add_nodes=nodes).describe() == ["+8 V100M32 GPUs"]


def test_nodes_move_with_the_new_layout():
    base = _problem()
    new = grown_cluster(base.cluster, (Node("big", 8, "T4"),))  # an 8-GPU node is laid out first
    assert [n.name for n in new.nodes] == ["big", "v0", "t0"]
    assert layout_map(base.cluster, new) == {g: g + 8 for g in range(8)}
    p = apply_whatif(base, WhatIf(add_nodes=(Node("big", 8, "T4"),))).problem
    assert p.running[0].block_offset == 8  # R is still on v0


def test_drain_of_a_typed_node_keeps_its_running_job_and_starts_nothing_there():
    base = _problem()
    p = apply_whatif(base, WhatIf(drain_groups=(("t0 drained", (4, 5, 6, 7)),))).problem
    new = plan(p, "priority")
    assert verify(new, p) == []
    s = _starts(p, new)
    assert s["R"] == (0, "v0") and s["V"] == (3, "v0") and s["T"] == (None, None)  # T4-only: nowhere to go


@pytest.mark.parametrize(("ty", "n", "msg"), [
    ("H100", 8, "no node of type 'H100' in the run (types: V100M32, T4)"),
    ("V100M32", 6, "V100M32 nodes have 4 GPUs; give a multiple of 4 or a power of two"),
    ("V100M32", 0, "expected a whole number of GPUs >= 1"),
])
def test_bad_type_or_count_is_one_line(ty, n, msg):
    with pytest.raises(InputError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        typed_nodes_to_add(_problem().cluster, ty, n)


def test_plain_add_gpus_is_refused_on_a_typed_cluster():
    with pytest.raises(InputError, match="give --add-gpus TYPE:N"):
        apply_whatif(_problem(), WhatIf(add_gpus=8))


def test_one_node_of_n_when_n_is_a_power_of_two_below_the_usual_size():
    nodes = typed_nodes_to_add(_problem().cluster, "T4", 2)
    assert [(n.name, n.gpus) for n in nodes] == [("added-00", 2)]


@pytest.mark.parametrize("planner", ["priority", "milp"])
def test_the_explanation_compares_the_base_plan_in_the_new_layout(planner):
    """An 8-GPU V100M32 node added is laid out first: v0 moves from GPUs 0-3 to 8-11 and t0 from 4-7 to 12-15.

    Compared as raw base indices, T (still on t0) and R (still on v0) would look re-packed; in the new layout
    only V changes: earlier, on the added GPUs, its base block named on v0 where it now lies (8-11).
    """
    from optimizer.whatif import explain, warm_start

    base = _problem()
    b = plan(base, planner)
    applied = apply_whatif(base, WhatIf(add_nodes=(Node("big", 8, "V100M32"),)))
    p = applied.problem
    assert [n.name for n in p.cluster.nodes] == ["big", "v0", "t0"] and applied.layout == {g: g + 8 for g in range(8)}
    carried = warm_start(b, applied)
    assert verify(carried, p) == []  # the base plan, carried to the new layout, is valid there
    assert _starts(p, carried) == {"R": (0, "v0"), "T": (0, "t0"), "V": (3, "v0")}
    new = plan(p, planner, warm_start=carried) if planner == "milp" else plan(p, planner)
    changes = explain(base, b, applied, new)
    assert [(c.job_id, c.kind, c.start_base, c.start_whatif, c.block_base) for c in changes] == [
        ("V", "earlier", 3, 0, (8, 4))]
    assert changes[0].reason == "starts earlier: runs on added GPUs [0, 4)"


def test_why_waiting_counts_only_the_gpus_of_the_jobs_types():
    """R holds ``v0`` for the whole horizon (8 steps): V (V100M32 only) never starts, while ``t0`` is free after T.

    Cluster-wide the old rule found T's 4 GPUs free from step 2 and blamed the plan ("not proven optimal"); V can only
    use ``v0``. With ``t0`` down as well, T (T4 only) has no GPU of its type up at all.
    """
    from optimizer.whatif import why_waiting

    base = _problem()
    held = Problem(base.cluster, PlanSettings(), (), base.jobs, (RunningJob("R", "training", 1.0, 4, 0, 8),), ())
    p = plan(held, "priority")
    assert verify(p, held) == [] and _starts(held, p)["V"] == (None, None)
    assert why_waiting(held, p, "V") == ("no 2-step window from its release (step 0) has 4 GPUs of its types "
                                         "(V100M32) free (at most 0 free in any window for a size it allows; "
                                         "real-time and other jobs hold the rest)")
    gone = Cluster(n_gpus=0, horizon_steps=8, nodes=(Node("v0", 4, "V100M32"), Node("t0", 4, "T4", down=(0, 1, 2, 3))))
    down = Problem(gone, PlanSettings(), (), base.jobs, (RunningJob("R", "training", 1.0, 4, 0, 3),), ())
    q = plan(down, "priority")
    assert verify(q, down) == [] and _starts(down, q)["T"] == (None, None)
    assert why_waiting(down, q, "T") == "needs 4 GPUs of its types (T4); only 0 are up"
