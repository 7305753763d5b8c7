"""Duration and GPU-count quantiles for jobs in a CSV/parquet file."""

from __future__ import annotations

from pathlib import Path

import typer

from pipelines.cli_support import run_guarded


def predict(
    kind: str = typer.Option(..., "--kind", help="training | quantization | batch_inference"),
    jobs: Path = typer.Option(..., "--jobs", help="CSV or parquet with one row per job."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Print duration P10/P50/P90 and GPU count per job."""

    def body() -> int:
        raise NotImplementedError("gpuplan predict: in progress (issue 3)")

    run_guarded(body)
