r"""Slurm adapter: ``sacct`` accounting exports and ``squeue --json`` snapshots -> canonical job records.

``squeue --json`` is parsed in :mod:`pipelines.workspace.sources.slurm_squeue` (the rules below apply to both).

Pure parsers (text in, :class:`~pipelines.workspace.sources.records.ParseResult` out, no file IO). The
columns they fill are described in :mod:`pipelines.workspace.sources.records`.

The export operators run (:data:`SACCT_COMMAND` with example ``{starttime}``/``{endtime}``)::

    SLURM_TIME_FORMAT=standard TZ=UTC sacct --allusers --allocations --array --parsable2 \
        --format=JobID,JobName,User,Account,Partition,QOS,Priority,Submit,Eligible,Start,End,Elapsed,Timelimit,State,ReqTRES,AllocTRES,NodeList,Comment \
        --starttime=2024-05-01T00:00:00 --endtime=2024-05-02T00:00:00 > sacct.txt

and read it with ``parse_sacct(text, timezone="UTC")``. Why each part (source: ``sacct(1)``,
https://slurm.schedmd.com/sacct.html, and ``src/sacct/print.c`` of SchedMD/slurm):

* no ``--noheader``: the parser matches columns by the header line, so any column order works;
* ``--parsable2`` (``|`` between fields); ``--parsable`` (a ``|`` after the last field too) is read as well;
* ``--allusers``: every user's jobs (``PrivateData=jobs`` in slurmdbd.conf can still hide others' jobs);
* ``--allocations``: job lines only; step lines (``123.batch``, ``123.extern``, ``123.0``) are skipped anyway;
* ``--array``: one line per array task; without it, pending tasks are folded into one line ``123_[5-10]``,
  which the parser expands into one pending record per task (:func:`array_task_ids`);
* ``--starttime``/``--endtime``: without them sacct shows only jobs since midnight today. A job is
  listed when it was pending or running at some time in the window, so consecutive windows overlap
  in the jobs that span a boundary; the job store keeps one record per (source, job_id, submitted_at);
* no ``--duplicates``: a requeued job is then shown once, its latest run (its Submit is reset at requeue);
* ``SLURM_TIME_FORMAT=standard``: times as ``YYYY-MM-DDTHH:MM:SS`` (``relative`` would print ``Ystday 10:00``);
* ``TZ=UTC``: sacct prints the wall clock of the process's time zone without an offset. Under UTC
  there is no daylight-saving gap or repeated hour; without it, pass the zone sacct ran in
  (``parse_sacct(text, timezone="Europe/Berlin")``) and the fall-back hour is ambiguous
  (:func:`~pipelines.workspace.sources.records.local_to_utc` reads it as the first, daylight-time, occurrence).

Every one of :data:`SACCT_FIELDS` is in the ``--helpformat`` list of sacct(1) for Slurm 25.11
(SchedMD/slurm ``doc/man/man1/sacct.1``) and in ``sacct --helpformat`` listings printed by older
(20.x-22.x) installations, so in 23.x/24.x too; ``Priority`` ("Slurm priority", the job's
priority as stored by slurmdbd) included. Only JobID, Submit and State (and one of ReqTRES/AllocTRES)
are required; a missing optional column gives None/NaN. ``Constraints`` (the job's ``--constraint``,
a ``sacct --helpformat`` field since before 22.05) is read when the export has it: append
``,Constraints`` to ``--format`` to plan constrained jobs on their GPU types (annotation ``constraint``). ``Comment`` is filled only when slurm.conf
``AccountingStoreFlags`` contains ``job_comment``; otherwise it prints empty and jobs get no
annotations. A ``|`` inside JobName or Comment splits the line into too many fields: the line is
read when exactly one free-text column (:data:`FREE_TEXT_COLUMNS`) can hold the extra fields, else
rejected naming the job and the cause, the rest kept. ``JobIDRaw`` stands for ``JobID`` when that
column is absent; an export without its header (``--noheader``) is refused naming the option.
"""

from __future__ import annotations

