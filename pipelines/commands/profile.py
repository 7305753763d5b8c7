"""Weekly seasonal profile forecast from an hourly traffic file."""

from __future__ import annotations

from pathlib import Path

import typer

from pipelines.cli_support import run_guarded


def profile(
    traffic: Path = typer.Option(..., "--traffic", help="Hourly traffic file (ts, value[, service])."),
    timezone: str | None = typer.Option(None, "--timezone", help="IANA zone of naive stamps; the local clock."),
    horizon_h: int = typer.Option(24, "--horizon-h", help="Hours ahead to forecast."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Forecast P50/P90 per hour from hourly traffic, with diagnostics."""

    def body() -> int:
        raise NotImplementedError("gpuplan profile: in progress (issue 4)")

    run_guarded(body)
