"""Traffic files: read hourly traffic (CSV/parquet), write derived series, derive ServeGen hourly series.

The format adapter of traffic files and the service settings: it parses and writes given paths
(:mod:`pipelines.catalog` knows the file names); :mod:`forecasters.realtime` is pure.

File contract (``gpuplan profile --traffic FILE``): columns ``ts`` (ISO 8601 text, with an offset or
``Z``, or naive local time when the zone is declared with ``--timezone``), ``value`` (traffic per hour
in the file's units, e.g. requests/h) and optionally ``service``; extra columns are ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from pipelines import strict_json
from pipelines.atomic import atomic_write_text
from pipelines.csv_sniff import read_operator_csv
from pipelines.errors import InputError
from pipelines.stages.realtime import ServiceSettings

#: ServeGen window length: 600 s (``t_s`` steps of the per-client traces).
SERVEGEN_WINDOW_S = 600
#: Six 10-minute windows per hour.
WINDOWS_PER_HOUR = 3600 // SERVEGEN_WINDOW_S


def read_traffic(path: str | os.PathLike) -> pd.DataFrame:
    """Read an hourly traffic file (``.csv``, ``.csv.gz`` or ``.parquet``) as a frame.

    A CSV is read by :func:`pipelines.csv_sniff.read_operator_csv` (separator, decimal comma, header
    spaces and an unnamed index column sniffed; an ambiguous file is refused in one line).
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
            df = read_operator_csv(p, f"traffic file {p}", text_columns=("ts", "service"))
        else:
            raise InputError(f"traffic file {p}: expected .csv, .csv.gz or .parquet")
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - file boundary: name the file
        raise InputError(f"traffic file {p}: cannot read ({type(exc).__name__}: {exc})") from exc
    missing = [c for c in ("ts", "value") if c not in df.columns]
    if missing:
        raise InputError(
            f"traffic file {p}: missing column(s) {missing}; columns found {[str(c) for c in df.columns]}; "
            "expected ts, value[, service]"
        )
    return df


def write_csv_atomic(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``df`` as CSV (no index) atomically, via :func:`pipelines.atomic.atomic_write_text`."""
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


def read_services(path: str | os.PathLike) -> list[ServiceSettings]:
    """The real-time service settings file (``services.json``, see ``data/traffic/README.md``), validated.

    Raises:
        pipelines.errors.InputError: file missing, not JSON, or a service without a required field.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"service settings not found: {p}")
    doc = strict_json.loads(p.read_text(), str(p))
    return [ServiceSettings.from_dict(s, f"{p}: services[{i}]") for i, s in enumerate(doc.get("services", []))]


def read_service_traffic(path: str | os.PathLike, service: str) -> pd.DataFrame:
    """One service's raw hourly rows (``ts``, ``value``) from its traffic file (:func:`read_traffic`).

    A file with a ``service`` column keeps only that service's rows.

    Raises:
        FileNotFoundError: the file does not exist.
        pipelines.errors.InputError: unreadable file, or a ``service`` column without rows of this service.
    """
    raw = read_traffic(path)
    if "service" in raw.columns:
        raw = raw[raw["service"] == service]
        if raw.empty:
            raise InputError(f"traffic file {path}: no rows with service == {service!r}")
    return raw[["ts", "value"]]