import math
import re
import zoneinfo
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from domain.kinds import JOB_KINDS
from pipelines.io.errors import InputError
from pipelines.workspace.sources.records import (
    ACTIVE_STATES,
    SLURM_STATES,
    ParseResult,
    is_censored,
    job_frame,
    local_to_utc,
    parse_annotations,
)

__all__ = ["SACCT_COMMAND", "SACCT_FIELDS", "SACCT_FORMAT", "SACCT_GPU_COLUMNS", "SACCT_REQUIRED", "parse_sacct"]

#: The sacct fields the adapter reads, in the recommended ``--format`` order.
SACCT_FIELDS: tuple[str, ...] = (
    "JobID", "JobName", "User", "Account", "Partition", "QOS", "Priority", "Submit", "Eligible", "Start", "End",
    "Elapsed", "Timelimit", "State", "ReqTRES", "AllocTRES", "NodeList", "Comment",
)
#: ``sacct --format=`` value (field names as ``sacct --helpformat`` prints them).
SACCT_FORMAT: str = ",".join(SACCT_FIELDS)
#: The recommended export command (module docstring says why each option); fill ``{starttime}``
#: and ``{endtime}`` (``YYYY-MM-DDTHH:MM:SS``) with ``str.format``. Parse its output with
#: ``timezone="UTC"``.
SACCT_COMMAND: str = (
    "SLURM_TIME_FORMAT=standard TZ=UTC sacct --allusers --allocations --array --parsable2 "
    f"--format={SACCT_FORMAT} --starttime={{starttime}} --endtime={{endtime}}"
)
#: Columns an export must have. At least one of ReqTRES/AllocTRES is required as well: without
#: them the GPU count of every job is unknown, and a 0 would claim "no GPUs".
SACCT_REQUIRED: tuple[str, ...] = ("JobID", "Submit", "State")
#: GPU columns, of which at least one must be present.
SACCT_GPU_COLUMNS: tuple[str, ...] = ("AllocTRES", "ReqTRES")

#: Time text meaning "no time" (sacct prints ``Unknown`` for a time not reached, ``None`` for some never-set ones).
_NO_TIME = frozenset({"", "unknown", "none"})
#: Time-limit text meaning "no limit" (sacct(1) "Timelimit"; ``INVALID`` from a corrupt value).
_NO_LIMIT = frozenset({"", "unlimited", "partition_limit", "invalid"})
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
_DURATION = re.compile(r"^(?:(?P<d>\d+)-(?P<hd>\d+):|(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+)(?:\.(?P<f>\d+))?$")
_JOB_ID = re.compile(r"^\d+(?:_\d+|\+\d+)?$")
_ARRAY_PLACEHOLDER = re.compile(r"^(?P<job>\d+)_\[(?P<spec>[^\]]+)\]$")
_ARRAY_RANGE = re.compile(r"^(?P<a>\d+)(?:-(?P<b>\d+)(?::(?P<step>\d+))?)?$")
#: Most tasks one array record may expand to (Slurm's MaxArraySize is at most 4000001; its default 1001).
#: A larger spec is refused naming it rather than filling memory.
MAX_ARRAY_TASKS = 100_000
#: Columns that hold text a user chose (sacct(1) prints them unescaped, so a ``|`` inside one splits it).
FREE_TEXT_COLUMNS: tuple[str, ...] = ("JobName", "Comment", "AdminComment", "SystemComment", "WorkDir", "SubmitLine",
                                      "Constraints", "Extra", "Reservation", "Container", "StdOut", "StdErr", "StdIn")
_TRES_GPU = re.compile(r"(?:^|,)\s*gres/gpu(?::(?P<type>[^=,]+))?=(?P<count>[^,]*)")
#: Slurm's "no value" / "infinite" sentinels of 32- and 64-bit numbers (slurm.h NO_VAL, INFINITE, NO_VAL64, INFINITE64).
NO_VAL = frozenset({0xFFFFFFFE, 0xFFFFFFFFFFFFFFFE})
INFINITE = frozenset({0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF})


