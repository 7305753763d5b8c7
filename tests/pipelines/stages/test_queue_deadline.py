"""A queued record's ``deadline_at`` reaches the job forecasts (it was NaT for every job)."""
from datetime import UTC, datetime

import pandas as pd

from pipelines.stages.queue.store import queue_forecasts

T0 = datetime(2025, 3, 16, 16, tzinfo=UTC)


def _queue(deadlines):
    n = len(deadlines)
    q = pd.DataFrame({"job_id": [f"j{i}" for i in range(n)], "state": ["pending"] * n, "gpus": [2] * n,
                      "submitted_at": [pd.Timestamp(T0)] * n, "started_at": [pd.NaT] * n,
                      "source": ["squeue"] * n, "nodes": [None] * n})
    if deadlines is not None:
        q["deadline_at"] = pd.to_datetime(pd.Series(deadlines, dtype="object"), utc=True)
    return q


def _pred(n):
    return pd.DataFrame({"duration_p10_h": [0.5] * n, "duration_p50_h": [1.0] * n, "duration_p90_h": [2.0] * n,
                         "flags": [""] * n})


def test_deadline_at_is_carried_per_record():
    q = _queue(["2025-03-16T18:30:00+00:00", None])
    f, _ = queue_forecasts(_pred(2), q, ["training"] * 2, [1.0] * 2, 10, T0)
    assert f["deadline_at"].iloc[0] == pd.Timestamp("2025-03-16 18:30", tz="UTC")
    assert pd.isna(f["deadline_at"].iloc[1])


def test_no_deadline_column_gives_nat():
    q = _queue(["2025-03-16T18:30:00+00:00"]).drop(columns="deadline_at")
    f, _ = queue_forecasts(_pred(1), q, ["training"], [1.0], 10, T0)
    assert pd.isna(f["deadline_at"].iloc[0])
