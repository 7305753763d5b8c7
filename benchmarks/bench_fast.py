"""The fast mode (issue 29, ``planner = "fast"``): time per plan, verifier on many random problems; prints figures.

Three parts (``--part speed,verify`` by default; each prints its own lines, nothing is asserted):

- ``speed``: the median and worst wall time of :func:`optimizer.planners.plan` with ``"fast"`` (the whole call:
  candidates, ranking, the verifier) over ``--repeats`` (10) calls, at 64 GPUs x 30 jobs and 4,096 x 1,600
  (:func:`optimizer.examples.random_problem`, 48 half-hour steps, seed ``--seed``), and priority backfill's beside it.
- ``verify``: ``--problems`` (10,000) seeded random problems, every fast plan checked again by the independent
  verifier (:func:`optimizer.verify.verify`) and its rank compared with priority backfill's
  (:func:`optimizer.ranking.rank`). Three quarters homogeneous (:func:`optimizer.examples.random_problem`:
  8-64 GPUs, 1-40 jobs, 4-24 steps, sizes 1-16, 0-3 running jobs, down GPUs on one problem in five), one quarter
  typed (:func:`optimizer.scenarios.typed_problem.typed_problem`: three GPU types, nodes of 1-8 GPUs, a third of
  the jobs type-constrained, 32-128 GPUs). Seeds ``--seed`` upwards, none used by a test.
- ``bench``: the rolling-horizon simulation of every bench scenario (``gpuplan bench --scenario all``'s nine, the
  bench's settings: :class:`pipelines.bench.BenchConfig`, ``budget = "work"``) with ``priority`` and ``fast``,
  seeds 0-4, no clairvoyant reference, the offline bound as the LP relaxation; per scenario the mean over seeds of
  the value, real-time served % and utilisation of both, the ratio fast / priority backfill of the mean value, and
  the worst seed's ratio.

- ``arrivals``: the rolling-horizon option of :func:`optimizer.simulate.simulate` ``place_arrivals`` measured both
  ways: the ``milp`` planner (replanning every 2 steps, the bench's default) on every bench scenario, seeds
  ``0 .. --bench-seeds - 1``, without and with arrivals between replans started by the fast mode; per scenario the
  mean value, real-time served %, wait P50 / P95 (h, all jobs) and the count of steps where an arrival was started.

    nice -n 10 .venv/bin/python benchmarks/bench_fast.py [--part speed,verify,bench,arrivals] [--problems 10000]
        [--repeats 10] [--bench-seeds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.capacity import least_unmet_rt  # noqa: E402
from optimizer.examples import random_problem  # noqa: E402
from optimizer.planners import plan  # noqa: E402
from optimizer.ranking import rank  # noqa: E402
from optimizer.scenarios.typed_problem import typed_problem  # noqa: E402
from optimizer.verify import verify  # noqa: E402


def speed(seed: int, repeats: int) -> None:
    """Median / worst milliseconds per fast plan and per priority-backfill plan at the issue's two sizes."""
    for n_gpus, n_jobs in ((64, 30), (4096, 1600)):
        p = random_problem(n_gpus, n_jobs, 48, seed=seed)
        for name in ("fast", "priority"):
            ts = []
            for _ in range(repeats):
                t = time.perf_counter()
                got = plan(p, name)
                ts.append(1000.0 * (time.perf_counter() - t))
            print(f"speed {n_gpus} x {n_jobs}: {name:8s} median {statistics.median(ts):8.1f} ms, worst {max(ts):8.1f} ms "
                  f"over {repeats}; objective {got.objective:.1f}, source {got.source}", flush=True)


