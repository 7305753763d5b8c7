r"""The replayed job table the export writers read: its columns, its checks, each job's state at a time T.

The writers (:mod:`pipelines.replay.slurm_exports`, :mod:`pipelines.replay.kueue_exports`,
:mod:`pipelines.replay.prometheus_exports`, one day of all: :func:`pipelines.replay.day.day_exports`) turn it into
the text the schedulers' and Prometheus' exports print at T; pure (no file IO). Every field rule is in
``data/fixtures/README.md`` ("Field choices per file").

Job table (one row per job, :data:`REPLAY_COLUMNS`; :func:`replay_jobs` types and checks it, e.g.
from ``pd.read_csv(path, dtype=str, keep_default_na=False)`` of ``data/fixtures/openb/replay_week.csv``):

| column | type | meaning |
|---|---|---|
| ``job_id`` | int | Slurm job id (unique) |
| ``pod`` | str | the pod's name: JobName, the Kueue owner Job's name |
| ``qos`` | str | ``Guaranteed``, ``Burstable`` or ``BE`` (openb QoS; priority :data:`QOS_PRIORITY`) |
| ``gpus`` | int | whole GPUs |
| ``cpu_milli`` / ``memory_mib`` | int | CPU (milli-cores) and memory (MiB) requested; memory 0 = not requested |
| ``node`` / ``node_model`` | str or None | the node it ran on and that node's GPU model (``G2``); None if it never started |
| ``submitted_at`` | datetime64[UTC] | submit (creation) time, whole seconds |
| ``started_at`` | datetime64[UTC] | start; NaT when it never starts |
| ``ended_at`` | datetime64[UTC] | end (a job that never started: the time it was cancelled); NaT when it never ends |
| ``final_state`` | str | :data:`FINAL_STATES`: how it ends; ``RUNNING``/``PENDING`` = still so at the trace end |
| ``gpu_spec`` (optional) | str or None | the GPU types the job may run on, ``|``-separated as openb's ``gpu_spec`` (``T4``, ``V100M16|V100M32``); None = any type |

``gpu_spec`` (:data:`OPTIONAL_COLUMNS`) is kept when the frame has it; the writers then print one type as a typed
GPU request (``gres/gpu:t4``) and several as a ``--constraint`` (data/fixtures/README.md, the openb-typed workspace).

States at a time t (:func:`job_states_at`): not submitted yet (``submitted_at > t``); pending
(not started by t, and not cancelled by t); running (started by t, not ended by t); ended. A job
that ends at exactly t has ended at t; one submitted at exactly t is pending at t.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from pipelines.io.errors import InputError

#: Columns of the job table (module docstring).
REPLAY_COLUMNS: tuple[str, ...] = ("job_id", "pod", "qos", "gpus", "cpu_milli", "memory_mib", "node", "node_model",
                                   "submitted_at", "started_at", "ended_at", "final_state")
#: Optional columns of the job table, kept when present (module docstring).
OPTIONAL_COLUMNS: tuple[str, ...] = ("gpu_spec",)
#: How a job ends. COMPLETED/FAILED: ran and ended; CANCELLED: cancelled while pending (never
#: started); RUNNING/PENDING: still running / pending at the trace end (no end time).
FINAL_STATES: tuple[str, ...] = ("COMPLETED", "FAILED", "CANCELLED", "RUNNING", "PENDING")
#: Priority by QoS: 1000 x the benchmark's QoS weight (domain.kinds.QOS_PRIORITY: Guaranteed 4,
#: Burstable 2, BE 1), the Slurm Priority and the Kueue workload priority.
QOS_PRIORITY: dict[str, int] = {"Guaranteed": 4000, "Burstable": 2000, "BE": 1000}
#: End of the replayed week and of ``data/fixtures/servegen/prometheus.json``: 2025-03-17 00:00
#: Asia/Shanghai. The last replay day's exports are taken at this time.
REPLAY_END: pd.Timestamp = pd.Timestamp("2025-03-16T16:00:00Z")

USER = ACCOUNT = NAMESPACE = GROUP = "openb"
PARTITION = QUEUE_NAME = "gpu"
CLUSTER_QUEUE = "openb-gpu"
CLUSTER_NAME = "openb"
#: Slurm sets the end_time of a running job without a time limit to start + one year (slurmctld ``job_end_time_reset``).
UNLIMITED_END_S = 365 * 24 * 3600
#: Namespace of the placeholder uids (UUIDv5 of the pod name).
UID_NS = uuid.UUID("6f1d7f3e-3c55-5b8e-9a57-6a3c1f0e2b11")
DAY_S = 86400



@dataclass(frozen=True)
class Job:
    """One row of the job table with unix seconds (None: no time)."""

    job_id: int
    pod: str
    qos: str
    gpus: int
    cpu_milli: int
    memory_mib: int
    node: str | None
    model: str | None
    submit: int
    start: int | None
    end: int | None
    final: str
    gpu_spec: str | None = None

    def state_at(self, t: int) -> str | None:
        """None (not submitted by t), 'pending', 'running' or 'ended'."""
        if self.submit > t:
            return None
        if self.start is None or self.start > t:
            return "ended" if self.start is None and self.end is not None and self.end <= t else "pending"
        return "running" if self.end is None or self.end > t else "ended"





def replay_jobs(frame: pd.DataFrame) -> pd.DataFrame:
    """Type and check a job table (module docstring): text or typed columns -> the typed table, job id order.

    Accepts the CSV read as text (empty cell = none) or an already typed frame; extra columns are
    dropped, except :data:`OPTIONAL_COLUMNS` (``gpu_spec``: empty = any type). Times: ISO 8601 with a zone (``2025-03-10T16:00:00Z``), whole seconds.

    Raises:
        InputError: a column of :data:`REPLAY_COLUMNS` missing; a bad number, time, QoS or final
            state (row and column named); a repeated job id; times out of order (start before
            submit, end before start); a final state that contradicts the times (COMPLETED/FAILED
            without start and end, CANCELLED with a start or without an end, RUNNING without a
            start or with an end, PENDING with a start or an end); a started job without a node.
    """
    missing = [c for c in REPLAY_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"job table: column(s) {', '.join(missing)} missing (expected {', '.join(REPLAY_COLUMNS)})")
    out = pd.DataFrame(index=range(len(frame)))
    src = frame.reset_index(drop=True)
    for col in ("job_id", "gpus", "cpu_milli", "memory_mib"):
        values = pd.to_numeric(src[col], errors="coerce")
        bad = values.isna() | (values < 0) | (values != values.round())
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(f"job table row {i + 1}: {col} {src[col].iloc[i]!r} is not a whole number >= 0")
        out[col] = values.astype("int64")
    for col in ("pod", "qos", "final_state"):
        out[col] = src[col].astype(str)
    for col in ("node", "node_model"):
        out[col] = pd.Series([None if _blank(v) else str(v) for v in src[col]], dtype=object)
    for col in ("submitted_at", "started_at", "ended_at"):
        out[col] = _times(src[col], col)
    if "gpu_spec" in src.columns:
        out["gpu_spec"] = pd.Series([None if _blank(v) else str(v).strip() for v in src["gpu_spec"]], dtype=object)
    if out["job_id"].duplicated().any():
        raise InputError(f"job table: job_id {int(out.loc[out['job_id'].duplicated(), 'job_id'].iloc[0])} "
                         f"given twice (expected one row per job)")
    for i, row in enumerate(out.itertuples(index=False)):
        _check_row(i + 1, row)
    return out.sort_values("job_id", kind="stable").reset_index(drop=True)


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT or str(value) == ""


def _times(values: pd.Series, col: str) -> pd.Series:
    out: list[pd.Timestamp] = []
    for i, v in enumerate(values):
        if _blank(v):
            out.append(pd.NaT)
            continue
        try:
            ts = pd.Timestamp(v)
        except (ValueError, TypeError):
            raise InputError(f"job table row {i + 1}: {col} {v!r} is not a time "
                             f"(expected ISO 8601 UTC, e.g. 2025-03-10T16:00:00Z)") from None
        if ts.tzinfo is None:
            raise InputError(f"job table row {i + 1}: {col} {v!r} has no time zone (expected e.g. 2025-03-10T16:00:00Z)")
        if ts.value % 1_000_000_000:
            raise InputError(f"job table row {i + 1}: {col} {v!r} is not a whole second")
        out.append(ts.tz_convert("UTC"))
    return pd.Series(pd.to_datetime(out, utc=True), dtype="datetime64[us, UTC]")


def _check_row(n: int, row: Any) -> None:
    where = f"job table row {n} (job {row.job_id})"
    if row.qos not in QOS_PRIORITY:
        raise InputError(f"{where}: qos {row.qos!r} is not one of {', '.join(QOS_PRIORITY)}")
    if row.final_state not in FINAL_STATES:
        raise InputError(f"{where}: final_state {row.final_state!r} is not one of {', '.join(FINAL_STATES)}")
    if row.submitted_at is pd.NaT:
        raise InputError(f"{where}: submitted_at is empty (expected the submit time)")
    started, ended = row.started_at is not pd.NaT, row.ended_at is not pd.NaT
    if started and row.started_at < row.submitted_at:
        raise InputError(f"{where}: started_at {row.started_at} is before submitted_at {row.submitted_at}")
    if ended and row.ended_at < (row.started_at if started else row.submitted_at):
        raise InputError(f"{where}: ended_at {row.ended_at} is before its start/submit")
    expected = {"COMPLETED": (True, True), "FAILED": (True, True), "CANCELLED": (False, True),
                "RUNNING": (True, False), "PENDING": (False, False)}[row.final_state]
    if (started, ended) != expected:
        raise InputError(f"{where}: final_state {row.final_state} needs started_at "
                         f"{'set' if expected[0] else 'empty'} and ended_at {'set' if expected[1] else 'empty'}")
    if started and (row.node is None or row.node_model is None):
        raise InputError(f"{where}: started but node/node_model is empty (expected the node it ran on)")


def _epoch(ts: Any) -> int | None:
    return None if ts is pd.NaT or ts is None else int(pd.Timestamp(ts).value // 1_000_000_000)


def job_rows(table: pd.DataFrame) -> list[Job]:
    """The rows of ``table`` (checked by :func:`replay_jobs`) as :class:`Job` with unix seconds."""
    typed = replay_jobs(table)
    out = []
    for r in typed.itertuples(index=False):
        submit = _epoch(r.submitted_at)
        assert submit is not None
        out.append(Job(int(r.job_id), r.pod, r.qos, int(r.gpus), int(r.cpu_milli), int(r.memory_mib), r.node,
                        r.node_model, submit, _epoch(r.started_at), _epoch(r.ended_at), r.final_state,
                        getattr(r, "gpu_spec", None)))
    return out


def to_epoch_s(value: Any, name: str) -> int:
    """A tz-aware time (pd.Timestamp, datetime or ISO text) -> unix seconds; whole seconds only."""
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise InputError(f"{name} {value!r} is not a time (expected e.g. 2025-03-16T16:00:00Z)") from None
    if ts is pd.NaT or ts.tzinfo is None:
        raise InputError(f"{name} {value!r} has no time zone (expected a UTC time, e.g. 2025-03-16T16:00:00Z)")
    if ts.value % 1_000_000_000:
        raise InputError(f"{name} {value!r} is not a whole second")
    return int(ts.value // 1_000_000_000)


def zone_info(name: str) -> ZoneInfo:
    """The IANA zone ``name``.

    Raises:
        InputError: not an IANA zone.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InputError(f"timezone {name!r} is not an IANA time zone (expected e.g. UTC or Asia/Shanghai)") from None


