"""The plots of the pipelines (risk report, real-time profiles, job-model training), PNG via Agg.

Every plot is drawn under :data:`PLOT_LOCK`; :func:`pyplot` gives ``matplotlib.pyplot``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.atomic import atomic_path
from pipelines.report.grid import display_grid
from pipelines.report.risks import ReportInputs

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


@_serialized
def plot_gantt(problem: Any, plan: Any, kinds: Mapping[str, str], path: Path, start_ts: datetime) -> Path:
    """Gantt-style chart: GPUs (y) × steps (x), written to ``path`` (returned).

    Batch blocks coloured by kind (``kinds``: job id -> kind) and labelled, real-time GPUs red,
    down GPUs black, idle left blank.
    """
    plt = pyplot()
    from matplotlib.patches import Patch, Rectangle  # lazily, like pyplot() (import cost)

    H, N = problem.horizon_steps, problem.n_gpus
    grid = display_grid(problem, plan)
    fig, ax = plt.subplots(figsize=(14, max(4, N * 0.12)))
    for t in range(H):
        for g in range(N):
            o = grid[t][g]
            if o.startswith("service:"):
                c = KIND_COLORS["realtime"]
            elif o == "down":
                c = "black"
            elif o:
                c = KIND_COLORS.get(kinds.get(o, ""), "#9467bd")
            else:
                continue
            ax.add_patch(Rectangle((t, g), 1, 1, color=c, lw=0, alpha=0.85))
    for a in plan.assignments:
        if a.start_step is None:
            continue
        ax.add_patch(Rectangle((a.start_step, a.block_offset), min(H, a.end_step) - a.start_step, a.gpus,
                               fill=False, ec="black", lw=0.6))
        if a.gpus >= 2 and min(H, a.end_step) - a.start_step >= 3:
            ax.text(a.start_step + 0.2, a.block_offset + a.gpus / 2, a.job_id, fontsize=6, va="center")
    ax.set_xlim(0, H)
    ax.set_ylim(0, N)
    ax.set_xlabel(f"step ({problem.cluster.step_minutes} min) from {start_ts:%Y-%m-%d %H:%M}Z")
    ax.set_ylabel("GPU")
    ax.set_title(f"plan ({plan.planner}, {plan.status})")
    ax.legend(handles=[Patch(color=c, label=k) for k, c in KIND_COLORS.items()], loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


@_serialized
def plot_demand(inp: ReportInputs, path: Path) -> Path:
    """Per service: P50 and P90 GPU demand forecast, the planned GPUs, and coverage-risk steps."""
    plt = pyplot()
    svcs = list(inp.plan.service_gpus)
    fig, axes = plt.subplots(max(1, len(svcs)), 1, figsize=(11, 2.8 * max(1, len(svcs))), squeeze=False)
    for ax, svc in zip(axes[:, 0], svcs):
        d = inp.demand[inp.demand["service"] == svc].sort_values("step")
        x = d["step"].to_numpy()
        ax.fill_between(x, d["demand_gpus_p50"], d["demand_gpus_p90"], step="post", alpha=0.3, label="P50–P90 demand")
        ax.step(x, d["demand_gpus_p50"], where="post", lw=1, label="P50 demand")
        ax.step(np.arange(len(inp.plan.service_gpus[svc])), inp.plan.service_gpus[svc], where="post", color="black",
                lw=1.5, label="planned GPUs")
        status = inp.rt_status.get(svc, ("ok", ""))[0]
        ax.set_title(f"{svc} (profile status: {status})", fontsize=9)
        ax.set_ylabel("GPUs")
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


@_serialized
def plot_bands(bands: pd.DataFrame, path: Path) -> Path:
    """Forecast against actual: per service, actual traffic with the P50 line and P50–P90 band."""
    plt = pyplot()
    svcs = sorted(bands["service"].unique())
    fig, axes = plt.subplots(max(1, len(svcs)), 1, figsize=(11, 2.8 * max(1, len(svcs))), squeeze=False)
    for ax, svc in zip(axes[:, 0], svcs):
        b = bands[bands["service"] == svc].sort_values("ts")
        ax.fill_between(b["ts"], b["p50"], b["p90"], alpha=0.3, label="P50–P90 forecast")
        ax.plot(b["ts"], b["p50"], lw=1, label="P50 forecast")
        ax.plot(b["ts"], b["actual"], color="black", lw=1, label="actual")
        ax.set_title(svc, fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


@_serialized
def plot_outlook(outlook: pd.DataFrame, rt: np.ndarray, n_gpus: int, path: Path) -> Path:
    """Queue outlook: GPUs used by batch work and real-time per step, and jobs still waiting."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 3.2))
    x = outlook["step"].to_numpy(dtype=int)
    batch = outlook["gpus"].to_numpy(dtype=float)
    ax.stackplot(x, batch, rt[: len(x)], labels=["batch GPUs", "real-time GPUs"],
                 colors=[KIND_COLORS["training"], KIND_COLORS["realtime"]], alpha=0.7, step="post")
    ax.axhline(n_gpus, color="grey", ls="--", lw=1)
    ax.set_ylabel("GPUs")
    ax2 = ax.twinx()
    ax2.step(x, outlook["value"], where="post", color="black", label="jobs waiting")
    ax2.set_ylabel("jobs waiting")
    ax.legend(loc="upper left", fontsize=7)
    ax2.legend(loc="upper right", fontsize=7)
    ax.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_profile(name: str, prof: Any, fc: pd.DataFrame, bands: pd.DataFrame, as_of: datetime, png: Path) -> None:
    """One service's real-time profile, written atomically to ``png``.

    Top: the 168 h P50/P90 forecast from ``as_of`` (``fc``: ``ts, p50, p90``); bottom: the last
    shipped day's 24 h-ahead forecast against actual (``bands``: ``ts, actual, p50, p90``, traffic
    units). ``prof`` is the fitted profile (its ``status`` goes in the title).
    """
    b = bands
    with PLOT_LOCK:
        plt = pyplot()
        fig, axes = plt.subplots(2, 1, figsize=(11, 6))
        axes[0].fill_between(fc["ts"], fc["p50"], fc["p90"], alpha=0.3, label="P50–P90")
        axes[0].plot(fc["ts"], fc["p50"], lw=1, label="P50")
        axes[0].set_title(f"{name}: 168 h demand profile from {as_of:%Y-%m-%d %H:%M}Z ({prof.status})")
        axes[0].legend(fontsize=7)
        axes[1].fill_between(b["ts"], b["p50"], b["p90"], alpha=0.3, label="P50–P90 forecast")
        axes[1].plot(b["ts"], b["actual"], color="black", lw=1, label="actual")
        axes[1].set_title("last shipped day: 24 h-ahead forecast against actual")
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        with atomic_path(png) as tmp_png:  # the temporary name keeps ".png" for savefig
            fig.savefig(tmp_png, dpi=80)
        plt.close(fig)


