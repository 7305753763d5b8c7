"""The forecast `gpuplan run` plans with, from an hourly traffic file: the combination, its P90, the hourly mode, the choice."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from pipelines.cli.support import WORKSPACE_HELP, run_guarded, use_workspace

#: Keys of the ``diagnostics`` object (the ingest diagnostics, as in ``gpuplan profile``), in order.
DIAGNOSTIC_KEYS = ("rows_in", "hours", "missing_hours", "longest_gap_h", "duplicates_dropped",
                   "ambiguous_hours", "nonexistent_hours", "off_grid_stamps", "outliers", "constant",
                   "timezone", "zone", "level_shift")


def _iso(ts: Any) -> str | None:
    import pandas as pd

    return None if ts is None else pd.Timestamp(ts).strftime("%Y-%m-%dT%H:%M:%SZ")


def forecast_document(df, timezone: str | None, horizon_h: int) -> dict:
    """The ``gpuplan forecast --json`` document for a traffic frame (``ts``, ``value``).

    The path of ``gpuplan run`` for one service: the file's observed hours as the service's hourly rows
    (:func:`pipelines.stages.traffic.file_service`), :func:`pipelines.stages.realtime.ingest_traffic`, the plan
    start :func:`pipelines.stages.realtime.plan_start` (the hour after the traffic), the fit
    :func:`pipelines.stages.realtime.fit_realtime_forecasts` and the hours
    :func:`pipelines.stages.traffic.planned_forecast` (what the run's demand, ``forecasts.parquet``, holds).

    Returns:
        ``{"method", "status", "messages", "timezone", "plan_start", "forecast": [{"ts", "p50", "p90",
        "lead_band", "hourly_share", "clipped"}], "candidates": {name: {"weight", "mae"}}, "hourly": {...},
        "p90": {"kind", "alpha", "lead_band_h", "bands": [{"lead_h", "quantile", "coverage"}]},
        "day_ahead_guard", "last_day": {"mae", "p90_coverage"}, "diagnostics": {...}}``. ``ts`` ISO 8601 UTC;
        values in the file's units per hour. ``hourly_share``: the weight ``rho^(k-1)`` of the hourly mode's
        correction in that hour's P50 (1 = the hourly mode alone: the first hour); ``bands[i].coverage``: the
        share of the inner days' hours at or below the P90 each would have been issued (replayed oldest first).

    Raises:
        forecasters.errors.InputError / pipelines.io.errors.InputError: bad stamps or values, a bad horizon.
    """
    import pandas as pd

    from forecasters.errors import InputError
    from pipelines.cli.profile import check_horizon_h
    from pipelines.stages.realtime import fit_realtime_forecasts, ingest_traffic, plan_start
    from pipelines.stages.traffic import file_service, planned_forecast

    check_horizon_h(horizon_h, InputError)
    svc, raw = file_service(df, timezone)
    ingested = ingest_traffic([svc], raw)
    start = plan_start(ingested.frame)
    fit = fit_realtime_forecasts([svc], ingested.frame, start, ingested.diagnostics)
    comb = fit.profiles[svc.service]
    fc = planned_forecast(comb, start, horizon_h)
    sel = comb.selection()
    diag = ingested.diagnostics[svc.service]
    s = comb.settings
    ts = pd.DatetimeIndex(fc["ts"])
    lead = ((ts - comb.origin) / pd.Timedelta(hours=1)).to_numpy().astype(int)
    band = [min(int(h) // s.lead_band_h, len(comb.p90_bands) - 1) for h in lead]
    anchor = comb.obs_ts if comb.hourly_anchor == "observed" else comb.anchor_ts
    def hours(t0):
        return ((ts - t0) / pd.Timedelta(hours=1)).to_numpy() if t0 is not None else None

    k_read, k_obs = hours(comb.anchor_ts), hours(comb.obs_ts if comb.hourly_anchor == "observed" else None)
    share = [float(comb.rho ** (kr - 1)) if k_read is not None and kr >= 1 else 0.0 for kr in
             (k_read if k_read is not None else [0] * len(ts))]
    if k_obs is not None:  # the guard's persistence: the hour after the last observed one is that hour's value
        share = [1.0 if ko == 1 else sh for ko, sh in zip(k_obs, share, strict=True)]
    cov = list(comb.p90_band_coverage) or [None] * len(comb.p90_bands)
    messages = list(comb.messages) + ([diag["zone"]["message"]] if diag["zone"].get("message") else [])
    return {
        "method": comb.method,
        "status": comb.status,
        "messages": messages,
        "timezone": comb.timezone,
        "plan_start": _iso(start),
        "forecast": [{"ts": _iso(t), "p50": float(a), "p90": float(b), "lead_band": int(bd), "hourly_share": sh,
                      "clipped": bool(c)}
                     for t, a, b, bd, sh, c in zip(ts, fc["p50"], fc["p90"], band, share, fc["clipped"], strict=True)],
        "candidates": sel["candidates"],
        "hourly": {**sel["hourly"], "anchor_ts": _iso(anchor),
                   "anchor_value": comb.obs_value if comb.hourly_anchor == "observed" else comb.anchor_value},
        "p90": {"kind": comb.p90_kind, "alpha": float(comb.p90_alpha), "lead_band_h": int(s.lead_band_h),
                "hourly_q90": float(comb.hourly_q90),
                "bands": [{"lead_h": [i * s.lead_band_h, (i + 1) * s.lead_band_h - 1] if i < len(comb.p90_bands) - 1
                           else [i * s.lead_band_h, None], "quantile": float(q),
                           "coverage": None if c is None or c != c else float(c)}
                          for i, (q, c) in enumerate(zip(comb.p90_bands, cov, strict=True))]},
        "day_ahead_guard": sel["day_ahead_guard"],
        "last_day": {"mae": fit.metrics[svc.service]["band_mae"],
                     "p90_coverage": fit.metrics[svc.service]["band_p90_coverage"]},
        "diagnostics": {key: diag[key] for key in DIAGNOSTIC_KEYS if key in diag},
    }


def _num(v: float) -> str:
    """``v`` for a person: thousands separated from 100 up (1,594,023), else 3 significant digits (0.412)."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


#: The line above ``gpuplan forecast``'s table: its units and what the last column is (new users asked).
FORECAST_TABLE_NOTE = ("values: the file's `value` per hour (ServeGen: requests/h), the hour starting at ts; "
                       "hourly share: weight of the hourly mode's correction in that hour's P50 (1 = the hourly mode "
                       "alone, the first hour)")


def forecast(
    traffic: Annotated[Path, typer.Option("--traffic", help="Hourly traffic file (ts, value[, service]).")],
    timezone: str | None = typer.Option(None, "--timezone", help="IANA zone of the service's clock (default: the "
                                        "zone the stamps carry, else UTC)."),
    horizon_h: int = typer.Option(24, "--horizon-h", help="Hours ahead, 1..336 (two weeks)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
) -> None:
    """The forecast gpuplan run plans with (combination chosen by backtest, calibrated P90, hourly mode, weights, status)."""

    def body() -> int:
        use_workspace(workspace)
        from pipelines.catalog import read_traffic_file
        from pipelines.cli.profile import check_horizon_h
        from pipelines.cli.support import emit_json
        from pipelines.io.errors import InputError

        check_horizon_h(horizon_h, InputError)  # before reading the file
        doc = forecast_document(read_traffic_file(traffic), timezone, horizon_h)
        if json_out:
            emit_json(doc)
            return 0
        typer.echo(f"method: {doc['method']}\nstatus: {doc['status']}  clock: {doc['timezone']}  "
                   f"plan start: {doc['plan_start']}")
        for m in doc["messages"]:
            typer.echo(f"  note: {m}")
        typer.echo("candidates (backtest MAE in the file's units per hour): " + ", ".join(
            f"{c} weight {v['weight']:.2f} (MAE {_num(v['mae'])})" for c, v in doc["candidates"].items()))
        h = doc["hourly"]
        typer.echo(f"hourly mode: {h['kind']} from the {h['anchor']} hour {h['anchor_ts']}; guard t = "
                   f"{h['guard'].get('t', float('nan')):.2f} (a model of the change replaces persistence only above "
                   f"{h['guard'].get('t_crit', float('nan')):.2f}: a one-sided test on the recent days, DESIGN §4.4)")
        p90 = doc["p90"]
        first = (f"; the first hour: the hourly mode's own, {'x' if p90['kind'] == 'ratio' else '+'}"
                 f"{p90['hourly_q90']:.3f}")
        typer.echo(f"P90 = P50 {'x' if p90['kind'] == 'ratio' else '+'} the quantile of its lead band{first}")
        typer.echo("P90 lead bands: " + ", ".join(
            f"{b['lead_h'][0]}-{b['lead_h'][1] if b['lead_h'][1] is not None else ''} h x{b['quantile']:.3f}"
            f" (coverage {b['coverage']:.2f})" if b["coverage"] is not None else f"{b['lead_h'][0]} h x{b['quantile']:.3f}"
            for b in doc["p90"]["bands"]))
        typer.echo(FORECAST_TABLE_NOTE)
        typer.echo(f"{'ts (UTC)':22s} {'p50 per h':>14s} {'p90 per h':>14s} {'hourly share':>12s}")
        for r in doc["forecast"]:
            typer.echo(f"{r['ts']:22s} {r['p50']:14.1f} {r['p90']:14.1f} {r['hourly_share']:12.2f}")
        return 0

    run_guarded(body)
