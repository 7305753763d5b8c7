"""The planner on generated problems it was not tuned on (issue 29): per size, median and worst gap, time, value.

Problems from :func:`optimizer.examples.random_problem` in four mixes, with seeds no test, benchmark or
tuning run uses (:data:`SEEDS`: ``tune`` 7301-7399 chose the budget rules, ``report`` 7401-7499 are the
figures of docs/benchmark.md):

- ``gang``: gang-heavy, sizes 4-32 GPUs (60 % 16 or 32), durations up to 24 steps;
- ``small``: many small jobs, 2x the jobs of the size, sizes 1-4 GPUs, durations up to 12 steps;
- ``elastic``: every job may also run on twice its GPUs for 1/1.7 of its steps (efficiency 0.85);
- ``rt_heavy``: the real-time service swings between 35 % and 85 % of the cluster.

Sizes (GPUs x jobs, time limit): 64 x 30 at 30 s, 256 x 120 at 60 s, 1,024 x 400 at 60 s, 4,096 x 1,600 at
300 s (the issue's targets), 48 half-hour steps. Each problem is planned once with the ``milp`` planner and
default settings (``budget="time"``; ``--budget work`` for the work mode), and the three baselines; a line
per problem, then per size: median and worst proven gap, median and worst wall seconds (against limit + 5 s)
and the median value of the MILP plan over the best baseline's. Run::

    nice -n 10 .venv/bin/python benchmarks/bench_unseen.py --set report --sizes 64,256,1024 --per-size 6
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import replace

SIZES = {64: (30, 30.0), 256: (120, 60.0), 1024: (400, 60.0), 4096: (1600, 300.0)}
MIXES = ("gang", "small", "elastic", "rt_heavy")
SEEDS = {"tune": 7301, "report": 7401}


def unseen_problem(n_gpus: int, mix: str, seed: int, budget: str = "time"):
    """The problem of ``mix`` (module docstring) at ``n_gpus`` GPUs with ``seed``; default settings but the size's limit."""
    from optimizer.examples import random_problem
    from optimizer.problem import PlanSettings, SizeOption

    n_jobs, limit_s = SIZES[n_gpus]
    st = PlanSettings(time_limit_s=limit_s, budget=budget)
    if mix == "gang":
        return random_problem(n_gpus, n_jobs, 48, seed=seed, sizes=(4, 8, 16, 32), size_weights=(0.2, 0.2, 0.3, 0.3),
                              max_duration_steps=24, settings=st)
    if mix == "small":
        return random_problem(n_gpus, 2 * n_jobs, 48, seed=seed, sizes=(1, 2, 4), size_weights=(0.5, 0.3, 0.2),
                              max_duration_steps=12, settings=st)
    if mix == "rt_heavy":
        return random_problem(n_gpus, n_jobs, 48, seed=seed, sizes=(1, 2, 4, 8, 16, 32),
                              size_weights=(0.2, 0.2, 0.2, 0.2, 0.1, 0.1), max_duration_steps=48,
                              rt_low_frac=0.35, rt_high_frac=0.85, settings=st)
    if mix == "elastic":
        p = random_problem(n_gpus, n_jobs, 48, seed=seed, sizes=(1, 2, 4, 8, 16),
                           max_duration_steps=32, settings=st)
        jobs = []
        for j in p.jobs:
            o = j.sizes[0]
            opts = [o]
            if 2 * o.gpus <= n_gpus:
                opts.append(SizeOption(2 * o.gpus, max(1, math.ceil(o.duration_steps / 1.7)), 0.85))
            jobs.append(replace(j, sizes=tuple(opts)))
        return replace(p, jobs=tuple(jobs))
    raise ValueError(f"mix {mix!r} is not one of {MIXES}")


def run_one(n_gpus: int, mix: str, seed: int, budget: str) -> dict:
    """Plan one problem with ``milp`` and the baselines: gap, wall seconds, value and the best baseline's value."""
    from optimizer.planners import plan

    p = unseen_problem(n_gpus, mix, seed, budget)
    base = max(plan(p, name).objective for name in ("fifo", "easy", "priority"))
    t = time.perf_counter()
    pl = plan(p, "milp")
    wall = time.perf_counter() - t
    early = [n for n in pl.notes if n.startswith("early stop:")]
    return {"n_gpus": n_gpus, "mix": mix, "seed": seed, "status": str(pl.status), "source": str(pl.source),
            "gap": pl.gap, "wall_s": wall, "limit_s": p.settings.time_limit_s, "value": pl.objective,
            "baseline": base, "early": early[0][:160] if early else ""}


def _pct(x: float | None) -> str:
    return "  none" if x is None else f"{x:6.2%}"


def main() -> None:
    """Parse the options, run the problems (one line each), print the per-size summary."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=sorted(SEEDS), default="report", help="seed set (tune: 7301.., report: 7401..)")
    ap.add_argument("--sizes", default="64,256,1024,4096", help="GPU counts, comma-separated")
    ap.add_argument("--per-size", type=int, default=8, help="problems per size (mixes in turn, then the next seed)")
    ap.add_argument("--budget", choices=("time", "work"), default="time")
    a = ap.parse_args()
    rows = []
    print(f"bench_unseen: set {a.set}, budget {a.budget}, load {os.getloadavg()[0]:.1f}", flush=True)
    for n in (int(x) for x in a.sizes.split(",")):
        for k in range(a.per_size):
            mix, seed = MIXES[k % len(MIXES)], SEEDS[a.set] + k // len(MIXES)
            r = run_one(n, mix, seed, a.budget)
            rows.append(r)
            print(f"{n:5d} {mix:9s} seed {seed} {r['status']:10s} {r['source']:14s} gap {_pct(r['gap'])} "
                  f"wall {r['wall_s']:6.1f} s / {r['limit_s']:g} s  value/best baseline "
                  f"{r['value'] / r['baseline'] if r['baseline'] else float('nan'):.4f}  load "
                  f"{os.getloadavg()[0]:.1f} {r['early']}", flush=True)
    print("\nper size: problems, gap median / worst, wall median / worst (limit + 5 s), value / best baseline median")
    for n in sorted({r["n_gpus"] for r in rows}):
        rs = [r for r in rows if r["n_gpus"] == n]
        gaps = [r["gap"] if r["gap"] is not None else math.inf for r in rs]
        walls = [r["wall_s"] for r in rs]
        ratio = [r["value"] / r["baseline"] for r in rs if r["baseline"]]
        over = sum(w > r["limit_s"] + 5 for w, r in zip(walls, rs, strict=True))
        print(f"{n:5d} GPUs: {len(rs)} problems, gap {statistics.median(gaps):.2%} / {max(gaps):.2%}, wall "
              f"{statistics.median(walls):.1f} / {max(walls):.1f} s (limit {rs[0]['limit_s']:g} s, {over} over limit + 5 s), "
              f"value/best baseline {statistics.median(ratio) if ratio else float('nan'):.4f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
