"""Plain CSV/parquet sources: job records and traffic in a documented column schema.

**Jobs** (``[sources.history]`` / ``[sources.queue]`` with ``format = "csv"`` or ``"parquet"``): one
row per job, columns named as the job record (:mod:`pipelines.workspace.sources.records`). Required:
``job_id``, ``submitted_at``. Optional: every other record column; ``state`` defaults to
``completed`` when ``ended_at`` is given, else ``running`` when ``started_at`` is, else ``pending``.
Accepted aliases (the shipped LLM histories' schema, DESIGN §3): ``finished_at`` -> ``ended_at``,
``duration_h`` -> ``elapsed_s`` (× 3600), ``gpus_used`` or ``gpus_requested`` -> ``gpus``,
``time_limit_h`` -> ``time_limit_s`` (× 3600). Times with an offset are read as such; naive times
are the cluster's clock (``[cluster] timezone``). Every other column (LLM fields: ``variant``,
``params_b``, ``dataset_tokens_m``, …) becomes an annotation; so does a side-car file's (``sidecar``,
keyed by ``job_id``). ``state`` takes the canonical names or Slurm's (``COMPLETED``, ``TIMEOUT``, …).
Issue 30 and deadlines: ``preemptible`` (true/false), ``checkpoint_interval_min``, ``restart_min``
(:data:`PREEMPTION_COLUMNS`, read into the annotations :mod:`pipelines.workspace.preemption` reads) and
``deadline_at`` (ISO 8601 *with* a zone: a naive one is refused, unlike the other times); a bad value in
one of them refuses the whole file in one line naming the row and the column (exit 2).

**Traffic** (``[sources.traffic]``): columns ``ts``, ``value`` and ``service`` (or no ``service``
column: the service whose ``file`` is this file's name); as ``gpuplan profile --traffic`` reads.

A row that cannot be read is rejected with its line number (CSV: the file's line, header = line 1;
parquet: ``row N``); the rest are kept.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from domain.kinds import JOB_KINDS
from domain.records import JOB_RECORD, STATES, is_censored
from pipelines.io.errors import InputError
from pipelines.workspace.sources.records import SLURM_STATES, ParseResult, job_frame, local_to_utc, traffic_frame

ALIASES: dict[str, tuple[str, float]] = {
    "finished_at": ("ended_at", 1.0), "duration_h": ("elapsed_s", 3600.0), "gpus_used": ("gpus", 1.0),
    "gpus_requested": ("gpus", 1.0), "time_limit_h": ("time_limit_s", 3600.0),
}
TIME_COLUMNS = ("submitted_at", "eligible_at", "started_at", "ended_at")


def _where(i: int, csv: bool) -> str:
    return f"line {i + 2}" if csv else f"row {i + 1}"


def _utc(value: Any, timezone: str) -> pd.Timestamp:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NaT:
        return pd.NaT
    ts = pd.Timestamp(value)
    if pd.isna(ts):
        return pd.NaT
    if ts.tzinfo is None:
        return local_to_utc([ts], timezone).iloc[0]
    return ts.tz_convert("UTC")


def _state(value: Any, row: dict[str, Any]) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or str(value).strip() == "":
        return "completed" if pd.notna(row.get("ended_at")) else ("running" if pd.notna(row.get("started_at"))
                                                                 else "pending")
    text = str(value).strip()
    if text.lower() in STATES:
        return text.lower()
    word = text.split()[0].upper()
    if word in SLURM_STATES:
        return SLURM_STATES[word]
    raise ValueError(f"state {text!r} is not a job state (expected one of {', '.join(STATES)} or a Slurm state)")


#: Optional job columns of a preemptible job (issue 30): ``preemptible`` (true/false), its checkpoint interval
#: and restart cost in minutes. Read into the annotations ``preemptible``, ``checkpoint``, ``restart``
#: (:mod:`pipelines.workspace.preemption`); an empty cell is absent.
PREEMPTION_COLUMNS: tuple[str, ...] = ("preemptible", "checkpoint_interval_min", "restart_min")


def _preemption_annotations(raw: dict[str, Any], where: str) -> dict[str, str]:
    """The row's :data:`PREEMPTION_COLUMNS` as annotations.

    Raises:
        InputError: a bad value (one line naming the row and the column): the whole file is refused, so
            that a queue whose stop rules cannot be read is not planned with part of its jobs.
    """
    from pipelines.workspace.preemption import parse_flag, parse_minutes

    out: dict[str, str] = {}
    try:
        flag = raw.get("preemptible")
        if flag is not None and not (isinstance(flag, float) and np.isnan(flag)) and str(flag).strip() != "":
            out["preemptible"] = "true" if parse_flag(flag, "preemptible") else "false"
        for col, key, positive in (("checkpoint_interval_min", "checkpoint", True), ("restart_min", "restart", False)):
            v = raw.get(col)
            if v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() == "":
                continue
            try:
                minutes = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"{col} {v!r} is not a number of minutes") from None
            parse_minutes(minutes, col, positive=positive)
            out[key] = f"{minutes:g}m"
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    return out


def _deadline(value: Any, where: str) -> pd.Timestamp:
    """A ``deadline_at`` cell: ISO 8601 with its zone -> UTC; empty -> NaT.

    Raises:
        InputError: not a time, or a time without a zone (one line naming the row and the field; the file is
            refused, exit 2): a deadline read in the wrong zone would misjudge the job by hours.
    """
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NaT or str(value).strip() == "":
        return pd.NaT
    try:
        ts = pd.Timestamp(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: deadline_at {value!r} is not a time (expected ISO 8601 with a zone, "
                         f"e.g. 2025-03-16T18:00:00Z)") from None
    if pd.isna(ts):
        return pd.NaT
    if ts.tzinfo is None:
        raise InputError(f"{where}: deadline_at {value!r} has no time zone (expected ISO 8601 with a zone, "
                         f"e.g. 2025-03-16T18:00:00Z or 2025-03-17T02:00:00+08:00)")
    return ts.tz_convert("UTC")


def parse_jobs(frame: pd.DataFrame, timezone: str, csv: bool = True, source: str = "table",
               sidecar: pd.DataFrame | None = None) -> ParseResult:
    """Job rows of a CSV/parquet (module docstring) -> job records.

    Raises:
        InputError: ``job_id`` or ``submitted_at`` column missing.
    """
    frame = frame.rename(columns={c: str(c).strip() for c in frame.columns})
    for col, (target, _) in ALIASES.items():
        if col in frame.columns and target in frame.columns:
            frame = frame.drop(columns=[col])
    missing = [c for c in ("job_id", "submitted_at") if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}; a job table needs job_id and submitted_at")
    extra_side: dict[str, dict[str, Any]] = {}
    if sidecar is not None:
        if "job_id" not in sidecar.columns:
            raise InputError("sidecar: missing column 'job_id'")
        extra_side = {str(r.pop("job_id")): r for r in sidecar.to_dict(orient="records")}
    known = set(JOB_RECORD) | set(ALIASES) | set(PREEMPTION_COLUMNS)
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for i, raw in enumerate(frame.to_dict(orient="records")):
        try:
            row: dict[str, Any] = {"source": source}
            for col, value in raw.items():
                if col in ALIASES:
                    target, scale = ALIASES[col]
                    row[target] = float(value) * scale if pd.notna(value) else np.nan
                elif col in JOB_RECORD and col != "annotations":
                    row[col] = value
            row["job_id"] = str(raw["job_id"]).strip()
            if not row["job_id"] or row["job_id"] == "nan":
                raise ValueError("job_id is empty")
            for col in TIME_COLUMNS:
                try:
                    row[col] = _utc(row.get(col), timezone)
                except (TypeError, ValueError):
                    raise ValueError(f"{col} {row.get(col)!r} is not a time (expected ISO 8601)") from None
            if pd.isna(row["submitted_at"]):
                raise ValueError("submitted_at is empty")
            row["deadline_at"] = _deadline(raw.get("deadline_at"), _where(i, csv))
            row["state"] = _state(row.get("state"), row)
            if pd.isna(row.get("elapsed_s", np.nan)) and pd.notna(row["started_at"]) and pd.notna(row["ended_at"]):
                row["elapsed_s"] = (row["ended_at"] - row["started_at"]).total_seconds()
            gpus = row.get("gpus", 0)
            if pd.notna(gpus) and float(gpus) < 0:
                raise ValueError(f"gpus {gpus!r} is negative (a count of GPUs: expected a whole number >= 0)")
            if pd.isna(gpus) or float(gpus) != int(float(gpus)):
                raise ValueError(f"gpus {gpus!r} is not a whole number of GPUs")
            row["gpus"] = int(float(gpus))
            ann = {str(k): str(v) for k, v in raw.items() if k not in known and pd.notna(v)}
            ann.update(_preemption_annotations(raw, _where(i, csv)))
            if isinstance(raw.get("annotations"), str) and raw["annotations"].strip():
                ann.update(json.loads(raw["annotations"]))
            ann.update({str(k): str(v) for k, v in extra_side.get(row["job_id"], {}).items() if pd.notna(v)})
            kind = row.get("kind") if isinstance(row.get("kind"), str) else ann.get("kind")
            row["kind"] = kind if kind in JOB_KINDS else None
            row["annotations"] = json.dumps(ann, sort_keys=True)
            row["censored"] = is_censored(row["state"], pd.notna(row["started_at"]))
            rows.append(row)
        except InputError:  # a value that refuses the whole file (preemption columns, a deadline without a zone)
            raise
        except (ValueError, TypeError, json.JSONDecodeError) as exc:
            errors.append(f"{_where(i, csv)}: {exc}")
    return ParseResult(job_frame(rows), len(frame), errors)


def parse_traffic(frame: pd.DataFrame, file_name: str, services: Sequence[Any], timezone: str = "UTC",
                  csv: bool = True) -> ParseResult:
    """Traffic rows (``ts``, ``value``[, ``service``]) -> traffic records.

    ``services``: the configured services (objects with ``service`` and ``file``); a file without a
    ``service`` column belongs to the service whose ``file`` is ``file_name``. Naive ``ts`` are
    ``timezone``'s clock. Rows of a service not configured, and negative values (traffic is never
    below 0), are rejected with their line. Counts are samples (rows).

    Raises:
        InputError: ``ts``/``value`` missing, or no ``service`` column and no service names this file.
    """
    missing = [c for c in ("ts", "value") if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}; expected ts, value[, service]")
    names = {s.service for s in services}
    if "service" in frame.columns:
        svc = frame["service"].astype(str)
    else:
        owner = [s.service for s in services if s.file and s.file == file_name]
        if not owner:
            raise InputError(f"no 'service' column and no service has file = {file_name!r}")
        svc = pd.Series(owner[0], index=frame.index)
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for i, (s, ts, value) in enumerate(zip(svc, frame["ts"], frame["value"])):
        if s not in names:
            errors.append(f"{_where(i, csv)}: service {s!r} is not configured (expected one of {sorted(names)})")
            continue
        try:
            t = _utc(ts, timezone)
            if pd.isna(t):
                raise ValueError
        except (TypeError, ValueError):
            errors.append(f"{_where(i, csv)}: ts {ts!r} is not a time (expected ISO 8601)")
            continue
        try:
            v = float(value)
        except (TypeError, ValueError):
            errors.append(f"{_where(i, csv)}: value {value!r} is not a number")
            continue
        if v < 0:
            errors.append(f"{_where(i, csv)}: value {value!r} is negative (expected traffic >= 0)")
            continue
        rows.append({"service": s, "ts": t, "value": v})
    return ParseResult(traffic_frame(rows), len(frame), errors, unit="samples")
