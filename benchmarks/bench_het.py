"""The heterogeneous openb benchmark as measured for docs/benchmark.md (issue 26): run_bench without the clairvoyant row.

Usage:
    nice -n 10 .venv/bin/python benchmarks/bench_het.py PLANNERS OUT SEEDS SCENARIOS [FIRST_SEED]
    nice -n 10 .venv/bin/python benchmarks/bench_het.py priority,fifo,easy,milp /tmp/het 5 openb-het-a,openb-het-b

The bench's defaults (:class:`pipelines.bench.BenchConfig`) with ``clairvoyant=False`` (the reference would be the
typed pool MILP again, doubling the time) and ``bound_mip_nodes=None``
(the LP-relaxation bound, seconds instead of minutes); ``--reproducible``. Writes bench.csv, bench_types.csv
(per-type utilisation), bench.md under OUT. ``gpuplan bench --scenario openb-het-a,openb-het-b`` gives the same
rows plus the clairvoyant row and the root-node bound.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines import bench as b  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    cfg = b.BenchConfig(scenarios=b.parse_scenarios(argv[3]), planners=b.parse_planners(argv[0]), clairvoyant=False,
                        reproducible=True, seeds=int(argv[2]), seed=int(argv[4]) if len(argv) > 4 else 0,
                        bound_mip_nodes=None)
    res = b.run_bench(cfg, log=b.main_log)
    b.write_outputs(res, Path(argv[1]))
    b.main_log(f"verified plans {res.verified_plans}, violations {res.violations}, wall {res.wall_s:.0f} s, "
               f"load {res.load_before} -> {res.load_after}")
    return 0 if res.violations == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
