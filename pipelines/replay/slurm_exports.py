"""Slurm export writers: the ``sacct`` text and the ``squeue --json`` snapshot of a replayed job table at a time T.

Pure (text out, no file IO); the inverse of :mod:`pipelines.workspace.sources.slurm`. Field rules:
``data/fixtures/README.md`` ("Field choices per file"); the sources are named in each function's docstring.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pandas as pd

from pipelines.io.errors import InputError
from pipelines.replay.jobs import (
    ACCOUNT,
    CLUSTER_NAME,
    GROUP,
    PARTITION,
    QOS_PRIORITY,
    UNLIMITED_END_S,
    USER,
    Job,
    job_rows,
    to_epoch_s,
    zone_info,
)
from pipelines.workspace.sources.slurm import SACCT_FIELDS


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


def _cpus(job: Job) -> int:
    """Whole CPUs for a pod's ``cpu_milli`` (Slurm allocates whole CPUs): ceil(milli / 1000), at least 1."""
    return max(1, -(-job.cpu_milli // 1000))


def requested_type(job: Job) -> str | None:
    """The one GPU type a job asks for as a typed GRES (``gpu_spec`` ``T4`` -> ``t4``); None when untyped or several.

    Several types (``V100M16|V100M32``) cannot be one typed GRES request; they are the job's
    ``--constraint`` (:func:`job_constraint`), the node features a site gives each GPU model.
    """
    spec = job.gpu_spec
    return spec.strip().lower() if spec and "|" not in spec else None


def job_constraint(job: Job) -> str:
    """The job's ``--constraint`` text: its ``gpu_spec`` when it names several types (as the trace spells it), else ""."""
    spec = job.gpu_spec
    return spec.strip() if spec and "|" in spec else ""


def _tres(job: Job, *, alloc: bool, billing: bool = True) -> dict[str, str]:
    """The job's TRES as name -> count text (mem left out when the pod requests 0 MiB).

    A job asking for one GPU type (:func:`requested_type`) requests it typed too, ``gres/gpu:t4=1``
    beside ``gres/gpu=1``, as sacct prints a ``--gres=gpu:t4:1`` request.
    """
    out = {"cpu": str(_cpus(job)), "node": "1", "gres/gpu": str(job.gpus)}
    typed = requested_type(job)
    if typed is not None:
        out[f"gres/gpu:{typed}"] = str(job.gpus)
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


def sacct_text(jobs: pd.DataFrame, t: Any, window_start: Any, timezone: str, *, constraints: bool = False) -> str:
    """What ``sacct --parsable2 --allusers -S <window_start> -E <t>`` (:data:`~pipelines.workspace.sources.slurm.SACCT_FIELDS`) prints when run at ``t``.

    Args:
        jobs: the job table (module docstring).
        t: the time sacct runs, also its ``--endtime`` (tz-aware, whole seconds).
        window_start: ``--starttime`` (tz-aware, whole seconds; at most ``t``).
        timezone: IANA zone of the cluster's wall clock (sacct prints local times without offset).
        constraints: add the ``Constraints`` column last (``--format=...,Constraints``): a job's
            :func:`job_constraint` (``V100M16|V100M32``, unescaped as sacct prints it), empty on steps.

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
    end_s, start_s = to_epoch_s(t, "t"), to_epoch_s(window_start, "window_start")
    if start_s > end_s:
        raise InputError(f"window_start {window_start} is after t {t} (expected --starttime <= --endtime)")
    zone = zone_info(timezone)
    lines = ["|".join(SACCT_FIELDS + (("Constraints",) if constraints else ()))]
    for job in job_rows(jobs):
        st = job.state_at(end_s)
        if job.submit >= end_s or (st == "ended" and job.end is not None and job.end < start_s):
            continue
        got = _sacct_job(job, st, end_s, zone)
        if constraints:
            got = [line + "|" + (job_constraint(job) if i == 0 else "") for i, line in enumerate(got)]
        lines.extend(got)
    return "\n".join(lines) + "\n"


def _sacct_job(job: Job, st: str | None, t: int, zone: ZoneInfo) -> list[str]:
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





def _num(n: int | float, *, is_set: bool = True, infinite: bool = False) -> dict:
    return {"set": is_set, "infinite": infinite, "number": n}


def _exit(status: str = "SUCCESS") -> dict:
    return {"status": [status], "return_code": _num(0), "signal": {"id": _num(0, is_set=False), "name": ""}}


def _squeue_job(job: Job, t: int) -> dict:
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
        "extra": "", "failed_node": "", "features": job_constraint(job), "federation_origin": "", "federation_siblings_active": "",
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
        "tres_per_node": (f"gres/gpu:{requested_type(job)}:{job.gpus}" if requested_type(job)
                          else f"gres/gpu:{job.gpus}"), "tres_per_socket": "", "tres_per_task": "",
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
    at = to_epoch_s(t, "t")
    active = [j for j in job_rows(jobs) if j.state_at(at) in ("pending", "running")]
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
