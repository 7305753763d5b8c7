"""The offline bound per scenario (seed 0): LP relaxation against HiGHS's dual bound after one root node, with times.

Usage: PYTHONPATH=. .venv/bin/python benchmarks/bench_bound.py [--nodes 1] [--seed 0]

Prints, per scenario: columns of the time-indexed model, the LP bound and its seconds, the
integer model's dual bound after ``--nodes`` branch-and-bound nodes and its seconds, and how much
lower that is (%). Wall-clock seconds depend on the machine's load; the bounds do not.
"""

from __future__ import annotations

import argparse
import time

from optimizer.bound import offline_bound
from optimizer.scenarios import REAL_TRACES, SCENARIOS, build
from pipelines.catalog import load_real_trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"{'scenario':<18}{'columns':>8}{'LP bound':>11}{'LP s':>7}{'MIP bound':>11}{'MIP s':>7}{'lower %':>9}")
    for name in SCENARIOS:
        sc = build(name, args.seed, trace=load_real_trace(scenario=name) if name in REAL_TRACES else None)
        t0 = time.perf_counter()
        lp = offline_bound(sc)
        t1 = time.perf_counter()
        mip = offline_bound(sc, mip_max_nodes=args.nodes)
        t2 = time.perf_counter()
        d = mip.mip_dual_bound
        low = "–" if d is None else f"{100 * (1 - d / lp.value):.1f}"
        print(f"{name:<18}{lp.n_columns:>8}{lp.value:>11.1f}{t1 - t0:>7.2f}{d if d is not None else float('nan'):>11.1f}"
              f"{t2 - t1:>7.1f}{low:>9}")


if __name__ == "__main__":
    main()
