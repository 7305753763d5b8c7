"""The benchmark's tables, computed from a :class:`~pipelines.bench.run.BenchResult`.

``bench.csv`` (DESIGN §7.1 columns), ``bench.md`` (results, goals, run facts) and the ``--json``
document. With a preemptible share above 0 (issue 30) each also carries :data:`PREEMPT_COLUMNS` per row and the share
in the run's settings; at share 0 none of them changes.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optimizer.metrics import CSV_COLUMNS, TIMING_COLUMNS
from pipelines.bench.aggregate import frame, tables_md
from pipelines.bench.aggregate import goals as aggregate_goals
from pipelines.bench.plots import write_plots
from pipelines.bench.run import CLAIRVOYANT, REFERENCE, BenchResult
from pipelines.io.atomic import atomic_write_bytes


def _fmt(v: Any) -> str:
    """CSV cell: None -> empty; floats with up to 4 decimals, no trailing zeros noise."""
    if v is None:
        return ""
    if isinstance(v, float):
        if not math.isfinite(v):
            return ""
        return f"{v:.4f}".rstrip("0").rstrip(".") if v != int(v) else f"{v:.1f}"
    return str(v)


#: ``bench.csv`` columns: the DESIGN §7.1 metrics, then per scenario (and seed) whether its
#: forecasts are exact (1/0), the offline bound on value (:func:`optimizer.bound.offline_bound`) and
#: the row's value as % of it.
BENCH_CSV_COLUMNS: tuple[str, ...] = (*CSV_COLUMNS, "exact_forecasts", "bound_value", "value_of_bound_pct")


def bound_columns(res: BenchResult, m) -> dict[str, Any]:
    """The three columns after the metrics for row ``m``: ``exact_forecasts`` (1/0), ``bound_value``, ``value_of_bound_pct`` (None without a bound)."""
    b = res.bounds.get(m.scenario)
    exact = res.exact.get(m.scenario)
    return {
        "exact_forecasts": None if exact is None else int(bool(exact)),
        "bound_value": None if b is None else b.value,
        "value_of_bound_pct": None if b is None or not b.value else round(100.0 * m.value / b.value, 2),
    }


#: The columns after :data:`BENCH_CSV_COLUMNS` in a run with a preemptible share above 0 (issue 30): the share of
#: the run, the GPU-hours lost to preemption, the stops over all jobs and the most stops of one job
#: (:class:`optimizer.metrics.Metrics`). At share 0 they are not written, so that bench.csv stays the file of the
#: non-preemptive bench byte for byte.
PREEMPT_COLUMNS: tuple[str, ...] = ("preemptible_share", "preempted_gpu_h", "stops", "stops_max_per_job")


def preemptive(res: BenchResult) -> bool:
    """True when the run drew preemptible jobs (``--preemptible-share`` above 0): the outputs then carry :data:`PREEMPT_COLUMNS`."""
    return getattr(getattr(res, "config", None), "preemptible_share", 0.0) > 0


def csv_columns(res: BenchResult) -> tuple[str, ...]:
    """The columns of this run's ``bench.csv``: :data:`BENCH_CSV_COLUMNS`, plus :data:`PREEMPT_COLUMNS` when :func:`preemptive`."""
    return (*BENCH_CSV_COLUMNS, *PREEMPT_COLUMNS) if preemptive(res) else BENCH_CSV_COLUMNS


def preempt_columns(res: BenchResult, m) -> dict[str, Any]:
    """:data:`PREEMPT_COLUMNS` of row ``m`` when :func:`preemptive`, else ``{}``."""
    if not preemptive(res):
        return {}
    return {"preemptible_share": res.config.preemptible_share, "preempted_gpu_h": m.preempted_gpu_h,
            "stops": m.stops, "stops_max_per_job": m.stops_max_per_job}


def csv_row(res: BenchResult, m) -> dict[str, Any]:
    """Row ``m`` of ``bench.csv`` as a dict of :func:`csv_columns` (values unformatted)."""
    return {**m.row(), **bound_columns(res, m), **preempt_columns(res, m)}


def bench_csv(res: BenchResult) -> str:
    """``bench.csv`` text: :func:`csv_columns`, one row per scenario x planner (x seed).

    The timing columns are empty when ``res.config.reproducible``.
    """
    blank = set(TIMING_COLUMNS) if res.config.reproducible else set()
    cols = csv_columns(res)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for m in res.metrics:
        row = csv_row(res, m)
        w.writerow(["" if c in blank else _fmt(row[c]) for c in cols])
    return buf.getvalue()


