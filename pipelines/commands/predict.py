"""Duration and GPU-count quantiles for jobs in a CSV/parquet file."""

from __future__ import annotations

from pathlib import Path

import typer

from pipelines.cli_support import run_guarded

JOB_KINDS = ("training", "quantization", "batch_inference")
#: Planning step of DESIGN §3 (default 30 min): quantiles below one step are raised to it and flagged.
STEP_MINUTES = 30.0


def predict_file(kind: str, jobs_path: Path, step_minutes: float = STEP_MINUTES) -> dict:
    """Forecast every job in ``jobs_path`` with a model fitted on the shipped history of ``kind``.

    Returns ``{"kind", "jobs": [{"job_id", "duration_p10_h", "duration_p50_h", "duration_p90_h",
    "gpus_pred", "flags"}]}`` in the input's order, keeping its ``job_id`` (row position if absent).

    Raises:
        InputError: unknown kind, unreadable file, missing feature column, non-numeric value (row and
            column named), unknown or missing category (column, value and known levels named).
    """
    from forecasters.jobs import fit, predict
    from pipelines.errors import InputError
    from pipelines.job_io import load_jobs, shipped_history

    if kind not in JOB_KINDS:
        raise InputError(f"--kind must be one of {', '.join(JOB_KINDS)}; got {kind!r}")
    jobs = load_jobs(jobs_path, kind)
    model = fit(kind, shipped_history(kind))
    pred = predict(model, jobs, on_unseen="error", step_minutes=step_minutes)
    rows = [
        {
            "job_id": r.job_id,
            "duration_p10_h": float(r.duration_p10_h),
            "duration_p50_h": float(r.duration_p50_h),
            "duration_p90_h": float(r.duration_p90_h),
            "gpus_pred": int(r.gpus_pred),
            "flags": list(r.flags),
        }
        for r in pred.itertuples(index=False)
    ]
    return {"kind": kind, "jobs": rows}


def predict(
    kind: str = typer.Option(..., "--kind", help="training | quantization | batch_inference"),
    jobs: Path = typer.Option(..., "--jobs", help="CSV or parquet with one row per job."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Print duration P10/P50/P90 and GPU count per job."""

    def body() -> int:
        from pipelines.cli_support import emit_json

        doc = predict_file(kind, jobs)
        if json_out:
            emit_json(doc)
            return 0
        from rich.console import Console
        from rich.table import Table

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
