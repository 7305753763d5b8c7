"""Commands an operator can review and apply for the next re-plan interval (never executed by gpuplan).

From a verified plan of an operator's workspace, for each queued job:

- planned to start in the next interval (``start`` to ``start + interval_min``):
  *Slurm*: ``scontrol update JobId=<id> ReqNodeList=<nodes> StartTime=now`` (a pending job's
  required nodes and earliest start, ``scontrol(1)`` "JOBS - SPECIFICATIONS FOR UPDATE COMMAND"); a
  gang start over more than one node gets a reservation first (``scontrol create reservation
  ReservationName=gpuplan-<id> StartTime=<t> Duration=<min> Nodes=<nodes> Users=<user>``, then
  ``scontrol update JobId=<id> ReservationName=gpuplan-<id>``).
  *Kueue*: the workload stays active, listed in planned admission order.
- planned later in the horizon: *Slurm* ``scontrol update JobId=<id> StartTime=<t> ReqNodeList=<nodes>``
  (held until its planned start); *Kueue* ``kubectl patch workloads.kueue.x-k8s.io -n <ns> <name>
  --type=merge -p '{"spec":{"active":false}}'`` with the time to re-activate it in a comment.
- not started in the horizon: a comment.

For each running job the plan stops at step 0 (issue 30, ``Plan.stops``: a preemptible job stopped because
real-time demand at step 0 exceeds the GPUs no running job holds, DESIGN §5): *Slurm* ``scontrol requeue
JobId=<id>`` (``scontrol(1)``: ``requeue [<option>] <job_list>`` puts a running batch job back to pending;
scontrol strips a leading ``JobId=`` as for ``update``); *Kueue* the workload's eviction ``kubectl patch
workloads.kueue.x-k8s.io -n <ns> <name> --type=merge -p '{"spec":{"active":false}}'`` (a workload whose
``spec.active`` turns false is evicted and not admitted again while inactive), with its re-activation
(``"active":true``) as a comment: a later plan's file emits it when it plans the job's restart. Stops later in
the horizon are never emitted (a later replan decides them).

Times in Slurm commands are the scheduler's clock (``[cluster] timezone``, ``YYYY-MM-DDTHH:MM:SS``,
as ``scontrol`` reads them); every line also says the UTC time. :func:`commands_table` is the same
content as rows (``job_id``, ``action``, ``planned_start_utc``, ``planned_start_local``, ``nodes``,
``gpus``, ``start_step``) for scripts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal

import pandas as pd

Dialect = Literal["slurm", "kueue", "table"]

#: Actions of :func:`commands_table` (``stop_now``: a running job the plan stops at step 0, issue 30).
ACTIONS = ("stop_now", "start_now", "hold_until", "not_in_horizon")


def commands_table(tables: pd.DataFrame, jobs: pd.DataFrame, start: datetime, step_minutes: int,
                   interval_min: int, timezone: str, stops: Sequence[tuple[str, int]] = (),
                   stop_nodes: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per queued job of the plan, and one per running job it stops: what to do in the next interval.

    Args:
        tables: ``plan.parquet`` rows (:data:`pipelines.io.schemas.PLAN_TABLES` plus ``node``).
        jobs: the job forecasts (``job_id``, ``kind``, ``state``) the plan was built from.
        start: the plan start (step 0), aware.
        step_minutes: the planning step.
        interval_min: the re-plan interval: jobs starting before ``start + interval_min`` start now.
        timezone: the scheduler's clock (IANA).
        stops: ``Plan.stops``, ``(job_id, lost_steps)`` of the running jobs stopped at step 0 (issue 30); each
            gets a ``stop_now`` row (start step 0, the plan start; ``gpus`` the GPUs it holds, ``jobs``'
            ``gpus_requested``, when the frame has that column; ``nodes`` from ``stop_nodes``).
        stop_nodes: running job id -> the nodes it runs on (:func:`pipelines.stages.outputs.running_nodes`):
            the nodes a stop frees; a job missing from it gets empty ``nodes``.

    Returns:
        ``job_id, kind, action (ACTIONS), start_step, planned_start_utc, planned_start_local, nodes,
        gpus`` sorted by action (stop_now, start_now, hold_until, not_in_horizon), planned start, job id.
    """
    queued = jobs.loc[jobs["state"] == "queued", ["job_id", "kind"]].astype({"job_id": str})
    rows = tables[(tables["row_type"] == "job") & (~tables["running"].fillna(False).astype(bool))]
    planned = rows.set_index(rows["job_id"].astype(str))
    now_steps = max(1, math.ceil(interval_min / step_minutes))
    t0 = pd.Timestamp(start).tz_convert("UTC")
    out = []
    job_rows = tables[tables["row_type"] == "job"]
    kinds = (dict(zip(job_rows["job_id"].astype(str), job_rows["kind"], strict=True)) if "kind" in tables else {})
    kinds |= dict(zip(jobs["job_id"].astype(str), jobs["kind"], strict=True))
    held = (dict(zip(jobs["job_id"].astype(str), jobs["gpus_requested"], strict=True))
            if "gpus_requested" in jobs.columns else {})
    for job_id, _lost in stops:
        jid = str(job_id)
        out.append({"job_id": jid, "kind": kinds.get(jid, ""), "action": "stop_now", "start_step": 0,
                    "planned_start_utc": t0, "planned_start_local": t0.tz_convert(timezone).strftime("%Y-%m-%dT%H:%M:%S"),
                    "nodes": (stop_nodes or {}).get(jid, ""),
                    "gpus": int(held[jid]) if jid in held and pd.notna(held[jid]) else pd.NA})
    for job_id, kind in zip(queued["job_id"], queued["kind"]):
        r = planned.loc[job_id] if job_id in planned.index else None
        if r is None or pd.isna(r["start_step"]):
            out.append({"job_id": job_id, "kind": kind, "action": "not_in_horizon", "start_step": pd.NA,
                        "planned_start_utc": pd.NaT, "planned_start_local": "", "nodes": "", "gpus": pd.NA})
            continue
        step = int(r["start_step"])
        ts = t0 + pd.Timedelta(minutes=step * step_minutes)
        out.append({"job_id": job_id, "kind": kind, "action": "start_now" if step < now_steps else "hold_until",
                    "start_step": step, "planned_start_utc": ts,
                    "planned_start_local": ts.tz_convert(timezone).strftime("%Y-%m-%dT%H:%M:%S"),
                    "nodes": str(r["node"] or ""), "gpus": int(r["gpus"])})
    frame = pd.DataFrame(out, columns=["job_id", "kind", "action", "start_step", "planned_start_utc",
                                       "planned_start_local", "nodes", "gpus"])
    order = frame["action"].map({a: i for i, a in enumerate(ACTIONS)})
    return (frame.assign(_o=order).sort_values(["_o", "start_step", "job_id"], kind="stable", na_position="last")
            .drop(columns="_o").reset_index(drop=True))


