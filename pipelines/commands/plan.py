"""Plan one problem file (DESIGN §3.1) with a planner, verify it, write the plan."""

from __future__ import annotations

from pathlib import Path

import typer

from pipelines.cli_support import run_guarded


def plan(
    problem: Path = typer.Option(..., "--problem", help="Problem file (JSON, DESIGN §3.1)."),
    planner: str = typer.Option("milp", "--planner", help="milp | fifo | easy | priority"),
    out: Path | None = typer.Option(None, "--out", help="Write the plan parquet here."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Plan one problem file with a planner, verify it, and write/print the plan."""

    def body() -> int:
        from optimizer.planners import PLANNERS
        from optimizer.planners import plan as run_planner
        from pipelines.cli_support import check_out_parent, emit_json
        from pipelines.errors import InputError
        from pipelines.plan_io import read_problem, write_plan_parquet

        if planner not in PLANNERS:
            raise InputError(f"--planner {planner!r} is unknown; choose one of {', '.join(PLANNERS)}")
        if out is not None:  # refuse a bad --out before solving, not after
            check_out_parent(out)
            if out.is_dir():
                raise InputError(f"--out {out} is a folder; give a file path such as {out / 'plan.parquet'}")
        prob = read_problem(problem)
        result = run_planner(prob, planner)
        if out is not None:
            write_plan_parquet(prob, result, out)
        if json_out:
            emit_json(result.to_dict())
        else:
            _print_plan(result, out)
        return 0

    run_guarded(body)


def _print_plan(result, out: Path | None) -> None:
    """Human-readable summary on standard output."""
    gap = "-" if result.gap is None else f"{result.gap + 0.0:.4%}"
    bound = "-" if result.bound is None else f"{result.bound + 0.0:.6g}"
    typer.echo(f"planner {result.planner}: status {result.status}, objective {result.objective + 0.0:.6g}, "
               f"bound {bound}, gap {gap}, {result.solve_s:.2f} s")
    if result.model:
        typer.echo("model: " + ", ".join(f"{k} {v}" for k, v in result.model.items()))
    if result.message:
        typer.echo(result.message)
    for a in result.assignments:
        if a.start_step is None:
            typer.echo(f"  {a.job_id}: not started in the horizon")
        else:
            tag = " (running)" if a.running else ""
            typer.echo(f"  {a.job_id}{tag}: steps {a.start_step}-{a.end_step} on GPUs "
                       f"{a.block_offset}..{a.block_offset + a.gpus - 1} ({a.gpus})")
    for svc, gpus in result.service_gpus.items():
        typer.echo(f"  service {svc}: {list(gpus)}")
    for n in result.notes:
        typer.echo(f"note: {n}")
    if out is not None:
        typer.echo(f"plan written to {out}")
