"""Workload drawing for the generated scenarios: job mixes, demand curves, load calibration.

- :func:`diurnal_demand`: a day/night real-time demand curve.
- :func:`draw_jobs`: batch job drafts (kind, size, duration in hours, priority, arrival) from a
  :class:`KindMix` per kind.
- :func:`calibrate_jobs`: one factor on every drafted duration so that the offered load (batch
  GPU-hours arriving in the window / GPU-hours left by the true real-time demand,
  :func:`offered_load`) is :data:`TARGET_LOAD` = 1.0. The same rule for every scenario sets how
  busy the cluster is, not who wins.
- :func:`scenario_rng`, :func:`scenario_cluster`, :func:`scenario_settings`,
  :func:`make_service`: the shared building blocks of :mod:`optimizer.scenarios.catalogue` and
  :mod:`optimizer.scenarios.trace`.

Hours -> steps here uses :func:`domain.units.hours_to_steps` with ``rounding="nearest"``, not the
``"ceil"`` rule of forecasts and plans: a drawn duration is the *truth* of a generated world
being put on the step grid, a sample with no promise attached, so rounding to the nearest step
keeps the drawn distribution unbiased (ceil would lengthen every job by half a step on average).
The planner never sees these true steps; it sees forecasts. This rule is also what the shipped
benchmark numbers were generated with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from domain.units import hours_to_steps
from optimizer.problem import Cluster, PlanSettings
from optimizer.scenarios.types import GPUS_PER_NODE, HORIZON_STEPS, STEP_MINUTES, SimJob, SimService


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
class JobDraft:
    """A drawn batch job before load calibration: duration still in hours (see :func:`draw_jobs`)."""

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
) -> list[JobDraft]:
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
        drawn.append(JobDraft(arr, i, kind, prio, gpus, dur_h, err))
    drawn.sort(key=lambda x: (x.arrival_step, x.order))
    return drawn


def jobs_from_drafts(drafts: Sequence[JobDraft], scale: float, max_h: float, id_prefix: str = "J") -> list[SimJob]:
    """Scenario jobs from drafts: durations x ``scale``, clipped to ``max_h`` hours, on the step grid.

    Ids ``J000``, ``J001``, ... in draft order. Hours -> steps by :func:`domain.units.hours_to_steps`
    with ``rounding="nearest"`` (see the module docstring: a drawn duration is a sample of the
    truth, not a forecast the planner must not undercut).
    """
    out = []
    for k, d in enumerate(drafts):
        hours = min(max_h, d.hours * scale)
        true_steps = hours_to_steps(hours, STEP_MINUTES, rounding="nearest")
        fc_steps = true_steps if d.error == 1.0 else hours_to_steps(hours * d.error, STEP_MINUTES, rounding="nearest")
        out.append(SimJob(f"{id_prefix}{k:03d}", d.kind, d.priority, d.arrival_step, d.gpus, true_steps, fc_steps))
    return out


def calibrate_jobs(
    drafts: Sequence[JobDraft],
    services: Sequence[SimService],
    n_gpus: int,
    n_steps: int,
    target_load: float,
    max_h: float = MAX_JOB_H,
) -> tuple[list[SimJob], float]:
    """Scale every drafted duration by one factor so the offered load is ``target_load``.

    Offered load = batch GPU-steps inside the window (:func:`offered_load`) / GPU-steps left by
    the true real-time demand. The factor is found by bisection on [0.05, 20] (durations clipped
    to ``max_h`` hours, at least one step); returns (jobs, factor). The same rule for every
    scenario: it sets how busy the cluster is, not who wins.
    """
    lo, hi = 0.05, 20.0
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        load = offered_load(jobs_from_drafts(drafts, mid, max_h), services, n_gpus, n_steps)
        if load < target_load:
            lo = mid
        else:
            hi = mid
    scale = round(math.sqrt(lo * hi), 4)
    return jobs_from_drafts(drafts, scale, max_h), scale


def scenario_rng(seed: int, name: str) -> np.random.Generator:
    """Independent stream per (seed, scenario name): the name's bytes are part of the seed."""
    return np.random.default_rng([int(seed), *name.encode()])


def scenario_settings() -> PlanSettings:
    """Planner settings of every generated scenario: 10 s, 1 % gap, one thread, seed 0 (the bench overrides the budget)."""
    return PlanSettings(time_limit_s=10.0, mip_rel_gap=0.01, threads=1, random_seed=0)


def scenario_cluster(n_gpus: int) -> Cluster:
    """``n_gpus`` GPUs on 8-GPU nodes, 30-minute steps, a 48-step (24 h) horizon (the common conventions)."""
    return Cluster(n_gpus=n_gpus, gpus_per_node=GPUS_PER_NODE, step_minutes=STEP_MINUTES, horizon_steps=HORIZON_STEPS)


def make_service(
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
    """A :class:`SimService` from a true demand series (clipped to ``[min_gpus, max_gpus]``).

    ``forecast``: the base forecast series (clipped to ``[0, max_gpus]``; None = the truth, an exact
    forecast). The service starts with ``max(min_gpus, forecast[0])`` GPUs.
    """
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


def offered_load(jobs: Sequence[SimJob], services: Sequence[SimService], n_gpus: int, n_steps: int) -> float:
    """Offered load: batch GPU-steps offered inside the window / GPU-steps the true real-time demand leaves.

    Each job's work counts from its arrival, cut at the window end; ``inf`` when the real-time
    demand fills the window. Rounded to 3 decimals.
    """
    rt = sum(sum(s.demand_true[:n_steps]) for s in services)
    free = n_gpus * n_steps - rt
    work = sum(j.gpus * min(j.true_steps, max(0, n_steps - j.arrival_step)) for j in jobs)
    return round(work / free, 3) if free > 0 else float("inf")


def offered_load_total(jobs: Sequence[SimJob], services: Sequence[SimService], n_gpus: int, n_steps: int) -> float:
    """Offered load as GPU-hours demanded / GPU-hours available over the window (issue 15).

    ``(sum_j gpus_j x min(true_steps_j, n_steps - arrival_step_j) + sum_s sum_t demand_true_s[t])
    / (n_gpus x n_steps)``: each batch job's work counts from its arrival and is cut at the window
    end; real-time demand is the true demand of every service over the window. Equals 1.0 exactly
    when :func:`offered_load` does (both say the demand fills the cluster). Rounded to 3 decimals.
    Raises ``ValueError`` for ``n_gpus`` or ``n_steps`` below 1.
    """
    if n_gpus < 1 or n_steps < 1:
        raise ValueError(f"offered_load_total: n_gpus = {n_gpus} and n_steps = {n_steps} must be >= 1")
    rt = sum(sum(s.demand_true[:n_steps]) for s in services)
    work = sum(j.gpus * min(j.true_steps, max(0, n_steps - j.arrival_step)) for j in jobs)
    return round((work + rt) / (n_gpus * n_steps), 3)
