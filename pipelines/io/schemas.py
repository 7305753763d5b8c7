"""Column schemas of the frames that pass between stages and into the run folder.

One tuple per frame; :func:`check_columns` is the one check, used by the stages on what they build
and by :mod:`pipelines.catalog` on what it reads and writes. A schema lists the columns a frame
must have (in this order when the stage builds it); extra columns are allowed (a job kind's
features travel with the queue).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pipelines.io.errors import InputError

#: Ingested hourly traffic (``traffic.parquet``): UTC hour, value in the file's units per hour,
#: ``excluded`` = imputed gap hour or flagged outlier (masked out of the profile fit).
TRAFFIC: tuple[str, ...] = ("service", "ts", "value", "excluded")

#: Forecast against actual on the last shipped day (``bands.parquet``), traffic units per hour.
BANDS: tuple[str, ...] = ("service", "ts", "actual", "p50", "p90")

#: GPU demand per service and planning step (``demand.parquet``).
DEMAND: tuple[str, ...] = ("service", "step", "ts", "traffic_p50", "traffic_p90", "demand_gpus_p50",
                           "demand_gpus_p90", "current_gpus")

#: The planning columns of every queued or running job (one kind's frame also has its features).
QUEUE: tuple[str, ...] = ("job_id", "kind", "priority", "state", "submitted_at", "started_at", "deadline_at",
                          "source")

#: The queue as written to ``queue.parquet``: the planning columns and the features as JSON text.
QUEUE_TABLE: tuple[str, ...] = (*QUEUE, "features")

#: Per-job forecasts with the queue's planning columns (``jobs.parquet``); ``size_options`` is JSON
#: text (``[{"gpus", "duration_h", "duration_p10_h", "duration_p50_h", "duration_p90_h"}]``, ``duration_h`` the
#: planned quantile; files written before the three quantiles were added have ``duration_h`` only) or None.
JOB_FORECASTS: tuple[str, ...] = (*QUEUE, "gpus_requested", "duration_p10_h", "duration_p50_h", "duration_p90_h",
                                  "gpus_pred", "flags", "size_options")

#: ``forecasts.parquet`` of DESIGN §3: job rows and service-step rows told apart by ``entity``.
FORECASTS: tuple[str, ...] = ("entity", "job_id", "kind", "duration_p10_h", "duration_p50_h", "duration_p90_h",
                              "gpus_pred", "service", "step", "ts", "traffic_p50", "traffic_p90",
                              "demand_gpus_p50", "demand_gpus_p90")

#: ``plan.parquet``: one long table, rows told apart by ``row_type`` (job, service_step, gpu_step).
PLAN_TABLES: tuple[str, ...] = ("row_type", "job_id", "kind", "start_step", "end_step", "block_offset", "gpus",
                                "running", "service", "step", "ts", "gpu", "owner", "owner_type")

#: Shipped real-trace pods (``data/traces/alibaba_openb_window.csv``): the columns the queue uses.
TRACE_PODS: tuple[str, ...] = ("name", "qos", "num_gpu", "creation_s")


def check_columns(frame: pd.DataFrame, columns: Sequence[str], what: str) -> pd.DataFrame:
    """Return ``frame`` unchanged when it has every column of ``columns``.

    Raises:
        pipelines.io.errors.InputError: a column is missing; the message names ``what`` (a file or
            a frame) and the missing columns.
    """
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{what}: missing column(s) {', '.join(repr(c) for c in missing)}")
    return frame
