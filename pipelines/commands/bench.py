"""Rolling-horizon benchmark of every planner on the scenarios (DESIGN §6)."""

from __future__ import annotations

from pathlib import Path

import typer

from pipelines.cli_support import run_guarded


def bench(
    scenario: str = typer.Option("all", "--scenario", help="Scenario name or 'all'."),
    planners: str = typer.Option("milp,fifo,easy,priority", "--planners", help="Comma-separated planners."),
    out: Path = typer.Option(Path("bench_out"), "--out", help="Output folder."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    quick: bool = typer.Option(False, "--quick", help="Reduced mode for tests."),
) -> None:
    """Simulate every planner on the scenarios; write bench.csv, bench.md and plots."""

    def body() -> int:
        raise NotImplementedError("gpuplan bench: in progress (issue 5)")

    run_guarded(body)
