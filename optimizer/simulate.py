"""Discrete-time rolling-horizon simulator (DESIGN §6.1-6.2).

At every step ``t`` of a :class:`~optimizer.scenarios.Scenario` the simulator

1. **observes**: node failures and recoveries at ``t`` (a batch job on a failed GPU is killed and
   requeued with its full duration — no checkpoint is assumed; real-time replicas on a failed GPU
   are lost and count against the service's swap cap when re-created), completions (by the *true*
   duration), arrivals;
2. **forecasts**: builds the horizon :class:`~optimizer.problem.Problem` from what the planner may
   know — forecast durations, the service demand forecast issued at ``t``
   (:meth:`~optimizer.scenarios.SimService.forecast_at`), running jobs with their re-estimated
   remaining time ``max(1, forecast_end - t)`` (a job that outlives its forecast keeps its block
   and is re-estimated as at least one more step), and the failed GPUs as ``down_gpus``;
3. **plans** every ``replan_every_steps`` steps (default 1; also at once after a failure, or when
   following the previous plan is no longer valid); in between it follows the previous plan,
   shifted to the current step;
4. **verifies** the plan it is about to commit with the independent verifier, counting verified
   plans and violations (a violation raises :class:`SimulationError`: nothing unverified is
   committed);
5. **commits** step 0 only: the jobs the plan starts at step 0 and each service's GPUs at step 0;
6. **advances**, recording per-step GPU use on the truth (actual demand, actual completions).

The planner is any ``PlannerFn(problem, warm_start) -> Plan`` (see :func:`planner_fn`). The truth
never reaches it. Everything is deterministic given the scenario and the planner.

The clairvoyant reference (:func:`simulate_clairvoyant`) runs the same loop with the truth: true
durations, true demand, and the jobs arriving inside the horizon.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from domain.conformal import conformal_upper
from domain.kinds import JOB_KINDS
from optimizer import planners, preemption
from optimizer.errors import InputError
from optimizer.fast import place_arrivals
from optimizer.objective import objective_value
from optimizer.plan import JobAssignment, Plan, PlanSource
from optimizer.problem import Job, Problem, RunningJob, Service, SizeOption
from optimizer.scenarios import Scenario, SimJob, SimService
from optimizer.solver import SolveStatus
from optimizer.verify import verify as verify_plan

#: Miscoverage of the real-time margin (:class:`ConformalMargin`): 1 step in 1,000 may exceed the planned
#: level. With fewer than 999 residuals in a lead band the margin is the largest residual seen.
RT_MARGIN_ALPHA = 0.001

PlannerFn = Callable[[Problem, "Plan | None"], Plan]
"""A planner: ``(problem, warm_start_or_None) -> Plan``."""

VerifyFn = Callable[[Plan, Problem], Sequence[str]]


class SimulationError(RuntimeError):
    """A plan about to be committed failed the verifier, or the committed state broke an invariant (double-booked GPU, capacity exceeded).

    Never expected: it means a planner or the simulator is wrong.
    """


# ----------------------------------------------------------------------------- records


@dataclass
class JobRecord:
    """What happened to one job over the window (steps are absolute, end exclusive).

    ``first_start_step``: first start (wait time is measured to it); ``start_step``: start of the
    last run; ``end_step``: completion step (None if not completed in the window);
    ``run_gpu_steps``: GPU-steps it ran inside the window, including runs later lost to a node
    failure; ``lost_gpu_steps``: GPU-steps of runs killed by a failure or a stop, since their last
    checkpoint; ``restarts``: times it was requeued; ``stop_steps``: steps at which a surge preemption
    stopped it; ``preempted_gpu_steps``: GPU-steps those stops lost (work since the last checkpoint +
    restart, x GPUs).
    """

    job_id: str
    kind: str
    priority: float
    gpus: int
    arrival_step: int
    first_start_step: int | None = None
    start_step: int | None = None
    end_step: int | None = None
    block_offset: int | None = None
    run_gpu_steps: int = 0
    lost_gpu_steps: int = 0
    restarts: int = 0
    stop_steps: list[int] = field(default_factory=list)
    preempted_gpu_steps: int = 0

    @property
    def stops(self) -> int:
        """Times the job was stopped by a surge preemption (issue 30)."""
        return len(self.stop_steps)

    @property
    def completed(self) -> bool:
        """True when the job finished inside the window."""
        return self.end_step is not None


@dataclass(frozen=True)
class ReplanRecord:
    """One decision point: a fresh plan (``replanned``) or the previous plan followed.

    ``status``/``source``: the committed plan's :class:`~optimizer.plan.SolveStatus` and
    :class:`~optimizer.plan.PlanSource`.
    """

    step: int
    replanned: bool
    status: SolveStatus
    solve_s: float
    gap: float | None
    objective: float
    n_queued: int
    n_running: int
    reason: str = ""
    wall_clock_limited: bool = False
    source: PlanSource | None = None


@dataclass(frozen=True)
class FailureRecord:
    """A node failure as observed: which jobs were killed and the GPU-steps they lost."""

    step: int
    node: int
    gpus: tuple[int, ...]
    killed_jobs: tuple[str, ...]
    lost_gpu_steps: int
    lost_replicas: dict[str, int]


@dataclass
class SimResult:
    """Everything the metrics need, on the truth.

    Per-step series have shape (n_steps,): ``batch_gpus[kind][t]`` GPUs running batch work of
    that kind; ``service_gpus[s][t]`` GPUs allocated; ``service_demand[s][t]`` actual demand;
    ``down_gpus[t]`` GPUs down. Typed cluster only (issue 26; empty otherwise): ``type_gpus[ty]`` the
    GPUs of type ``ty``; ``type_batch_gpus[ty][t]`` GPUs of that type running batch work;
    ``type_service_gpus[s][ty][t]`` GPUs of that type holding replicas of service ``s`` (the simulator's
    own replica placement, :meth:`_State.place_services`); ``service_served[s][t]`` the demand GPUs the replicas
    of a service with per-type capacity serve (absent for the others, whose GPUs serve one each). ``verified_plans``: committed plans, each checked by the verifier
    (one per step); ``violations``: their findings (always 0 — a violation raises);
    ``stale_plans``: previous plans that no longer verified when followed (k > 1) and were replaced
    by a fresh plan instead of being committed. ``surge_replans``: plans made inside a step because
    the actual demand of a service exceeded the GPUs committed to it (:func:`_surge`). ``arrival_placements``: steps
    between replans at which the fast mode started arrivals on the followed plan (``simulate(place_arrivals=True)``).
    """

    scenario: str
    planner: str
    n_gpus: int
    n_steps: int
    step_h: float
    jobs: dict[str, JobRecord]
    batch_gpus: dict[str, list[int]]
    service_gpus: dict[str, list[int]]
    service_demand: dict[str, list[int]]
    down_gpus: list[int]
    replans: list[ReplanRecord] = field(default_factory=list)
    failures: list[FailureRecord] = field(default_factory=list)
    verified_plans: int = 0
    violations: int = 0
    stale_plans: int = 0
    surge_replans: int = 0
    arrival_placements: int = 0
    plans_at: dict[int, Plan] = field(default_factory=dict)
    problems_at: dict[int, Problem] = field(default_factory=dict)
    wall_s: float = 0.0
    type_gpus: dict[str, int] = field(default_factory=dict)
    type_batch_gpus: dict[str, list[int]] = field(default_factory=dict)
    type_service_gpus: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    service_served: dict[str, list[float]] = field(default_factory=dict)

    @property
    def preempted_gpu_h(self) -> float:
        """GPU-hours lost to surge preemption (issue 30): per stop (work since the last checkpoint + restart) x GPUs."""
        return sum(r.preempted_gpu_steps for r in self.jobs.values()) * self.step_h

    @property
    def stops_per_job(self) -> dict[str, int]:
        """Stops per job, only jobs stopped at least once (issue 30)."""
        return {j: r.stops for j, r in self.jobs.items() if r.stops}


# ----------------------------------------------------------------------------- planners


def planner_fn(name: str, settings_override: dict[str, Any] | None = None) -> PlannerFn:
    """Wrap :func:`optimizer.planners.plan` as a :data:`PlannerFn` for planner ``name``.

    ``settings_override``: fields of :class:`~optimizer.problem.PlanSettings` replaced on every
    problem (e.g. the bench's solver budget).
    """
    if name not in planners.PLANNERS:
        raise InputError(f"unknown planner {name!r}; expected one of {', '.join(planners.PLANNERS)}")

    def fn(problem: Problem, warm_start: Plan | None) -> Plan:
        if settings_override:
            problem = replace(problem, settings=replace(problem.settings, **settings_override))
        if name == "milp":
            return planners.plan(problem, name, warm_start=warm_start)
        return planners.plan(problem, name)

    return fn


# ----------------------------------------------------------------------------- calibrated margin


def conformal_quantile(residuals: Sequence[float], alpha: float) -> float:
    """Split-conformal upper quantile of ``residuals`` (actual − forecast, GPUs) at miscoverage ``alpha``.

    The ``k``-th smallest residual with ``k = ceil((n + 1)(1 − alpha))`` (:func:`domain.conformal.conformal_rank`;
    Vovk et al. 2005; Lei et al. 2018, split conformal): a new residual exchangeable with these is at most it with probability
    >= 1 − alpha. When ``k > n`` (fewer than ``1/alpha − 1`` residuals) the largest residual is used,
    the most the data can say; 0.0 for no residuals. Raises :class:`InputError` unless 0 < alpha < 1.
    """
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha = {alpha} must be in (0, 1)")
    return conformal_upper(residuals, 1.0 - alpha) if len(residuals) else 0.0


class ConformalMargin:
    """Per-service real-time margin from the rolling simulation's own forecast residuals (DESIGN §6.1).

    Every forecast issued at step ``t`` is kept for ``horizon_steps``; when the actual demand of step
    ``u`` is seen, the residual ``actual[u] − forecast_issued_at(u − k)[k]`` joins the pool of its
    lead band ``k // band_steps`` (``band_steps`` = 6 h of steps, the bands of the risk report §6.4).
    Only residuals of the last ``window_steps`` steps are kept. The margin for lead ``k`` is
    ``max(0, ceil(conformal_quantile(pool, alpha)))`` GPUs: the planned level is the forecast plus it.
    A band with no residual yet uses all the service's residuals; before any (the first plan), the
    planned level is the forecast plus the service's swap cap (:func:`_problem_at`).
    """

    def __init__(self, alpha: float, horizon_steps: int, step_minutes: int, window_steps: int = 336) -> None:
        self.alpha = alpha
        self.H = horizon_steps
        self.band_steps = max(1, 360 // step_minutes)
        self.window_steps = window_steps
        self.issued: dict[str, dict[int, tuple[int, ...]]] = {}
        self.pools: dict[tuple[str, int], deque[tuple[int, int]]] = {}

    def issue(self, t: int, service: str, forecast: Sequence[int]) -> None:
        """Remember the forecast (GPUs per lead, shape (H,)) issued at step ``t``."""
        book = self.issued.setdefault(service, {})
        book[t] = tuple(forecast)
        book.pop(t - self.H, None)

    def observe(self, u: int, service: str, actual: int) -> None:
        """Add the residuals of step ``u``'s actual demand against every forecast issued for it."""
        for t0, fc in self.issued.get(service, {}).items():
            k = u - t0
            if 0 <= k < len(fc):
                pool = self.pools.setdefault((service, k // self.band_steps), deque())
                pool.append((u, actual - fc[k]))
                while pool and pool[0][0] <= u - self.window_steps:
                    pool.popleft()

    def margin(self, service: str, lead: int) -> int | None:
        """GPUs added to the forecast at ``lead`` steps ahead (>= 0); None before any residual of ``service``.

        A lead band with no residual yet uses every residual of the service (all bands pooled).
        None means nothing has been measured: the caller plans the cold-start level.
        """
        pool = self.pools.get((service, lead // self.band_steps))
        if not pool:
            pool = deque(x for (svc, _b), q in self.pools.items() if svc == service for x in q)
        if not pool:
            return None
        return max(0, math.ceil(conformal_quantile([r for _, r in pool], self.alpha) - 1e-9))


# ----------------------------------------------------------------------------- state


@dataclass
class _Run:
    job: SimJob
    offset: int
    start: int
    true_end: int
    forecast_end: int
    overhead: int = 0  # restart steps at the start of this run (a requeued preemptible job), issue 30


class _State:
    """Mutable simulation state (private)."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.N = sc.cluster.n_gpus
        self.gpn = sc.cluster.gpus_per_node
        #: GPUs a typed cluster's layout keeps down (its nodes' down GPUs and the padding); empty when untyped
        self.layout_down: set[int] = set(sc.cluster.layout_down)
        #: GPU type per GPU index of a typed cluster ("" for padding); empty when untyped
        self.gpu_type: list[str] = [""] * self.N if sc.cluster.typed else []
        for o, n in zip(sc.cluster.node_offsets, sc.cluster.nodes, strict=True):
            self.gpu_type[o:o + n.gpus] = [n.gpu_type] * n.gpus
        self.jobs_by_id = {j.job_id: j for j in sc.jobs}
        self.arrivals: dict[int, list[SimJob]] = {}
        for j in sc.jobs:
            self.arrivals.setdefault(j.arrival_step, []).append(j)
        self.queue: dict[str, SimJob] = {}
        self.running: dict[str, _Run] = {}
        self.down: set[int] = set()
        self.alloc = {s.service: s.initial_gpus for s in sc.services}
        self.place: dict[str, list[int]] = {}
        self.records = {
            j.job_id: JobRecord(j.job_id, j.kind, j.priority, j.gpus, j.arrival_step) for j in sc.jobs
        }
        self.pins = {(p.step, p.job_id): p for p in sc.pinned}
        #: actual / forecast duration of every job completed so far (None: not used, :func:`_remaining_upper`)
        self.run_ratios: list[float] | None = []
        #: restart steps the next run of a requeued job starts with (issue 30)
        self.overhead: dict[str, int] = {}
        #: stops per job allowed in any 24 h (issue 30, ``simulate(max_stops_per_24h=...)``)
        self.max_stops_per_24h = 2
        self.steps_24h = max(1, (24 * 60) // sc.cluster.step_minutes)

    def may_stop(self, jid: str, t: int) -> bool:
        """True when job ``jid`` is under its cap of stops in the 24 h up to step ``t`` (issue 30)."""
        recent = [u for u in self.records[jid].stop_steps if u > t - self.steps_24h]
        return len(recent) < self.max_stops_per_24h

    # -- placement of real-time replicas (only needed to know what a node failure takes)
    def batch_owned(self) -> set[int]:
        out: set[int] = set()
        for r in self.running.values():
            out.update(range(r.offset, r.offset + r.job.gpus))
        return out

    def place_services(self, initial: bool = False) -> None:
        """Put each service's replicas on concrete GPUs: keep GPUs it held that are still free, add the highest-indexed free GPUs (batch blocks are packed from offset 0)."""
        free = set(range(self.N)) - self.down - self.layout_down - self.batch_owned()
        for s in self.sc.services:
            want = self.alloc[s.service]
            if initial and s.initial_gpu_ids is not None:
                prev = list(s.initial_gpu_ids)
            else:
                prev = self.place.get(s.service, [])
            if s.capacity_by_type:  # per-type capacity (issue 26): its types only, the fastest first
                self.place[s.service] = self._place_typed(s, prev, free, want)
                continue
            keep = [g for g in prev if g in free][:want]
            free -= set(keep)
            extra = sorted(free, reverse=True)[: want - len(keep)]
            free -= set(extra)
            self.place[s.service] = sorted(keep + extra)

    def weight(self, s: SimService, g: int) -> float:
        """Demand GPUs GPU ``g`` serves for ``s`` (rate of its type / the slowest listed rate; 0: not listed)."""
        rates = dict(s.capacity_by_type)
        return rates.get(self.gpu_type[g], 0.0) / min(rates.values())

    def _place_typed(self, s: SimService, prev: list[int], free: set[int], want: int) -> list[int]:
        """A typed-capacity service's GPUs (``free`` updated), as :func:`optimizer.placement.service_placement`.

        Kept ones still free, then new ones by largest weight then highest index, then kept ones of the
        lowest weight moved to free faster ones while the swap cap has room.
        """
        key = lambda g: (self.weight(s, g), g)  # noqa: E731
        keep = sorted((g for g in prev if g in free and self.weight(s, g) > 0), key=key, reverse=True)[:want]
        free -= set(keep)
        extra = sorted((g for g in free if self.weight(s, g) > 0), key=key, reverse=True)[: want - len(keep)]
        free -= set(extra)
        room = s.swap_cap_gpus - (max(want, len(prev)) - len(keep))
        while room > 0 and keep:
            spare = sorted((g for g in free if self.weight(s, g) > 0), key=key, reverse=True)
            worst = min(keep, key=key)
            if not spare or self.weight(s, spare[0]) <= self.weight(s, worst):
                break
            keep.remove(worst)
            free.add(worst)
            free.discard(spare[0])
            extra.append(spare[0])
            room -= 1
        return sorted(keep + extra)


# ----------------------------------------------------------------------------- problem building


def _problem_at(st: _State, t: int, current: dict[str, int], lookahead: bool = False,
                margin: ConformalMargin | None = None) -> Problem:
    sc = st.sc
    H = sc.cluster.horizon_steps

    def planned(s) -> tuple[int, ...]:
        fc = s.forecast_at(t, H)
        if margin is None:
            return fc
        margin.issue(t, s.service, fc)
        by_band: dict[int, int | None] = {}  # the margin is the same for every lead of a band: one quantile each
        out = []
        for k, d in enumerate(fc):
            band = k // margin.band_steps
            if band not in by_band:
                by_band[band] = margin.margin(s.service, k)
            m = by_band[band]
            # cold start: no error measured yet, so hold back what the service can grow in one step
            # (its swap cap, all a surge replan could use): reclaimable capacity, not a guess
            out.append(min(s.max_gpus, d + (s.swap_cap_gpus if m is None else m)))
        return tuple(out)

    services = tuple(
        Service(
            service=s.service,
            demand_gpus=planned(s),
            min_gpus=s.min_gpus,
            max_gpus=s.max_gpus,
            swap_cap_gpus=s.swap_cap_gpus,
            current_gpus=current[s.service],
            capacity_by_type=s.capacity_by_type,
        )
        for s in sc.services
    )
    jobs = tuple(
        Job(j.job_id, j.kind, aged_priority(j.priority, t - j.arrival_step, sc.settings.max_wait_steps), 0,
            (SizeOption(j.gpus, j.forecast_steps),), gpu_types=j.gpu_types, **_queued_preemption(st, j, t))
        for j in sorted(st.queue.values(), key=lambda j: (j.arrival_step, j.job_id))
    )
    if lookahead:
        future = [j for u in range(t + 1, t + H) for j in st.arrivals.get(u, [])]
        jobs += tuple(
            Job(j.job_id, j.kind, j.priority, j.arrival_step - t, (SizeOption(j.gpus, j.forecast_steps),),
                gpu_types=j.gpu_types, **_queued_preemption(st, j, t))
            for j in sorted(future, key=lambda j: (j.arrival_step, j.job_id))
        )
    q = _upper_ratio(st)
    running = tuple(
        RunningJob(r.job.job_id, r.job.kind, r.job.priority, r.job.gpus, r.offset, _remaining_upper(r, t, q),
                   **_preemption_fields(st, r, t))
        for r in sorted(st.running.values(), key=lambda r: r.job.job_id)
    )
    return Problem(sc.cluster, sc.settings, services, jobs, running, tuple(sorted(st.down)))


def checkpoint_progress(r: _Run, t: int) -> tuple[int, int]:
    """``(steps since the last checkpoint or the run's start, work steps checkpointed in this run)`` at step ``t``.

    :func:`optimizer.preemption.checkpoint_state` of the run's ``t - start`` steps, its restart ``overhead`` and its
    job's ``checkpoint_interval_steps`` (issue 30).
    """
    return preemption.checkpoint_state(t - r.start, r.overhead, r.job.checkpoint_interval_steps)


def _queued_preemption(st: _State, j: SimJob, t: int) -> dict[str, Any]:
    """The preemption fields of a queued job's :class:`Job` at ``t``; none for a non-preemptible job (issue 30).

    ``preemptible`` is False once the job has had its cap of stops in the last 24 h, as for a running job
    (:func:`_preemption_fields`). The planners read it for the surprise reserve (:mod:`optimizer.reserve`): a
    preemptible queued job may start in the GPUs a real-time surprise may claim; with no preemptible job every
    field is the default and the problem is the one without preemption.
    """
    if not j.preemptible:
        return {}
    return {"preemptible": st.may_stop(j.job_id, t), "checkpoint_interval_steps": j.checkpoint_interval_steps,
            "restart_steps": j.restart_steps}


def _preemption_fields(st: _State, r: _Run, t: int) -> dict[str, Any]:
    """The preemption fields of a running job's :class:`RunningJob` at ``t``; none for a non-preemptible job.

    ``preemptible`` is False once the job has had its cap of stops in the last 24 h (the rule and the
    verifier then leave it running).
    """
    if not r.job.preemptible:
        return {}
    since, _ = checkpoint_progress(r, t)
    return {"preemptible": st.may_stop(r.job.job_id, t), "checkpoint_interval_steps": r.job.checkpoint_interval_steps,
            "restart_steps": r.job.restart_steps, "steps_since_checkpoint": since}


#: Miscoverage of a running job's upper run length (:func:`_remaining_upper`): its P90 under the
#: ratios actual / forecast duration of the jobs completed so far.
RUN_UPPER_ALPHA = 0.1


def _upper_ratio(st: _State) -> float | None:
    """The ratio ``q`` stretching a running job's forecast to its upper run length; None when nothing says so.

    ``q = max(1, conformal_quantile(ratios, α))`` over the ratios actual / forecast duration of the jobs
    this run has seen complete (``α`` = :data:`RUN_UPPER_ALPHA`: a P90); None before any completion or
    with ``st.run_ratios`` None (clairvoyant: true durations). Computed once per problem (:func:`_problem_at`).
    """
    return max(1.0, conformal_quantile(st.run_ratios, RUN_UPPER_ALPHA)) if st.run_ratios else None


def _remaining_upper(r: _Run, t: int, q: float | None) -> int:
    """Steps a running job is counted to hold its block from ``t`` on (DESIGN §6.1), >= 1.

    ``ceil(start + q · forecast_steps) − t`` with ``q`` from :func:`_upper_ratio`, and at least
    ``forecast_end − t``: a running job is fixed occupancy, its length changes no reward, only the GPUs
    plans count as free (for real-time and batch alike), so an upper estimate keeps plans from giving
    real-time GPUs that an overrunning job still holds. With ``q`` None the forecast end is used.
    """
    end = r.forecast_end
    if q is not None:
        end = max(end, math.ceil(round(r.start + q * r.job.forecast_steps, 9)))
    return max(1, end - t)


def aged_priority(priority: float, waited_steps: int, max_wait_steps: int | None) -> float:
    """Priority the planner sees for a job that has waited ``waited_steps`` (adapter, case C19).

    A rolling problem states every queued job with release step 0, so a planner-side maximum wait
    (``settings.max_wait_steps``) restarts at every replan and a large job can be postponed
    forever by a stream of small ones. When ``max_wait_steps = W`` is set, the simulator carries
    the wait into the problem the way Slurm's multifactor "age" factor does:
    ``p x (1 + waited / (W + 1))``, the factor rounded to 1e-6 (so a job that has waited longer
    wins ties). The rounding is relative: an absolute one would turn a priority of 1e-9 into 0
    (case F01: priorities carry the user's units). Without ``max_wait_steps`` priorities pass
    unchanged. Metrics always use the true priority.
    """
    if max_wait_steps is None or waited_steps <= 0:
        return priority
    return priority * round(1.0 + waited_steps / (max_wait_steps + 1.0), 6)


def shift_plan(prev: Plan, offset: int, problem: Problem) -> Plan:
    """The previous plan seen from ``offset`` steps later, in ``problem``'s terms.

    Queued jobs keep the start the previous plan gave them, moved ``offset`` steps earlier (None
    when it was before the new step 0, i.e. missed, or beyond the new horizon); their duration is
    the problem's. Running jobs are listed as the problem has them. Service GPUs are the previous
    series from ``offset`` on, the last value repeated to fill the horizon. The objective is left
    NaN (the verifier does not use it).
    """
    H = problem.cluster.horizon_steps
    old = {a.job_id: a for a in prev.assignments}
    assignments: list[JobAssignment] = []
    for j in problem.jobs:
        a = old.get(j.job_id)
        if a is not None and a.start_step is not None and not a.running and 0 <= a.start_step - offset < H:
            size = next((s for s in j.sizes if s.gpus == a.gpus), None)
            if size is not None:
                s0 = a.start_step - offset
                assignments.append(JobAssignment(j.job_id, s0, s0 + size.duration_steps, a.block_offset, a.gpus))
                continue
        assignments.append(JobAssignment(j.job_id, None, None, None, None))
    for r in problem.running:
        assignments.append(JobAssignment(r.job_id, 0, r.planned_steps, r.block_offset, r.gpus, running=True))
    services = {}
    for s in problem.services:
        seq = list(prev.service_gpus.get(s.service, ()))[offset:]
        if not seq:
            seq = [s.current_gpus]
        seq = (seq + [seq[-1]] * H)[:H]
        services[s.service] = tuple(seq)
    return Plan(
        planner=prev.planner,
        status=prev.status,
        source=prev.source,
        assignments=tuple(assignments),
        service_gpus=services,
        objective=float("nan"),
        bound=None,
        gap=None,
        solve_s=0.0,
        model=None,
        n_gpus=problem.cluster.n_gpus,
        horizon_steps=H,
        message=f"previous plan followed (+{offset} steps)",
    )


# ----------------------------------------------------------------------------- the loop


def simulate(
    scenario: Scenario,
    planner: PlannerFn,
    *,
    name: str = "planner",
    replan_every_steps: int = 1,
    verify: VerifyFn | None = None,
    keep_plans: bool = False,
    lookahead: bool = False,
    progress: Callable[[int, int], None] | None = None,
    surge_replan: bool = True,
    rt_margin_alpha: float | None = RT_MARGIN_ALPHA,
    run_upper: bool = True,
    place_arrivals: bool = False,
    preempt_order: str | None = "loss",
    max_stops_per_24h: int = 2,
) -> SimResult:
    """Run ``planner`` on ``scenario`` over its window; returns the :class:`SimResult`.

    - ``replan_every_steps`` k >= 1: plan at steps 0, k, 2k, ...; in between, follow the previous
      plan shifted to the current step (:func:`shift_plan`) as long as it still verifies against
      the current problem (a job outliving its forecast, a failure or a lost replica can break it:
      then plan afresh at once). A failure always triggers a fresh plan.
    - ``verify``: the verifier (default :func:`optimizer.verify.verify`). Every committed plan is
      verified; a violation raises :class:`SimulationError` naming the step and the findings.
    - ``keep_plans``: store every problem/plan in the result (tests; memory-hungry on big runs).
    - ``lookahead``: also show the planner the jobs arriving inside the horizon, with their arrival
      as release step (the clairvoyant reference; never for a real planner).
    - ``progress(t, n_steps)``: called after each step.
    - ``surge_replan``: when a service's actual demand at step ``t`` exceeds the GPUs just
      committed to it, plan again at once inside the step with that demand known (:func:`_surge`,
      DESIGN §6.2; counted in ``SimResult.surge_replans``), instead of waiting for the next step.

    - ``rt_margin_alpha``: each service's planned demand is its forecast plus a split-conformal
      margin of the forecast residuals this run has seen, per 6-h lead band, at miscoverage alpha
      (:class:`ConformalMargin`, DESIGN §6.1); the same for every planner. None: the forecast alone
      (also with ``lookahead``: the clairvoyant reference plans the true demand).

    - ``run_upper``: running jobs are shown to the planner holding their block to an upper
      estimate of their end (:func:`_remaining_upper`, the P90 of the run's observed duration
      ratios); False: to the forecast end (at least one more step).

    - ``place_arrivals`` (issue 29): at a step between replans (k > 1), jobs that arrived since the plan
      followed was made are placed by the fast mode in the room it leaves (:func:`optimizer.fast.place_arrivals`:
      its starts and service GPUs kept), so an arrival that fits now starts now instead of at the next replan; when
      one starts at once, the plan with them is verified and followed from this step (counted in
      ``SimResult.arrival_placements``). False (default): arrivals wait for the next replan.

    - ``preempt_order`` (issue 30): at a surge replan, stop preemptible running jobs by
      :func:`optimizer.preemption.surge_stops` in this order (``"loss"``: gpuplan's cheapest loss first;
      ``"priority"``: the baselines' lowest priority first); None: never stop. Only jobs marked preemptible can be
      stopped, so a scenario without them is unchanged. ``max_stops_per_24h``: stops per job in any 24 h (>= 0).

    Raises :class:`InputError` for ``replan_every_steps < 1``, an unknown ``preempt_order`` or a negative cap.
    """
    if replan_every_steps < 1:
        raise InputError(f"replan_every_steps = {replan_every_steps} must be >= 1")
    if preempt_order is not None and preempt_order not in preemption.ORDERS:
        raise InputError(f"preempt_order = {preempt_order!r} must be one of {', '.join(preemption.ORDERS)} or None")
    if max_stops_per_24h < 0:
        raise InputError(f"max_stops_per_24h = {max_stops_per_24h} must be >= 0")
    t_wall = time.perf_counter()
    st = _State(scenario)
    st.max_stops_per_24h = max_stops_per_24h
    if not run_upper:
        st.run_ratios = None
    res = _empty_result(scenario, st, name)
    margin = None
    if rt_margin_alpha is not None and not lookahead:  # the clairvoyant reference plans the true demand
        margin = ConformalMargin(rt_margin_alpha, scenario.cluster.horizon_steps, scenario.cluster.step_minutes)
    loop = _Loop(planner, verify or verify_plan, name, replan_every_steps, keep_plans, lookahead, st, res,
                 margin=margin, place_arrivals=place_arrivals, preempt_order=preempt_order)
    st.place_services(initial=True)
    for t in range(scenario.n_steps):
        failed_now = _observe(loop, t)
        problem = _forecast(loop, t)
        decision = _plan(loop, problem, t, failed_now)
        _verify(loop, decision, problem, t)
        _commit(loop, decision, problem, t)
        if surge_replan:
            _surge(loop, problem, t)
        _advance(loop, t)
        if progress is not None:
            progress(t + 1, scenario.n_steps)
    res.wall_s = time.perf_counter() - t_wall
    return res


@dataclass
class _Loop:
    """What one :func:`simulate` run carries from step to step (private)."""

    planner: PlannerFn
    verify: VerifyFn
    name: str
    replan_every_steps: int
    keep_plans: bool
    lookahead: bool
    st: _State
    res: SimResult
    prev_plan: Plan | None = None
    prev_at: int = 0
    margin: ConformalMargin | None = None
    place_arrivals: bool = False
    preempt_order: str | None = None


@dataclass(frozen=True)
class _Decision:
    """The plan chosen at one step: a fresh one (``replanned``) or the previous one followed.

    ``found``: verifier findings already known (the followed plan was verified when chosen).
    """

    plan: Plan
    replanned: bool
    reason: str
    found: tuple[str, ...] = ()


def _empty_result(sc: Scenario, st: _State, name: str) -> SimResult:
    """A :class:`SimResult` with zeroed per-step series of the window's length."""
    T = sc.n_steps
    kinds = sorted({j.kind for j in sc.jobs} | set(JOB_KINDS))
    types = sc.cluster.gpu_types if sc.cluster.typed else ()
    return SimResult(
        scenario=sc.name,
        planner=name,
        n_gpus=st.N - len(st.layout_down),
        n_steps=T,
        step_h=sc.step_h,
        jobs=st.records,
        batch_gpus={k: [0] * T for k in kinds},
        service_gpus={s.service: [0] * T for s in sc.services},
        service_demand={s.service: list(s.demand_true[:T]) for s in sc.services},
        down_gpus=[0] * T,
        type_gpus={ty: st.gpu_type.count(ty) for ty in types},
        type_batch_gpus={ty: [0] * T for ty in types},
        type_service_gpus={s.service: {ty: [0] * T for ty in types} for s in sc.services} if types else {},
    )


# -- 1. observe


def _observe(loop: _Loop, t: int) -> bool:
    """Apply what happens at step ``t`` on the truth; True when a node failed at ``t``.

    Completions come before failures (a job that ended is not killed), then failures and
    recoveries, arrivals, and operator-pinned starts.
    """
    st = loop.st
    _complete(st, t)
    failed_now = _fail_and_recover(loop, t)
    for j in st.arrivals.get(t, []):
        st.queue[j.job_id] = j
    for (pstep, jid), p in st.pins.items():
        if pstep == t:
            _start(st, st.jobs_by_id[jid], p.block_offset, t)
    return failed_now


def _complete(st: _State, t: int) -> None:
    """Finish every running job whose *true* end is at or before ``t``."""
    for jid in [j for j, r in st.running.items() if r.true_end <= t]:
        r = st.running.pop(jid)
        st.records[jid].end_step = r.true_end
        if st.run_ratios is not None and r.job.forecast_steps > 0:
            st.run_ratios.append((r.true_end - r.start) / r.job.forecast_steps)


def _fail_and_recover(loop: _Loop, t: int) -> bool:
    """Bring recovered nodes back and take failed ones down at ``t``; True when one failed.

    A batch job on a failed GPU is killed and requeued with its full duration (no checkpoint);
    real-time replicas on it are lost (the service's allocation drops by them).
    """
    st, sc = loop.st, loop.st.sc
    failed_now = False
    for f in sc.failures:
        gpus = tuple(range(f.node * st.gpn, (f.node + 1) * st.gpn))
        if f.until_step is not None and f.until_step == t:
            st.down -= set(gpus)
        if f.step == t:
            failed_now = True
            st.down |= set(gpus)
            killed, lost = _kill_jobs_on(st, gpus, t)
            lost_rep = _drop_replicas_on(st, gpus)
            loop.res.failures.append(FailureRecord(t, f.node, gpus, tuple(killed), lost, lost_rep))
    return failed_now


def _kill_jobs_on(st: _State, gpus: tuple[int, ...], t: int) -> tuple[list[str], int]:
    """Requeue every running job with a GPU in ``gpus``; returns (killed job ids, GPU-steps lost)."""
    killed, lost = [], 0
    for jid, r in list(st.running.items()):
        if set(range(r.offset, r.offset + r.job.gpus)) & set(gpus):
            lost += _requeue(st, jid, t)
            killed.append(jid)
    return killed, lost


def _requeue(st: _State, jid: str, t: int) -> int:
    """Take running job ``jid`` off its block at ``t`` and put it back in the queue; returns the GPU-steps lost.

    The job keeps its priority, arrival and GPUs; its remaining work is its duration minus the work
    checkpointed in this run (:func:`checkpoint_progress`; none without a checkpoint interval: the full
    duration again) plus its ``restart_steps``, which its next run spends first. GPU-steps lost: the steps since
    the last checkpoint (or the run's start) x GPUs. Shared by node failures and surge stops (issue 30).
    """
    r = st.running.pop(jid)
    rec = st.records[jid]
    since, saved = checkpoint_progress(r, t)
    rec.lost_gpu_steps += (since - restart_overlap(r, t, since)) * r.job.gpus
    rec.restarts += 1
    job = r.job
    done = r.overhead + saved  # steps of this run that will not be repeated... except the restart below
    if done or job.restart_steps:
        job = replace(job, true_steps=max(1, job.true_steps - done + job.restart_steps),
                      forecast_steps=max(1, job.forecast_steps - done + job.restart_steps))
    st.overhead[jid] = job.restart_steps if job is not r.job else 0
    st.queue[jid] = job
    return since * r.job.gpus


def restart_overlap(r: _Run, t: int, since: int) -> int:
    """Restart steps of run ``r`` elapsed at ``t`` and inside ``since``: lost already, to the stop or failure before.

    ``since``: the run's steps since its last checkpoint (:func:`checkpoint_progress`). A requeued run spends its first ``overhead`` steps restarting; until its first checkpoint they are part of
    its steps since the run's start, and a loss counted from ``since`` would count them a second time.
    """
    return min(t - r.start, r.overhead) if since == t - r.start else 0


def _stop(st: _State, jid: str, t: int) -> None:
    """Stop running job ``jid`` at ``t`` by a surge preemption: requeue it (:func:`_requeue`) and count the stop.

    The stop loses the work since the last checkpoint (the restart steps of this run already elapsed were
    counted by the stop before: :func:`restart_overlap`) plus the new restart, x GPUs.
    """
    r = st.running[jid]
    since, _ = checkpoint_progress(r, t)
    overlap = restart_overlap(r, t, since)
    _requeue(st, jid, t)
    rec = st.records[jid]
    rec.stop_steps.append(t)
    rec.preempted_gpu_steps += (since - overlap + r.job.restart_steps) * r.job.gpus


def _drop_replicas_on(st: _State, gpus: tuple[int, ...]) -> dict[str, int]:
    """Remove real-time replicas placed on ``gpus``; returns replicas lost per service."""
    lost_rep = {}
    for s in st.sc.services:
        on = [g for g in st.place.get(s.service, []) if g in gpus]
        if on:
            lost_rep[s.service] = len(on)
            st.alloc[s.service] -= len(on)
            st.place[s.service] = [g for g in st.place[s.service] if g not in gpus]
    return lost_rep


# -- 2. forecast


def _forecast(loop: _Loop, t: int) -> Problem:
    """The horizon problem at ``t`` from what the planner may know (:func:`_problem_at`)."""
    return _problem_at(loop.st, t, dict(loop.st.alloc), loop.lookahead, loop.margin)


# -- 3. plan


def _plan(loop: _Loop, problem: Problem, t: int, failed_now: bool) -> _Decision:
    """Follow the previous plan when it is not time to replan and it still verifies; else plan afresh.

    A stale previous plan (it no longer verifies) is counted in ``stale_plans`` and not committed.
    A fresh plan gets the previous plan, shifted and scored, as warm start (only when the
    previous plan was not just found stale).
    """
    res, reason = loop.res, ""
    cand_found: list[str] | None = None  # verifier result of the shifted previous plan, once
    if loop.prev_plan is not None and not failed_now and t % loop.replan_every_steps != 0:
        cand = shift_plan(loop.prev_plan, t - loop.prev_at, problem)
        cand_found = list(loop.verify(cand, problem))
        if not cand_found:
            return _with_arrivals(loop, cand, problem, t) if loop.place_arrivals else _Decision(cand, False, "")
        res.stale_plans += 1  # not committed: reality diverged from the previous plan, plan afresh
        reason = "previous plan no longer valid: " + cand_found[0]
    warm = None
    if loop.prev_plan is not None and cand_found is None:
        warm = _scored(shift_plan(loop.prev_plan, t - loop.prev_at, problem), problem, loop.verify)
    plan = loop.planner(problem, warm)
    return _Decision(plan, replanned=True, reason=reason or ("failure" if failed_now else "scheduled"))


def _with_arrivals(loop: _Loop, cand: Plan, problem: Problem, t: int) -> _Decision:
    """The followed plan ``cand`` with the arrivals placed by the fast mode, or ``cand`` itself.

    The jobs that arrived since the followed plan was made are placed (:func:`optimizer.fast.place_arrivals`);
    when one of them starts at once (step 0) and the plan verifies, it is the decision and the plan followed from
    ``t`` on (counted in ``arrival_placements``).
    """
    known = {a.job_id for a in loop.prev_plan.assignments} if loop.prev_plan is not None else set()
    new = {j.job_id for j in problem.jobs if j.job_id not in known}
    if not new:
        return _Decision(cand, replanned=False, reason="")
    got = place_arrivals(problem, cand, new)
    if not any(a.job_id in new and a.start_step == 0 for a in got.assignments) or loop.verify(got, problem):
        return _Decision(cand, replanned=False, reason="")
    loop.res.arrival_placements += 1
    loop.prev_plan, loop.prev_at = got, t  # followed from here: the arrivals keep their places until the next replan
    return _Decision(got, replanned=False, reason="arrivals placed by the fast mode")


# -- 4. verify


def _verify(loop: _Loop, d: _Decision, problem: Problem, t: int) -> None:
    """Verify the plan about to be committed (a followed plan was verified when chosen).

    Raises:
        SimulationError: the plan fails the verifier (nothing unverified is committed).
    """
    found = list(loop.verify(d.plan, problem)) if d.replanned else list(d.found)
    loop.res.verified_plans += 1
    if found:
        loop.res.violations += len(found)
        raise SimulationError(
            f"{loop.st.sc.name}/{loop.name} step {t}: plan from {d.plan.planner!r} fails the verifier: {found[:3]}"
        )
    if d.replanned:
        loop.prev_plan, loop.prev_at = d.plan, t


# -- 5. commit


def _commit(loop: _Loop, d: _Decision, problem: Problem, t: int) -> None:
    """Record the decision and commit step 0 of its plan: job starts and service GPUs."""
    st, res, plan = loop.st, loop.res, d.plan
    res.replans.append(
        ReplanRecord(
            step=t,
            replanned=d.replanned,
            status=SolveStatus(plan.status),
            solve_s=plan.solve_s if d.replanned else 0.0,
            gap=plan.gap if d.replanned else None,
            objective=plan.objective,
            n_queued=len(problem.jobs),
            n_running=len(problem.running),
            reason=d.reason,
            wall_clock_limited=bool(plan.wall_clock_limited) if d.replanned else False,
            source=plan.source,
        )
    )
    if loop.keep_plans:
        res.plans_at[t] = plan
        res.problems_at[t] = problem
    for a in plan.assignments:
        if a.running or a.start_step != 0:
            continue
        _start(st, st.queue[a.job_id], a.block_offset, t)
    for s in st.sc.services:
        st.alloc[s.service] = plan.service_gpus[s.service][0]
    st.place_services()
    _check_state(st, t)


# -- 5b. surge: actual demand above the allocation


SURGE_REASON = "demand above allocation"


def _surge(loop: _Loop, problem: Problem, t: int) -> None:
    """Replan at once inside step ``t`` when a service's actual demand exceeds its committed GPUs.

    The demand of step ``t`` is observed during the step (an operator's autoscaler sees it at once),
    so waiting for the next interval leaves it unmet for a whole step. The new problem is the one
    of step ``t`` seen after the commit: the jobs just started are running, the queue is what is
    left, each service keeps the swap cap from the GPUs it held before the step
    (``problem``'s ``current_gpus``), and its step-0 demand is the actual one (known now; no margin). With
    ``simulate(preempt_order=...)`` set, the preemptible running jobs :func:`optimizer.preemption.surge_stops`
    chooses are stopped first (issue 30: only when the actual step-0 demand exceeds what the free GPUs and the
    swap caps give), the planner plans without them and they are requeued (:func:`_stop`). The plan
    is verified and committed like any other (its step-0 starts and service GPUs) and becomes the
    plan followed from here; the record has reason :data:`SURGE_REASON`. Without free GPUs
    (batch jobs are never preempted) or room under the swap cap the shortfall stays.
    """
    st, res = loop.st, loop.res
    actual = {s.service: s.demand_true[t] for s in st.sc.services}
    held = {s.service: (sum(st.weight(s, g) for g in st.place.get(s.service, [])) if s.capacity_by_type
                        else st.alloc[s.service]) for s in st.sc.services}  # per-type capacity: what its GPUs serve
    if all(actual[s] <= held[s] for s in actual):
        return
    current = {s.service: s.current_gpus for s in problem.services}
    planned = {s.service: s.demand_gpus for s in problem.services}  # the step's planned level (with margin)
    again = _problem_at(st, t, current, loop.lookahead)
    # step 0 is the step being served: its demand is now known, so it is planned at the actual
    # demand, without the margin. Keeping the margin there (max(planned, actual)) let one service's
    # margin take, at equal unmet cost, the GPUs another service's actual demand needed.
    services = tuple(
        replace(s, demand_gpus=(min(s.max_gpus, actual[s.service]),) + tuple(planned[s.service][1:]))
        for s in again.services
    )
    again = replace(again, services=services)
    res.surge_replans += 1
    # issue 30: real-time demand the plan did not foresee, only stops of preemptible jobs can serve (the
    # production replan's path too: optimizer.planners.production_plan)
    plan = preemption.plan_stopping(again, lambda p: loop.planner(p, None), loop.preempt_order)
    stops = tuple(j for j, _ in plan.stops)
    decision = _Decision(plan, replanned=True, reason=SURGE_REASON)
    _verify(loop, decision, again, t)
    for jid in stops:
        _stop(st, jid, t)
    _commit(loop, decision, again, t)


# -- 6. advance


def _advance(loop: _Loop, t: int) -> None:
    """Record step ``t`` on the truth: GPUs running batch work by kind, service GPUs, GPUs down."""
    st, res = loop.st, loop.res
    for r in st.running.values():
        res.batch_gpus[r.job.kind][t] += r.job.gpus
        st.records[r.job.job_id].run_gpu_steps += r.job.gpus
        if t - r.start < r.overhead:  # a requeued run's restart produces nothing (issue 30): busy, not value
            st.records[r.job.job_id].lost_gpu_steps += r.job.gpus
        if st.gpu_type:
            res.type_batch_gpus[st.gpu_type[r.offset]][t] += r.job.gpus
    for s in st.sc.services:
        res.service_gpus[s.service][t] = st.alloc[s.service]
        if s.capacity_by_type:
            res.service_served.setdefault(s.service, [0.0] * res.n_steps)[t] = \
                sum(st.weight(s, g) for g in st.place.get(s.service, []))
        if st.gpu_type:
            for g in st.place.get(s.service, []):
                res.type_service_gpus[s.service][st.gpu_type[g]][t] += 1
        if loop.margin is not None:
            loop.margin.observe(t, s.service, s.demand_true[t])  # seen during step t: used from t + 1
    res.down_gpus[t] = len(st.down)


def _scored(plan: Plan, problem: Problem, verify: VerifyFn) -> Plan | None:
    """``plan`` with its DESIGN §5 objective filled in, or None when it fails the verifier (a warm start must be valid and scored for the MILP to rank it against its baselines)."""
    if verify(plan, problem):
        return None
    return replace(plan, objective=objective_value(plan, problem))


def _start(st: _State, job: SimJob, offset: int | None, t: int) -> None:
    if offset is None or job.job_id not in st.queue:
        raise SimulationError(f"step {t}: cannot start job {job.job_id!r} (not queued or no block)")
    del st.queue[job.job_id]
    st.running[job.job_id] = _Run(job, offset, t, t + job.true_steps, t + job.forecast_steps,
                                  st.overhead.pop(job.job_id, 0))
    rec = st.records[job.job_id]
    rec.start_step = t
    rec.block_offset = offset
    if rec.first_start_step is None:
        rec.first_start_step = t


def _check_state(st: _State, t: int) -> None:
    """Invariants of the committed step on the truth: no GPU holds two batch jobs, no batch job on a down GPU, batch + real-time GPUs within the healthy capacity."""
    owner: dict[int, str] = {}
    for r in st.running.values():
        for g in range(r.offset, r.offset + r.job.gpus):
            if g in owner:
                raise SimulationError(f"step {t}: GPU {g} holds {owner[g]!r} and {r.job.job_id!r}")
            if g in st.down or g in st.layout_down or g >= st.N:
                raise SimulationError(f"step {t}: job {r.job.job_id!r} on unavailable GPU {g}")
            owner[g] = r.job.job_id
    used = len(owner) + sum(st.alloc.values())
    healthy = st.N - len(st.down | st.layout_down)
    if used > healthy:
        raise SimulationError(f"step {t}: {used} GPUs in use; {healthy} healthy")


# ----------------------------------------------------------------------------- clairvoyant


def simulate_clairvoyant(
    scenario: Scenario,
    planner: PlannerFn,
    *,
    name: str = "clairvoyant",
    replan_every_steps: int = 1,
    verify: VerifyFn | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """The clairvoyant reference: the same rolling horizon, planned with the truth.

    Every replan sees true durations (also the true remaining time of running jobs), the true
    real-time demand, and every job that will arrive inside the horizon (with its arrival as
    release step). It is "rolling with true values", not one offline solve: an offline MILP over
    the whole 48 h window (96 steps x 64 GPUs) did not improve on a warm start within 60 s on this
    machine, which would have made the reference meaningless. Knowledge beyond the 24 h horizon is
    not used, so the reference is not a proven upper bound: a planner may exceed it.
    """
    return simulate(
        scenario.clairvoyant(),
        planner,
        name=name,
        replan_every_steps=replan_every_steps,
        verify=verify,
        lookahead=True,
        progress=progress,
    )