def comparison_rows(res: BenchResult) -> list[dict[str, Any]]:
    """Per scenario x planner: the figures of the results table.

    Relative figures are against FIFO, priority backfill and the clairvoyant reference of the
    same scenario.
    """
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
                **bound_columns(res, m),
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
                "surge_replans": m.surge_replans,
                "wait_p50_h": m.wait_p50_h,
                "wait_p95_h": m.wait_p95_h,
                "wait_by_priority": m.wait_by_priority,
                "lost_gpu_h": m.lost_gpu_h,
                **preempt_columns(res, m),
            }
        )
    return out


def _diff(a, b):
    return None if a is None or b is None else round(a - b, 4)


def _pct(a, b):
    return None if a is None or not b else round(100.0 * (a / b - 1.0), 1)


def _ratio(a, b):
    return None if a is None or not b else round(100.0 * a / b, 1)


def bench_frame(res: BenchResult):
    """The rows of ``bench.csv`` as :func:`pipelines.bench.aggregate.frame` reads them (for the over-seed tables and goals)."""
    return frame([csv_row(res, m) for m in res.metrics])


def goals(res: BenchResult) -> list[dict[str, Any]]:
    """Issue 15's done-when criteria measured on this run (:func:`pipelines.bench.aggregate.goals`)."""
    if not res.metrics:
        return []
    return aggregate_goals(bench_frame(res), run_facts(res))


def run_facts(res: BenchResult) -> dict[str, Any]:
    """The run facts :func:`pipelines.bench.aggregate.goals` reads: wall time (s), load averages, verified plans, violations, ``quick``."""
    return {"wall_s": res.wall_s, "load_before": res.load_before, "load_after": res.load_after,
            "verified_plans": res.verified_plans, "violations": res.violations, "quick": bool(res.config.quick)}


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
        + (" Arrivals between replans started by the fast mode on the followed plan (--place-arrivals): "
           f"{sum(getattr(s, 'arrival_placements', 0) for s in res.sims.values())} steps over all runs."
           if getattr(cfg, "place_arrivals", False) else "")
    )
    if preemptive(res):
        L.append("")
        L.append(f"Preemptible share {cfg.preemptible_share:g} (--preemptible-share, issue 30): each batch job drawn "
                 "preemptible with that probability by the seed (checkpoint every 2 steps, restart 1 step); a surge "
                 "replan may stop such jobs (table \"Preemption\" below).")
    L.append("")
    L.append(f"Verified plans: **{res.verified_plans}** (every committed plan: one per simulated step, plus one "
             "per in-step replan on a real-time demand surge), "
             f"violations: **{res.violations}**.")
    L.append("")
    L.append("## Results")
    L.append("")
    L.append("The clairvoyant reference is a rolling MILP given the truth, not a bound: a planner can score above it "
             "(\"% of clairvoyant\" over 100 %); the offline bound (\"% of bound\") is the ceiling no planner exceeds. "
             "The last column quotes the study's published claim for the scenario, not a figure of this run.")
    L.append("")
    L.append(
        "| scenario | planner | util % | Δutil vs FIFO (pts) | value | vs FIFO | vs priority | % of clairvoyant | "
        "% of bound | RT served % | jobs | solve p50 / max (s) | gap max | the study's own claim (FIFO → allocator; not measured here) |"
    )
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ref = REFERENCE.get(r["scenario"], REFERENCE["_all"]) if r["planner"] == "milp" else ""
        L.append(
            f"| {r['scenario']} | {r['planner']} | {r['utilization_pct']:.1f} | {_s(r['util_vs_fifo_pts'], '+.1f')} | "
            f"{r['value']:.0f} | {_s(r['value_vs_fifo_pct'], '+.1f', '%')} | {_s(r['value_vs_priority_pct'], '+.1f', '%')} | "
            f"{_s(r['value_of_clairvoyant_pct'], '.1f', '%')} | {_s(r['value_of_bound_pct'], '.1f', '%')} | {r['rt_sla_pct']:.2f} | {r['jobs_completed']}/{r['jobs_total']} | "
            f"{_s(r['solve_s_p50'], '.2f')} / {_s(r['solve_s_max'], '.2f')} | {_s(r['gap_max'], '.4f')} | {ref} |"
        )
    missing = missing_reference_note(rows)
    if missing:
        L.append("")
        L.append(missing)
    if preemptive(res):
        L.append("")
        L.append(f"## Preemption (preemptible share {cfg.preemptible_share:g})")
        L.append("")
        L.append("| scenario | planner | GPU-h lost to preemption | stops | most stops of one job |")
        L.append("|---|---|---:|---:|---:|")
        for r in rows:
            L.append(f"| {r['scenario']} | {r['planner']} | {r['preempted_gpu_h']:.1f} | {r['stops']} | "
                     f"{r['stops_max_per_job']} |")
    L.append("")
    L.append("## Wait time by priority class (hours; P50 / P95; never-started jobs censored at the window end)")
    L.append("")
    L.append("| scenario | planner | all | by priority |")
    L.append("|---|---|---:|---|")
    for r in rows:
        byp = ", ".join(f"p{p}: {_s(a, '.1f')} / {_s(b, '.1f')}" for p, (a, b) in r["wait_by_priority"].items())
        L.append(f"| {r['scenario']} | {r['planner']} | {_s(r['wait_p50_h'], '.1f')} / {_s(r['wait_p95_h'], '.1f')} | {byp} |")
    L.append("")
    L.append("## Over seeds, paired comparison and goals (issue 15)")
    L.append("")
    L.append(tables_md(bench_frame(res), run_facts(res)) if res.metrics else "(no rows)")
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


