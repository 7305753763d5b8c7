"""Issue 30's benchmark runs, one (scenario, share, seed) at a time, without the clairvoyant reference.

For each (scenario, preemptible share, seed) it runs the planners through :func:`pipelines.bench.run.run_item`
(the bench's settings; MILP on the work budget, deterministic; the offline bound computed with the first
planner, as ``gpuplan bench`` does without the clairvoyant row) and pickles the item results to
``OUT/SCENARIO/shareF/seedS.pkl``; ``--write`` then gathers every pickle of one (scenario, share) into a
:class:`pipelines.bench.run.BenchResult` and writes ``bench.csv``/``bench.md``/``bench.json`` with
:func:`pipelines.bench.tables.write_outputs` under ``OUT/SCENARIO/shareF/``. Existing pickles are skipped, so
the command can be restarted. Usage::

    nice -n 19 .venv/bin/python benchmarks/preempt_runs.py --out /work/bench-out/s11 \
        --plan forecast_error:0,0.3 diurnal_peak:0,0.3 forecast_error:1.0 diurnal_peak:1.0 --seeds 10
    .venv/bin/python benchmarks/preempt_runs.py --out /work/bench-out/s11 --write
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.bench.run import BenchConfig, BenchItem, BenchResult, _record, run_item  # noqa: E402

PLANNERS = ("milp", "fifo", "easy", "priority")


def config(name: str, share: float, seeds: int) -> BenchConfig:
    """The bench's config of one scenario and share: rows labelled ``NAME@SEED``, no clairvoyant row, reproducible CSV."""
    return BenchConfig(scenarios=(name,), planners=PLANNERS, seeds=seeds, clairvoyant=False, reproducible=True,
                       preemptible_share=share)


def run(out: Path, plan: list[tuple[str, list[float]]], seeds: int) -> None:
    for name, shares in plan:
        for seed in range(seeds):
            for share in shares:
                f = out / name / f"share{share:g}" / f"seed{seed}.pkl"
                if f.exists():
                    continue
                f.parent.mkdir(parents=True, exist_ok=True)
                cfg = config(name, share, seeds)
                t0 = time.perf_counter()
                items = []
                for p in PLANNERS:
                    r = run_item(BenchItem(name, seed, p), cfg)
                    m = r.metrics
                    items.append(r)
                    print(f"{name} share {share:g} seed {seed} {p}: value {m.value} RT {m.rt_sla_pct} "
                          f"lost {r.sim.preempted_gpu_h} stops {sum(r.sim.stops_per_job.values())} "
                          f"[{r.seconds:.0f} s]", flush=True)
                tmp = f.with_suffix(".tmp")
                tmp.write_bytes(pickle.dumps({"items": items, "seconds": time.perf_counter() - t0}))
                tmp.replace(f)


def write(out: Path) -> None:
    from optimizer.metrics import compute
    from pipelines.bench.tables import write_outputs

    for d in sorted(p for p in out.glob("*/share*") if p.is_dir()):
        pk = sorted(d.glob("seed*.pkl"), key=lambda p: int(p.stem[4:]))
        if not pk:
            continue
        name, share = d.parent.name, float(d.name[5:])
        seeds = [int(p.stem[4:]) for p in pk]
        cfg = replace(config(name, share, 10), seed=0)
        res = BenchResult(config=cfg)
        wall = 0.0
        for p in pk:
            blob = pickle.loads(p.read_bytes())
            wall += blob["seconds"]
            for r in blob["items"]:
                r.metrics = compute(r.sim)  # recomputed: the metrics of the code that writes
                _record(res, r, lambda s: None)
        res.wall_s = wall
        files = write_outputs(res, d)
        print(f"{d}: seeds {seeds}; wrote {', '.join(files[:3])}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--plan", nargs="*", default=[], help="SCENARIO:SHARE,SHARE ... in order")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    if a.write:
        write(a.out)
        return 0
    plan = [(s.split(":")[0], [float(x) for x in s.split(":")[1].split(",")]) for s in a.plan]
    run(a.out, plan, a.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
