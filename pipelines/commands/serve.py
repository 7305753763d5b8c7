"""Serve the Prefect deployments (nightly retrain, 30-min replan, bench)."""

from __future__ import annotations

import typer

from pipelines.cli_support import run_guarded


def serve() -> None:
    """Serve the Prefect deployments so they appear in the Prefect UI."""

    def body() -> int:
        raise NotImplementedError("gpuplan serve: in progress (issue 6)")

    run_guarded(body)