def bench_text(res: BenchResult) -> str:
    """The results table ``gpuplan bench`` prints on standard output: one line per scenario x planner.

    Columns (the ``bench.md`` results table, realised on actuals, DESIGN §6.3): utilisation %, its
    change against FIFO in points, priority-weighted value and its change against FIFO in %, real-time
    demand served %, jobs completed / total, solve time P50 / max (s), verified plans and violations; with a
    preemptible share above 0 (:func:`preemptive`), also the GPU-hours lost to stops and the stops (most of one job).
    The clairvoyant row is labelled :data:`CLAIRVOYANT_LABEL` and explained by :data:`CLAIRVOYANT_NOTE`.
    """
    pre = preemptive(res)
    head = (f"{'scenario':<17}{'planner':<25}{'util %':>7}{'vs FIFO':>9}{'value':>10}{'vs FIFO':>9}{'RT %':>8}"
            f"{'jobs':>8}{'solve p50/max s':>17}{'verified':>10}{'violations':>11}"
            + (f"{'lost GPU-h':>12}{'stops (max/job)':>17}" if pre else ""))
    L = [head, "-" * len(head)]
    for r in comparison_rows(res):
        jobs = f"{r['jobs_completed']}/{r['jobs_total']}"
        solve = f"{_s(r['solve_s_p50'], '.2f')}/{_s(r['solve_s_max'], '.2f')}"
        planner = CLAIRVOYANT_LABEL if r["planner"] == CLAIRVOYANT else r["planner"]
        stops = f"{r['stops']} ({r['stops_max_per_job']})" if pre else ""
        L.append(f"{r['scenario']:<17}{planner:<25}{r['utilization_pct']:>7.1f}"
                 f"{_s(r['util_vs_fifo_pts'], '+.1f'):>9}{r['value']:>10.0f}{_s(r['value_vs_fifo_pct'], '+.1f', '%'):>9}"
                 f"{r['rt_sla_pct']:>8.2f}{jobs:>8}{solve:>17}{r['verified_plans']:>10}{r['violations']:>11}"
                 + (f"{r['preempted_gpu_h']:>12.1f}{stops:>17}" if pre else ""))
    L.append(COLUMNS_NOTE)
    if pre:
        L.append(PREEMPT_NOTE.format(share=res.config.preemptible_share))
    if any(r["planner"] == CLAIRVOYANT for r in comparison_rows(res)):
        L.append(CLAIRVOYANT_NOTE)
    missing = missing_reference_note(comparison_rows(res), references=(("fifo", "vs FIFO"),))
    if missing:
        L.append(missing)
    return "\n".join(L)


def missing_reference_note(rows: list[dict], references: tuple[tuple[str, str], ...] = (
        ("fifo", "vs FIFO"), ("priority", "vs priority"))) -> str:
    """The line under a results table whose "vs FIFO" or "vs priority" columns are all "–", or "".

    ``rows``: :func:`comparison_rows`; ``references``: (planner, column label) of the table's comparison columns.
    Those columns compare each planner with FIFO and with priority backfill run on the same scenario and seeds; when
    ``--planners`` left one out there is nothing to compare with, and the line says so and how to get it: the
    planners that ran (the clairvoyant reference aside) plus the missing ones, e.g. after ``--planners easy``
    ``"vs FIFO": – (fifo was not among --planners; add it, e.g. --planners easy,fifo, to compare)``.
    """
    ran = list(dict.fromkeys(r["planner"] for r in rows if r["planner"] != CLAIRVOYANT))
    gone = [(name, label) for name, label in references if name not in ran]
    if not rows or not gone:
        return ""
    cols = " and ".join(f'"{label}"' for _n, label in gone)
    names = ",".join([*ran, *(n for n, _l in gone)])
    return (f"{cols}: – ({' and '.join(n for n, _l in gone)} {'was' if len(gone) == 1 else 'were'} not among "
            f"--planners; add {'it' if len(gone) == 1 else 'them'}, e.g. --planners {names}, to compare)")


