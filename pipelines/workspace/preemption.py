"""Which pending and running jobs of a workspace's queue are preemptible, and what a stop of one costs (issue 30).

Opt-in: without a ``[preemption]`` rule and without a job's own field nothing is preemptible. Per job record
(:data:`domain.records.JOB_RECORD`), first that applies:

1. its own ``preemptible`` annotation (``true``/``false``, also ``1``/``0``, ``yes``/``no``): a Slurm comment
   ``gpuplan.preemptible=true,checkpoint=60m,restart=5m`` (sacct ``Comment``, squeue ``comment``), a Kueue
   Workload's or pod template's label/annotation ``gpuplan.preemptible: "true"``, a CSV/parquet
   ``preemptible`` column (:mod:`pipelines.workspace.sources.tabular`);
2. ``[preemption] qos`` names the record's ``qos`` (Slurm QoS; Kueue: its WorkloadPriorityClass), or
   ``[preemption] partitions`` its ``partition`` (Slurm partition; Kueue: its LocalQueue), case-insensitive;
3. else not preemptible.

A preemptible job's checkpoint interval is its ``checkpoint`` annotation, else ``[preemption]
checkpoint_interval_min`` (none: it never checkpoints); its restart cost its ``restart`` annotation, else
``[preemption] restart_min`` (0). Durations are ``60m``, ``1h``, ``90s`` or a plain number of minutes
(:func:`parse_minutes`). A job's bad value (``gpuplan.checkpoint=soon``) makes that job not preemptible and
is one note line naming the job and the field: a user's comment typo must not stop the cluster's replan.
The problem stage turns minutes into steps (:func:`pipelines.stages.problem.problem_document`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from pipelines.workspace.config import PreemptionConfig

#: Columns :func:`queue_preemption` adds per job.
PREEMPTION_COLUMNS: tuple[str, ...] = ("preemptible", "checkpoint_interval_min", "restart_min")

_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr)?\s*$", re.IGNORECASE)
_UNIT_MIN = {"s": 1 / 60, "sec": 1 / 60, "m": 1.0, "min": 1.0, "h": 60.0, "hr": 60.0}


def parse_flag(value: Any, field: str) -> bool:
    """``true``/``false`` (``1``/``0``, ``yes``/``no``, ``on``/``off``; a bool as is) -> bool.

    Raises:
        ValueError: anything else (``"preemptible 'maybe' is not true or false"``).
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if isinstance(value, int | float) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{field} {value!r} is not true or false")


def parse_minutes(value: Any, field: str, *, positive: bool) -> float:
    """A duration in minutes: ``60m``, ``1h``, ``90s``, ``1.5h`` or a plain number (minutes).

    Args:
        value: the text or number.
        field: the name shown in the error.
        positive: True for an interval (> 0), False for a cost (>= 0).

    Raises:
        ValueError: not a duration, or out of range (``"checkpoint '-5' is not a duration (expected e.g. 60m,
            1h, 90s or minutes)"``).
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        minutes = float(value)
        if not math.isfinite(minutes):
            raise ValueError(f"{field} {value!r} is not a duration (expected e.g. 60m, 1h, 90s or minutes)")
    else:
        m = _DURATION.match(str(value))
        if not m:
            raise ValueError(f"{field} {value!r} is not a duration (expected e.g. 60m, 1h, 90s or minutes)")
        minutes = float(m.group(1)) * _UNIT_MIN[(m.group(2) or "m").lower()]
    if minutes < 0 or (positive and minutes == 0):
        raise ValueError(f"{field} {value!r} must be {'> 0' if positive else '>= 0'} minutes")
    return minutes


def job_preemption(annotations: dict[str, str], qos: Any, partition: Any,
                   cfg: PreemptionConfig) -> tuple[bool, float | None, float]:
    """``(preemptible, checkpoint_interval_min or None, restart_min)`` of one record (module docstring).

    Raises:
        ValueError: a bad ``preemptible``, ``checkpoint`` or ``restart`` annotation (names the field).
    """
    own = annotations.get("preemptible")
    if own is not None and str(own).strip() != "":
        preemptible = parse_flag(own, "gpuplan.preemptible")
    else:
        q = qos.lower() if isinstance(qos, str) else None
        p = partition.lower() if isinstance(partition, str) else None
        preemptible = (q is not None and q in {x.lower() for x in cfg.qos}) or (
            p is not None and p in {x.lower() for x in cfg.partitions})
    if not preemptible:
        return False, None, 0.0
    interval = cfg.checkpoint_interval_min
    if str(annotations.get("checkpoint", "")).strip():
        interval = parse_minutes(annotations["checkpoint"], "gpuplan.checkpoint", positive=True)
    restart = cfg.restart_min
    if str(annotations.get("restart", "")).strip():
        restart = parse_minutes(annotations["restart"], "gpuplan.restart", positive=False)
    return True, interval, float(restart)


def queue_preemption(queue: pd.DataFrame, cfg: PreemptionConfig) -> tuple[pd.DataFrame, list[str]]:
    """Per record of ``queue`` (same order): :data:`PREEMPTION_COLUMNS`, and one note per job with a bad field.

    Args:
        queue: job records (``annotations`` JSON text, ``qos``, ``partition``, ``job_id``).
        cfg: the workspace's ``[preemption]``.

    Returns:
        ``(frame, notes)``: ``preemptible`` (bool), ``checkpoint_interval_min`` (float, NaN = none),
        ``restart_min`` (float, 0 when not preemptible); a note reads ``job 123: gpuplan.checkpoint 'soon' is
        not a duration (...): planned as not preemptible``.
    """
    flags: list[bool] = []
    intervals: list[float] = []
    restarts: list[float] = []
    notes: list[str] = []
    for job_id, ann, qos, part in zip(queue["job_id"], queue["annotations"], queue["qos"], queue["partition"]):
        try:
            fields = json.loads(ann) if isinstance(ann, str) and ann else {}
        except json.JSONDecodeError:
            fields = {}
        try:
            p, ci, rs = job_preemption(fields if isinstance(fields, dict) else {}, qos, part, cfg)
        except ValueError as exc:
            notes.append(f"job {job_id}: {exc}: planned as not preemptible")
            p, ci, rs = False, None, 0.0
        flags.append(p)
        intervals.append(math.nan if ci is None else ci)
        restarts.append(rs)
    frame = pd.DataFrame({"preemptible": pd.Series(flags, dtype=bool),
                          "checkpoint_interval_min": pd.Series(intervals, dtype=float),
                          "restart_min": pd.Series(restarts, dtype=float)})
    return frame, notes
