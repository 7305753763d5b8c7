"""Reading and writing job histories and job files (CSV or parquet), validated on load.

* :func:`load_history` reads an operator's history of finished jobs of one kind, in the schema
  of DESIGN §3 (``job_id`` optional, the kind's features, ``submitted_at``, ``started_at``,
  ``finished_at`` as timezone-aware timestamps, ``duration_h``, ``gpus_used``).
* :func:`load_jobs` reads jobs to forecast (features, optional ``job_id``).
* The shipped histories' paths are :mod:`pipelines.catalog`'s (``history_path``, ``shipped_history``;
  regenerate them with ``scripts/generate_histories.py``); this module knows no file names.
* :func:`write_history` writes parquet atomically (temporary file, then ``os.replace``).

Every error is a :class:`pipelines.io.errors.InputError` or :class:`forecasters.errors.InputError`
naming the file, column and row.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from forecasters.frames import normalise_features, require_columns
from forecasters.schema import TARGET_DURATION, TARGET_GPUS, TIMING_COLUMNS, spec_for
from pipelines.io.atomic import atomic_write_bytes
from pipelines.io.csv_sniff import read_operator_csv
from pipelines.io.errors import InputError

#: (n, seed) of each shipped history: ``generate_history(kind, n, seed)`` rebuilds it exactly.
SHIPPED = {"training": (4000, 0), "quantization": (3000, 0), "batch_inference": (3000, 0)}
#: Largest accepted gap between ``duration_h`` and ``finished_at - started_at`` (hours).
DURATION_TOLERANCE_H = 1.0 / 60.0


def _read_table(path: Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            return pd.read_parquet(path)
        if suffix == ".csv":
            return read_operator_csv(path, str(path), text_columns=("job_id",))
    except InputError:
        raise
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot be read as {suffix[1:]}: {' '.join(str(exc).split())[:200]}") from None
    raise InputError(f"{path}: unsupported file type {suffix or '(none)'!r}; expected .csv or .parquet")


def _utc_column(frame: pd.DataFrame, col: str, path: Path) -> pd.Series:
    """Timestamps of ``col`` as ``datetime64[us, UTC]``; naive or unparsable values are refused."""
    s = frame[col]
    if isinstance(s.dtype, pd.DatetimeTZDtype):
        return s.dt.tz_convert("UTC").astype("datetime64[us, UTC]")
    if pd.api.types.is_datetime64_dtype(s.dtype):
        raise InputError(f"{path}: column {col!r} has naive timestamps; give them with a UTC offset")
    values = s.astype(object).tolist()
    out = []
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            out.append(pd.NaT)
            continue
        try:
            ts = pd.Timestamp(v)
        except (TypeError, ValueError):
            raise InputError(f"{path}: row {i}, column {col!r}: {v!r} is not a timestamp") from None
        if ts.tzinfo is None:
            raise InputError(
                f"{path}: row {i}, column {col!r}: {v!r} has no UTC offset (write e.g. 2026-01-05T10:00:00Z)"
            )
        out.append(ts.tz_convert("UTC"))
    return pd.Series(pd.DatetimeIndex(out).as_unit("us"), index=frame.index, name=col)


def validate_history(frame: pd.DataFrame, kind: str, source: str | Path = "history") -> pd.DataFrame:
    """Validate a history frame of ``kind``; return a copy with UTC timing columns.

    Checks: every feature, timing and target column present; timestamps timezone-aware;
    ``started_at >= submitted_at`` and ``finished_at >= started_at``; ``duration_h`` numeric and
    within one minute of ``finished_at - started_at``; features valid (see
    :func:`forecasters.frames.normalise_features`; missing categories allowed, as in legacy rows).

    Raises:
        InputError: naming the source, column and row of the first problem.
    """
    spec = spec_for(kind)
    path = Path(str(source))
    require_columns(frame, (*spec.features, *TIMING_COLUMNS, TARGET_DURATION, TARGET_GPUS), f"{source}")
    out = frame.copy()
    for col in TIMING_COLUMNS:
        out[col] = _utc_column(out, col, path)
        if out[col].isna().any():
            i = int(np.flatnonzero(out[col].isna().to_numpy())[0])
            raise InputError(f"{source}: row {i}, column {col!r}: missing timestamp")
    dur = pd.to_numeric(out[TARGET_DURATION].astype(object), errors="coerce")
    bad = dur.isna() & out[TARGET_DURATION].notna()
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{source}: row {i}, column 'duration_h': {out[TARGET_DURATION].iloc[i]!r} is not a number")
    out[TARGET_DURATION] = dur.astype("float64")
    early = out["started_at"] < out["submitted_at"]
    if early.any():
        i = int(np.flatnonzero(early.to_numpy())[0])
        raise InputError(f"{source}: row {i}: started_at is before submitted_at")
    neg = out["finished_at"] < out["started_at"]
    if neg.any():
        i = int(np.flatnonzero(neg.to_numpy())[0])
        raise InputError(f"{source}: row {i}: finished_at is before started_at")
    span_h = (out["finished_at"] - out["started_at"]).dt.total_seconds().to_numpy() / 3600.0
    off = np.abs(span_h - out[TARGET_DURATION].to_numpy()) > DURATION_TOLERANCE_H
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise InputError(
            f"{source}: row {i}: duration_h {out[TARGET_DURATION].iloc[i]:.4f} does not match "
            f"finished_at - started_at = {span_h[i]:.4f} h"
        )
    normalise_features(out, spec)
    return out


def load_history(path: str | Path, kind: str) -> pd.DataFrame:
    """Read and validate an operator's history of ``kind`` jobs from CSV or parquet (see :func:`validate_history`)."""
    return validate_history(_read_table(Path(path)), kind, source=path)


def load_jobs(path: str | Path, kind: str) -> pd.DataFrame:
    """Read jobs to forecast (features, optional ``job_id``) from CSV or parquet; feature columns checked.

    Raises:
        InputError / FileNotFoundError: missing file, unsupported type, a missing feature column, no rows.
    """
    frame = _read_table(Path(path))
    require_columns(frame, spec_for(kind).features, f"{path}")
    if len(frame) == 0:
        raise InputError(f"{path}: no jobs")
    if "job_id" in frame.columns:
        frame["job_id"] = frame["job_id"].astype(str)
        dup = frame["job_id"].duplicated()
        if dup.any():
            i = int(np.flatnonzero(dup.to_numpy())[0])
            raise InputError(f"{path}: row {i}: duplicate job_id {frame['job_id'].iloc[i]!r}")
    return frame


def history_bytes(frame: pd.DataFrame) -> bytes:
    """Parquet bytes of a history frame (zstd, no pandas index)."""
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False, compression="zstd")
    return buf.getvalue()


def write_history(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``frame`` as parquet to ``path`` atomically (temporary file in the same folder, then rename)."""
    return atomic_write_bytes(path, history_bytes(frame), make_parents=True)