class BadField(Exception):
    """One field of one record is malformed; the message is the part after ``line N: ``."""


def array_task_ids(field: str, spec: str) -> tuple[list[int], int | None]:
    """Task ids of a Slurm array spec and its ``%`` limit: ``"1-7:2,10%2"`` -> ``([1, 3, 5, 7, 10], 2)``.

    The grammar of ``sbatch --array`` (sbatch(1)): comma-separated ``N``, ``N-M`` or ``N-M:S`` (step S),
    optionally ending in ``%P`` (at most P tasks running at once); what ``squeue``'s
    ``array_task_string`` and a sacct placeholder ``123_[...]`` print.

    Raises:
        BadField: not that grammar, a range running backwards, or more than :data:`MAX_ARRAY_TASKS` tasks.
    """
    body, _, limit_text = spec.strip().partition("%")
    limit: int | None = None
    if limit_text:
        if not limit_text.isdigit() or int(limit_text) < 1:
            raise BadField(f"{field} {spec!r} has limit %{limit_text} (expected %P, P >= 1)")
        limit = int(limit_text)
    ids: list[int] = []
    for part in body.split(","):
        match = _ARRAY_RANGE.match(part.strip())
        if match is None:
            raise BadField(f"{field} {spec!r} is not an array spec (expected e.g. 0-7, 1-9:2, 1,3,5-7 or 0-99%4)")
        a = int(match["a"])
        b = int(match["b"]) if match["b"] is not None else a
        step = int(match["step"] or 1)
        if b < a or step < 1:
            raise BadField(f"{field} {spec!r}: range {part.strip()!r} runs backwards or has step 0 "
                           f"(expected N-M with N <= M, step >= 1)")
        if len(ids) + (b - a) // step + 1 > MAX_ARRAY_TASKS:
            raise BadField(f"{field} {spec!r} has more than {MAX_ARRAY_TASKS} tasks (expected a Slurm array; "
                           f"export with sacct --array)")
        ids.extend(range(a, b + 1, step))
    return sorted(set(ids)), limit


def expand_array(record: dict[str, Any], array_job: str, task_ids: list[int], limit: int | None) -> list[dict[str, Any]]:
    """One record per task of a pending array record (job ids ``<array_job>_<task>``, each one task's request).

    ``limit`` (the ``%`` of the spec) goes to every task's annotations as ``array_max_running``.
    """
    out = []
    for task in task_ids:
        rec = dict(record, job_id=f"{array_job}_{task}")
        if limit is not None:
            rec["annotations"] = {**record["annotations"], "array_max_running": str(limit)}
        out.append(rec)
    return out



@dataclass(frozen=True)
class GpuRequest:
    count: int
    gpu_type: str | None


