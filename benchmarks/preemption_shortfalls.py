"""Where the MILP leaves real time unmet on ``forecast_error`` with a preemptible share (issue 30): per short step.

Prints, for one seed and share, every step where a service got fewer GPUs than its actual demand (with the GPUs
batch work held, the free GPUs and the swap cap), the stops made, and for each step given after the share the
running jobs (id, GPUs, preemptible, first start, last start, end, stop steps) and the surge replans. Same
scenario, settings and simulator as ``gpuplan bench`` (MILP on the work budget: deterministic). Usage::

    nice -n 19 .venv/bin/python benchmarks/preemption_shortfalls.py SEED SHARE [STEP ...]
    nice -n 19 .venv/bin/python benchmarks/preemption_shortfalls.py 1 0.3 13 17
"""

from __future__ import annotations

import sys
from dataclasses import replace

from optimizer.preemption import bench_order, with_preemptible_share
from optimizer.simulate import SURGE_REASON, planner_fn, simulate
from pipelines.bench.run import BenchConfig, build_scenario


def main(argv: list[str]) -> int:
    seed, share, steps = int(argv[0]), float(argv[1]), [int(a) for a in argv[2:]]
    cfg = BenchConfig(scenarios=("forecast_error",), seeds=1, clairvoyant=False, preemptible_share=share)
    sc = with_preemptible_share(build_scenario("forecast_error", replace(cfg, seed=seed), None), share, seed)
    print("n_gpus", sc.cluster.n_gpus, "services (name, max_gpus, swap_cap_gpus)",
          [(s.service, s.max_gpus, s.swap_cap_gpus) for s in sc.services])
    sim = simulate(sc, planner_fn("milp"), name="milp", replan_every_steps=cfg.replan_every_steps,
                   place_arrivals=cfg.place_arrivals, preempt_order=bench_order("milp"))
    for s in sc.services:
        dem, got = s.demand_true, sim.service_gpus[s.service]
        for t in range(sim.n_steps):
            if got[t] < dem[t]:
                batch = sum(sim.batch_gpus[k][t] for k in sim.batch_gpus)
                free = sim.n_gpus - batch - got[t] - sim.down_gpus[t]
                print(f"t={t} {s.service} demand {dem[t]} got {got[t]} (before {got[t - 1] if t else None}, "
                      f"swap cap {s.swap_cap_gpus}) batch {batch} down {sim.down_gpus[t]} free {free}")
    print("stops", sim.stops_per_job, "GPU-h lost", sim.preempted_gpu_h)
    pre = {j.job_id: j.preemptible for j in sc.jobs}
    print("preemptible jobs", sum(pre.values()), "of", len(pre))
    print("surge replans at", [r.step for r in sim.replans if r.reason == SURGE_REASON])
    for t in steps:
        rows = [(jid, r.gpus, pre[jid], r.first_start_step, r.start_step, r.end_step, r.stop_steps)
                for jid, r in sim.jobs.items()
                if r.first_start_step is not None and r.first_start_step <= t and (r.end_step is None or r.end_step > t)]
        print("t", t, "running (id, gpus, preemptible, first start, start, end, stops):", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