def _problem(k: int, rng_seed: int):
    import numpy as np

    rng = np.random.default_rng(rng_seed)
    if k % 4 == 3:
        return typed_problem(rng_seed, n_gpus=int(rng.choice([32, 64, 128])), n_jobs=int(rng.integers(1, 60)),
                             horizon_steps=int(rng.integers(4, 25)), load=float(rng.uniform(0.5, 2.0)))
    n = int(rng.choice([8, 16, 32, 64]))
    p = random_problem(n, int(rng.integers(1, 41)), int(rng.integers(4, 25)), seed=rng_seed,
                       sizes=tuple(s for s in (1, 2, 4, 8, 16) if s <= n), max_duration_steps=int(rng.integers(1, 17)),
                       n_running=int(rng.integers(0, 4)), gpus_per_node=int(rng.choice([4, 8])))
    if rng.random() < 0.2:  # a few GPUs down, none under a running job
        held = {g for r in p.running for g in range(r.block_offset, r.block_offset + r.gpus)}
        free = [g for g in range(n) if g not in held]
        down = tuple(sorted(int(g) for g in rng.choice(free, size=min(len(free), max(1, n // 16)), replace=False)))
        p = replace(p, down_gpus=down)
    return p


def verify_many(seed: int, n: int) -> None:
    """``n`` random problems: violations of fast plans and how often fast ranks below / equal / above priority."""
    bad = below = equal = above = skipped = 0
    t0 = time.perf_counter()
    for k in range(n):
        try:
            p = _problem(k, seed + k)
            f = plan(p, "fast")
        except Exception as exc:  # an invalid draw (a job larger than the cluster, an infeasible band): counted
            from optimizer.diagnose import InfeasibleProblemError
            from optimizer.errors import InputError

            if not isinstance(exc, (InputError, InfeasibleProblemError, ValueError)):
                raise
            skipped += 1
            continue
        v = verify(f, p)
        if v:
            bad += 1
            print(f"violation on problem {k} (seed {seed + k}): {v[:3]}", flush=True)
        least = least_unmet_rt(p)
        rf, rp = rank(f, p, least), rank(plan(p, "priority"), p, least)
        if rf < rp:
            below += 1
        elif rf == rp:
            equal += 1
        else:
            above += 1
        if (k + 1) % 1000 == 0:
            print(f"  {k + 1} problems, {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"verify: {n} problems (seeds {seed}..{seed + n - 1}), {skipped} invalid draws skipped; "
          f"fast plans with violations: {bad}; fast vs priority backfill by rank: above {above}, equal {equal}, "
          f"below {below}; {time.perf_counter() - t0:.0f} s", flush=True)


def bench_scenarios(seeds: int) -> None:
    """Mean value, real-time served % and utilisation over seeds ``0 .. seeds-1`` per scenario, fast vs priority."""
    from collections import defaultdict

    from pipelines.bench import BenchConfig, run_bench
    from pipelines.bench.run import parse_scenarios

    t0 = time.perf_counter()
    cfg = BenchConfig(scenarios=parse_scenarios("all"), planners=("priority", "fast"), clairvoyant=False,
                      reproducible=True, seeds=seeds, bound_mip_nodes=None)
    res = run_bench(cfg)
    rows: dict[tuple[str, str], list] = defaultdict(list)
    for m in res.metrics:
        rows[(m.scenario.split("@")[0], m.planner)].append(m)
    print(f"bench: {len(cfg.scenarios)} scenarios x {seeds} seeds, planners priority, fast; {res.violations} violations "
          f"in {res.verified_plans} verified plans; {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"{'scenario':18s} {'value prio':>10s} {'value fast':>10s} {'fast/prio':>9s} {'worst seed':>10s} "
          f"{'RT% prio':>8s} {'RT% fast':>8s} {'util prio':>9s} {'util fast':>9s}")
    for sc in cfg.scenarios:
        p, f = rows[(sc, "priority")], rows[(sc, "fast")]
        mean = lambda ms, a: statistics.fmean(getattr(m, a) for m in ms)  # noqa: E731
        worst = min((b.value / a.value) if a.value else float("inf") for a, b in zip(p, f, strict=True))
        ratio = mean(f, "value") / mean(p, "value") if mean(p, "value") else float("inf")
        print(f"{sc:18s} {mean(p, 'value'):10.1f} {mean(f, 'value'):10.1f} {ratio:9.3f} {worst:10.3f} "
              f"{mean(p, 'rt_sla_pct'):8.2f} {mean(f, 'rt_sla_pct'):8.2f} {mean(p, 'utilization_pct'):9.1f} "
              f"{mean(f, 'utilization_pct'):9.1f}", flush=True)


def arrivals(seeds: int) -> None:
    """The MILP with and without arrivals between replans started by the fast mode (module docstring)."""
    from collections import defaultdict

    from pipelines.bench import BenchConfig, run_bench
    from pipelines.bench.run import parse_scenarios

    out: dict[bool, dict[str, list]] = {}
    placed: dict[bool, dict[str, int]] = {}
    for on in (False, True):
        t0 = time.perf_counter()
        cfg = BenchConfig(scenarios=parse_scenarios("all"), planners=("milp",), clairvoyant=False, reproducible=True,
                          seeds=seeds, bound_mip_nodes=None, place_arrivals=on)
        res = run_bench(cfg)
        out[on] = defaultdict(list)
        placed[on] = defaultdict(int)
        for m in res.metrics:
            out[on][m.scenario.split("@")[0]].append(m)
        for (sc, _), sim in res.sims.items():
            placed[on][sc.split("@")[0]] += sim.arrival_placements
        print(f"arrivals {'on' if on else 'off'}: {res.violations} violations in {res.verified_plans} verified plans, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    mean = lambda ms, a: statistics.fmean(getattr(m, a) for m in ms if getattr(m, a) is not None)  # noqa: E731
    print(f"{'scenario':18s} {'value off':>9s} {'value on':>9s} {'RT% off':>7s} {'RT% on':>7s} "
          f"{'wait p50 off/on h':>17s} {'wait p95 off/on h':>17s} {'placed':>6s}")
    for sc in out[False]:
        a, b = out[False][sc], out[True][sc]
        print(f"{sc:18s} {mean(a, 'value'):9.1f} {mean(b, 'value'):9.1f} {mean(a, 'rt_sla_pct'):7.2f} "
              f"{mean(b, 'rt_sla_pct'):7.2f} {mean(a, 'wait_p50_h'):8.2f}/{mean(b, 'wait_p50_h'):<8.2f} "
              f"{mean(a, 'wait_p95_h'):8.2f}/{mean(b, 'wait_p95_h'):<8.2f} {placed[True][sc]:6d}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", default="speed,verify")
    ap.add_argument("--problems", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seed", type=int, default=29_000)
    ap.add_argument("--bench-seeds", type=int, default=5)
    a = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    parts = {x.strip() for x in a.part.split(",")}
    if "speed" in parts:
        speed(a.seed, a.repeats)
    if "verify" in parts:
        verify_many(a.seed, a.problems)
    if "bench" in parts:
        bench_scenarios(a.bench_seeds)
    if "arrivals" in parts:
        arrivals(a.bench_seeds)
    print(f"load average at end: {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
