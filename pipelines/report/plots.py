"""The plots of the risk report and the conventions and lock every plot of the pipelines shares, PNG via Agg.

The forecasters' plots (real-time profiles, job-model training) are in :mod:`pipelines.report.forecast_plots`.

Conventions of every plot here (issue 14 "plots read as plots"):

- time axes show clock times with their zone (UTC, ``HH:MM`` with the date at each new day); a
  plan's step axis is labelled the same way (:func:`clock_axis`);
- every value axis names its unit (``GPUs``, ``jobs``, ``million requests/h``, ``probability``)
  and never uses matplotlib's offset or ``×1e7`` notation (:func:`traffic_scale`);
- legends sit outside the axes, right of the data (:func:`legend_outside`);
- services keep one order (the problem's) and one colour (:func:`service_colors`) in every plot, and
  batch work one colour per kind (:data:`KIND_COLORS`).

Every plot is drawn under :data:`PLOT_LOCK`; :func:`pyplot` gives ``matplotlib.pyplot``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.report.basics import ReportInputs
from pipelines.report.grid import display_grid

#: pyplot and matplotlib's mathtext parser (log-axis tick labels) are not thread-safe; every
#: plot in the pipelines is drawn under this lock (tasks may run in Prefect's thread pool).
PLOT_LOCK = threading.RLock()


def _serialized(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with PLOT_LOCK:
            return fn(*args, **kwargs)

    return wrapper


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the non-interactive Agg backend selected; call it under :data:`PLOT_LOCK`.

    matplotlib is imported here, not at the top of the module: ``import matplotlib.pyplot`` costs
    ~0.35-0.5 s (measured on the 2-core machine, after pandas), paid only by the commands that draw.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: Colour per job kind, real-time and idle in the plan plots (matplotlib tab10 colours).
KIND_COLORS = {"training": "#1f77b4", "quantization": "#ff7f0e", "batch_inference": "#2ca02c",
               "realtime": "#d62728", "idle": "#f0f0f0"}
#: Colours of the real-time services, in the problem's service order (tab10 colours not used by a kind).
SERVICE_PALETTE = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
#: Colour of down GPUs and of the unknown kind.
DOWN_COLOR, OTHER_COLOR = "#000000", "#aaaaaa"
#: DPI of the report's PNGs.
DPI = 90


def service_colors(names: Sequence[str]) -> dict[str, str]:
    """One colour per service, by position in ``names`` (the problem's order), cycling :data:`SERVICE_PALETTE`."""
    return {n: SERVICE_PALETTE[i % len(SERVICE_PALETTE)] for i, n in enumerate(names)}


def traffic_scale(max_value: float, units: str) -> tuple[float, str]:
    """(divisor, axis label) for traffic values up to ``max_value``: ``(1e6, "million requests/h")``.

    Thousands from 1e4, millions from 1e6, billions from 1e9 (ticks read at most a few digits); the
    label always carries ``units``.
    """
    for div, word in ((1e9, "billion"), (1e6, "million"), (1e3, "thousand")):
        if max_value >= div * (10 if div == 1e3 else 1):
            return div, f"{word} {units}"
    return 1.0, units


def clock_axis(ax: Any, start_ts: datetime, step_minutes: int, n_steps: int, max_ticks: int = 13) -> None:
    """Label a step axis (x = step index, 0..n_steps) with clock times: ``HH:MM`` UTC, the date at each new day.

    Ticks fall on whole hours every 1, 2, 3, 4, 6, 12 or 24 h (the smallest giving at most
    ``max_ticks`` ticks); the axis label says ``time (UTC; one step = N min)``.
    """
    t0 = pd.Timestamp(start_ts).tz_convert("UTC")
    span_h = n_steps * step_minutes / 60.0
    every = next((h for h in (1, 2, 3, 4, 6, 12, 24, 48, 168) if span_h / h <= max_ticks - 1), 168)
    first = t0.ceil(f"{every}h") if every <= 24 else t0.ceil("D")
    ticks, labels, last_day = [], [], None
    ts = first
    while ts <= t0 + pd.Timedelta(minutes=n_steps * step_minutes):
        x = (ts - t0) / pd.Timedelta(minutes=step_minutes)
        ticks.append(x)
        labels.append(f"{ts:%H:%M}" + (f"\n{ts:%b %d}" if ts.date() != last_day else ""))
        last_day = ts.date()
        ts += pd.Timedelta(hours=every)
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlim(0, n_steps)
    ax.set_xlabel(f"time (UTC; one step = {step_minutes} min)")


def date_axis(ax: Any, ts: Sequence[Any], max_ticks: int = 13) -> None:
    """A datetime x axis (naive UTC values ``ts``) in clock times with the zone: ``HH:MM`` and the date, UTC.

    Ticks on whole hours every 1, 2, 3, 4, 6, 12 or 24 h (the smallest giving at most ``max_ticks``), or
    daily for longer spans.
    """
    import matplotlib.dates as mdates

    t = pd.to_datetime(pd.Series(list(ts)))
    span_h = (t.max() - t.min()) / pd.Timedelta(hours=1) if len(t) else 24.0
    every = next((h for h in (1, 2, 3, 4, 6, 12, 24) if span_h / h <= max_ticks - 1), None)
    if every is None or every == 24:
        ax.xaxis.set_major_locator(mdates.DayLocator(interval=max(1, int(span_h / 24 / (max_ticks - 1)) + 1)))
    else:
        ax.xaxis.set_major_locator(mdates.HourLocator(byhour=range(0, 24, every)))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M\n%b %d"))
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xlabel("time (UTC)")


def value_axis(ax: Any, label: str) -> None:
    """Name a y axis with its unit and turn off matplotlib's offset / scientific notation."""
    from matplotlib.ticker import ScalarFormatter

    ax.set_ylabel(label)
    fmt = ScalarFormatter(useOffset=False)
    fmt.set_scientific(False)
    ax.yaxis.set_major_formatter(fmt)


def legend_outside(ax: Any, handles: Sequence[Any] | None = None, **kw: Any) -> Any:
    """A legend right of the axes (clear of the data), top-aligned."""
    args = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, "fontsize": 8,
            "frameon": False, **kw}
    return ax.legend(handles=handles, **args) if handles is not None else ax.legend(**args)


