"""Stages: queue -> problem conversion, running-job blocks, the real-trace queue mix; benchmark logging."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from domain.kinds import JOB_KINDS, QOS_PRIORITY
from optimizer.problem import Problem
from pipelines.catalog import Catalog
from pipelines.config.settings import load_settings
from pipelines.flows.bench import run_benchmark
from pipelines.flows.tasks import cluster_shape
from pipelines.io.errors import InputError
from pipelines.stages import problem as P
from pipelines.stages.queue import shipped as queue
from pipelines.tracking import runs as tracking_runs
from pipelines.tracking import store as tracking_store
from pipelines.workspace.config import ServiceSettings

T0 = datetime(2025, 3, 16, 16, tzinfo=UTC)
#: the shipped m-small service's GPU bounds (data/traffic/services.json)
SERVICES = [ServiceSettings(service="m-small", file="m-small.csv", timezone="Asia/Shanghai",
                            capacity_per_gpu_per_h=1_100_000, headroom=0.1, min_gpus=1, max_gpus=16, swap_cap_gpus=4)]


def test_running_blocks_are_aligned_first_fit_largest_first():
    assert P.assign_running_blocks([1, 4, 2], 8) == [6, 0, 4]
    with pytest.raises(InputError, match=r"no aligned block of 4\)"):
        P.assign_running_blocks([4, 8], 8)


def test_to_problem_hand_values():
    s = load_settings(n_gpus=8, horizon_steps=4)
    jobs = pd.DataFrame({
        "job_id": ["q1", "r1"], "kind": ["training", "quantization"], "priority": [2.0, 1.0],
        "state": ["queued", "running"], "submitted_at": [pd.Timestamp(T0)] * 2,
        "started_at": [pd.NaT, pd.Timestamp("2025-03-16 15:00", tz="UTC")],
        "deadline_at": [pd.Timestamp("2025-03-16 17:10", tz="UTC"), pd.NaT],
        "gpus_requested": [2, 4], "gpus_pred": [4, 2],
        "duration_p10_h": [0.5, 1.0], "duration_p50_h": [1.2, 2.2], "duration_p90_h": [2.0, 3.0]})
    demand = pd.DataFrame({"service": "m-small", "step": range(4), "demand_gpus_p50": [1, 1, 2, 2],
                           "demand_gpus_p90": [2, 2, 3, 3], "current_gpus": 2})
    d = P.problem_document(cluster_shape(s), SERVICES, jobs, demand, T0, time_limit_s=s.solve_time_limit_s)
    assert d["jobs"] == [{"job_id": "q1", "kind": "training", "priority": 2.0, "release_step": 0, "gpus": 4,
                          "duration_steps": 3, "deadline_step": 3}]
    # started 1 h ago, P50 2.2 h -> 1.2 h left -> 3 steps; max(requested 4, predicted 2) GPUs at offset 0
    assert d["running"] == [{"job_id": "r1", "kind": "quantization", "priority": 1.0, "gpus": 4, "block_offset": 0,
                             "remaining_steps": 3}]
    svc = d["services"][0]
    assert svc["demand_gpus"] == [2, 2, 3, 3] and svc["current_gpus"] == 2 and svc["swap_cap_gpus"] == 4
    assert Problem.from_dict(d).n_gpus == 8


def test_passed_deadline_keeps_the_job_without_deadline_step_and_is_named():
    """A deadline already passed (15:30 < plan start) is not step 1: the job stays, no deadline_step, one line."""
    s = load_settings(n_gpus=8, horizon_steps=4)
    jobs = pd.DataFrame({
        "job_id": ["late", "ontime"], "kind": ["training", "training"], "priority": [2.0, 1.0],
        "state": ["queued", "queued"], "submitted_at": [pd.Timestamp(T0)] * 2, "started_at": [pd.NaT, pd.NaT],
        "deadline_at": [pd.Timestamp(T0) - pd.Timedelta(minutes=30), pd.Timestamp("2025-03-16 17:10", tz="UTC")],
        "gpus_requested": [2, 2], "gpus_pred": [2, 2],
        "duration_p10_h": [0.5, 0.5], "duration_p50_h": [1.2, 1.2], "duration_p90_h": [2.0, 2.0]})
    demand = pd.DataFrame({"service": "m-small", "step": range(4), "demand_gpus_p50": [1, 1, 2, 2],
                           "demand_gpus_p90": [2, 2, 3, 3], "current_gpus": 2})
    d = P.problem_document(cluster_shape(s), SERVICES, jobs, demand, T0, time_limit_s=s.solve_time_limit_s)
    by_id = {j["job_id"]: j for j in d["jobs"]}
    assert set(by_id) == {"late", "ontime"}
    assert "deadline_step" not in by_id["late"]
    assert by_id["ontime"]["deadline_step"] == 3
    assert P.passed_deadlines(jobs, T0) == ["late's deadline 15:30Z has passed"]
    assert Problem.from_dict(d).n_gpus == 8


def test_queue_mixes_real_trace_and_generated_jobs():
    s = load_settings()
    pods = Catalog(s).trace_pods()
    q = queue.build_queue(pods, s.seed, T0)
    allq = pd.concat(q.values(), ignore_index=True)
    trace = allq[allq["source"] == "alibaba-openb"]
    assert len(trace) == queue.N_TRACE_JOBS
    assert set(trace["priority"]) <= set(QOS_PRIORITY.values())
    assert (trace["submitted_at"] <= pd.Timestamp(T0)).all()
    assert (trace["submitted_at"] >= pd.Timestamp(T0) - pd.Timedelta(hours=24)).all()
    gen = allq[(allq["source"] == "generated") & (allq["state"] == "queued")]
    assert len(gen) == queue.N_LLM_JOBS and set(gen["kind"]) == set(JOB_KINDS)
    assert (allq["state"] == "running").sum() == queue.N_RUNNING
    assert allq["job_id"].is_unique
    again = pd.concat(queue.build_queue(pods, s.seed, T0).values(), ignore_index=True)
    pd.testing.assert_frame_equal(allq, again)  # seeded


def test_benchmark_logs_one_run(tmp_path):
    s = load_settings(tracking_uri=f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}", mlruns_dir=tmp_path / "ml",
                      artifact_root=tmp_path / "ml" / "artifacts")
    tracking_store.init_store(s)
    res = run_benchmark(s, "mixed", True, tmp_path / "bench")
    assert res["violations"] == 0 and res["verified_plans"] > 0
    runs = tracking_runs.finished_runs(s, "benchmarks")
    assert len(runs) == 1 and runs[0].data.params["scenarios"] == "mixed"
    rows = pd.read_csv(Path(res["out_dir"]) / "bench.csv")
    for r in rows.itertuples():
        assert runs[0].data.metrics[f"mixed.{r.planner}.utilization_pct"] == pytest.approx(r.utilization_pct)


def test_to_problem_elastic_sizes_with_efficiency():
    s = load_settings(n_gpus=8, horizon_steps=4)
    jobs = pd.DataFrame({
        "job_id": ["q1"], "kind": ["training"], "priority": [2.0], "state": ["queued"],
        "submitted_at": [pd.Timestamp(T0)], "started_at": [pd.NaT], "deadline_at": [pd.NaT],
        "gpus_requested": [4], "gpus_pred": [4], "duration_p10_h": [1.0], "duration_p50_h": [1.2],
        "duration_p90_h": [2.0], "size_options": ['[{"gpus": 8, "duration_h": 0.7}]']})
    demand = pd.DataFrame({"service": "m-small", "step": range(4), "demand_gpus_p50": [1] * 4,
                           "demand_gpus_p90": [1] * 4, "current_gpus": 1})
    d = P.problem_document(cluster_shape(s), SERVICES, jobs, demand, T0, time_limit_s=s.solve_time_limit_s)
    # 4 GPUs x 3 steps = 12 GPU-steps at the request; 8 GPUs x 2 steps = 16 -> efficiency 0.75
    assert d["jobs"][0]["sizes"] == [{"gpus": 4, "duration_steps": 3, "efficiency": 1.0},
                                     {"gpus": 8, "duration_steps": 2, "efficiency": 0.75}]
    assert [o.gpus for o in Problem.from_dict(d).jobs[0].sizes] == [4, 8]


def test_problem_is_built_once_as_a_validated_problem():
    s = load_settings(n_gpus=8, horizon_steps=4)
    jobs = pd.DataFrame({
        "job_id": ["q1"], "kind": ["training"], "priority": [2.0], "state": ["queued"],
        "submitted_at": [pd.Timestamp(T0)], "started_at": [pd.NaT], "deadline_at": [pd.NaT], "source": ["generated"],
        "gpus_requested": [4], "gpus_pred": [4], "duration_p10_h": [1.0], "duration_p50_h": [1.2],
        "duration_p90_h": [2.0], "flags": [""], "size_options": [None]})
    demand = pd.DataFrame({"service": "m-small", "step": range(4), "ts": pd.Timestamp(T0), "traffic_p50": 1.0,
                           "traffic_p90": 1.0, "demand_gpus_p50": [1] * 4, "demand_gpus_p90": [1] * 4,
                           "current_gpus": 1})
    problem = P.build_problem(cluster_shape(s), SERVICES, jobs, demand, T0, time_limit_s=s.solve_time_limit_s)
    assert isinstance(problem, Problem) and problem.jobs[0].requested.duration_steps == 3
    with pytest.raises(InputError, match="job forecasts: missing column"):
        P.build_problem(cluster_shape(s), SERVICES, jobs.drop(columns="gpus_pred"), demand, T0,
                        time_limit_s=s.solve_time_limit_s)


def test_summary_is_strict_json_when_the_bound_is_infinite():
    # a solve stopped on its time limit without a bound: plan.json had null, summary.json had Infinity
    import dataclasses
    import json

    from optimizer.planners import plan as run_planner
    from pipelines.io.plan_io import read_problem
    from pipelines.stages import outputs

    problem = read_problem(Path(__file__).resolve().parents[3] / "data" / "examples" / "valley.json")
    base = run_planner(problem, "fifo")
    plan = dataclasses.replace(base, bound=float("inf"), gap=float("nan"))
    demand = pd.DataFrame([{"service": s.service, "step": t, "demand_gpus_p50": d, "demand_gpus_p90": d}
                           for s in problem.services for t, d in enumerate(s.demand_gpus)])
    doc = outputs.summary("r", datetime(2025, 1, 1, tzinfo=UTC), problem, plan, demand, {})
    text = json.dumps(doc, allow_nan=False)  # raises on Infinity/NaN
    back = json.loads(text)
    assert back["bound"] is None and back["mip_gap"] is None
    assert back["objective"] == pytest.approx(base.objective)
    assert back["status"] == "feasible" and back["source"] == "fifo" and back["fallback"] is False


def test_plan_table_of_a_problem_without_jobs_has_every_column():
    """A queue with no GPU job (an operator's CPU-only export) plans services only: plan.parquet still has its
    job columns (was: KeyError 'start_step' in plan_tables, found by an operator trial)."""
    from optimizer.planners import plan as make_plan
    from pipelines.stages.outputs import plan_tables

    demand = pd.DataFrame({"service": "m-small", "step": range(4), "demand_gpus_p50": [1, 1, 2, 2],
                           "demand_gpus_p90": [2, 2, 3, 3], "current_gpus": 2})
    s = load_settings(n_gpus=8, horizon_steps=4)
    no_jobs = pd.DataFrame({
        "job_id": ["q1"], "kind": ["training"], "priority": [2.0], "state": ["queued"],
        "submitted_at": [pd.Timestamp(T0)], "started_at": [pd.NaT], "deadline_at": [pd.NaT],
        "gpus_requested": [2], "gpus_pred": [4], "duration_p10_h": [0.5], "duration_p50_h": [1.2],
        "duration_p90_h": [2.0]}).iloc[0:0]
    d = P.problem_document(cluster_shape(s), SERVICES, no_jobs, demand, T0, time_limit_s=s.solve_time_limit_s)
    problem = Problem.from_dict(d)
    assert (len(problem.jobs), len(problem.running)) == (0, 0)
    df = plan_tables(problem, make_plan(problem, "fifo"), T0)
    assert df["row_type"].value_counts().to_dict() == {"gpu_step": 32, "service_step": 4}
    assert {"job_id", "start_step", "end_step", "block_offset", "running"} <= set(df.columns)
    assert str(df["start_step"].dtype) == "Int64"


def test_traffic_that_starts_after_the_plan_start_is_one_line():
    """A queue export older than every traffic hour: an InputError naming the service and both times (was: a
    ValueError traceback from an empty reduction in the range guard)."""
    from pipelines.stages.realtime import fit_realtime_forecasts

    ts = pd.date_range("2025-03-02", periods=72, freq="h", tz="UTC")
    traffic = pd.DataFrame({"service": "m-small", "ts": ts, "value": 100.0, "excluded": False})
    with pytest.raises(InputError, match=r"traffic of service 'm-small': no hour before the plan start "
                                         r"2024-07-29T12:00Z .*its first hour is 2025-03-02T00:00Z"):
        fit_realtime_forecasts(SERVICES, traffic, datetime(2024, 7, 29, 12, tzinfo=UTC))
