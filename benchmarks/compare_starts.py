"""Two planners' job starts on one scenario and seed, job by job, with each job's in-window value.

Usage: PYTHONPATH=. .venv/bin/python benchmarks/compare_starts.py --scenario big_gangs --seed 1 [--planners milp,priority]

Runs both planners through the bench's simulator and settings (:func:`pipelines.bench.run.run_item`)
and prints, per job (highest priority first, then arrival): priority, GPUs, true duration (steps),
arrival step, each planner's first start step (None: never started) and the job's value under each
(priority x GPUs x in-window steps x step hours, the value metric of :mod:`optimizer.metrics`), then
the totals. Shows which decisions make one planner's value differ from the other's.
"""

from __future__ import annotations

import argparse
import sys

from optimizer.planners import PLANNERS
from optimizer.scenarios import REAL_TRACES, SCENARIOS
from pipelines.bench.run import BenchConfig, BenchItem, build_scenario, run_item
from pipelines.catalog import load_real_trace


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--planners", default="milp,priority", help="two comma-separated planners")
    a = ap.parse_args(argv)
    names = [n.strip() for n in a.planners.split(",")]
    bad = (f"--scenario {a.scenario!r}: expected one of {', '.join(SCENARIOS)}" if a.scenario not in SCENARIOS
           else f"--seed {a.seed}: expected a seed >= 0" if a.seed < 0
           else f"--planners {a.planners!r}: expected two comma-separated names" if len(names) != 2
           else next((f"--planners: unknown planner {n!r}; expected two of {', '.join(PLANNERS)}"
                      for n in names if n not in PLANNERS), None))
    if bad:
        print(f"compare_starts: {bad}", file=sys.stderr)
        return 2
    cfg = BenchConfig(scenarios=(a.scenario,), seeds=1, seed=a.seed, clairvoyant=False, reproducible=True)
    sims = [run_item(BenchItem(a.scenario, a.seed, p), cfg).sim for p in names]
    sc = build_scenario(a.scenario, cfg, load_real_trace(scenario=a.scenario) if a.scenario in REAL_TRACES else None)
    h = sc.step_h
    totals = [0.0, 0.0]
    w = max([len("job"), *(len(j.job_id) for j in sc.jobs)]) + 2
    print(f"{'job':<{w}}{'prio':>6}{'gpus':>6}{'steps':>6}{'arr':>5}" + "".join(f"{n + ' start':>16}{n + ' value':>16}" for n in names))
    for j in sorted(sc.jobs, key=lambda j: (-j.priority, j.arrival_step, j.job_id)):
        cells = []
        for i, sim in enumerate(sims):
            start = sim.jobs[j.job_id].first_start_step
            v = 0.0 if start is None else j.priority * j.gpus * max(0, min(start + j.true_steps, sc.n_steps) - start) * h
            totals[i] += v
            cells.append(f"{start!s:>16}{v:>16.1f}")
        print(f"{j.job_id:<{w}}{j.priority:>6g}{j.gpus:>6}{j.true_steps:>6}{j.arrival_step:>5}" + "".join(cells))
    print("total (first starts, no restarts): " + ", ".join(f"{n} {t:.1f}" for n, t in zip(names, totals)))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BrokenPipeError:  # e.g. piped into head: the reader stopped, nothing is wrong
        sys.stderr.close()
        raise SystemExit(0) from None
