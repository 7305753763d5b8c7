"""The risk report of a typed cluster (issue 27): per-type utilisation and wait reasons that name the type.

Nodes ``v0`` (4 × V100M32), ``t0`` and ``t1`` (4 × T4 each), 8 steps of 30 min (4 h) from 16:00Z; the service
``chat`` holds 1 GPU throughout.
R runs on all of ``v0`` for 3 more steps; V (4 GPUs, V100M32 only, 2 steps) and T (4 GPUs, T4 only, 2 steps) are
queued. The priority planner starts T at once on a T4 node and V at step 3 (17:30Z), when R leaves ``v0``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from optimizer.planners import plan
from optimizer.problem import Cluster, Job, Node, PlanSettings, Problem, RunningJob, Service, SizeOption
from optimizer.verify import verify
from pipelines.report import write_risk_report
from pipelines.report.waits import eligible_free_of_batch, plan_view, type_utilization, wait_reason
from pipelines.stages.outputs import report_inputs

T0 = datetime(2025, 3, 16, 16, tzinfo=UTC)


#: the service of the module docstring: 1 GPU throughout
CHAT = Service("chat", (1,) * 8, 1, 1, 0, 1)


def _inputs(t_gpus: int = 4, chat: Service = CHAT):
    cluster = Cluster(n_gpus=0, horizon_steps=8, nodes=(Node("v0", 4, "V100M32"), Node("t0", 4, "T4"),
                                                        Node("t1", 4, "T4")))
    jobs = (Job("V", "training", 1.0, 0, (SizeOption(4, 2),), gpu_types=("V100M32",)),
            Job("T", "training", 1.0, 0, (SizeOption(t_gpus, 2),), gpu_types=("T4",)))
    problem = Problem(cluster, PlanSettings(), (chat,), jobs, (RunningJob("R", "training", 1.0, 4, 0, 3),), ())
    p = plan(problem, "priority")
    assert verify(p, problem) == []
    assert {a.job_id: a.start_step for a in p.assignments} == {"R": 0, "T": 0, "V": 3}
    return report_inputs(problem, p, T0, written_at=T0)


def test_per_type_utilisation_and_a_wait_reason_naming_the_type(tmp_path):
    inp = _inputs()
    # V100M32: R 3 steps + V 2 steps on 4 GPUs = 20 cells x 0.5 h = 10 GPU-h of 4 x 4 h; T4: T 2 steps x 4 = 4 GPU-h of 32
    assert type_utilization(inp) == [("V100M32", 4, 10.0), ("T4", 8, 4.0)]
    paths = write_risk_report(tmp_path, inp, "run-t")
    page = paths["risk_report.md"].read_text()
    assert ("| Per GPU type (batch work) | V100M32 4 GPUs: 62.5 % (10 GPU-h); T4 8 GPUs: 12.5 % (4 GPU-h); "
            "real-time is counted on the whole cluster, not by type |") in page
    # V waits for its type: the one V100M32 node is R's until 17:30Z, while the other T4 node's 4 GPUs are free
    assert "needs 4 × V100M32: all 1 V100M32 node busy until 2025-03-16 17:30Z; 4 T4 free of batch work but not eligible" \
        in page


def test_spare_real_time_gpus_are_not_offered_to_a_job_whose_type_is_full_of_batch_work():
    # as _inputs, but T takes 2 GPUs and chat holds 3 GPUs for a demand of 1 (swap cap 0: it cannot shrink): at 16:00Z
    # 12 - 4 (R) - 2 (T) - 3 = 3 idle, + 2 held above demand >= 4 -- cluster-wide, shrinking real-time would make room
    # for V; but V's only node (v0) is R's, so it would not
    inp = _inputs(t_gpus=2, chat=Service("chat", (1,) * 8, 1, 3, 0, 3))
    problem = inp.problem
    view = plan_view(inp)
    v = wait_reason(inp, problem.job("V"), 3, view)
    assert v.startswith("needs 4 × V100M32: all 1 V100M32 node busy until 2025-03-16 17:30Z; ")
    assert "real-time holds 3 GPUs" in v and "3 of 12 GPUs are idle" in v
    assert "would fit" not in v and "swap cap" not in v
    assert eligible_free_of_batch(inp, view, problem.job("V"), 0) == 0
    assert eligible_free_of_batch(inp, view, problem.job("V"), 3) == 4


def test_a_job_no_node_can_run_is_listed_first_in_what_to_do_first(tmp_path):
    from dataclasses import replace

    from pipelines.flows.publish import unplannable_jobs

    class _Ws:  # the workspace's cluster as unplannable_jobs reads it
        class cluster:  # noqa: N801
            node_specs = {"v0": type("S", (), {"gpu_type": "V100M32"}), "t0": type("S", (), {"gpu_type": "T4"})}

    why = unplannable_jobs(_Ws, {"dropped_no_eligible_type": ["H"]})
    assert why == [("H", "it asks only for GPU types no node of this cluster has (the cluster's: T4, V100M32); add "
                         "nodes of a type it accepts, or change its request")]
    assert unplannable_jobs(_Ws, None) == [] and unplannable_jobs(_Ws, {"typed_jobs": 2}) == []
    inp = replace(_inputs(), unplannable=tuple(why))
    page = write_risk_report(tmp_path, inp, "run-h")["risk_report.md"].read_text()
    first = page[page.index("## What to do first"):]
    assert first.splitlines()[2] == ("- **`H`**: not planned: it asks only for GPU types no node of this cluster has "
                                     "(the cluster's: T4, V100M32); add nodes of a type it accepts, or change its "
                                     "request.")
    assert "Nothing at risk: every queued job" not in page
