"""Traffic files: read hourly traffic (CSV/parquet), write derived series, derive ServeGen hourly series.

Only this module (and the CLI) touches traffic files; :mod:`forecasters.realtime` is pure.

File contract (``gpuplan profile --traffic FILE``): columns ``ts`` (ISO 8601 text, with an offset or
``Z``, or naive local time when the zone is declared with ``--timezone``), ``value`` (traffic per hour
in the file's units, e.g. requests/h) and optionally ``service``; extra columns are ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from pipelines.errors import InputError

#: ServeGen window length: 600 s (``t_s`` steps of the per-client traces).
SERVEGEN_WINDOW_S = 600
#: Six 10-minute windows per hour.
WINDOWS_PER_HOUR = 3600 // SERVEGEN_WINDOW_S


def read_traffic(path: str | os.PathLike) -> pd.DataFrame:
    """Read an hourly traffic file (``.csv``, ``.csv.gz`` or ``.parquet``) as a frame.

    Returns the frame unchanged except that ``ts`` is kept as text for CSV (zone handling is done by
    :func:`forecasters.realtime.ingest`, which must see whether stamps are naive or aware).

    Raises:
        FileNotFoundError: the file does not exist.
        pipelines.errors.InputError: unknown extension, unreadable file, or ``ts``/``value`` missing.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"traffic file not found: {p}")
    name = p.name.lower()
    try:
        if name.endswith(".parquet"):
            df = pd.read_parquet(p)
        elif name.endswith(".csv") or name.endswith(".csv.gz"):
            df = pd.read_csv(p, dtype={"ts": "str"})
        else:
            raise InputError(f"traffic file {p}: expected .csv, .csv.gz or .parquet")
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - file boundary: name the file
        raise InputError(f"traffic file {p}: cannot read ({type(exc).__name__}: {exc})") from exc
    missing = [c for c in ("ts", "value") if c not in df.columns]
    if missing:
        raise InputError(f"traffic file {p}: missing column(s) {missing}; expected ts, value[, service]")
    return df


