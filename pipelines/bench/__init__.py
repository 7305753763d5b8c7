"""The benchmark of DESIGN §6: every planner through the rolling-horizon simulator on every scenario.

- :mod:`pipelines.bench.run`: :class:`BenchConfig`, :func:`run_bench` (simulations and metrics);
- :mod:`pipelines.bench.tables`: ``bench.csv``, ``bench.md``, ``bench.json`` (:func:`write_outputs`);
- :mod:`pipelines.bench.plots`: the PNG plots.
"""

from pipelines.bench.plots import write_plots
from pipelines.bench.run import (
    CLAIRVOYANT,
    REFERENCE,
    BenchConfig,
    BenchResult,
    build_scenario,
    main_log,
    parse_planners,
    parse_scenarios,
    run_bench,
)
from pipelines.bench.tables import bench_csv, bench_json, bench_md, bench_text, comparison_rows, goals, write_outputs

__all__ = [
    "CLAIRVOYANT", "REFERENCE", "BenchConfig", "BenchResult", "bench_csv", "bench_json", "bench_md", "bench_text",
    "build_scenario", "comparison_rows", "goals", "main_log", "parse_planners", "parse_scenarios", "run_bench",
    "write_outputs", "write_plots",
]