def _save(fig: Any, path: Path, dpi: int = DPI) -> None:
    fig.savefig(path, dpi=dpi, bbox_inches="tight")



def node_rows(problem: Any, node_names: Sequence[str] | None = None) -> tuple[list[tuple[int, int, str]], list[str]]:
    """The Gantt's y-axis: ``([(first GPU, end GPU, name)], labels)``, one per node, in GPU-index order.

    A typed cluster (``problem.cluster.nodes``, issue 26): its nodes as the problem lays them out
    (:attr:`optimizer.problem.Cluster.node_offsets`, sizes and GPU types may differ), labelled ``name (type)`` and
    their GPU range, and the layout's padding GPUs past the last node (shown down) as one ``padding`` row. Else
    ``n_gpus // gpus_per_node`` nodes of ``gpus_per_node``, named by ``node_names`` when it has one name per node
    (else ``node-00`` ...). A 1-GPU node's label is one line (``name (type) GPU i``).
    """
    c = problem.cluster
    rows: list[tuple[int, int, str]] = []
    if getattr(c, "typed", False):
        for o, nd in zip(c.node_offsets, c.nodes, strict=True):
            rows.append((o, o + nd.gpus, f"{nd.name} ({nd.gpu_type})"))
        end = rows[-1][1] if rows else 0
        if end < problem.n_gpus:
            rows.append((end, problem.n_gpus, "padding"))
    else:
        gpn = c.gpus_per_node
        k = max(1, problem.n_gpus // gpn)
        names = list(node_names) if node_names and len(node_names) == k else [f"node-{i:02d}" for i in range(k)]
        rows = [(i * gpn, (i + 1) * gpn, n) for i, n in enumerate(names)]
    labels = [f"{n} GPU {lo}" if hi - lo == 1 else f"{n}\nGPUs {lo}-{hi - 1}" for lo, hi, n in rows]
    return rows, labels


@_serialized
def plot_gantt(problem: Any, plan: Any, kinds: Mapping[str, str], path: Path, start_ts: datetime,
               node_names: Sequence[str] | None = None, services: Sequence[str] | None = None) -> Path:
    """Gantt-style chart of the plan: GPUs (y, by node) × time (x), written to ``path`` (returned).

    Batch blocks coloured by kind (``kinds``: job id -> kind), outlined and labelled with their job id
    where the block is wide enough; a block that runs past the horizon says until when. Real-time GPUs
    in their service's colour (counted, drawn on the highest free GPUs), down GPUs black, idle blank.
    """
    plt = pyplot()
    from matplotlib.patches import Patch, Rectangle  # lazily, like pyplot() (import cost)

    H, N = problem.horizon_steps, problem.n_gpus
    step_min = problem.cluster.step_minutes
    svc_order = list(services) if services is not None else list(plan.service_gpus)
    colors = service_colors(svc_order)
    grid = display_grid(problem, plan)
    fig_w, fig_h = 15.0, max(4.5, N * 0.14)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    step_in, gpu_in = 0.74 * fig_w / H, 0.85 * fig_h / N  # inches per step and per GPU row (axes ~74 % x 85 %)
    for t in range(H):
        g = 0
        while g < N:  # runs of the same owner on consecutive GPUs: one rectangle each
            o = grid[t][g]
            u = g
            while u + 1 < N and grid[t][u + 1] == o:
                u += 1
            if o:
                if o.startswith("service:"):
                    c = colors.get(o.split(":", 1)[1], KIND_COLORS["realtime"])
                elif o == "down":
                    c = DOWN_COLOR
                else:
                    c = KIND_COLORS.get(kinds.get(o, ""), OTHER_COLOR)
                ax.add_patch(Rectangle((t, g), 1, u - g + 1, color=c, lw=0, alpha=0.85))
            g = u + 1
    t0 = pd.Timestamp(start_ts)
    for a in plan.assignments:
        if a.start_step is None:
            continue
        x0, x1 = max(0, a.start_step), min(H, a.end_step)
        ax.add_patch(Rectangle((x0, a.block_offset), x1 - x0, a.gpus, fill=False, ec="black", lw=0.6))
        label = a.job_id
        if a.end_step > H:
            end = t0 + pd.Timedelta(minutes=a.end_step * step_min)
            label += f" → {end:%b %d %H:%M}Z"
        font = 7.5 if a.gpus >= 2 else 7.0  # a 1-GPU row is 0.14 in (10 pt) tall: 7 pt fits (5.5 pt read as ~5 px)
        if (x1 - x0) * step_in >= 0.075 * len(label) * font / 7.5:  # ~0.075 in per character at 7.5 pt
            ax.text(x0 + 0.15, a.block_offset + a.gpus / 2, label, fontsize=font, va="center", ha="left",
                    clip_on=True)
        elif a.gpus * gpu_in >= 0.06 * len(label) and (x1 - x0) * step_in >= 0.1:  # vertical, 6 pt
            ax.text(x0 + (x1 - x0) / 2, a.block_offset + a.gpus / 2, label, fontsize=6, va="center", ha="center",
                    rotation=90, clip_on=True)
    ticks, labels = node_rows(problem, node_names)
    for lo in sorted({lo for lo, _hi, _lab in ticks} - {0}):
        ax.axhline(lo, color="#555555", lw=0.5, ls=":")
    ax.set_yticks([(lo + hi) / 2 for lo, hi, _lab in ticks])
    ax.set_yticklabels(labels, fontsize=7 if all(hi - lo >= 2 for lo, hi, _ in ticks) else 6)
    ax.set_ylim(0, N)
    ax.set_ylabel("GPUs (by node)")
    clock_axis(ax, start_ts, step_min, H)
    ax.set_title(f"Plan ({plan.planner}, {plan.status}): {H} steps × {step_min} min from {t0:%Y-%m-%d %H:%M}Z")
    handles = [Patch(color=KIND_COLORS[k], label=k.replace("_", " ")) for k in ("training", "quantization",
                                                                                "batch_inference")]
    handles += [Patch(color=colors[s], label=f"real-time {s}") for s in svc_order]
    if any(o == "down" for row in grid for o in row):  # no legend entry for what the chart does not show
        handles.append(Patch(color=DOWN_COLOR, label="down"))
    handles.append(Patch(facecolor="white", edgecolor="#999999", label="idle"))
    legend_outside(ax, handles)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path



@_serialized
def plot_demand(inp: ReportInputs, path: Path, exceed: Mapping[str, np.ndarray] | None = None) -> Path:
    """Per service: P50 and P90 GPU demand forecast, the planned GPUs and P(demand > plan) per step.

    ``exceed``: service -> P(demand > plan) per step (:mod:`pipelines.report.calibration`), drawn on a
    right-hand probability axis when given and not 0 at every step (then the title says so, no legend entry).
    """
    plt = pyplot()
    svcs = inp.service_names()
    colors = service_colors(svcs)
    H = inp.problem.horizon_steps
    fig, axes = plt.subplots(max(1, len(svcs)), 1, figsize=(12, 2.9 * max(1, len(svcs))), squeeze=False)
    for ax, svc in zip(axes[:, 0], svcs):
        d = inp.demand[inp.demand["service"] == svc].sort_values("step")
        x = np.append(d["step"].to_numpy(), len(d))
        p50 = np.append(d["demand_gpus_p50"].to_numpy(float), d["demand_gpus_p50"].to_numpy(float)[-1:])
        p90 = np.append(d["demand_gpus_p90"].to_numpy(float), d["demand_gpus_p90"].to_numpy(float)[-1:])
        ax.fill_between(x, p50, p90, step="post", alpha=0.25, color=colors[svc], label="P50–P90 demand forecast")
        ax.step(x, p50, where="post", lw=1, color=colors[svc], label="P50 demand forecast")
        planned = np.asarray(inp.plan.service_gpus.get(svc, ()), dtype=float)
        ax.step(np.arange(len(planned) + 1), np.append(planned, planned[-1:]), where="post", color="black", lw=1.5,
                label="planned GPUs")
        status = inp.rt_status.get(svc, ("ok", ""))[0]
        p_svc = np.asarray(exceed[svc], dtype=float) if exceed is not None and svc in exceed else None
        zero = p_svc is not None and len(p_svc) > 0 and float(p_svc.max()) == 0.0
        ax.set_title(f"{svc}: demand forecast and planned GPUs (profile status: {status})"
                     + ("; P(demand > plan) = 0 at every step" if zero else ""), fontsize=9)
        value_axis(ax, "GPUs")
        ax.set_ylim(bottom=0)
        clock_axis(ax, inp.start_ts, inp.step_minutes, H)
        lines = list(ax.get_legend_handles_labels()[0])
        if p_svc is not None and not zero:  # a line that is 0 everywhere is said in the title, not drawn
            ax2 = ax.twinx()
            p = p_svc
            ax2.step(np.arange(len(p) + 1), np.append(p, p[-1:]), where="post", color="#444444", lw=1, ls="--",
                     label="P(demand > plan)")
            ax2.set_ylim(0, 1)
            ax2.set_ylabel("P(demand > plan)\n(probability)", fontsize=8)
            lines += ax2.get_legend_handles_labels()[0]
        legend_outside(ax, lines, bbox_to_anchor=(1.08, 1.0))
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path



@_serialized
def plot_bands(bands: pd.DataFrame, path: Path, services: Sequence[str] | None = None,
               units: Mapping[str, str] | None = None) -> Path:
    """Forecast against actual: per service, actual traffic, the P50 line and P50–P90 band, hours above P90.

    ``services``: the order (default: as they appear); ``units``: service -> traffic units per hour
    (default ``"traffic/h"``).
    """
    plt = pyplot()
    svcs = list(services) if services is not None else list(dict.fromkeys(bands["service"]))
    svcs = [s for s in svcs if (bands["service"] == s).any()]
    colors = service_colors(list(services) if services is not None else svcs)
    fig, axes = plt.subplots(max(1, len(svcs)), 1, figsize=(12, 2.9 * max(1, len(svcs))), squeeze=False)
    for ax, svc in zip(axes[:, 0], svcs):
        b = bands[bands["service"] == svc].sort_values("ts")
        ts = pd.to_datetime(b["ts"], utc=True).dt.tz_convert("UTC").dt.tz_localize(None)
        u = (units or {}).get(svc, "traffic/h")
        div, label = traffic_scale(float(np.nanmax(b[["actual", "p90"]].to_numpy(float))), u)
        ax.fill_between(ts, b["p50"] / div, b["p90"] / div, alpha=0.25, color=colors[svc], label="P50–P90 forecast")
        ax.plot(ts, b["p50"] / div, lw=1, color=colors[svc], label="P50 forecast")
        ax.plot(ts, b["actual"] / div, color="black", lw=1.2, label="actual")
        above = b["actual"].to_numpy(float) > b["p90"].to_numpy(float)
        if above.any():
            ax.plot(ts[above], b["actual"].to_numpy(float)[above] / div, "o", ms=4, color="#d62728",
                    label="actual above P90")
        ok = b["actual"].notna()
        cov = float((b["actual"][ok] <= b["p90"][ok]).mean()) if ok.any() else float("nan")
        ax.set_title(f"{svc}: 24 h-ahead forecast against actual (P90 covered {cov:.2f} of {int(ok.sum())} h)",
                     fontsize=9)
        value_axis(ax, label)
        date_axis(ax, ts)
        legend_outside(ax)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path



@_serialized
def plot_outlook(outlook: pd.DataFrame, service_gpus: Mapping[str, Sequence[int]], n_gpus: int, path: Path,
                 start_ts: datetime, step_minutes: int, services: Sequence[str] | None = None) -> Path:
    """Queue outlook: GPUs per step by use (batch, each service, idle) and the jobs still waiting.

    ``outlook``: the ``queue_outlook`` rows (``step``, ``gpus`` batch GPUs, ``value`` jobs waiting);
    ``service_gpus``: the plan's GPUs per service and step.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(12, 3.6))
    x = outlook["step"].to_numpy(dtype=int)
    n = len(x)
    xs = np.append(x, n)
    svcs = list(services) if services is not None else list(service_gpus)
    colors = service_colors(svcs)
    ys = [outlook["gpus"].to_numpy(dtype=float)]
    labels, cols = ["batch jobs"], [KIND_COLORS["training"]]
    for s in svcs:
        ys.append(np.asarray(service_gpus[s][:n], dtype=float))
        labels.append(f"real-time {s}")
        cols.append(colors[s])
    used = np.sum(ys, axis=0)
    ys.append(np.maximum(0, n_gpus - used))
    labels.append("idle")
    cols.append("#e8e8e8")
    ax.stackplot(xs, *[np.append(y, y[-1:]) for y in ys], labels=labels, colors=cols, alpha=0.85, step="post")
    ax.axhline(n_gpus, color="grey", ls="--", lw=1)
    value_axis(ax, "GPUs")
    ax.set_ylim(0, n_gpus * 1.02)
    ax2 = ax.twinx()
    w = outlook["value"].to_numpy(dtype=float)
    ax2.step(xs, np.append(w, w[-1:]), where="post", color="black", lw=1.5, label="jobs waiting")
    ax2.set_ylabel("jobs waiting (count)")
    ax2.set_ylim(bottom=0)
    clock_axis(ax, start_ts, step_minutes, n)
    legend_outside(ax, ax.get_legend_handles_labels()[0][::-1] + ax2.get_legend_handles_labels()[0],
                   bbox_to_anchor=(1.07, 1.0))
    ax.set_title("Queue outlook: GPUs by use and jobs waiting", fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path