def plot_pred_vs_actual(kind: str, pred: pd.DataFrame, actual: np.ndarray, ok: np.ndarray, doc: dict,
                        png: Path) -> None:
    """Held-out jobs of one kind, log-log, written atomically to ``png``.

    Predicted P50 duration (bars P10–P90, hours; ``pred`` has ``duration_p10_h, duration_p50_h,
    duration_p90_h``) against the actual duration (hours, ``actual``), over the rows where ``ok``
    (bool mask of the same length); ``doc["metrics"]["mape"]`` goes in the title.
    """
    with PLOT_LOCK:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 5))
        p50 = pred["duration_p50_h"].to_numpy(float)
        ax.errorbar(actual[ok], p50[ok], yerr=[p50[ok] - pred["duration_p10_h"].to_numpy(float)[ok],
                                               pred["duration_p90_h"].to_numpy(float)[ok] - p50[ok]],
                    fmt=".", ms=3, alpha=0.4, elinewidth=0.5)
        lo, hi = float(actual[ok].min()), float(actual[ok].max())
        ax.plot([lo, hi], [lo, hi], color="black", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("actual duration (h)")
        ax.set_ylabel("predicted P50 (h), bars P10–P90")
        ax.set_title(f"{kind}: held-out jobs (MAPE {doc['metrics']['mape']:.3f})")
        fig.tight_layout()
        with atomic_path(png) as tmp_png:  # the temporary name keeps ".png" for savefig
            fig.savefig(tmp_png, dpi=80)
        plt.close(fig)
