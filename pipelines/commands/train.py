"""Fit and evaluate job forecasters against their baselines."""

from __future__ import annotations

import typer

from pipelines.cli_support import run_guarded

JOB_KINDS = ("training", "quantization", "batch_inference")
ALL_KINDS = (*JOB_KINDS, "realtime", "all")
#: Where ``--kind realtime`` looks for the real-time engineer's report function: a callable with
#: no arguments returning one JSON-able dict (its metrics beside its baselines).
REALTIME_HOOKS = (("forecasters.realtime", "train_report"), ("pipelines.traffic_io", "train_report"))
TEST_FRACTION = 0.2


def train_job_kind(kind: str) -> dict:
    """Fit ``kind`` on the earliest 80 % of its shipped history and evaluate on the latest 20 %.

    Returns the document of :func:`forecasters.jobs.evaluate`. Logs the number of rows excluded
    for a non-positive duration (case C21) to standard error.
    """
    import sys

    from forecasters.jobs import evaluate, fit, time_split
    from pipelines.job_io import shipped_history

    history = shipped_history(kind)
    train, test = time_split(history, TEST_FRACTION)
    model = fit(kind, train)
    doc = evaluate(model, test)
    n_bad_test = int((test["duration_h"] <= 0).sum())
    print(
        f"{kind}: excluded {model.info['n_excluded_nonpositive']} training and {n_bad_test} test rows "
        "with duration_h <= 0 (failed at launch)",
        file=sys.stderr,
    )
    return doc


def realtime_report() -> dict:
    """The real-time forecaster's report through the first hook of :data:`REALTIME_HOOKS` that exists.

    Raises:
        pipelines.errors.InputError: no hook is implemented yet.
    """
    import importlib

    from pipelines.errors import InputError

    for module, attr in REALTIME_HOOKS:
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
        return fn()
    hooks = ", ".join(f"{m}.{a}" for m, a in REALTIME_HOOKS)
    raise InputError(f"the real-time training report is not available yet (none of {hooks} exists)")


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


def train(
    kind: str = typer.Option("all", "--kind", help="training | quantization | batch_inference | realtime | all"),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Fit and evaluate forecasters against their baselines; print the metrics."""

    def body() -> int:
        from pipelines.cli_support import emit_json
        from pipelines.errors import InputError

        if kind not in ALL_KINDS:
            raise InputError(f"--kind must be one of {', '.join(ALL_KINDS)}; got {kind!r}")
        if kind in JOB_KINDS:
            doc = train_job_kind(kind)
            emit_json(doc) if json_out else _table(doc)
            return 0
        if kind == "realtime":
            doc = realtime_report()
            emit_json(doc) if json_out else typer.echo(doc)
            return 0
        results = [train_job_kind(k) for k in JOB_KINDS]
        try:
            results.append(realtime_report())
        except InputError as exc:
            import sys

            print(f"realtime: skipped: {exc}", file=sys.stderr)
            results.append({"kind": "realtime", "status": "not_available", "reason": str(exc)})
        if json_out:
            emit_json({"kind": "all", "results": results})
        else:
            for doc in results:
                _table(doc) if "metrics" in doc and "baselines" in doc else typer.echo(doc)
        return 0

    run_guarded(body)
