"""Prefect 3 flows: ``train_forecasters``, ``plan``, ``benchmark`` and ``run_all`` (DESIGN §7).

Conventions (``docs/STACK.md`` and Prefect's own examples):

- One ``@task`` per step, each calling plain functions of :mod:`pipelines.queue`,
  :mod:`pipelines.risk_report`, the optimizer and the forecasters; tasks pass **file paths**,
  never data frames.
- Tasks that can hang carry ``timeout_seconds`` (case C26): the solve, and the nightly
  training (run one after the other in the flow's thread). HiGHS has its own time limit; the
  task timeout (``Settings.solve_timeout_s``, larger) is the guard for anything else that hangs.
  A timed-out task fails its flow run (state Failed, never Running). Prefect enforces a sync
  task's timeout with SIGALRM when the flow runs in the main thread (a sleep or a blocking
  call is interrupted); in a worker thread it can only inject an exception between Python
  bytecodes, so flows carry no flow-level timeout (it would move them off the main thread)
  and the parallel training inside ``run_all`` has none.
- Retries only on steps whose failure is transient: MLflow logging (SQLite "database is
  locked"). Training, solving and verifying are deterministic and never retried.
- The MLflow store is initialised once, before any fan-out (:func:`pipelines.tracking.init_store`).
- Outputs are built in a temporary run folder and published atomically with a ``latest``
  pointer (:mod:`pipelines.run_folder`); a failed or killed run leaves the previous one intact.

Settings come from :func:`pipelines.config.load_settings` (environment) in every task, so a
served deployment and the tests configure paths and the tracking URI through the environment.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines.config import apply_env_defaults, load_settings

apply_env_defaults()

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

# ---------------------------------------------------------------- progress hook

ProgressHook = Callable[[str, str], None]
_progress: ProgressHook | None = None


def set_progress(hook: ProgressHook | None) -> None:
    """Install a callback ``hook(stage, event)`` (event ``start``/``done``) used by the CLI's bars."""
    global _progress
    _progress = hook


def _stage(stage: str, event: str) -> None:
    if _progress is not None:
        _progress(stage, event)


class _Stage:
    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        _stage(self.name, "start")

    def __exit__(self, *exc: object) -> None:
        _stage(self.name, "done" if exc[0] is None else "failed")


# ---------------------------------------------------------------- tasks


@task(name="ingest-traffic", cache_policy=NO_CACHE)
def ingest_traffic(work_dir: str) -> str:
    """Read the shipped hourly ServeGen traffic and service settings; write ``traffic.parquet``.

    Returns the path of the written parquet (``service, ts, value``; UTC hours).
    """
    from pipelines import queue

    with _Stage("ingest traffic"):
        return str(queue.ingest_traffic(load_settings(), Path(work_dir)))


@task(name="train-or-load", cache_policy=NO_CACHE)
def train_or_load(kind: str, retrain: bool = False) -> str:
    """Train the ``kind`` job forecaster (and log it to MLflow) or load the current one.

    Returns the path of the current model file.
    """
    from pipelines import queue

    with _Stage(f"forecaster {kind}"):
        return str(queue.train_or_load(load_settings(), kind, retrain=retrain))


@task(name="fit-profiles", cache_policy=NO_CACHE)
def fit_profiles(traffic_path: str, work_dir: str, as_of: datetime, log: bool = True) -> str:
    """Fit the weekly real-time profiles up to ``as_of``; write ``profiles.pkl``; return its path."""
    from pipelines import queue

    with _Stage("real-time profiles"):
        return str(queue.fit_profiles(load_settings(), Path(traffic_path), Path(work_dir), as_of, log=log))


@task(name="build-problem", cache_policy=NO_CACHE)
def build_problem(model_paths: dict[str, str], profiles_path: str, traffic_path: str, work_dir: str,
                  start: datetime) -> dict[str, str]:
    """Queue (real-trace mix + generated LLM jobs) -> forecasts -> optimizer problem.

    Writes ``queue.parquet``, ``forecasts.parquet``, ``problem.json`` and ``bands.parquet`` into
    ``work_dir``; returns name -> path.
    """
    from pipelines import queue

    with _Stage("queue + forecasts"):
        paths = queue.build_problem(load_settings(), {k: Path(v) for k, v in model_paths.items()},
                                    Path(profiles_path), Path(traffic_path), Path(work_dir), start)
        return {k: str(v) for k, v in paths.items()}


@task(name="solve", cache_policy=NO_CACHE)
def solve(problem_path: str, planner: str, plan_path: str) -> str:
    """Plan the problem with ``planner``; write the plan JSON; return its path.

    Raises:
        RuntimeError: the solver ended without any valid plan (C13 b): the message gives the
            status, the time limit and the solver's message.
    """
    from optimizer.planners import plan as run_planner
    from optimizer.problem import Problem

    with _Stage(f"solve ({planner})"):
        problem = Problem.from_dict(json.loads(Path(problem_path).read_text()))
        result = run_planner(problem, planner)
        if result.status in ("no_solution", "infeasible", "unbounded_or_infeasible", "solver_error") and \
                not result.assignments and not result.service_gpus:
            raise RuntimeError(
                f"no feasible allocation found: status {result.status} after time limit "
                f"{problem.settings.time_limit_s:g} s ({result.message})")
        from pipelines.atomic import atomic_write_text

        atomic_write_text(Path(plan_path), json.dumps(result.to_dict()))
        return plan_path


