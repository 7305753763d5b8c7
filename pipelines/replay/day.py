"""One replay day's exports: the time T of day d and the text every export prints at T.

:func:`day_exports` is what ``gpuplan replay`` writes into a workspace each day and what
``scripts/make_fixtures.py`` commits (:mod:`pipelines.replay.slurm_exports`, :mod:`pipelines.replay.kueue_exports`,
:mod:`pipelines.replay.prometheus_exports`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from pipelines.io.errors import InputError
from pipelines.replay.jobs import DAY_S, REPLAY_END, replay_jobs, to_epoch_s
from pipelines.replay.kueue_exports import kueue_list_text
from pipelines.replay.prometheus_exports import prometheus_text
from pipelines.replay.slurm_exports import sacct_text, squeue_json_text


def export_time(day: int, n_days: int, end: Any = REPLAY_END) -> pd.Timestamp:
    """T of replay day ``day`` (0-based) of ``n_days``: ``end - (n_days - 1 - day)`` days, so the last day's T is ``end``.

    Raises:
        InputError: ``n_days < 1`` or ``day`` outside ``0 .. n_days - 1``; ``end`` without a zone.
    """
    if n_days < 1 or not 0 <= day < n_days:
        raise InputError(f"replay day {day} of {n_days} (expected n_days >= 1 and 0 <= day < n_days)")
    return pd.Timestamp(to_epoch_s(end, "end") - (n_days - 1 - day) * DAY_S, unit="s", tz="UTC")


def day_exports(replay: pd.DataFrame, day: int, n_days: int, prometheus_body: Mapping[str, Any] | str,
                timezone: str, *, end: Any = REPLAY_END, history_days: int = 7,
                prometheus_days: int = 14) -> dict[str, str]:
    """The exports a cluster prints at the end of replay day ``day`` (0-based) of ``n_days``.

    T = :func:`export_time` (the last day's T is ``end``, 2025-03-16T16:00:00Z by default, the end
    of ``data/fixtures/servegen/prometheus.json``; consecutive days are 24 h apart).

    Returns:
        ``{"T": "2025-03-16T16:00:00Z", "sacct": ..., "squeue": ..., "kueue": ..., "prometheus": ...}``:

        * ``sacct``: :func:`sacct_text` run at T with ``--starttime`` = the previous day's T (day
          0: T - ``history_days`` days, so the first retraining has history), ``--endtime`` = T;
          times in ``timezone``. Consecutive windows share their boundary: a job running at T_d is
          RUNNING on day d and, once ended, in day d+1's export too.
        * ``squeue``: :func:`squeue_json_text` at T (the jobs pending or running at T).
        * ``kueue``: :func:`kueue_list_text` at T (every Workload submitted by T; finished ones kept).
        * ``prometheus``: :func:`prometheus_text` of ``prometheus_body`` over ``(T - prometheus_days, T]``
          (fewer days when the body starts later).

    Raises:
        InputError: a bad day/n_days (:func:`export_time`); ``n_days`` larger than the days the
            replay covers (day 0's T not after its first submission); a bad job table, zone or body.
    """
    t = export_time(day, n_days, end)
    typed = replay_jobs(replay)
    if typed.empty:
        raise InputError("replay: the job table is empty")
    first = typed["submitted_at"].min()
    t0 = export_time(0, n_days, end)
    if t0 <= first:
        covered = math.ceil((pd.Timestamp(end) - first) / pd.Timedelta(days=1))
        raise InputError(f"replay: n_days {n_days} starts at {t0.isoformat()}, not after the first submission "
                         f"{first.isoformat()} (expected n_days <= {covered})")
    start = t - pd.Timedelta(days=history_days if day == 0 else 1)
    return {
        "T": t.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sacct": sacct_text(typed, t, start, timezone),
        "squeue": squeue_json_text(typed, t),
        "kueue": kueue_list_text(typed, t),
        "prometheus": prometheus_text(prometheus_body, t, prometheus_days),
    }
