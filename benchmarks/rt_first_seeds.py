"""Per-seed MILP vs baselines on the bench's scenarios, without the clairvoyant reference (issue 15).

Prints one line per (scenario, seed, planner): value, utilisation %, real-time served %, surge
replans; then per seed the MILP's value ratio to priority backfill and whether its real-time
service is at least every baseline's. Same scenarios, settings and simulator as ``gpuplan bench``
(:func:`pipelines.bench.run.run_item`, MILP on the work limit: deterministic), minus the
clairvoyant rows (their ~100 s per seed would dominate). Usage::

    nice -n 10 .venv/bin/python benchmarks/rt_first_seeds.py --scenario forecast_error --seeds 5

``--preemptible-share F`` (issue 30): the share of batch jobs drawn preemptible (``gpuplan bench``'s option); with
F > 0 each line also gives the GPU-hours lost to preemption and the number of stops.
"""

from __future__ import annotations

import argparse
import sys
import time

from pipelines.bench.run import BenchConfig, BenchItem, run_item

PLANNERS = ("milp", "fifo", "easy", "priority")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", required=True, help="comma-separated scenario names")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--preemptible-share", type=float, default=0.0)
    ap.add_argument("--planners", default=",".join(PLANNERS), help="comma-separated; milp and priority needed")
    a = ap.parse_args(argv)
    planners = tuple(a.planners.split(","))
    names = tuple(a.scenario.split(","))
    cfg = BenchConfig(scenarios=names, seeds=a.seeds, clairvoyant=False, preemptible_share=a.preemptible_share)
    extra = ",preempted_gpu_h,stops" if a.preemptible_share else ""
    print("scenario,seed,planner,value,utilization_pct,rt_sla_pct,surge_replans,seconds" + extra, flush=True)
    for name in names:
        for seed in range(a.first_seed, a.first_seed + a.seeds):
            row = {}
            for p in planners:
                t0 = time.perf_counter()
                item = run_item(BenchItem(name, seed, p), cfg)
                m = row[p] = item.metrics
                more = f",{item.sim.preempted_gpu_h},{sum(item.sim.stops_per_job.values())}" if extra else ""
                print(f"{name},{seed},{p},{m.value},{m.utilization_pct},{m.rt_sla_pct},{m.surge_replans},"
                      f"{time.perf_counter() - t0:.0f}" + more, flush=True)
            mi = row["milp"]
            ratio = mi.value / row["priority"].value if row["priority"].value else float("nan")
            rt_ok = all(mi.rt_sla_pct >= row[b].rt_sla_pct for b in planners if b != "milp")
            print(f"# {name}@{seed}: milp/priority value {ratio:.4f}, util - fifo {mi.utilization_pct - row['fifo'].utilization_pct if 'fifo' in row else float('nan'):+.2f} "
                  f"pts, milp RT {mi.rt_sla_pct:.3f} % {'>=' if rt_ok else '<'} every baseline's", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