@task(name="verify", cache_policy=NO_CACHE)
def verify_plan(problem_path: str, plan_path: str) -> str:
    """Check the plan with the independent verifier; return its status.

    Raises:
        RuntimeError: any violation (the plan is never written as valid), or status
            ``no_solution`` (C13 b).
    """
    from optimizer.plan import Plan
    from optimizer.problem import Problem
    from optimizer.verify import verify

    problem = Problem.from_dict(json.loads(Path(problem_path).read_text()))
    plan = Plan.from_dict(json.loads(Path(plan_path).read_text()))
    if plan.status == "no_solution":
        raise RuntimeError(f"no feasible allocation within the time limit of {problem.settings.time_limit_s:g} s")
    violations = verify(plan, problem)
    if violations:
        raise RuntimeError(f"plan failed verification ({len(violations)} violations): {violations[:3]}")
    return plan.status


@task(name="write-outputs", cache_policy=NO_CACHE)
def write_outputs(work_dir: str, problem_path: str, plan_path: str, run_name: str,
                  extra: dict[str, str] | None = None) -> dict[str, str]:
    """Write ``plan.parquet``, ``risk_report.parquet``, ``risk_report.md`` and plots into ``work_dir``."""
    from pipelines import queue

    with _Stage("plan + risk report"):
        paths = queue.write_outputs(load_settings(), Path(work_dir), Path(problem_path), Path(plan_path),
                                    run_name, {k: Path(v) for k, v in (extra or {}).items()})
        return {k: str(v) for k, v in paths.items()}


@task(name="log-plan", retries=2, retry_delay_seconds=3, cache_policy=NO_CACHE)
def log_plan(run_dir: str, run_name: str, planner: str) -> str:
    """Log one plan run to the ``plans`` experiment (params, metrics, artifacts); return the run id.

    Retried: SQLite lock contention is transient.
    """
    from pipelines import queue

    with _Stage("mlflow"):
        return queue.log_plan_run(load_settings(), Path(run_dir), run_name, planner)


# ---------------------------------------------------------------- flows


def _scheduled_time(scheduled_at: datetime | None) -> datetime:
    """The run's scheduled time: explicit, else Prefect's scheduled start, else now (UTC)."""
    if scheduled_at is not None:
        return scheduled_at if scheduled_at.tzinfo else scheduled_at.replace(tzinfo=UTC)
    try:
        from prefect.runtime import flow_run

        ts = flow_run.scheduled_start_time
        if ts is not None:
            return datetime.fromtimestamp(ts.timestamp(), tz=UTC)
    except Exception:  # noqa: BLE001 - outside a flow run
        pass
    return datetime.now(UTC)


