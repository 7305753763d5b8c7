"""The MILP planner at scale (issue 17): one plan per cluster size, each in a fresh process; prints figures, asserts nothing.

Problems from :func:`optimizer.examples.random_problem` (seed 0): one diurnal real-time service
(15–60 % of the cluster), jobs of 1–32 GPUs (weights 0.2, 0.2, 0.2, 0.2, 0.1, 0.1), 30 min to
24 h (1–48 steps of 30 min), priorities {1, 2, 4, 8}, released in the first 12 h, 48 steps. Per size
``GPUSxJOBS``: the master's size (rows, columns, nonzeros), the path the planner took (plan
source), status, objective, bound, gap, wall time of the ``plan`` call, CPU time of this process
and of its HiGHS child processes, peak resident memory (this process; the largest child), and each
baseline's objective. Default settings except ``time_limit_s`` (``--time-limit``, or per size:
30 s up to 256 GPUs, 60 s at 1,024, 300 s above) and ``mip_rel_gap`` (``--gap``, default the
settings' 0.001).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_scale.py [--sizes 64x30,256x120,1024x400,4096x1600]
        [--time-limit S] [--gap 0.01] [--replans 50] [--formulation] [--load N]

``--load N``: each size is planned twice, first as the machine is, then with N extra busy-loop
processes running (started here, killed by PID when the size is done); prints both runs' figures,
their work counters (the master's ``mip_work_limit``, HiGHS limit checks and nodes used, LP simplex
iterations) and whether objective, bound, work counters and plan (a SHA-256 of the assignments and
service allocations) are identical (DESIGN §5: the budget is work, the deadline a safety stop).

``--replans N``: N consecutive plans of a 256-GPU, 120-job problem (seeds 1..N) in one process;
prints resident memory after each tenth and the spread of the peak (max / min of RSS after plan 5).
``--formulation``: for each size, the master with running counts for every run
(``DIRECT_MAX_STEPS`` = 0, the cumulative-start form) against direct coverage of runs up to 48
steps: nonzeros, LP relaxation time and value, and the plan.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time

from bench_milp import rss_mb  # the benchmarks folder is on sys.path when run as a script

DEFAULT_SIZES = "64x30,256x120,1024x400,4096x1600"


def scale_problem(n_gpus: int, n_jobs: int, seed: int = 0, settings=None):
    """The generated problem of this benchmark (see the module docstring)."""
    from optimizer.examples import random_problem

    return random_problem(n_gpus, n_jobs, 48, seed=seed, sizes=(1, 2, 4, 8, 16, 32),
                          size_weights=(0.2, 0.2, 0.2, 0.2, 0.1, 0.1), priorities=(1.0, 2.0, 4.0, 8.0),
                          max_duration_steps=48, settings=settings)


def default_limit_s(n_gpus: int) -> float:
    """The time limit of a size when ``--time-limit`` is not given (the issue's targets)."""
    return 30.0 if n_gpus <= 256 else 60.0 if n_gpus <= 1024 else 300.0


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_size(n_gpus: int, n_jobs: int, limit_s: float, gap: float | None, direct_max_steps: int | None) -> dict:
    """One plan in this process; returns the figures as a dict."""
    from optimizer import decomposition
    from optimizer.baselines import BASELINES, baseline_plan
    from optimizer.planners import best_baseline, plan
    from optimizer.problem import PlanSettings

    if direct_max_steps is not None:
        decomposition.DIRECT_MAX_STEPS = direct_max_steps
    kw = {"time_limit_s": limit_s} | ({} if gap is None else {"mip_rel_gap": gap})
    p = scale_problem(n_gpus, n_jobs, settings=PlanSettings(**kw))
    base = {b: baseline_plan(p, b).objective for b in BASELINES}
    best_baseline(p)  # warm the caches the planner's own call would (imports), outside the timing
    t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu_s()
    pl = plan(p, "milp")
    wall = time.perf_counter() - t0
    cpu, child = time.process_time() - c0, _children_cpu_s() - k0
    m = dict(pl.model or {})
    out = {
        "gpus": n_gpus, "jobs": n_jobs, "limit_s": limit_s, "status": str(pl.status), "path": str(pl.source),
        "objective": pl.objective, "bound": pl.bound, "gap": pl.gap, "wall_s": wall, "cpu_s": cpu,
        "child_cpu_s": child, "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "child_rss_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "model": m, "baselines": base, "message": pl.message, "clocked": pl.wall_clock_limited,
        "plan_sha256": _plan_digest(pl),
    }
    if direct_max_steps is not None:
        out.update(_lp_figures(p))
    return out


def _plan_digest(pl) -> str:
    """SHA-256 of a plan's assignments and service allocations (what the plan decides, not its timings)."""
    d = pl.to_dict()
    body = json.dumps({"jobs": d["jobs"], "services": d["services"]}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


WORK_KEYS = ("mip_work_limit", "mip_checks", "mip_nodes", "lp_iterations")


def _busy_loops(n: int) -> list[subprocess.Popen]:
    """Start ``n`` CPU-bound processes (``while True: pass``); the caller kills them by PID (:func:`_stop`)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _stop(procs: list[subprocess.Popen]) -> None:
    for pr in procs:
        pr.kill()
    for pr in procs:
        pr.wait()


def _lp_figures(p) -> dict:
    """Master nonzeros and its LP relaxation (time, value) under the current DIRECT_MAX_STEPS."""
    from optimizer.decomposition import build_count_model, solve_master_lp

    cm = build_count_model(p)
    t = time.perf_counter()
    lp = solve_master_lp(cm, time_limit_s=600.0)
    return {"master_nonzeros": int(cm.model.A.nnz), "master_cols": cm.model.n_cols, "lp_s": time.perf_counter() - t,
            "lp_value": None if lp.objective is None else lp.objective * cm.objective_scale}


def replans(n: int) -> None:
    """``--replans``: N plans of a 256-GPU, 120-job problem (seeds 1..N) in this process; RSS after each."""
    from optimizer.planners import plan
    from optimizer.problem import PlanSettings

    rss: list[float] = []
    t0 = time.perf_counter()
    for k in range(1, n + 1):
        plan(scale_problem(256, 120, seed=k, settings=PlanSettings(time_limit_s=10.0, mip_rel_gap=0.01)), "milp")
        rss.append(rss_mb())
        if k % 10 == 0 or k == 1:
            print(f"  after plan {k:>3}: RSS {rss[-1]:.1f} MB, peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MB",
                  flush=True)
    tail = rss[4:] or rss
    print(f"{n} plans of 256 GPUs x 120 jobs (time_limit_s 10, mip_rel_gap 0.01) in {time.perf_counter() - t0:.0f} s; "
          f"RSS after plan 5 {rss[min(4, n - 1)]:.1f} MB, after plan {n} {rss[-1]:.1f} MB; from plan 5 on min "
          f"{min(tail):.1f} max {max(tail):.1f} MB (spread {100 * (max(tail) / min(tail) - 1):.1f} %)")


def _fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES)
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--gap", type=float, default=None, help="mip_rel_gap (default: the settings' default)")
    ap.add_argument("--replans", type=int, default=0)
    ap.add_argument("--formulation", action="store_true")
    ap.add_argument("--load", type=int, default=0, help="also run each size with N busy-loop processes and compare")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # "GPUS,JOBS,LIMIT,GAP,DIRECT": child mode
    args = ap.parse_args()
    if args.one:
        n, j, lim, gap, direct = args.one.split(",")
        print(json.dumps(run_size(int(n), int(j), float(lim), None if gap == "-" else float(gap),
                                  None if direct == "-" else int(direct))))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks: busy loops killed by PID
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    if args.replans:
        replans(args.replans)
        return
    variants = [0, 48] if args.formulation else [None]
    loads = [0, args.load] if args.load else [0]
    for size in args.sizes.split(","):
        n, j = (int(x) for x in size.lower().split("x"))
        lim = args.time_limit if args.time_limit is not None else default_limit_s(n)
        runs: list[dict] = []
        for direct, extra in ((d, x) for d in variants for x in loads):
            one = f"{n},{j},{lim},{'-' if args.gap is None else args.gap},{'-' if direct is None else direct}"
            procs = _busy_loops(extra)
            try:
                time.sleep(2.0 if extra else 0.0)  # let the busy loops reach the run queue
                res = subprocess.run([sys.executable, __file__, "--one", one], capture_output=True, text=True)
                load_now = os.getloadavg()[0]
            finally:
                _stop(procs)
            if res.returncode != 0:
                print(f"{size}: failed: {res.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            r = json.loads(res.stdout.strip().splitlines()[-1])
            runs.append(r)
            m = r["model"]
            label = f"{n}x{j}" + ("" if direct is None else f" direct<={direct}")
            if args.load:
                label += f" [+{extra} busy loops, load {load_now:.1f}]" if extra else f" [as is, load {load_now:.1f}]"
            print(f"{label}: master rows {m.get('rows', 0):,} cols {m.get('cols', 0):,} ({m.get('method')}); path "
                  f"{r['path']}, status {r['status']}{' (clock)' if r['clocked'] else ''}; objective "
                  f"{r['objective']:.1f} bound {_fmt(r['bound'], '.1f')} gap {_fmt(r['gap'] and 100 * r['gap'], '.3f')} %; "
                  f"limit {r['limit_s']:g} s wall {r['wall_s']:.1f} s cpu {r['cpu_s']:.1f} s + HiGHS children "
                  f"{r['child_cpu_s']:.1f} s; peak RSS {r['rss_peak_mb']:.0f} MB (child {r['child_rss_peak_mb']:.0f} MB)",
                  flush=True)
            best = max(r["baselines"].values())
            print("    baselines: " + ", ".join(f"{k} {v:.1f}" for k, v in r["baselines"].items())
                  + f"; milp vs best baseline {100 * (r['objective'] / best - 1):+.2f} %", flush=True)
            if direct is not None:
                print(f"    master nonzeros {r['master_nonzeros']:,} cols {r['master_cols']:,}; LP relaxation "
                      f"{r['lp_s']:.2f} s value {_fmt(r['lp_value'], '.2f')}", flush=True)
            print("    work: " + ", ".join(f"{k} {m[k]}" for k in WORK_KEYS if k in m) + f"; plan {r['plan_sha256'][:16]}",
                  flush=True)
            print(f"    {r['message']}", flush=True)
        if args.load and len(runs) == 2:
            a, b = runs
            keys = ("objective", "bound", "status", "plan_sha256")
            same = all(a[k] == b[k] for k in keys) and all(a["model"].get(k) == b["model"].get(k) for k in WORK_KEYS)
            print(f"  {n}x{j} as is vs +{args.load} busy loops: "
                  + ("IDENTICAL (objective, bound, status, work counters, plan)" if same else
                     "DIFFERENT: " + "; ".join(f"{k} {a[k]} vs {b[k]}" for k in keys if a[k] != b[k])
                     + "; " + "; ".join(f"{k} {a['model'].get(k)} vs {b['model'].get(k)}" for k in WORK_KEYS
                                        if a["model"].get(k) != b["model"].get(k))), flush=True)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
