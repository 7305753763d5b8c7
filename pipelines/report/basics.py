"""Shared vocabulary of the risk report: its inputs, the long table's schema, times and GPU use per step.

Every other module of :mod:`pipelines.report` builds on these: :class:`ReportInputs` (what the
report reads), :data:`REPORT_COLUMNS` and :func:`frame` (the parquet table), :func:`usage` (GPUs in
use per step), :func:`step_ts` / :func:`clock` / :func:`instant` (times as the page prints them:
UTC with ``Z``; step times to the minute, deadlines to the second) and :func:`plural`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from domain.units import Horizon

#: Schema of ``risk_report.parquet``: one long table, the ``section`` column says what a row is.
REPORT_COLUMNS: dict[str, str] = {
    # coverage_risk | rt_calibration | rt_exceedance | idle_window | job_at_risk | queue_eta | long_holder
    # | queue_outlook | stop_now | stop_later (issue 30, pipelines.report.stops)
    "section": "str",
    "service": "str",
    "job_id": "str",
    "kind": "str",
    "label": "str",  # rt_calibration: the hour band ("all", "00-06 Asia/Shanghai", ...)
    "step": "Int64",
    "start_step": "Int64",
    "end_step": "Int64",
    "start_ts": "datetime64[us, UTC]",
    "end_ts": "datetime64[us, UTC]",
    "deadline_ts": "datetime64[us, UTC]",
    "gpus": "Int64",
    "count": "Int64",  # rt_calibration: hours scored; idle_window: steps
    "shortfall_gpus": "Int64",
    "probability": "float64",
    "value": "float64",
    "reason": "str",
}


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report reads.

    Attributes:
        problem: the ``optimizer.problem.Problem`` that was planned (its services' ``demand_gpus``
            are the quantile the planner used, P90 by default).
        plan: the verified ``optimizer.plan.Plan``.
        start_ts: UTC time of step 0 (aware).
        jobs: one row per queued or running job: ``job_id, kind, priority, state``,
            ``duration_p10_h, duration_p50_h, duration_p90_h`` (hours, at the job's first (requested)
            size), optional ``gpus_pred``, ``submitted_at``, ``deadline_at`` (the real deadline
            instant, aware UTC or NaT; ``deadline_ts`` is read too) and ``size_options`` (JSON
            ``[{"gpus", "duration_h", "duration_p10_h", "duration_p50_h", "duration_p90_h"}]`` of
            the other sizes, :func:`pipelines.stages.models.forecast_jobs`).
        demand: one row per service and step: ``service, step, demand_gpus_p50, demand_gpus_p90``,
            optional ``traffic_p50`` (service units per hour; needed for the measured exceedance).
        bands: optional forecast-against-actual frame ``service, ts, actual, p50, p90`` (traffic
            units per hour) for the recent past: the measured calibration.
        rt_status: service -> (status ``ok``/``degraded``/``level_shift``/``given``, message).
        time_limit_s: the solver's time limit, quoted when the plan is not proven optimal.
        services: the real-time services' settings (:class:`pipelines.workspace.config.ServiceSettings`
            or any object with ``service, timezone, units, swap_cap_gpus`` and ``gpu_conversion()``);
            empty: hour bands in UTC, no measured exceedance (normal approximation instead).
        rt_selection: service -> how its forecast was chosen
            (:meth:`forecasters.realtime.combine.Combined.selection`), for the headline.
        models: the job forecasters that made the duration forecasts: kind -> ``{"name",
            "version", "alias", ...}`` (``summary.json``'s ``models``), or None.
        node_names: the cluster's node names in GPU order (Gantt labels), or None (``node-XX``).
        written_at: the report's own time (input age "now"); None: the wall clock when rendered.
        unplannable: queued jobs left out of the problem because no node of the cluster can ever run them
            (a typed cluster: they ask only for GPU types it has none of), as ``(job_id, why)``; "What to do
            first" lists them before the jobs at risk.
    """

    problem: Any
    plan: Any
    start_ts: datetime
    jobs: pd.DataFrame
    demand: pd.DataFrame
    bands: pd.DataFrame | None = None
    rt_status: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    time_limit_s: float | None = None
    services: Sequence[Any] = ()
    rt_selection: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    models: Mapping[str, Any] | None = None
    node_names: Sequence[str] | None = None
    written_at: datetime | None = None
    unplannable: Sequence[tuple[str, str]] = ()

    @property
    def step_minutes(self) -> int:
        """Minutes per planning step."""
        return int(self.problem.cluster.step_minutes)

    @property
    def horizon(self) -> Horizon:
        """The plan's clock (:class:`domain.units.Horizon`): ``start_ts``, the step, the problem's steps."""
        return Horizon(pd.Timestamp(self.start_ts), self.step_minutes, int(self.problem.cluster.horizon_steps))

    @property
    def step_h(self) -> float:
        """Hours per planning step."""
        return self.horizon.step_h

    def service_names(self) -> list[str]:
        """Services in the problem's order: the one order of every table, plot and colour."""
        names = [s.service for s in self.problem.services]
        return names + [s for s in self.plan.service_gpus if s not in names]

    def service(self, name: str) -> Any | None:
        """The settings of service ``name`` (:attr:`services`), or None."""
        return next((s for s in self.services if getattr(s, "service", None) == name), None)


