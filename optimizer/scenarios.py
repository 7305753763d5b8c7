"""Seeded benchmark scenarios for the rolling-horizon simulator (DESIGN §6.5).

A :class:`Scenario` holds the *truth* (actual job durations, actual real-time demand) and
what the planner is allowed to see (forecast durations, a demand forecast series). The
simulator (:mod:`optimizer.simulate`) only ever shows the planner the forecasts.

Eight scenarios, one per row of DESIGN §6.5, each built by a pure function of a seed:

| id | generator | cluster | jobs | forecasts |
|---|---|---|---|---|
| ``mixed`` | :func:`mixed` | 32 GPUs | 20 | exact |
| ``diurnal_peak`` | :func:`diurnal_peak` | 64 GPUs | 40 | exact |
| ``big_gangs`` | :func:`big_gangs` | 64 GPUs | 30 | exact |
| ``priority_skew`` | :func:`priority_skew` | 32 GPUs | 25 | exact |
| ``uniform_priority`` | :func:`uniform_priority` | 32 GPUs | 25 | exact |
| ``scale_64x30`` | :func:`scale_64x30` | 64 GPUs | 30 | exact |
| ``forecast_error`` | :func:`forecast_error` | 64 GPUs | 40 | lognormal duration error, seasonal-naive demand, surprise day |
| ``real_trace`` | :func:`real_trace` | 64 GPUs | from the trace | lognormal duration error, seasonal-naive demand |

Common conventions (all scenarios): 30-minute steps, a 48-step (24 h) planning horizon, a
96-step (48 h) evaluation window, 8 GPUs per node. Durations are in whole steps (at least 1).
A service's demand arrays cover the window plus one horizon (``n_steps + horizon_steps``
entries) so that the last replan still has a full 24 h of forecast.

Load: the generated scenarios draw job durations from documented per-kind distributions and
then scale all of them by one factor so that the offered load (batch GPU-hours arriving in the
window / GPU-hours left by the true real-time demand) is :data:`TARGET_LOAD` = 1.0
(:func:`calibrate_jobs`). The same rule for every scenario sets how busy the cluster is, not who
wins.

The generators take every knob as a keyword argument with its documented default, so a
scenario can be re-generated at another size or load; :attr:`Scenario.params` records the
values used (and derived figures such as the offered load).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from optimizer.errors import InputError
from optimizer.problem import JOB_KINDS, Cluster, Settings, is_pow2

STEP_MINUTES = 30
HORIZON_STEPS = 48
WINDOW_STEPS = 96
GPUS_PER_NODE = 8


# ----------------------------------------------------------------------------- types


@dataclass(frozen=True)
class SimJob:
    """A batch job of a scenario.

    ``arrival_step``: step at which it joins the queue (>= 0). ``gpus``: requested power-of-two
    block. ``true_steps``: how long it actually runs (>= 1); ``forecast_steps``: what the planner
    is told (>= 1). ``priority`` > 0.
    """

    job_id: str
    kind: str
    priority: float
    arrival_step: int
    gpus: int
    true_steps: int
    forecast_steps: int

    def __post_init__(self) -> None:
        w = f"scenario job {self.job_id!r}"
        if self.kind not in JOB_KINDS:
            raise InputError(f"{w}: kind = {self.kind!r} must be one of {', '.join(JOB_KINDS)}")
        if not self.priority > 0:
            raise InputError(f"{w}: priority = {self.priority} must be > 0")
        if self.arrival_step < 0:
            raise InputError(f"{w}: arrival_step = {self.arrival_step} must be >= 0")
        if not is_pow2(self.gpus):
            raise InputError(f"{w}: gpus = {self.gpus} is not a power of two")
        if self.true_steps < 1 or self.forecast_steps < 1:
            raise InputError(f"{w}: true_steps and forecast_steps must be >= 1")


@dataclass(frozen=True)
class SimService:
    """A real-time service of a scenario.

    ``demand_true``: actual GPUs wanted per absolute step, shape (n_steps + horizon_steps,).
    ``demand_forecast``: the base forecast per absolute step (same shape) — the series the
    planner sees, issued before the window (exact scenarios: the truth itself).
    ``recalibrate_steps``: when > 0, at each replan the forecast level is rescaled by
    ``sum(actual) / sum(forecast)`` over the last ``recalibrate_steps`` observed steps, clipped to
    [``level_min``, ``level_max``] (DESIGN §4.4 "recalibrate continuously"); 0 = off.
    ``margin``: fractional headroom added to the forecast (a P90 stand-in; 0 = plan the forecast).
    ``initial_gpu_ids``: GPUs the initial replicas sit on (None: the simulator places them).
    """

    service: str
    min_gpus: int
    max_gpus: int
    swap_cap_gpus: int
    initial_gpus: int
    demand_true: tuple[int, ...]
    demand_forecast: tuple[int, ...]
    recalibrate_steps: int = 0
    margin: float = 0.0
    level_min: float = 0.5
    level_max: float = 2.0
    initial_gpu_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.demand_true) != len(self.demand_forecast):
            raise InputError(
                f"scenario service {self.service!r}: demand_true has {len(self.demand_true)} entries, "
                f"demand_forecast {len(self.demand_forecast)}"
            )
        if any(int(v) < 0 for v in self.demand_true) or any(int(v) < 0 for v in self.demand_forecast):
            raise InputError(f"scenario service {self.service!r}: demand must be >= 0")

    def forecast_at(self, issue_step: int, horizon_steps: int) -> tuple[int, ...]:
        """Demand forecast issued at ``issue_step`` for steps ``issue_step .. +horizon_steps-1``.

        ``ceil(base[t] * level * (1 + margin))`` clipped to ``[0, max_gpus]``; ``level`` is 1 unless
        recalibration is on and at least one step has been observed. Shape (horizon_steps,).
        Raises :class:`InputError` when the arrays do not reach that far.
        """
        end = issue_step + horizon_steps
        if end > len(self.demand_forecast):
            raise InputError(
                f"scenario service {self.service!r}: forecast needed up to step {end - 1}, "
                f"demand arrays have {len(self.demand_forecast)} entries"
            )
        level = 1.0
        if self.recalibrate_steps > 0 and issue_step > 0:
            lo = max(0, issue_step - self.recalibrate_steps)
            act = float(sum(self.demand_true[lo:issue_step]))
            fc = float(sum(self.demand_forecast[lo:issue_step]))
            if fc > 0:
                level = min(self.level_max, max(self.level_min, act / fc))
        k = level * (1.0 + self.margin)
        out = []
        for v in self.demand_forecast[issue_step:end]:
            x = math.ceil(round(v * k, 6))
            out.append(int(min(self.max_gpus, max(0, x))))
        return tuple(out)


@dataclass(frozen=True)
class NodeFailure:
    """Node ``node`` (GPUs ``node*gpus_per_node ..``) is down from ``step`` until ``until_step``
    (exclusive; None = until further notice, i.e. to the end of the window)."""

    step: int
    node: int
    until_step: int | None = None


@dataclass(frozen=True)
class PinnedStart:
    """Operator placement: job ``job_id`` is started at ``step`` on ``block_offset`` by the
    simulator itself (before the planner runs at that step). Used to set up a known state,
    e.g. case C24 ("Q started at step 4 on node n2")."""

    job_id: str
    step: int
    block_offset: int


@dataclass(frozen=True)
class Scenario:
    """One benchmark scenario: the truth, the forecasts and the cluster.

    ``n_steps``: evaluation window in steps. ``settings``: planner settings (the bench may
    override the solver budget). ``params``: generator arguments and derived figures, for the
    documentation. ``exact_forecasts``: True when forecasts equal the truth (the goal
    "≥ 95 % of clairvoyant" applies).
    """

    name: str
    seed: int
    cluster: Cluster
    settings: Settings
    n_steps: int
    services: tuple[SimService, ...]
    jobs: tuple[SimJob, ...]
    failures: tuple[NodeFailure, ...] = ()
    pinned: tuple[PinnedStart, ...] = ()
    exact_forecasts: bool = True
    description: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        need = self.n_steps + self.cluster.horizon_steps
        for s in self.services:
            if len(s.demand_true) < need:
                raise InputError(
                    f"scenario {self.name!r}: service {s.service!r} demand has {len(s.demand_true)} "
                    f"entries; n_steps + horizon_steps = {need}"
                )
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise InputError(f"scenario {self.name!r}: duplicate job_id")
        for j in self.jobs:
            if j.gpus > self.cluster.n_gpus:
                raise InputError(
                    f"scenario {self.name!r}: job {j.job_id!r} requests {j.gpus} GPUs; "
                    f"cluster has {self.cluster.n_gpus}"
                )

    @property
    def step_h(self) -> float:
        """Step length in hours."""
        return self.cluster.step_minutes / 60.0

    def clairvoyant(self) -> Scenario:
        """The same scenario with forecasts replaced by the truth (true durations, true demand,
        no recalibration or margin): what the clairvoyant reference plans from."""
        jobs = tuple(replace(j, forecast_steps=j.true_steps) for j in self.jobs)
        services = tuple(
            replace(s, demand_forecast=s.demand_true, recalibrate_steps=0, margin=0.0) for s in self.services
        )
        return replace(self, jobs=jobs, services=services, exact_forecasts=True)

    def offered_gpu_steps(self) -> int:
        """Total true batch work, GPU-steps (sum of gpus x true_steps)."""
        return sum(j.gpus * j.true_steps for j in self.jobs)


# ----------------------------------------------------------------------------- building blocks


@dataclass(frozen=True)
class KindMix:
    """How jobs of one kind are drawn.

    ``share``: probability of this kind; ``sizes``/``size_p``: GPU sizes and their probabilities;
    ``median_h``/``sigma``: lognormal duration (hours) median and log-sd; ``min_h``/``max_h``:
    clip bounds (hours).
    """

    share: float
    sizes: tuple[int, ...]
    size_p: tuple[float, ...]
    median_h: float
    sigma: float
    min_h: float
    max_h: float


#: Default job mix (training long and large, quantization short and small, batch inference
#: in between). Durations are typical of LLM fine-tuning / PTQ / offline inference runs.
DEFAULT_MIX: dict[str, KindMix] = {
    "training": KindMix(0.45, (4, 8, 16), (0.4, 0.4, 0.2), 8.0, 0.5, 2.0, 20.0),
    "quantization": KindMix(0.25, (1, 2, 4), (0.4, 0.4, 0.2), 1.5, 0.5, 0.5, 6.0),
    "batch_inference": KindMix(0.30, (2, 4, 8), (0.3, 0.4, 0.3), 4.0, 0.5, 1.0, 12.0),
}

#: Longest batch job after load calibration, hours (a little under the 24 h horizon, so every
#: job fits in one plan).
MAX_JOB_H = 20.0

#: Offered load every generated scenario is calibrated to (see :func:`calibrate_jobs`): the
#: batch work arriving in the window equals the GPU-hours the true real-time demand leaves.
TARGET_LOAD = 1.0

#: Priority classes and probabilities used unless a scenario overrides them.
DEFAULT_PRIORITIES: tuple[tuple[float, float], ...] = ((1.0, 0.5), (2.0, 0.3), (4.0, 0.15), (8.0, 0.05))


def hours_to_steps(hours: float, step_minutes: int = STEP_MINUTES) -> int:
    """Whole steps for a duration in hours: ``max(1, round(hours * 60 / step_minutes))``."""
    return max(1, int(round(hours * 60.0 / step_minutes)))


def diurnal_demand(
    rng: np.random.Generator,
    n_total: int,
    *,
    trough_gpus: float,
    peak_gpus: float,
    peak_hour: float = 14.0,
    noise_sd_gpus: float = 1.0,
    start_hour: float = 0.0,
    step_minutes: int = STEP_MINUTES,
    sharpness: float = 1.0,
) -> np.ndarray:
    """A day/night demand curve in GPUs per step, shape (n_total,), integers >= 0.

    ``trough + (peak - trough) * ((1 + cos(2π (h - peak_hour) / 24)) / 2) ** sharpness`` plus
    Gaussian noise (sd ``noise_sd_gpus``), rounded to whole GPUs; ``h`` is the hour of day of
    the step start (step 0 at ``start_hour``).
    """
    h = start_hour + np.arange(n_total) * step_minutes / 60.0
    shape = ((1.0 + np.cos(2 * np.pi * (h - peak_hour) / 24.0)) / 2.0) ** sharpness
    d = trough_gpus + (peak_gpus - trough_gpus) * shape + rng.normal(0.0, noise_sd_gpus, n_total)
    return np.maximum(0, np.round(d)).astype(int)


@dataclass(frozen=True)
class _Draft:
    arrival_step: int
    order: int
    kind: str
    priority: float
    gpus: int
    hours: float
    error: float  # forecast / true duration ratio (1.0 = exact)


def draw_jobs(
    rng: np.random.Generator,
    n_jobs: int,
    *,
    arrival_h: tuple[float, float] = (0.0, 30.0),
    backlog_share: float = 0.3,
    mix: Mapping[str, KindMix] | None = None,
    priorities: Sequence[tuple[float, float]] = DEFAULT_PRIORITIES,
    duration_error_sigma: float = 0.0,
    step_minutes: int = STEP_MINUTES,
) -> list[_Draft]:
    """Draw ``n_jobs`` batch job drafts (durations still in hours, before load calibration).

    A ``backlog_share`` of the jobs is queued at step 0; the rest arrive uniformly in
    ``arrival_h`` (hours). Kind, size, duration and priority are drawn from ``mix`` and
    ``priorities``. ``duration_error_sigma`` > 0: the forecast will be ``true * exp(N(0, sigma))``
    (unbiased in log); 0: exact. Returned in arrival order.
    """
    mix = dict(mix or DEFAULT_MIX)
    kinds = list(mix)
    shares = np.array([mix[k].share for k in kinds], dtype=float)
    shares /= shares.sum()
    pr_vals = np.array([p for p, _ in priorities], dtype=float)
    pr_p = np.array([w for _, w in priorities], dtype=float)
    pr_p /= pr_p.sum()
    drawn = []
    for i in range(n_jobs):
        kind = kinds[int(rng.choice(len(kinds), p=shares))]
        km = mix[kind]
        sp = np.array(km.size_p, dtype=float)
        gpus = int(km.sizes[int(rng.choice(len(km.sizes), p=sp / sp.sum()))])
        dur_h = float(np.clip(km.median_h * math.exp(rng.normal(0.0, km.sigma)), km.min_h, km.max_h))
        prio = float(pr_vals[int(rng.choice(len(pr_vals), p=pr_p))])
        if rng.random() < backlog_share:
            arr = 0
        else:
            arr = int(rng.uniform(arrival_h[0], arrival_h[1]) * 60 // step_minutes)
        err = math.exp(rng.normal(0.0, duration_error_sigma)) if duration_error_sigma > 0 else 1.0
        drawn.append(_Draft(arr, i, kind, prio, gpus, dur_h, err))
    drawn.sort(key=lambda x: (x.arrival_step, x.order))
    return drawn


def _jobs_from_drafts(drafts: Sequence[_Draft], scale: float, max_h: float, id_prefix: str = "J") -> list[SimJob]:
    out = []
    for k, d in enumerate(drafts):
        hours = min(max_h, d.hours * scale)
        true_steps = hours_to_steps(hours)
        fc_steps = true_steps if d.error == 1.0 else hours_to_steps(hours * d.error)
        out.append(SimJob(f"{id_prefix}{k:03d}", d.kind, d.priority, d.arrival_step, d.gpus, true_steps, fc_steps))
    return out


def calibrate_jobs(
    drafts: Sequence[_Draft],
    services: Sequence[SimService],
    n_gpus: int,
    n_steps: int,
    target_load: float,
    max_h: float = MAX_JOB_H,
) -> tuple[list[SimJob], float]:
    """Scale every drafted duration by one factor so the offered load is ``target_load``.

    Offered load = batch GPU-steps inside the window (:func:`_offered_load`) / GPU-steps left by
    the true real-time demand. The factor is found by bisection on [0.05, 20] (durations clipped
    to ``max_h`` hours, at least one step); returns (jobs, factor). The same rule for every
    scenario: it sets how busy the cluster is, not who wins.
    """
    lo, hi = 0.05, 20.0
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        load = _offered_load(_jobs_from_drafts(drafts, mid, max_h), services, n_gpus, n_steps)
        if load < target_load:
            lo = mid
        else:
            hi = mid
    scale = round(math.sqrt(lo * hi), 4)
    return _jobs_from_drafts(drafts, scale, max_h), scale


def _rng(seed: int, name: str) -> np.random.Generator:
    """Independent stream per (seed, scenario name): the name's bytes are part of the seed."""
    return np.random.default_rng([int(seed), *name.encode()])


