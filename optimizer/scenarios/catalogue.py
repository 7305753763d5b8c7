"""The catalogue of named scenarios (DESIGN §6.5), each built by a pure function of a seed.

| id | generator | cluster | jobs | forecasts |
|---|---|---|---|---|
| ``mixed`` | :func:`mixed` | 32 GPUs | 20 | exact |
| ``diurnal_peak`` | :func:`diurnal_peak` | 64 GPUs | 40 | exact |
| ``big_gangs`` | :func:`big_gangs` | 64 GPUs | 30 | exact |
| ``priority_skew`` | :func:`priority_skew` | 32 GPUs | 25 | exact |
| ``uniform_priority`` | :func:`uniform_priority` | 32 GPUs | 25 | exact |
| ``scale_64x30`` | :func:`scale_64x30` | 64 GPUs | 30 | exact |
| ``forecast_error`` | :func:`forecast_error` | 64 GPUs | 40 | lognormal duration error, seasonal-naive demand, surprise day |
| ``real_trace`` | :func:`optimizer.scenarios.trace.real_trace` | 32 GPUs | openb days 122-123 | lognormal duration error, seasonal-naive demand |
| ``real_trace_b`` | :func:`optimizer.scenarios.trace.real_trace` | 32 GPUs | openb days 116-117 | lognormal duration error, seasonal-naive demand |
| ``openb-het-a`` | :func:`optimizer.scenarios.trace.real_trace` (typed) | 51 GPUs, 12 node kinds | openb gpuspec20 + multigpu20, days 122-123 | lognormal duration error, seasonal-naive demand |
| ``openb-het-b`` | :func:`optimizer.scenarios.trace.real_trace` (typed) | 51 GPUs, 12 node kinds | openb gpuspec20 + multigpu20, days 116-117 | lognormal duration error, seasonal-naive demand |

The two ``openb-het-*`` scenarios (issue 26, :data:`HET_TRACES`) are not in :data:`SCENARIOS` (so not in
``gpuplan bench``'s ``all`` or ``--quick``): they are named on their own (``--scenario openb-het-a``).

Load: the generated scenarios draw job durations from documented per-kind distributions and
then scale all of them by one factor so that the offered load is
:data:`~optimizer.scenarios.workload.TARGET_LOAD` = 1.0
(:func:`~optimizer.scenarios.workload.calibrate_jobs`).

The generators take every knob as a keyword argument with its documented default, so a
scenario can be re-generated at another size or load; :attr:`Scenario.params` records the
values used (and derived figures such as the offered load). :func:`build` builds one by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from optimizer.errors import InputError
from optimizer.scenarios.trace import RealTraceData, real_trace
from optimizer.scenarios.types import HORIZON_STEPS, STEP_MINUTES, WINDOW_STEPS, Scenario
from optimizer.scenarios.workload import (
    DEFAULT_PRIORITIES,
    TARGET_LOAD,
    JobDraft,
    KindMix,
    calibrate_jobs,
    diurnal_demand,
    draw_jobs,
    make_service,
    offered_load,
    scenario_cluster,
    scenario_rng,
    scenario_settings,
)


def rt_scaled(gpus: float, k: float) -> int:
    """A real-time GPU figure given for one cluster size, scaled by ``k`` (new / given GPUs): ``max(1, round(gpus x k))``."""
    return max(1, int(round(gpus * k)))


def _generated(
    name: str,
    seed: int,
    *,
    n_gpus: int,
    n_jobs: int,
    description: str,
    trough_gpus: float,
    peak_gpus: float,
    swap_cap_gpus: int,
    rt_max_gpus: int,
    target_load: float = TARGET_LOAD,
    mix: Mapping[str, KindMix] | None = None,
    priorities: Sequence[tuple[float, float]] = DEFAULT_PRIORITIES,
    arrival_h: tuple[float, float] = (0.0, 30.0),
    backlog_share: float = 0.3,
    noise_sd_gpus: float = 1.0,
    n_steps: int = WINDOW_STEPS,
    base_gpus: int | None = None,
) -> Scenario:
    """A scenario with one diurnal ``chat`` service and jobs drawn from ``mix``, load-calibrated.

    ``base_gpus``: the cluster size the service figures are given for; with another ``n_gpus``
    the trough, peak, swap cap and band maximum are scaled by ``n_gpus / base_gpus``
    (:func:`rt_scaled`), so real-time demand keeps its share of the cluster.
    """
    k = 1.0 if base_gpus is None else n_gpus / base_gpus
    trough_gpus, peak_gpus = trough_gpus * k, peak_gpus * k
    swap_cap_gpus, rt_max_gpus = rt_scaled(swap_cap_gpus, k), rt_scaled(rt_max_gpus, k)
    rng = scenario_rng(seed, name)
    total = n_steps + HORIZON_STEPS
    demand = diurnal_demand(
        rng, total, trough_gpus=trough_gpus, peak_gpus=peak_gpus, noise_sd_gpus=noise_sd_gpus
    )
    svc = make_service("chat", demand, max_gpus=rt_max_gpus, swap_cap_gpus=swap_cap_gpus)
    drafts = draw_jobs(
        rng, n_jobs, arrival_h=arrival_h, backlog_share=backlog_share, mix=mix, priorities=priorities
    )
    jobs, scale = calibrate_jobs(drafts, [svc], n_gpus, n_steps, target_load)
    params = {
        "seed": seed,
        "n_gpus": n_gpus,
        "n_jobs": n_jobs,
        "window_h": n_steps * STEP_MINUTES / 60,
        "rt_trough_gpus": trough_gpus,
        "rt_peak_gpus": peak_gpus,
        "rt_swap_cap_gpus": swap_cap_gpus,
        "target_load": target_load,
        "duration_scale": scale,
        "arrival_h": list(arrival_h),
        "backlog_share": backlog_share,
        "priorities": [p for p, _ in priorities],
        "offered_load": offered_load(jobs, [svc], n_gpus, n_steps),
    }
    return Scenario(
        name=name,
        seed=seed,
        cluster=scenario_cluster(n_gpus),
        settings=scenario_settings(),
        n_steps=n_steps,
        services=(svc,),
        jobs=tuple(jobs),
        exact_forecasts=True,
        description=description,
        params=params,
    )


def mixed(seed: int = 0, *, n_jobs: int = 20, n_gpus: int = 32, target_load: float = TARGET_LOAD) -> Scenario:
    """All four kinds, mixed sizes and priorities: 32 GPUs, 20 jobs, 48 h window.

    One diurnal service (trough 4, peak 12 GPUs, swap cap 4, band [1, 16]); default job mix
    and priorities {1: 50 %, 2: 30 %, 4: 15 %, 8: 5 %}; 30 % of jobs queued at step 0, the
    rest arriving uniformly over the first 30 h. Exact forecasts.
    """
    return _generated(
        "mixed",
        seed,
        n_gpus=n_gpus,
        base_gpus=32,
        n_jobs=n_jobs,
        description="all four kinds, mixed sizes and priorities",
        trough_gpus=4,
        peak_gpus=12,
        swap_cap_gpus=4,
        rt_max_gpus=16,
        target_load=target_load,
    )


def diurnal_peak(seed: int = 0, *, n_jobs: int = 40, n_gpus: int = 64, target_load: float = TARGET_LOAD) -> Scenario:
    """A strong real-time day/night swing: valley filling. 64 GPUs, 40 jobs.

    Service trough 6, peak 40 GPUs at 14:00 (a 6.7x swing), swap cap 8, band [1, 48]. FIFO's
    whole-day peak reservation holds 40 GPUs while the mean demand is about 23. Exact forecasts.
    """
    return _generated(
        "diurnal_peak",
        seed,
        n_gpus=n_gpus,
        base_gpus=64,
        n_jobs=n_jobs,
        description="strong real-time day/night swing; valley filling",
        trough_gpus=6,
        peak_gpus=40,
        swap_cap_gpus=8,
        rt_max_gpus=48,
        target_load=target_load,
        noise_sd_gpus=1.5,
    )


#: big_gangs job mix: 20 % 16/32-GPU training gangs among small jobs.
BIG_GANG_MIX: dict[str, KindMix] = {
    "training": KindMix(0.35, (16, 32, 4), (0.45, 0.2, 0.35), 6.0, 0.4, 2.0, 16.0),
    "quantization": KindMix(0.30, (1, 2, 4), (0.4, 0.4, 0.2), 1.5, 0.5, 0.5, 6.0),
    "batch_inference": KindMix(0.35, (1, 2, 4, 8), (0.25, 0.3, 0.3, 0.15), 3.0, 0.5, 1.0, 10.0),
}


def big_gangs(seed: int = 0, *, n_jobs: int = 30, n_gpus: int = 64, target_load: float = TARGET_LOAD) -> Scenario:
    """16- and 32-GPU gangs among small jobs: fragmentation. 64 GPUs, 30 jobs.

    Mix :data:`BIG_GANG_MIX`; service trough 8, peak 20 GPUs, swap cap 4, band [1, 24]. Exact
    forecasts.
    """
    return _generated(
        "big_gangs",
        seed,
        n_gpus=n_gpus,
        base_gpus=64,
        n_jobs=n_jobs,
        description="16/32-GPU gangs among small jobs; fragmentation",
        trough_gpus=8,
        peak_gpus=20,
        swap_cap_gpus=4,
        rt_max_gpus=24,
        target_load=target_load,
        mix=BIG_GANG_MIX,
    )


def priority_skew(
    seed: int = 0,
    *,
    n_long: int = 10,
    n_urgent: int = 15,
    n_gpus: int = 32,
    long_priority: float = 1.0,
    urgent_priority: float = 8.0,
    target_load: float = TARGET_LOAD,
) -> Scenario:
    """Long low-priority jobs arrive first, urgent ones later. 32 GPUs, 25 jobs.

    ``n_long`` training jobs (priority ``long_priority``, 4 or 8 GPUs, 8-16 h) arrive in the
    first 2 h; ``n_urgent`` jobs (priority ``urgent_priority``, 1-8 GPUs, 1-4 h, quantization
    and batch inference) arrive uniformly over hours 3-30 (durations before load calibration).
    Service trough 4, peak 12, swap cap 4. Exact forecasts.
    """
    name = "priority_skew"
    rng = scenario_rng(seed, name)
    total = WINDOW_STEPS + HORIZON_STEPS
    k = n_gpus / 32  # service figures are given for 32 GPUs (rt_scaled)
    demand = diurnal_demand(rng, total, trough_gpus=4 * k, peak_gpus=12 * k)
    svc = make_service("chat", demand, max_gpus=rt_scaled(16, k), swap_cap_gpus=rt_scaled(4, k))
    drafts = []
    for i in range(n_long):
        gpus = int(rng.choice([4, 8]))
        hours = float(rng.uniform(8.0, 16.0))
        arr = int(rng.uniform(0.0, 2.0) * 2)
        drafts.append(JobDraft(arr, i, "training", long_priority, gpus, hours, 1.0))
    for i in range(n_urgent):
        kind = "quantization" if rng.random() < 0.5 else "batch_inference"
        gpus = int(rng.choice([1, 2, 4, 8], p=[0.2, 0.3, 0.3, 0.2]))
        hours = float(rng.uniform(1.0, 4.0))
        arr = int(rng.uniform(3.0, 30.0) * 2)
        drafts.append(JobDraft(arr, n_long + i, kind, urgent_priority, gpus, hours, 1.0))
    drafts.sort(key=lambda x: (x.arrival_step, x.order))
    jobs, scale = calibrate_jobs(drafts, [svc], n_gpus, WINDOW_STEPS, target_load)
    params = {
        "target_load": target_load,
        "duration_scale": scale,
        "seed": seed,
        "n_gpus": n_gpus,
        "n_long": n_long,
        "n_urgent": n_urgent,
        "long_priority": long_priority,
        "urgent_priority": urgent_priority,
        "offered_load": offered_load(jobs, [svc], n_gpus, WINDOW_STEPS),
    }
    return Scenario(
        name=name,
        seed=seed,
        cluster=scenario_cluster(n_gpus),
        settings=scenario_settings(),
        n_steps=WINDOW_STEPS,
        services=(svc,),
        jobs=tuple(jobs),
        description="long low-priority jobs arrive first, urgent ones later",
        params=params,
    )


def uniform_priority(
    seed: int = 0, *, n_jobs: int = 25, n_gpus: int = 32, target_load: float = TARGET_LOAD
) -> Scenario:
    """Every job priority 1: gains must come from placement. 32 GPUs, 25 jobs.

    Default job mix; service trough 4, peak 14, swap cap 4, band [1, 16]. Exact forecasts.
    """
    return _generated(
        "uniform_priority",
        seed,
        n_gpus=n_gpus,
        base_gpus=32,
        n_jobs=n_jobs,
        description="every job the same priority: gains must come from placement",
        trough_gpus=4,
        peak_gpus=14,
        swap_cap_gpus=4,
        rt_max_gpus=16,
        target_load=target_load,
        priorities=((1.0, 1.0),),
    )


def scale_64x30(seed: int = 0, *, n_jobs: int = 30, n_gpus: int = 64, target_load: float = TARGET_LOAD) -> Scenario:
    """64 GPUs, 30 jobs (the study's reference size).

    Default mix; service trough 8, peak 24, swap cap 6, band [1, 32]. Exact forecasts.
    """
    return _generated(
        "scale_64x30",
        seed,
        n_gpus=n_gpus,
        base_gpus=64,
        n_jobs=n_jobs,
        description="64 GPUs, 30 jobs",
        trough_gpus=8,
        peak_gpus=24,
        swap_cap_gpus=6,
        rt_max_gpus=32,
        target_load=target_load,
    )


def forecast_error(
    seed: int = 0,
    *,
    n_jobs: int = 40,
    n_gpus: int = 64,
    duration_error_sigma: float = 0.5,
    surprise_day: int = 1,
    surprise_factor: float = 1.35,
    surprise_hours: tuple[float, float] = (10.0, 22.0),
    margin: float = 0.1,
    recalibrate_steps: int = 4,
    target_load: float = TARGET_LOAD,
) -> Scenario:
    """Durations off by lognormal error; a real-time surprise day. 64 GPUs, 40 jobs.

    - Forecast duration = true x exp(N(0, ``duration_error_sigma``)) (default 0.5: a factor-of-1.65
      error at one sd, typical of a duration regressor on unseen job types).
    - Real-time demand: the same diurnal curve as ``diurnal_peak`` but milder (trough 8, peak 32);
      on window day ``surprise_day`` (0-based) the actual demand between ``surprise_hours`` is
      multiplied by ``surprise_factor``.
    - The planner's demand forecast is seasonal naive (the actual demand 24 h earlier; a
      history day before the window is generated for day 0) plus ``margin`` headroom, recalibrated
      by the last ``recalibrate_steps`` steps' actual/forecast ratio.
    """
    name = "forecast_error"
    rng = scenario_rng(seed, name)
    day = HORIZON_STEPS
    total = WINDOW_STEPS + HORIZON_STEPS
    k = n_gpus / 64  # service figures are given for 64 GPUs (rt_scaled)
    hist_and_truth = diurnal_demand(rng, day + total, trough_gpus=8 * k, peak_gpus=32 * k, noise_sd_gpus=1.5)
    truth = hist_and_truth[day:].astype(float)
    h = np.arange(total) * STEP_MINUTES / 60.0
    hod = h % 24.0
    on_day = (h // 24.0) == surprise_day
    surprise = on_day & (hod >= surprise_hours[0]) & (hod < surprise_hours[1])
    truth[surprise] = np.round(truth[surprise] * surprise_factor)
    truth_i = truth.astype(int)
    full = np.concatenate([hist_and_truth[:day], truth_i])
    naive = full[:total]  # value 24 h earlier
    svc = make_service(
        "chat",
        truth_i,
        max_gpus=rt_scaled(48, k),
        swap_cap_gpus=rt_scaled(8, k),
        forecast=naive,
        recalibrate_steps=recalibrate_steps,
        margin=margin,
    )
    drafts = draw_jobs(rng, n_jobs, duration_error_sigma=duration_error_sigma)
    jobs, scale = calibrate_jobs(drafts, [svc], n_gpus, WINDOW_STEPS, target_load)
    params = {
        "seed": seed,
        "n_gpus": n_gpus,
        "n_jobs": n_jobs,
        "duration_error_sigma": duration_error_sigma,
        "surprise_day": surprise_day,
        "surprise_factor": surprise_factor,
        "surprise_hours": list(surprise_hours),
        "demand_forecast": "seasonal naive (24 h) + margin, level recalibrated",
        "target_load": target_load,
        "duration_scale": scale,
        "margin": margin,
        "recalibrate_steps": recalibrate_steps,
        "offered_load": offered_load(jobs, [svc], n_gpus, WINDOW_STEPS),
    }
    return Scenario(
        name=name,
        seed=seed,
        cluster=scenario_cluster(n_gpus),
        settings=scenario_settings(),
        n_steps=WINDOW_STEPS,
        services=(svc,),
        jobs=tuple(jobs),
        exact_forecasts=False,
        description="durations off by lognormal error; a real-time surprise day",
        params=params,
    )


#: The generated scenarios by name (``real_trace`` needs data and is built by :func:`build`).
GENERATED: dict[str, Callable[..., Scenario]] = {
    "mixed": mixed,
    "diurnal_peak": diurnal_peak,
    "big_gangs": big_gangs,
    "priority_skew": priority_skew,
    "uniform_priority": uniform_priority,
    "scale_64x30": scale_64x30,
    "forecast_error": forecast_error,
}
#: The scenarios built from the real trace (each needs its window's data; ``data/traces/README.md``).
REAL_TRACES: tuple[str, ...] = ("real_trace", "real_trace_b")
SCENARIOS: tuple[str, ...] = (*GENERATED, *REAL_TRACES)
#: The heterogeneous openb windows (issue 26) -> their ``ls_scale``: the smallest multiple of 0.1 (>= 1)
#: giving an offered load of at least 0.98 on the 51-GPU node slice (0.995 and 0.985 at seed 0;
#: ``data/traces/README.md``). Not in :data:`SCENARIOS`.
HET_TRACES: dict[str, float] = {"openb-het-a": 1.0, "openb-het-b": 1.5}


def build(name: str, seed: int = 0, trace: RealTraceData | None = None, *, n_gpus: int | None = None,
          n_jobs: int | None = None, **kwargs: Any) -> Scenario:
    """Build scenario ``name`` with ``seed``. ``real_trace`` needs ``trace``.

    ``n_gpus`` / ``n_jobs``: another cluster size or job count for a generated scenario (issue 17);
    its real-time demand, swap cap and band are scaled with the cluster (:func:`rt_scaled`) and job
    durations are calibrated to the same target load. ``priority_skew`` splits ``n_jobs`` 2:3
    between long and urgent jobs (its 10:15). Raises :class:`InputError` for an unknown name, a
    missing trace, ``n_gpus`` not a power of two of at least 8, ``n_jobs`` below 1, or a size for
    ``real_trace``.
    """
    if name in HET_TRACES:
        if trace is None or not trace.nodes:
            raise InputError(f"scenario {name!r} needs the heterogeneous trace data with its node slice "
                             "(pipelines.catalog.load_real_trace)")
        if n_gpus is not None or n_jobs is not None:
            raise InputError(f"scenario {name!r}: --gpus and --jobs apply to generated scenarios only")
        kwargs.setdefault("ls_scale", HET_TRACES[name])
        return real_trace(trace, seed, name=name, **kwargs)
    if name in REAL_TRACES:
        if trace is None:
            raise InputError(f"scenario {name!r} needs the trace data (pipelines.catalog.load_real_trace)")
        if n_gpus is not None or n_jobs is not None:
            raise InputError(f"scenario {name!r}: --gpus and --jobs apply to generated scenarios only")
        return real_trace(trace, seed, name=name, **kwargs)
    if name not in GENERATED:
        raise InputError(f"unknown scenario {name!r}; expected one of {', '.join((*SCENARIOS, *HET_TRACES))}")
    if n_gpus is not None:
        if n_gpus < 8 or n_gpus & (n_gpus - 1):
            raise InputError(f"n_gpus = {n_gpus}: expected a power of two of at least 8 (8-GPU nodes)")
        kwargs["n_gpus"] = n_gpus
    if n_jobs is not None:
        if n_jobs < 1:
            raise InputError(f"n_jobs = {n_jobs}: expected at least 1")
        if name == "priority_skew":
            kwargs["n_long"] = round(n_jobs * 2 / 5)
            kwargs["n_urgent"] = n_jobs - kwargs["n_long"]
        else:
            kwargs["n_jobs"] = n_jobs
    return GENERATED[name](seed, **kwargs)