def parse_sacct(text: str, timezone: str, source: str = "slurm") -> ParseResult:
    """Jobs of a ``sacct --parsable2`` (or ``--parsable``) export with its header line -> job records.

    Args:
        text: the export (LF or CRLF line ends; blank lines ignored; a repeated header line,
            e.g. from concatenated exports, is skipped).
        timezone: IANA zone of the wall clock sacct printed (``UTC`` with :data:`SACCT_COMMAND`).
        source: value of the records' ``source`` column.

    Returns:
        One record per job line: ``123``, array task ``123_4``, het component ``123+0`` (job_id
        as printed); a pending array placeholder ``123_[5-10]`` (also ``123_[1-9:2%4]``) becomes
        one pending record per task (``123_5`` .. ``123_10``, each one task's request; the ``%``
        limit as annotation ``array_max_running``), counted in ``arrays_expanded``/``array_tasks``. Step
        lines (``123.batch``, ``123.extern``, ``123.0``, ``123_4.batch``, ``123+0.0``) are skipped
        and not counted in ``read``. Fields:

        * times: ``YYYY-MM-DDTHH:MM:SS`` local to ``timezone`` -> UTC (a spring-forward gap moves
          forward, the fall-back hour is its first occurrence); ``Unknown``/``None``/empty -> NaT.
          A pending job has no ``started_at`` and a pending or running one no ``ended_at``.
        * started: ``Start`` is a time, the job is not pending, and an ended job's ``End`` is
          after its ``Start``, or equal to it with a ``NodeList`` (slurmctld stamps start = end =
          the end time on a job that ends without running, and gives it no nodes; a 0-second
          COMPLETED job with nodes ran). ``elapsed_s`` is ``Elapsed`` (``[D-]HH:MM:SS``, ``MM:SS``,
          ``MM:SS.mmm``) when started, else NaN; ``censored`` is
          :func:`~pipelines.workspace.sources.records.is_censored` of the state and "started".
        * ``time_limit_s``: ``Timelimit`` in the same formats; ``UNLIMITED``, ``Partition_Limit``,
          ``INVALID`` or empty -> NaN.
        * ``state``: the first word of ``State`` (``CANCELLED by 1234`` -> ``CANCELLED``) through
          :data:`~pipelines.workspace.sources.records.SLURM_STATES`.
        * ``gpus``/``gpu_type``: from ``AllocTRES`` (``ReqTRES`` when AllocTRES is empty, as for
          pending jobs): ``gres/gpu=N`` is the total; without it the typed ``gres/gpu:<type>=N``
          entries are summed. ``gpu_type`` is the typed entries' type (several: joined with
          ``,`` in sorted order), None without one. No GPU entry -> 0.
          A typed ``ReqTRES`` (``gres/gpu:a100=4``, MIG ``gres/gpu:a100_3g.20gb=1``) is the request's
          type: annotation ``gpu_types``; an untyped one (``gres/gpu=8``) leaves the job any type.
          ``Constraints`` (when exported) -> annotation ``constraint``.
        * ``nodes``: ``NodeList``; ``None assigned`` or empty -> None. ``priority``: float, empty -> NaN.
        * ``annotations``/``kind``: ``gpuplan.*`` fields of ``Comment``
          (:func:`~pipelines.workspace.sources.records.parse_annotations`); ``kind`` is the ``kind``
          annotation when it is one of :data:`domain.kinds.JOB_KINDS`, else None.

        A malformed line is rejected with ``line N: <field> <value!r> is not ... (expected ...)``
        (N 1-based in ``text``) and the rest kept: too few fields, too many that no one free-text
        column can hold (``line N: job 123: 19 fields for 18 header columns: ...``), a JobID that is not
        a job id, an unparsable time, duration or priority, an unknown state, a non-integer GPU
        count, or no Submit time.

    Raises:
        InputError: ``timezone`` is not an IANA zone; no header line (empty, or ``--noheader``:
            "no header line: drop --noheader"); the header lacks JobID (or JobIDRaw),
            Submit or State (all missing ones named), or both AllocTRES and ReqTRES; a column is
            named twice.
    """
    _check_timezone(timezone)
    lines = text.removeprefix("\ufeff").split("\n")
    header_no, header, parsable = _header(lines)
    columns = _columns(header, header_no)
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    read = arrays = tasks = 0
    commented = False  # a job line with a Comment: the cluster records comments (AccountingStoreFlags=job_comment)
    for number, raw in enumerate(lines[header_no:], start=header_no + 1):
        line = raw.rstrip("\r")
        fields = _fields(line, parsable)
        if not line.strip() or fields == header:
            continue
        job_id = fields[columns["jobid"]] if columns["jobid"] < len(fields) else ""
        if "." in job_id:
            continue  # a job step, not a job
        read += 1
        c = columns.get("comment")
        commented = commented or (c is not None and c < len(fields) and bool(fields[c].strip()))
        try:
            got = _sacct_line(line, fields, columns, len(header), source)
        except BadField as bad:
            errors.append(f"line {number}: {bad}")
            continue
        if _ARRAY_PLACEHOLDER.match(got[0]["_id"]):
            arrays += 1
            tasks += len(got)
        rows.extend(got)
    for row in rows:
        del row["_id"]
    for col in ("submitted_at", "eligible_at", "started_at", "ended_at"):
        converted = local_to_utc([row[col] for row in rows], timezone)
        for row, value in zip(rows, converted, strict=True):
            row[col] = value
    return ParseResult(frame=job_frame(rows), read=read, errors=errors, arrays_expanded=arrays, array_tasks=tasks,
                       marking_read=commented)  # an all-empty Comment column says nothing (sacct 22.05)


