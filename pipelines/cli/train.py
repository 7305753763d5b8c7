"""Fit and evaluate job forecasters against their baselines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from domain.kinds import JOB_KINDS, REALTIME
from pipelines.cli.support import WORKSPACE_HELP, run_guarded, use_workspace
from pipelines.config.settings import job_side
from pipelines.io.errors import InputError

ALL_KINDS = (*JOB_KINDS, REALTIME, "all")


def train_job_kind(kind: str) -> dict:
    """Fit ``kind`` on the earliest 80 % of its shipped history and evaluate on the latest 20 %; log it to MLflow.

    The stage is :func:`pipelines.stages.models.train`; the run (metrics, plot, model) is logged to the
    kind's experiment and the model registered with the alias ``challenger`` (the planner's model,
    ``champion``, is not replaced: the saved model folder is untouched).

    Returns the document of :func:`forecasters.jobs.evaluate`. Logs the number of rows excluded
    for a non-positive duration (case C21) to standard error.
    """
    # imported here, not at the top: the catalog and the forecasters pull in pandas, the optimizer and
    # lightgbm (~1.3 s measured on the 2-core machine against ~0.14 s for the whole CLI), which
    # `gpuplan --help` and the other commands need not pay.
    from pipelines.catalog import history_path, shipped_history
    from pipelines.config.settings import load_settings
    from pipelines.models.jobs import data_params_hash
    from pipelines.stages.models import held_out, train
    from pipelines.stages.retrain import analytic_ratio
    from pipelines.tracking import models as tracking_models
    from pipelines.tracking import store as tracking_store

    settings = load_settings()
    tracking_store.init_store(settings)  # a store that cannot be used fails here, in one line, before training
    history = shipped_history(kind)
    trained = train(kind, history)
    name = tracking_models.registered_model_name(kind)
    digest = data_params_hash(kind, history, 0)
    same = tracking_models.version_with_tag(settings, name, tracking_models.DATA_HASH_TAG, digest)
    if same is not None:
        print(f"{kind}: unchanged data and parameters (sha256 {digest[:12]}): version {same} of {name} is this "
              "training; nothing new registered", file=sys.stderr)
    else:
        rid = tracking_models.log_job_model_run(
            settings, kind, trained.model, trained.doc, trained.test, held_out(trained), str(history_path(kind)),
            alias="challenger", reason="gpuplan train registers a challenger; the planner's champion is not replaced",
            extra_tags={tracking_models.DATA_HASH_TAG: digest})
        print(f"{kind}: logged to MLflow run {rid} ({settings.tracking_uri})", file=sys.stderr)
    print(f"{kind}: holdout MAE {analytic_ratio(trained.doc):.3f} × analytic baseline (generated history)", file=sys.stderr)
    n_bad_test = int((trained.test["duration_h"] <= 0).sum())
    print(
        f"{kind}: excluded {trained.model.info['n_excluded_nonpositive']} training and {n_bad_test} test rows "
        "with duration_h <= 0 (failed at launch)",
        file=sys.stderr,
    )
    return trained.doc


def realtime_report(data_dir: Path | None = None) -> dict:
    """The real-time forecast's rolling-origin backtest on the shipped services (about 10 s).

    Reads the services and their traffic through :class:`pipelines.catalog.Catalog` (``data_dir``:
    default the settings' ``data/``) and returns :func:`pipelines.stages.realtime.backtest_report`, logged
    to MLflow as one ``realtime cutoff=...`` run with units in the metric names and the forecast-against-actual
    plot (:func:`pipelines.tracking.forecast_runs.log_realtime_backtest`).

    Raises:
        pipelines.io.errors.InputError, FileNotFoundError: ``data/traffic/services.json`` or a traffic
            file missing or bad (the message names the file and field; exit 2 in the CLI).
    """
    from pipelines.catalog import Catalog  # lazily: import cost, see train_job_kind
    from pipelines.config.settings import load_settings
    from pipelines.stages.realtime import backtest_report
    from pipelines.tracking import forecast_runs as forecast_runs
    from pipelines.tracking import store as tracking_store

    settings = load_settings(**({"data_dir": Path(data_dir).resolve()} if data_dir is not None else {}))
    tracking_store.init_store(settings)
    catalog = Catalog(settings)
    services = catalog.services()
    hours: dict = {}
    doc = backtest_report(services, catalog.raw_traffic(services), hours_out=hours)
    forecast_runs.log_realtime_backtest(settings, doc, hours, stage="train")
    return doc


def _realtime_table(doc: dict) -> None:
    """Print the real-time report (:func:`realtime_report`) as one rich table per service."""
    from rich.console import Console
    from rich.table import Table

    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    console = Console()
    for name, s in doc["services"].items():
        t = Table(title=(f"realtime {name}: {s['n_days']} daily origins {s['origins'][0][:10]}..{s['origins'][-1][:10]}, "
                         f"{s['horizon_h']} h ahead, {s['n_hours']} scored hours ({s['units']})"))
        for col in ("forecast", "MAE", "÷sn168", "÷nv24", "÷pers1h", "MAPE", "P90 cov", "weight"):
            t.add_column(col)
        for label, m in (("day-ahead", s["metrics"]), ("hourly (1 h ahead)", s["hourly_recal"])):
            # persistence (1 h) is a baseline of the 1-h-ahead forecast only: a day-ahead forecast is not compared with it
            persist = fmt(m.get("mase_persistence"), ".3f") if label.startswith("hourly") else ""
            t.add_row(label, fmt(m["mae"], ",.0f"), fmt(m["mase_snaive168"], ".3f"), fmt(m["mase_naive24"], ".3f"),
                      persist, fmt(m["mape"], ".3f"), fmt(m["p90_coverage"], ".3f"), "")
        for label, c in s.get("candidates", {}).items():
            t.add_row(f"candidate: {label}", fmt(c["mae"], ",.0f"), fmt(c["mase_snaive168"], ".3f"),
                      fmt(c["mase_naive24"], ".3f"), "", "", "", fmt(s.get("weights", {}).get(label), ".2f"))
        for label, b in s["baselines"].items():
            t.add_row(f"baseline: {label}", fmt(b["mae"], ",.0f"), "", "", "", "", "", "")
        console.print(t)
        console.print("  ÷sn168 / ÷nv24 / ÷pers1h: MAE ÷ the seasonal naive 168 h / naive 24 h / 1-h persistence MAE on "
                      "the same hours (MAE ratios, not MASE; persistence only for the 1-h-ahead row); P90 cov: over "
                      "the backtest's scored hours")
        console.print(f"  method: {s['method']}; status: {s['status']}")
        for msg in s["messages"]:
            console.print(f"  note: {msg}")


def _print(doc: dict) -> None:
    """Human output of one report (job kind or real-time)."""
    _realtime_table(doc) if doc.get("kind") == REALTIME else _table(doc)


def _table(doc: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    m, b = doc["metrics"], doc["baselines"]
    t = Table(title=f"{doc['kind']}: {doc['n_train']} train / {doc['n_test']} test jobs (time-ordered split)")
    for col in ("model", "MAE h", "MAPE", "median APE", "pinball P10", "pinball P90", "P10-P90 coverage"):
        t.add_column(col)
    t.add_row(
        "LightGBM",
        f"{m['mae_h']:.3f}",
        f"{m['mape']:.3f}",
        f"{m['median_ape']:.3f}",
        f"{m['pinball_p10']:.3f}",
        f"{m['pinball_p90']:.3f}",
        f"{m['coverage_p10_p90']:.3f}",
    )
    for name, v in b.items():
        t.add_row(f"baseline: {name}", f"{v['mae_h']:.3f}", f"{v['mape']:.3f}", "", "", "", "")
    Console().print(t)
    ratio = m["mae_h"] / b["analytic"]["mae_h"]
    verdict = ("worse than the analytic baseline" if ratio > 1.01 else
               "the model only matches it: the generated history follows the prior" if ratio >= 0.99 else
               "better than the analytic baseline")
    Console().print(f"  MAE ratio to the analytic baseline: {ratio:.3f} ({verdict})")


def workspace_report(ws) -> dict:
    """An operator's workspace: the scheduler-history forecaster scored on the latest jobs of its store.

    The stored history (ingest it first) split by submit time (the latest 20 % of jobs held out),
    fitted on the history as it was at that cut (:func:`forecasters.scheduler.time_split_as_of`: a
    run still going at the cut is not a target) and evaluated against the time limit, per-user,
    per-GPU-count and global medians
    (:func:`forecasters.scheduler.evaluate_scheduler_model`). Then the nightly retraining on demand
    (:func:`pipelines.models.scheduler.nightly_fit` at the newest record's submit time): logged to
    the ``scheduler`` MLflow experiment, registered, and made the champion plans use when the
    holdout gate says it is no worse (``registered`` in the document).

    Raises:
        InputError: nothing ingested, or no finished run to train on or to score.
    """
    from forecasters.scheduler import evaluate_scheduler_model, fit_scheduler_model, time_split_as_of
    from pipelines.workspace.store import Store

    jobs = Store(ws.store_dir).jobs()
    if jobs.empty:
        raise InputError(f"workspace {ws.root}: the store is empty; run 'gpuplan ingest --workspace {ws.root}' first")
    import pandas as pd

    from pipelines.config.settings import load_settings
    from pipelines.models import scheduler as scheduler_forecaster
    from pipelines.tracking import models as tracking_models
    from pipelines.tracking import store as tracking_store

    settings = load_settings()
    tracking_store.init_store(settings)
    train_rows, holdout = time_split_as_of(jobs, 0.2)
    model = fit_scheduler_model(train_rows, timezone=ws.config.cluster.timezone)
    doc = {"kind": "scheduler", "workspace": str(ws.root), **evaluate_scheduler_model(model, holdout)}
    # then the nightly retraining on demand: gated against the champion, registered, champion moved if no worse
    cutoff = pd.to_datetime(jobs["submitted_at"], utc=True).max() + pd.Timedelta(seconds=1)
    final, night = scheduler_forecaster.nightly_fit(settings, ws, cutoff.to_pydatetime())
    version = tracking_models.register_nightly(settings, ws, final, night)
    doc["registered"] = {"name": tracking_models.scheduler_model_name(ws), "version": version,
                         "promoted": night["promoted"], "reason": night["reason"], "cutoff": night["cutoff"]}
    return doc


def history_report(path: Path, fmt: str | None, timezone: str | None, ws) -> dict:
    """``gpuplan train --history FILE``: the scheduler forecaster of one exported history, scored and saved.

    Reads the file (:func:`pipelines.models.scheduler.read_history_file`; naive times in ``timezone``,
    default the workspace's cluster clock), scores the model fitted on the history as it was at the
    cut of its latest 20 % against the time limit and the per-user, per-GPU-count and global medians,
    refits on all of it and saves it where ``gpuplan predict --kind scheduler`` loads it
    (:func:`pipelines.models.scheduler.train_from_history`), and logs the scores to the ``scheduler``
    MLflow experiment. Rejected rows are counted in the
    document (``rejected_rows``, ``first_rejected``) and told on standard error; the rest are used.

    Raises:
        InputError: no such file, unknown format, unreadable, no finished run to train on or to score.
    """
    from forecasters.scheduler.features import check_timezone
    from pipelines.config.settings import load_settings
    from pipelines.models import scheduler as scheduler_forecaster

    tz = check_timezone(timezone or ws.config.cluster.timezone)
    records, n_read, errors = scheduler_forecaster.read_history_file(path, fmt, tz)
    if errors:
        print(f"--history {path}: {len(errors)} of {n_read} rows rejected, first: {errors[0]}", file=sys.stderr)
    from pipelines.tracking import runs as tracking_runs
    from pipelines.tracking import store as tracking_store

    settings = load_settings()
    model, doc = scheduler_forecaster.train_from_history(settings, records, tz, str(path))
    tracking_store.init_store(settings)
    numbers = tracking_runs.flatten({"metrics": doc["metrics"], "baselines": doc["baselines"], "mae_ratio": doc["mae_ratio"]})
    tracking_runs.log_run(settings, "scheduler", f"history-{Path(path).name}",
                     params={"history": str(path), "mode": model.mode, "timezone": tz,
                             "feature_groups": ",".join(model.spec.groups)},
                     metrics={k: v for k, v in numbers.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
                     tags={"gpuplan.stage": "train"})
    doc["workspace"] = str(ws.root)
    doc["history"] = str(Path(path).resolve())
    doc["rejected_rows"] = len(errors)
    doc["first_rejected"] = errors[0] if errors else None
    return doc


#: Below this 90th/10th-percentile ratio of the P50s over the scored jobs, ``train`` says the model tells the jobs
#: hardly apart (a 10 % spread: less than the rounding of a 30-min step on a 5-h job).
FLAT_P50_SPREAD = 1.1


def _workspace_text(doc: dict) -> str:
    m = doc["metrics"]
    lines = [f"scheduler forecaster of {doc['workspace']}: trained on the earliest {doc['n_train']} jobs, scored "
             f"on the latest {doc['n_test']} (by submit time)",
             f"  {'forecast':<22}{'runs':>6}{'MAE h':>10}{'pinball P50':>13}{'pinball P90':>13}{'P90 cover':>11}",
             f"  {'model':<22}{m['n']:>6}{m['mae_h']:>10.3f}{m['pinball_p50_h']:>13.3f}{m['pinball_p90_h']:>13.3f}"
             f"{m['coverage_p90']:>11.2f}"]
    for name, b in doc["baselines"].items():
        if b and "mae_h" in b:
            lines.append(f"  {name:<22}{b['n']:>6}{b['mae_h']:>10.3f}{b['pinball_p50_h']:>13.3f}"
                         f"{b['pinball_p90_h']:>13.3f}{b['coverage_p90']:>11.2f}")
        elif b and b.get("note"):
            lines.append(f"  {name:<22}  n/a: {b['note']}")
    if "coverage_p10_p90" in m:
        w = m["width_ratio_p90_p10"]
        lines.append(f"  model P10-P90 coverage {m['coverage_p10_p90']:.2f}; width P90/P10 over jobs: "
                     f"{w[0]:.1f} (10th pct) / {w[1]:.1f} (median) / {w[2]:.1f} (90th pct)")
    spread = m.get("p50_spread_q90_q10")
    if spread is not None and spread < FLAT_P50_SPREAD:
        lines.append(f"  note: the model's P50 hardly differs between jobs (90th/10th percentile {spread:.2f} over "
                     f"{m['n']} runs): {doc['n_train']} training runs were too few or too alike for the job features "
                     "to matter, so it gives about one duration to every job, like the global median")
    for name, r in (doc.get("mae_ratio") or {}).items():
        lines.append(f"  MAE ratio model / {name}: {r:.3f}")
    if doc.get("saved"):
        lines.append(f"saved (refitted on all {doc['history_rows']} records) to {doc['saved']}; "
                     f"feature groups {doc['fit_report']['feature_selection'].get('chosen')}")
    reg = doc.get("registered") or {}
    if reg:
        lines.append(f"registered {reg['name']} version {reg['version']}: "
                     f"{'champion' if reg['promoted'] else 'challenger'} ({reg['reason']})")
    return "\n".join(lines)


def train(
    kind: str = typer.Option("all", "--kind", help="training | quantization | batch_inference | realtime | all"),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
    history: Annotated[Path | None, typer.Option(
        "--history", help="A scheduler history export (CSV/parquet job table: job_id, submitted_at, started_at, "
                          "ended_at or elapsed_s, state, gpus, time_limit_s, user, account, partition, qos, "
                          "gpu_type, job_name; or sacct --parsable2 text, or Kueue workloads JSON): fit the "
                          "scheduler-history forecaster on it, score it on its latest 20 %, save it for "
                          "'gpuplan predict --kind scheduler'.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="Format of --history: csv | parquet | slurm-sacct | "
                                                           "kueue-json (default: by suffix).")] = None,
    timezone: Annotated[str | None, typer.Option("--timezone", help="IANA zone of naive times in --history "
                                                                  "(default: the workspace's cluster clock).")] = None,
) -> None:
    """Fit and evaluate forecasters against their baselines; print the metrics (an operator's workspace or --history FILE: the scheduler-history forecaster)."""

    def body() -> int:
        ws = use_workspace(workspace)
        from pipelines.cli.support import emit_json

        if history is not None:
            doc = history_report(history, fmt, timezone, ws)
            emit_json(doc) if json_out else typer.echo(_workspace_text(doc))
            return 0

        if job_side(ws) == "store":  # an operator's workspace: its scheduler-history forecaster on the store
            doc = workspace_report(ws)
            emit_json(doc) if json_out else typer.echo(_workspace_text(doc))
            return 0

        if kind not in ALL_KINDS:
            raise InputError(f"--kind must be one of {', '.join(ALL_KINDS)}; got {kind!r}")
        if kind in JOB_KINDS:
            doc = train_job_kind(kind)
            emit_json(doc) if json_out else _table(doc)
            return 0
        if kind == REALTIME:
            doc = realtime_report()
            emit_json(doc) if json_out else _print(doc)
            return 0
        results = [train_job_kind(k) for k in JOB_KINDS]
        results.append(realtime_report())
        if json_out:
            emit_json({"kind": "all", "results": results})
        else:
            for doc in results:
                _print(doc)
        return 0

    run_guarded(body)
