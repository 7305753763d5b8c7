"""Fit and evaluate job forecasters against their baselines."""

from __future__ import annotations

import typer

from pipelines.cli_support import run_guarded

JOB_KINDS = ("training", "quantization", "batch_inference")
ALL_KINDS = (*JOB_KINDS, "realtime", "all")
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
    """The real-time profile's rolling-origin backtest on the shipped services.

    Returns the document of :func:`pipelines.traffic_io.train_report` (about 5 s).

    Raises:
        pipelines.errors.InputError, FileNotFoundError: ``data/traffic/services.json`` or a traffic
            file missing or bad (the message names the file and field; exit 2 in the CLI).
    """
    from pipelines.traffic_io import train_report

    return train_report()


def _realtime_table(doc: dict) -> None:
    """Print the real-time report (``train_report``) as one rich table per service."""
    from rich.console import Console
    from rich.table import Table

    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    console = Console()
    for name, s in doc["services"].items():
        t = Table(title=(f"realtime {name}: {s['n_days']} daily origins {s['origins'][0][:10]}..{s['origins'][-1][:10]}, "
                         f"{s['horizon_h']} h ahead, {s['n_hours']} scored hours ({s['units']})"))
        for col in ("forecast", "MAE", "MASE168", "MASE24", "MAPE", "P90 cov"):
            t.add_column(col)
        for label, m in (("day-ahead", s["metrics"]), ("hourly recal", s["hourly_recal"])):
            t.add_row(label, fmt(m["mae"], ",.0f"), fmt(m["mase_snaive168"], ".3f"), fmt(m["mase_naive24"], ".3f"),
                      fmt(m["mape"], ".3f"), fmt(m["p90_coverage"], ".3f"))
        for label, b in s["baselines"].items():
            t.add_row(f"baseline: {label}", fmt(b["mae"], ",.0f"), "", "", "", "")
        console.print(t)
        console.print(f"  method: {s['method']}; status: {s['status']}")
        for msg in s["messages"]:
            console.print(f"  note: {msg}")


def _print(doc: dict) -> None:
    """Human output of one report (job kind or real-time)."""
    _realtime_table(doc) if doc.get("kind") == "realtime" else _table(doc)


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
