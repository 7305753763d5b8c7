"""Slurm adapter, the queue half: ``squeue --json`` snapshots -> canonical job records (pending and running).

Pure (text in, :class:`~pipelines.workspace.sources.records.ParseResult` out, no file IO). The field rules
(job ids, states, GPU requests, times) are in :mod:`pipelines.workspace.sources.slurm`'s docstring; the
record is built by the same :func:`~pipelines.workspace.sources.slurm.job_record` as a ``sacct`` row's.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from pipelines.io import strict_json
from pipelines.io.errors import InputError
from pipelines.workspace.sources.records import (
    ACTIVE_STATES,
    ParseResult,
    job_frame,
)
from pipelines.workspace.sources.slurm import (
    BadField,
    GpuRequest,
    array_task_ids,
    expand_array,
    has_started,
    job_record,
    slurm_epoch,
    slurm_number,
    slurm_state,
    tres_gpus,
)

_number = slurm_number  # the one reader of Slurm's plain / {"set", "infinite", "number"} numbers
_epoch = slurm_epoch


def parse_squeue_json(text: str, source: str = "slurm", *, now: pd.Timestamp | None = None) -> ParseResult:
    """Jobs of a ``squeue --json`` snapshot (Slurm 23.02+, data_parser v0.0.39 to v0.0.42) -> job records.

    The shape (``{"jobs": [...], "errors": [...], "warnings": [...], "meta": {...}}``) and field
    names are those of ``squeue --json`` / slurmrestd ``GET /slurm/v0.0.4x/jobs``. A number field
    is either a plain integer (v0.0.39 times and ids) or ``{"set": bool, "infinite": bool,
    "number": N}``: ``infinite`` -> unlimited (a time limit -> NaN), ``set: false`` -> missing;
    a plain 0 time, and Slurm's NO_VAL/INFINITE sentinels, are missing too.

    Args:
        text: the JSON document.
        source: value of the records' ``source`` column.
        now: the snapshot's time (tz-aware). When given, a running job's ``elapsed_s`` is
            ``now - start_time`` (0 when the start is later: the snapshot's clock behind the
            controller's); without it that is NaN (squeue's JSON has no run-time field).

    Returns:
        One record per item of ``jobs`` (``read`` = their number):

        * ``job_id``: ``<array_job_id>_<array_task_id>`` for an array task; a pending array
          record (task id unset, ``array_task_string`` e.g. ``5-10``, ``1-9:2``, ``0-99%4``) is
          expanded into one pending record per task (``123_5`` .. ``123_10``, each one task's
          request; :func:`_squeue_records`), counted in ``arrays_expanded``/``array_tasks``; ``<het_job_id>+<het_job_offset>`` for a
          heterogeneous component (het_job_id > 0); else ``job_id``.
        * times: epoch seconds (UTC) of ``submit_time``, ``eligible_time``, ``start_time``,
          ``end_time``. A pending job's start and a pending/running job's end are squeue's
          estimates and are not kept. An ended job counts as started when ``start_time`` is set
          and before ``end_time`` (slurmctld stamps both with the end time on a job that ends
          without running); ``elapsed_s`` = end - start (suspended time not subtracted).
        * ``state``: ``job_state``, a string (v0.0.39) or a list whose first item is the base
          state (``["PENDING", "REQUEUED"]``), through :data:`~pipelines.workspace.sources.records.SLURM_STATES`.
        * ``time_limit_s``: ``time_limit`` (minutes) * 60.
        * ``deadline_at``: ``deadline`` (the job's ``--deadline``), epoch seconds by the same rule as the
          times: 22.05 (v0.0.37/38) a plain integer, 23.02+ ``{"set", "infinite", "number"}``; 0, unset or
          infinite -> NaT (none).
        * ``gpus``/``gpu_type``: ``tres_alloc_str`` when it is non-empty (a job that got
          resources; TRES rules as in :func:`parse_sacct`); otherwise the first of
          ``tres_req_str``, ``tres_per_job``, ``tres_per_node`` * ``node_count`` that names a GPU
          (``gres/gpu:4``, ``gres:gpu:a100:2``, ``gpu:2``); else 0.
        * requested GPU types (a typed ``tres_req_str``/``tres_per_*`` entry, :func:`_requested_types`)
          -> annotation ``gpu_types``; ``features`` (the job's ``--constraint``) -> annotation ``constraint``.
        * ``comment`` -> annotations and kind as in :func:`parse_sacct`; ``priority``, ``nodes``,
          ``user_name``, ``account``, ``partition``, ``qos``, ``name`` copied ("" -> None).

        A malformed item is rejected with ``jobs[i] (job <id>): <field> <value!r> is not ...
        (expected ...)`` (i 0-based) and the rest kept.

    Raises:
        InputError: not valid JSON (line and column named) or a key repeated in an object; a
            non-empty top-level ``errors`` (the first error's text); no ``jobs`` list.
        ValueError: ``now`` without a time zone.
    """
    if now is not None and pd.Timestamp(now).tzinfo is None:
        raise ValueError("now must be tz-aware (UTC)")
    doc = strict_json.loads(text, "squeue --json output")
    if not isinstance(doc, dict):
        raise InputError(f"squeue --json output is a JSON {type(doc).__name__} (expected an object with a jobs list)")
    problems = doc.get("errors") or []
    if problems:
        raise InputError(f"squeue --json reported an error: {_error_text(problems[0])}")
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise InputError("squeue --json output has no jobs list (expected {\"jobs\": [...], ...})")
    try:
        exported_at = _epoch("last_update", doc.get("last_update"))
    except BadField:
        exported_at = None
    # a running job's elapsed time at the snapshot's own time (last_update) when it has one, else at `now`
    now_utc = exported_at if exported_at is not None else (None if now is None else pd.Timestamp(now).tz_convert("UTC"))
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    arrays = tasks = 0
    for i, job in enumerate(jobs):
        try:
            got = _squeue_records(job, source, now_utc)
        except BadField as bad:
            label = f"jobs[{i}]"
            if isinstance(job, dict) and "job_id" in job:
                label += f" (job {_plain(job['job_id'])})"
            errors.append(f"{label}: {bad}")
            continue
        if len(got) != 1 or "[" in got[0]["job_id"] or _is_array_record(job):
            arrays += 1
            tasks += len(got)
        rows.extend(got)
    return ParseResult(frame=job_frame(rows), read=len(jobs), errors=errors, exported_at=exported_at,
                       arrays_expanded=arrays, array_tasks=tasks,
                       marking_read=any(isinstance(j, dict) and "comment" in j for j in jobs))


def _is_array_record(job: Any) -> bool:
    """A pending array record: array_job_id set, no task id, an ``array_task_string``."""
    if not isinstance(job, dict):
        return False
    array_job, _ = _number("array_job_id", job.get("array_job_id"))
    array_task, _ = _number("array_task_id", job.get("array_task_id"))
    return bool(array_job) and array_task is None and bool(_text(job, "array_task_string"))


def _squeue_records(job: Any, source: str, now: pd.Timestamp | None) -> list[dict[str, Any]]:
    """One job item's record(s): a pending array record becomes one record per task (``123_4``).

    The tasks come from ``array_task_string`` (``412-9999``, ``1-9:2``, ``1,3,5-7``, ``0-99%4``;
    :func:`~pipelines.workspace.sources.slurm.array_task_ids`); the ``%`` limit, or
    ``array_max_tasks`` when set, goes to each task's annotations as ``array_max_running``.
    """
    record = _squeue_row(job, source, now)
    if not _is_array_record(job):
        return [record]
    array_job, _ = _number("array_job_id", job.get("array_job_id"))
    ids, limit = array_task_ids("array_task_string", _text(job, "array_task_string"))
    max_tasks, _ = _number("array_max_tasks", job.get("array_max_tasks"))
    if limit is None and max_tasks:
        limit = int(max_tasks)
    return expand_array(record, str(int(array_job or 0)), ids, limit)


def _error_text(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error)
    text = str(error.get("description") or error.get("error") or "unknown error")
    detail = error.get("error")
    if detail and detail != text:
        text += f": {detail}"
    if error.get("error_number") is not None:
        text += f" (error_number {error['error_number']})"
    if error.get("source"):
        text += f" in {error['source']}"
    return text


def _plain(value: Any) -> Any:
    """A number field shown in a message: the ``number`` of ``{"set", "infinite", "number"}``, else as given."""
    return value.get("number") if isinstance(value, dict) else value


def _text(job: dict[str, Any], key: str) -> str:
    value = job.get(key)
    if isinstance(value, dict):  # sacct-style {"job": ..., "administrator": ..., "system": ...} comment
        value = value.get("job")
    return "" if value is None else str(value)


def _squeue_job_id(job: dict[str, Any]) -> str:
    job_id, _ = _number("job_id", job.get("job_id"))
    if job_id is None:
        raise BadField(f"job_id {job.get('job_id')!r} is not a job id (expected a positive integer)")
    array_job, _ = _number("array_job_id", job.get("array_job_id"))
    array_task, _ = _number("array_task_id", job.get("array_task_id"))
    het_job, _ = _number("het_job_id", job.get("het_job_id"))
    if array_job and array_task is not None:
        return f"{int(array_job)}_{int(array_task)}"
    if array_job and _text(job, "array_task_string"):
        return f"{int(array_job)}_[{_text(job, 'array_task_string')}]"
    if het_job:
        offset, _ = _number("het_job_offset", job.get("het_job_offset"))
        return f"{int(het_job)}+{int(offset or 0)}"
    return str(int(job_id))


def _per_gpus(field: str, text: str) -> GpuRequest | None:
    """GPUs in a ``tres_per_*`` string (``gres/gpu:4``, ``gres:gpu:a100:2``, ``gpu:2``); None when none."""
    total = 0
    types: set[str] = set()
    found = False
    for entry in (e.strip() for e in text.split(",")):
        parts = entry.removeprefix("gres/").removeprefix("gres:").replace("=", ":").split(":")
        if parts[0] != "gpu":
            continue
        found = True
        if len(parts) == 1:
            count, gpu_type = "1", None
        elif len(parts) == 2:
            count, gpu_type = (parts[1], None) if parts[1].isdigit() else ("1", parts[1])
        elif len(parts) == 3:
            count, gpu_type = parts[2], parts[1]
        else:
            count, gpu_type = "", None
        if not count.isdigit():
            raise BadField(f"{field} {text!r} is not a GPU request (expected e.g. gres/gpu:4 or gres/gpu:a100:2)")
        total += int(count)
        if gpu_type and int(count) > 0:
            types.add(gpu_type)
    return GpuRequest(total, ",".join(sorted(types)) if types else None) if found else None


def _squeue_gpus(job: dict[str, Any]) -> GpuRequest:
    alloc = _text(job, "tres_alloc_str")
    if alloc:
        return tres_gpus("tres_alloc_str", alloc) or GpuRequest(0, None)
    found = (tres_gpus("tres_req_str", _text(job, "tres_req_str"))
             or _per_gpus("tres_per_job", _text(job, "tres_per_job")))
    if found:
        return found
    per_node = _per_gpus("tres_per_node", _text(job, "tres_per_node"))
    if per_node:
        node_count, _ = _number("node_count", job.get("node_count"))
        return GpuRequest(per_node.count * int(node_count or 1), per_node.gpu_type)
    return GpuRequest(0, None)


def _requested_types(job: dict[str, Any]) -> str | None:
    """The GPU types a job asked for, ``|``-joined (``gres:gpu:h100:4`` -> ``h100``); None when untyped.

    The first typed GPU entry of ``tres_req_str``, ``tres_per_job``, ``tres_per_node``, ``tres_per_socket``,
    ``tres_per_task``.
    """
    got = tres_gpus("tres_req_str", _text(job, "tres_req_str"))
    if got is not None and got.gpu_type:
        return got.gpu_type.replace(",", "|")
    for key in ("tres_per_job", "tres_per_node", "tres_per_socket", "tres_per_task"):
        per = _per_gpus(key, _text(job, key))
        if per is not None and per.gpu_type:
            return per.gpu_type.replace(",", "|")
    return None


def _squeue_row(job: Any, source: str, now: pd.Timestamp | None) -> dict[str, Any]:
    if not isinstance(job, dict):
        raise BadField(f"item {str(job)[:40]!r} is not an object (expected a job object)")
    job_id = _squeue_job_id(job)
    raw_state = job.get("job_state")
    word = raw_state[0] if isinstance(raw_state, list) and raw_state else raw_state
    if not isinstance(word, str):
        raise BadField(f"job_state {raw_state!r} is not a Slurm job state (expected e.g. \"RUNNING\" or [\"PENDING\"])")
    state = slurm_state("job_state", word)
    submitted = _epoch("submit_time", job.get("submit_time"))
    if submitted is None:
        raise BadField(f"submit_time {job.get('submit_time')!r} is not a time (expected epoch seconds > 0)")
    start = _epoch("start_time", job.get("start_time"))
    end = _epoch("end_time", job.get("end_time"))
    started = has_started(state, start, end, _text(job, "nodes") or None)
    if not started:
        elapsed = math.nan
    elif state in ACTIVE_STATES:
        # a start after the snapshot's time (its clock behind the controller's, e.g. stepped back): 0, not < 0
        elapsed = max(0.0, (now - start).total_seconds()) if now is not None and start is not None else math.nan
    else:
        elapsed = (end - start).total_seconds() if end is not None and start is not None else math.nan
    limit_min, _ = _number("time_limit", job.get("time_limit"))
    priority, _ = _number("priority", job.get("priority"))
    return job_record(
        source=source, job_id=job_id, submitted=submitted,
        eligible=_epoch("eligible_time", job.get("eligible_time")),
        start=start if started else None, end=None if state in ACTIVE_STATES else end, state=state, started=started,
        elapsed_s=elapsed, time_limit_s=math.nan if limit_min is None else limit_min * 60.0,
        gpus=_squeue_gpus(job), nodes=_text(job, "nodes") or None, user=_text(job, "user_name"),
        account=_text(job, "account"), partition=_text(job, "partition"), qos=_text(job, "qos"),
        priority=math.nan if priority is None else priority, job_name=_text(job, "name"),
        comment=_text(job, "comment"), requested_types=_requested_types(job), constraint=_text(job, "features"),
        deadline=_epoch("deadline", job.get("deadline")))
