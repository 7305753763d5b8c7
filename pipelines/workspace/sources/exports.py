r"""Export writers: a replayed job table -> the text the schedulers' and Prometheus' exports print at a time T.

``sacct``, ``squeue --json``, ``kubectl get workloads`` and a Prometheus ``query_range`` call;
pure functions (text out, no file IO).

The inverse of the adapters (:mod:`pipelines.workspace.sources.slurm`, :mod:`pipelines.workspace.sources.kueue`,
:mod:`pipelines.workspace.sources.prometheus`): ``scripts/make_fixtures.py`` writes the committed fixtures
with these functions, and the replay command writes one day's exports into a workspace with
:func:`day_exports`. Every field rule is in ``data/fixtures/README.md`` ("Field choices per
file"); the sources are named in each function's docstring.

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

States at a time t (:func:`job_states_at`): not submitted yet (``submitted_at > t``); pending
(not started by t, and not cancelled by t); running (started by t, not ended by t); ended. A job
that ends at exactly t has ended at t; one submitted at exactly t is pending at t.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from pipelines.errors import InputError
from pipelines.io.strict_json import loads
from pipelines.workspace.sources.slurm import SACCT_FIELDS

__all__ = ["FINAL_STATES", "QOS_PRIORITY", "REPLAY_COLUMNS", "REPLAY_END", "day_exports", "export_time",
           "go_float", "job_states_at", "kueue_list_text", "prometheus_text", "replay_csv_text", "replay_jobs",
           "sacct_text", "squeue_json_text", "workload_name"]

#: Columns of the job table (module docstring).
REPLAY_COLUMNS: tuple[str, ...] = ("job_id", "pod", "qos", "gpus", "cpu_milli", "memory_mib", "node", "node_model",
                                   "submitted_at", "started_at", "ended_at", "final_state")
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
class _Job:
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

    def state_at(self, t: int) -> str | None:
        """None (not submitted by t), 'pending', 'running' or 'ended'."""
        if self.submit > t:
            return None
        if self.start is None or self.start > t:
            return "ended" if self.start is None and self.end is not None and self.end <= t else "pending"
        return "running" if self.end is None or self.end > t else "ended"


# ---------------------------------------------------------------- job table


def replay_jobs(frame: pd.DataFrame) -> pd.DataFrame:
    """Type and check a job table (module docstring): text or typed columns -> the typed table, job id order.

    Accepts the CSV read as text (empty cell = none) or an already typed frame; extra columns are
    dropped. Times: ISO 8601 with a zone (``2025-03-10T16:00:00Z``), whole seconds.

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


def _jobs(table: pd.DataFrame) -> list[_Job]:
    typed = replay_jobs(table)
    out = []
    for r in typed.itertuples(index=False):
        submit = _epoch(r.submitted_at)
        assert submit is not None
        out.append(_Job(int(r.job_id), r.pod, r.qos, int(r.gpus), int(r.cpu_milli), int(r.memory_mib), r.node,
                        r.node_model, submit, _epoch(r.started_at), _epoch(r.ended_at), r.final_state))
    return out


def _time_s(value: Any, name: str) -> int:
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


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InputError(f"timezone {name!r} is not an IANA time zone (expected e.g. UTC or Asia/Shanghai)") from None


def job_states_at(jobs: pd.DataFrame, t: Any) -> pd.Series:
    """Each job's state at ``t`` (tz-aware): ``"pending"``, ``"running"``, ``"ended"`` or None (not submitted).

    Returns a Series indexed by ``job_id`` (job id order). Raises InputError as :func:`replay_jobs`,
    or when ``t`` is not a tz-aware whole-second time.
    """
    at = _time_s(t, "t")
    rows = _jobs(jobs)
    return pd.Series([j.state_at(at) for j in rows], index=pd.Index([j.job_id for j in rows], name="job_id"),
                     dtype=object)


def replay_csv_text(jobs: pd.DataFrame) -> str:
    """The job table as CSV text: :data:`REPLAY_COLUMNS`, job id order, ISO UTC times (``...Z``), empty = none, LF ends."""
    typed = replay_jobs(jobs)
    lines = [",".join(REPLAY_COLUMNS)]
    for r in typed.itertuples(index=False):
        cells = [str(r.job_id), r.pod, r.qos, str(r.gpus), str(r.cpu_milli), str(r.memory_mib), r.node or "",
                 r.node_model or "", _utc(_epoch(r.submitted_at)), _utc(_epoch(r.started_at)),
                 _utc(_epoch(r.ended_at)), r.final_state]
        if any("," in c or '"' in c or "\n" in c for c in cells):
            raise InputError(f"job {r.job_id}: a field holds ',', '\"' or a line break (expected plain names)")
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- formatting helpers


