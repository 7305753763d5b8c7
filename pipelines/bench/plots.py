"""The benchmark's plots (``plots/*.png`` beside ``bench.csv``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from pipelines.bench.run import BenchResult
from pipelines.io.atomic import atomic_write_bytes
from pipelines.report.plots import PLOT_LOCK, pyplot


def write_plots(res: BenchResult, out_dir: Path) -> list[str]:
    """Write the benchmark plots under ``out_dir/plots``; returns their paths relative to ``out_dir``.

    Utilisation over time per planner and GPUs in use stacked by workload kind (one figure per
    scenario each), and value/utilisation bars over all scenarios. PNG, matplotlib Agg, drawn
    under :data:`pipelines.report.plots.PLOT_LOCK`.
    """
    with PLOT_LOCK:
        return _write_plots(res, out_dir, pyplot())


def _write_plots(res: BenchResult, out_dir: Path, plt: Any) -> list[str]:
    plot_dir = Path(out_dir) / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    written = []

    def save(fig, name: str) -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
        plt.close(fig)
        atomic_write_bytes(plot_dir / name, buf.getvalue())
        written.append(f"plots/{name}")

    for scen in res.config.scenarios:
        sims = [(p, s) for (sc, p), s in res.sims.items() if sc == scen]
        if not sims:
            continue
        fig, ax = plt.subplots(figsize=(9, 3.6))
        for p, s in sims:
            ax.plot([x * s.step_h for x in range(s.n_steps)], _util_series(s), label=p, lw=1.2)
        ax.set(xlabel="hours", ylabel="utilised GPUs (%)", title=f"{scen}: utilisation over time", ylim=(0, 105))
        ax.legend(fontsize=8, ncol=len(sims))
        fig.tight_layout()
        save(fig, f"util_{scen}.png")

        fig, axes = plt.subplots(len(sims), 1, figsize=(9, 1.9 * len(sims)), sharex=True, squeeze=False)
        for ax, (p, s) in zip(axes[:, 0], sims, strict=True):
            hours = [x * s.step_h for x in range(s.n_steps)]
            kinds = [k for k in ("training", "quantization", "batch_inference") if k in s.batch_gpus]
            rt = [sum(s.service_gpus[n][t] for n in s.service_gpus) for t in range(s.n_steps)]
            ax.stackplot(hours, *[s.batch_gpus[k] for k in kinds], rt, labels=[*kinds, "real-time (allocated)"],
                         step="post")
            dem = [sum(s.service_demand[n][t] for n in s.service_demand) for t in range(s.n_steps)]
            ax.step(hours, dem, where="post", color="k", lw=0.8, label="real-time demand")
            ax.set_ylim(0, s.n_gpus)
            ax.set_ylabel(p, fontsize=8)
        axes[0, 0].set_title(f"{scen}: GPUs in use by workload kind")
        axes[0, 0].legend(fontsize=7, ncol=5, loc="upper right")
        axes[-1, 0].set_xlabel("hours")
        fig.tight_layout()
        save(fig, f"kinds_{scen}.png")

    scen = [s for s in res.config.scenarios if any(m.scenario == s for m in res.metrics)]
    planners = list(dict.fromkeys(m.planner for m in res.metrics))
    by = {(m.scenario, m.planner): m for m in res.metrics}
    fig, axes = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True)
    width = 0.8 / max(1, len(planners))
    for i, p in enumerate(planners):
        xs = [k + i * width for k in range(len(scen))]
        fifo = [by.get((s, "fifo")) for s in scen]
        vals = [
            (100.0 * by[(s, p)].value / f.value if f and f.value else 0.0) if (s, p) in by else 0.0
            for s, f in zip(scen, fifo, strict=True)
        ]
        axes[0].bar(xs, vals, width, label=p)
        axes[1].bar(xs, [by[(s, p)].utilization_pct if (s, p) in by else 0.0 for s in scen], width, label=p)
    axes[0].set_ylabel("value (% of FIFO)")
    axes[0].axhline(100, color="k", lw=0.6)
    axes[1].set_ylabel("utilisation %")
    axes[1].set_xticks([k + 0.4 - width / 2 for k in range(len(scen))], scen, rotation=20, fontsize=8)
    axes[0].legend(fontsize=8, ncol=len(planners))
    axes[0].set_title("value and utilisation per scenario")
    fig.tight_layout()
    save(fig, "bars.png")
    return written


def _util_series(s) -> list[float]:
    out = []
    for t in range(s.n_steps):
        batch = sum(v[t] for v in s.batch_gpus.values())
        rt = sum(min(s.service_gpus[n][t], s.service_demand[n][t]) for n in s.service_gpus)
        out.append(100.0 * (batch + rt) / s.n_gpus)
    return out
