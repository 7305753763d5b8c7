"""Rolling-horizon benchmark of every planner on the scenarios (DESIGN §6)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli.support import WORKSPACE_HELP, check_out_parent, emit_json, run_guarded, use_workspace
from pipelines.io.errors import InputError

#: Default output folder of ``gpuplan bench`` (relative to the working directory).
DEFAULT_OUT = Path("bench_out")

#: The scenario names of DESIGN §6.5, listed in ``--help`` without importing the optimizer (0.35 s);
#: ``tests/pipelines/cli/test_cli_polish.py`` checks they equal :data:`optimizer.scenarios.SCENARIOS`.
SCENARIO_NAMES = ("mixed", "diurnal_peak", "big_gangs", "priority_skew", "uniform_priority", "scale_64x30",
                  "forecast_error", "real_trace", "real_trace_b")


def bench(
    scenario: str = typer.Option("all", "--scenario", metavar="NAME",
                                 help=f"'all' or comma-separated scenario names: {', '.join(SCENARIO_NAMES)}; also "
                                      "openb-het-a, openb-het-b (the typed openb windows, only when named)."),
    planners: str = typer.Option("milp,fifo,easy,priority", "--planners", metavar="LIST",
                                 help="Comma-separated planners (milp, fifo, easy, priority, fast); the clairvoyant "
                                      "reference row is always added."),
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = DEFAULT_OUT,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    quick: bool = typer.Option(False, "--quick", help="Reduced mode, seconds: 8-step windows with a 12-step horizon (what the tests run); its figures are not the benchmark's and its goals are not graded."),
    reproducible: bool = typer.Option(
        False, "--reproducible",
        help="Leave the wall-clock columns solve_s_p50/solve_s_max of bench.csv empty, so the same seed "
             "gives a byte-identical bench.csv (bench.md and bench.json keep the timings).",
    ),
    gpus: int | None = typer.Option(None, "--gpus", help="Cluster size (GPUs, a power of two >= 8) of every generated scenario; real-time demand is scaled to it."),
    jobs: int | None = typer.Option(None, "--jobs", help="Job count of every generated scenario."),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Run seeds FIRST..FIRST+N-1 (rows labelled SCENARIO@SEED when N > 1 or FIRST > 0)."),
    first_seed: int = typer.Option(0, "--first-seed", min=0, help="First seed (FIRST); runs of separate seeds can be concatenated for scripts/bench_tables.py."),
    dask: str | None = typer.Option(
        None, "--dask",
        help="Run the simulations on Dask through Prefect: a scheduler tcp://HOST:PORT, or local[:N] for a local "
             "cluster of N workers (default 2). Default: the workspace's [dask] address, else in-process.",
    ),
    place_arrivals: bool = typer.Option(
        False, "--place-arrivals",
        help="Between replans, start an arriving job that fits at once with the fast mode on the plan being "
             "followed (its starts kept) instead of letting it wait for the next replan. Changes only planners "
             "that do not replan every step: the MILP (every 2 steps); the baselines and fast replan every step. "
             "bench.md's settings line says it was on.",
    ),
    preemptible_share: float = typer.Option(
        0.0, "--preemptible-share", min=0.0, max=1.0,
        help="Share of batch jobs drawn preemptible by the seed (separate stream; checkpoint every 2 steps, "
             "restart 1 step); a surge replan may then stop them (issue 30). 0 (default): every figure unchanged.",
    ),
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
) -> None:
    """Simulate every planner on the scenarios; write bench.csv, bench.md and plots; print the results table.

    The table goes to standard output (the JSON document instead with ``--json``); progress lines go
    to standard error.
    """

    def body() -> int:
        ws = use_workspace(workspace)
        # imported here, not at the top: pipelines.bench pulls in pandas and the optimizer (~0.4 s
        # measured on the 2-core machine against ~0.1 s for the whole CLI), which `gpuplan --help`
        # and the other commands need not pay.
        from pipelines import bench as b

        check_out_parent(out)
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {out} is a file; give a folder for bench.csv, bench.md and plots")
        cfg = b.BenchConfig(
            scenarios=b.parse_scenarios(scenario),
            planners=tuple(p for p in b.parse_planners(planners) if p != b.CLAIRVOYANT),
            quick=quick,
            reproducible=reproducible,
            n_gpus=gpus,
            n_jobs=jobs,
            seeds=seeds,
            seed=first_seed,
            dask=dask or ws.config.dask.address,
            place_arrivals=place_arrivals,
            preemptible_share=preemptible_share,
        )
        if cfg.dask:
            from pipelines.workspace.config import parse_dask

            parse_dask(cfg.dask)
        res = b.run_bench(cfg, log=b.main_log)
        files = b.write_outputs(res, out)
        b.main_log(
            f"verified plans: {res.verified_plans}, violations: {res.violations}; "
            f"wall {res.wall_s:.0f} s; wrote {', '.join(files[:3])} ... under {out}"
        )
        if json_out:
            emit_json(b.bench_json(res, out, files))
        else:
            typer.echo(b.bench_text(res))
        return 0 if res.violations == 0 else 1

    run_guarded(body)