def plural(n: int, word: str) -> str:
    """``"1 GPU"``, ``"2 GPUs"``, ``"0 GPUs"``: a count with its noun pluralised (English ``s``)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def step_ts(inp: ReportInputs, t: int) -> pd.Timestamp:
    """UTC start of step ``t`` (may be past the horizon; :meth:`domain.units.Horizon.ts`)."""
    return pd.Timestamp(inp.horizon.ts(int(t)))


def clock(ts: Any) -> str:
    """A step time as the page prints it: ``"2025-03-16 19:00Z"`` (UTC, to the minute)."""
    return f"{pd.Timestamp(ts).tz_convert('UTC'):%Y-%m-%d %H:%M}Z"


def instant(ts: Any) -> str:
    """A real instant (a deadline) to the second: ``"2025-03-16 23:44:23Z"``, never rounded to a step."""
    return f"{pd.Timestamp(ts).tz_convert('UTC'):%Y-%m-%d %H:%M:%S}Z"


def hours_text(h: float) -> str:
    """A duration in hours, short: ``"1.5 h"``, ``"6.2 days"`` from 48 h on."""
    if h >= 48:
        return f"{h / 24:.1f} days"
    return f"{h:.3g} h"


def up_gpus(problem: Any) -> int:
    """GPUs that are up (the cluster minus ``down_gpus``)."""
    return int(problem.n_gpus - len(getattr(problem, "down_gpus", ()) or ()))


def usage(problem: Any, plan: Any) -> tuple[np.ndarray, np.ndarray, list[list[str]]]:
    """GPUs in use per step: (batch GPUs (H,), real-time GPUs (H,), owner grid (H, N)).

    The grid is ``plan.owner_grid(n_gpus, horizon_steps)`` (job id per GPU and step, ``""`` free;
    running jobs included, real-time counted only).
    """
    H, N = problem.horizon_steps, problem.n_gpus
    grid = plan.owner_grid(N, H)
    batch = np.array([sum(1 for o in row if o) for row in grid], dtype=int)
    rt = np.zeros(H, dtype=int)
    for gpus in plan.service_gpus.values():
        rt += np.asarray(gpus[:H], dtype=int)
    return batch, rt, grid


def idle_per_step(inp: ReportInputs) -> np.ndarray:
    """GPUs planned for neither batch nor real-time work per step, shape (H,)."""
    batch, rt, _ = usage(inp.problem, inp.plan)
    return up_gpus(inp.problem) - batch - rt


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], more: str | None = None) -> str:
    """The one GitHub-flavoured Markdown table: ``header`` (k,) names, ``rows`` (n, k) cells already formatted.

    ``more``: a note after a blank line (e.g. how many rows were cut). No trailing newline; the
    callers decide the empty text and the cell formatting (the risk page, the Prefect artifacts).
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if more:
        lines.append(f"\n{more}")
    return "\n".join(lines)


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a :data:`REPORT_COLUMNS` frame (missing columns null, dtypes fixed)."""
    df = pd.DataFrame(rows, columns=list(REPORT_COLUMNS))
    for col, dtype in REPORT_COLUMNS.items():
        if dtype.startswith("datetime"):
            df[col] = pd.to_datetime(df[col], utc=True).astype(dtype)
        else:
            df[col] = df[col].astype(dtype)
    return df


#: Inputs older than this (hours, newest input to the report's "now") are stale: the report, the plan
#: artifact and the flow's log say "inputs N h old" at the top (issue 33). Two re-plan intervals of 30 min.
INPUT_AGE_WARN_H = 1.0


def stale_inputs_line(head: Mapping[str, Any] | None, limit_h: float = INPUT_AGE_WARN_H) -> str | None:
    """``**inputs N h old** (newest input: <what> at <UTC>; limit L h)`` when the headline's input age is past ``limit_h``.

    ``head``: the risk report's headline (:func:`pipelines.report.headline`: ``newest_input``,
    ``input_age_h_now``); None when there is none or the inputs are fresh.
    """
    age = (head or {}).get("input_age_h_now")
    if age is None or float(age) <= limit_h:
        return None
    newest = (head or {}).get("newest_input") or {}
    return (f"**inputs {float(age):,.0f} h old** (newest input: {newest.get('what', 'n/a')} at "
            f"{newest.get('ts', 'n/a')}; limit {limit_h:g} h)")
