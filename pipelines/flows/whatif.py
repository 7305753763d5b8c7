"""The what-if flow (issue 14): re-plan a published run folder with changes; the comparison as Prefect artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from pipelines.config.settings import Settings, load_settings
from pipelines.io.run_folder import LATEST


def default_whatif_folder(s: Settings) -> Path:
    """The run folder a what-if starts from when none is given: the replan deployment's ``latest``, else ``gpuplan run``'s."""
    replan = s.runs_dir / "replan" / LATEST
    return replan if replan.exists() else s.runs_dir / LATEST


def log() -> Any:
    """The run's Prefect logger (:func:`pipelines.flows.observe.run_logger`)."""
    from pipelines.flows import observe

    return observe.run_logger()


def whatif_log_lines(doc: dict[str, Any]) -> list[str]:
    """The what-if's record for the run page (issue 33): the base run, the changes, the solve and the outcome.

    ``doc``: :func:`pipelines.stages.whatif.run_whatif`'s document (``run``, ``run_folder``, ``plan_start``,
    ``changes``, ``base``/``whatif`` (status, objective, planned value, jobs started / waiting, solve s),
    ``delta``, ``jobs``).
    """
    b, n = doc["base"], doc["whatif"]
    moved = [j for j in doc["jobs"] if j.get("change") and j["change"] != "still_stopped"]
    return [
        f"what-if base: run {doc['run']} ({doc['run_folder']}), plan start {doc['plan_start']}, planner {doc['planner']}",
        f"what-if changes: {', '.join(doc['changes']) or 'no change'}",
        f"what-if solve: status {n['status']}{' (verified)' if n.get('verified') else ''}, objective "
        f"{n['objective']:.2f}, {n['solve_s']:.1f} s (time limit {doc['time_limit_s']} s)",
        f"what-if outcome: planned value {b['planned_value']:.1f} -> {n['planned_value']:.1f}, jobs started "
        f"{b['jobs_started']} -> {n['jobs_started']}, waiting {b['jobs_waiting']} -> {n['jobs_waiting']}, "
        f"real-time P90 covered {b['rt_covered_p90_pct']:.1f} % -> {n['rt_covered_p90_pct']:.1f} %, "
        f"{len(moved)} job(s) moved",
    ]


@task(name="whatif-replan", cache_policy=NO_CACHE)
def whatif_replan(run_folder: str, add_gpus: int, drain_nodes: list[str], fail_gpus: list[str],
                  add_jobs: list[dict[str, Any]], cancel: list[str], priority: list[str],
                  demand_scale: list[str], fail_nodes: list[str] | None = None) -> dict[str, Any]:
    """:func:`pipelines.stages.whatif.run_whatif` on ``run_folder``: the edited problem re-planned, verified, compared."""
    from pipelines.stages import whatif as wi

    base = wi.load_base(Path(run_folder))
    w = wi.build_whatif(base, add_gpus=add_gpus, drain_nodes=drain_nodes, fail_gpus=fail_gpus, cancel=cancel,
                        priority=priority, demand_scale=demand_scale, add_jobs=add_jobs, fail_nodes=fail_nodes or [])
    return wi.run_whatif(base, w)


@flow(name="whatif", log_prints=False)
def whatif_flow(run_folder: str | None = None, add_gpus: int = 0, drain_nodes: list[str] | None = None,
                fail_gpus: list[str] | None = None, add_jobs: list[dict[str, Any]] | None = None,
                cancel: list[str] | None = None, priority: dict[str, float] | None = None,
                demand_scale: dict[str, float] | None = None, fail_nodes: list[str] | None = None) -> dict[str, Any]:
    """``gpuplan whatif`` as a flow (run it from the UI with Custom run): re-plan a run folder with changes.

    Parameters as the command's options: ``run_folder`` (default :func:`default_whatif_folder`),
    ``add_gpus``, ``drain_nodes`` (node names, drained as Slurm drains), ``fail_nodes`` (node names whose
    running jobs are lost and requeued), ``fail_gpus`` (ranges such as ``"8-15"``), ``add_jobs``
    (problem-file job entries, ``duration_h`` allowed), ``cancel`` (job ids), ``priority`` (job id ->
    priority), ``demand_scale`` (service -> factor). Publishes a markdown artifact ``whatif`` (the
    comparison and every job that moved, with its reason) and a table artifact ``whatif-jobs``
    (:func:`pipelines.report.whatif.render_markdown`); nothing is written to the run folder.

    Returns the document of :func:`pipelines.stages.whatif.run_whatif`.
    """
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from pipelines.flows import observe
    from pipelines.report import whatif as wi_text

    observe.quiet_bad_input_tracebacks()  # an unknown job or node is one line, not engine frames
    s = load_settings()
    folder = str(Path(run_folder).expanduser() if run_folder else default_whatif_folder(s))
    timed = whatif_replan.with_options(timeout_seconds=s.solve_timeout_s)
    doc = timed(folder, int(add_gpus), list(drain_nodes or []), list(fail_gpus or []), list(add_jobs or []),
                list(cancel or []), [f"{k}={v}" for k, v in (priority or {}).items()],
                [f"{k}={v}" for k, v in (demand_scale or {}).items()], list(fail_nodes or []))
    changes = ", ".join(doc["changes"]) or "no change"
    for line in whatif_log_lines(doc):
        log().info("%s", line)
    create_markdown_artifact(markdown=wi_text.render_markdown(doc), key="whatif",
                             description=f"What-if on {doc['run']}: {changes}")
    rows = [{k: j[k] for k in ("job_id", "start_ts_base", "start_ts_whatif", "delta_h", "change", "reason")}
            for j in doc["jobs"]]
    create_table_artifact(table=rows or [{"job_id": "", "reason": "no job's plan changed"}], key="whatif-jobs",
                          description=f"Jobs whose start or GPUs changed ({changes})")
    return doc
