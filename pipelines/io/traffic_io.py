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

import numpy as np
import pandas as pd

from pipelines.io.atomic import atomic_write_text
from pipelines.io.csv_sniff import read_operator_csv
from pipelines.io.errors import InputError

#: ServeGen window length: 600 s (``t_s`` steps of the per-client traces).
SERVEGEN_WINDOW_S = 600
#: Six 10-minute windows per hour.
WINDOWS_PER_HOUR = 3600 // SERVEGEN_WINDOW_S


def read_traffic(path: str | os.PathLike) -> pd.DataFrame:
    """Read an hourly traffic file (``.csv``, ``.csv.gz`` or ``.parquet``) as a frame.

    A CSV is read by :func:`pipelines.io.csv_sniff.read_operator_csv` (separator, decimal comma, header
    spaces and an unnamed index column sniffed; an ambiguous file is refused in one line).
    Returns the frame unchanged except that ``ts`` is kept as text for CSV (zone handling is done by
    :func:`forecasters.realtime.ingest`, which must see whether stamps are naive or aware).

    Raises:
        FileNotFoundError: the file does not exist.
        pipelines.io.errors.InputError: unknown extension, unreadable file, or ``ts``/``value`` missing.
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
    """Write ``df`` as CSV (no index) atomically, via :func:`pipelines.io.atomic.atomic_write_text`."""
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
        pipelines.io.errors.InputError: model absent or windows not on the 600 s grid.
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


def read_service_traffic(path: str | os.PathLike, service: str) -> pd.DataFrame:
    """One service's raw hourly rows (``ts``, ``value``) from its traffic file (:func:`read_traffic`).

    A file with a ``service`` column keeps only that service's rows.

    Raises:
        FileNotFoundError: the file does not exist.
        pipelines.io.errors.InputError: unreadable file, or a ``service`` column without rows of this service.
    """
    raw = read_traffic(path)
    if "service" in raw.columns:
        raw = raw[raw["service"] == service]
        if raw.empty:
            raise InputError(f"traffic file {path}: no rows with service == {service!r}")
    return raw[["ts", "value"]]


#: Philly minute rows an hour needs to be kept (half the hour); fewer: a collection gap.
PHILLY_MIN_MINUTES = 30
#: Alibaba openb trace day whose start opens the hourly GPU series: 99.7 % of pods are created in days
#: 115-149 (``alibaba-openb-gpu-2023/README.md``); before it only a few long-lived services exist.
OPENB_FIRST_DAY = 115
#: Calendar stamp given to the openb trace's t = 0 (the trace has none; a choice, see
#: :func:`derive_openb_gpus_hourly`).
OPENB_T0_UTC = "2023-01-01T00:00:00Z"


def derive_philly_hourly(minutes: pd.DataFrame, min_minutes: int = PHILLY_MIN_MINUTES) -> pd.DataFrame:
    """Hourly active-node demand of the Philly cluster from the per-minute node sequence.

    Args:
        minutes: ``philly_node_sequence_minute.csv.gz`` of ``philly-derived-2017`` (columns ``time``: minute
            stamp ``YYYY-MM-DD HH:MM:SS`` without zone, taken as UTC (the trace gives none); ``active``:
            nodes busy that minute; ``total``: nodes counted).
        min_minutes: minutes an hour needs (default 30).

    Returns:
        Frame ``ts`` (ISO 8601 UTC, ``Z``), ``value`` (mean active nodes over the hour's minutes, nodes),
        ``minutes`` (minutes present). Omitted, so that ingest counts them as missing hours (imputed and
        masked): hours with fewer than ``min_minutes`` minutes (the README's 10-hour gap of 2017-10-25 and
        the partial last hour), and hours whose every minute has ``active == 0`` (2017-10-26 00:00-17:59,
        "likely an outage/collection gap -- mask both before fitting", the README).

    Raises:
        pipelines.io.errors.InputError: ``time`` or ``active`` missing, or a stamp that does not parse.
    """
    miss = [c for c in ("time", "active") if c not in minutes.columns]
    if miss:
        raise InputError(f"philly node sequence: missing column(s) {miss}; expected time, active, total")
    try:
        t = pd.to_datetime(minutes["time"], format="%Y-%m-%d %H:%M:%S", utc=True)
    except (ValueError, TypeError) as exc:
        raise InputError(f"philly node sequence: time not 'YYYY-MM-DD HH:MM:SS' ({exc})") from exc
    active = pd.to_numeric(minutes["active"], errors="raise").astype("float64")
    g = pd.DataFrame({"hour": t.dt.floor("h"), "active": active}).groupby("hour")["active"]
    agg = pd.DataFrame({"value": g.mean(), "minutes": g.size(), "peak": g.max()})
    agg = agg[(agg["minutes"] >= min_minutes) & (agg["peak"] > 0)]
    return pd.DataFrame({"ts": agg.index.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": agg["value"].to_numpy(),
                         "minutes": agg["minutes"].to_numpy()})


def derive_openb_gpus_hourly(pods: pd.DataFrame, first_day: int = OPENB_FIRST_DAY,
                             t0_utc: str = OPENB_T0_UTC) -> pd.DataFrame:
    """GPUs held per hour in the Alibaba openb trace (time-weighted mean over each hour).

    A pod holds ``num_gpu x gpu_milli / 1000`` GPUs (``gpu_milli`` < 1000 only for GPU-sharing pods with
    ``num_gpu == 1``; README) from ``scheduled_time`` to ``deletion_time`` (seconds since the trace start);
    pods never scheduled (``Pending``, empty ``scheduled_time``) hold none. (``creation_time`` precedes
    ``scheduled_time`` by a median of 2 s; a pod holds its GPUs once bound.) The hour ``h`` value is the
    GPU-hours held in ``[h, h + 1)``: an exact split of each pod's interval over the hours it touches.

    Args:
        pods: ``openb_pod_list_default.csv`` of ``alibaba-openb-gpu-2023``.
        first_day: first trace day of the series (default 115).
        t0_utc: stamp of the trace's ``t = 0`` (default 2023-01-01T00:00Z: the trace gives no date or zone;
            origins at "midnight" are then multiples of 24 h from the trace start).

    Returns:
        Frame ``ts`` (ISO 8601 UTC, ``Z``), ``value`` (GPUs held, mean over the hour): every hour from
        ``first_day`` x 24 up to the last whole hour before the trace end (the largest ``deletion_time``).

    Raises:
        pipelines.io.errors.InputError: a required column missing, or no GPU pod.
    """
    need = ("num_gpu", "gpu_milli", "scheduled_time", "deletion_time")
    miss = [c for c in need if c not in pods.columns]
    if miss:
        raise InputError(f"openb pod list: missing column(s) {miss}; expected {', '.join(need)}")
    end_h = int(pd.to_numeric(pods["deletion_time"]).max() // 3600)
    g = pods[(pods["num_gpu"] > 0) & pods["scheduled_time"].notna()]
    if g.empty:
        raise InputError("openb pod list: no scheduled pod with num_gpu > 0")
    w = (g["num_gpu"].to_numpy(float) * g["gpu_milli"].to_numpy(float) / 1000.0)
    a = g["scheduled_time"].to_numpy(float) / 3600.0
    b = np.minimum(g["deletion_time"].to_numpy(float) / 3600.0, end_h)
    keep = b > a
    w, a, b = w[keep], a[keep], b[keep]
    # per pod: partial first hour, whole hours (difference array), partial last hour
    held = np.zeros(end_h + 1)
    fa, fb = np.floor(a).astype(np.int64), np.floor(b).astype(np.int64)
    same = fa == fb
    np.add.at(held, fa[same], w[same] * (b[same] - a[same]))
    d = ~same
    np.add.at(held, fa[d], w[d] * (fa[d] + 1 - a[d]))
    np.add.at(held, fb[d], w[d] * (b[d] - fb[d]))
    diff = np.zeros(end_h + 2)
    np.add.at(diff, fa[d] + 1, w[d])
    np.add.at(diff, fb[d], -w[d])
    held += np.cumsum(diff)[: end_h + 1]
    hours = np.arange(first_day * 24, end_h)
    ts = pd.Timestamp(t0_utc) + pd.to_timedelta(hours, unit="h")
    return pd.DataFrame({"ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": held[hours]})
