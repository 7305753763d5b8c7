"""The canonical records every source adapter produces, and the helpers they share.

An adapter (:mod:`pipelines.workspace.sources.slurm`, :mod:`pipelines.workspace.sources.kueue`,
:mod:`pipelines.workspace.sources.prometheus`, :mod:`pipelines.workspace.sources.tabular`) is a pure parser from an
export's text (or a frame) to a :class:`ParseResult`: a frame of :data:`JOB_RECORD` or
:data:`TRAFFIC_RECORD` columns, the number of records read, and one message per rejected line
("line 17: Submit 'x' is not a time (expected YYYY-MM-DDTHH:MM:SS)"). A malformed line is
rejected and the rest kept; an export that cannot be read at all raises
:class:`pipelines.io.errors.InputError`.

Job records (one row per job; a Slurm job step is not a job, an array task and a heterogeneous
component are):

| column | type | meaning |
|---|---|---|
| ``source`` | str | scheduler system: ``slurm``, ``kueue`` or ``table`` (CSV/parquet) |
| ``job_id`` | str | ``123``, ``123_4`` (array task), ``123+0`` (het component), ``ns/name`` (Kueue) |
| ``submitted_at`` | datetime64[us, UTC] | submit (creation) time; never missing |
| ``eligible_at`` / ``started_at`` / ``ended_at`` | datetime64[us, UTC] | NaT when unknown / not yet |
| ``state`` | str | one of :data:`STATES` |
| ``censored`` | bool | ran, but ended by an outside event: ``elapsed_s`` is a lower bound of its runtime |
| ``elapsed_s`` | float | run time so far or in all (s); NaN when it never started |
| ``time_limit_s`` | float | requested wall-time limit (s); NaN when unlimited or unknown |
| ``gpus`` | int | GPUs allocated (started jobs) else requested; 0 = a job without GPUs |
| ``gpu_type`` | str or None | ``a100`` from ``gres/gpu:a100=4``, a Kueue flavor, … |
| ``nodes`` | str or None | node list as the scheduler printed it |
| ``user`` / ``account`` / ``partition`` / ``qos`` | str or None | scheduler fields (Kueue: annotation ``gpuplan.user``, namespace, queue name, priority class) |
| ``priority`` | float | the scheduler's priority number; NaN when unknown |
| ``job_name`` | str | job (workload) name, ``""`` when absent |
| ``kind`` | str or None | ``training`` / ``quantization`` / ``batch_inference`` when the job says so (annotation ``gpuplan.kind``) |
| ``annotations`` | str | JSON object of the job's ``gpuplan.*`` fields (key without the prefix -> text value), ``{}`` when none |
| ``deadline_at`` | datetime64[us, UTC] | the job's deadline when its source gives one (squeue ``deadline``, a CSV ``deadline_at``); NaT otherwise |

Typed requests ride in ``annotations``: ``gpu_types`` (the GPU types the job may run on, as the export names
them, joined by a vertical bar: a typed ``gres/gpu:TYPE`` request of sacct ``ReqTRES`` or squeue
``tres_per_*``, a Kueue podSet's ``nvidia.com/gpu.product`` node selector or affinity, a CSV ``gpu_types``
column) and ``constraint`` (Slurm ``--constraint``: sacct ``Constraints``, squeue ``features``).
:mod:`pipelines.workspace.gpu_types` matches them to the cluster's types.

Traffic records: ``service`` (str), ``ts`` (datetime64[us, UTC], the sample time), ``value``
(float, NaN for a missing or non-finite sample), in the source's units.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from domain.records import (
    ACTIVE_STATES,
    JOB_KEY,
    JOB_RECORD,
    STATES,
    TRAFFIC_KEY,
    TRAFFIC_RECORD,
    UNCENSORED_END_STATES,
    is_censored,
)
from pipelines.io.errors import InputError

__all__ = ["ACTIVE_STATES", "JOB_ARROW_SCHEMA", "JOB_KEY", "JOB_RECORD", "STATES", "TRAFFIC_ARROW_SCHEMA", "TRAFFIC_KEY", "TRAFFIC_RECORD", "UNCENSORED_END_STATES",
           "OWN_MARKING_FIELDS", "ParseResult", "annotations_from_mapping", "is_censored", "job_frame", "local_to_utc", "parse_annotations",
           "traffic_frame"]

#: Slurm job state (``sacct`` State's first word, ``squeue`` job_state) -> canonical state.
#: Source: Slurm ``sacct(1)`` / ``squeue(1)`` "JOB STATE CODES".
SLURM_STATES: dict[str, str] = {
    "PENDING": "pending", "REQUEUED": "pending", "REQUEUE_FED": "pending", "REQUEUE_HOLD": "pending",
    "RESV_DEL_HOLD": "pending", "SUSPENDED": "running", "RUNNING": "running", "CONFIGURING": "running",
    "COMPLETING": "running", "RESIZING": "running", "SIGNALING": "running", "STAGE_OUT": "running",
    "STOPPED": "running", "COMPLETED": "completed", "FAILED": "failed", "BOOT_FAIL": "node_fail",
    "DEADLINE": "timeout", "TIMEOUT": "timeout", "CANCELLED": "cancelled", "PREEMPTED": "preempted",
    "NODE_FAIL": "node_fail", "OUT_OF_MEMORY": "out_of_memory", "REVOKED": "cancelled", "SPECIAL_EXIT": "failed",
}

_TIME = pa.timestamp("us", tz="UTC")
#: The stored type of every job-record column (the store's schema: every partition is written with it and
#: read into it, never inferred from one file: a column that is all null in one month stays ``string``).
JOB_ARROW_SCHEMA: pa.Schema = pa.schema([
    ("source", pa.string()), ("job_id", pa.string()), ("submitted_at", _TIME), ("eligible_at", _TIME),
    ("started_at", _TIME), ("ended_at", _TIME), ("state", pa.string()), ("censored", pa.bool_()),
    ("elapsed_s", pa.float64()), ("time_limit_s", pa.float64()), ("gpus", pa.int64()), ("gpu_type", pa.string()),
    ("nodes", pa.string()), ("user", pa.string()), ("account", pa.string()), ("partition", pa.string()),
    ("qos", pa.string()), ("priority", pa.float64()), ("job_name", pa.string()), ("kind", pa.string()),
    ("annotations", pa.string()), ("deadline_at", _TIME),
])
#: The stored type of every traffic-record column.
TRAFFIC_ARROW_SCHEMA: pa.Schema = pa.schema([("service", pa.string()), ("ts", _TIME), ("value", pa.float64())])
assert tuple(JOB_ARROW_SCHEMA.names) == JOB_RECORD and tuple(TRAFFIC_ARROW_SCHEMA.names) == TRAFFIC_RECORD

#: Prefix of gpuplan's fields in a job's comment or annotations (``gpuplan.variant=lora,params_b=7``).
ANNOTATION_PREFIX = "gpuplan."

#: A job's own preemption marking (annotation keys, issue 30): a record of a source that read the job's comment
#: or labels (:attr:`ParseResult.marking_read`) states them whole (:meth:`pipelines.workspace.store.Store.upsert`).
OWN_MARKING_FIELDS: tuple[str, ...] = ("preemptible", "checkpoint", "restart")


@dataclass
class ParseResult:
    """What an adapter read from one export.

    Attributes:
        frame: the valid records (:data:`JOB_RECORD` or :data:`TRAFFIC_RECORD` columns).
        read: records (lines, items, samples) read, valid or not (job steps skipped by design are not counted).
        errors: one message per rejected record, naming its line (or item) and what was expected.
        exported_at: when the export was taken, if the export says (``squeue --json``'s
            ``last_update``); None otherwise (the caller then uses the file's modification time).
        unit: what ``read`` and ``rejected`` count: ``jobs`` (a job line, item or workload; a pending
            array record is one) or ``samples`` (traffic).
        rejected_count: records rejected, in ``unit``; None = one per error message. A Prometheus
            series refused whole is one error line but all its samples.
        arrays_expanded: pending array records (``123_[4-9]``) expanded into one record per task.
        array_tasks: the task records they became.
        marking_read: the export carries the jobs' comment / labels column (squeue ``comment``, Kueue labels and
            annotations; sacct ``Comment`` only when at least one job line has one: sacct prints it empty unless
            ``AccountingStoreFlags=job_comment``), so each record states the job's own preemption marking whole
            (:data:`OWN_MARKING_FIELDS`; an empty comment clears a stored one, issue 30).
    """

    frame: pd.DataFrame
    read: int
    errors: list[str] = field(default_factory=list)
    exported_at: pd.Timestamp | None = None
    unit: str = "jobs"
    rejected_count: int | None = None
    arrays_expanded: int = 0
    array_tasks: int = 0
    marking_read: bool = False

    @property
    def rejected(self) -> int:
        """Records rejected, in :attr:`unit` (one per error message unless :attr:`rejected_count` says)."""
        return len(self.errors) if self.rejected_count is None else self.rejected_count


def parse_annotations(text: str | None) -> dict[str, str]:
    """The ``gpuplan.*`` fields of a comment: ``"gpuplan.variant=lora,params_b=7 other"`` -> ``{"variant": "lora", "params_b": "7"}``.

    The first field carries the prefix; the fields after it, separated by ``,`` or ``;``, may omit
    it. Text outside ``key=value`` fields is ignored. Returns ``{}`` when there is no
    ``gpuplan.`` field.
    """
    if not text or ANNOTATION_PREFIX not in text:
        return {}
    out: dict[str, str] = {}
    chunk = text[text.index(ANNOTATION_PREFIX):]
    for part in re.split(r"[,;\s]+", chunk):
        if "=" not in part:
            continue
        key, _, value = part.partition("=")
        key = key.removeprefix(ANNOTATION_PREFIX).strip()
        if key:
            out[key] = value.strip()
    return out


def annotations_from_mapping(values: Mapping[str, Any]) -> dict[str, str]:
    """The ``gpuplan.*`` keys of a label/annotation mapping (Kubernetes), prefix removed; values as text."""
    return {k.removeprefix(ANNOTATION_PREFIX): str(v) for k, v in values.items() if k.startswith(ANNOTATION_PREFIX)}


def local_to_utc(values: Iterable[pd.Timestamp | None], timezone: str) -> pd.Series:
    """Naive wall-clock times of the scheduler's ``timezone`` (IANA) -> ``datetime64[us, UTC]``.

    A time that does not exist (spring-forward gap) is moved forward to the first valid time; a
    time that occurs twice (fall-back) is read as the first of the two (daylight time). None/NaT
    stays NaT.
    """
    idx = pd.DatetimeIndex(pd.to_datetime(list(values)))
    if idx.tz is not None:
        return pd.Series(idx.tz_convert("UTC").as_unit("us"))
    local = idx.tz_localize(timezone, ambiguous=np.ones(len(idx), dtype=bool), nonexistent="shift_forward")
    return pd.Series(local.tz_convert("UTC").as_unit("us"))


def job_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows (dicts with :data:`JOB_RECORD` keys; missing keys become missing values) -> a typed job-record frame.

    Raises:
        InputError: a row with a state outside :data:`STATES` or without ``submitted_at``.
    """
    frame = pd.DataFrame(rows, columns=list(JOB_RECORD))
    for col in ("submitted_at", "eligible_at", "started_at", "ended_at", "deadline_at"):
        frame[col] = pd.to_datetime(frame[col], utc=True).astype("datetime64[us, UTC]")
    bad = ~frame["state"].isin(STATES)
    if bad.any():
        raise InputError(f"job {frame.loc[bad, 'job_id'].iloc[0]!r}: state {frame.loc[bad, 'state'].iloc[0]!r} "
                         f"is not one of {', '.join(STATES)}")
    if frame["submitted_at"].isna().any():
        raise InputError(f"job {frame.loc[frame['submitted_at'].isna(), 'job_id'].iloc[0]!r}: no submit time")
    frame["censored"] = frame["censored"].astype("boolean").fillna(False).astype(bool)  # NaN/None: not censored
    for col in ("elapsed_s", "time_limit_s", "priority"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    frame["gpus"] = pd.to_numeric(frame["gpus"], errors="coerce").fillna(0).astype("int64")
    for col in ("source", "job_id", "state", "job_name"):
        frame[col] = frame[col].astype(object).where(frame[col].notna(), "").astype(str)
    for col in ("gpu_type", "nodes", "user", "account", "partition", "qos", "kind"):
        frame[col] = frame[col].astype(object).where(frame[col].notna(), None)
    frame["annotations"] = frame["annotations"].map(
        lambda a: a if isinstance(a, str) else json.dumps(a or {}, sort_keys=True))
    return frame


def traffic_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows (``service``, ``ts``, ``value``) -> a typed traffic-record frame (ts UTC, value float)."""
    frame = pd.DataFrame(rows, columns=list(TRAFFIC_RECORD))
    frame["service"] = frame["service"].astype(str)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True).astype("datetime64[us, UTC]")
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    frame.loc[~np.isfinite(frame["value"].to_numpy()), "value"] = np.nan
    return frame