def _utc(epoch: int | None) -> str:
    """RFC 3339 UTC with ``Z``, as Kubernetes prints timestamps; "" for None."""
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, dt_timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _local(epoch: int, zone: ZoneInfo) -> str:
    """Local wall clock without offset, as sacct prints it (``SLURM_TIME_FORMAT=standard``): ``2025-03-17T09:12:44``."""
    return datetime.fromtimestamp(epoch, zone).strftime("%Y-%m-%dT%H:%M:%S")


def _elapsed(seconds: int) -> str:
    """Slurm's ``[D-]HH:MM:SS`` (sacct ``_elapsed_time``: days prefix only when >= 1 day)."""
    d, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def _mem(mib: int) -> str:
    """A TRES memory count as Slurm prints it (exact unit conversion only): 16384 -> 16G, 5600 -> 5600M."""
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def _cpus(job: _Job) -> int:
    """Whole CPUs for a pod's ``cpu_milli`` (Slurm allocates whole CPUs): ceil(milli / 1000), at least 1."""
    return max(1, -(-job.cpu_milli // 1000))


def _tres(job: _Job, *, alloc: bool, billing: bool = True) -> dict[str, str]:
    """The job's TRES as name -> count text (mem left out when the pod requests 0 MiB)."""
    out = {"cpu": str(_cpus(job)), "node": "1", "gres/gpu": str(job.gpus)}
    if billing:
        out["billing"] = str(_cpus(job))
    if job.memory_mib > 0:
        out["mem"] = _mem(job.memory_mib)
    if alloc and job.model is not None:
        out[f"gres/gpu:{job.model.lower()}"] = str(job.gpus)
    return out


def _sacct_tres(items: dict[str, str]) -> str:
    """The ReqTRES/AllocTRES text of sacct: ``name=count`` sorted as sacct prints them (by that text)."""
    return ",".join(sorted(f"{k}={v}" for k, v in items.items()))


#: TRES ids (slurmdb: cpu 1, mem 2, node 4, billing 5, GRES after): squeue's tres_*_str order.
_TRES_ORDER = {"cpu": 0, "mem": 1, "node": 2, "billing": 3}


def _squeue_tres(items: dict[str, str]) -> str:
    """The tres_req_str/tres_alloc_str text of squeue: cpu, mem, node, billing, then GRES (untyped first)."""
    keys = sorted(items, key=lambda k: (_TRES_ORDER.get(k, 9), k))
    return ",".join(f"{k}={items[k]}" for k in keys)


def _k8s_cpu(milli: int) -> str:
    """A CPU quantity in Kubernetes canonical form: 4000 -> "4", 3152 -> "3152m"."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _k8s_mem(mib: int) -> str:
    """A memory quantity in Kubernetes canonical form: 16384 -> "16Gi", 5600 -> "5600Mi"."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


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


# ---------------------------------------------------------------- sacct


def sacct_text(jobs: pd.DataFrame, t: Any, window_start: Any, timezone: str) -> str:
    """What ``sacct --parsable2 --allusers -S <window_start> -E <t>`` (:data:`~pipelines.workspace.sources.slurm.SACCT_FIELDS`) prints when run at ``t``.

    Args:
        jobs: the job table (module docstring).
        t: the time sacct runs, also its ``--endtime`` (tz-aware, whole seconds).
        window_start: ``--starttime`` (tz-aware, whole seconds; at most ``t``).
        timezone: IANA zone of the cluster's wall clock (sacct prints local times without offset).

    Returns:
        The header line, then for each job (job id order) that slurmdbd selects for the window:
        eligible (= submit) strictly before ``t`` and not ended before ``window_start`` (ended at
        or after it, or not ended by ``t``) — the condition ``time_eligible < end && (time_end >=
        start || time_end = 0)`` of slurmdbd ``as_mysql_jobacct_process.c`` (``setup_job_cond_limits``,
        no ``--state``). So a job running across a window boundary is in both windows' exports,
        RUNNING in the first (End ``Unknown``, Elapsed so far) and ended in the second. LF line ends,
        a final newline.

        Field rules (Slurm ``src/sacct/print.c``; sacct(1)): steps ``.batch`` / ``.extern`` of a
        started job print no User, Partition, QOS, Priority, Timelimit, ReqTRES or Comment; a step's
        Submit and Eligible are its start; the batch step's AllocTRES has no billing; unknown times
        print ``Unknown``; CANCELLED without a known requester prints no ``by <uid>``. A job cancelled
        while pending has Start = End (slurmctld sets both to the cancel time), no node, no steps.
        A FAILED job's batch step is FAILED, its extern step COMPLETED.

    Raises:
        InputError: a bad job table (:func:`replay_jobs`), ``t``/``window_start`` without a zone
            or after one another, an unknown ``timezone``.
    """
    end_s, start_s = _time_s(t, "t"), _time_s(window_start, "window_start")
    if start_s > end_s:
        raise InputError(f"window_start {window_start} is after t {t} (expected --starttime <= --endtime)")
    zone = _zone(timezone)
    lines = ["|".join(SACCT_FIELDS)]
    for job in _jobs(jobs):
        st = job.state_at(end_s)
        if job.submit >= end_s or (st == "ended" and job.end is not None and job.end < start_s):
            continue
        lines.extend(_sacct_job(job, st, end_s, zone))
    return "\n".join(lines) + "\n"


def _sacct_job(job: _Job, st: str | None, t: int, zone: ZoneInfo) -> list[str]:
    prio = str(QOS_PRIORITY[job.qos])
    submit = _local(job.submit, zone)
    base = [str(job.job_id), job.pod, USER, ACCOUNT, PARTITION, job.qos.lower(), prio, submit, submit]
    req = _sacct_tres(_tres(job, alloc=False))
    if job.start is None or st == "pending":
        if st == "pending":
            start = end = "Unknown"
            state = "PENDING"
        else:
            assert job.end is not None
            start = end = _local(job.end, zone)
            state = "CANCELLED"
        return ["|".join([*base, start, end, "00:00:00", "UNLIMITED", state, req, "", "None assigned", ""])]
    assert job.node is not None
    start = _local(job.start, zone)
    if st == "running":
        end, el, state, step_state = "Unknown", _elapsed(t - job.start), "RUNNING", ("RUNNING", "RUNNING")
    else:
        assert job.end is not None
        end, el = _local(job.end, zone), _elapsed(job.end - job.start)
        if job.final == "FAILED":
            state, step_state = "FAILED", ("FAILED", "COMPLETED")
        else:
            state, step_state = "COMPLETED", ("COMPLETED", "COMPLETED")
    alloc = _sacct_tres(_tres(job, alloc=True))
    lines = ["|".join([*base, start, end, el, "UNLIMITED", state, req, alloc, job.node, ""])]
    batch_alloc = _sacct_tres(_tres(job, alloc=True, billing=False))
    for step, step_alloc, sst in (("batch", batch_alloc, step_state[0]), ("extern", alloc, step_state[1])):
        lines.append("|".join([f"{job.job_id}.{step}", step, "", ACCOUNT, "", "", "", start, start, start, end,
                               el, "", sst, "", step_alloc, job.node, ""]))
    return lines


# ---------------------------------------------------------------- squeue --json


def _num(n: int | float, *, is_set: bool = True, infinite: bool = False) -> dict:
    return {"set": is_set, "infinite": infinite, "number": n}


def _exit(status: str = "SUCCESS") -> dict:
    return {"status": [status], "return_code": _num(0), "signal": {"id": _num(0, is_set=False), "name": ""}}


def _squeue_job(job: _Job, t: int) -> dict:
    """One job of ``squeue --json`` (data_parser v0.0.40, Slurm 23.11) at t, fields in Slurm's order.

    Field names and shapes: a real 23.11.1 ``/slurm/v0.0.40/jobs`` response and slurmrestd 24.05 output
    (same job fields, v0.0.40 ``job_resources`` shape). Values the job table does not have are neutral
    (empty text, ``set: false``) or the placeholders listed in data/fixtures/README.md.
    """
    running = job.state_at(t) == "running"
    ncpu = _cpus(job)
    start = job.start if running and job.start is not None else 0
    node = job.node if running and job.node is not None else ""
    if running:
        resources = {"allocated_cores": ncpu, "allocated_cpus": 0, "allocated_hosts": 1,
                     "allocated_nodes": [{"nodename": node, "cpus_used": 0, "memory_used": 0,
                                          "memory_allocated": job.memory_mib}],
                     "nodes": node}
    else:
        resources = {}
    return {
        "account": ACCOUNT, "accrue_time": _num(job.submit), "admin_comment": "", "allocating_node": "",
        "array_job_id": _num(0), "array_task_id": _num(0, is_set=False), "array_max_tasks": _num(0),
        "array_task_string": "", "association_id": 0, "batch_features": "", "batch_flag": True, "batch_host": node,
        "flags": [], "burst_buffer": "", "burst_buffer_state": "", "cluster": CLUSTER_NAME, "cluster_features": "",
        "command": "", "comment": "", "container": "", "container_id": "", "contiguous": False, "core_spec": 0,
        "thread_spec": 32766, "cores_per_socket": _num(0, is_set=False), "billable_tres": _num(float(ncpu)),
        "cpus_per_task": _num(1), "cpu_frequency_minimum": _num(0, is_set=False),
        "cpu_frequency_maximum": _num(0, is_set=False), "cpu_frequency_governor": _num(0, is_set=False),
        "cpus_per_tres": "", "cron": "", "deadline": _num(0), "delay_boot": _num(0), "dependency": "",
        "derived_exit_code": _exit(), "eligible_time": _num(job.submit),
        "end_time": _num(start + UNLIMITED_END_S if running else 0), "excluded_nodes": "", "exit_code": _exit(),
        "extra": "", "failed_node": "", "features": "", "federation_origin": "", "federation_siblings_active": "",
        "federation_siblings_viable": "", "gres_detail": [], "group_id": 1000, "group_name": GROUP,
        "het_job_id": _num(0), "het_job_id_set": "", "het_job_offset": _num(0), "job_id": job.job_id,
        "job_resources": resources, "job_size_str": [], "job_state": ["RUNNING" if running else "PENDING"],
        "last_sched_evaluation": _num(start if running else t), "licenses": "", "mail_type": [],
        "mail_user": "", "max_cpus": _num(0), "max_nodes": _num(0), "mcs_label": "", "memory_per_tres": "",
        "name": job.pod, "network": "", "nodes": node, "nice": 0,
        "tasks_per_core": _num(0, is_set=False, infinite=True), "tasks_per_tres": _num(0), "tasks_per_node": _num(0),
        "tasks_per_socket": _num(0, is_set=False, infinite=True), "tasks_per_board": _num(0), "cpus": _num(ncpu),
        "node_count": _num(1), "tasks": _num(1), "partition": PARTITION, "prefer": "",
        "memory_per_cpu": _num(0, is_set=False), "memory_per_node": _num(job.memory_mib),
        "minimum_cpus_per_node": _num(ncpu), "minimum_tmp_disk_per_node": _num(0), "power": {"flags": []},
        "preempt_time": _num(0), "preemptable_time": _num(0), "pre_sus_time": _num(0),
        "priority": _num(QOS_PRIORITY[job.qos]), "profile": ["NOT_SET"], "qos": job.qos.lower(), "reboot": False,
        "required_nodes": "", "minimum_switches": 0, "requeue": False, "resize_time": _num(0), "restart_cnt": 0,
        "resv_name": "", "scheduled_nodes": "", "selinux_context": "", "shared": [], "exclusive": [],
        "oversubscribe": False, "show_flags": ["DETAIL", "LOCAL"], "sockets_per_board": 0,
        "sockets_per_node": _num(0, is_set=False), "start_time": _num(start), "state_description": "",
        "state_reason": "None", "standard_error": "", "standard_input": "/dev/null", "standard_output": "",
        "submit_time": _num(job.submit), "suspend_time": _num(0), "system_comment": "",
        "time_limit": _num(0, is_set=False, infinite=True), "time_minimum": _num(0),
        "threads_per_core": _num(0, is_set=False), "tres_bind": "", "tres_freq": "", "tres_per_job": "",
        "tres_per_node": f"gres/gpu:{job.gpus}", "tres_per_socket": "", "tres_per_task": "",
        "tres_req_str": _squeue_tres(_tres(job, alloc=False)),
        "tres_alloc_str": _squeue_tres(_tres(job, alloc=True)) if running else "",
        "user_id": 1000, "user_name": USER, "maximum_switch_wait_time": 0, "wckey": "",
        "current_working_directory": "",
    }


def _slurm_json(value: object, indent: int = 0) -> str:
    r"""JSON as Slurm's serializer/json prints it (pretty; real squeue/slurmrestd output).

    2-space indent, ``"key": value``, empty lists/objects opened and closed on their own lines,
    ``/`` escaped as ``\/``.
    """
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{\n" + pad + "}"
        items = [f"{inner}{_slurm_json(str(k))}: {_slurm_json(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if not value:
            return "[\n" + pad + "]"
        return "[\n" + ",\n".join(inner + _slurm_json(v, indent + 1) for v in value) + "\n" + pad + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("/", "\\/")
    return json.dumps(value)


def squeue_json_text(jobs: pd.DataFrame, t: Any) -> str:
    """What ``squeue --json`` (Slurm 23.11.4, data_parser v0.0.40) prints at ``t``: the jobs pending or running at t.

    Jobs in job id order; ``last_backfill``/``last_update`` = t; a running job's ``end_time`` is
    start + 365 days (no time limit: slurmctld ``job_end_time_reset``), a pending job's start and
    end 0. Pretty-printed as Slurm's serializer prints (:func:`_slurm_json`), final newline. Shapes:
    squeue(1) https://slurm.schedmd.com/squeue.html and real v0.0.40 outputs (data/fixtures/README.md).

    Raises:
        InputError: a bad job table (:func:`replay_jobs`) or ``t`` without a zone.
    """
    at = _time_s(t, "t")
    active = [j for j in _jobs(jobs) if j.state_at(at) in ("pending", "running")]
    doc = {
        "jobs": [_squeue_job(j, at) for j in active],
        "last_backfill": _num(at),
        "last_update": _num(at),
        "meta": {
            "plugin": {"type": "", "name": "", "data_parser": "data_parser/v0.0.40",
                       "accounting_storage": "accounting_storage/slurmdbd"},
            "client": {"source": "/dev/pts/0", "user": USER, "group": GROUP},
            "command": ["squeue", "--json"],
            "slurm": {"version": {"major": "23", "micro": "4", "minor": "11"}, "release": "23.11.4",
                      "cluster": CLUSTER_NAME},
        },
        "errors": [],
        "warnings": [],
    }
    return _slurm_json(doc) + "\n"


# ---------------------------------------------------------------- kubectl get workloads


def _uid(kind: str, pod: str) -> str:
    return str(uuid.uuid5(UID_NS, f"{kind}/{pod}"))


def workload_name(pod: str, job_uid: str) -> str:
    """Kueue's Workload name for a batch/v1 Job: ``job-<name>-<first 5 hex of sha1(Kind, Group, name, uid)>``.

    Source: kueue ``pkg/controller/jobframework`` ``GetWorkloadNameForOwnerWithGVK`` / ``getHash``.
    """
    digest = hashlib.sha1(f"Job\nbatch\n{pod}\n{job_uid}".encode()).hexdigest()
    return f"job-{pod}-{digest[:5]}"


def _workload(job: _Job, t: int, rv: int) -> dict:
    """One ``kueue.x-k8s.io/v1beta1`` Workload as ``kubectl get -o json`` prints it at t.

    Conditions and messages: Kueue docs "Troubleshooting Jobs" (QuotaReserved/Admitted) and the job
    reconciler (Finished, reason Succeeded/Failed). A pending workload has an empty status (not
    yet attempted; the trace gives no reason). API: kueue ``apis/kueue/v1beta1/workload_types.go``.
    """
    st = job.state_at(t)
    job_uid = _uid("job", job.pod)
    requests = {"cpu": _k8s_cpu(job.cpu_milli), "nvidia.com/gpu": str(job.gpus)}
    if job.memory_mib > 0:
        requests["memory"] = _k8s_mem(job.memory_mib)
    meta: dict = {
        "creationTimestamp": _utc(job.submit), "generation": 1,
        "labels": {"kueue.x-k8s.io/job-uid": job_uid},
        "name": workload_name(job.pod, job_uid), "namespace": NAMESPACE,
        "ownerReferences": [{"apiVersion": "batch/v1", "blockOwnerDeletion": True, "controller": True, "kind": "Job",
                             "name": job.pod, "uid": job_uid}],
        "resourceVersion": str(rv), "uid": _uid("workload", job.pod),
    }
    status: dict = {}
    if st in ("running", "ended"):
        assert job.start is not None and job.model is not None
        flavor = job.model.lower()
        status["admission"] = {"clusterQueue": CLUSTER_QUEUE, "podSetAssignments": [
            {"count": 1, "flavors": {k: flavor for k in requests}, "name": "main", "resourceUsage": dict(requests)}]}
        conds = [
            {"lastTransitionTime": _utc(job.start), "message": f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}",
             "observedGeneration": 1, "reason": "QuotaReserved", "status": "True", "type": "QuotaReserved"},
            {"lastTransitionTime": _utc(job.start), "message": "The workload is admitted",
             "observedGeneration": 1, "reason": "Admitted", "status": "True", "type": "Admitted"},
        ]
        if st == "ended":
            failed = job.final == "FAILED"
            conds.append({"lastTransitionTime": _utc(job.end),
                          "message": "Job has reached the specified backoff limit" if failed
                          else "Job finished successfully",
                          "observedGeneration": 1, "reason": "Failed" if failed else "Succeeded", "status": "True",
                          "type": "Finished"})
        else:
            meta["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
        status["conditions"] = conds
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": meta,
        "spec": {
            "active": True,
            "podSets": [{"count": 1, "name": "main", "template": {"metadata": {}, "spec": {
                "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(job.gpus)},
                                                              "requests": requests}}],
                "restartPolicy": "Never"}}}],
            "priority": QOS_PRIORITY[job.qos], "priorityClassName": job.qos.lower(),
            "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass", "queueName": QUEUE_NAME,
        },
        "status": status,
    }