def _check_timezone(timezone: str) -> None:
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise InputError(f"timezone {timezone!r} is not an IANA time zone "
                         f"(expected e.g. UTC or Europe/Berlin)") from None


def _fields(line: str, parsable: bool = False) -> list[str]:
    """Fields of one ``|``-separated line.

    ``--parsable`` (the header ends with ``|``) ends every line with a ``|``: that one empty field
    after it is dropped. ``--parsable2`` lines keep every field (an empty last field included), so a
    ``|`` inside a free-text field shows as one field too many, never hidden.
    """
    fields = [f.strip() for f in line.split("|")]
    if parsable and len(fields) > 1 and fields[-1] == "":
        fields.pop()
    return fields


def _header(lines: list[str]) -> tuple[int, list[str], bool]:
    """(1-based line number, column names, ``--parsable``?) of the first non-blank line.

    Raises:
        InputError: no line; a line without ``|``; a first line that is a job (``--noheader``).
    """
    for number, raw in enumerate(lines, start=1):
        if raw.strip():
            line = raw.rstrip("\r").strip()
            if "|" not in line:
                raise InputError(f"line {number}: sacct header {line[:60]!r} has no '|' between fields "
                                 f"(expected sacct --parsable2 output with its header, e.g. JobID|Submit|State|...)")
            first = line.split("|", 1)[0].strip()
            if _JOB_ID.match(first.split(".")[0]) or _ARRAY_PLACEHOLDER.match(first):
                raise InputError(f"line {number}: no header line: drop --noheader (the first line starts with job "
                                 f"{first!r}; expected sacct's header, e.g. JobID|Submit|State|...)")
            parsable = line.endswith("|")
            return number, _fields(line, parsable), parsable
    raise InputError("sacct export is empty (expected a header line such as JobID|Submit|State|... and job lines)")


def _columns(header: list[str], header_no: int) -> dict[str, int]:
    """Lower-cased column name -> index; refuses a repeated name or missing required columns."""
    columns: dict[str, int] = {}
    for index, name in enumerate(header):
        key = name.lower()
        if key in columns:
            raise InputError(f"line {header_no}: sacct header names column {name!r} twice (expected each once)")
        columns[key] = index
    if "jobid" not in columns and "jobidraw" in columns:  # JobIDRaw (OLCF's documented export) is the id
        columns["jobid"] = columns["jobidraw"]
    missing = [name for name in SACCT_REQUIRED if name.lower() not in columns]
    if missing:
        raise InputError(f"line {header_no}: sacct header lacks column(s) {', '.join(missing)} "
                         f"{'(JobIDRaw counts as JobID) ' if 'JobID' in missing else ''}"
                         f"(expected at least {', '.join(SACCT_REQUIRED)}; use --format={SACCT_FORMAT})")
    if not any(name.lower() in columns for name in SACCT_GPU_COLUMNS):
        raise InputError(f"line {header_no}: sacct header has neither AllocTRES nor ReqTRES, so GPU counts "
                         f"cannot be read (expected --format={SACCT_FORMAT})")
    return columns