def _duration_min(tables: pd.DataFrame, job_id: str, step_minutes: int) -> int:
    r = tables[(tables["row_type"] == "job") & (tables["job_id"].astype(str) == job_id)].iloc[0]
    return int((int(r["end_step"]) - int(r["start_step"])) * step_minutes)


def commands_text(table: pd.DataFrame, tables: pd.DataFrame, users: dict[str, str], dialect: Dialect, run_name: str,
                  start: datetime, interval_min: int, step_minutes: int, timezone: str,
                  preemptible_running: int = 0, preemptible_queued: int = 0) -> str:
    """The reviewable commands file (module docstring) of :func:`commands_table`'s rows.

    ``users``: job id -> its user (a Slurm reservation names who may use it). ``dialect`` ``slurm``,
    ``kueue`` or ``table`` (comments only). ``preemptible_running`` / ``preemptible_queued``: the running
    jobs the plan could have stopped and the queued jobs marked preemptible (issue 30); when either is
    non-zero preemption is on, and with none stopped the header says so instead of "no preemption".
    """
    t0 = pd.Timestamp(start).tz_convert("UTC")
    end = t0 + pd.Timedelta(minutes=interval_min)
    n_stop = int((table["action"] == "stop_now").sum())
    if preemptible_running:
        kept = [f"# newest file. Preemption is on and no job is stopped at this step ({preemptible_running} "
                "preemptible running; real-time",
                "# demand fits at step 0): running jobs keep their GPUs and need nothing."]
    elif preemptible_queued:
        kept = [f"# newest file. Preemption is on and no job is stopped at this step (no running job is "
                f"preemptible; {preemptible_queued}",
                "# queued): running jobs keep their GPUs and need nothing."]
    else:
        kept = ["# newest file. Running jobs keep their GPUs (no preemption) and need nothing."]
    running = (kept if not n_stop else
               [f"# newest file. Running jobs keep their GPUs except the {n_stop} stopped below (preemptible jobs,",
                "# stopped because real-time demand now exceeds the GPUs no running job holds); the others need "
                "nothing."])
    lines = [
        "#!/bin/sh",
        f"# gpuplan commands of plan {run_name}: next interval {t0:%Y-%m-%dT%H:%MZ} .. {end:%Y-%m-%dT%H:%MZ} "
        f"(scheduler clock {timezone}).",
        "# Review, then apply by hand; gpuplan never runs them. Plans are redone every interval: apply only the",
        *running,
    ]
    if dialect == "table":
        lines.append("# This workspace's queue is a plain table: no scheduler commands; see commands.tsv.")
    elif dialect == "kueue":
        lines += ["# Kueue: a workload planned later is held by deactivating it (spec.active=false) and released",
                  "# at its planned start (spec.active=true, the first command of a later file); Kueue's flavors",
                  "# choose the nodes (the nodes named below are the plan's)."]
    for action, title in (("stop_now", "stop now (preemptible, real time short at step 0): requeued with the work "
                                        "since its last checkpoint lost"),
                          ("start_now", "start in this interval, on the planned nodes"),
                          ("hold_until", "planned later in the horizon: hold until the planned start"),
                          ("not_in_horizon", "no start within the horizon")):
        part = table[table["action"] == action]
        if part.empty:
            continue
        lines += ["", f"# --- {title} ({len(part)})"]
        for order, r in enumerate(part.itertuples(index=False), start=1):
            utc = "" if pd.isna(r.planned_start_utc) else f"{pd.Timestamp(r.planned_start_utc):%Y-%m-%dT%H:%MZ}"
            if action == "stop_now":
                held = "" if pd.isna(r.gpus) else f", frees {r.gpus} GPU(s)" + (f" on {r.nodes}" if r.nodes else "")
                note = f"# {r.job_id}: {r.kind}, stopped at {utc}{held}"
            else:
                note = f"# {r.job_id}: {r.kind}" + (f", {r.gpus} GPU(s) on {r.nodes} from {utc}" if utc else "")
            lines.append(note)
            if dialect == "slurm":
                lines += _slurm(r, action, tables, users, step_minutes)
            elif dialect == "kueue":
                lines += _kueue(r, action, order)
    return "\n".join(lines) + "\n"


