"""Problem stage: job forecasts and service demand -> one validated :class:`optimizer.problem.Problem`.

The problem is built and validated here, once (:func:`build_problem`), and passed on as a ``Problem``
to the solve, the verifier and the outputs; ``problem.json`` is its file form (``Problem.to_dict``).

- Durations: the P50 forecast (:data:`pipelines.stages.models.DURATION_QUANTILE`) rounded up to whole
  steps, at least one (:func:`domain.units.hours_to_steps`); GPUs ``max(gpus_requested, gpus_pred)``.
- Elastic sizes: the requested size first, then each larger forecast size with efficiency = GPU-hours
  at the request ÷ GPU-hours at that size (≤ 1, 4 decimals).
- Deadlines: whole steps from the plan start, rounded up, at least 1.
- Preemption (issue 30, opt-in; the optional columns ``preemptible``, ``checkpoint_interval_min``,
  ``restart_min`` of :func:`pipelines.stages.queue.store.forecast_cluster_queue`): a preemptible job gets
  ``preemptible``, ``checkpoint_interval_steps`` (minutes / step, rounded up, at least 1) and ``restart_steps``
  (rounded up); a running one also ``steps_since_checkpoint`` = (its elapsed minutes at the plan start modulo
  the interval; all of them without an interval) / step, rounded up, and at most ``checkpoint_interval_steps +
  restart_steps - 1`` (the problem's rule: rounded up, 40 minutes of a 45-minute interval would reach the
  interval's 2 steps). That assumes a checkpoint every interval since the run's start: gpuplan does not see the
  job's real checkpoints.
- Running jobs: aligned blocks, first fit, largest first, on the node the scheduler reports when
  the jobs frame has a ``node_hint`` (node index) and a block is free there
  (:func:`assign_running_blocks`); remaining steps from the P50 duration minus the time already run.
- A typed cluster (:attr:`optimizer.problem.Cluster.typed`, the workspace's typed ``[cluster] nodes`` or
  node inventory): the problem is version 2 (``cluster.nodes`` with types, domains, down GPUs); a queued
  job's ``gpu_types`` column (``|``-joined) becomes its ``gpu_types``, its ``durations_by_type`` column
  (JSON ``{type: hours}``, :func:`pipelines.stages.queue.store.typed_durations`) its ``durations_by_type``
  in steps (rounded up; only types it may run on); running jobs are placed on nodes of
  their type (:func:`assign_running_typed`; ``node_hint`` indexes ``node_names``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from domain.units import Horizon, hours_to_steps
from optimizer.problem import Cluster, Problem
from pipelines.io import schemas
from pipelines.io.errors import InputError
from pipelines.stages.models import DURATION_QUANTILE
from pipelines.stages.realtime import DEMAND_QUANTILE
from pipelines.workspace.config import ServiceSettings


def assign_running_blocks(gpus: list[int], n_gpus: int, preferred_node: Sequence[int | None] | None = None,
                          gpus_per_node: int = 8) -> list[int]:
    """First-fit aligned offsets for running jobs, largest first (buddy layout).

    A job with a ``preferred_node`` (index of the node the scheduler reports it on) is placed on
    that node's GPUs when an aligned block is free there, else first fit anywhere.

    Raises:
        pipelines.io.errors.InputError: the running jobs do not fit the cluster.
    """
    used = np.zeros(n_gpus, dtype=bool)
    offsets = [0] * len(gpus)
    prefs = list(preferred_node) if preferred_node is not None else [None] * len(gpus)
    for i in sorted(range(len(gpus)), key=lambda k: (-gpus[k], prefs[k] is None)):
        g = gpus[i]
        p = prefs[i]
        first = list(range(p * gpus_per_node, min(n_gpus, (p + 1) * gpus_per_node) - g + 1, g)) if (
            p is not None and g <= gpus_per_node) else []
        for o in first + list(range(0, n_gpus - g + 1, g)):
            if not used[o:o + g].any():
                used[o:o + g] = True
                offsets[i] = o
                break
        else:
            raise InputError(f"running jobs do not fit {n_gpus} GPUs (no aligned block of {g})")
    return offsets


def assign_running_typed(gpus: list[int], cluster: Cluster, types: Sequence[str | None],
                         preferred: Sequence[str | None]) -> list[int]:
    """First-fit aligned offsets for running jobs on a typed cluster (layout of :class:`optimizer.problem.Cluster`).

    Largest first; a job with a ``preferred`` node name is placed on that node when an aligned block of it
    is free, else on the first free aligned block of its type (``types``; None = any), never on a down or
    padding GPU.

    Raises:
        pipelines.io.errors.InputError: a running job does not fit a node of its type.
    """
    n = cluster.n_gpus
    used = np.zeros(n, dtype=bool)
    used[list(cluster.layout_down)] = True
    gpu_type = np.array([""] * n, dtype=object)
    where: dict[str, tuple[int, int]] = {}
    for o, node in zip(cluster.node_offsets, cluster.nodes, strict=True):
        gpu_type[o:o + node.gpus] = node.gpu_type
        where[node.name] = (o, node.gpus)
    offsets = [0] * len(gpus)
    for i in sorted(range(len(gpus)), key=lambda k: (-gpus[k], preferred[k] is None)):
        g, want, node = gpus[i], types[i], preferred[i]
        first: list[int] = []
        if node in where and g <= where[node][1]:
            o0, size = where[node]
            first = list(range(o0, o0 + size - g + 1, g))
        for o in first + list(range(0, n - g + 1, g)):
            block = slice(o, o + g)
            if not used[block].any() and (want is None or all(t == want for t in gpu_type[block])):
                used[block] = True
                offsets[i] = o
                break
        else:
            raise InputError(f"running jobs do not fit the typed cluster (no free aligned block of {g} "
                             f"{want or 'any type'} GPUs)")
    return offsets


def problem_document(cluster: Cluster, services: Sequence[ServiceSettings], jobs: pd.DataFrame,
                     demand: pd.DataFrame, start: datetime, *, time_limit_s: float,
                     node_names: Sequence[str] = ()) -> dict[str, Any]:
    """The problem-file document (DESIGN §3.1) from job forecasts and service demand (module docstring).

    Args:
        cluster: the planned cluster and clock (:class:`optimizer.problem.Cluster`, the one cluster shape).
        services: the service settings (GPU bounds, swap cap).
        jobs: :data:`pipelines.io.schemas.JOB_FORECASTS` rows (``size_options`` optional; on a typed
            cluster ``gpu_types``, the eligible types ``|``-joined, optional).
        demand: :data:`pipelines.io.schemas.DEMAND` rows.
        start: the plan start (step 0).
        time_limit_s: HiGHS time limit per plan (s).
        node_names: the workspace's node names, the order ``node_hint`` indexes (typed clusters).

    Raises:
        pipelines.io.errors.InputError: the running jobs do not fit the cluster.
    """
    step_h = Horizon(pd.Timestamp(start), cluster.step_minutes, cluster.horizon_steps).step_h
    now = pd.Timestamp(start)
    by_name = {s.service: s for s in services}
    out_services = []
    for name, d in demand.groupby("service", sort=False):
        d = d.sort_values("step")
        svc = by_name[str(name)]
        out_services.append({"service": str(name),
                             "demand_gpus": [int(x) for x in d[f"demand_gpus_{DEMAND_QUANTILE}"]],
                             "min_gpus": svc.min_gpus, "max_gpus": svc.max_gpus, "swap_cap_gpus": svc.swap_cap_gpus,
                             "current_gpus": int(d["current_gpus"].iloc[0])})
    queued = jobs[jobs["state"] == "queued"].sort_values(["submitted_at", "job_id"], kind="stable")
    out_jobs = []
    for r in queued.itertuples(index=False):
        gpus = int(max(r.gpus_requested, r.gpus_pred))
        steps = hours_to_steps(float(getattr(r, f"duration_{DURATION_QUANTILE}_h")), cluster.step_minutes)
        job: dict[str, Any] = {"job_id": r.job_id, "kind": r.kind, "priority": float(r.priority), "release_step": 0}
        options = json.loads(r.size_options) if isinstance(getattr(r, "size_options", None), str) else []
        sizes = []
        if options:
            # first option = the requested size; efficiency = GPU-hours at the request / at this size
            sizes = [{"gpus": gpus, "duration_steps": steps, "efficiency": 1.0}]
            for o in options:
                o_steps = hours_to_steps(float(o["duration_h"]), cluster.step_minutes)
                if gpus < int(o["gpus"]) <= cluster.n_gpus:
                    eff = min(1.0, (gpus * steps) / (int(o["gpus"]) * o_steps))
                    sizes.append({"gpus": int(o["gpus"]), "duration_steps": o_steps, "efficiency": round(eff, 4)})
        if len(sizes) > 1:
            job["sizes"] = sizes
        else:
            job.update({"gpus": gpus, "duration_steps": steps})
        job.update(_preemption_fields(r, cluster.step_minutes))
        if pd.notna(r.deadline_at) and pd.Timestamp(r.deadline_at) > now:  # a passed one: no deadline_step
            job["deadline_step"] = max(1, int(math.ceil((pd.Timestamp(r.deadline_at) - now) / pd.Timedelta(hours=step_h))))
        if cluster.typed and isinstance(getattr(r, "gpu_types", None), str) and r.gpu_types:
            job["gpu_types"] = r.gpu_types.split("|")
        by_type = getattr(r, "durations_by_type", None)
        if cluster.typed and isinstance(by_type, str) and by_type:
            allowed = set(job.get("gpu_types") or cluster.gpu_types)
            job["durations_by_type"] = {t: hours_to_steps(float(h), cluster.step_minutes)
                                        for t, h in json.loads(by_type).items() if t in allowed}
        out_jobs.append(job)
    running = jobs[jobs["state"] == "running"].sort_values("job_id")
    gpus_run = [int(max(a, b)) for a, b in zip(running["gpus_requested"], running["gpus_pred"])]
    hints = ([None if pd.isna(h) else int(h) for h in running["node_hint"]] if "node_hint" in running.columns
             else None)
    if cluster.typed:
        run_types = [t if isinstance(t, str) and t else None for t in running.get("gpu_types", [None] * len(running))]
        names = [None if h is None or h >= len(node_names) else node_names[h] for h in (hints or [None] * len(running))]
        offsets = assign_running_typed(gpus_run, cluster, run_types, names)
    else:
        offsets = assign_running_blocks(gpus_run, cluster.n_gpus, hints, cluster.gpus_per_node)
    out_running = []
    for r, g, o in zip(running.itertuples(index=False), gpus_run, offsets):
        elapsed_h = (now - pd.Timestamp(r.started_at)) / pd.Timedelta(hours=1)
        remaining_h = float(getattr(r, f"duration_{DURATION_QUANTILE}_h")) - elapsed_h
        run: dict[str, Any] = {"job_id": r.job_id, "kind": r.kind, "priority": float(r.priority), "gpus": g,
                               "block_offset": int(o), "remaining_steps": max(1, int(math.ceil(remaining_h / step_h)))}
        fields = _preemption_fields(r, cluster.step_minutes)
        if fields:
            since_min = max(0.0, elapsed_h * 60.0) if pd.notna(elapsed_h) else 0.0
            interval = getattr(r, "checkpoint_interval_min", math.nan)
            if pd.notna(interval):  # assumes a checkpoint every interval since the run's start
                since_min = math.fmod(since_min, float(interval))
            since = _minutes_to_steps(since_min, cluster.step_minutes)
            if "checkpoint_interval_steps" in fields:  # rounded up, it could reach the interval: the problem's
                # rule is since < interval + restart (optimizer.problem.types._check_preemption), so cap it there
                since = min(since, fields["checkpoint_interval_steps"] + fields.get("restart_steps", 0) - 1)
            if since:
                fields["steps_since_checkpoint"] = since
        run.update(fields)
        out_running.append(run)
    if cluster.typed:  # problem-file version 2 (DESIGN §5 "Typed clusters"): the nodes with their types
        shape: dict[str, Any] = {"nodes": [{"name": nd.name, "gpus": nd.gpus, "gpu_type": nd.gpu_type,
                                            "domain": nd.domain, "down": list(nd.down)} for nd in cluster.nodes],
                                 "step_minutes": cluster.step_minutes, "horizon_steps": cluster.horizon_steps}
        if cluster.gpu_speed:
            shape["gpu_speed"] = dict(cluster.gpu_speed)
        version: dict[str, Any] = {"version": 2}
    else:
        shape = {"n_gpus": cluster.n_gpus, "gpus_per_node": cluster.gpus_per_node,
                 "step_minutes": cluster.step_minutes, "horizon_steps": cluster.horizon_steps}
        version = {}
    return {
        **version,
        "cluster": shape,
        "settings": {"time_limit_s": time_limit_s},
        "services": out_services,
        "jobs": out_jobs,
        "running": out_running,
    }


def _minutes_to_steps(minutes: float, step_minutes: int) -> int:
    """Whole steps covering ``minutes``, rounded up (``0`` -> 0); float noise below 1e-6 step ignored."""
    return int(math.ceil(round(float(minutes) / step_minutes, 6))) if minutes > 0 else 0


def _preemption_fields(r: Any, step_minutes: int) -> dict[str, Any]:
    """A preemptible job's problem-file fields (DESIGN §3.1) from its ``checkpoint_interval_min`` / ``restart_min``.

    ``{}`` for a job that is not preemptible (or a frame without the columns), so a workspace without
    preemption writes the problem it wrote before. The interval rounds up to whole steps, at least 1 (a
    stop never loses less than the job's real work since its checkpoint); the restart cost rounds up too.
    """
    flag = getattr(r, "preemptible", False)
    if not (isinstance(flag, bool | np.bool_) and bool(flag)):
        return {}
    out: dict[str, Any] = {"preemptible": True}
    interval = getattr(r, "checkpoint_interval_min", math.nan)
    if pd.notna(interval):
        out["checkpoint_interval_steps"] = max(1, _minutes_to_steps(float(interval), step_minutes))
    restart = getattr(r, "restart_min", 0.0)
    steps = _minutes_to_steps(float(restart), step_minutes) if pd.notna(restart) else 0
    if steps:
        out["restart_steps"] = steps
    return out


def passed_deadlines(jobs: pd.DataFrame, now: datetime) -> list[str]:
    """One line per queued job whose ``deadline_at`` is at or before ``now``: "JOB's deadline HH:MMZ has passed".

    Such a job stays in the problem without a ``deadline_step`` (:func:`problem_document`).
    """
    t0 = pd.Timestamp(now)
    t0 = t0.tz_localize("UTC") if t0.tzinfo is None else t0.tz_convert("UTC")
    q = jobs[(jobs["state"] == "queued") & jobs["deadline_at"].notna()]
    return [f"{r.job_id}'s deadline {pd.Timestamp(r.deadline_at).tz_convert('UTC'):%H:%M}Z has passed"
            for r in q.sort_values("job_id").itertuples(index=False) if pd.Timestamp(r.deadline_at) <= t0]


def build_problem(cluster: Cluster, services: Sequence[ServiceSettings], jobs: pd.DataFrame,
                  demand: pd.DataFrame, start: datetime, *, time_limit_s: float,
                  node_names: Sequence[str] = ()) -> Problem:
    """The validated :class:`optimizer.problem.Problem` of :func:`problem_document`.

    Raises:
        InputError: the running jobs do not fit, or the document is not a valid problem (named by
            :meth:`optimizer.problem.Problem.from_dict`).
    """
    schemas.check_columns(jobs, schemas.JOB_FORECASTS, "job forecasts")
    schemas.check_columns(demand, schemas.DEMAND, "demand")
    return Problem.from_dict(problem_document(cluster, services, jobs, demand, start, time_limit_s=time_limit_s,
                                              node_names=node_names))
