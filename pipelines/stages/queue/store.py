"""The store side's queue (an operator's exports): the queue's kinds and priorities, job forecasts, input freshness.

- :func:`queue_kinds`: the job kind of each queued record: its own (``gpuplan.kind`` in the comment or
  annotations), else ``[kinds] qos``, else ``[kinds] partition``, else :data:`domain.kinds.QOS_KIND`
  for the QoS classes it knows (case-insensitive), else ``[kinds] default``.
- :func:`queue_priorities`: the planner's priority weight: ``[priorities] qos`` (case-insensitive),
  else :data:`domain.kinds.QOS_PRIORITY` for the QoS classes it knows, else ``[priorities] default``.
- preemption (issue 30, :mod:`pipelines.workspace.preemption`): :func:`forecast_cluster_queue` adds
  ``preemptible``, ``checkpoint_interval_min``, ``restart_min`` per job when any job is preemptible; a job's bad
  field is a line of ``notes["preemption_errors"]``.
- :func:`queue_forecasts`: the scheduler-history forecaster's quantiles per pending/running job as
  :data:`pipelines.io.schemas.JOB_FORECASTS` rows (GPUs: the request rounded up to a power of two, the
  planner's contiguous blocks; jobs without GPUs are dropped and counted).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from domain.kinds import QOS_KIND, QOS_PRIORITY
from domain.units import pow2_ceil_array
from pipelines.io import schemas
from pipelines.io.errors import InputError
from pipelines.workspace.load import Workspace
from pipelines.workspace.preemption import PREEMPTION_COLUMNS, queue_preemption


def queue_kinds(queue: pd.DataFrame, qos: Mapping[str, str], partition: Mapping[str, str], default: str) -> list[str]:
    """The job kind of each record of ``queue`` (module docstring)."""
    qos_l = {k.lower(): v for k, v in qos.items()}
    known = {k.lower(): v for k, v in QOS_KIND.items()}
    part_l = {k.lower(): v for k, v in partition.items()}
    kinds = []
    for own, q, p in zip(queue["kind"], queue["qos"], queue["partition"]):
        if isinstance(own, str) and own:
            kinds.append(own)
        elif isinstance(q, str) and q.lower() in qos_l:
            kinds.append(qos_l[q.lower()])
        elif isinstance(p, str) and p.lower() in part_l:
            kinds.append(part_l[p.lower()])
        elif isinstance(q, str) and q.lower() in known:
            kinds.append(known[q.lower()])
        else:
            kinds.append(default)
    return kinds


def queue_priorities(queue: pd.DataFrame, qos: Mapping[str, float], default: float) -> list[float]:
    """The planner's priority weight of each record of ``queue`` (module docstring)."""
    ours = {k.lower(): float(v) for k, v in qos.items()}
    known = {k.lower(): float(v) for k, v in QOS_PRIORITY.items()}
    out = []
    for q in queue["qos"]:
        key = q.lower() if isinstance(q, str) else ""
        out.append(ours.get(key, known.get(key, float(default))))
    return out


def node_hints(nodes: pd.Series, node_names: Sequence[str]) -> list[int | None]:
    """Index in ``node_names`` of each record's node; None when absent or not a configured node.

    The node list's first name counts (Slurm ranges ``gpu-[01-04]`` give ``gpu-01``).
    """
    index = {n: i for i, n in enumerate(node_names)}
    out: list[int | None] = []
    for v in nodes:
        if not isinstance(v, str) or not v:
            out.append(None)
            continue
        first = v.split(",")[0]
        m = re.match(r"^(.*)\[(\d+)", first)
        name = m.group(1) + m.group(2) if m else first
        out.append(index.get(name))
    return out