def _settings() -> Settings:
    return Settings(time_limit_s=10.0, mip_rel_gap=0.01, threads=1, random_seed=0)


def _cluster(n_gpus: int) -> Cluster:
    return Cluster(n_gpus=n_gpus, gpus_per_node=GPUS_PER_NODE, step_minutes=STEP_MINUTES, horizon_steps=HORIZON_STEPS)


def _service(
    name: str,
    demand: np.ndarray,
    *,
    max_gpus: int,
    swap_cap_gpus: int,
    min_gpus: int = 1,
    forecast: np.ndarray | None = None,
    recalibrate_steps: int = 0,
    margin: float = 0.0,
) -> SimService:
    d = tuple(int(min(max_gpus, max(min_gpus, v))) for v in demand)
    f = d if forecast is None else tuple(int(min(max_gpus, max(0, v))) for v in forecast)
    return SimService(
        service=name,
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        swap_cap_gpus=swap_cap_gpus,
        initial_gpus=max(min_gpus, f[0]),
        demand_true=d,
        demand_forecast=f,
        recalibrate_steps=recalibrate_steps,
        margin=margin,
    )


def _offered_load(jobs: Sequence[SimJob], services: Sequence[SimService], n_gpus: int, n_steps: int) -> float:
    """Batch GPU-steps offered inside the window (each job's work from its arrival, cut at the
    window end) / GPU-steps left after the true real-time demand in the window."""
    rt = sum(sum(s.demand_true[:n_steps]) for s in services)
    free = n_gpus * n_steps - rt
    work = sum(j.gpus * min(j.true_steps, max(0, n_steps - j.arrival_step)) for j in jobs)
    return round(work / free, 3) if free > 0 else float("inf")


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
) -> Scenario:
    rng = _rng(seed, name)
    total = n_steps + HORIZON_STEPS
    demand = diurnal_demand(
        rng, total, trough_gpus=trough_gpus, peak_gpus=peak_gpus, noise_sd_gpus=noise_sd_gpus
    )
    svc = _service("chat", demand, max_gpus=rt_max_gpus, swap_cap_gpus=swap_cap_gpus)
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
        "offered_load": _offered_load(jobs, [svc], n_gpus, n_steps),
    }
    return Scenario(
        name=name,
        seed=seed,
        cluster=_cluster(n_gpus),
        settings=_settings(),
        n_steps=n_steps,
        services=(svc,),
        jobs=tuple(jobs),
        exact_forecasts=True,
        description=description,
        params=params,
    )


