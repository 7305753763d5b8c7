"""Duration and GPU-count quantiles for jobs in a CSV/parquet file, from the saved forecaster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from domain.kinds import JOB_KINDS
from pipelines.cli_support import WORKSPACE_HELP, run_guarded, use_workspace
from pipelines.errors import InputError

#: Planning step of DESIGN §3 (default 30 min): quantiles below one step are raised to it and flagged.
STEP_MINUTES = 30.0


def predict_file(kind: str, jobs_path: Path, step_minutes: float = STEP_MINUTES, refit: bool = False) -> dict:
    """Forecast every job in ``jobs_path`` with the saved ``kind`` forecaster (``models_dir/<kind>``).

    The model is the one ``gpuplan run`` plans with (:func:`pipelines.model_store.train_or_load`): loaded
    from the model store, trained on the shipped history first (saved and logged to MLflow) when missing,
    or when ``refit``.

    Returns ``{"kind", "jobs": [{"job_id", "duration_p10_h", "duration_p50_h", "duration_p90_h",
    "gpus_pred", "flags"}]}`` in the input's order, keeping its ``job_id`` (row position if absent).

    Raises:
        InputError: unknown kind, unreadable file, missing feature column, non-numeric value (row and
            column named), unknown or missing category (column, value and known levels named).
    """
    # imported here, not at the top: the catalog, the model store and the forecasters pull in pandas,
    # the optimizer and lightgbm (~1.3 s measured on the 2-core machine against ~0.14 s for the whole
    # CLI), which `gpuplan --help` and the other commands need not pay.
    from pipelines.catalog import read_jobs_file
    from pipelines.config import load_settings
    from pipelines.model_store import train_or_load
    from pipelines.stages.models import predict_document

    if kind not in JOB_KINDS:
        raise InputError(f"--kind must be one of {', '.join(JOB_KINDS)}; got {kind!r}")
    jobs = read_jobs_file(jobs_path, kind)
    model = train_or_load(load_settings(), kind, retrain=refit, notify=lambda msg: typer.echo(msg, err=True))
    return predict_document(model, jobs, step_minutes)


def predict(
    kind: Annotated[str, typer.Option("--kind", help="training | quantization | batch_inference")],
    jobs: Annotated[Path, typer.Option("--jobs", help="CSV or parquet with one row per job.")],
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    refit: bool = typer.Option(False, "--refit", help="Retrain the saved forecaster on the shipped history "
                               "first (saved and logged, as the nightly retraining does)."),
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
) -> None:
    """Print duration P10/P50/P90 and GPU count per job (the saved forecaster; trained first if missing)."""

    def body() -> int:
        use_workspace(workspace)
        from rich.console import Console  # lazily, like the rest of the body (import cost, above)
        from rich.table import Table

        from pipelines.cli_support import emit_json

        doc = predict_file(kind, jobs, refit=refit)
        if json_out:
            emit_json(doc)
            return 0
        t = Table(title=f"{kind}: {len(doc['jobs'])} jobs (hours; clipped to >= {STEP_MINUTES:g} min)")
        for col in ("job_id", "P10 h", "P50 h", "P90 h", "GPUs", "flags"):
            t.add_column(col)
        for r in doc["jobs"]:
            t.add_row(
                r["job_id"],
                f"{r['duration_p10_h']:.2f}",
                f"{r['duration_p50_h']:.2f}",
                f"{r['duration_p90_h']:.2f}",
                str(r["gpus_pred"]),
                ",".join(r["flags"]),
            )
        Console().print(t)
        return 0

    run_guarded(body)
