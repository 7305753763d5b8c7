"""The benchmark of DESIGN §6: every planner through the rolling-horizon simulator on every
scenario, plus the clairvoyant reference; writes ``bench.csv``, ``bench.md``, ``bench.json`` and
plots.

Stage logic only; the command (``gpuplan bench``) lives in :mod:`pipelines.commands.bench`.

Budget (full run, measured on the 2-core machine; see ``docs/benchmark.md``): the MILP replans
every ``replan_every_steps`` = 2 steps (hourly — DESIGN §1 "every 30–60 minutes") with a 2 %
relative gap per solve and a deterministic work limit of ``mip_work_limit`` HiGHS limit checks per
solve (``Settings.mip_work_limit``, see :func:`optimizer.solver.solve`); ``time_limit_s`` = 60 s is only the
deadline of each plan (no plan came near it in the documented runs); the baselines replan every step; the
clairvoyant reference is the same rolling MILP planned with the truth (see
:func:`optimizer.simulate.simulate_clairvoyant`), replanning every 4 steps (with the truth and the
arrivals inside the horizon known, a plan stays valid until new jobs come into view).
``--quick`` (tests): an 8-step window and a 12-step horizon on the same scenarios.

Determinism: scenarios, simulator and baselines are deterministic; HiGHS runs single-threaded
with a fixed seed and stops on a work limit, not on the clock. Two runs give the same
``bench.csv`` except the wall-clock columns ``solve_s_p50`` and ``solve_s_max`` — unless a solve
reaches its wall-clock *deadline* (its incumbent then depends on machine speed); ``bench.md``
counts such solves per row and warns when there is any. With ``reproducible`` (``--reproducible``)
the two timing columns are left empty and the whole file repeats byte for byte.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pipelines.atomic import atomic_write_bytes
from pipelines.errors import InputError

#: The study's reference figures (DESIGN §6.5), shown beside our table.
REFERENCE = {
    "_all": "utilisation up to +33 points; priority-weighted value higher in every scenario, up to +105 %",
    "scale_64x30": "same 44.9 % utilisation and 27/30 jobs completed, yet +15.9 % value",
    "uniform_priority": "utilisation 76.8 % -> 87.5 %, value +23.1 %",
}

CLAIRVOYANT = "clairvoyant"


@dataclass(frozen=True)
class BenchConfig:
    """What to run. ``planners`` from ``optimizer.planners.PLANNERS``; ``clairvoyant`` adds the
    reference row. Solver budget per MILP replan: ``mip_work_limit`` (deterministic work limit per
    HiGHS solve; None = the wall clock decides, not reproducible), ``time_limit_s`` (then a
    deadline of each plan), ``mip_rel_gap``; the MILP replans every ``replan_every_steps``;
    baselines every ``baseline_replan_every_steps``. ``reproducible``: leave the wall-clock
    columns of ``bench.csv`` (:data:`optimizer.metrics.TIMING_COLUMNS`) empty, so that the same
    seed gives a byte-identical file (``bench.md``/``bench.json`` keep the timings)."""

    scenarios: tuple[str, ...]
    planners: tuple[str, ...] = ("milp", "fifo", "easy", "priority")
    seed: int = 0
    quick: bool = False
    clairvoyant: bool = True
    replan_every_steps: int = 2
    baseline_replan_every_steps: int = 1
    clairvoyant_replan_every_steps: int = 4
    time_limit_s: float = 60.0
    mip_rel_gap: float = 0.02
    mip_work_limit: int | None = 200
    quick_window_steps: int = 8
    quick_horizon_steps: int = 12
    reproducible: bool = False


@dataclass
class BenchResult:
    """All metrics, the simulations (for the plots) and run facts."""

    config: BenchConfig
    metrics: list[Any] = field(default_factory=list)
    sims: dict[tuple[str, str], Any] = field(default_factory=dict)
    scenario_params: dict[str, dict] = field(default_factory=dict)
    exact: dict[str, bool] = field(default_factory=dict)
    wall_s: float = 0.0
    load_before: tuple[float, float, float] | None = None
    load_after: tuple[float, float, float] | None = None

    @property
    def verified_plans(self) -> int:
        return sum(m.verified_plans for m in self.metrics)

    @property
    def violations(self) -> int:
        return sum(m.violations for m in self.metrics)


def parse_planners(text: str) -> tuple[str, ...]:
    """Comma-separated planner names; ``clairvoyant`` allowed. Raises :class:`InputError`."""
    from optimizer.planners import PLANNERS

    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise InputError("--planners: give at least one planner")
    bad = [n for n in names if n not in PLANNERS and n != CLAIRVOYANT]
    if bad:
        raise InputError(f"--planners: unknown planner {bad[0]!r}; choose from {', '.join(PLANNERS)}, {CLAIRVOYANT}")
    return names


def parse_scenarios(text: str) -> tuple[str, ...]:
    """``all`` or comma-separated scenario names. Raises :class:`InputError`."""
    from optimizer.scenarios import SCENARIOS

    if text.strip() == "all":
        return SCENARIOS
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [n for n in names if n not in SCENARIOS]
    if bad or not names:
        raise InputError(f"--scenario: unknown scenario {bad[0] if bad else text!r}; expected all or one of {', '.join(SCENARIOS)}")
    return names


def _quick(sc, cfg: BenchConfig):
    """The reduced scenario of ``--quick``: same jobs and demand, shorter window and horizon."""
    cluster = replace(sc.cluster, horizon_steps=cfg.quick_horizon_steps)
    return replace(sc, cluster=cluster, n_steps=cfg.quick_window_steps)


def build_scenario(name: str, cfg: BenchConfig, trace=None):
    """Build one scenario (reduced under ``--quick``) with the bench's solver settings."""
    from optimizer.scenarios import build

    sc = build(name, cfg.seed, trace=trace)
    if cfg.quick:
        sc = _quick(sc, cfg)
    settings = replace(sc.settings, time_limit_s=cfg.time_limit_s, mip_rel_gap=cfg.mip_rel_gap, threads=1,
                       mip_work_limit=cfg.mip_work_limit)
    return replace(sc, settings=settings)


