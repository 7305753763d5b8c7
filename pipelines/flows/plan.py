"""The plan flows: ``run_all`` (``gpuplan run``) and ``plan`` (the re-plan deployment) share one :func:`plan_once`.

Each flow run loads the workspace and its :class:`pipelines.config.settings.Settings` once
(:func:`workspace_settings`) and passes both down to every task; the side of the workspace (shipped files
or an operator's store, :mod:`pipelines.flows.jobs`) is chosen once. A plan is: inputs -> real-time
forecasts -> job forecasts -> problem -> solve (task timeout) -> verify -> outputs, built in a
temporary run folder published atomically with a ``latest`` pointer (:mod:`pipelines.io.run_folder`);
then it is logged to MLflow and published as Prefect artifacts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from optimizer.problem import Problem
from pipelines.catalog import Catalog, RunCatalog, read_problem_file
from pipelines.config.settings import Settings, load_settings, open_workspace
from pipelines.flows import observe
from pipelines.flows.jobs import PlanInputs, ShippedJobs, StoreJobs, job_source
from pipelines.flows.progress import Stage
from pipelines.flows.publish import log_inputs, log_plan, publish_plan_or_warn, write_outputs
from pipelines.flows.tasks import (
    build_problem,
    demand,
    fit_realtime_forecasts,
    forecasts_files,
    log_realtime_forecasts,
    solve,
    verify_plan,
    write_realtime,
)
from pipelines.io.run_folder import LATEST, RunFolder, claim_slot
from pipelines.io.slots import slot_label
from pipelines.tracking import store as tracking_store
from pipelines.workspace.load import Workspace

log = observe.run_logger


def workspace_settings(workspace: str | None, **overrides: object) -> tuple[Workspace, Settings]:
    """The flow run's workspace (``workspace``, else ``$GPUPLAN_WORKSPACE``, else the shipped demo) and settings.

    ``gpuplan.toml`` is parsed here, once per flow run (:func:`pipelines.config.settings.open_workspace`: not
    again when ``gpuplan run`` parsed it before starting the flow); nothing is written to the environment.

    Raises:
        pipelines.io.errors.InputError: the workspace is missing or invalid.
    """
    ws = open_workspace(Path(workspace).expanduser().resolve() if workspace else None)
    return ws, load_settings(ws, **overrides)


def scheduled_time(scheduled_at: datetime | None) -> datetime:
    """The run's scheduled time: explicit, else Prefect's scheduled start, else now (UTC)."""
    if scheduled_at is not None:
        return scheduled_at if scheduled_at.tzinfo else scheduled_at.replace(tzinfo=UTC)
    try:
        ts = flow_run.scheduled_start_time
        if ts is not None:
            return datetime.fromtimestamp(ts.timestamp(), tz=UTC)
    except Exception:  # noqa: BLE001 - outside a flow run
        pass
    return datetime.now(UTC)


@dataclass(frozen=True)
class PlanResult:
    """One published plan: its folder, whether ``latest`` moved, the verified status, the MLflow run."""

    path: Path
    slot: str
    latest_moved: bool
    status: str
    source: str | None
    fallback: bool
    outputs: dict[str, str]
    mlflow_run_id: str


def build_from_inputs(settings: Settings, jobs_side: ShippedJobs | StoreJobs, run: RunCatalog, inp: PlanInputs,
                      retrain: bool, replan: bool, pending: list[Any] | None = None):
    """Real-time forecasts, job forecasts and demand -> the problem; writes every input table into ``run``.

    ``pending``: every task future started here in the background is appended to it (the caller waits for them
    when a later stage fails: :func:`settle`). Returns ``(problem, queue forecast, demand, fit, the future of the
    forecasts' logging or None)``.
    """
    pending = [] if pending is None else pending
    services, ingested, start = inp.services, inp.ingested, inp.start
    write_realtime(run, ingested, None)
    pending.extend(jobs_side.start_models(retrain))  # the job forecasters train beside the real-time fit
    fit = fit_realtime_forecasts.submit(services, ingested.frame, start, ingested.diagnostics).result()
    write_realtime(run, None, fit)
    # gpuplan run draws and logs each service's forecast (plot + MLflow run); a re-plan every 30 min does not
    logged = None if replan else log_realtime_forecasts.submit(settings, run, fit, start)
    if logged is not None:
        pending.append(logged)
    with Stage("queue + forecasts"):
        queue = jobs_side.forecast(inp)
        if queue.notes is not None:
            run.save("queue_notes", queue.notes)
        dem = demand(settings, services, fit, ingested.frame, start)
        problem = build_problem(settings, services, queue.jobs, dem, start, getattr(jobs_side, "ws", None))
        forecasts_files(run, queue.jobs, dem, problem, queue.queue)
    return problem, queue, dem, fit, logged


def plan_once(settings: Settings, ws: Workspace, out: Path, when: datetime, planner: str, *, replan: bool,
              retrain: bool = False, ingest: bool = True, problem_path: str | None = None) -> PlanResult:
    """One plan of ``ws`` published into ``out`` (module docstring), logged to MLflow and Prefect.

    ``when``: the scheduled time (the slot label; the plan starts there or at the end of the inputs);
    ``replan``: refuse stale inputs (:meth:`pipelines.flows.jobs.StoreJobs.inputs`); ``ingest``: False when
    the caller already ingested the workspace's exports; ``problem_path``: plan that problem file instead.

    Raises:
        pipelines.io.errors.InputError: invalid inputs; RuntimeError: no valid plan (C13 b).
    """
    observe.quiet_bad_input_tracebacks()  # bad input (an infeasible problem) is one line, not engine frames
    jobs_side = job_source(settings, ws)
    pending: list[Any] = []  # background task futures: waited for when a stage fails (settle)
    if problem_path is None:
        inp = jobs_side.inputs(when, replan=replan, ingest=ingest)
        ws.check_plannable()  # after the ingest: the newest node inventory is the cluster
        log_inputs(inp, datetime.now(UTC))
        folder_time = inp.start if not replan else when
    else:
        folder_time = when
    rf = RunFolder.begin(out, folder_time, step_minutes=settings.step_minutes)
    if replan:
        # the slot label of the folder, never the unrounded trigger time (a manual run at 19:20Z is slot 1900Z)
        log().info("replan of workspace %s (%d GPUs) for slot %s (scheduled %s); building in %s", ws.root,
                   settings.n_gpus, rf.slot, f"{when:%Y-%m-%d %H:%MZ}", rf.tmp_path)
    try:
        run = Catalog(settings).run(rf.tmp_path)
        if problem_path is None:
            problem, queue, dem, fit, logged = build_from_inputs(settings, jobs_side, run, inp, retrain, replan,
                                                                 pending)
            start = inp.start
        else:
            problem, queue, dem, fit, logged = read_problem(run, problem_path), None, None, None, None
            start = datetime.now(UTC).replace(second=0, microsecond=0)
        plan = solve.with_options(timeout_seconds=settings.solve_timeout_s)(problem, planner)
        status = verify_plan(problem, plan)  # verified before anything of it is written
        run.save_plan(plan, problem)
        outs = write_outputs(settings, ws, run, rf.name, problem, plan, start, queue, dem, fit)
        if logged is not None:
            logged.result()
        info, moved = rf.commit()
    except BaseException as exc:
        if isinstance(exc, Exception):  # not on Ctrl-C or a kill: that stops now, training or not
            settle(pending)  # before the folder goes: a background task still drawing into it must not crash
        rf.abort()
        raise
    log().info("published run folder %s (status %s, verified)%s", info.path, status,
               "; latest moved to it" if moved else "; latest NOT moved: a newer slot is published")
    rid = log_plan(settings, ws, str(info.path), info.path.name, planner)
    publish_plan_or_warn(settings, str(info.path), rid, str(ws.root))
    return PlanResult(info.path, info.slot, moved, status, None if plan.source is None else str(plan.source),
                      plan.fallback, outs, rid)


def settle(futures: list[Any]) -> None:
    """Wait for every background task future of a failed plan; their own outcome is not raised.

    Without it a failed stage (an infeasible problem) left the flow while ``log-profiles`` or ``train-or-load``
    still ran: Prefect's task runner then cancelled them, each logging a crash with its traceback after the
    real error. A future that failed too is logged as one warning line.
    """
    for f in futures:
        f.wait()
        state = f.state
        if state.is_failed() or state.is_crashed():
            log().warning("background task %s did not finish: %s", getattr(f, "task_run_id", "?"), state.message)


def read_problem(run: RunCatalog, problem_path: str) -> Problem:
    """The problem file ``problem_path``, copied into the run folder; the plan starts now."""
    problem = read_problem_file(Path(problem_path))
    run.save_problem(problem)
    log().info("inputs: problem file %s (%d jobs, %d running, %d services); plan starts now, %s",
               problem_path, len(problem.jobs), len(problem.running), len(problem.services),
               f"{datetime.now(UTC):%Y-%m-%d %H:%MZ}")
    return problem


@flow(name="plan", log_prints=False)
def plan_flow(problem_path: str | None = None, planner: str | None = None, out_dir: str | None = None,
              scheduled_at: datetime | None = None, workspace: str | None = None) -> dict[str, Any]:
    """Re-plan once: build the current problem (or read ``problem_path``), solve, verify, publish.

    The run folder is labelled by the UTC slot of the scheduled time (a late catch-up run keeps
    its own slot and never moves ``latest`` back, case C25). Without ``problem_path`` the plan
    starts at the scheduled time or at the end of the available traffic data, whichever is
    earlier (the shipped data ends in 2025); a workspace's stale exports fail the run. Logs one
    run to the ``plans`` experiment after the folder is published.

    At most one re-plan per slot runs (:func:`pipelines.io.run_folder.claim_slot`): a second worker's run of the
    same slot, while the first is running or after it published, logs ``replan of slot S skipped: <why>`` and
    returns ``status`` ``"skipped"`` (``run_dir`` None, ``skipped`` the reason).

    ``planner``: the planner (:data:`optimizer.planners.PLANNERS`); None: the workspace's ``[replan] planner``
    (default ``milp``).

    Returns ``{"run_dir", "slot", "latest_moved", "status", "source", "fallback", "mlflow_run_id"}``.
    """
    ws, s = workspace_settings(workspace)
    planner = planner or ws.config.replan.planner
    tracking_store.init_store(s)
    out = Path(out_dir) if out_dir else s.runs_dir / "replan"
    when = scheduled_time(scheduled_at)
    slot = slot_label(when, s.step_minutes)
    with claim_slot(out, slot) as skip:  # two workers, one slot: one plans, the other skips (issue 32)
        if skip is not None:
            log().info("replan of slot %s skipped: %s", slot, skip)
            return {"run_dir": None, "slot": slot, "latest_moved": False, "status": "skipped", "skipped": skip,
                    "source": None, "fallback": False, "mlflow_run_id": None}
        res = plan_once(s, ws, out, when, planner, replan=True, problem_path=problem_path)
    return {"run_dir": str(res.path), "slot": res.slot, "latest_moved": res.latest_moved, "status": res.status,
            "source": res.source, "fallback": res.fallback, "mlflow_run_id": res.mlflow_run_id}


@flow(name="run_all", log_prints=False)
def run_all(out_dir: str | None = None, retrain: bool = False, planner: str | None = None,
            workspace: str | None = None, ingested: bool = False) -> dict[str, Any]:
    """The main job (DESIGN §7.1, ``gpuplan run``): one :func:`plan_once` of the workspace, labelled by its plan start.

    ``workspace``: the operator's workspace (default ``$GPUPLAN_WORKSPACE``, else the shipped demo); the
    shipped side trains the three LLM job forecasters, a store side uses the scheduler-history
    forecaster (:mod:`pipelines.flows.jobs`). The plan starts at the first hour after the shipped
    traffic (or the newest queue export), or now when that is earlier. ``ingested``: the caller
    already ingested the workspace's exports (``gpuplan run`` does, to report bad files in one line).
    ``planner``: as :func:`plan_flow` (None: the workspace's ``[replan] planner``, default ``milp``).

    Returns ``{"run_dir", "latest", "latest_moved", "planner", "status", "source", "fallback", "mlflow_run_id",
    "tracking_uri", "workspace", "n_gpus", "nodes", "outputs", "wall_s"}``.
    """
    t0 = time.monotonic()
    ws, s = workspace_settings(workspace)
    planner = planner or ws.config.replan.planner
    tracking_store.init_store(s)
    out = Path(out_dir) if out_dir else s.runs_dir
    log().info("gpuplan run of workspace %s (%d GPUs, %d nodes) into %s", ws.root, s.n_gpus,
               len(ws.cluster.node_names), out)
    res = plan_once(s, ws, out, datetime.now(UTC), planner, replan=False, retrain=retrain, ingest=not ingested)
    return {"run_dir": str(res.path), "latest": str(out / LATEST), "latest_moved": res.latest_moved, "planner": planner,
            "status": res.status, "source": res.source, "fallback": res.fallback, "mlflow_run_id": res.mlflow_run_id,
            "tracking_uri": s.tracking_uri, "workspace": str(ws.root), "n_gpus": s.n_gpus,
            "nodes": ws.cluster.node_names,
            "outputs": {k: str(res.path / Path(v).name) for k, v in res.outputs.items()},
            "wall_s": round(time.monotonic() - t0, 1)}