def queue_forecasts(predictions: pd.DataFrame, queue: pd.DataFrame, kinds: Sequence[str], priorities: Sequence[float],
                    step_minutes: int, start: datetime,
                    node_names: Sequence[str] = ()) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Job forecasts (:data:`pipelines.io.schemas.JOB_FORECASTS`) of the pending and running records of ``queue``.

    Args:
        predictions: per record of ``queue`` (same order): ``duration_p10_h``, ``duration_p50_h``,
            ``duration_p90_h`` (a running job's *remaining* time) and ``flags`` (text).
        queue: job records (:data:`domain.records.JOB_RECORD`), states pending/running.
        kinds: per record (:func:`queue_kinds`).
        priorities: per record (:func:`queue_priorities`).
        step_minutes: the planning step; every duration is at least one step.
        start: the plan start; a running job's durations are its elapsed time at ``start`` plus the
            forecast remaining time (the problem stage subtracts the elapsed time again).
        node_names: the cluster's nodes; a running job on one of them gets its index as
            ``node_hint`` (the problem stage places it there).

    Returns:
        ``(forecasts, notes)``: ``notes`` counts ``dropped_no_gpus`` and ``rounded_up_gpus`` (requests
        that were not a power of two).
    """
    q = queue.reset_index(drop=True)
    has_gpus = q["gpus"].to_numpy(int) > 0
    gpus = pow2_ceil_array(np.maximum(q["gpus"].to_numpy(int), 1))
    step_h = step_minutes / 60.0
    running = (q["state"] == "running").to_numpy()
    now_started = pd.to_datetime(q["started_at"], utc=True)
    out = pd.DataFrame({
        "job_id": q["job_id"].astype(str), "kind": list(kinds), "priority": np.asarray(priorities, float),
        "state": np.where(running, "running", "queued"), "submitted_at": pd.to_datetime(q["submitted_at"], utc=True),
        "started_at": now_started.where(running), "deadline_at": pd.NaT, "source": q["source"].astype(str),
        "gpus_requested": gpus,
    })
    # a record's deadline, where its source gave one (an optional ``deadline_at`` column); NaT otherwise
    # (nanoseconds, as before the store carried it: the run folder's jobs/queue parquet files keep their type)
    out["deadline_at"] = (pd.to_datetime(q["deadline_at"], utc=True) if "deadline_at" in q.columns
                          else pd.to_datetime(out["deadline_at"], utc=True)).astype("datetime64[ns, UTC]")
    elapsed_h = ((pd.Timestamp(start) - now_started) / pd.Timedelta(hours=1)).fillna(0.0).clip(lower=0.0).to_numpy()
    for col in ("duration_p10_h", "duration_p50_h", "duration_p90_h"):
        out[col] = np.maximum(predictions[col].to_numpy(float), step_h) + np.where(running, elapsed_h, 0.0)
    out["gpus_pred"] = gpus
    out["flags"] = predictions["flags"].astype(str).to_numpy() if "flags" in predictions else ""
    out["size_options"] = None
    out["node_hint"] = pd.array(node_hints(q["nodes"], node_names), dtype="Int64")
    notes = {"dropped_no_gpus": int((~has_gpus).sum()),
             "rounded_up_gpus": int((has_gpus & (gpus != q["gpus"].to_numpy(int))).sum())}
    return schemas.check_columns(out[has_gpus].reset_index(drop=True), schemas.JOB_FORECASTS, "job forecasts"), notes


#: Record fields kept as a queued job's features in ``queue.parquet``.
FEATURE_FIELDS: tuple[str, ...] = ("user", "account", "partition", "qos", "gpus", "gpu_type", "time_limit_s",
                                   "job_name", "nodes", "elapsed_s", "annotations")


def queue_table(forecasts: pd.DataFrame, queue: pd.DataFrame) -> pd.DataFrame:
    """The planned queue as :data:`pipelines.io.schemas.QUEUE_TABLE`: planning columns and the record's fields as JSON text."""
    q = queue.assign(job_id=queue["job_id"].astype(str)).drop_duplicates("job_id", keep="last")
    fields = q.set_index("job_id")[list(FEATURE_FIELDS)]
    feats = [json.dumps({k: (None if pd.isna(v) else (v if isinstance(v, str) else float(v)))
                         for k, v in fields.loc[j].items()}, sort_keys=True) if j in fields.index else "{}"
             for j in forecasts["job_id"]]
    out = forecasts[list(schemas.QUEUE)].copy()
    out["features"] = feats
    return schemas.check_columns(out, schemas.QUEUE_TABLE, "queue")


def forecast_cluster_queue(history: pd.DataFrame, queue: pd.DataFrame, ws: Workspace, start: datetime,
                           step_minutes: int, seed: int = 0, model: Any = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The workspace's queue with forecasts: ``model`` (the champion), else the forecaster fitted on ``history`` now.

    A champion's recent-runs features read ``history`` (runs that ended since its fit included;
    :func:`forecasters.scheduler.refresh_recent`, no refit). It predicts each pending job's run time and each running job's remaining time at ``start``
    (:func:`forecasters.scheduler.predict_runtime`); kinds, priorities and rows as
    :func:`queue_forecasts`. Returns ``(forecasts, notes)`` (notes: counts and the fit report's
    target and censored counts).

    Raises:
        forecasters.errors.InputError: a history without one finished run to learn from.
    """
    from forecasters.scheduler import fit_scheduler_model, predict_runtime, refresh_recent

    cluster = ws.cluster
    queue, outside = on_this_cluster(queue, cluster.node_names, cluster.partitions)
    if model is None:
        model = fit_scheduler_model(history, timezone=cluster.timezone, seed=seed)
    elif not history.empty:
        model = refresh_recent(model, history)
    pred = predict_runtime(model, queue, now=start)
    running = (queue["state"] == "running").to_numpy()
    for q in ("p10", "p50", "p90"):  # a running job: its remaining time (queue_forecasts adds the elapsed back)
        pred[f"duration_{q}_h"] = pred[f"duration_{q}_h"].where(~running, pred[f"remaining_{q}_h"])
    k = ws.config.kinds
    kinds = queue_kinds(queue, k.qos, k.partition, k.default)
    prios = queue_priorities(queue, ws.config.priorities.qos, ws.config.priorities.default)
    jobs, notes = queue_forecasts(pred, queue, kinds, prios, step_minutes, start, cluster.node_names)
    preempt, bad = queue_preemption(queue[queue["gpus"].to_numpy(int) > 0].reset_index(drop=True), ws.config.preemption)
    if bad:
        notes["preemption_errors"] = bad
    if preempt["preemptible"].any():  # the columns only then: a workspace without preemption plans as before
        for col in PREEMPTION_COLUMNS:
            jobs[col] = preempt[col].to_numpy()
        notes["preemptible_jobs"] = int(preempt["preemptible"].sum())
    if cluster.typed:
        jobs["gpu_types"] = typed_eligibility(queue, ws)
        jobs["durations_by_type"] = typed_durations(model, queue, jobs["gpu_types"].tolist(), cluster.gpu_types,
                                                    start, step_minutes)
        notes["jobs_with_durations_by_type"] = int(jobs["durations_by_type"].notna().sum())
        never = jobs["gpu_types"] == ""  # asked only for types no node of this cluster has
        notes["typed_jobs"] = int(jobs["gpu_types"].notna().sum())
        notes["dropped_no_eligible_type"] = sorted(jobs.loc[never, "job_id"].astype(str))
        jobs = jobs[~never].reset_index(drop=True)
    notes.update(history_records=len(history), queue_records=len(queue), **outside)
    return jobs, notes


def typed_durations(model: Any, queue: pd.DataFrame, eligible: Sequence[str | None], cluster_types: Sequence[str],
                    start: datetime, step_minutes: int) -> list[str | None]:
    """Per job of :func:`queue_forecasts`' rows: its planning duration (hours) on each type it may run on, as JSON text.

    A pending job's eligible types (``eligible``: :func:`typed_eligibility`'s ``|``-joined types, None =
    every type of ``cluster_types``) priced by :func:`forecasters.scheduler.predict_runtime_by_type`
    at the planning quantile (:data:`pipelines.stages.models.DURATION_QUANTILE`), at least one step;
    a type it prices ``unpriced`` (no ratio known) is left out (the planner's default duration then
    applies, :meth:`optimizer.problem.Job.duration_on`). None for a running job (it runs on one
    type), a job with no priced type, and on a one-type cluster.

    Raises what :func:`forecasters.scheduler.predict_runtime_by_type` raises.
    """
    from forecasters.scheduler import predict_runtime_by_type
    from pipelines.stages.models import DURATION_QUANTILE

    q = queue.reset_index(drop=True)
    q = q[q["gpus"].to_numpy(int) > 0].reset_index(drop=True)
    out: list[str | None] = [None] * len(q)
    if len(set(cluster_types)) < 2:
        return out
    rows = [i for i in range(len(q)) if q["state"].iloc[i] != "running" and eligible[i] != ""]
    types = [str(eligible[i]).split("|") if isinstance(eligible[i], str) else list(cluster_types) for i in rows]
    if not rows:
        return out
    priced = predict_runtime_by_type(model, q.iloc[rows].reset_index(drop=True), types, now=start)
    step_h = step_minutes / 60.0
    at = 0
    for i, ts in zip(rows, types):
        part = priced.iloc[at:at + len(ts)]
        at += len(ts)
        by = {str(t): max(float(h), step_h) for t, h, src in
              zip(part["gpu_type"], part[f"duration_{DURATION_QUANTILE}_h"], part["source"]) if src != "unpriced"}
        out[i] = json.dumps(by, sort_keys=True) if by else None
    return out


def typed_eligibility(queue: pd.DataFrame, ws: Workspace) -> list[str | None]:
    """Per job of :func:`queue_forecasts`' rows (the queue's GPU jobs, in order): its eligible planned types, ``|``-joined.

    A pending job: the types it asked for (:func:`pipelines.workspace.gpu_types.eligible_types`); a running
    job: the type it runs on (its node's type, else its record's ``gpu_type`` matched); None = any type;
    ``""`` = it asked only for types no node of the cluster has (never planned here).

    Raises:
        pipelines.io.errors.InputError: a type that matches no known one (one line naming the job).
    """
    from pipelines.workspace.gpu_types import GpuTypeTable, eligible_types

    cluster = ws.cluster
    table = GpuTypeTable(ws.config.gpu_types)
    known = [str(s.gpu_type) for s in cluster.node_specs.values()]
    q = queue.reset_index(drop=True)
    q = q[q["gpus"].to_numpy(int) > 0].reset_index(drop=True)
    asked = eligible_types(q, table, known)
    node_type = {n: str(s.gpu_type) for n, s in cluster.node_specs.items()}
    hints = node_hints(q["nodes"], cluster.node_names)
    out: list[str | None] = []
    for i, types in enumerate(asked):
        if q["state"].iloc[i] == "running":
            ran = table.resolve(q["gpu_type"].iloc[i]) if isinstance(q["gpu_type"].iloc[i], str) else None
            hint = hints[i]
            if hint is not None:
                ran = node_type[cluster.node_names[hint]]
            out.append(ran if ran in known else None)
            continue
        out.append(None if types is None else "|".join(t for t in types if t in known))
    return out


def on_this_cluster(queue: pd.DataFrame, node_names: Sequence[str],
                    partitions: Sequence[str] | None) -> tuple[pd.DataFrame, dict[str, int]]:
    """The queue records this cluster plans, and the counts of those it does not.

    Dropped: jobs of a partition not in ``partitions`` (when given), and running jobs whose node
    list names no node of ``node_names`` (they hold GPUs elsewhere).
    """
    q = queue.reset_index(drop=True)
    other_part = np.zeros(len(q), dtype=bool)
    if partitions:
        wanted = {p.lower() for p in partitions}
        other_part = ~q["partition"].map(lambda p: isinstance(p, str) and p.lower() in wanted).to_numpy(bool)
    hints = node_hints(q["nodes"], node_names)
    has_nodes = q["nodes"].map(lambda v: isinstance(v, str) and bool(v)).to_numpy(bool)
    elsewhere = (q["state"] == "running").to_numpy() & has_nodes & np.array([h is None for h in hints])
    keep = ~other_part & ~elsewhere
    return q[keep].reset_index(drop=True), {"dropped_other_partition": int(other_part.sum()),
                                            "dropped_running_elsewhere": int((elsewhere & ~other_part).sum())}


class StaleInputError(InputError):
    """The newest queue export or the traffic is older than ``[replan] max_input_age_min``."""


def _age_text(delta: pd.Timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    d, rem = divmod(minutes, 1440)
    h, m = divmod(rem, 60)
    return " ".join(p for p in (f"{d} d" if d else "", f"{h} h" if h else "", f"{m} min") if p)


def check_fresh(snapshot_at: pd.Timestamp | None, snapshot_file: str, traffic_end: pd.Timestamp,
                now: datetime, max_age_min: float) -> None:
    """Refuse a re-plan whose newest queue export or traffic is older than ``max_age_min`` at ``now``.

    Raises:
        StaleInputError: one line naming the input, its age and time, the limit, and that the previous
            plan stays published.
    """
    now_ts = pd.Timestamp(now).tz_convert("UTC")
    limit = pd.Timedelta(minutes=max_age_min)
    if snapshot_at is None:
        raise StaleInputError("no queue export has been ingested: run 'gpuplan ingest' first; the previous plan stays")
    for what, at in ((f"queue export {snapshot_file or '(unnamed)'}", pd.Timestamp(snapshot_at)),
                     ("traffic (newest sample)", pd.Timestamp(traffic_end))):
        age = now_ts - at.tz_convert("UTC")
        if age > limit:
            raise StaleInputError(
                f"{what} is {_age_text(age)} old (taken {at.tz_convert('UTC'):%Y-%m-%dT%H:%M:%SZ}, now "
                f"{now_ts:%Y-%m-%dT%H:%M:%SZ}; [replan] max_input_age_min = {max_age_min:g}): export and ingest a "
                f"fresh one; the previous plan stays published")