def _plan_into(rf: Any, problem_path: str, planner: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    s = load_settings()
    plan_path = str(Path(rf.tmp_path) / "plan.json")
    solve.with_options(timeout_seconds=s.solve_timeout_s)(problem_path, planner, plan_path)
    status = verify_plan(problem_path, plan_path)
    outs = write_outputs(str(rf.tmp_path), problem_path, plan_path, rf.name, extra)
    return {"status": status, "outputs": outs}


@flow(name="plan", log_prints=False)
def plan_flow(problem_path: str | None = None, planner: str = "milp", out_dir: str | None = None,
              scheduled_at: datetime | None = None) -> dict[str, Any]:
    """Re-plan once: build the current problem (or read ``problem_path``), solve, verify, publish.

    The run folder is labelled by the UTC slot of the scheduled time (a late catch-up run keeps
    its own slot and never moves ``latest`` back, case C25). Without ``problem_path`` the plan
    starts at the scheduled time or at the end of the available traffic data, whichever is
    earlier (the shipped data ends in 2025). Logs one run to the ``plans`` experiment after the
    folder is published.

    Returns ``{"run_dir", "slot", "latest_moved", "status", "mlflow_run_id"}``.
    """
    from pipelines import tracking
    from pipelines.run_folder import RunFolder

    from pipelines import queue

    s = load_settings()
    tracking.init_store(s)
    when = _scheduled_time(scheduled_at)
    out = Path(out_dir) if out_dir else s.runs_dir / "replan"
    rf = RunFolder.begin(out, when, step_minutes=s.step_minutes)
    try:
        extra: dict[str, str] = {}
        if problem_path is None:
            # plan from the newest data available: the shipped traffic ends before "now"
            start = min(when, queue.plan_start(s))
            traffic = ingest_traffic(str(rf.tmp_path))
            models = {k: train_or_load(k) for k in queue.JOB_KINDS}
            profiles = fit_profiles(traffic, str(rf.tmp_path), start, log=False)
            extra = build_problem(models, profiles, traffic, str(rf.tmp_path), start)
            problem_path = extra["problem"]
        else:
            import shutil

            shutil.copyfile(problem_path, rf.tmp_path / "problem.json")
            problem_path = str(rf.tmp_path / "problem.json")
        res = _plan_into(rf, problem_path, planner, extra)
        info, moved = rf.commit()
    except BaseException:
        rf.abort()
        raise
    rid = log_plan(str(info.path), info.path.name, planner)
    return {"run_dir": str(info.path), "slot": info.slot, "latest_moved": moved, "status": res["status"],
            "mlflow_run_id": rid}


@flow(name="train_forecasters", log_prints=False)
def train_forecasters(scheduled_at: datetime | None = None, kinds: list[str] | None = None,
                      force: bool = False) -> dict[str, Any]:
    """Nightly retraining: refit every job forecaster (logged to MLflow, registered with the
    ``champion`` alias). The real-time profiles are refitted on the trailing window at every
    planning run (DESIGN §4.4), so they need no nightly step.

    One run per local day of ``Settings.nightly_timezone``: a second scheduled run for a local
    day that already retrained (possible around a DST change) is skipped, unless ``force``.

    Returns ``{"local_day", "skipped", "models": {kind: path}}``.
    """
    from pipelines import deployments, queue, tracking

    s = load_settings()
    tracking.init_store(s)
    when = _scheduled_time(scheduled_at)
    day = deployments.local_day(when, s.nightly_timezone)
    marker = s.models_dir / "nightly_days.json"
    if not force and not deployments.claim_local_day(marker, day):
        return {"local_day": day.isoformat(), "skipped": True, "models": {}}
    models = {}
    for kind in kinds or queue.JOB_KINDS:
        models[kind] = train_or_load.with_options(timeout_seconds=s.train_timeout_s)(kind, retrain=True)
    return {"local_day": day.isoformat(), "skipped": False, "models": models}


@flow(name="benchmark", log_prints=False)
def benchmark(scenario: str = "all", quick: bool = True, out_dir: str | None = None) -> dict[str, Any]:
    """Run the rolling-horizon benchmark (``pipelines.bench``, ``docs/benchmark.md``) and log it to the
    ``benchmarks`` experiment. Returns ``{"out_dir", "mlflow_run_id"}``."""
    from pipelines import queue, tracking

    s = load_settings()
    tracking.init_store(s)
    out = Path(out_dir) if out_dir else s.runs_dir / "bench"
    with _Stage("benchmark"):
        return queue.run_benchmark(s, scenario, quick, out)


@flow(name="run_all", log_prints=False)
def run_all(out_dir: str | None = None, retrain: bool = False, planner: str = "milp") -> dict[str, Any]:
    """The main job on the shipped real data (DESIGN §7.1, ``gpuplan run``).

    ingest traffic -> train or load the job forecasters -> fit the real-time profiles -> build
    the queue and forecasts -> plan 24 h (MILP) -> verify -> write the run folder atomically ->
    move ``latest`` -> log to MLflow.

    The plan starts at :func:`pipelines.queue.plan_start` (24 h before the end of the shipped
    traffic, so the last shipped day is the actual the forecast is shown against).

    Returns ``{"run_dir", "latest", "status", "mlflow_run_id", "outputs", "wall_s"}``.
    """
    from pipelines import queue, tracking
    from pipelines.run_folder import LATEST, RunFolder

    t0 = time.monotonic()
    s = load_settings()
    tracking.init_store(s)
    out = Path(out_dir) if out_dir else s.runs_dir
    start = queue.plan_start(s)
    rf = RunFolder.begin(out, start, step_minutes=s.step_minutes)
    try:
        traffic = ingest_traffic(str(rf.tmp_path))
        # independent work in Prefect's thread pool (LightGBM and numpy release the GIL)
        # (no task timeout here: Prefect cannot interrupt a worker thread, and a flow-level
        # timeout would move the flow off the main thread, where the solve task's alarm-based
        # timeout_seconds works; training is bounded by LightGBM's fixed number of rounds)
        futures = {k: train_or_load.submit(k, retrain=retrain) for k in queue.JOB_KINDS}
        profiles_f = fit_profiles.submit(traffic, str(rf.tmp_path), start)
        models = {k: f.result() for k, f in futures.items()}
        profiles = profiles_f.result()
        extra = build_problem(models, profiles, traffic, str(rf.tmp_path), start)
        res = _plan_into(rf, extra["problem"], planner, extra)
        info, moved = rf.commit()
    except BaseException:
        rf.abort()
        raise
    rid = log_plan(str(info.path), info.path.name, planner)
    return {"run_dir": str(info.path), "latest": str(out / LATEST), "latest_moved": moved,
            "status": res["status"], "mlflow_run_id": rid, "tracking_uri": s.tracking_uri,
            "outputs": {k: str(info.path / Path(v).name) for k, v in res["outputs"].items()},
            "wall_s": round(time.monotonic() - t0, 1)}
