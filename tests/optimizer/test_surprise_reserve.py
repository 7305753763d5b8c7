"""The surprise reserve (issue 30): non-preemptible starts leave min(max_gpus, demand + swap cap) to the services.

Hand case (8 GPUs, one node, 6 steps): chat plans 3, 3, 1, 1, 1, 1 GPUs with swap cap 2, so a one-step surprise
may claim min(8, D + 2) = 5, 5, 3, 3, 3, 3 GPUs and new non-preemptible work may hold 8 − that = 3, 3, 5, 5, 5, 5.
N (priority 2, 4 GPUs, 2 steps, not preemptible) and P (priority 1, 4 GPUs, 2 steps, preemptible). Batch room is
8 − 3 = 5 at steps 0–1 and 7 after: one 4-GPU job at a time. Without the reserve the higher priority goes first
(N at 0, P at 2); with it N may not start before step 2 (3 < 4 GPUs of room), so P takes steps 0–1 and N 2–3.
"""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.decomposition import build_count_model
from optimizer.milp import build_model
from optimizer.planners import plan
from optimizer.problem import Problem
from optimizer.reserve import reserve_excess, surprise_room
from optimizer.verify import verify


def doc(p_preemptible: bool = True) -> dict:
    """The hand case of the module docstring; ``p_preemptible`` False: no preemptible job (no reserve)."""
    p = {"job_id": "P", "kind": "training", "priority": 1, "gpus": 4, "duration_steps": 2}
    if p_preemptible:
        p.update(preemptible=True, checkpoint_interval_steps=1, restart_steps=1)
    return {
        "cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 6},
        "settings": {"budget": "work", "time_limit_s": 20},
        "services": [{"service": "chat", "demand_gpus": [3, 3, 1, 1, 1, 1], "min_gpus": 0, "max_gpus": 8,
                      "swap_cap_gpus": 2, "current_gpus": 3}],
        "jobs": [{"job_id": "N", "kind": "training", "priority": 2, "gpus": 4, "duration_steps": 2}, p],
    }


def starts(p) -> dict[str, tuple[int | None, int | None]]:
    return {a.job_id: (a.start_step, a.gpus) for a in p.assignments if not a.running}


def test_room_is_up_minus_demand_plus_swap_cap():
    assert surprise_room(Problem.from_dict(doc())).tolist() == [3, 3, 5, 5, 5, 5]
    assert surprise_room(Problem.from_dict(doc(p_preemptible=False))) is None


@pytest.mark.parametrize("planner", ["milp", "fast"])
def test_the_preemptible_job_takes_the_gpus_the_other_may_not(planner):
    prob = Problem.from_dict(doc())
    p = plan(prob, planner)
    assert verify(p, prob) == []
    assert starts(p) == {"P": (0, 4), "N": (2, 4)}
    assert reserve_excess(p, prob) == 0


@pytest.mark.parametrize("planner", ["milp", "fast", "priority"])
def test_without_a_preemptible_job_the_plan_is_todays(planner):
    prob = Problem.from_dict(doc(p_preemptible=False))
    assert starts(plan(prob, planner)) == {"N": (0, 4), "P": (2, 4)}


def test_priority_backfill_the_baseline_keeps_no_reserve():
    prob = Problem.from_dict(doc())
    p = plan(prob, "priority")
    assert starts(p) == {"N": (0, 4), "P": (2, 4)}  # Slurm/Kueue behaviour: no reserve
    assert reserve_excess(p, prob) == 2 * (4 - 3)  # 1 GPU over the room at steps 0 and 1


def test_rows_only_with_a_preemptible_job():
    for build in (build_model, build_count_model):
        m_with = build(Problem.from_dict(doc())).model
        m_none = build(Problem.from_dict(doc(p_preemptible=False))).model
        assert m_with.n_rows == m_none.n_rows + 6  # one row per step, no column
        assert m_with.n_cols == m_none.n_cols
    bm = build_model(Problem.from_dict(doc()))
    assert bm.row_families["surprise_reserve"] == 6
    assert "surprise_reserve" not in build_model(Problem.from_dict(doc(p_preemptible=False))).row_families
    # N's starts are the only entries of the rows (P is preemptible): with N at 2 and P at 0 the rows hold
    x = np.zeros(bm.model.n_cols)
    for v in bm.xs:
        job = bm.ctx.problem.jobs[bm.ctx.groups[v.group][0]].job_id
        pick = (v.starts == {"N": 2, "P": 0}[job]) & (v.offsets == {"N": 0, "P": 4}[job])
        x[v.cols[pick]] = 1.0
    A = bm.model.A.tocsr()
    lo = sum(bm.row_families[f] for f in list(bm.row_families)[:list(bm.row_families).index("surprise_reserve")])
    assert (A[lo:lo + 6] @ x).tolist() == [0, 0, 4, 4, 0, 0]
    assert np.asarray(bm.model.row_upper)[lo:lo + 6].tolist() == [3, 3, 5, 5, 5, 5]
