"""The pool MILP against priority backfill on typed problems of moderate size (issue 26).

Usage: ``.venv/bin/python benchmarks/bench_typed_milp.py [n_gpus n_jobs seeds...]``; prints one row per seed:
value ratio MILP / priority backfill and MILP / best baseline, proven gap, wall seconds, source, master size.
"""

from __future__ import annotations

import sys
import time

from optimizer.planners import plan
from optimizer.scenarios.typed_problem import typed_problem


def main(argv: list[str]) -> None:
    """Print the table of the module docstring."""
    n_gpus = int(argv[0]) if argv else 256
    n_jobs = int(argv[1]) if len(argv) > 1 else 100
    seeds = [int(s) for s in argv[2:]] or [0, 1, 2]
    print("gpus n_jobs seed milp/priority milp/best_baseline gap wall_s source status master_cols")
    for seed in seeds:
        p = typed_problem(seed, n_gpus, n_jobs)
        pr = plan(p, "priority").objective
        best = max(plan(p, b).objective for b in ("fifo", "easy", "priority"))
        t0 = time.perf_counter()
        m = plan(p, "milp")
        wall = time.perf_counter() - t0
        gap = "-" if m.gap is None else f"{m.gap:.3%}"
        cols = (m.model or {}).get("cols", "-")
        print(sum(n.gpus for n in p.cluster.nodes), n_jobs, seed, f"{m.objective / pr:.4f}", f"{m.objective / best:.4f}", gap, f"{wall:.1f}",
              m.source, m.status, cols, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
