"""Duration and GPU-count quantiles for jobs in a CSV/parquet file, from the saved forecaster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from domain.kinds import JOB_KINDS
from pipelines.cli.support import WORKSPACE_HELP, run_guarded, use_workspace
from pipelines.config.settings import job_side
from pipelines.io.errors import InputError

#: The scheduler-history forecaster (``gpuplan train --history FILE`` or a workspace's nightly retraining).
SCHEDULER = "scheduler"
PREDICT_KINDS = (*JOB_KINDS, SCHEDULER)

#: ``--jobs`` columns per kind, as ``predict --help`` prints them (a test checks them against
#: :mod:`forecasters.schema` and :data:`forecasters.scheduler.FEATURE_INPUTS`).
JOBS_COLUMNS_HELP = (
    "Required columns, by --kind (optional job_id is kept). "
    "training: training_variant, model_params_b, num_layers, hidden_size, seq_len, dataset_tokens_m, "
    "dataset_examples, epochs, global_batch_size, micro_batch_size, grad_accum_steps, lora_rank, "
    "trainable_params_pct, precision, optimizer, gpus_requested, gpu_type, gradient_checkpointing, zero_stage, "
    "tensor_parallel, flash_attention, sequence_packing. "
    "quantization: quant_method, model_params_b, num_layers, hidden_size, target_bits, group_size, "
    "calibration_samples, calibration_seq_len, act_order, gpu_type, gpus_requested. "
    "batch_inference: model_params_b, precision, num_requests, mean_input_tokens, mean_output_tokens, engine, "
    "max_batch_size, gpu_type, gpus_requested. "
    "scheduler: job_id, submitted_at; optional gpus, time_limit_s (or time_limit_h), user, account, partition, "
    "qos, gpu_type, job_name, kind, state, started_at (a running job's remaining time); any other column "
    "(params_b, tokens_b, cpu_milli ...) is an annotation the model may read. "
    "gpu_type (every kind): p100_16gb, v100_16gb, v100_32gb, t4_16gb, a10_24gb, a100_40gb, a100_80gb, "
    "l40s_48gb, h100_80gb, h200_141gb, b200_180gb, mi300x_192gb, or the name a scheduler prints for one "
    "(Slurm GRES b200, a100 = a100_40gb; Kubernetes NVIDIA-H100-80GB-HBM3)."
)


def predict_file(kind: str, jobs_path: Path, step_minutes: float | None = None, refit: bool = False) -> dict:
    """Forecast every job in ``jobs_path`` with the saved ``kind`` forecaster (``models_dir/<kind>``).

    The model is the one ``gpuplan run`` plans with (:func:`pipelines.models.jobs.train_or_load`): loaded
    from the model store, trained on the shipped history first (saved and logged to MLflow) when missing,
    or when ``refit``. Hours are printed as forecast (``step_minutes`` None): rounding to planning
    steps is the planner's business (``domain.units.hours_to_steps``).

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
    from pipelines.config.settings import load_settings
    from pipelines.models.jobs import train_or_load
    from pipelines.stages.models import predict_document

    if kind not in JOB_KINDS:
        raise InputError(f"--kind must be one of {', '.join(PREDICT_KINDS)}; got {kind!r}")
    jobs = read_jobs_file(jobs_path, kind)
    model = train_or_load(load_settings(), kind, retrain=refit, notify=lambda msg: typer.echo(msg, err=True))
    return predict_document(model, jobs, step_minutes)


