"""Running the benchmark of DESIGN §6: every planner through the rolling-horizon simulator.

Every planner on every scenario, plus the clairvoyant reference; the results are written as
``bench.csv``, ``bench.md``, ``bench.json`` and plots.

This module runs the simulations; :mod:`pipelines.bench.tables` writes ``bench.csv``/``bench.md``/
``bench.json`` and :mod:`pipelines.bench.plots` the PNGs. The command (``gpuplan bench``) lives in
:mod:`pipelines.cli.bench`.

Budget (full run, measured on the 2-core machine; see ``docs/benchmark.md``): the MILP replans
every ``replan_every_steps`` = 2 steps (hourly — DESIGN §1 "every 30–60 minutes") with a 2 %
relative gap per solve and a deterministic work limit of ``mip_work_limit`` HiGHS limit checks per
solve (``Settings.mip_work_limit``, see :func:`optimizer.solver.solve`); ``time_limit_s`` = 60 s is only the
deadline of each plan (no plan came near it in the documented runs); the baselines replan every step; the
clairvoyant reference is the same rolling MILP planned with the truth (see
:func:`optimizer.simulate.simulate_clairvoyant`), replanning every 4 steps (with the truth and the
arrivals inside the horizon known, a plan stays valid until new jobs come into view).
``--quick`` (tests): an 8-step window and a 12-step horizon on the same scenarios.

Determinism: scenarios, simulator and baselines are deterministic; HiGHS runs single-threaded
with a fixed seed and stops on a work limit, not on the clock. Two runs give the same
``bench.csv`` except the wall-clock columns ``solve_s_p50`` and ``solve_s_max`` — unless a solve
reaches its wall-clock *deadline* (its incumbent then depends on machine speed); ``bench.md``
counts such solves per row and warns when there is any. With ``reproducible`` (``--reproducible``)
the two timing columns are left empty and the whole file repeats byte for byte.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from optimizer.bound import OfflineBound, offline_bound
from optimizer.metrics import compute, type_utilization
from optimizer.planners import PLANNERS
from optimizer.preemption import bench_order, with_preemptible_share
from optimizer.scenarios import HET_TRACES, REAL_TRACES, SCENARIOS, build
from optimizer.simulate import planner_fn, simulate, simulate_clairvoyant
from pipelines.catalog import TRACE_DIR, load_real_trace
from pipelines.io.errors import InputError

REFERENCE = {
    "_all": "utilisation up to +33 points; priority-weighted value higher in every scenario, up to +105 %",
    "scale_64x30": "same 44.9 % utilisation and 27/30 jobs completed, yet +15.9 % value",
    "uniform_priority": "utilisation 76.8 % -> 87.5 %, value +23.1 %",
}

CLAIRVOYANT = "clairvoyant"


@dataclass(frozen=True)
class BenchConfig:
    """What to run.

    ``planners`` from ``optimizer.planners.PLANNERS``; ``clairvoyant`` adds the reference row. Solver budget per MILP replan: ``mip_work_limit`` (deterministic work limit per
    HiGHS solve; None = the planner's default, sized from the master and ``time_limit_s``), ``time_limit_s`` (then a
    deadline of each plan), ``mip_rel_gap``; the MILP replans every ``replan_every_steps``;
    baselines every ``baseline_replan_every_steps``. ``reproducible``: leave the wall-clock
    columns of ``bench.csv`` (:data:`optimizer.metrics.TIMING_COLUMNS`) empty, so that the same
    seed gives a byte-identical file (``bench.md``/``bench.json`` keep the timings). ``n_gpus`` /
    ``n_jobs``: cluster size and job count of every generated scenario instead of its own, with
    real-time demand scaled to the cluster (:func:`optimizer.scenarios.build`; None = the scenario's).
    ``seeds``: run seeds ``seed .. seed + seeds - 1``; with more than one, each scenario's rows are
    labelled ``NAME@SEED`` (:func:`scenario_label`). ``dask``: where the simulations run (issue 17):
    None in this process, ``"local"`` or ``"local:N"`` a local Dask cluster of N worker processes
    (default 2), or a scheduler address ``tcp://HOST:PORT``; through Prefect's ``DaskTaskRunner``
    (:mod:`pipelines.bench.distributed`). The results do not depend on where they ran.
    ``bound_mip_nodes``: each scenario's offline bound (:func:`optimizer.bound.offline_bound`) is
    HiGHS's dual bound of the integer whole-window model after that many branch-and-bound nodes
    when lower than the LP relaxation (default 1: the root node with its cuts, 0.7-23 s per
    scenario, deterministic; 50 nodes lowered it by at most 0.1 % on forecast_error and
    uniform_priority seeds 0-4). None: the LP relaxation alone (0.1-0.3 s), 0.8-9.9 % higher (``benchmarks/bench_bound.py``).
    ``place_arrivals``: between replans, arrivals that fit at once are started by the fast mode on the followed plan
    (:func:`optimizer.simulate.simulate`'s option, issue 29; ``gpuplan bench --place-arrivals``); off by default.
    ``preemptible_share`` (issue 30): the share of batch jobs drawn preemptible by the seed on a separate stream
    (:func:`optimizer.preemption.with_preemptible_share`; 0: every figure unchanged); the baselines stop the
    lowest-priority ones first, the other planners the cheapest (:func:`optimizer.preemption.bench_order`).
    """

    scenarios: tuple[str, ...]
    planners: tuple[str, ...] = ("milp", "fifo", "easy", "priority")
    seed: int = 0
    quick: bool = False
    clairvoyant: bool = True
    replan_every_steps: int = 2
    baseline_replan_every_steps: int = 1
    clairvoyant_replan_every_steps: int = 4
    time_limit_s: float = 60.0
    mip_rel_gap: float = 0.02
    mip_work_limit: int | None = 200
    quick_window_steps: int = 8
    quick_horizon_steps: int = 12
    reproducible: bool = False
    n_gpus: int | None = None
    n_jobs: int | None = None
    seeds: int = 1
    dask: str | None = None
    bound_mip_nodes: int | None = 1
    place_arrivals: bool = False
    preemptible_share: float = 0.0


@dataclass
class BenchResult:
    """All metrics, the simulations (for the plots) and run facts."""

    config: BenchConfig
    metrics: list[Any] = field(default_factory=list)
    sims: dict[tuple[str, str], Any] = field(default_factory=dict)
    bounds: dict[str, OfflineBound] = field(default_factory=dict)
    scenario_params: dict[str, dict] = field(default_factory=dict)
    exact: dict[str, bool] = field(default_factory=dict)
    wall_s: float = 0.0
    load_before: tuple[float, float, float] | None = None
    load_after: tuple[float, float, float] | None = None
    #: (scenario, planner) -> {gpu_type: utilisation %} of a typed scenario (issue 26; ``bench_types.csv``)
    type_util: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    #: scenario -> {gpu_type: GPUs} of a typed scenario
    type_gpus: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def verified_plans(self) -> int:
        """Plans checked by the verifier, summed over all rows."""
        return sum(m.verified_plans for m in self.metrics)

    @property
    def violations(self) -> int:
        """Verifier violations, summed over all rows (0 expected)."""
        return sum(m.violations for m in self.metrics)


def parse_planners(text: str) -> tuple[str, ...]:
    """Comma-separated planner names; ``clairvoyant`` allowed. Raises :class:`InputError`."""
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))  # a name given twice runs once
    if not names:
        raise InputError("--planners: give at least one planner")
    bad = [n for n in names if n not in PLANNERS and n != CLAIRVOYANT]
    if bad:
        raise InputError(f"--planners: unknown planner {bad[0]!r}; choose from {', '.join(PLANNERS)}, {CLAIRVOYANT}")
    return names


def parse_scenarios(text: str) -> tuple[str, ...]:
    """``all`` or comma-separated scenario names. Raises :class:`InputError`.

    ``all`` is :data:`optimizer.scenarios.SCENARIOS`; the heterogeneous openb windows
    (:data:`optimizer.scenarios.HET_TRACES`) run only when named.
    """
    if text.strip() == "all":
        return SCENARIOS
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    known = (*SCENARIOS, *HET_TRACES)
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise InputError(f"--scenario: unknown scenario {bad[0] if bad else text!r}; expected all or one of {', '.join(known)}")
    return names


def _quick(sc, cfg: BenchConfig):
    """The reduced scenario of ``--quick``: same jobs and demand, shorter window and horizon."""
    cluster = replace(sc.cluster, horizon_steps=cfg.quick_horizon_steps)
    return replace(sc, cluster=cluster, n_steps=cfg.quick_window_steps)


def build_scenario(name: str, cfg: BenchConfig, trace=None):
    """Build one scenario (reduced under ``--quick``) with the bench's solver settings."""
    sizes = {} if name in REAL_TRACES or name in HET_TRACES else {"n_gpus": cfg.n_gpus, "n_jobs": cfg.n_jobs}
    sc = build(name, cfg.seed, trace=trace, **sizes)
    if cfg.quick:
        sc = _quick(sc, cfg)
    settings = replace(sc.settings, time_limit_s=cfg.time_limit_s, mip_rel_gap=cfg.mip_rel_gap, threads=1,
                       mip_work_limit=cfg.mip_work_limit,
                       budget="work" if cfg.mip_work_limit is not None else "time")  # DESIGN §5: the bench's mode
    return replace(sc, settings=settings)


def _loadavg() -> tuple[float, float, float] | None:
    try:
        return tuple(round(x, 2) for x in os.getloadavg())  # type: ignore[return-value]
    except OSError:  # pragma: no cover
        return None


@dataclass(frozen=True)
class BenchItem:
    """One simulation of the bench: scenario ``scenario`` with ``seed``, planned by ``planner`` (or the clairvoyant reference)."""

    scenario: str
    seed: int
    planner: str


@dataclass
class ItemResult:
    """What one :class:`BenchItem` gives: the simulation, its metrics, the scenario's parameters and forecast kind, seconds taken.

    ``bound``: the scenario's offline bound, computed by one item per scenario and seed
    (:func:`carries_bound`), else None.
    """

    sim: Any
    metrics: Any
    params: dict
    exact: bool
    seconds: float
    bound: OfflineBound | None = None


def scenario_label(name: str, seed: int, cfg: BenchConfig) -> str:
    """The scenario column of a row: ``name`` for a run of seed 0 alone, else ``name@seed`` (``cfg.seeds`` > 1 or a first seed above 0)."""
    return name if cfg.seeds <= 1 and cfg.seed == 0 else f"{name}@{seed}"


def bench_items(cfg: BenchConfig) -> list[BenchItem]:
    """Every simulation of ``cfg`` in the order of ``bench.csv``: seeds, then scenarios, then planners, then the clairvoyant reference."""
    items = []
    for seed in range(cfg.seed, cfg.seed + max(1, cfg.seeds)):
        for name in cfg.scenarios:
            items += [BenchItem(name, seed, p) for p in cfg.planners if p != CLAIRVOYANT]
            if cfg.clairvoyant or CLAIRVOYANT in cfg.planners:
                items.append(BenchItem(name, seed, CLAIRVOYANT))
    return items


def carries_bound(item: BenchItem, cfg: BenchConfig) -> bool:
    """True for the one item per (scenario, seed) that also computes the offline bound: the clairvoyant reference, else the first planner."""
    if cfg.clairvoyant or CLAIRVOYANT in cfg.planners:
        return item.planner == CLAIRVOYANT
    return item.planner == next(p for p in cfg.planners if p != CLAIRVOYANT)


_TRACES: dict[tuple[Path, str], Any] = {}


def run_item(item: BenchItem, cfg: BenchConfig, trace_dir: Path | None = None) -> ItemResult:
    """Build the scenario of ``item`` and simulate it (the unit of work sent to a Dask worker).

    Deterministic: the same item and config give the same simulation wherever it runs (the MILP
    stops on its work limit; :class:`BenchConfig`). Raises :class:`InputError` for a missing trace.
    """
    ts = time.perf_counter()
    trace = None
    if item.scenario in REAL_TRACES or item.scenario in HET_TRACES:
        key = (trace_dir or TRACE_DIR, item.scenario)
        if key not in _TRACES:
            _TRACES[key] = load_real_trace(*key)
        trace = _TRACES[key]
    sc = build_scenario(item.scenario, replace(cfg, seed=item.seed), trace)
    sc = replace(sc, name=scenario_label(sc.name, item.seed, cfg))
    sc = with_preemptible_share(sc, cfg.preemptible_share, item.seed)
    if item.planner == CLAIRVOYANT:
        sim = simulate_clairvoyant(sc, planner_fn("milp"), name=CLAIRVOYANT,
                                   replan_every_steps=cfg.clairvoyant_replan_every_steps)
    else:
        k = cfg.replan_every_steps if item.planner == "milp" else cfg.baseline_replan_every_steps
        sim = simulate(sc, planner_fn(item.planner), name=item.planner, replan_every_steps=k,
                       place_arrivals=cfg.place_arrivals, preempt_order=bench_order(item.planner))
    bound = offline_bound(sc, mip_max_nodes=cfg.bound_mip_nodes) if carries_bound(item, cfg) else None
    return ItemResult(sim, compute(sim), dict(sc.params), sc.exact_forecasts, time.perf_counter() - ts, bound)


def run_bench(
    cfg: BenchConfig,
    trace_dir: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> BenchResult:
    """Simulate every (seed, scenario, planner) of ``cfg``; returns the metrics and simulations.

    In this process by default; on Dask through Prefect when ``cfg.dask`` is set
    (:func:`pipelines.bench.distributed.run_items`), with the same results in the same order.
    Raises :class:`InputError` for unknown names, a missing real-trace file or a bad ``dask`` value.
    """
    log = log or (lambda s: None)
    res = BenchResult(config=cfg, load_before=_loadavg())
    t0 = time.perf_counter()
    items = bench_items(cfg)
    for name in (*REAL_TRACES, *HET_TRACES):
        if name in cfg.scenarios:
            load_real_trace(trace_dir or TRACE_DIR, name)  # a missing trace fails here, before any simulation
    if cfg.dask:
        from pipelines.bench.distributed import run_items

        for out in run_items(items, cfg.dask, run_item, cfg, trace_dir):
            _record(res, out, log)
    else:
        for item in items:
            _record(res, run_item(item, cfg, trace_dir), log)
    res.wall_s = time.perf_counter() - t0
    res.load_after = _loadavg()
    return res


def _record(res: BenchResult, out: ItemResult, log) -> None:
    sim, m = out.sim, out.metrics
    res.scenario_params.setdefault(sim.scenario, out.params)
    res.exact.setdefault(sim.scenario, out.exact)
    res.sims[(sim.scenario, sim.planner)] = sim
    if out.bound is not None:
        res.bounds[sim.scenario] = out.bound
    res.metrics.append(m)
    if sim.type_gpus:
        res.type_util[(sim.scenario, sim.planner)] = type_utilization(sim)
        res.type_gpus.setdefault(sim.scenario, dict(sim.type_gpus))
    log(
        f"{sim.scenario:>16} {sim.planner:>11}: util {m.utilization_pct:6.2f} %  value {m.value:9.1f}  "
        f"jobs {m.jobs_completed}/{m.jobs_total}  RT {m.rt_sla_pct:7.3f} %  solves {m.replans} "
        f"(p50 {m.solve_s_p50 or 0:.2f} s, max {m.solve_s_max or 0:.2f} s)  verified {m.verified_plans}, "
        f"violations {m.violations}  [{out.seconds:.0f} s]"
        + (f"  WARNING: {m.wall_clock_limited_solves} solve(s) stopped on the wall-clock deadline "
           "(this row may not reproduce)" if m.wall_clock_limited_solves else "")
    )


def main_log(msg: str) -> None:
    """Progress line to standard error (stdout is reserved for ``--json``)."""
    print(msg, file=sys.stderr, flush=True)
