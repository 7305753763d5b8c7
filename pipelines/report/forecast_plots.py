"""The forecasters' plots: a real-time service's profile run and a job model's predicted against actual.

Drawn with the conventions and under the lock of :mod:`pipelines.report.plots`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.io.atomic import atomic_path
from pipelines.report.plots import PLOT_LOCK, date_axis, legend_outside, pyplot, traffic_scale, value_axis


def plot_profile(name: str, prof: Any, fc: pd.DataFrame, bands: pd.DataFrame, as_of: datetime, png: Path,
                 units: str = "traffic per hour (the service's units)") -> None:
    """One service's real-time profile, written atomically to ``png``.

    Top: the 168 h P50/P90 forecast from ``as_of`` (``fc``: ``ts, p50, p90``); bottom: the last
    shipped day's 24 h-ahead forecast against actual (``bands``: ``ts, actual, p50, p90``, traffic
    units per hour, ``units``). ``prof`` is the fitted profile (its ``status`` goes in the title).
    """
    b = bands
    with PLOT_LOCK:
        plt = pyplot()
        fig, axes = plt.subplots(2, 1, figsize=(11, 6.4))
        top = float(np.nanmax(np.r_[fc["p90"].to_numpy(float), b["actual"].to_numpy(float), b["p90"].to_numpy(float)]))
        div, label = traffic_scale(top, units)
        fts = pd.to_datetime(fc["ts"], utc=True).dt.tz_localize(None)
        bts = pd.to_datetime(b["ts"], utc=True).dt.tz_localize(None)
        axes[0].fill_between(fts, fc["p50"] / div, fc["p90"] / div, alpha=0.3, label="P50–P90")
        axes[0].plot(fts, fc["p50"] / div, lw=1, label="P50")
        axes[0].set_title(f"{name}: 168 h demand profile from {as_of:%Y-%m-%d %H:%M}Z ({prof.status})", fontsize=9)
        axes[1].fill_between(bts, b["p50"] / div, b["p90"] / div, alpha=0.3, label="P50–P90 forecast")
        axes[1].plot(bts, b["actual"] / div, color="black", lw=1, label="actual")
        axes[1].set_title("last shipped day: 24 h-ahead forecast against actual", fontsize=9)
        for ax, x in zip(axes, (fts, bts)):
            value_axis(ax, label)
            date_axis(ax, x)
            legend_outside(ax)
        fig.tight_layout()
        with atomic_path(png) as tmp_png:  # the temporary name keeps ".png" for savefig
            fig.savefig(tmp_png, dpi=80, bbox_inches="tight")
        plt.close(fig)


def plot_pred_vs_actual(kind: str, pred: pd.DataFrame, actual: np.ndarray, ok: np.ndarray, doc: dict,
                        png: Path) -> None:
    """Held-out jobs of one kind, log-log, written atomically to ``png``.

    Predicted P50 duration (bars P10–P90, hours; ``pred`` has ``duration_p10_h, duration_p50_h,
    duration_p90_h``) against the actual duration (hours, ``actual``), over the rows where ``ok``
    (bool mask of the same length); with a ``analytic_h`` column, the analytic baseline's durations
    as crosses; ``doc["metrics"]["mape"]`` and the MAE ratio to the analytic baseline go in the title.
    """
    with PLOT_LOCK:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 5))
        p50 = pred["duration_p50_h"].to_numpy(float)
        ax.errorbar(actual[ok], p50[ok], yerr=[p50[ok] - pred["duration_p10_h"].to_numpy(float)[ok],
                                               pred["duration_p90_h"].to_numpy(float)[ok] - p50[ok]],
                    fmt=".", ms=3, alpha=0.4, elinewidth=0.5,
                    label="model P50 (bars P10–P90)")
        if "analytic_h" in pred:  # the strongest baseline, drawn beside the model (issue 33)
            ax.plot(actual[ok], pred["analytic_h"].to_numpy(float)[ok], "x", ms=3, color="tab:red", alpha=0.5,
                    label="analytic baseline")
        lo, hi = float(actual[ok].min()), float(actual[ok].max())
        ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="actual = predicted")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("actual duration (h)")
        ax.set_ylabel("predicted duration (h)")
        ax.legend(loc="upper left", fontsize=8)
        base = (doc.get("baselines") or {}).get("analytic", {}).get("mae_h")
        ratio = f", MAE {doc['metrics']['mae_h'] / base:.3f} × analytic baseline" if base else ""
        ax.set_title(f"{kind}: held-out jobs (MAPE {doc['metrics']['mape']:.3f}{ratio})", fontsize=9)
        fig.tight_layout()
        with atomic_path(png) as tmp_png:  # the temporary name keeps ".png" for savefig
            fig.savefig(tmp_png, dpi=80)
        plt.close(fig)
