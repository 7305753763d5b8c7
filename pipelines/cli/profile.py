"""The weekly seasonal profile alone from an hourly traffic file (one candidate; gpuplan forecast prints what gpuplan run plans with)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli.support import WORKSPACE_HELP, run_guarded, use_workspace

#: Keys of the ``diagnostics`` object in the JSON contract (DESIGN §7.1, ``docs/DESIGN.md``), in order.
DIAGNOSTIC_KEYS = ("rows_in", "hours", "missing_hours", "longest_gap_h", "duplicates_dropped",
                   "ambiguous_hours", "nonexistent_hours", "off_grid_stamps", "outliers", "constant",
                   "components", "timezone", "zone", "level_shift")

#: Longest forecast ``gpuplan profile`` prints, in hours: two weeks. DESIGN forecasts real-time
#: demand 24–168 h ahead; a weekly profile fitted from 1–2 weeks of history says nothing useful
#: beyond twice that, and an unbounded value only produces a huge document (100000 h printed 9 MB).
MAX_HORIZON_H = 336


def profile_document(df, timezone: str | None, horizon_h: int) -> dict:
    """The ``gpuplan profile --json`` document for a traffic frame (see DESIGN §7.1, ``docs/DESIGN.md``).

    ``{"method", "status", "messages", "forecast": [{"ts", "p50", "p90"}], "diagnostics": {...}}``;
    ``ts`` ISO 8601 UTC (``Z``), values in the file's units per hour, the forecast starting at the first
    hour after the history. ``messages`` explains a ``"degraded"`` or ``"level_shift"`` status and states
    the level correction (:func:`forecasters.realtime.recalibrate` from the last actual hour that is neither
    imputed nor flagged as an outlier). The weekly profile alone: ``gpuplan run`` plans with the
    combination chosen by backtest (:mod:`forecasters.realtime.combine`, DESIGN §4.4).

    Seasonal clock, in order of precedence: ``timezone`` (``--timezone``); else the zone the stamps carry
    (a tz-aware parquet column's IANA zone, or the IANA zone whose UTC offsets match the file's ISO
    offsets at every stamp, :mod:`forecasters.realtime.zones`); else UTC. A file whose offsets identify
    no IANA zone (one non-zero offset throughout, or a pattern no zone has) gets that fixed offset as
    the clock and status ``"degraded"`` with a message naming it. ``diagnostics.timezone`` is the clock
    used; ``diagnostics.zone`` what the stamps carry (``kind``, ``zone``, ``candidates``, ``offsets``,
    ``switches``, ``found``, ``clock``, ``status``, ``message``); ``diagnostics.level_shift`` the level
    shift at the end of the history (None, or ``since``, ``factor``, ``hours``, ``share``, ``message``).
    Status: ``"degraded"`` if the profile or the zone is degraded, else ``"level_shift"`` when the
    profile follows a new level, else ``"ok"``.
    """
    import pandas as pd

    from forecasters.errors import InputError
    from forecasters.realtime import fit_profile, forecast, ingest, recalibrate

    check_horizon_h(horizon_h, InputError)
    series, diag = ingest(df, timezone)
    tz = diag["timezone"]
    prof = fit_profile(series, tz, exclude=diag["imputed"] + diag["outliers"])
    # the level correction never reads an imputed hour or one ingest flagged as an outlier (an outage's
    # zero halved the forecast: DESIGN §4.4)
    unread = pd.DatetimeIndex(pd.to_datetime(diag["imputed"] + diag["outliers"], utc=True))
    prof = recalibrate(prof, series.drop(index=unread))
    fc = forecast(prof, horizon_h)
    zone = diag["zone"]
    notes = ([zone["message"]] if zone["message"] else []) + list(prof.messages)
    if not prof.constant:
        notes.append(f"level correction x{prof.level_factor:.3f} from the last actual hour, decaying "
                     f"as phi^h with phi={prof.phi_:.2f}")
    status = "degraded" if zone["status"] == "degraded" else prof.status
    diagnostics = {k: diag[k] for k in DIAGNOSTIC_KEYS if k != "components"}
    diagnostics["constant"] = bool(diag["constant"] or prof.constant)
    diagnostics["components"] = list(prof.components)
    return {
        "method": prof.method,
        "status": status,
        "messages": notes,
        "forecast": [
            {"ts": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "p50": float(a), "p90": float(b)}
            for t, a, b in zip(fc["ts"], fc["p50"], fc["p90"], strict=True)
        ],
        "diagnostics": diagnostics,
    }


def check_horizon_h(horizon_h: int, error: type[ValueError]) -> None:
    """Raise ``error`` naming ``--horizon-h`` unless 1 <= ``horizon_h`` <= :data:`MAX_HORIZON_H`."""
    if not 1 <= horizon_h <= MAX_HORIZON_H:
        raise error(f"--horizon-h must be between 1 and {MAX_HORIZON_H} hours (two weeks); got {horizon_h}")


def profile(
    traffic: Annotated[Path, typer.Option("--traffic", help="Hourly traffic file (ts, value[, service]).")],
    timezone: str | None = typer.Option(None, "--timezone", help="IANA zone of naive stamps; the local clock "
                                        "(default: the zone the stamps carry, else UTC)."),
    horizon_h: int = typer.Option(24, "--horizon-h", help=f"Hours ahead to forecast, 1..{MAX_HORIZON_H} (two weeks)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
) -> None:
    """The weekly profile's P50/P90 per hour alone (not the planner's forecast: gpuplan forecast), with diagnostics."""

    def body() -> int:
        use_workspace(workspace)
        from pipelines.catalog import read_traffic_file
        from pipelines.cli.support import emit_json
        from pipelines.io.errors import InputError

        check_horizon_h(horizon_h, InputError)  # before reading the file
        doc = profile_document(read_traffic_file(traffic), timezone, horizon_h)
        if json_out:
            emit_json(doc)
            return 0
        d = doc["diagnostics"]
        typer.echo(f"method: {doc['method']}\nstatus: {doc['status']}")
        for m in doc["messages"]:
            typer.echo(f"  note: {m}")
        typer.echo(f"components: {', '.join(d['components'])}")
        typer.echo(", ".join(f"{k}={d[k]}" for k in DIAGNOSTIC_KEYS[:8]) + f", outliers={len(d['outliers'])}"
                   f", constant={d['constant']}")
        typer.echo(f"{'ts (UTC)':22s} {'p50':>14s} {'p90':>14s}")
        for r in doc["forecast"]:
            typer.echo(f"{r['ts']:22s} {r['p50']:14.1f} {r['p90']:14.1f}")
        return 0

    run_guarded(body)
