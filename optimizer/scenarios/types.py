"""Scenario types: the truth and what the planner may see (DESIGN §6.5).

A :class:`Scenario` holds the *truth* (actual job durations, actual real-time demand) and
what the planner is allowed to see (forecast durations, a demand forecast series). The
simulator (:mod:`optimizer.simulate`) only ever shows the planner the forecasts.

Common conventions (all scenarios): 30-minute steps (:data:`STEP_MINUTES`), a 48-step (24 h)
planning horizon (:data:`HORIZON_STEPS`), a 96-step (48 h) evaluation window
(:data:`WINDOW_STEPS`), 8 GPUs per node. Durations are in whole steps (at least 1). A service's
demand arrays cover the window plus one horizon (``n_steps + horizon_steps`` entries) so that the
last replan still has a full 24 h of forecast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from domain.kinds import JOB_KINDS
from domain.units import is_pow2
from optimizer.errors import InputError
from optimizer.problem import Cluster, PlanSettings

#: Step length of every scenario, minutes.
STEP_MINUTES = 30
#: Planning horizon, steps (24 h).
HORIZON_STEPS = 48
#: Evaluation window of the generated scenarios, steps (48 h).
WINDOW_STEPS = 96
#: GPUs per node.
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class SimJob:
    """A batch job of a scenario.

    ``arrival_step``: step at which it joins the queue (>= 0). ``gpus``: requested power-of-two
    block. ``true_steps``: how long it actually runs (>= 1); ``forecast_steps``: what the planner
    is told (>= 1). ``priority`` > 0. ``gpu_types``: the GPU types it may run on (a typed cluster
    only; ``()`` = any type). Preemption (issue 30): ``preemptible``, ``checkpoint_interval_steps`` (None:
    no checkpoint), ``restart_steps`` (>= 0), as in the problem file (DESIGN §3.1).
    """

    job_id: str
    kind: str
    priority: float
    arrival_step: int
    gpus: int
    true_steps: int
    forecast_steps: int
    gpu_types: tuple[str, ...] = ()
    preemptible: bool = False
    checkpoint_interval_steps: int | None = None
    restart_steps: int = 0

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
    ``capacity_by_type``: (gpu_type, requests per GPU-hour) on a typed cluster (issue 26; the demands then count
    GPUs of the slowest listed type, :class:`optimizer.problem.Service`); empty: every GPU serves one.
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
    capacity_by_type: tuple[tuple[str, float], ...] = ()

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
    """Node ``node`` (GPUs ``node*gpus_per_node ..``) is down from ``step`` until ``until_step`` (exclusive; None = until further notice, i.e. to the end of the window)."""

    step: int
    node: int
    until_step: int | None = None


@dataclass(frozen=True)
class PinnedStart:
    """Operator placement: job ``job_id`` is started at ``step`` on ``block_offset`` by the simulator itself (before the planner runs at that step).

    Used to set up a known state, e.g. case C24 ("Q started at step 4 on node n2").
    """

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
    settings: PlanSettings
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
        """The same scenario with forecasts replaced by the truth (true durations, true demand, no recalibration or margin): what the clairvoyant reference plans from."""
        jobs = tuple(replace(j, forecast_steps=j.true_steps) for j in self.jobs)
        services = tuple(
            replace(s, demand_forecast=s.demand_true, recalibrate_steps=0, margin=0.0) for s in self.services
        )
        return replace(self, jobs=jobs, services=services, exact_forecasts=True)

    def offered_gpu_steps(self) -> int:
        """Total true batch work, GPU-steps (sum of gpus x true_steps)."""
        return sum(j.gpus * j.true_steps for j in self.jobs)