def _sacct_line(line: str, fields: list[str], columns: dict[str, int], width: int,
                source: str) -> list[dict[str, Any]]:
    """The record(s) of one job line: one, or one per task of a pending array placeholder ``123_[4-9%2]``.

    A line with more fields than the header has a ``|`` inside a free-text column
    (:data:`FREE_TEXT_COLUMNS`; sacct does not escape it): the extra fields are joined back into each
    free-text column in turn, and the line is read when exactly one such reading is valid (only that
    column can hold them), else refused naming the job, the counts and the columns.
    """
    job_id = fields[columns["jobid"]] if columns["jobid"] < len(fields) else "?"
    if len(fields) < width:
        raise BadField(f"job {job_id}: {len(fields)} fields for {width} header columns "
                       f"(expected one per header column; a truncated line?)")
    if len(fields) == width:
        return _sacct_records(fields, columns, source)
    extra = len(fields) - width
    canonical = {name.lower(): name for name in FREE_TEXT_COLUMNS}
    free = sorted((index, canonical[name]) for name, index in columns.items() if name in canonical)
    names = [name for _, name in free]
    valid: list[tuple[str, list[dict[str, Any]]]] = []
    whole: list[tuple[str, list[dict[str, Any]]]] = []  # readings whose joined text has no empty '|' segment
    for index, name in free:
        pieces = fields[index:index + extra + 1]
        joined = fields[:index] + ["|".join(pieces)] + fields[index + extra + 1:]
        try:
            reading = (name, _sacct_records(joined, columns, source))
        except BadField:
            continue
        valid.append(reading)
        if all(pieces):
            whole.append(reading)
    if len(valid) == 1:
        return valid[0][1]
    if len(whole) == 1:  # e.g. Constraints 'a100|h100' beside an empty Comment: '|a100' is no one's text
        return whole[0][1]
    shown = ", ".join(names) or "none in the header"
    cause = ("a '|' inside one of them could be in either; rename the job or export with a --delimiter "
             "that no job name holds" if valid else "no free-text column can hold the extra fields")
    raise BadField(f"job {job_id}: {len(fields)} fields for {width} header columns: sacct does not escape a '|' "
                   f"inside a free-text column ({shown}); {cause}")


def _sacct_records(fields: list[str], columns: dict[str, int], source: str) -> list[dict[str, Any]]:
    """One line's record(s) (:func:`_sacct_line`), each with ``_id`` the JobID as printed."""
    record = _sacct_row(fields, columns, source)
    printed = record["job_id"]
    placeholder = _ARRAY_PLACEHOLDER.match(printed)
    if placeholder is None:
        return [{**record, "_id": printed}]
    ids, limit = array_task_ids("JobID", placeholder["spec"])
    return [{**r, "_id": printed} for r in expand_array(record, placeholder["job"], ids, limit)]


def _sacct_row(fields: list[str], columns: dict[str, int], source: str) -> dict[str, Any]:
    def get(name: str) -> str:
        index = columns.get(name.lower())
        return "" if index is None else fields[index]

    job_id = get("JobID")
    if not (_JOB_ID.match(job_id) or _ARRAY_PLACEHOLDER.match(job_id)):
        raise BadField(f"JobID {job_id!r} is not a job id (expected 123, 123_4, 123+0 or 123_[5-10])")
    submitted = _local_time("Submit", get("Submit"))
    if submitted is None:
        raise BadField(f"Submit {get('Submit')!r} is not a time (expected YYYY-MM-DDTHH:MM:SS)")
    state = slurm_state("State", get("State").split()[0] if get("State").split() else "")
    eligible = _local_time("Eligible", get("Eligible"))
    start = _local_time("Start", get("Start"))
    end = _local_time("End", get("End"))
    elapsed = _duration_s("Elapsed", get("Elapsed"))
    limit_text = get("Timelimit")
    time_limit = math.nan if limit_text.lower() in _NO_LIMIT else _duration_s("Timelimit", limit_text)
    priority = _float("Priority", get("Priority"))
    gpus = _sacct_gpus(get("AllocTRES"), get("ReqTRES"))
    nodes = get("NodeList")
    nodes = None if nodes.lower() in ("", "none assigned", "(null)") else nodes
    if "start" in columns:
        started = has_started(state, start, end, nodes)
    else:  # no Start column: a non-pending job with run time has run
        started = state != "pending" and not math.isnan(elapsed) and elapsed > 0
    return job_record(
        source=source, job_id=job_id, submitted=submitted, eligible=eligible,
        start=start if started else None, end=None if state in ACTIVE_STATES else end, state=state,
        started=started, elapsed_s=elapsed if started else math.nan, time_limit_s=time_limit, gpus=gpus,
        nodes=nodes, user=get("User"),
        account=get("Account"), partition=get("Partition"), qos=get("QOS"), priority=priority,
        job_name=get("JobName"), comment=get("Comment"), requested_types=requested_gpu_types("ReqTRES", get("ReqTRES")),
        constraint=get("Constraints") or get("Constraint"))


