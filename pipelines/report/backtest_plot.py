"""The real-time backtest's forecast-against-actual plot, logged with the nightly real-time accuracy run.

One panel per service over every scored hour of the rolling-origin backtest
(:func:`pipelines.stages.realtime.backtest_report`, ``hours_out``): the actual traffic, the day-ahead P50
with its P50–P90 band, and the two baselines the MASE is measured against (seasonal naive ``y[t-168]``
and naive ``y[t-24]``). Time axis in UTC with the zone in its label; value axis in the service's units
per hour with thousands separators (no offset or ×1e7 factor). Drawn under
:data:`pipelines.report.plots.PLOT_LOCK` (pyplot is not thread-safe).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from pipelines.report.plots import PLOT_LOCK, pyplot


def plot_backtest(hours: Mapping[str, pd.DataFrame], units: Mapping[str, str], path: Path) -> Path:
    """Draw the backtest's forecast against actual of every service (``hours``: service -> frame) into ``path``.

    Each frame has ``ts`` (UTC), ``actual``, ``p50``, ``p90``, ``snaive168``, ``naive24``; ``units``:
    service -> traffic units (``requests/h``). Returns ``path``.
    """
    with PLOT_LOCK:
        plt = pyplot()
        from matplotlib.dates import DateFormatter
        from matplotlib.ticker import FuncFormatter

        names = list(hours)
        fig, axes = plt.subplots(max(1, len(names)), 1, figsize=(12, 3.2 * max(1, len(names))), squeeze=False)
        for ax, name in zip(axes[:, 0], names):
            h = hours[name].sort_values("ts")
            ts = pd.to_datetime(h["ts"], utc=True)
            ax.fill_between(ts, h["p50"], h["p90"], color="#1f77b4", alpha=0.25, label="P50–P90 forecast (day ahead)")
            ax.plot(ts, h["p50"], color="#1f77b4", lw=1.2, label="P50 forecast (day ahead)")
            ax.plot(ts, h["snaive168"], color="grey", lw=0.9, ls="--", label="seasonal naive 168 h")
            ax.plot(ts, h["naive24"], color="#ff7f0e", lw=0.9, ls=":", label="naive 24 h")
            ax.plot(ts, h["actual"], color="black", lw=1.2, label="actual")
            ax.set_title(f"{name}: rolling-origin backtest, {len(h)} scored hours", fontsize=9)
            ax.set_ylabel(units.get(name, "traffic/h"))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
            ax.xaxis.set_major_formatter(DateFormatter("%m-%d %H:%M", tz="UTC"))
            ax.set_xlabel("time (UTC)")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
    return path