def write_csv_atomic(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``df`` as CSV (no index) atomically, via :func:`pipelines.atomic.atomic_write_text`."""
    from pipelines.atomic import atomic_write_text

    return atomic_write_text(path, df.to_csv(index=False), make_parents=True)


def derive_servegen_hourly(
    aggregate_10min: pd.DataFrame,
    model: str,
    start_local: str,
    timezone: str,
    gap_share: float = 0.05,
) -> pd.DataFrame:
    """Hourly request counts from the ServeGen 10-minute aggregate of one model.

    Args:
        aggregate_10min: ``aggregate_10min.csv`` of ``servegen-bailian-llm-2025`` (columns ``model``,
            ``t_s`` seconds from trace start, ``total_rate_rps`` summed over clients in req/s).
        model: e.g. ``"m-small"``.
        start_local: local wall-clock date-time of ``t_s = 0`` (ServeGen: t=0 is local midnight).
        timezone: IANA zone of that local clock.
        gap_share: a window whose total rate is at most this share of the model's median window total
            (default 5 %) is a collection gap.

    Returns:
        Frame ``ts`` (ISO 8601 UTC text ending in ``Z``), ``value`` (requests per hour = mean of the hour's
        valid windows in req/s × 3600), ``service`` (= model), ``valid_windows`` (1..6). A window whose
        total over all clients is 0, or a partial window at the edge of such a gap (m-mid: ~14 req/s
        against a median of ~1,900 req/s, i.e. <= ``gap_share`` of the median), is a collection gap, not
        demand: it is left out of the hour's mean, and an hour with no valid window is omitted from the
        output, so that ingest counts it as a missing hour (imputed, and masked out of the fit).

    Raises:
        pipelines.errors.InputError: model absent or windows not on the 600 s grid.
    """
    d = aggregate_10min[aggregate_10min["model"] == model]
    if d.empty:
        raise InputError(f"aggregate_10min: no rows for model {model!r}")
    t_s = d["t_s"].astype("int64")
    if (t_s % SERVEGEN_WINDOW_S != 0).any():
        raise InputError(f"aggregate_10min: t_s of model {model!r} not on the {SERVEGEN_WINDOW_S} s grid")
    hour = t_s // 3600
    rate = d["total_rate_rps"].astype("float64")
    valid = rate > gap_share * float(rate[rate > 0].median())
    g = pd.DataFrame({"hour": hour, "rate": rate.where(valid), "valid": valid.astype("int64")})
    agg = g.groupby("hour").agg(mean_rps=("rate", "mean"), valid_windows=("valid", "sum"))
    agg = agg[agg["valid_windows"] > 0]
    t0_utc = pd.Timestamp(start_local).tz_localize(timezone).tz_convert("UTC")
    ts = t0_utc + pd.to_timedelta(agg.index.to_numpy() * 3600, unit="s")
    return pd.DataFrame(
        {
            "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "value": (agg["mean_rps"].to_numpy() * 3600.0).round(1),
            "service": model,
            "valid_windows": agg["valid_windows"].to_numpy(),
        }
    )


#: Rolling-origin settings of :func:`train_report` (the defaults of
#: :func:`forecasters.realtime.backtest` and of ``benchmarks/backtest_realtime.py``): one origin per day
#: of the second week of the shipped history, 24 h ahead, level recalibration from the last hour.
REPORT_N_DAYS = 7
REPORT_HORIZON_H = 24
REPORT_RECAL_WINDOW_H = 1


def ingest_service(service: dict, traffic_dir: str | os.PathLike) -> tuple[pd.Series, dict]:
    """Read and ingest one service's hourly traffic file.

    Args:
        service: one entry of ``services.json`` (needs ``service``, ``file``, ``timezone``).
        traffic_dir: folder holding ``service["file"]``.

    Returns:
        ``(series, diagnostics)`` of :func:`forecasters.realtime.ingest`: UTC hourly traffic in the file's
        units (e.g. requests/h), gaps imputed and listed in ``diagnostics["imputed"]``.

    Raises:
        FileNotFoundError: the file does not exist.
        pipelines.errors.InputError: unreadable file, or a ``service`` column without rows of this service.
        forecasters.errors.InputError: bad stamps or values (named by ingest).
    """
    from forecasters.realtime import ingest

    path = Path(traffic_dir) / service["file"]
    raw = read_traffic(path)
    if "service" in raw.columns:
        raw = raw[raw["service"] == service["service"]]
        if raw.empty:
            raise InputError(f"traffic file {path}: no rows with service == {service['service']!r}")
    return ingest(raw[["ts", "value"]], service["timezone"])


def _report_metrics(m: dict) -> dict:
    """One backtest variant's metrics with MAPE as a fraction; NaN (zero baseline error) as None."""
    import math

    doc = {
        "mae": m["mae"],
        "mase_snaive168": m["mase_snaive168"],
        "mase_naive24": m["mase_naive24"],
        "mape": m["mape_pct"] / 100.0,
        "p90_coverage": m["p90_coverage"],
    }
    return {k: (None if isinstance(v, float) and math.isnan(v) else float(v)) for k, v in doc.items()}


def train_report(data_dir: str | os.PathLike | None = None) -> dict:
    """Backtest report of the real-time profile on every shipped service (``gpuplan train --kind realtime``).

    For each service of ``<data_dir>/traffic/services.json`` (default ``data_dir``: the pipeline
    settings' ``data/``): ingest its hourly file, fit the weekly profile on the whole shipped history
    (its ``status``, ``method`` and ``messages`` are reported; two shipped weeks are below the C03
    "more than 336 points" rule, hence ``"degraded"``), and run the rolling-origin backtest
    :func:`forecasters.realtime.backtest` with its defaults (``REPORT_*``): 7 daily origins over the
    second week, each refitted on the hours before it and scored 24 h ahead; masked gap hours are not
    scored. All origins are kept: the whole report takes about 5 s for the two shipped services
    (measured on the shared 2-core machine; the hourly-recalibration variant is most of it).

    Returns:
        ``{"kind": "realtime", "services": {name: doc}}`` with, per service::

            {"status", "messages", "method", "units", "n_hours", "n_days", "horizon_h", "origins",
             "masked_hours", "outliers",
             "metrics": {"mae", "mase_snaive168", "mase_naive24", "mape", "p90_coverage"},
             "baselines": {"snaive168": {"mae"}, "naive24": {"mae"}},
             "hourly_recal": {same keys as "metrics"}}

        ``metrics`` is the day-ahead P50/P90 (backtest variant ``day_ahead``); ``hourly_recal`` the
        one-hour-ahead forecast after level recalibration from the previous hour (variant
        ``hourly_recal``). ``mae`` in the file's units per hour (``units``); ``mase_*`` = MAE ÷ the
        baseline's MAE on the same ``n_hours`` hours (seasonal naive ``y[t-168]``, naive ``y[t-24]``);
        ``mape`` and ``p90_coverage`` are fractions (0..1). A MASE whose baseline error is 0 is None.

    Raises:
        pipelines.errors.InputError: ``services.json`` missing or a service without a required field,
            a traffic file unreadable, or a series too short for the backtest (named by the callee).
        FileNotFoundError: a traffic file listed in ``services.json`` does not exist.
    """
    from forecasters.realtime import backtest, fit_profile
    from pipelines.config import load_settings
    from pipelines.queue import load_services

    settings = load_settings(**({"data_dir": Path(data_dir).resolve()} if data_dir is not None else {}))
    traffic_dir = settings.data_dir / "traffic"
    services = {}
    for svc in load_services(settings):
        series, diag = ingest_service(svc, traffic_dir)
        prof = fit_profile(series, svc["timezone"], exclude=[*diag["imputed"], *diag["outliers"]])
        res = backtest(series, svc["timezone"], exclude=diag["imputed"], outliers=diag["outliers"],
                       n_days=REPORT_N_DAYS, horizon_h=REPORT_HORIZON_H, recal_window_h=REPORT_RECAL_WINDOW_H)
        day, hourly = res["variants"]["day_ahead"], res["variants"]["hourly_recal"]
        services[svc["service"]] = {
            "status": prof.status,
            "messages": list(prof.messages),
            "method": prof.method,
            "units": svc.get("units", "traffic/h"),
            "n_hours": int(day["n_hours"]),
            "n_days": int(res["n_days"]),
            "horizon_h": REPORT_HORIZON_H,
            "origins": list(res["origins"]),
            "masked_hours": len(diag["imputed"]),
            "outliers": list(diag["outliers"]),
            "metrics": _report_metrics(day),
            "baselines": {"snaive168": {"mae": float(day["mae_snaive168"])},
                          "naive24": {"mae": float(day["mae_naive24"])}},
            "hourly_recal": _report_metrics(hourly),
        }
    return {"kind": "realtime", "services": services}