def _local_time(field: str, value: str) -> datetime | None:
    if value.lower() in _NO_TIME:
        return None
    try:
        return datetime.strptime(value, _TIME_FORMAT)
    except ValueError:
        raise BadField(f"{field} {value!r} is not a time (expected YYYY-MM-DDTHH:MM:SS, Unknown or None)") from None


def _duration_s(field: str, value: str) -> float:
    """``[D-]HH:MM:SS``, ``MM:SS`` or ``MM:SS.mmm`` -> seconds; empty -> NaN.

    Source: sacct(1) "Elapsed" (``[DD-[HH:]]MM:SS``) and ``_elapsed_time`` in src/sacct/print.c.
    """
    if not value:
        return math.nan
    match = _DURATION.match(value)
    if match is None or int(match["m"]) >= 60 or int(match["s"]) >= 60 or (match["d"] and int(match["hd"]) >= 24):
        raise BadField(f"{field} {value!r} is not a duration (expected [D-]HH:MM:SS, MM:SS or MM:SS.mmm)")
    days = int(match["d"] or 0)
    hours = int(match["hd"] or match["h"] or 0)
    fraction = float("0." + match["f"]) if match["f"] else 0.0
    return float(days * 86400 + hours * 3600 + int(match["m"]) * 60 + int(match["s"])) + fraction


def _float(field: str, value: str) -> float:
    if not value:
        return math.nan
    try:
        return float(value)
    except ValueError:
        raise BadField(f"{field} {value!r} is not a number (expected e.g. 4294)") from None


def slurm_state(field: str, word: str) -> str:
    key = word.upper().rstrip("+")
    if key not in SLURM_STATES:
        raise BadField(f"{field} {word!r} is not a Slurm job state (expected e.g. PENDING, RUNNING, COMPLETED, "
                   f"CANCELLED by <uid>, TIMEOUT)")
    return SLURM_STATES[key]


def has_started(state: str, start: Any, end: Any, nodes: str | None = None) -> bool:
    """Whether a job ran: a start time, not pending, and (ended jobs) an end after the start, or at it with nodes.

    slurmctld stamps start = end on a job that ends without running, and such a job has no nodes
    (``None assigned``); a job that ran for under a second (a COMPLETED 0-second job) has both
    times equal too, but a node list: it ran.
    """
    if state == "pending" or start is None or start is pd.NaT:
        return False
    if state in ACTIVE_STATES or end is None or end is pd.NaT:
        return True
    return bool(end > start) or bool(end == start and nodes)


def tres_gpus(field: str, text: str) -> GpuRequest | None:
    """GPUs in a TRES string (``cpu=8,gres/gpu=4,gres/gpu:a100=4``); None when it names no GPU."""
    untyped: int | None = None
    typed: dict[str, int] = {}
    for match in _TRES_GPU.finditer(text):
        count = match["count"].strip()
        if not count.isdigit():
            raise BadField(f"{field} {text!r} is not a TRES list with integer GPU counts (expected e.g. gres/gpu=4)")
        if match["type"]:
            typed[match["type"]] = typed.get(match["type"], 0) + int(count)
        else:
            untyped = int(count)
    if untyped is None and not typed:
        return None
    total = untyped if untyped is not None else sum(typed.values())
    types = sorted(t for t, n in typed.items() if n > 0)
    return GpuRequest(total, ",".join(types) if types else None)


