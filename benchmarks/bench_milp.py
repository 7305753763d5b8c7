"""Benchmark the allocation MILP on a generated problem (issue 2); prints figures, asserts nothing.

64 GPUs (8 x 8), 30 queued jobs of mixed sizes (1-16 GPUs) and priorities, 48 steps of 30 min,
one diurnal real-time service, 2 running jobs. Prints model size, solve time, gap, objective,
and the FIFO / EASY / priority-backfill objectives, plus the machine load.

    .venv/bin/python benchmarks/bench_milp.py [--seed 0] [--threads 2] [--time-limit 30] [--gap 0.01]
"""

from __future__ import annotations

import argparse
import os
import time

from optimizer.examples import random_problem
from optimizer.milp import build_model
from optimizer.planners import plan
from optimizer.problem import PlanSettings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=1, help="run seeds seed..seed+n-1")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--replans", type=int, default=0,
                    help="case C17b: N consecutive MILP plans of a 64-GPU, 24-step, 40-job problem in this "
                         "process; prints resident memory after plan 5 and plan N")
    args = ap.parse_args()
    if args.replans:
        memory_check(args.replans, args.threads)
        return
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for seed in range(args.seed, args.seed + args.seeds):
        settings = PlanSettings(time_limit_s=args.time_limit, mip_rel_gap=args.gap, threads=args.threads,
                                random_seed=seed)
        p = random_problem(64, 30, 48, seed=seed, settings=settings)
        t0 = time.perf_counter()
        bm = build_model(p)
        build_s = time.perf_counter() - t0
        base = {b: plan(p, b) for b in ("fifo", "easy", "priority")}
        t0, c0 = time.perf_counter(), time.process_time()
        m = plan(p, "milp")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        full = bm.size
        size = m.model or {}
        queued = [a for a in m.assignments if not a.running]
        print(
            f"seed {seed}: solved model ({size.get('method')}) rows {size.get('rows', 0):,} cols "
            f"{size.get('cols', 0):,} binaries {size.get('binaries', 0):,}; full x[j,s,o,t] model rows "
            f"{full['rows']:,} cols {full['cols']:,} binaries {full['binaries']:,} (built in {build_s:.2f} s)"
        )
        print(
            f"        milp status {m.status} wall {wall:.2f} s, cpu {cpu:.2f} s (baselines+build+solve) "
            f"gap {m.gap if m.gap is None else f'{m.gap:.4%}'} objective {m.objective:.3f} bound "
            f"{m.bound if m.bound is None else f'{m.bound:.3f}'} jobs started {sum(a.started for a in queued)}"
            f"/{len(queued)}"
        )
        print("        " + " | ".join(
            f"{b} objective {pl.objective:.3f} started {sum(a.started for a in pl.assignments if not a.running)}"
            for b, pl in base.items()
        ) + f" | milp vs best baseline {m.objective - max(x.objective for x in base.values()):+.3f}")
        if m.message:
            print(f"        message: {m.message}")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def rss_mb() -> float:
    """Resident memory of this process (MB), from /proc (also used by bench_scale.py)."""
    with open(f"/proc/{os.getpid()}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def memory_check(n: int, threads: int) -> None:
    """Case C17b: memory of repeated solves (fresh HiGHS object per solve)."""
    rss = {}
    t0 = time.perf_counter()
    for k in range(1, n + 1):
        st = PlanSettings(time_limit_s=10.0, mip_rel_gap=0.01, threads=threads, random_seed=k)
        plan(random_problem(64, 40, 24, seed=k, settings=st), "milp")
        rss[k] = rss_mb()
    print(f"C17b: {n} plans of 64 GPUs x 24 steps x 40 jobs in {time.perf_counter() - t0:.1f} s; RSS after plan 5 "
          f"{rss[min(5, n)]:.1f} MB, after plan {n} {rss[n]:.1f} MB (ratio {rss[n] / rss[min(5, n)]:.3f}, limit 1.2)")


if __name__ == "__main__":
    main()
