"""Measure what one MILP column costs (case F05): the basis of the size limits in optimizer.diagnose.

For generated problems of growing horizon (one diurnal service; with or without 30 queued jobs on
64 GPUs), each in a fresh process: the size estimate of :func:`optimizer.diagnose.estimate_size`
against the master actually built, the build time and the peak resident memory it adds, the
time HiGHS needs to load, presolve and hand back a warm start as its incumbent (the floor
``MIN_SOLVE_S`` of the planner), and optionally (``--lp``) the root LP relaxation. Prints
per-column and per-nonzero figures and the machine load; asserts nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_model_size.py [--lp] [--lp-limit 120]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import replace

# (label, horizon_steps, n_jobs, milp_method): 1-minute steps, 64 GPUs, one diurnal service, jobs of
# 1-16 GPUs for up to 8 hours. "full" builds the x[j, s, o, t] model (many nonzeros per column).
CASES: tuple[tuple[str, int, int, str], ...] = (
    ("service only", 10_000, 0, "decomposed"),
    ("service only", 40_000, 0, "decomposed"),
    ("service only", 75_000, 0, "decomposed"),
    ("30 jobs", 480, 30, "decomposed"),
    ("30 jobs", 1_440, 30, "decomposed"),
    ("30 jobs", 2_880, 30, "decomposed"),
    ("90 jobs", 1_440, 90, "decomposed"),
    ("30 jobs full", 120, 30, "full"),
    ("30 jobs full", 240, 30, "full"),
)


def _problem(horizon_steps: int, n_jobs: int):
    from optimizer.examples import random_problem

    return random_problem(n_gpus=64, n_jobs=n_jobs, horizon_steps=horizon_steps, seed=0, step_minutes=1,
                          max_duration_steps=min(480, horizon_steps), release_within=max(1, horizon_steps // 2))


def run_case(horizon_steps: int, n_jobs: int, method: str, lp: bool, lp_limit_s: float) -> dict:
    """One case in this process: sizes, build time, memory, HiGHS warm-start time (and the LP)."""
    import numpy as np

    from optimizer.baselines import greedy_plans
    from optimizer.decomposition import build_count_model, count_vector
    from optimizer.diagnose import estimate_size
    from optimizer.milp import build_model, plan_to_vector
    from optimizer.solver import solve

    p = _problem(horizon_steps, n_jobs)
    est = estimate_size(p)
    est_cols, est_nz = est.for_method(method)
    seeds = greedy_plans(p)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    built = build_count_model(p) if method == "decomposed" else build_model(p)
    build_s = time.perf_counter() - t
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    to_vector = count_vector if method == "decomposed" else plan_to_vector
    start = next((x for x in (to_vector(built, s) for s in seeds) if x is not None), None)  # type: ignore[arg-type]
    model = built.model
    t = time.perf_counter()
    out = solve(model, time_limit_s=0.01, mip_rel_gap=0.01, start=start)
    warm_s = time.perf_counter() - t
    rss2 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    row = {
        "horizon_steps": horizon_steps, "n_jobs": n_jobs,
        "est_cols": est_cols, "est_nonzeros": est_nz,
        "cols": model.n_cols, "nonzeros": int(model.A.nnz), "build_s": build_s,
        "build_mb": (rss1 - rss0) / 1024, "highs_mb": (rss2 - rss1) / 1024,
        "warm_s": warm_s, "warm_status": out.status, "warm_has_incumbent": out.x is not None,
    }
    if lp:
        relax = replace(model, integer=np.zeros(model.n_cols, dtype=bool))
        t = time.perf_counter()
        o = solve(relax, time_limit_s=lp_limit_s, mip_rel_gap=0.0)
        row.update(lp_s=time.perf_counter() - t, lp_status=o.status)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lp", action="store_true", help="also time the root LP relaxation (slow)")
    ap.add_argument("--lp-limit", type=float, default=120.0)
    ap.add_argument("--case", type=str, default=None, help=argparse.SUPPRESS)  # "H,jobs,method": one case, JSON out
    args = ap.parse_args()
    if args.case:
        h, n, m = args.case.split(",")
        print(json.dumps(run_case(int(h), int(n), m, args.lp, args.lp_limit)))
        return
    from optimizer.diagnose import MAX_MODEL_COLUMNS, MAX_MODEL_NONZEROS
    from optimizer.strategy import MIN_SOLVE_S

    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"limits: MAX_MODEL_COLUMNS {MAX_MODEL_COLUMNS:,}, MAX_MODEL_NONZEROS {MAX_MODEL_NONZEROS:,}, "
          f"MIN_SOLVE_S {MIN_SOLVE_S:g} s")
    hdr = (f"{'case':<13} {'steps':>7} {'est cols':>9} {'cols':>9} {'est nonzeros':>12} {'nonzeros':>10} {'build s':>8} {'MB':>6} "
           f"{'us/col':>7} {'kB/col':>7} {'HiGHS s':>8} {'us/col':>7} {'incumb':>6}" + (f" {'LP s':>7} {'ms/col':>7}" if args.lp else ""))
    print(hdr)
    rows = []
    for label, h, n, m in CASES:
        cmd = [sys.executable, __file__, "--case", f"{h},{n},{m}", "--lp-limit", str(args.lp_limit)] + (["--lp"] if args.lp else [])
        res = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        if res.returncode != 0:
            print(f"{label:<13} {h:>7} failed: {res.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(res.stdout.strip().splitlines()[-1])
        rows.append(r)
        c = max(1, r["cols"])
        line = (f"{label:<13} {h:>7} {r['est_cols']:>9,} {r['cols']:>9,} {r['est_nonzeros']:>12,} {r['nonzeros']:>10,} "
                f"{r['build_s']:>8.2f} "
                f"{r['build_mb'] + r['highs_mb']:>6.0f} {1e6 * r['build_s'] / c:>7.2f} "
                f"{1024 * (r['build_mb'] + r['highs_mb']) / c:>7.2f} {r['warm_s']:>8.2f} {1e6 * r['warm_s'] / c:>7.2f} "
                f"{'yes' if r['warm_has_incumbent'] else 'no':>6}")
        if args.lp:
            line += f" {r['lp_s']:>7.1f} {1e3 * r['lp_s'] / c:>7.3f}" + ("" if r["lp_status"] == "optimal" else " (limit)")
        print(line, flush=True)
    big = [r for r in rows if r["cols"] >= 20_000]
    for r in rows:
        if r["nonzeros"] >= 1_000_000:
            print(f"{r['n_jobs']} jobs, {r['horizon_steps']} steps: {r['nonzeros']:,} nonzeros, HiGHS to the incumbent "
                  f"{1e6 * r['warm_s'] / r['nonzeros']:.2f} us per nonzero; build {1e6 * r['build_s'] / r['nonzeros']:.2f} us "
                  "per nonzero")
    if big:
        per_col_build = max(r["build_s"] / r["cols"] for r in big)
        per_col_mb = max((r["build_mb"] + r["highs_mb"]) / r["cols"] for r in big)
        per_col_warm = max(r["warm_s"] / r["cols"] for r in big)
        print(f"worst per column (models of 20,000+ columns): build {1e6 * per_col_build:.2f} us, memory "
              f"{1024 * per_col_mb:.2f} kB, HiGHS to the warm-start incumbent {1e6 * per_col_warm:.2f} us")
        print(f"at MAX_MODEL_COLUMNS = {MAX_MODEL_COLUMNS:,}: build {MAX_MODEL_COLUMNS * per_col_build:.2f} s, "
              f"{MAX_MODEL_COLUMNS * per_col_mb:.0f} MB, HiGHS to the incumbent {MAX_MODEL_COLUMNS * per_col_warm:.2f} s")


if __name__ == "__main__":
    main()