def job_states_at(jobs: pd.DataFrame, t: Any) -> pd.Series:
    """Each job's state at ``t`` (tz-aware): ``"pending"``, ``"running"``, ``"ended"`` or None (not submitted).

    Returns a Series indexed by ``job_id`` (job id order). Raises InputError as :func:`replay_jobs`,
    or when ``t`` is not a tz-aware whole-second time.
    """
    at = to_epoch_s(t, "t")
    rows = job_rows(jobs)
    return pd.Series([j.state_at(at) for j in rows], index=pd.Index([j.job_id for j in rows], name="job_id"),
                     dtype=object)


def replay_csv_text(jobs: pd.DataFrame) -> str:
    """The job table as CSV text: :data:`REPLAY_COLUMNS`, job id order, ISO UTC times (``...Z``), empty = none, LF ends."""
    typed = replay_jobs(jobs)
    lines = [",".join(REPLAY_COLUMNS)]
    for r in typed.itertuples(index=False):
        cells = [str(r.job_id), r.pod, r.qos, str(r.gpus), str(r.cpu_milli), str(r.memory_mib), r.node or "",
                 r.node_model or "", utc_text(_epoch(r.submitted_at)), utc_text(_epoch(r.started_at)),
                 utc_text(_epoch(r.ended_at)), r.final_state]
        if any("," in c or '"' in c or "\n" in c for c in cells):
            raise InputError(f"job {r.job_id}: a field holds ',', '\"' or a line break (expected plain names)")
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"





def utc_text(epoch: int | None) -> str:
    """RFC 3339 UTC with ``Z``, as Kubernetes prints timestamps; "" for None."""
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, dt_timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_float(value: float) -> str:
    """A sample value as Prometheus prints it: Go ``strconv.FormatFloat(v, 'f', -1, 64)``.

    Source: prometheus ``util/jsonutil/marshal.go`` (``MarshalFloat``: format 'e' only below 1e-6
    or from 1e21 on). Shortest round-trip digits, positional, no trailing ``.0``: 1164.0 -> ``1164``.

    Raises:
        InputError: a non-finite value, or one Prometheus would print in exponent form.
    """
    if not math.isfinite(value):
        raise InputError(f"prometheus value {value!r} is not finite")
    a = abs(value)
    if a != 0 and (a < 1e-6 or a >= 1e21):
        raise InputError(f"prometheus value {value!r} would print in exponent form (not expected here)")
    return np.format_float_positional(value, unique=True, trim="-")
