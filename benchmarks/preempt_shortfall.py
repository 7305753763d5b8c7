"""Why a preemptive MILP run misses real-time demand (issue 30): every short step of one (scenario, seed, share).

Re-runs the bench's simulation (:func:`pipelines.bench.run.run_item`, MILP on the work budget: the same run as
``gpuplan bench``) with the surge rule observed: at each surge replan (every step whose actual demand exceeds the
committed GPUs, :func:`optimizer.simulate._surge`) it records the demand, the GPUs the services may take under their
swap caps (``min(demand, max, current + swap cap)``), the free GPUs, :func:`optimizer.preemption.rt_shortfall`, the
preemptible running jobs (and their GPUs) and the stops chosen. Then, for every step with unmet demand after the
step, one line: demand, allocated, unmet, whether a surge replan ran, the part the swap cap left out, and what the
rule saw. Usage::

    nice -n 19 .venv/bin/python benchmarks/preempt_shortfall.py --scenario forecast_error --seed 1 --share 0.3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer import preemption  # noqa: E402
from optimizer.preemption import rt_shortfall, up_gpus_of  # noqa: E402
from pipelines.bench.run import BenchConfig, BenchItem, run_item  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="forecast_error")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--share", type=float, default=0.3)
    ap.add_argument("--planner", default="milp")
    a = ap.parse_args(argv)
    seen: dict[int, dict] = {}
    orig = preemption.surge_stops

    def observed(problem, order="loss"):
        stops = orig(problem, order)
        up = problem.cluster.n_gpus - len(set(problem.down_gpus))
        held = sum(up_gpus_of(r, problem) for r in problem.running)
        seen[len(seen)] = {
            "demand": sum(s.demand_gpus[0] for s in problem.services),
            "want": sum(min(s.demand_gpus[0], s.max_gpus, s.current_gpus + s.swap_cap_gpus) for s in problem.services),
            "current": sum(s.current_gpus for s in problem.services),
            "free": up - held,
            "short": rt_shortfall(problem),
            "pre": [(r.job_id, up_gpus_of(r, problem), bool(r.preemptible)) for r in problem.running
                    if r.preemptible or getattr(r, "checkpoint_interval_steps", None)],
            "stops": stops,
            "running": len(problem.running),
            "held": held,
        }
        return stops

    preemption.surge_stops = observed
    import optimizer.simulate as sim_mod

    surge_steps: list[int] = []
    orig_surge = sim_mod._surge

    def surge(loop, problem, t):
        n = len(seen)
        before = loop.res.surge_replans
        orig_surge(loop, problem, t)
        if loop.res.surge_replans > before:
            surge_steps.append(t)
            if len(seen) > n:
                seen[n]["t"] = t

    sim_mod._surge = surge
    try:
        cfg = BenchConfig(scenarios=(a.scenario,), seeds=10, clairvoyant=False, preemptible_share=a.share)
        item = run_item(BenchItem(a.scenario, a.seed, a.planner), cfg)
    finally:
        preemption.surge_stops = orig
        sim_mod._surge = orig_surge
    sim = item.sim
    by_t = {v["t"]: v for v in seen.values() if "t" in v}
    m = item.metrics
    print(f"{a.scenario}@{a.seed} share {a.share:g} {a.planner}: RT {m.rt_sla_pct} %, unmet {m.rt_unmet_gpu_h} GPU-h, "
          f"surge replans {m.surge_replans}, stops {sim.stops_per_job}, lost {sim.preempted_gpu_h} GPU-h")
    for jid, r in sim.jobs.items():
        if r.stop_steps:
            print(f"stopped: {jid} ({r.gpus} GPUs, priority {r.priority:g}) at step(s) {r.stop_steps}")
    print("step,demand,allocated,unmet_gpus,surge_replan,rule_want(swap cap),rule_current,free,rule_short,"
          "running_jobs(gpus),preemptible_running(id:gpus:allowed),stops")
    h = sim.step_h
    unmet_by_cause = {"swap cap": 0.0, "no preemptible running": 0.0, "other": 0.0}
    for t in range(sim.n_steps):
        d = sum(sim.service_demand[s][t] for s in sim.service_demand)
        g = sum(min(sim.service_gpus[s][t], sim.service_demand[s][t]) for s in sim.service_demand)
        if d <= g:
            continue
        v = by_t.get(t)
        if v is None:
            print(f"{t},{d},{g},{d - g},no,,,,,,,")
            unmet_by_cause["other"] += (d - g) * h
            continue
        pre = " ".join(f"{j}:{n}:{'y' if ok else 'n'}" for j, n, ok in v["pre"]) or "none"
        print(f"{t},{d},{g},{d - g},yes,{v['want']},{v['current']},{v['free']},{v['short']},{v['running']}({v['held']}),"
              f"{pre},{' '.join(v['stops']) or '-'}")
        cap_part = max(0, v["demand"] - v["want"])
        unmet_by_cause["swap cap"] += min(cap_part, d - g) * h
        rest = (d - g) - min(cap_part, d - g)
        if rest:
            unmet_by_cause["no preemptible running" if not any(ok for _, _, ok in v["pre"]) else "other"] += rest * h
    print("unmet GPU-h by cause: " + ", ".join(f"{k} {v:.1f}" for k, v in unmet_by_cause.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