# ----------------------------------------------------------------------------- the scenarios


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
    rng = _rng(seed, name)
    total = WINDOW_STEPS + HORIZON_STEPS
    demand = diurnal_demand(rng, total, trough_gpus=4, peak_gpus=12)
    svc = _service("chat", demand, max_gpus=16, swap_cap_gpus=4)
    drafts = []
    for i in range(n_long):
        gpus = int(rng.choice([4, 8]))
        hours = float(rng.uniform(8.0, 16.0))
        arr = int(rng.uniform(0.0, 2.0) * 2)
        drafts.append(_Draft(arr, i, "training", long_priority, gpus, hours, 1.0))
    for i in range(n_urgent):
        kind = "quantization" if rng.random() < 0.5 else "batch_inference"
        gpus = int(rng.choice([1, 2, 4, 8], p=[0.2, 0.3, 0.3, 0.2]))
        hours = float(rng.uniform(1.0, 4.0))
        arr = int(rng.uniform(3.0, 30.0) * 2)
        drafts.append(_Draft(arr, n_long + i, kind, urgent_priority, gpus, hours, 1.0))
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
        "offered_load": _offered_load(jobs, [svc], n_gpus, WINDOW_STEPS),
    }
    return Scenario(
        name=name,
        seed=seed,
        cluster=_cluster(n_gpus),
        settings=_settings(),
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
    """64 GPUs, 30 jobs (the study's reference size). Default mix; service trough 8, peak 24,
    swap cap 6, band [1, 32]. Exact forecasts."""
    return _generated(
        "scale_64x30",
        seed,
        n_gpus=n_gpus,
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
    rng = _rng(seed, name)
    day = HORIZON_STEPS
    total = WINDOW_STEPS + HORIZON_STEPS
    hist_and_truth = diurnal_demand(rng, day + total, trough_gpus=8, peak_gpus=32, noise_sd_gpus=1.5)
    truth = hist_and_truth[day:].astype(float)
    h = np.arange(total) * STEP_MINUTES / 60.0
    hod = h % 24.0
    on_day = (h // 24.0) == surprise_day
    surprise = on_day & (hod >= surprise_hours[0]) & (hod < surprise_hours[1])
    truth[surprise] = np.round(truth[surprise] * surprise_factor)
    truth_i = truth.astype(int)
    full = np.concatenate([hist_and_truth[:day], truth_i])
    naive = full[:total]  # value 24 h earlier
    svc = _service(
        "chat",
        truth_i,
        max_gpus=48,
        swap_cap_gpus=8,
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
        "offered_load": _offered_load(jobs, [svc], n_gpus, WINDOW_STEPS),
    }
    return Scenario(
        name=name,
        seed=seed,
        cluster=_cluster(n_gpus),
        settings=_settings(),
        n_steps=WINDOW_STEPS,
        services=(svc,),
        jobs=tuple(jobs),
        exact_forecasts=False,
        description="durations off by lognormal error; a real-time surprise day",
        params=params,
    )


# ----------------------------------------------------------------------------- real trace


@dataclass(frozen=True)
class TracePod:
    """One pod of the Alibaba openb trace, times in seconds relative to the window start.

    ``num_gpu`` whole GPUs (0..8); ``gpu_milli`` the GPU share of a sharing pod (1000 = full
    GPU); ``scheduled_s`` None when the pod never ran.
    """

    name: str
    qos: str
    num_gpu: int
    gpu_milli: int
    creation_s: int
    scheduled_s: int | None
    deletion_s: int

    @property
    def gpu_share(self) -> float:
        """GPUs the pod occupies: ``num_gpu``, or ``gpu_milli / 1000`` for a fractional 1-GPU pod."""
        if self.num_gpu == 1 and 0 < self.gpu_milli < 1000:
            return self.gpu_milli / 1000.0
        return float(self.num_gpu)


@dataclass(frozen=True)
class RealTraceData:
    """The shipped real-trace slice (read by :func:`pipelines.trace_io.load_real_trace`).

    ``pods``: LS pods alive around the window and non-LS GPU pods created in it.
    ``serve_rates``: (t_s, rate_rps or None for a collection gap) every 30 min, t_s relative to
    the window start, covering [-24 h, +72 h).
    """

    pods: tuple[TracePod, ...]
    serve_rates: tuple[tuple[int, float | None], ...]
    source: str = ""


def _interpolate_missing(values: Sequence[float | None]) -> np.ndarray:
    """Linear interpolation over None entries (nearest value at the edges). Raises when all
    entries are missing."""
    v = np.array([np.nan if x is None else float(x) for x in values])
    ok = ~np.isnan(v)
    if not ok.any():
        raise InputError("real trace: serve_rates has no observed value")
    idx = np.arange(len(v))
    return np.interp(idx, idx[ok], v[ok])


def ls_demand_curve(pods: Sequence[TracePod], first_step: int, n: int, step_s: int = 1800) -> np.ndarray:
    """GPUs held by latency-sensitive pods per step, time-averaged over each step.

    Shape (n,), floats; step ``k`` covers seconds ``[(first_step + k) * step_s, +step_s)``. A pod
    contributes ``gpu_share x overlap / step_s`` (overlap of [scheduled_s, deletion_s) with the
    step). Pods that never ran contribute nothing.
    """
    out = np.zeros(n)
    t0 = first_step * step_s
    for p in pods:
        if p.qos != "LS" or p.scheduled_s is None or p.num_gpu <= 0:
            continue
        a, b = max(p.scheduled_s, t0), min(p.deletion_s, t0 + n * step_s)
        if b <= a:
            continue
        k0, k1 = (a - t0) // step_s, (b - 1 - t0) // step_s
        for k in range(k0, k1 + 1):
            lo, hi = t0 + k * step_s, t0 + (k + 1) * step_s
            out[k] += p.gpu_share * (min(b, hi) - max(a, lo)) / step_s
    return out


def _pow2_ceil(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


#: Priority by QoS class for the real trace (the trace has no priority; Guaranteed pods are the
#: ones the operator promised resources to, best-effort the ones it did not).
QOS_PRIORITY: dict[str, float] = {"Guaranteed": 4.0, "Burstable": 2.0, "BE": 1.0}


def real_trace(
    data: RealTraceData,
    seed: int = 0,
    *,
    n_gpus: int = 64,
    ls_scale: float = 1.0,
    batch_sample: float = 1.0,
    serve_peak_gpus: int = 16,
    duration_error_sigma: float = 0.3,
    margin: float = 0.1,
    recalibrate_steps: int = 4,
) -> Scenario:
    """Job mix and arrivals from the Alibaba openb GPU trace; real-time demand from real traffic.

    - Window: 48 h (96 steps of 30 min) starting at the trace day chosen in
      :func:`pipelines.trace_io.choose_window_day`; one history day before it (for the seasonal
      naive forecast) and one horizon day after it.
    - Service ``alibaba-ls``: the latency-sensitive (LS) pods' GPUs summed over time (time-averaged
      per step, fractional GPU shares included), times ``ls_scale``, rounded up to whole GPUs.
      Band [0, 3/4 of the cluster], swap cap 8.
    - Service ``servegen-m-small``: ServeGen m-small request rate (collection gaps interpolated),
      scaled so its peak over the four days is ``serve_peak_gpus`` GPUs: ``ceil(rate / peak x
      serve_peak_gpus)``. Band [1, 2 x serve_peak_gpus], swap cap 4.
    - Both services are forecast seasonal-naive (the same step 24 h earlier) plus ``margin``,
      level-recalibrated over the last ``recalibrate_steps`` steps.
    - Batch jobs: every non-LS GPU pod created in the window that was scheduled (pending pods never
      ran and have no duration), kept with probability ``batch_sample`` (seeded). Arrival =
      ``creation_s`` floored to the step; true duration = ``deletion_s - scheduled_s`` (the real
      run time, also for pods that failed) rounded *up* to whole 30-min steps (>= 1), which
      overstates the many sub-30-minute pods (the step is the scheduling quantum); GPUs =
      ``num_gpu`` (a fractional sharing pod takes 1 whole GPU) rounded up to a power of two.
      Priority by QoS: :data:`QOS_PRIORITY`. The forecast duration is true x exp(N(0,
      ``duration_error_sigma``)). Kind (not in the trace; used only for the stacked plot):
      >= 2 GPUs -> training, 1 GPU running >= 1 h -> batch_inference, else quantization.
    """
    name = "real_trace"
    rng = _rng(seed, name)
    H, W = HORIZON_STEPS, WINDOW_STEPS
    step_s = STEP_MINUTES * 60
    total = W + H
    ls_full = ls_demand_curve(data.pods, -H, H + total, step_s)  # history day + window + horizon
    ls_full = np.array([math.ceil(round(v * ls_scale, 6)) for v in ls_full], dtype=int)
    rates = dict(data.serve_rates)
    keys = list(range(-H * step_s, total * step_s, step_s))
    missing = [k for k in keys if k not in rates]
    if missing:
        raise InputError(f"real trace: serve_rates has no row for t_s = {missing[0]}")
    r = _interpolate_missing([rates[k] for k in keys])
    serve_full = np.ceil(np.round(r / r.max() * serve_peak_gpus, 6)).astype(int)
    services = []
    for sname, full, band_max, cap, band_min in (
        ("alibaba-ls", ls_full, 3 * n_gpus // 4, 8, 0),
        ("servegen-m-small", serve_full, 2 * serve_peak_gpus, 4, 1),
    ):
        services.append(
            _service(
                sname,
                full[H:],
                max_gpus=band_max,
                swap_cap_gpus=cap,
                min_gpus=band_min,
                forecast=full[:total],
                recalibrate_steps=recalibrate_steps,
                margin=margin,
            )
        )
    jobs = []
    batch = [p for p in data.pods if p.qos != "LS" and p.num_gpu > 0 and p.scheduled_s is not None]
    batch = [p for p in batch if 0 <= p.creation_s < W * step_s]
    batch.sort(key=lambda p: (p.creation_s, p.name))
    n_seen = len(batch)
    for p in batch:
        keep = rng.random() < batch_sample
        err = math.exp(rng.normal(0.0, duration_error_sigma)) if duration_error_sigma > 0 else 1.0
        if not keep:
            continue
        run_s = max(0, p.deletion_s - p.scheduled_s)
        true_steps = max(1, math.ceil(run_s / step_s))
        fc_steps = max(1, math.ceil(round(run_s * err / step_s, 6)))
        gpus = _pow2_ceil(p.num_gpu)
        if gpus >= 2:
            kind = "training"
        elif run_s >= 3600:
            kind = "batch_inference"
        else:
            kind = "quantization"
        jobs.append(
            SimJob(
                job_id=p.name,
                kind=kind,
                priority=QOS_PRIORITY.get(p.qos, 1.0),
                arrival_step=p.creation_s // step_s,
                gpus=min(gpus, n_gpus),
                true_steps=true_steps,
                forecast_steps=fc_steps,
            )
        )
    true_gpu_h = sum(
        (p.deletion_s - p.scheduled_s) / 3600.0 * _pow2_ceil(p.num_gpu) for p in batch if p.name in {j.job_id for j in jobs}
    )
    params = {
        "seed": seed,
        "n_gpus": n_gpus,
        "window": "48 h from trace day chosen by pipelines.trace_io.choose_window_day",
        "ls_scale": ls_scale,
        "batch_sample": batch_sample,
        "batch_pods_in_window": n_seen,
        "n_jobs": len(jobs),
        "serve_peak_gpus": serve_peak_gpus,
        "duration_error_sigma": duration_error_sigma,
        "margin": margin,
        "recalibrate_steps": recalibrate_steps,
        "batch_gpu_h_true": round(true_gpu_h, 1),
        "batch_gpu_h_after_step_rounding": sum(j.gpus * j.true_steps for j in jobs) * STEP_MINUTES / 60,
        "ls_demand_mean_gpus": round(float(np.mean(services[0].demand_true[:W])), 2),
        "serve_demand_mean_gpus": round(float(np.mean(services[1].demand_true[:W])), 2),
        "offered_load": _offered_load(jobs, services, n_gpus, W),
    }
    return Scenario(
        name=name,
        seed=seed,
        cluster=_cluster(n_gpus),
        settings=_settings(),
        n_steps=W,
        services=tuple(services),
        jobs=tuple(jobs),
        exact_forecasts=False,
        description="job mix and arrivals from the Alibaba openb GPU trace; LS + ServeGen real-time demand",
        params=params,
    )


# ----------------------------------------------------------------------------- registry

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
SCENARIOS: tuple[str, ...] = (*GENERATED, "real_trace")


def build(name: str, seed: int = 0, trace: RealTraceData | None = None, **kwargs: Any) -> Scenario:
    """Build scenario ``name`` with ``seed``. ``real_trace`` needs ``trace``.

    Raises :class:`InputError` for an unknown name or a missing trace.
    """
    if name == "real_trace":
        if trace is None:
            raise InputError("scenario 'real_trace' needs the trace data (pipelines.trace_io.load_real_trace)")
        return real_trace(trace, seed, **kwargs)
    if name not in GENERATED:
        raise InputError(f"unknown scenario {name!r}; expected one of {', '.join(SCENARIOS)}")
    return GENERATED[name](seed, **kwargs)
