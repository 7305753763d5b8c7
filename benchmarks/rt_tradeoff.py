"""Why the MILP leaves real-time demand unmet in a bench scenario with exact forecasts; prints
figures, asserts nothing (docs/benchmark.md, "Goals").

Runs the bench's MILP (same BenchConfig) through the rolling-horizon simulator on one scenario,
lists the steps where the service got fewer GPUs than its actual demand, finds the replan that
started the job occupying those GPUs, and re-solves that replan's problem exactly (gap 0) twice:
as posed (unmet demand penalised, w = kappa * max p) and with ``demand_hard`` (every unit served).
The difference in batch reward against the penalty saved shows the trade the §5 objective makes,
and the smallest kappa that would reverse it.

    .venv/bin/python benchmarks/rt_tradeoff.py [--scenario uniform_priority] [--time-limit 120]
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

from optimizer.objective import unmet_gpu_steps
from optimizer.planners import plan
from optimizer.simulate import planner_fn, simulate
from pipelines.bench import BenchConfig, build_scenario


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="uniform_priority")
    ap.add_argument("--time-limit", type=float, default=120.0, help="per exact re-solve, seconds")
    args = ap.parse_args()

    cfg = BenchConfig(scenarios=(args.scenario,))
    sc = build_scenario(args.scenario, cfg)
    sim = simulate(sc, planner_fn("milp"), name="milp", replan_every_steps=cfg.replan_every_steps, keep_plans=True)
    short = {s: [(t, a, d) for t, (a, d) in enumerate(zip(sim.service_gpus[s], sim.service_demand[s])) if a < d]
             for s in sim.service_gpus}
    print(f"{args.scenario}: steps where a service got fewer GPUs than its actual demand (step, allocated, demand):")
    for s, rows in short.items():
        print(f"  {s}: {rows}")
    steps = [t for rows in short.values() for t, _a, _d in rows]
    if not steps:
        print("no shortfall: nothing to explain")
        return
    t_short = max(steps)
    # the largest job running at the last shortfall step and the replan that started it
    running = [r for r in sim.jobs.values()
               if r.start_step is not None and r.start_step <= t_short and (r.end_step is None or r.end_step > t_short)]
    job = max(running, key=lambda r: (r.gpus, -r.start_step))
    t0 = max(t for t in sim.plans_at if t <= job.start_step and any(r.replanned and r.step == t for r in sim.replans))
    problem, committed = sim.problems_at[t0], sim.plans_at[t0]
    print(f"largest job running at step {t_short}: {job.job_id} ({job.gpus} GPUs, steps {job.start_step}-{job.end_step}); "
          f"planned at the replan of step {t0}")
    w = problem.unmet_penalty()
    exact = replace(problem.settings, time_limit_s=args.time_limit, mip_rel_gap=0.0, mip_work_limit=None)
    soft = plan(replace(problem, settings=exact), "milp")
    hard = plan(replace(problem, settings=replace(exact, demand_hard=True)), "milp")
    unmet = unmet_gpu_steps(soft, problem)
    reward_soft = soft.objective + w * unmet
    print(f"committed plan: objective {committed.objective:.2f}, planned unmet {unmet_gpu_steps(committed, problem):.0f} GPU-steps")
    print(f"exact, as posed ({soft.status}): objective {soft.objective:.2f} = batch reward {reward_soft:.2f} "
          f"- {w:g} x {unmet:.0f} unmet GPU-steps; {job.job_id} starts at horizon step {soft.job(job.job_id).start_step}")
    print(f"exact, demand_hard ({hard.status}): batch reward {hard.objective:.2f}; {job.job_id} starts at horizon step "
          f"{hard.job(job.job_id).start_step}")
    lost = reward_soft - hard.objective
    print(f"serving the demand in full costs {lost:.2f} of reward against {w * unmet:.2f} of penalty")
    if unmet > 0:
        max_p = w / problem.settings.penalty_ratio
        print(f"kappa needed to prefer it: > {lost / unmet / max_p:.2f} (DESIGN bounds kappa to [5, 10]; "
              f"smallest integer {math.floor(lost / unmet / max_p) + 1})")


if __name__ == "__main__":
    main()