def _slurm(r: object, action: str, tables: pd.DataFrame, users: dict[str, str], step_minutes: int) -> list[str]:
    job_id, nodes = str(r.job_id), str(r.nodes)
    if action == "stop_now":
        return [f"scontrol requeue JobId={job_id}"]
    if action == "not_in_horizon":
        return []
    if action == "hold_until":
        return [f"scontrol update JobId={job_id} StartTime={r.planned_start_local} ReqNodeList={nodes}"]
    if "," in nodes:  # a gang over several nodes: reserve them for its planned run, from now
        # StartTime=now, not the planned step's time: the plan starts at the export's time floored to the step,
        # which is in the past when the file is applied, and slurmctld refuses a reservation starting in the past
        # ("Invalid time specified", measured on Slurm 22.05 by tests/pipelines/lab/test_slurm_lab.py)
        name = f"gpuplan-{job_id}"
        user = users.get(job_id) or "root"
        return [f"scontrol create reservation ReservationName={name} StartTime=now "
                f"Duration={_duration_min(tables, job_id, step_minutes)} Nodes={nodes} Users={user}",
                f"scontrol update JobId={job_id} ReservationName={name} StartTime=now"]
    return [f"scontrol update JobId={job_id} ReqNodeList={nodes} StartTime=now"]


def _kueue(r: object, action: str, order: int) -> list[str]:
    job_id = str(r.job_id)
    ns, _, name = job_id.partition("/")
    patch = f"kubectl patch workloads.kueue.x-k8s.io -n {ns} {name} --type=merge -p"
    if action == "stop_now":  # evict now; re-activated by the later plan that restarts it
        return [f"{patch} '{{\"spec\":{{\"active\":false}}}}'   # evict (stop) now",
                f"# later, when a plan starts it again: {patch} '{{\"spec\":{{\"active\":true}}}}'"]
    if action == "start_now":
        return [f"{patch} '{{\"spec\":{{\"active\":true}}}}'   # admission order {order}"]
    if action == "hold_until":
        return [f"{patch} '{{\"spec\":{{\"active\":false}}}}'   # re-activate at "
                f"{pd.Timestamp(r.planned_start_utc):%Y-%m-%dT%H:%MZ}"]
    return []
