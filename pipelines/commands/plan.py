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
        raise NotImplementedError("gpuplan plan: in progress (issue 2)")

    run_guarded(body)
