"""The risk report page: Markdown tables, the status in words, and writing the report files."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.atomic import atomic_path, atomic_write_text
from pipelines.report.plots import plot_bands, plot_demand, plot_gantt, plot_outlook
from pipelines.report.risks import ReportInputs, build_report_table, plural, usage


def md_table(df: pd.DataFrame, columns: Sequence[str], max_rows: int = 60) -> str:
    """A GitHub Markdown table of ``columns`` (first ``max_rows`` rows; a note when cut)."""
    if df.empty:
        return "_none_\n"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for _, r in df.head(max_rows).iterrows():
        cells = []
        for c in columns:
            v = r[c]
            if v is None or (not isinstance(v, str) and pd.isna(v)):
                cells.append("")
            elif isinstance(v, pd.Timestamp):
                cells.append(v.strftime("%Y-%m-%d %H:%M") + "Z")
            elif isinstance(v, float):
                cells.append(f"{v:.3g}")
            else:
                cells.append(str(v).replace("|", "/"))
        lines.append("| " + " | ".join(cells) + " |")
    if len(df) > max_rows:
        lines.append(f"\n_{len(df) - max_rows} more rows in risk_report.parquet_")
    return "\n".join(lines) + "\n"


def status_text(plan: Any, mip_rel_gap: float | None) -> str:
    """The solve status in words, with the gap in percent.

    ``optimal`` with a positive gap reads ``optimal within the 0.1 % gap tolerance (gap 0.07 %)``:
    HiGHS stops when the relative gap (bound − objective) / objective is below ``mip_rel_gap``,
    so "optimal" means "within that tolerance", not "no better plan exists".
    """
    gap = None if plan.gap is None else float(plan.gap)
    gap_txt = "n/a" if gap is None else f"{_pct(gap)} %"
    if plan.status == "optimal":
        if gap is None or gap <= 1e-9:
            return "**optimal** (gap 0 %)" if gap is not None else "**optimal**"
        tol = f"the {_pct(mip_rel_gap)} % gap tolerance" if mip_rel_gap else "the solver's gap tolerance"
        return f"**optimal** within {tol} (gap {gap_txt})"
    return f"**{plan.status}** (gap {gap_txt})"


def _pct(frac: float) -> str:
    """A fraction as a short percentage number.

    2 decimals, trailing zeros cut; 1 significant digit below 0.01 %: 0.0007 -> ``"0.07"``,
    0.001 -> ``"0.1"``, 0.0125 -> ``"1.25"``, 1e-5 -> ``"0.001"``.
    """
    v = frac * 100
    if 0 < abs(v) < 0.01:
        return f"{v:.1g}"
    return f"{v:.2f}".rstrip("0").rstrip(".")


#: Plain-words explanation of a degraded real-time profile, keyed by the start of the message that
#: :func:`forecasters.realtime.fit_profile` gives (C03 history rule).
_SHORT_WEEKLY = "weekly seasonality needs more than"
#: Start of the message of a level shift (:meth:`forecasters.realtime.shift.LevelShift.describe`, F09).
_LEVEL_SHIFT = "level shift x"


def explain_rt_status(status: str, message: str) -> str | None:
    """What a real-time profile status means for the operator, in plain words (``None`` when ok).

    A ``"degraded"`` profile from a history of 168..336 hourly points (the shipped ServeGen series
    are exactly 336 h) has its weekly shape fitted without a second week to confirm it; below 168
    points there is no weekly shape at all. Other degraded causes get a generic explanation.
    ``"level_shift"`` (F09): traffic moved to a new level at the end of the history and the forecast
    follows it; the explanation gives the factor and the start (from the profile's message) and what to
    check; a degraded profile whose message also reports a level shift gets both explanations.
    """
    if status == "ok":
        return None
    if status == "given":
        return None
    shift = _explain_level_shift(message)
    if status == "level_shift":
        return shift
    why = _explain_degraded(message)
    return f"{shift} {why}" if shift else why


def _explain_level_shift(message: str) -> str | None:
    """The level-shift part of the explanation (F09), or None when the message has none."""
    m = re.search(r"level shift x([0-9.]+) since (\S+) \((\d+) h", message)
    if not m:
        return None
    factor, since, hours = float(m.group(1)), m.group(2), int(m.group(3))
    way = "fell" if factor < 1 else "rose"
    followed = "NOT modelled" not in message
    return (f"Traffic {way} to {factor:.2f}× its usual level for each hour of the week from {since} on "
            f"({hours} h so far), and stayed there: this is a new level, not a run of outliers. "
            + ("The forecast (and the GPUs planned for this service) follows the new level. " if followed else
               "The forecast could NOT be moved to the new level (too few hours on one side of the change); "
               "it may still be at the old level. ")
            + ("If the change is temporary (an outage upstream, a holiday, a routing change being rolled "
               "back), demand will come back to the old level: keep extra real-time headroom (a higher "
               "`min_gpus`) until you know." if factor < 1 else
               "Check that the new demand is real (a launch, a new client) and that the service's "
               "`max_gpus` allows it."))


def _explain_degraded(message: str) -> str:
    """The explanation of a degraded profile (short history, or a generic one)."""
    if _SHORT_WEEKLY in message:
        got = re.search(r"got (\d+)", message)
        n_txt = f"{got.group(1)} hourly points" if got else "too few hourly points"
        if "NOT estimated" in message:
            return (f"The traffic history has {n_txt}, less than one full week, so the forecast knows only "
                    "the daily pattern: weekday/weekend differences are missing and the P90 may be too low "
                    "on busy weekdays. Keep extra real-time headroom (a higher `min_gpus`) for this service "
                    "and give at least three weeks of hourly traffic.")
        return (f"The traffic history has {n_txt} (two weeks or less), so the weekly pattern (each hour of "
                "the week) is in effect fitted from one week only, with no second week to confirm it. Anything "
                "unusual in that week (a holiday, an outage, a launch) is repeated in the forecast for the same "
                "hour of the week, and the P90 band does not allow for it. For the operator: check the demand "
                "plot against what you expect for these weekdays, keep extra real-time headroom (a higher "
                "`min_gpus`) if that week was not typical, and give more than 336 hourly points (three weeks "
                "or more) to clear this status.")
    return ("The forecast for this service is less reliable than usual (see the message); keep extra "
            "real-time headroom for it and check the forecast-against-actual plot.")


def render_page(inp: ReportInputs, table: pd.DataFrame, plots: Mapping[str, str], run_name: str) -> str:
    """The Markdown page (plots referenced by relative file name).

    Sections in order, each table under its own ``##`` heading and each plot right after the
    section it illustrates: summary and real-time profiles, coverage risks (+ demand plot),
    forecast against actual (plot), idle windows, jobs at risk, estimated starts, queue outlook
    (+ plot), plan Gantt chart. The objective and bound are both rounded to 2 decimals.
    """
    plan = inp.plan
    sec = {s: table[table["section"] == s] for s in ("coverage_risk", "idle_window", "job_at_risk",
                                                     "queue_eta", "queue_outlook")}

    def plot(key: str, alt: str) -> list[str]:
        return [f"![{alt}]({plots[key]})", ""] if key in plots else []

    out = [f"# Risk report — {run_name}", "",
           f"Horizon: {inp.problem.horizon_steps} steps × {inp.problem.cluster.step_minutes} min from "
           f"{inp.start_ts:%Y-%m-%d %H:%M}Z, {plural(inp.problem.n_gpus, 'GPU')}.", ""]
    settings = getattr(inp.problem, "settings", None)
    tol = getattr(settings, "mip_rel_gap", None)
    bound = "n/a" if plan.bound is None else f"{plan.bound:.2f}"
    gap = "n/a" if plan.gap is None else f"{_pct(plan.gap)} %"
    source = f" (plan from `{plan.source}`)" if plan.source and str(plan.source) != plan.planner else ""
    out.append(f"Plan: planner `{plan.planner}`{source}, status {status_text(plan, tol)}, objective "
               f"{plan.objective:.2f}, bound {bound}, solve {plan.solve_s:.1f} s.")
    if plan.status == "time_limit" and not plan.fallback:
        lim = f" after {inp.time_limit_s:g} s" if inp.time_limit_s else ""
        out.append(f"\n> **Not proven optimal**: the solver stopped on its time limit{lim} with this incumbent "
                   f"(gap {gap}).")
    if plan.fallback:
        out.append(f"\n> **Fallback plan**: the MILP did not return a plan ({plan.message}); this is the best "
                   f"baseline plan.")
    out.append("\nReal-time profiles:\n")
    for svc, (status, msg) in inp.rt_status.items():
        flag = {"ok": "", "given": "", "level_shift": "**LEVEL SHIFT** — "}.get(status, "**DEGRADED** — ")
        out.append(f"- `{svc}`: {flag}{status}{(': ' + msg) if msg else ''}")
        why = explain_rt_status(status, msg or "")
        if why:
            out.append(f"  - What this means: {why}")
    out += ["", "## Coverage risks", "",
            "Steps where the planned GPUs are below the P90 demand forecast; probability that demand "
            "exceeds the plan.", "",
            md_table(sec["coverage_risk"], ["service", "step", "start_ts", "gpus", "shortfall_gpus",
                                            "probability", "reason"])]
    out += plot("demand", "Demand bands: P50–P90 GPU demand forecast and planned GPUs per service")
    if "bands" in plots:
        out += ["## Forecast against actual", ""] + plot("bands", "Forecast against actual traffic")
    out += ["## Idle windows", "",
            md_table(sec["idle_window"], ["start_ts", "end_ts", "start_step", "end_step", "gpus", "value"]).replace(
                "| value |", "| GPU-hours |"),
            "## Jobs at risk", "",
            "Finish times here are P90 (pessimistic) duration forecasts; the next table gives planned ends.", "",
            md_table(sec["job_at_risk"], ["job_id", "kind", "gpus", "start_ts", "end_ts", "reason"]).replace(
                "| end_ts |", "| p90_finish_ts |"),
            "## Estimated start of every queued job", "",
            md_table(sec["queue_eta"].sort_values("start_ts", kind="stable"),
                     ["job_id", "kind", "value", "gpus", "start_ts", "end_ts", "reason"], max_rows=200).replace(
                "| value |", "| priority |").replace("| end_ts |", "| planned_end_ts |"),
            "## Queue outlook", ""]
    q = sec["queue_outlook"]
    if len(q):
        every = q.iloc[:: max(1, len(q) // 12)]
        out.append(md_table(every, ["step", "start_ts", "gpus", "value", "reason"]).replace(
            "| gpus | value |", "| batch GPUs | jobs waiting |"))
    else:
        out.append("_none_\n")
    out += plot("outlook", "Queue outlook: GPUs by use and jobs waiting per step")
    if "gantt" in plots:
        out += ["## Plan (Gantt)", ""] + plot("gantt", "Plan: GPUs by step, batch blocks by kind, real-time in red")
    return "\n".join(out).rstrip("\n") + "\n"


def write_risk_report(folder: Path, inp: ReportInputs, run_name: str) -> dict[str, Path]:
    """Write ``risk_report.parquet``, the PNG plots and ``risk_report.md`` into ``folder``.

    Each file is written atomically. Returns name -> path.
    """
    folder = Path(folder)
    table = build_report_table(inp)
    paths: dict[str, Path] = {}
    with atomic_path(folder / "risk_report.parquet") as tmp:
        table.to_parquet(tmp, index=False)
    paths["risk_report.parquet"] = folder / "risk_report.parquet"
    kinds = {j.job_id: j.kind for j in inp.problem.jobs}
    kinds.update({r.job_id: r.kind for r in inp.problem.running})
    plots: dict[str, str] = {}
    _, rt, _ = usage(inp.problem, inp.plan)
    for key, fn in (("gantt", lambda p: plot_gantt(inp.problem, inp.plan, kinds, p, inp.start_ts)),
                    ("demand", lambda p: plot_demand(inp, p)),
                    ("outlook", lambda p: plot_outlook(table[table["section"] == "queue_outlook"], rt,
                                                       inp.problem.n_gpus, p)),
                    ("bands", (lambda p: plot_bands(inp.bands, p)) if inp.bands is not None and len(inp.bands)
                     else None)):
        if fn is None:
            continue
        name = f"{key}.png"
        with atomic_path(folder / name) as tmp_png:  # the temporary name keeps ".png" for savefig
            fn(tmp_png)
        paths[name] = folder / name
        plots[key] = name
    atomic_write_text(folder / "risk_report.md", render_page(inp, table, plots, run_name))
    paths["risk_report.md"] = folder / "risk_report.md"
    return paths