#: The line under ``gpuplan bench``'s table: what its columns count (new users asked about ``jobs``).
COLUMNS_NOTE = ("util %: GPU-hours busy with batch work or serving real-time demand, of all; value: priority x "
                "GPU-hours of batch work done in the window; \"vs FIFO\": util in points, value in %; RT %: real-time "
                "demand served; jobs: completed / arrived in the window (long valuable jobs may finish after it)")

#: The line under the table of a run with ``--preemptible-share`` above 0 (issue 30): what its two extra columns count.
PREEMPT_NOTE = ("preemptible share {share:g} of batch jobs: lost GPU-h: work since the last checkpoint plus restarts of "
                "the jobs stopped, GPU-hours; stops: every stop, and the most stops of one job in parentheses")

#: How ``gpuplan bench`` labels the clairvoyant row, and the line under its table (issue 33).
CLAIRVOYANT_LABEL = "clairvoyant (reference)"
CLAIRVOYANT_NOTE = ("clairvoyant (reference): a rolling MILP given the true demand and durations; a reference, "
                    "not a bound: a planner can score above it (the offline bound is in bench.md)")


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
        **({"preemptible_share": res.config.preemptible_share} if preemptive(res) else {}),
        "rows": [csv_row(res, m) for m in res.metrics],
        "bounds": {k: dataclasses.asdict(b) for k, b in res.bounds.items()},
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
            "place_arrivals": res.config.place_arrivals,
            **({"preemptible_share": res.config.preemptible_share} if preemptive(res) else {}),
        },
    }


#: ``bench_types.csv`` columns (issue 26): per typed scenario, planner and GPU type, that type's GPUs and utilisation.
TYPE_CSV_COLUMNS: tuple[str, ...] = ("scenario", "planner", "gpu_type", "gpus", "utilization_pct")


def bench_types_csv(res: BenchResult) -> str:
    """``bench_types.csv`` text: one row per typed scenario x planner x GPU type (:func:`optimizer.metrics.type_utilization`); ``""`` with no typed scenario."""
    if not res.type_util:
        return ""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TYPE_CSV_COLUMNS)
    for (sc, planner), by_type in res.type_util.items():
        for ty, u in by_type.items():
            w.writerow([sc, planner, ty, res.type_gpus[sc][ty], _fmt(u)])
    return buf.getvalue()


def bench_types_md(res: BenchResult) -> list[str]:
    """The bench.md lines of the per-type utilisation table (empty with no typed scenario)."""
    if not res.type_util:
        return []
    L = ["", "## Utilisation per GPU type (typed scenarios, %)", ""]
    for sc in dict.fromkeys(k[0] for k in res.type_util):
        types = list(res.type_gpus[sc])
        L.append(f"**{sc}** — " + ", ".join(f"{t} {res.type_gpus[sc][t]}" for t in types) + " GPUs")
        L.append("")
        L.append("| planner | " + " | ".join(types) + " |")
        L.append("|---|" + "---:|" * len(types))
        for (s2, planner), by_type in res.type_util.items():
            if s2 == sc:
                L.append(f"| {planner} | " + " | ".join(f"{by_type[t]:.1f}" for t in types) + " |")
        L.append("")
    return L


def write_outputs(res: BenchResult, out_dir: Path) -> list[str]:
    """Write bench.csv, bench.md, bench.json and the plots under ``out_dir`` (each atomically).

    Returns the paths written, relative to ``out_dir``.
    """
    out_dir = Path(out_dir)
    files = ["bench.csv", "bench.md"]
    atomic_write_bytes(out_dir / "bench.csv", bench_csv(res).encode(), make_parents=True)
    md = bench_md(res)
    types_csv = bench_types_csv(res)
    if types_csv:
        md = md.rstrip("\n") + "\n" + "\n".join(bench_types_md(res)) + "\n"
        atomic_write_bytes(out_dir / "bench_types.csv", types_csv.encode(), make_parents=True)
        files.append("bench_types.csv")
    atomic_write_bytes(out_dir / "bench.md", md.encode(), make_parents=True)
    files += write_plots(res, out_dir)
    files.append("bench.json")
    atomic_write_bytes(out_dir / "bench.json", json.dumps(bench_json(res, out_dir, files), indent=1).encode(), make_parents=True)
    return files
