"""What a Prefect run shows: INFO log lines and artifacts (issue 14, "the run shows what it did").

Two halves:

- **Builders** (pure: dicts and frames in, text and rows out), tested on hand-made values:
  :func:`inputs_age_lines`, :func:`headline_rows`, :func:`plan_markdown`, :func:`starts_rows`,
  :mod:`pipelines.flows.retrain_rows` holds the retraining's rows and markdown.
- **Publishers**, which talk to Prefect and are called from flows and tasks only:
  :func:`run_logger` (Prefect's run logger, so the lines reach the run page through the API handler of
  ``prefect.flow_runs`` / ``prefect.task_runs``; outside a run a plain ``gpuplan`` logger),
  :func:`publish_markdown` and :func:`publish_table` (``prefect.artifacts.create_markdown_artifact`` /
  ``create_table_artifact``; Prefect 3.9, https://docs.prefect.io/v3/api-ref/python/prefect-artifacts).

Artifact keys (:func:`artifact_key`) hold only lowercase letters, digits and dashes (Prefect's rule for
keys) and name the workspace, so the Artifacts page keeps one history per workspace and kind
(``plan-summary-demo``, ``estimated-starts-demo``, ``retrain-metrics-demo``).

The terminal stays quiet: Prefect's console handler shows WARNING and above only
(:data:`pipelines.config.settings.ENV_DEFAULTS`), so these INFO lines go to the Prefect API alone.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.report.basics import markdown_table, stale_inputs_line

#: Rows of a markdown table shown before "and N more" (the full list is in the run folder).
MAX_MD_ROWS = 20
#: Estimated-start rows in the table artifact (the queue of a real cluster can be long; the parquet has all).
MAX_TABLE_ROWS = 500

_FALLBACK = logging.getLogger("gpuplan")


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    """Prefect's logger of the current flow or task run; outside a run the plain ``gpuplan`` logger.

    Lines logged here at INFO reach the run's page in the Prefect UI (and ``/api/logs/filter``).
    """
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return _FALLBACK


#: Prefect's run loggers: its task and flow engines log a failed run's exception on them, with its traceback.
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


class BadInputTraceFilter(logging.Filter):
    """Drops the traceback of a record whose exception is bad input (:func:`pipelines.io.errors.input_error_types`).

    Prefect's engines log every failed task and flow run with ``exc_info``; for bad input (an infeasible problem,
    a stale export) the message already names what is wrong, and the command prints it as its one-line error, so
    the ~40 lines of engine frames per run are noise. The record stays (one line, on the console and the run page);
    any other exception keeps its traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        from pipelines.io.errors import input_error_types

        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and isinstance(exc, input_error_types()):
            record.exc_info, record.exc_text = None, None
        return True


def quiet_bad_input_tracebacks() -> None:
    """Install :class:`BadInputTraceFilter` on Prefect's run loggers (:data:`RUN_LOGGERS`) once per process."""
    for name in RUN_LOGGERS:
        lg = logging.getLogger(name)
        if not any(isinstance(f, BadInputTraceFilter) for f in lg.filters):
            lg.addFilter(BadInputTraceFilter())


def artifact_key(kind: str, workspace: str | Path | None) -> str:
    """``<kind>-<workspace folder>`` in lowercase letters, digits and dashes (Prefect's rule for artifact keys).

    The shipped demo (``data/demo``) gives ``<kind>-demo``.
    """
    name = Path(str(workspace)).name if workspace else "demo"
    slug = re.sub(r"[^a-z0-9]+", "-", f"{kind}-{name}".lower()).strip("-")
    return slug or kind


