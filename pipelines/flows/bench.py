"""The benchmark flow: the rolling-horizon benchmark (:mod:`pipelines.bench`) run and logged to MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from pipelines import bench
from pipelines.config.settings import Settings, load_settings
from pipelines.flows.progress import Stage
from pipelines.tracking import runs as tracking_runs
from pipelines.tracking import store as tracking_store


def run_benchmark(settings: Settings, scenario: str, quick: bool, out: Path) -> dict[str, Any]:
    """Run the rolling-horizon benchmark (:mod:`pipelines.bench`, ``docs/benchmark.md``).

    Writes its
    outputs into ``out`` and log one run to the ``benchmarks`` experiment
    (:func:`pipelines.tracking.runs.log_benchmark_run`).

    Returns ``{"out_dir", "mlflow_run_id", "wall_s", "verified_plans", "violations"}``.
    """
    cfg = bench.BenchConfig(scenarios=bench.parse_scenarios(scenario), quick=quick, seed=settings.seed)
    res = bench.run_bench(cfg)
    files = bench.write_outputs(res, out)
    rid = tracking_runs.log_benchmark_run(settings, scenario, quick, out, cfg, res, files)
    return {"out_dir": str(out), "mlflow_run_id": rid, "wall_s": round(res.wall_s, 1),
            "verified_plans": res.verified_plans, "violations": res.violations}


@flow(name="benchmark", log_prints=False)
def benchmark(scenario: str = "all", quick: bool = True, out_dir: str | None = None) -> dict[str, Any]:
    """Run the rolling-horizon benchmark (:func:`run_benchmark`) and log it.

    Logged to the ``benchmarks``
    experiment. Returns ``{"out_dir", "mlflow_run_id", "wall_s", "verified_plans", "violations"}``.
    """
    s = load_settings()
    tracking_store.init_store(s)
    out = Path(out_dir) if out_dir else s.runs_dir / "bench"
    with Stage("benchmark"):
        return run_benchmark(s, scenario, quick, out)