def _loadavg() -> tuple[float, float, float] | None:
    try:
        return tuple(round(x, 2) for x in os.getloadavg())  # type: ignore[return-value]
    except OSError:  # pragma: no cover
        return None


def run_bench(
    cfg: BenchConfig,
    trace_dir: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> BenchResult:
    """Simulate every (scenario, planner) of ``cfg``; returns the metrics and simulations.

    Raises :class:`InputError` for unknown names or a missing real-trace file.
    """
    from optimizer.metrics import compute
    from optimizer.simulate import planner_fn, simulate, simulate_clairvoyant

    log = log or (lambda s: None)
    res = BenchResult(config=cfg, load_before=_loadavg())
    t0 = time.perf_counter()
    trace = None
    if "real_trace" in cfg.scenarios:
        from pipelines.trace_io import TRACE_DIR, load_real_trace

        trace = load_real_trace(trace_dir or TRACE_DIR)
    for name in cfg.scenarios:
        sc = build_scenario(name, cfg, trace)
        res.scenario_params[name] = dict(sc.params)
        res.exact[name] = sc.exact_forecasts
        for planner in cfg.planners:
            ts = time.perf_counter()
            if planner == CLAIRVOYANT:
                continue
            k = cfg.replan_every_steps if planner == "milp" else cfg.baseline_replan_every_steps
            sim = simulate(sc, planner_fn(planner), name=planner, replan_every_steps=k)
            _record(res, sim, compute(sim), log, ts)
        if cfg.clairvoyant or CLAIRVOYANT in cfg.planners:
            ts = time.perf_counter()
            sim = simulate_clairvoyant(sc, planner_fn("milp"), name=CLAIRVOYANT, replan_every_steps=cfg.clairvoyant_replan_every_steps)
            _record(res, sim, compute(sim), log, ts)
    res.wall_s = time.perf_counter() - t0
    res.load_after = _loadavg()
    return res


def _record(res: BenchResult, sim, m, log, ts: float) -> None:
    res.sims[(sim.scenario, sim.planner)] = sim
    res.metrics.append(m)
    log(
        f"{sim.scenario:>16} {sim.planner:>11}: util {m.utilization_pct:6.2f} %  value {m.value:9.1f}  "
        f"jobs {m.jobs_completed}/{m.jobs_total}  RT {m.rt_sla_pct:7.3f} %  solves {m.replans} "
        f"(p50 {m.solve_s_p50 or 0:.2f} s, max {m.solve_s_max or 0:.2f} s)  verified {m.verified_plans}, "
        f"violations {m.violations}  [{time.perf_counter() - ts:.0f} s]"
        + (f"  WARNING: {m.wall_clock_limited_solves} solve(s) stopped on the wall-clock deadline "
           "(this row may not reproduce)" if m.wall_clock_limited_solves else "")
    )


# ----------------------------------------------------------------------------- outputs


def _fmt(v: Any) -> str:
    """CSV cell: None -> empty; floats with up to 4 decimals, no trailing zeros noise."""
    if v is None:
        return ""
    if isinstance(v, float):
        if not math.isfinite(v):
            return ""
        return f"{v:.4f}".rstrip("0").rstrip(".") if v != int(v) else f"{v:.1f}"
    return str(v)


def bench_csv(res: BenchResult) -> str:
    """``bench.csv`` text: exactly the DESIGN §7.1 columns, one row per scenario x planner; the
    timing columns empty when ``res.config.reproducible``."""
    from optimizer.metrics import CSV_COLUMNS, TIMING_COLUMNS

    blank = set(TIMING_COLUMNS) if res.config.reproducible else set()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for m in res.metrics:
        row = m.row()
        w.writerow(["" if c in blank else _fmt(row[c]) for c in CSV_COLUMNS])
    return buf.getvalue()


def comparison_rows(res: BenchResult) -> list[dict[str, Any]]:
    """Per scenario x planner: the figures of the results table (relative to FIFO, priority
    backfill and the clairvoyant reference of the same scenario)."""
    by = {(m.scenario, m.planner): m for m in res.metrics}
    out = []
    for m in res.metrics:
        fifo = by.get((m.scenario, "fifo"))
        prio = by.get((m.scenario, "priority"))
        clair = by.get((m.scenario, CLAIRVOYANT))
        out.append(
            {
                "scenario": m.scenario,
                "planner": m.planner,
                "utilization_pct": m.utilization_pct,
                "util_vs_fifo_pts": _diff(m.utilization_pct, fifo and fifo.utilization_pct),
                "value": m.value,
                "value_vs_fifo_pct": _pct(m.value, fifo and fifo.value),
                "value_vs_priority_pct": _pct(m.value, prio and prio.value),
                "value_of_clairvoyant_pct": _ratio(m.value, clair and clair.value),
                "rt_sla_pct": m.rt_sla_pct,
                "jobs_completed": m.jobs_completed,
                "jobs_total": m.jobs_total,
                "solve_s_p50": m.solve_s_p50,
                "solve_s_max": m.solve_s_max,
                "gap_max": m.gap_max,
                "replans": m.replans,
                "time_limited_solves": m.time_limited_solves,
                "wall_clock_limited_solves": m.wall_clock_limited_solves,
                "verified_plans": m.verified_plans,
                "violations": m.violations,
                "stale_plans": m.stale_plans,
                "wait_p50_h": m.wait_p50_h,
                "wait_p95_h": m.wait_p95_h,
                "wait_by_priority": m.wait_by_priority,
                "lost_gpu_h": m.lost_gpu_h,
            }
        )
    return out


def _diff(a, b):
    return None if a is None or b is None else round(a - b, 4)


def _pct(a, b):
    return None if a is None or not b else round(100.0 * (a / b - 1.0), 1)


def _ratio(a, b):
    return None if a is None or not b else round(100.0 * a / b, 1)


def goals(res: BenchResult) -> list[dict[str, Any]]:
    """The issue's goals, each with held/missed and the evidence."""
    by = {(m.scenario, m.planner): m for m in res.metrics}
    scen = [s for s in res.config.scenarios if (s, "milp") in by]
    out = []

    def add(goal: str, held: bool | None, evidence: str) -> None:
        out.append({"goal": goal, "held": held, "evidence": evidence})

    if not scen:
        return out
    ge_fifo = [s for s in scen if (s, "fifo") in by and by[(s, "milp")].value >= by[(s, "fifo")].value - 1e-9]
    have_fifo = [s for s in scen if (s, "fifo") in by]
    if have_fifo:
        add("MILP value >= FIFO value in every scenario", len(ge_fifo) == len(have_fifo),
            f"{len(ge_fifo)}/{len(have_fifo)}: " + ", ".join(
                f"{s} {_pct(by[(s, 'milp')].value, by[(s, 'fifo')].value):+}%" for s in have_fifo))
    have_p = [s for s in scen if (s, "priority") in by]
    if have_p:
        ok = [s for s in have_p if by[(s, "milp")].value >= 1.05 * by[(s, "priority")].value]
        add("MILP value >= 1.05 x priority backfill", len(ok) == len(have_p),
            f"{len(ok)}/{len(have_p)}: " + ", ".join(
                f"{s} {_pct(by[(s, 'milp')].value, by[(s, 'priority')].value):+}%" for s in have_p))
    if ("diurnal_peak", "milp") in by and ("diurnal_peak", "fifo") in by:
        d = _diff(by[("diurnal_peak", "milp")].utilization_pct, by[("diurnal_peak", "fifo")].utilization_pct)
        add("utilisation >= FIFO + 15 points on diurnal_peak", d >= 15.0, f"{d:+.2f} points")
    have_c = [s for s in scen if (s, CLAIRVOYANT) in by]
    exact = [s for s in have_c if res.exact.get(s)]
    if exact:
        r = {s: _ratio(by[(s, "milp")].value, by[(s, CLAIRVOYANT)].value) for s in exact}
        add(">= 95 % of the clairvoyant value with exact forecasts", all(v >= 95 for v in r.values()),
            ", ".join(f"{s} {v}%" for s, v in r.items()))
    if "forecast_error" in have_c:
        v = _ratio(by[("forecast_error", "milp")].value, by[("forecast_error", CLAIRVOYANT)].value)
        add(">= 90 % of the clairvoyant value in forecast_error", v >= 90, f"{v}%")
    sla = {s: by[(s, "milp")].rt_sla_pct for s in scen}
    add("real-time demand served >= 99.9 %", all(v >= 99.9 for v in sla.values()),
        ", ".join(f"{s} {v}%" for s, v in sla.items()))
    if have_fifo:
        below = [s for s in have_fifo if by[(s, "milp")].rt_sla_pct < by[(s, "fifo")].rt_sla_pct]
        add("real-time served never below FIFO's", not below,
            "below in: " + ", ".join(f"{s} ({by[(s, 'milp')].rt_sla_pct}% vs {by[(s, 'fifo')].rt_sla_pct}%)" for s in below)
            if below else "never below")
    add("0 violations over all verified plans", res.violations == 0,
        f"{res.verified_plans} verified plans, {res.violations} violations")
    return out


def bench_md(res: BenchResult) -> str:
    """``bench.md``: the results table, wait times by priority class, goals, run facts."""
    cfg = res.config
    rows = comparison_rows(res)
    L = []
    L.append("# gpuplan benchmark")
    L.append("")
    L.append(
        f"Seed {cfg.seed}{' (--quick: ' + str(cfg.quick_window_steps) + '-step window, ' + str(cfg.quick_horizon_steps) + '-step horizon)' if cfg.quick else ''}; "
        f"MILP replans every {cfg.replan_every_steps} step(s) with gap {cfg.mip_rel_gap:g} and "
        + (f"a work limit of {cfg.mip_work_limit} HiGHS limit checks per solve (wall-clock deadline "
           f"{cfg.time_limit_s:g} s per plan)" if cfg.mip_work_limit is not None else
           f"time limit {cfg.time_limit_s:g} s per plan (no work limit: not reproducible)")
        + f"; baselines replan every {cfg.baseline_replan_every_steps} step(s); clairvoyant: the "
        "same rolling MILP planned with the truth (true durations, true demand, and the jobs arriving inside the "
        f"horizon{' of ' + str(cfg.quick_horizon_steps) + ' steps' if cfg.quick else ' (24 h)'}), replanning every "
        f"{cfg.clairvoyant_replan_every_steps} steps."
    )
    L.append("")
    L.append(f"Verified plans: **{res.verified_plans}** (every committed plan, one per simulated step), "
             f"violations: **{res.violations}**.")
    L.append("")
    L.append("## Results")
    L.append("")
    L.append(
        "| scenario | planner | util % | Δutil vs FIFO (pts) | value | vs FIFO | vs priority | % of clairvoyant | "
        "RT served % | jobs | solve p50 / max (s) | gap max | study (FIFO → allocator) |"
    )
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ref = REFERENCE.get(r["scenario"], REFERENCE["_all"]) if r["planner"] == "milp" else ""
        L.append(
            f"| {r['scenario']} | {r['planner']} | {r['utilization_pct']:.1f} | {_s(r['util_vs_fifo_pts'], '+.1f')} | "
            f"{r['value']:.0f} | {_s(r['value_vs_fifo_pct'], '+.1f', '%')} | {_s(r['value_vs_priority_pct'], '+.1f', '%')} | "
            f"{_s(r['value_of_clairvoyant_pct'], '.1f', '%')} | {r['rt_sla_pct']:.2f} | {r['jobs_completed']}/{r['jobs_total']} | "
            f"{_s(r['solve_s_p50'], '.2f')} / {_s(r['solve_s_max'], '.2f')} | {_s(r['gap_max'], '.4f')} | {ref} |"
        )
    L.append("")
    L.append("## Wait time by priority class (hours; P50 / P95; never-started jobs censored at the window end)")
    L.append("")
    L.append("| scenario | planner | all | by priority |")
    L.append("|---|---|---:|---|")
    for r in rows:
        byp = ", ".join(f"p{p}: {_s(a, '.1f')} / {_s(b, '.1f')}" for p, (a, b) in r["wait_by_priority"].items())
        L.append(f"| {r['scenario']} | {r['planner']} | {_s(r['wait_p50_h'], '.1f')} / {_s(r['wait_p95_h'], '.1f')} | {byp} |")
    L.append("")
    L.append("## Goals")
    L.append("")
    L.append("| goal | held | evidence |")
    L.append("|---|---|---|")
    for g in goals(res):
        L.append(f"| {g['goal']} | {'yes' if g['held'] else 'NO'} | {g['evidence']} |")
    L.append("")
    L.append("## Solver")
    L.append("")
    clocked = [r for r in rows if r.get("wall_clock_limited_solves")]
    if clocked:
        L.append("**Warning: the wall-clock deadline stopped "
                 f"{sum(r['wall_clock_limited_solves'] for r in clocked)} solve(s)** in "
                 + ", ".join(f"{r['scenario']}/{r['planner']}" for r in clocked)
                 + ": these rows depend on machine speed and load and may not repeat byte for byte.")
        L.append("")
    L.append("| scenario | planner | solves | stopped on a limit (not proven within the gap) | "
             "of which on the wall-clock deadline | gap max | followed plans that no longer verified (replanned) |")
    L.append("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["planner"] in ("milp", CLAIRVOYANT):
            L.append(f"| {r['scenario']} | {r['planner']} | {r['replans']} | {r['time_limited_solves']} | "
                     f"{r['wall_clock_limited_solves']} | {_s(r['gap_max'], '.4f')} | {r['stale_plans']} |")
    L.append("")
    L.append("## Scenario parameters")
    L.append("")
    for s, p in res.scenario_params.items():
        L.append(f"- `{s}`: " + ", ".join(f"{k}={v}" for k, v in p.items()))
    L.append("")
    L.append("## Run")
    L.append("")
    L.append(
        f"Wall time {res.wall_s:.0f} s on {os.cpu_count()} CPU(s) ({platform.python_implementation()} "
        f"{platform.python_version()}); load average before {res.load_before}, after {res.load_after} "
        "(the machine is shared). Determinism: every column except solve_s_p50/solve_s_max repeats "
        "byte for byte with the same seed unless a solve stops on the wall clock (table above: "
        + ("none did" if not clocked else f"{len(clocked)} row(s) affected") + ")"
        + ("; this bench.csv was written with --reproducible (timing columns empty), so the whole file repeats."
           if cfg.reproducible else "; --reproducible leaves those two columns empty so the whole file repeats.")
    )
    L.append("")
    return "\n".join(L)


def _s(v, fmt: str, suffix: str = "") -> str:
    return "–" if v is None else f"{format(v, fmt)}{suffix}"


def bench_json(res: BenchResult, out_dir: Path, files: Sequence[str]) -> dict[str, Any]:
    """The ``--json`` document: rows (bench.csv columns), comparison, goals, counts, wall time."""
    return {
        "out": str(out_dir),
        "files": list(files),
        "scenarios": list(res.config.scenarios),
        "planners": list(res.config.planners) + ([CLAIRVOYANT] if res.config.clairvoyant else []),
        "seed": res.config.seed,
        "quick": res.config.quick,
        "rows": [m.row() for m in res.metrics],
        "comparison": comparison_rows(res),
        "goals": goals(res),
        "verified_plans": res.verified_plans,
        "violations": res.violations,
        "wall_s": round(res.wall_s, 1),
        "load_before": res.load_before,
        "load_after": res.load_after,
        "settings": {
            "replan_every_steps": res.config.replan_every_steps,
            "baseline_replan_every_steps": res.config.baseline_replan_every_steps,
            "clairvoyant_replan_every_steps": res.config.clairvoyant_replan_every_steps,
            "time_limit_s": res.config.time_limit_s,
            "mip_rel_gap": res.config.mip_rel_gap,
            "mip_work_limit": res.config.mip_work_limit,
            "reproducible": res.config.reproducible,
        },
    }


def write_outputs(res: BenchResult, out_dir: Path) -> list[str]:
    """Write bench.csv, bench.md, bench.json and the plots under ``out_dir`` (each atomically);
    returns the relative paths written."""
    out_dir = Path(out_dir)
    files = ["bench.csv", "bench.md"]
    atomic_write_bytes(out_dir / "bench.csv", bench_csv(res).encode(), make_parents=True)
    atomic_write_bytes(out_dir / "bench.md", bench_md(res).encode(), make_parents=True)
    files += write_plots(res, out_dir)
    files.append("bench.json")
    atomic_write_bytes(out_dir / "bench.json", json.dumps(bench_json(res, out_dir, files), indent=1).encode(), make_parents=True)
    return files


# ----------------------------------------------------------------------------- plots


def write_plots(res: BenchResult, out_dir: Path) -> list[str]:
    """Utilisation over time per planner and GPUs in use stacked by workload kind (one figure
    per scenario each), and value/utilisation bars over all scenarios. PNG, matplotlib Agg."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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


def main_log(msg: str) -> None:
    """Progress line to standard error (stdout is reserved for ``--json``)."""
    print(msg, file=sys.stderr, flush=True)
