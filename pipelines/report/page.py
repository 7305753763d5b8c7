"""The risk report page: the headline first, then each risk with its table and plot; Markdown and HTML.

:func:`render_page` gives the Markdown (``risk_report.md``), :func:`write_risk_report` writes it with
the table, the plots and the self-contained HTML (``risk_report.html``, :mod:`pipelines.report.html`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.io.atomic import atomic_path, atomic_write_text
from pipelines.report.actions import JobAction, action_lines, at_risk_actions, resize_file_name, resize_job_entry
from pipelines.report.basics import (
    ReportInputs,
    clock,
    hours_text,
    instant,
    markdown_table,
    plural,
    stale_inputs_line,
    step_ts,
)
from pipelines.report.calibration import ServiceCalibration, calibrate, calibration_text
from pipelines.report.html import render_html
from pipelines.report.numbers import headline
from pipelines.report.planview import PlanView, plan_view
from pipelines.report.plots import plot_bands, plot_demand, plot_gantt, plot_outlook
from pipelines.report.risks import IDLE_MIN_H, build_report_table
from pipelines.report.status import explain_rt_status, model_text, not_proven_text, pct_text, status_flag, status_text
from pipelines.report.stops import gpu_h_lost
from pipelines.report.waits import LONG_HOLD_H, WAIT_GROUPS, holder_text, type_utilization, wait_group

#: The plots of the page: key -> (file name, caption). Each is linked from the headline and shown in its section.
PLOTS: dict[str, tuple[str, str]] = {
    "demand": ("demand.png", "Real-time demand forecast (P50–P90), planned GPUs and P(demand > plan) per service"),
    "bands": ("bands.png", "Forecast against actual traffic, last 24 h before the plan start"),
    "outlook": ("outlook.png", "Queue outlook: GPUs by use and jobs waiting per step"),
    "gantt": ("gantt.png", "Plan: GPUs by node and time, batch blocks by kind, real-time by service"),
}


def _cell(v: Any, col: str) -> str:
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return ""
    if isinstance(v, pd.Timestamp):
        return instant(v) if "deadline" in col else clock(v)
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v).replace("|", "/")


def md_table(df: pd.DataFrame, columns: Sequence[str], max_rows: int = 60,
             headers: Mapping[str, str] | None = None) -> str:
    """A GitHub Markdown table of ``columns`` (first ``max_rows`` rows; a note when cut).

    Times are printed by :func:`pipelines.report.basics.clock` (UTC, to the minute), a column whose
    name contains ``deadline`` by :func:`~pipelines.report.basics.instant` (to the second); floats to 3
    significant digits; ``headers`` renames columns for display.
    """
    if df.empty:
        return "_none_\n"
    names = [(headers or {}).get(c, c) for c in columns]
    rows = [[_cell(r[c], c) for c in columns] for _, r in df.head(max_rows).iterrows()]
    more = f"_{len(df) - max_rows} more rows in risk_report.parquet_" if len(df) > max_rows else None
    return markdown_table(names, rows, more) + "\n"


#: Sections the HTML page folds (``<details>``): the detail below the headline, the actions and the waiting groups.
FOLDED: tuple[str, ...] = ("Real-time coverage risk", "Jobs at risk", "Estimated start of every queued job",
                           "Long holders", "Idle windows", "Queue outlook")


def waiting_table(inp: ReportInputs, view: PlanView, eta: pd.DataFrame) -> str:
    """The "Waiting jobs by reason" table: one row per :data:`pipelines.report.waits.WAIT_GROUPS` group.

    Columns: what the group waits for (and how many jobs), its jobs by planned start (``start: id, id``;
    ``not in horizon`` / ``never`` last), and the jobs in their way (:func:`pipelines.report.waits.wait_group`),
    each named once per group with its GPUs and planned end, latest end first. ``_none_`` when no job waits.
    """
    groups: dict[str, tuple[list[tuple[int, str]], list[str]]] = {}
    starts = {str(r["job_id"]): r for _, r in eta.iterrows()} if len(eta) else {}
    for job in inp.problem.jobs:
        a = inp.plan.job(job.job_id)
        r = starts.get(job.job_id)
        g = wait_group(inp, job, a.start_step, view, None if r is None else str(r["reason"]))
        if g is None:
            continue
        key, holders = g
        jobs, held = groups.setdefault(key, ([], []))
        jobs.append((a.start_step if a.start_step is not None else 10**9, job.job_id))
        held += [h for h in holders if h not in held]
    if not groups:
        return "_none_\n"
    rows = []
    for key, text in WAIT_GROUPS.items():
        if key not in groups:
            continue
        jobs, held = groups[key]
        by_start: dict[int, list[str]] = {}
        for t, jid in sorted(jobs):
            by_start.setdefault(t, []).append(jid)
        cell = "; ".join(("never" if key == "never" else "not in horizon") + ": " + ", ".join(ids) if t == 10**9
                         else f"{clock(step_ts(inp, t))}: {', '.join(ids)}" for t, ids in by_start.items())
        held = sorted(held, key=lambda h: (-view.end[h], h))
        rows.append([f"{text}: {len(jobs)} job{'' if len(jobs) == 1 else 's'}", cell, "; ".join(holder_text(inp, view, h) for h in held) or "–"])
    return markdown_table(["waits for", "planned start: jobs", "in their way (each once)"], rows) + "\n"


def _verb(n: int, verb: str) -> str:
    """``"1 starts"``, ``"3 start"``: a count with its verb agreeing."""
    return f"{n} {verb}s" if n == 1 else f"{n} {verb}"


def _pct1(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f} %"


def headline_rows(inp: ReportInputs, head: Mapping[str, Any], cal: Sequence[ServiceCalibration],
                  plots: Mapping[str, str]) -> list[tuple[str, str]]:
    """The headline table's (figure, value) rows, from :func:`pipelines.report.headline`'s dict."""
    plan, problem = inp.plan, inp.problem
    settings = getattr(problem, "settings", None)
    rows = [("Plan", f"{clock(inp.start_ts)} → {head['horizon_end']} ({problem.horizon_steps} × "
                     f"{inp.step_minutes} min), {plural(problem.n_gpus, 'GPU')}; planner `{plan.planner}`"
                     f"{'' if not plan.source or str(plan.source) == plan.planner else (' (best candidate: `' if plan.planner == 'fast' else ' (best plan found by its `') + str(plan.source) + ('`)' if plan.planner == 'fast' else '` start)')}"
                     f", {status_text(plan, getattr(settings, 'mip_rel_gap', None))}, verified")]
    up_h = head["up_gpu_h"]
    rows.append(("Planned utilisation", f"{_pct1(head['planned_utilization_pct'])} of {up_h:g} GPU-h "
                                        "(batch GPU-h + real-time GPU-h serving the P50 demand); real-time GPUs "
                                        f"above the P50 demand (the margin toward the P90): "
                                        f"{_pct1(100 * head['rt_margin_gpu_h'] / up_h if up_h else None)} "
                                        f"({head['rt_margin_gpu_h']:g} GPU-h); idle: "
                                        f"{_pct1(100 * head['idle_gpu_h'] / up_h if up_h else None)}"))
    rows.append(("Real-time demand covered", f"P50 {_pct1(head['rt_covered_p50_pct'])}, P90 "
                                             f"{_pct1(head['rt_covered_p90_pct'])} of the forecast GPU-hours"))
    if cal:
        parts = []
        for c in cal:
            cov = "not measured" if c.coverage is None else f"{c.coverage:.2f} ({c.covered}/{c.hours} h)"
            parts.append(f"{'**' if c.flagged else ''}`{c.service}` {cov}{' BELOW TARGET**' if c.flagged else ''}")
        flagged = [c.service for c in cal if c.flagged]
        rows.append(("Recent P90 coverage (measured)", "; ".join(parts) + f" — target {cal[0].target:.2f}; "
                     + (f"**{len(flagged)} below target**" if flagged else "none below target")))
        rows.append(("P(demand > plan)", "; ".join(
            f"`{c.service}` up to {max(c.exceed) if len(c.exceed) else 0:.2f} per step, "
            f"{c.expected_hours_over(inp.step_h):.1f} h of {head['horizon_h']:g} h expected above plan" for c in cal)))
    stopped = [j for j, _ in plan.stops]
    rows.append(("Jobs", f"{head['jobs_queued']} queued: {_verb(head['jobs_start_now'], 'start')} now, "
                         f"{head['jobs_start_later']} later in the horizon, {_verb(head['jobs_waiting'], 'wait')} "
                         f"past it; **{head['jobs_at_risk']} at risk**; {head['jobs_running']} running"
                         + (f", of which **{len(stopped)} stopped at step 0** (preemptible, requeued: "
                            f"{', '.join(stopped)})" if stopped else "")))
    rows.append(("Idle", f"{head['idle_gpu_h']:g} GPU-h ({100 * head['idle_gpu_h'] / up_h if up_h else 0:.0f} %); "
                         f"{plural(head['idle_windows'], 'window')} of ≥ {IDLE_MIN_H:g} h with ≥ "
                         f"{problem.cluster.gpus_per_node} GPUs idle: {head['idle_window_gpu_h']:g} GPU-h"))
    types = type_utilization(inp)
    if types:
        H_h = problem.horizon_steps * inp.step_h
        rows.append(("Per GPU type (batch work)", "; ".join(
            f"{ty or 'untyped'} {plural(n, 'GPU')}: {_pct1(100 * h / (n * H_h) if n else None)} ({h:g} GPU-h)"
            for ty, n, h in types) + "; real-time is counted on the whole cluster, not by type"))
    fresh = []
    for what, v in head["inputs"].items():
        fresh.append(f"{what.replace('_', ' ')} {v['ts']}: {hours_text(v['age_h_at_plan_start'])} before the plan "
                     f"start, {hours_text(v['age_h_now'])} before this report")
    rows.append(("Forecast freshness (newest input)", "; ".join(fresh) or "n/a"))
    m = head["models"]
    jobs_m = ", ".join(model_text(k, v) for k, v in m["jobs"].items()) or "none recorded"
    rt_m = "; ".join(f"`{s}` " + (", ".join(f"{c} {w:.2f}" for c, w in v["weights"].items()) if v.get("weights")
                                  else v.get("status") or "n/a") for s, v in m["realtime"].items())
    rows.append(("Models that forecast", f"job durations: {jobs_m}; real-time (combination weights): {rt_m or 'n/a'}"))
    rows.append(("Plots", " · ".join(f"[{key}]({name})" for key, name in plots.items()) or "none"))
    return rows


def stop_first_lines(table: pd.DataFrame) -> list[str]:
    """"What to do first" bullets of the jobs the plan stops at step 0 (issue 30), before the jobs at risk.

    One per ``stop_now`` row of ``table`` (:mod:`pipelines.report.stops`): the job, its GPUs, the shortfall and
    the GPU-hours lost; none without a stop.
    """
    now = table[table["section"] == "stop_now"] if "section" in table.columns else table.iloc[:0]
    return [f"- **Stop `{r.job_id}` now** ({r.kind}, {plural(int(r.gpus), 'GPU')}, preemptible): real-time is short "
            f"of {plural(int(r.shortfall_gpus), 'GPU')} at step 0; {gpu_h_lost(float(r.value))}; it goes back "
            "to the queue with its remaining work. Apply its line under \"stop now\" in `commands.sh` (gpuplan "
            "never runs it)." for r in now.itertuples()]


def stopped_eta_lines(inp: ReportInputs) -> list[str]:
    """The estimated-start section's lines for the jobs stopped at step 0: they are not queued jobs of the plan.

    A stopped job returns to the queue with its remaining work plus its restart (DESIGN §5): its planned restart
    when the plan has one, else requeued and not yet planned (the next replan plans it). None without a stop.
    """
    plan, p = inp.plan, inp.problem
    if not plan.stops:
        return []
    running = {r.job_id: r for r in p.running}
    starts = {a.job_id: a for a in plan.assignments if not a.running and a.start_step is not None}
    out = [f"Stopped at step 0 ({len(plan.stops)}; not in the table above):", ""]
    for job_id, lost in plan.stops:
        r = running.get(job_id)
        left = "" if r is None else f" ({plural(r.remaining_steps + lost, 'step')} of work left with the lost work)"
        a = starts.get(job_id)
        when = (f"planned restart {clock(step_ts(inp, a.start_step))}" if a is not None else
                "requeued, not yet planned: the next replan plans its restart like any queued job")
        out.append(f"- `{job_id}`: stopped at step 0{left}; {when}.")
    return out + [""]


def stop_lines(inp: ReportInputs, table: pd.DataFrame) -> list[str]:
    """The page's "Preemption" section from ``table``'s stop rows (:mod:`pipelines.report.stops`).

    None without a preemptible running job or stop: the page is then as before issue 30.
    """
    p, plan = inp.problem, inp.plan
    n = sum(1 for r in p.running if r.preemptible)
    if not plan.stops and not n:
        return []
    now = table[table["section"] == "stop_now"]
    later = table[table["section"] == "stop_later"]
    cols = ["job_id", "kind", "gpus", "count", "value", "shortfall_gpus", "reason"]
    heads = {"count": "lost steps", "value": "GPU-h lost", "shortfall_gpus": "real-time short (GPUs)"}
    out = ["## Preemption (opt-in)", "",
           f"{n} of {plural(len(p.running), 'running job')} {'is' if n == 1 else 'are'} preemptible. A job is stopped "
           "only when the services' step-0 demand (each capped by its band and swap cap) exceeds the GPUs no running "
           "job holds; it loses the work since its last checkpoint plus its restart and goes back to the queue.", "",
           f"Stopped now ({len(now)}):", "", md_table(now, cols, headers=heads),
           "Could be stopped at a later replan (the same rule, if real-time demand reached its P90 forecast at that "
           f"step; each job at its first such step) ({len(later)}):", "",
           md_table(later, ["job_id", "kind", "step", "start_ts", *cols[2:]], headers={**heads, "start_ts": "time"})]
    return out


def render_page(inp: ReportInputs, table: pd.DataFrame, plots: Mapping[str, str], run_name: str,
                calibration: Sequence[ServiceCalibration] | None = None,
                head: Mapping[str, Any] | None = None, actions: Sequence[JobAction] | None = None,
                run_folder: str | Path | None = None, links: Sequence[str] = ()) -> str:
    """The Markdown page (plots referenced by relative file name), read first on one screen.

    Sections in order: the headline (:func:`headline_rows`); what to do first (each job at risk with its
    options, :mod:`pipelines.report.actions`; ``actions`` computed when None, their commands naming
    ``run_folder``, else ``run_name``); waiting jobs grouped by reason, the jobs in their way named once
    (:func:`waiting_table`); then the detail sections the HTML page folds (:data:`FOLDED`): real-time
    coverage risk (measured calibration, P(demand > plan), steps below the P90 forecast, the forecast
    status), jobs at risk, estimated start and wait reason of every queued job, long holders, idle
    windows (their rule stated), queue outlook; last the plots (``links``: other files of the run
    folder linked, e.g. the profile plots). The objective and bound are both rounded to 2 decimals.
    """
    plan = inp.plan
    sec = {s: table[table["section"] == s] for s in ("coverage_risk", "rt_calibration", "idle_window", "job_at_risk",
                                                     "queue_eta", "queue_outlook", "long_holder")}
    cal = list(calibration) if calibration is not None else calibrate(inp)
    head = head if head is not None else headline(inp, table, cal)

    def plot(key: str) -> list[str]:
        return [f"![{PLOTS[key][1]}]({plots[key]})", ""] if key in plots else []

    stale = stale_inputs_line(head)
    out = ([stale, ""] if stale else []) + [f"# Risk report — {run_name}", "", "## Headline", "",
                                             "| figure | value |", "|---|---|"]
    out += [f"| {k} | {v.replace('|', '/')} |" for k, v in headline_rows(inp, head, cal, {**plots, **{
        Path(n).stem: n for n in links}})]
    settings = getattr(inp.problem, "settings", None)
    tol = getattr(settings, "mip_rel_gap", None)
    bound = "n/a" if plan.bound is None else f"{plan.bound:.2f}"
    gap = "n/a" if plan.gap is None else f"{pct_text(plan.gap)} %"
    solver = [f"Plan: planner `{plan.planner}`, status {status_text(plan, tol)}, objective {plan.objective:.2f}, "
              f"bound {bound}, solve {plan.solve_s:.1f} s.", ""]  # after the actions: the first screen is theirs
    if plan.status in ("time_limit", "deadline") and not plan.fallback:
        out.append("\n> " + not_proven_text(plan, inp.time_limit_s, gap))
    if plan.fallback:
        out.append(f"\n> **Fallback plan**: the MILP did not return a plan ({plan.message}); this is the best "
                   f"baseline plan.")
    view = plan_view(inp)
    acts = list(actions) if actions is not None else at_risk_actions(inp, view, sec["job_at_risk"],
                                                                       run_folder or run_name)
    out += ["", "## What to do first", ""] + stop_first_lines(table) + action_lines(inp, view, acts) + solver
    out += stop_lines(inp, table)  # issue 30: nothing without a preemptible running job
    out += ["## Waiting jobs by reason", "",
            "Each queued job that does not start at release, by what it waits for; the jobs in its way are "
            "named once per group (the folded table below has every job's own sentence).", "",
            waiting_table(inp, view, sec["queue_eta"])]
    out += ["## Real-time coverage risk", "",
            "Measured on each service's forecast for the last 24 h before the plan start, fitted without that day, "
            "against the actual traffic. The plan gives every service at least its P90 forecast, so the risk is a "
            "P90 that is too low: a service is flagged when its recent P90 coverage is below the target. "
            "P(demand > plan) per step: the share of the recent forecast errors (actual ÷ P50, of the step's "
            "6 h local band when it has 24 of them, else of the whole day) that, applied to the step's P50 "
            "forecast, would need more GPUs than planned.", ""]
    for c in cal:
        out.append(f"- {'**' if c.flagged else ''}`{c.service}`{'**' if c.flagged else ''}: "
                   f"{calibration_text(c, inp.step_h)}")
    cal_rows = sec["rt_calibration"]
    if len(cal_rows):
        wide = []
        for svc in inp.service_names():
            r = cal_rows[cal_rows["service"] == svc]
            if not len(r):
                continue
            row = {"service": svc}
            for _, x in r.iterrows():
                cov = "" if pd.isna(x["value"]) else f"{x['value']:.2f}"
                row[x["label"]] = f"{cov} ({int(x['count'])} h)" if int(x["count"]) else "–"
            wide.append(row)
        wt = pd.DataFrame(wide).fillna("")
        out += ["", "Measured P90 coverage by local hour band (hours scored):", "", md_table(wt, list(wt.columns))]
    out += ["Steps planned below the P90 forecast:", "",
            md_table(sec["coverage_risk"], ["service", "step", "start_ts", "gpus", "shortfall_gpus", "probability",
                                            "reason"], headers={"gpus": "planned GPUs", "start_ts": "time"})]
    out.append("Forecast status:\n")
    for svc in [s for s in inp.service_names() if s in inp.rt_status]:
        status, msg = inp.rt_status[svc]
        out.append(f"- `{svc}`: {status_flag(status)}{(': ' + msg) if msg else ''}")
        why = explain_rt_status(status, msg or "")
        if why:
            out.append(f"  - What this means: {why}")
    out.append("")
    out += ["## Jobs at risk", "",
            "P90 finish at the size the plan chose, against the real deadline (to the second).", "",
            md_table(sec["job_at_risk"], ["job_id", "kind", "gpus", "start_ts", "end_ts", "deadline_ts", "reason"],
                     headers={"end_ts": "p90_finish_ts", "gpus": "planned GPUs"}),
            "## Estimated start of every queued job", "",
            "Why a job waits is judged at its own earliest feasible step (the first step it could run its whole "
            "duration if it were the only queued job): GPUs idle against its size, the aligned block it needs and "
            "who holds it until when.", "",
            md_table(sec["queue_eta"].sort_values("start_ts", kind="stable", na_position="last"),
                     ["job_id", "kind", "value", "gpus", "start_ts", "end_ts", "deadline_ts", "reason"], max_rows=200,
                     headers={"value": "priority", "end_ts": "planned_end_ts", "gpus": "planned GPUs"}),
            *stopped_eta_lines(inp),
            "## Long holders", "",
            f"Batch jobs holding at least one node's GPUs ({inp.problem.cluster.gpus_per_node}) for more than "
            f"{LONG_HOLD_H:g} h.", "",
            md_table(sec["long_holder"], ["job_id", "kind", "gpus", "start_ts", "end_ts", "reason"],
                     headers={"end_ts": "planned_end_ts"}),
            "## Idle windows", "",
            f"Rule: a window is a run of steps with at least one node's GPUs ({inp.problem.cluster.gpus_per_node}) "
            f"idle at every step, lasting at least {IDLE_MIN_H:g} h; shorter or smaller gaps are only counted in the "
            "headline's idle GPU-hours.", "",
            md_table(sec["idle_window"], ["start_ts", "end_ts", "gpus", "value", "reason"],
                     headers={"gpus": "GPUs idle (at least)", "value": "GPU-hours"}),
            "## Queue outlook", ""]
    q = sec["queue_outlook"]
    if len(q):
        every = q.iloc[:: max(1, len(q) // 12)]
        out.append(md_table(every, ["step", "start_ts", "gpus", "value", "reason"],
                            headers={"gpus": "batch GPUs", "value": "jobs waiting", "start_ts": "time"}))
    else:
        out.append("_none_\n")
    out += ["## Plots", ""]
    for key in PLOTS:
        out += plot(key)
    if links:
        out += ["Also written: " + " · ".join(f"[{name}]({name})" for name in links), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def write_risk_report(folder: Path, inp: ReportInputs, run_name: str,
                      table: pd.DataFrame | None = None, run_folder: Path | None = None) -> dict[str, Path]:
    """Write ``risk_report.parquet``, the PNG plots, ``risk_report.md`` and ``risk_report.html`` into ``folder``.

    ``table``: :func:`pipelines.report.risks.build_report_table` of ``inp`` when the caller has it (a run
    builds it once for the report and the summary's headline); built here when None. ``run_folder``: the
    folder the page's ``gpuplan whatif`` lines name (the published run folder when ``folder`` is the
    temporary one it is built in); default ``folder``. Each job at risk with a smaller size that fits
    gets its ``--add-job`` file here (:func:`pipelines.report.actions.resize_job_entry`).
    Each file is written atomically; the HTML embeds the plots (base64 PNG) and loads nothing else
    (:func:`pipelines.report.html.render_html`). Returns name -> path.
    """
    folder = Path(folder)
    table = build_report_table(inp) if table is None else table
    cal = calibrate(inp)
    paths: dict[str, Path] = {}
    with atomic_path(folder / "risk_report.parquet") as tmp:
        table.to_parquet(tmp, index=False)
    paths["risk_report.parquet"] = folder / "risk_report.parquet"
    kinds = {j.job_id: j.kind for j in inp.problem.jobs}
    kinds.update({r.job_id: r.kind for r in inp.problem.running})
    order = inp.service_names()
    units = {n: str(getattr(inp.service(n), "units", "traffic/h")) for n in order}
    draw = {
        "demand": lambda p: plot_demand(inp, p, {c.service: c.exceed for c in cal}),
        "bands": (lambda p: plot_bands(inp.bands, p, order, units)) if inp.bands is not None and len(inp.bands)
        else None,
        "outlook": lambda p: plot_outlook(table[table["section"] == "queue_outlook"], inp.plan.service_gpus,
                                          inp.problem.n_gpus, p, inp.start_ts, inp.step_minutes, order),
        "gantt": lambda p: plot_gantt(inp.problem, inp.plan, kinds, p, inp.start_ts, inp.node_names, order),
    }
    plots: dict[str, str] = {}
    for key, fn in draw.items():
        if fn is None:
            continue
        name = PLOTS[key][0]
        with atomic_path(folder / name) as tmp_png:  # the temporary name keeps ".png" for savefig
            fn(tmp_png)
        paths[name] = folder / name
        plots[key] = name
    head = headline(inp, table, cal)
    view = plan_view(inp)
    named = Path(run_folder) if run_folder is not None else folder.resolve()
    actions = at_risk_actions(inp, view, table[table["section"] == "job_at_risk"], named)
    for act in actions:  # the --add-job file of each smaller-size option, so its what-if line runs as printed
        if act.smaller is not None:
            name = resize_file_name(act.job_id, act.smaller.gpus)
            entry = resize_job_entry(inp, inp.problem.job(act.job_id), act.smaller)
            atomic_write_text(folder / name, json.dumps(entry, indent=1) + "\n")
            paths[name] = folder / name
    links = sorted(p.name for p in folder.glob("profile_*.png"))
    page = render_page(inp, table, plots, run_name, cal, head, actions, named, links)
    atomic_write_text(folder / "risk_report.md", page)
    paths["risk_report.md"] = folder / "risk_report.md"
    ids = [j.job_id for j in inp.problem.jobs] + [r.job_id for r in inp.problem.running]
    atomic_write_text(folder / "risk_report.html", render_html(page, folder, f"Risk report — {run_name}",
                                                               folded=FOLDED, nowrap=ids))
    paths["risk_report.html"] = folder / "risk_report.html"
    return paths