def kueue_list_text(jobs: pd.DataFrame, t: Any) -> str:
    """What ``kubectl get workloads.kueue.x-k8s.io -A -o json`` prints at ``t``: a v1 List, keys sorted, 4-space indent.

    Every job submitted by t (job id order) as it stands at t: pending (empty status), running
    (admitted, finalizer ``kueue.x-k8s.io/resource-in-use``) or finished (Kueue keeps finished
    Workloads until their owner Job is deleted). A job cancelled while pending by t is absent: a
    Job deleted before admission takes its Workload with it. resourceVersion is a placeholder
    (1000000 + the item's position). Final newline.

    Raises:
        InputError: a bad job table (:func:`replay_jobs`) or ``t`` without a zone.
    """
    at = _time_s(t, "t")
    items = []
    for job in _jobs(jobs):
        st = job.state_at(at)
        if st is None or (job.start is None and st == "ended"):
            continue
        items.append(_workload(job, at, 1_000_000 + len(items)))
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    return json.dumps(doc, indent=4, sort_keys=True, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- Prometheus query_range


def _prom_time(ts: Any, where: str) -> str:
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        raise InputError(f"{where}: time {ts!r} is not a unix time (expected e.g. 1742140800)")
    return str(int(ts)) if float(ts).is_integer() else json.dumps(round(float(ts), 3))


def prometheus_text(samples: Mapping[str, Any] | str, t: Any, days: float) -> str:
    """The ``/api/v1/query_range`` body of the samples in ``(t - days, t]`` of a query_range body.

    Args:
        samples: a query_range response body (dict or its JSON text), ``{"status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[unix_s, "v"], ...]}]}}``.
            A value given as a number is printed like Go ``FormatFloat`` (:func:`go_float`); a
            text value is kept as it is.
        t: the query's ``end`` (tz-aware).
        days: the range in days (``start = end - days``; a sample at exactly ``start`` is left out).

    Returns:
        Compact JSON without a trailing newline, like the HTTP response: series in the given order
        (Prometheus returns them sorted by labels), a series without samples in the range left out
        (Prometheus omits empty series), times as integers when whole (Prometheus
        ``MarshalTimestamp``). Format: Prometheus HTTP API docs, "Range queries" / "Range vectors"
        (https://prometheus.io/docs/prometheus/latest/querying/api/).

    Raises:
        InputError: not a success matrix body, a malformed series or sample, ``days <= 0``, ``t``
            without a zone, a value that cannot be printed (:func:`go_float`).
    """
    doc = loads(samples, "Prometheus query_range body") if isinstance(samples, str) else samples
    if not isinstance(doc, Mapping) or doc.get("status") != "success" or not isinstance(doc.get("data"), Mapping) \
            or doc["data"].get("resultType") != "matrix" or not isinstance(doc["data"].get("result"), list):
        raise InputError("Prometheus body: not {\"status\": \"success\", \"data\": {\"resultType\": \"matrix\", "
                         "\"result\": [...]}}")
    if not days > 0:
        raise InputError(f"Prometheus range: days {days!r} (expected > 0)")
    end_s = _time_s(t, "t")
    start_s = end_s - days * DAY_S
    series = []
    for i, s in enumerate(doc["data"]["result"]):
        if not isinstance(s, Mapping) or not isinstance(s.get("metric"), Mapping) or not isinstance(s.get("values"), list):
            raise InputError(f"Prometheus body: series {i} is not {{metric, values}}")
        kept = []
        for j, v in enumerate(s["values"]):
            if not isinstance(v, list | tuple) or len(v) != 2:
                raise InputError(f"Prometheus body: series {i} sample {j} {v!r} is not [unix_time, \"value\"]")
            ts, value = v
            text_ts = _prom_time(ts, f"Prometheus body: series {i} sample {j}")
            if not start_s < ts <= end_s:
                continue
            text_v = value if isinstance(value, str) else go_float(float(value))
            kept.append(f"[{text_ts},{json.dumps(text_v, ensure_ascii=False)}]")
        if kept:
            metric = json.dumps(dict(s["metric"]), separators=(",", ":"), ensure_ascii=False)
            series.append(f'{{"metric":{metric},"values":[{",".join(kept)}]}}')
    return '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(series) + "]}}"


# ---------------------------------------------------------------- one replay day


def export_time(day: int, n_days: int, end: Any = REPLAY_END) -> pd.Timestamp:
    """T of replay day ``day`` (0-based) of ``n_days``: ``end - (n_days - 1 - day)`` days, so the last day's T is ``end``.

    Raises:
        InputError: ``n_days < 1`` or ``day`` outside ``0 .. n_days - 1``; ``end`` without a zone.
    """
    if n_days < 1 or not 0 <= day < n_days:
        raise InputError(f"replay day {day} of {n_days} (expected n_days >= 1 and 0 <= day < n_days)")
    return pd.Timestamp(_time_s(end, "end") - (n_days - 1 - day) * DAY_S, unit="s", tz="UTC")


def day_exports(replay: pd.DataFrame, day: int, n_days: int, prometheus_body: Mapping[str, Any] | str,
                timezone: str, *, end: Any = REPLAY_END, history_days: int = 7,
                prometheus_days: int = 14) -> dict[str, str]:
    """The exports a cluster prints at the end of replay day ``day`` (0-based) of ``n_days``.

    T = :func:`export_time` (the last day's T is ``end``, 2025-03-16T16:00:00Z by default, the end
    of ``data/fixtures/servegen/prometheus.json``; consecutive days are 24 h apart).

    Returns:
        ``{"T": "2025-03-16T16:00:00Z", "sacct": ..., "squeue": ..., "kueue": ..., "prometheus": ...}``:

        * ``sacct``: :func:`sacct_text` run at T with ``--starttime`` = the previous day's T (day
          0: T - ``history_days`` days, so the first retraining has history), ``--endtime`` = T;
          times in ``timezone``. Consecutive windows share their boundary: a job running at T_d is
          RUNNING on day d and, once ended, in day d+1's export too.
        * ``squeue``: :func:`squeue_json_text` at T (the jobs pending or running at T).
        * ``kueue``: :func:`kueue_list_text` at T (every Workload submitted by T; finished ones kept).
        * ``prometheus``: :func:`prometheus_text` of ``prometheus_body`` over ``(T - prometheus_days, T]``
          (fewer days when the body starts later).

    Raises:
        InputError: a bad day/n_days (:func:`export_time`); ``n_days`` larger than the days the
            replay covers (day 0's T not after its first submission); a bad job table, zone or body.
    """
    t = export_time(day, n_days, end)
    typed = replay_jobs(replay)
    if typed.empty:
        raise InputError("replay: the job table is empty")
    first = typed["submitted_at"].min()
    t0 = export_time(0, n_days, end)
    if t0 <= first:
        covered = math.ceil((pd.Timestamp(end) - first) / pd.Timedelta(days=1))
        raise InputError(f"replay: n_days {n_days} starts at {t0.isoformat()}, not after the first submission "
                         f"{first.isoformat()} (expected n_days <= {covered})")
    start = t - pd.Timedelta(days=history_days if day == 0 else 1)
    return {
        "T": t.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sacct": sacct_text(typed, t, start, timezone),
        "squeue": squeue_json_text(typed, t),
        "kueue": kueue_list_text(typed, t),
        "prometheus": prometheus_text(prometheus_body, t, prometheus_days),
    }
