"""Fit and evaluate job forecasters against their baselines."""

from __future__ import annotations

import typer

from pipelines.cli_support import run_guarded


def train(
    kind: str = typer.Option("all", "--kind", help="training | quantization | batch_inference | realtime | all"),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Fit and evaluate forecasters against their baselines; print the metrics."""

    def body() -> int:
        raise NotImplementedError("gpuplan train: in progress (issue 3)")

    run_guarded(body)
