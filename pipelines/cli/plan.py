"""Plan one problem file (DESIGN §3.1) with a planner, verify it, write the plan."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli.support import WORKSPACE_HELP, run_guarded, use_workspace

#: Step 0 of a plan of a problem file (which has no calendar time): the ``ts`` column counts step offsets.
PLAN_FILE_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def plan(
    problem: Annotated[Path, typer.Option("--problem", help="Problem file (JSON, DESIGN §3.1).")],
    planner: str = typer.Option("milp", "--planner", help="milp | fifo | easy | priority | fast (the fast mode: milliseconds, no solver)"),
    out: Annotated[Path | None, typer.Option("--out", help="Write the plan here (a path ending in .parquet).")] = None,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
    budget: Annotated[str | None, typer.Option(
        "--budget", help="time | work: the wall clock as the budget, or the deterministic work budget (identical "
        "plans under any load); default: the problem file's settings.budget ('time'). DESIGN §5.")] = None,
) -> None:
    """Plan one problem file with a planner, verify it, and write/print the plan."""

    def body() -> int:
        use_workspace(workspace)
        # imported here, not at the top: the optimizer, pandas and pyarrow cost ~0.5 s (measured on the
        # 2-core machine against ~0.14 s for the whole CLI), which `gpuplan --help` need not pay.
        from optimizer.planners import PLANNERS
        from optimizer.planners import production_plan as run_planner
        from optimizer.verify import verify
        from pipelines.catalog import read_problem_file, write_plan_file
        from pipelines.cli.support import check_out_parent, emit_json
        from pipelines.io.errors import InputError
        from pipelines.stages.outputs import plan_tables

        if planner not in PLANNERS:
            raise InputError(f"--planner {planner!r} is unknown; choose one of {', '.join(PLANNERS)}")
        if out is not None:  # refuse a bad --out before solving, not after
            check_out_parent(out)
            if out.is_dir():
                raise InputError(f"--out {out} is a folder; give a file path such as {out / 'plan.parquet'}")
            if out.suffix.lower() != ".parquet":  # the plan file is parquet whatever the name says
                if out.name.startswith("."):  # ".parquet" is a hidden file with no suffix, not a plan file name
                    raise InputError(f"--out {out}: give a file name before .parquet (such as "
                                     f"{out.with_name('plan.parquet')}; --json prints JSON on stdout)")
                raise InputError(f"--out {out}: the plan is written as parquet, expected a path ending in .parquet "
                                 f"(such as {out.with_suffix('.parquet')}; --json prints JSON on stdout)")
        if budget is not None and budget not in ("time", "work"):
            raise InputError(f"--budget {budget!r} is unknown; choose time or work")
        prob = read_problem_file(problem)
        if budget is not None:
            import dataclasses

            prob = dataclasses.replace(prob, settings=dataclasses.replace(prob.settings, budget=budget))
        result = run_planner(prob, planner)
        violations = verify(result, prob)  # the independent verifier, stated in the output
        if violations:  # never printed or written as a plan (the planners verify too: this is a bug)
            raise RuntimeError(f"plan failed verification ({len(violations)} violations): {violations[:3]}")
        if out is not None:  # a problem file has no calendar time: ts counts from 1970-01-01T00:00Z
            write_plan_file(out, plan_tables(prob, result, PLAN_FILE_EPOCH), result)
        if json_out:
            emit_json({**result.to_dict(), **_preemption_json(result, prob), "verified": True})
        else:
            _print_plan(result, prob.horizon_steps, out, _preemption_lines(result, prob), prob.cluster.step_minutes)
        return 0

    run_guarded(body)


#: What the objective and bound of the plan text are in (DESIGN §5, "Units of the objective").
OBJECTIVE_NOTE = ("objective and bound: priority x GPU-steps of work (each step's value decayed by the setting gamma), "
                  "less the penalty for unmet real-time demand (DESIGN §5)")

#: The range convention of the plan text: half-open, the first value in, the end out.
RANGE_NOTE = "ranges are half-open [first, end): steps [0, 2) are steps 0 and 1; GPUs [4, 8) are GPUs 4 to 7"


def stop_line(d, step_minutes: float) -> str:
    """The text line of one stop (issue 30) from an :class:`optimizer.preemption.StopDetail`."""
    from pipelines.report.basics import plural
    from pipelines.report.stops import loss_text

    return (f"stops {d.job_id} (preemptible, {plural(d.gpus, 'GPU')}): real-time short of "
            f"{plural(d.shortfall_gpus, 'GPU')} at step 0; {loss_text(d, step_minutes)}")


def _preemption_lines(result, prob) -> list[str]:
    """Text lines on preemption: none when no running job is preemptible (the output is then as before issue 30).

    Otherwise how many running jobs are preemptible, then one :func:`stop_line` per stop of the plan.
    """
    from optimizer.preemption import stop_details

    n = sum(1 for r in prob.running if r.preemptible)
    if not n and not result.stops:
        return []
    lines = [f"running jobs: {len(prob.running)}, {n} preemptible (only these may be stopped, when real time is "
             "short at step 0)"]
    return lines + [stop_line(d, prob.cluster.step_minutes) for d in stop_details(result, prob)]


def _preemption_json(result, prob) -> dict:
    """JSON keys on preemption: none without a preemptible running job or stop.

    Else ``preemptible_running`` (count) and, when the plan stops a job, ``stops`` [{job_id, gpus, lost_steps,
    steps_since_checkpoint, restart_steps, shortfall_gpus, lost_gpu_h}] (replacing the plan's shorter list).
    """
    from dataclasses import asdict

    from optimizer.preemption import stop_details

    n = sum(1 for r in prob.running if r.preemptible)
    if not n and not result.stops:
        return {}
    out: dict = {"preemptible_running": n}
    if result.stops:
        out["stops"] = [{**{k: v for k, v in asdict(d).items() if k != "priority"},
                         "lost_gpu_h": d.lost_gpu_h(prob.cluster.step_minutes)} for d in stop_details(result, prob)]
    return out


def _print_plan(result, horizon_steps: int, out: Path | None, preemption: list[str] | None = None,
                step_minutes: int | None = None) -> None:
    """Human-readable summary on standard output.

    ``preemption``: the lines of :func:`_preemption_lines`, printed after the model line. ``step_minutes``: the
    problem's step length, said under the range note.

    One range convention throughout (:data:`RANGE_NOTE`): a job's steps and GPUs are half-open
    ``[first, end)``, as ``end_step`` is in the JSON document; the status line says ``verified`` (the
    independent verifier, :func:`optimizer.verify.verify`, found no violation).
    """
    gap = "-" if result.gap is None else f"{result.gap + 0.0:.4%}"
    bound = "-" if result.bound is None else f"{result.bound + 0.0:.6g}"
    typer.echo(f"planner {result.planner} (plan from {result.source}): status {result.status}, verified (0 "
               f"violations); objective {result.objective + 0.0:.6g}, bound {bound}, gap {gap}, {result.solve_s:.2f} s")
    typer.echo(OBJECTIVE_NOTE)
    if result.model:
        typer.echo("model: " + ", ".join(f"{k} {'none' if v is None else v}" for k, v in result.model.items()))
    if result.message:
        typer.echo(result.message)
    for line in preemption or ():
        typer.echo(line)
    typer.echo(RANGE_NOTE + ("" if step_minutes is None else
                             f"; a step is {step_minutes} min, step 0 the start of the plan"))
    for a in result.assignments:
        if a.start_step is None and a.running:  # a stop (issue 30): off its block at step 0, back in the queue
            typer.echo(f"  {a.job_id} (running): stopped at step 0, requeued with its remaining work")
        elif a.start_step is None:
            typer.echo(f"  {a.job_id}: not started in the horizon [0, {horizon_steps})")
        else:
            tag = " (running)" if a.running else ""
            typer.echo(f"  {a.job_id}{tag}: steps [{a.start_step}, {a.end_step}) on GPUs "
                       f"[{a.block_offset}, {a.block_offset + a.gpus}) ({a.gpus} GPU{'s' if a.gpus != 1 else ''})")
    for svc, gpus in result.service_gpus.items():
        typer.echo(f"  service {svc}: GPUs per step {list(gpus)}")
    for n in result.notes:
        typer.echo(f"note: {n}")
    if out is not None:
        typer.echo(f"plan written to {out}")