def fmt_ts(value: Any) -> str:
    """A UTC instant as ``2025-03-16 19:30Z`` (seconds when not whole minutes); ``""`` for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return ""
    t = pd.Timestamp(value)
    if pd.isna(t):
        return ""
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    return t.strftime("%Y-%m-%d %H:%M:%SZ" if t.second or t.microsecond else "%Y-%m-%d %H:%MZ")


def age_text(hours: float) -> str:
    """An age in hours as text: ``45 min``, ``3.5 h``, ``12.0 d`` (days from 48 h)."""
    if hours < 1:
        return f"{hours * 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:,.1f} d"


def inputs_age_lines(plan_start: datetime, traffic_end: datetime | None, now: datetime,
                     queue_at: datetime | None = None, queue_file: str | None = None) -> list[str]:
    """Log lines giving the age of the plan's inputs at the plan start and at ``now`` (UTC instants).

    ``traffic_end``: the newest hour of traffic read (None: none); ``queue_at``: when the queue export was
    taken (an operator's workspace; None for the demo, whose queue is built at the plan start).
    """
    def both(t: datetime) -> str:
        at_start = (pd.Timestamp(plan_start) - pd.Timestamp(t)).total_seconds() / 3600
        at_now = (pd.Timestamp(now) - pd.Timestamp(t)).total_seconds() / 3600
        return f"{age_text(max(at_start, 0.0))} before the plan start, {age_text(max(at_now, 0.0))} before now"

    lines = [f"plan start {fmt_ts(plan_start)} (now {fmt_ts(now)})"]
    lines.append(f"traffic: newest hour {fmt_ts(traffic_end)}, {both(traffic_end)}" if traffic_end is not None
                 else "traffic: none read")
    if queue_at is not None:
        lines.append(f"queue export {queue_file or ''} taken {fmt_ts(queue_at)}, {both(queue_at)}".replace("  ", " "))
    return lines


def fmt_value(v: Any) -> str:
    """A value for a log line or a table cell: ``yes``/``no``, thousands separators, 3 significant digits below 1."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.3g}" if abs(v) < 1 and v != 0 else f"{v:,.1f}"
    if isinstance(v, Mapping):
        return ", ".join(f"{k} {fmt_value(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt_value(x) for x in v)
    return "" if v is None else str(v)


def headline_rows(summary: Mapping[str, Any], report: pd.DataFrame | None) -> list[tuple[str, str]]:
    """``(figure, value)`` rows of the plan's headline.

    When ``summary.json`` has a ``headline`` dict (the risk report's, issue 14), its figures in the page's
    order (:func:`_risk_headline_rows`). Otherwise the headline is built from the summary's
    planned metrics (:func:`pipelines.stages.outputs.planned_metrics`): planned utilisation, real-time P90
    demand covered, jobs started / waiting / at risk (``job_at_risk`` rows of ``report``), idle GPU-hours,
    and the forecaster versions (``models``).
    """
    head = summary.get("headline")
    if isinstance(head, Mapping) and head:
        return _risk_headline_rows(head, summary) + stop_rows(report)
    m = summary.get("metrics") or {}
    rows: list[tuple[str, str]] = []
    if "planned_utilization_pct" in m:
        rows.append(("planned utilisation", f"{m['planned_utilization_pct']:.1f} %"))
    if "planned_rt_sla_pct" in m:
        rows.append(("real-time P90 demand covered", f"{m['planned_rt_sla_pct']:.1f} % "
                                                      f"({m.get('planned_rt_unmet_gpu_h', 0.0):.1f} GPU-h short)"))
    if "jobs_started" in m:
        started, total = int(m["jobs_started"]), int(m.get("jobs_total", m["jobs_started"]))
        at_risk = 0 if report is None or report.empty else int((report["section"] == "job_at_risk").sum())
        rows.append(("jobs started / waiting / at risk", f"{started} / {total - started} / {at_risk} "
                                                          f"(of {total} queued)"))
    if "idle_gpu_h" in m:
        rows.append(("idle GPU-hours over the horizon", f"{m['idle_gpu_h']:.1f}"))
    rows += _models_rows(summary.get("models") or {})
    return rows + stop_rows(report)


def stop_rows(report: pd.DataFrame | None) -> list[tuple[str, str]]:
    """The headline row of the jobs the plan stops at step 0 (issue 30; ``stop_now`` rows of ``report``), or none.

    ``("stopped at step 0 (requeued)", "P2 (2 GPUs, 2 GPU-h lost)")``; several jobs ``;``-joined.
    """
    if report is None or report.empty or "section" not in report.columns:
        return []
    now = report[report["section"] == "stop_now"]
    if now.empty:
        return []
    return [("stopped at step 0 (requeued)", "; ".join(
        f"{r.job_id} ({int(r.gpus)} GPU{'' if int(r.gpus) == 1 else 's'}, {float(r.value):g} GPU-h lost)"
        for r in now.itertuples()))]


def _models_rows(models: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(kind forecaster, "name vN")`` rows of ``summary.json``'s ``models`` (or the headline's ``models["jobs"]``)."""
    rows = []
    for kind, mv in models.items():
        if isinstance(mv, Mapping):
            ver = mv.get("version")
            rows.append((f"{kind} forecaster", f"{mv.get('name', kind)} v{ver}" if ver is not None else
                         str(mv.get("note") or mv.get("name") or "unversioned")))
    return rows


def _risk_headline_rows(head: Mapping[str, Any], summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The rows of the risk report's headline (:func:`pipelines.report.headline` keys), in the page's order.

    Planned utilisation, real-time demand covered (P50 / P90) and services below their P90 coverage target,
    jobs started / waiting / at risk, idle GPU-hours, the newest input and its age, the forecaster versions.
    Keys the headline lacks are left out.
    """
    rows: list[tuple[str, str]] = []
    if head.get("planned_utilization_pct") is not None:
        rows.append(("planned utilisation", f"{float(head['planned_utilization_pct']):.1f} %"))
    if head.get("rt_covered_p90_pct") is not None:
        p50 = head.get("rt_covered_p50_pct")
        rows.append(("real-time demand covered (P50 / P90)",
                     f"{'-' if p50 is None else format(float(p50), '.1f')} % / {float(head['rt_covered_p90_pct']):.1f} %"))
    if "rt_below_target" in head:
        below = list(head.get("rt_below_target") or [])
        target = head.get("rt_coverage_target")
        rows.append((f"services below P90 coverage target{'' if target is None else f' {float(target):.2f}'}",
                     ", ".join(map(str, below)) or "none"))
    if head.get("jobs_queued") is not None:
        started = int(head.get("jobs_start_now", 0)) + int(head.get("jobs_start_later", 0))
        rows.append(("jobs started / waiting / at risk", f"{started} / {int(head.get('jobs_waiting', 0))} / "
                                                          f"{int(head.get('jobs_at_risk', 0))} "
                                                          f"(of {int(head['jobs_queued'])} queued)"))
    if head.get("idle_gpu_h") is not None:
        rows.append(("idle GPU-hours over the horizon", f"{float(head['idle_gpu_h']):.1f}"))
    newest = head.get("newest_input")
    if isinstance(newest, Mapping) and newest.get("ts"):
        age = head.get("input_age_h_at_plan_start")
        rows.append(("newest input", f"{newest.get('what')} {newest['ts']}"
                                     + ("" if age is None else f" ({float(age):.1f} h before the plan start)")))
    models = head.get("models")
    jobs_models = models.get("jobs") if isinstance(models, Mapping) else None
    rows += _models_rows(jobs_models if isinstance(jobs_models, Mapping) else (summary.get("models") or {}))
    return rows


def _md_cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def rows_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], limit: int = MAX_MD_ROWS) -> str:
    """``rows`` (dicts) as :func:`pipelines.report.basics.markdown_table` (first ``limit``; then ``and N more``); ``_none_`` if empty."""
    if not rows:
        return "_none_"
    cells = [[_md_cell(r.get(c, "")) for c in columns] for r in rows[:limit]]
    more = f"… and {len(rows) - limit} more (the run folder's `risk_report.parquet` has all)" if len(rows) > limit else None
    return markdown_table(columns, cells, more)