def predict_scheduler_file(jobs_path: Path, ws: Any) -> dict:
    """Forecast every job of a job table with the saved scheduler forecaster (loaded, never refitted).

    ``jobs_path``: CSV or parquet in the job-table schema (:mod:`pipelines.workspace.sources.tabular`; naive
    times are the workspace's cluster clock). The model is ``<models_dir>/scheduler``
    (:func:`pipelines.models.scheduler.load_champion`, written by ``gpuplan train --history FILE``
    or by a workspace's nightly retraining). Its recent-runs features read the workspace's store
    when it has finished runs (:func:`forecasters.scheduler.refresh_recent`; no refit). Running
    jobs (``state`` running with ``started_at``) get their remaining time at the current time.

    Returns ``{"kind": "scheduler", "model": meta, "jobs": [{"job_id", "duration_p10_h",
    "duration_p50_h", "duration_p90_h", "gpus_pred", "remaining_p50_h", "flags"}]}``.

    Raises:
        InputError: no saved scheduler forecaster; an unreadable file; a row the job table refuses
            (e.g. a negative ``gpus``; line named); a negative annotation count (row named).
    """
    from datetime import datetime, timezone

    import pandas as pd

    from forecasters.scheduler import predict_runtime, refresh_recent
    from pipelines.config.settings import load_settings
    from pipelines.io.csv_sniff import read_operator_csv
    from pipelines.models import scheduler as scheduler_forecaster
    from pipelines.workspace.sources import tabular

    settings = load_settings()
    loaded = scheduler_forecaster.load_champion(settings)
    if loaded is None:
        raise InputError(f"no saved scheduler forecaster at {scheduler_forecaster.model_path(settings)}; "
                         "train one first: gpuplan train --history FILE (or gpuplan train --workspace DIR)")
    model, meta = loaded
    path = Path(jobs_path)
    if not path.is_file():
        raise InputError(f"--jobs {path}: no such file")
    tz = ws.config.cluster.timezone
    if path.suffix.lower() == ".parquet":
        res = tabular.parse_jobs(pd.read_parquet(path), tz, csv=False)
    else:
        res = tabular.parse_jobs(read_operator_csv(path, f"--jobs {path}", text_columns=("job_id",)), tz)
    if res.errors:
        raise InputError(f"--jobs {path}: {res.errors[0]}" + (f" (and {len(res.errors) - 1} more rows)"
                                                             if len(res.errors) > 1 else ""))
    if job_side(ws) == "store":
        from pipelines.workspace.store import Store

        stored = Store(ws.store_dir).jobs()
        if not stored.empty:
            model = refresh_recent(model, stored)
    pred = predict_runtime(model, res.frame, now=datetime.now(timezone.utc))
    rows = [{"job_id": r.job_id, "duration_p10_h": float(r.duration_p10_h), "duration_p50_h": float(r.duration_p50_h),
             "duration_p90_h": float(r.duration_p90_h), "gpus_pred": int(r.gpus_pred),
             "remaining_p50_h": float(r.remaining_p50_h), "flags": [f for f in str(r.flags).split(",") if f]}
            for r in pred.itertuples(index=False)]
    return {"kind": SCHEDULER, "model": meta, "jobs": rows}


def predict(
    kind: Annotated[str, typer.Option("--kind", help="training | quantization | batch_inference | scheduler "
                                                     "(the forecaster trained on a scheduler history)")],
    jobs: Annotated[Path, typer.Option("--jobs", help="CSV or parquet with one row per job. " + JOBS_COLUMNS_HELP)],
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    refit: bool = typer.Option(False, "--refit", help="Retrain the saved forecaster on the shipped history "
                               "first (saved and logged, as the nightly retraining does; not for scheduler)."),
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
) -> None:
    """Print duration P10/P50/P90 (hours, not rounded to steps) and GPU count per job, from the saved forecaster.

    Job kinds are trained first if no model is saved; scheduler needs 'gpuplan train --history FILE' first.
    """

    def body() -> int:
        ws = use_workspace(workspace)
        from rich.console import Console  # lazily, like the rest of the body (import cost, above)
        from rich.table import Table

        from pipelines.cli.support import emit_json

        if kind == SCHEDULER:
            if refit:
                raise InputError("--refit does not apply to --kind scheduler: retrain with gpuplan train --history FILE")
            doc = predict_scheduler_file(jobs, ws)
        else:
            doc = predict_file(kind, jobs, refit=refit)
        if json_out:
            emit_json(doc)
            return 0
        t = Table(title=f"{kind}: {len(doc['jobs'])} jobs (hours, as forecast; the planner rounds to its steps)")
        for col in ("job_id", "P10 h", "P50 h", "P90 h", "GPUs", "flags"):
            t.add_column(col)
        for r in doc["jobs"]:
            t.add_row(
                r["job_id"],
                f"{r['duration_p10_h']:.3f}",
                f"{r['duration_p50_h']:.3f}",
                f"{r['duration_p90_h']:.3f}",
                str(r["gpus_pred"]),
                ",".join(r["flags"]),
            )
        Console().print(t)
        return 0

    run_guarded(body)