def requested_gpu_types(field: str, text: str) -> str | None:
    """The GPU types a TRES request names, ``|``-joined; None for an untyped request (``gres/gpu=8``) or none.

    ``gres/gpu:a100=4`` -> ``a100``; MIG ``gres/gpu:a100_3g.20gb=1`` -> ``a100_3g.20gb``.
    """
    got = tres_gpus(field, text) if text else None
    return got.gpu_type.replace(",", "|") if got is not None and got.gpu_type else None


def _sacct_gpus(alloc: str, req: str) -> GpuRequest:
    if alloc:
        return tres_gpus("AllocTRES", alloc) or GpuRequest(0, None)
    return tres_gpus("ReqTRES", req) or GpuRequest(0, None)


def slurm_number(field: str, value: Any) -> tuple[float | None, bool]:
    """(number or None when missing, infinite?) of a Slurm JSON number: plain, or ``{"set", "infinite", "number"}``.

    The one reader of that shape (squeue, sinfo / scontrol exports): 21.08/22.05 (openapi v0.0.37/38) send a
    plain integer, 23.02+ (data_parser v0.0.39+) the object; ``infinite`` -> ``(None, True)``, ``set: false``
    -> missing, and Slurm's NO_VAL / INFINITE sentinels likewise.

    Raises:
        BadField: not a number (names ``field``).
    """
    if value is None:
        return None, False
    if isinstance(value, dict):
        if value.get("infinite"):
            return None, True
        if not value.get("set", False):
            return None, False
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadField(f"{field} {value!r} is not a number (expected N or {{\"set\": true, \"infinite\": false, "
                   f"\"number\": N}})")
    if value in INFINITE:
        return None, True
    if value in NO_VAL:
        return None, False
    return float(value), False


def slurm_epoch(field: str, value: Any) -> pd.Timestamp | None:
    """A Slurm JSON time (epoch seconds, :func:`slurm_number`) -> UTC; None when missing, infinite or <= 0.

    Raises:
        BadField: not a number.
    """
    number, _ = slurm_number(field, value)
    if number is None or number <= 0:
        return None
    return pd.Timestamp(int(number), unit="s", tz="UTC")


def job_record(*, source: str, job_id: str, submitted: Any, eligible: Any, start: Any, end: Any, state: str,
            started: bool, elapsed_s: float, time_limit_s: float, gpus: GpuRequest, nodes: str | None, user: str,
            account: str, partition: str, qos: str, priority: float, job_name: str, comment: str,
            requested_types: str | None = None, constraint: str = "", deadline: Any = None) -> dict[str, Any]:
    """One job record (:data:`~pipelines.workspace.sources.records.JOB_RECORD` keys) of a sacct line or squeue item.

    ``requested_types``: the GPU types the job asked for (``|``-joined, from a typed ``gres/gpu:TYPE``
    request) -> annotation ``gpu_types``; ``constraint``: its ``--constraint`` text -> annotation
    ``constraint``. A ``gpuplan.gpu_types`` / ``gpuplan.constraint`` field of the comment wins.
    ``deadline``: the job's ``--deadline`` (UTC timestamp, squeue only: sacct has no such field) ->
    ``deadline_at``; None -> NaT.
    """
    annotations = parse_annotations(comment)
    if requested_types and "gpu_types" not in annotations:
        annotations["gpu_types"] = requested_types
    if constraint and constraint.lower() not in ("(null)", "none") and "constraint" not in annotations:
        annotations["constraint"] = constraint
    kind = annotations.get("kind")
    return {
        "source": source, "job_id": job_id, "submitted_at": submitted, "eligible_at": eligible,
        "started_at": start, "ended_at": end, "state": state, "censored": is_censored(state, started),
        "elapsed_s": elapsed_s, "time_limit_s": time_limit_s, "gpus": gpus.count, "gpu_type": gpus.gpu_type,
        "nodes": nodes, "user": user or None, "account": account or None, "partition": partition or None,
        "qos": qos or None, "priority": priority, "job_name": job_name, "kind": kind if kind in JOB_KINDS else None,
        "annotations": annotations, "deadline_at": deadline,
    }