def _section(report: pd.DataFrame | None, name: str) -> pd.DataFrame:
    if report is None or report.empty or "section" not in report:
        return pd.DataFrame()
    return report[report["section"] == name]


def _int(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def at_risk_rows(report: pd.DataFrame | None) -> list[dict[str, Any]]:
    """The ``job_at_risk`` rows of the risk report: job, kind, GPUs, planned start, P90 finish (UTC), reason."""
    d = _section(report, "job_at_risk")
    return [{"job": r.job_id, "kind": r.kind, "gpus": _int(r.gpus), "start (UTC)": fmt_ts(r.start_ts),
             "P90 finish (UTC)": fmt_ts(r.end_ts), "reason": r.reason} for r in d.itertuples()]


def starts_rows(report: pd.DataFrame | None, limit: int = MAX_TABLE_ROWS,
                stops: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The estimated start of every queued job (``queue_eta`` rows of the risk report), earliest first.

    Columns: ``job_id``, ``kind``, ``priority``, ``gpus``, ``start_utc`` and ``planned_end_utc``
    (``2025-03-16 19:30Z``; a job the plan does not start in the horizon, a ``queue_eta`` row without
    ``start_step``, reads ``after <horizon end>``), ``reason``. At most ``limit`` rows, by start (not-started
    jobs last). A running job the plan stops at step 0 (issue 30, a ``stop_now`` row) comes first, as the risk
    report's estimated starts list it: ``start_utc`` ``stopped now (requeued)``, ``priority`` the job's (from
    ``stops``, ``summary.json``'s list: :func:`pipelines.report.stops.stop_records`; None only when it lacks the
    job), the reason its stop row gives (the shortfall and the GPU-h lost); its restart is in the risk report's
    estimated starts.
    """
    out: list[dict[str, Any]] = []
    prio = {str(x["job_id"]): x.get("priority") for x in stops or []}
    for r in _section(report, "stop_now").itertuples():
        p = prio.get(r.job_id)
        out.append({"job_id": r.job_id, "kind": r.kind, "priority": None if p is None else float(p),
                    "gpus": _int(r.gpus),
                    "start_utc": "stopped now (requeued)", "planned_end_utc": "",
                    "reason": f"stopped at step 0: {r.reason}"})
    d = _section(report, "queue_eta")
    if not d.empty:
        d = d.assign(_ns=d["start_step"].isna()).sort_values(["_ns", "start_ts", "job_id"], kind="stable")
        for r in d.itertuples():
            started = not pd.isna(r.start_step)
            out.append({"job_id": r.job_id, "kind": r.kind, "priority": None if pd.isna(r.value) else float(r.value),
                        "gpus": _int(r.gpus),
                        "start_utc": fmt_ts(r.start_ts) if started else f"after {fmt_ts(r.start_ts)}",
                        "planned_end_utc": fmt_ts(r.end_ts) if started else "", "reason": r.reason})
    return out[:limit]


def plan_markdown(summary: Mapping[str, Any], report: pd.DataFrame | None, run_dir: Path,
                  mlflow_run: Mapping[str, Any]) -> str:
    """The markdown summary artifact of a plan run.

    Headline (:func:`headline_rows`), plan status and solver figures, real-time forecast status, jobs
    at risk (:func:`at_risk_rows`), then where everything is: the run folder, its risk report
    (``risk_report.html`` when present, else ``risk_report.md``) and the MLflow run (``mlflow_run``:
    ``run_id``, ``experiment``, ``tracking_uri``, optional ``url``).
    """
    run_dir = Path(run_dir)
    stale = stale_inputs_line(summary.get("headline"))
    lines = ([stale, ""] if stale else []) + [f"# Plan {summary.get('run', run_dir.name)}", ""]
    start = summary.get("plan_start")
    lines.append(f"Plan start **{fmt_ts(start)}**; status **{summary.get('status')}** (verified), plan from "
                 f"`{summary.get('source') or summary.get('planner')}`"
                 + (" — **FALLBACK**: the MILP gave no plan, the best baseline is published" if summary.get("fallback")
                    else "") + ".")
    obj, bound, gap, solve_s = (summary.get(k) for k in ("objective", "bound", "mip_gap", "solve_s"))
    lines.append(f"Objective {fmt_value(obj)}, bound {fmt_value(bound)}, gap "
                 f"{'n/a' if gap is None else f'{100 * gap:.2f} %'}, solve {fmt_value(solve_s)} s.")
    lines += ["", "## Headline", "", rows_table([{"figure": k, "value": v} for k, v in headline_rows(summary, report)],
                                               ["figure", "value"], limit=50)]
    rt = summary.get("rt_status") or {}
    if rt:
        lines += ["", "## Real-time forecasts", ""]
        lines += [f"- `{svc}`: **{v[0]}**" + (f" — {v[1]}" if len(v) > 1 and v[1] else "") for svc, v in rt.items()]
    risk = at_risk_rows(report)
    lines += ["", f"## Jobs at risk ({len(risk)})", "",
              rows_table(risk, ["job", "kind", "gpus", "start (UTC)", "P90 finish (UTC)", "reason"])]
    page = run_dir / "risk_report.html"
    page = page if page.is_file() else run_dir / "risk_report.md"
    lines += ["", "## Where everything is", "",
              f"- run folder: [{run_dir}]({run_dir.as_uri()})",
              f"- risk report: [{page.name}]({page.as_uri()})"]
    rid = mlflow_run.get("run_id")
    if rid:
        where = f"experiment `{mlflow_run.get('experiment', '')}` in `{mlflow_run.get('tracking_uri', '')}`"
        url = mlflow_run.get("url")
        lines.append(f"- MLflow run: [{rid}]({url}) ({where})" if url else f"- MLflow run: `{rid}` ({where})")
    return "\n".join(lines) + "\n"


def publish_markdown(key: str, markdown: str, description: str) -> None:
    """Create a markdown artifact of the current run (``prefect.artifacts.create_markdown_artifact``)."""
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(markdown=markdown, key=key, description=description)


def publish_table(key: str, rows: Sequence[Mapping[str, Any]], description: str) -> None:
    """Create a table artifact of the current run (``prefect.artifacts.create_table_artifact``; NaN shown empty)."""
    from prefect.artifacts import create_table_artifact

    create_table_artifact(table=[dict(r) for r in rows], key=key, description=description)
