"""Canonical job and traffic records: the columns every source adapter writes and the forecasters read.

The table of columns and their meaning is in :mod:`pipelines.workspace.sources.records` (the adapters' module).
"""

from __future__ import annotations

#: Columns of a job record, in this order (module docstring).
JOB_RECORD: tuple[str, ...] = (
    "source", "job_id", "submitted_at", "eligible_at", "started_at", "ended_at", "state", "censored",
    "elapsed_s", "time_limit_s", "gpus", "gpu_type", "nodes", "user", "account", "partition", "qos",
    "priority", "job_name", "kind", "annotations", "deadline_at",
)
#: The store's key of a job record: the same job seen again (pending, then finished) is updated.
JOB_KEY: tuple[str, ...] = ("source", "job_id", "submitted_at")

#: Columns of a traffic record.
TRAFFIC_RECORD: tuple[str, ...] = ("service", "ts", "value")
#: The store's key of a traffic record.
TRAFFIC_KEY: tuple[str, ...] = ("service", "ts")

#: Canonical job states.
STATES: tuple[str, ...] = ("pending", "running", "completed", "failed", "timeout", "cancelled", "preempted",
                           "node_fail", "out_of_memory", "unknown")
#: States of a job still in the queue (planned by gpuplan).
ACTIVE_STATES: tuple[str, ...] = ("pending", "running")
#: Ended states whose run time is the job's own (a completion or a failure inside the job; TIMEOUT
#: ran exactly to its limit). Runs that ended in another state after starting are censored.
UNCENSORED_END_STATES: tuple[str, ...] = ("completed", "failed", "timeout", "out_of_memory")



def is_censored(state: str, started: bool) -> bool:
    """True when a run's elapsed time is only a lower bound of its runtime.

    A job that started and ended in a state outside :data:`UNCENSORED_END_STATES` and
    :data:`ACTIVE_STATES` (cancelled after start, preempted, node failure) is censored; a running
    job is not (it has not ended).
    """
    return bool(started) and state not in UNCENSORED_END_STATES and state not in ACTIVE_STATES
