"""Re-plan a published run with changes (more GPUs, a drained node, a new job, ...) and show what moves."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli.support import WORKSPACE_HELP, run_guarded, use_workspace


def whatif(
    run_folder: Annotated[Path, typer.Argument(metavar="RUN_FOLDER", help="A run folder of 'gpuplan run', e.g. "
                                               "runs/latest.")],
    add_gpus: Annotated[str, typer.Option("--add-gpus", metavar="N|TYPE:N", help="Add N GPUs (new nodes added-00, "
                                          "added-01, ... of the cluster's node size); on a cluster with GPU types, "
                                          "TYPE:N adds N GPUs of TYPE as nodes of that type's usual size (or one "
                                          "node of N GPUs).")] = "0",
    drain_node: Annotated[list[str] | None, typer.Option(
        "--drain-node", metavar="NAME", help="Drain node NAME as Slurm drains (repeatable): jobs running on it "
        "finish there, nothing new starts on it for the whole horizon.")] = None,
    fail_node: Annotated[list[str] | None, typer.Option(
        "--fail-node", metavar="NAME", help="Node NAME fails for the whole horizon (Slurm DOWN; repeatable): jobs "
        "running on it are lost and requeued to restart from scratch (full P50 duration) elsewhere.")] = None,
    fail_gpus: Annotated[list[str] | None, typer.Option(
        "--fail-gpus", metavar="RANGE", help="GPUs lost for the whole horizon, inclusive: 8-15, 3 or 8-11,20-23 "
        "(repeatable); running jobs on them are requeued as with --fail-node.")] = None,
    add_job: Annotated[list[Path] | None, typer.Option(
        "--add-job", metavar="FILE", help="JSON job(s) to queue, problem-file form: {\"job_id\", \"kind\", "
        "\"priority\", \"gpus\", \"duration_steps\" or \"duration_h\"} or \"sizes\"; a list or {\"jobs\": [...]} "
        "(repeatable).")] = None,
    cancel: Annotated[list[str] | None, typer.Option("--cancel", metavar="JOB", help="Cancel a queued or running "
                                                     "job (repeatable).")] = None,
    priority: Annotated[list[str] | None, typer.Option("--priority", metavar="JOB=P", help="Set a job's priority "
                                                       "(> 0; repeatable).")] = None,
    demand_scale: Annotated[list[str] | None, typer.Option(
        "--demand-scale", metavar="SERVICE=F", help="Scale a real-time service's GPU demand by F >= 0 (rounded "
        "up; repeatable).")] = None,
    time_limit: Annotated[float | None, typer.Option(
        "--time-limit", metavar="S", help="Re-plan the what-if with this time limit (seconds) instead of the run's: the wall clock under the run's "
        "budget 'time' (the default), the deterministic work budget it gives under 'work'; the base plan stays the "
        "published one.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document {base, whatif, delta, jobs} on "
                                           "stdout.")] = False,
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
) -> None:
    """Re-plan RUN_FOLDER's problem with the changes (same planner and time budget, verified) and print the difference.

    Shows plan value, utilisation, real-time coverage and jobs started for the base plan and the
    what-if, and for each job whose start or GPUs changed the old and new start and why.
    """

    def body() -> int:
        use_workspace(workspace)
        # imported here, not at the top: pandas, the optimizer and HiGHS cost ~0.5 s, which `gpuplan --help`
        # and the other commands need not pay
        from pipelines.cli.support import emit_json
        from pipelines.report import whatif as wi_text
        from pipelines.stages import whatif as wi
        from pipelines.stages import whatif_inputs as wi_inputs

        wi_inputs.parse_add_gpus(add_gpus)  # a malformed N or TYPE:N fails before the run folder is read
        base = wi.load_base(run_folder)
        jobs = [e for f in add_job or [] for e in wi_inputs.read_job_file(f, base.problem.cluster.step_minutes)]
        w = wi.build_whatif(base, add_gpus=add_gpus, drain_nodes=drain_node or [], fail_gpus=fail_gpus or [],
                            cancel=cancel or [], priority=priority or [], demand_scale=demand_scale or [],
                            add_jobs=jobs, fail_nodes=fail_node or [])
        doc = wi.run_whatif(base, w, time_limit_s=time_limit)
        if json_out:
            emit_json(doc)
        else:
            typer.echo(wi_text.render_text(doc))
        return 0

    run_guarded(body)
