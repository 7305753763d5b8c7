"""The main job end to end on the shipped real data (DESIGN §7.1)."""

from __future__ import annotations

from pathlib import Path

import typer

from pipelines.cli_support import run_guarded


def run(
    out: Path = typer.Option(Path("runs"), "--out", help="Folder that holds run folders and 'latest'."),
) -> None:
    """Train or load forecasters, forecast, plan, verify, report; print the run folder."""

    def body() -> int:
        raise NotImplementedError("gpuplan run: in progress (issue 6)")

    run_guarded(body)
