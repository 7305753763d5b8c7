"""The result of planning: job starts on aligned blocks and real-time GPUs per step.

A :class:`Plan` is produced by every planner (``milp``, ``fifo``, ``easy``, ``priority``) and
checked by :func:`optimizer.verify.verify` before it is returned. :class:`~optimizer.solver.SolveStatus`
(the solver's status enum, carried unchanged from HiGHS's model status) says how its solve ended, :class:`PlanSource` where it came from (MILP, decomposition, repair, a baseline,
or a fallback to the best baseline). ``Plan.to_dict`` gives the
JSON document of ``gpuplan plan --json`` (DESIGN §7.1); ``Plan.from_dict`` reads it back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from optimizer.solver import SolveStatus


class PlanSource(StrEnum):
    """Where a plan came from (:attr:`Plan.source`), kept apart from :class:`SolveStatus`.

    ``MILP``: the full x[j, s, o, t] model; ``DECOMPOSITION``: the start/size master with its
    starts packed into aligned blocks (:mod:`optimizer.decomposition`); ``REPAIR``: the master's
    starts could not be packed and the best verified placement the master admits was kept
    (master-guided repair, a greedy plan, the warm start or a baseline); ``FIFO``, ``EASY``,
    ``PRIORITY``: that baseline; ``GREEDY``: a warm-start candidate of the MILP (demand-following
    or LP-guided greedy); ``LP_ROUNDING``: the master's LP relaxation rounded by greedy placement
    (:func:`optimizer.decomposition.lp_rounded_plans`), returned under the LP's bound. The MILP
    planner returns its best verified warm start under a proven bound (LP relaxation or master
    dual bound, DESIGN §5) when no solve found better; its source is then the warm start's own
    (``LP_ROUNDING``, ``GREEDY`` or a baseline's); ``FALLBACK``:
    the MILP failed and this is the best baseline plan (:attr:`Plan.status` is then the MILP's
    own outcome).
    """

    MILP = "milp"
    DECOMPOSITION = "decomposition"
    REPAIR = "repair"
    LP_ROUNDING = "lp_rounding"
    FIFO = "fifo"
    EASY = "easy"
    PRIORITY = "priority"
    GREEDY = "greedy"
    FALLBACK = "fallback"


STATUSES: tuple[str, ...] = tuple(s.value for s in SolveStatus)
"""Every value :attr:`Plan.status` can take."""

#: Status values of plan files and callers before :class:`PlanSource` existed, still accepted on
#: input: ``"heuristic"`` (a baseline or greedy plan: status ``feasible``, source from the planner
#: name) and ``"fallback"`` (status: the MILP's outcome ``solver_status``, source ``fallback``).
LEGACY_STATUSES: tuple[str, ...] = ("heuristic", "fallback")

#: Source of a plan whose planner name says it (legacy ``"heuristic"`` plans and plans built
#: without a source): the baselines by name, the MILP's greedy warm starts, the master-guided repair.
SOURCE_OF_PLANNER: dict[str, PlanSource] = {
    "fifo": PlanSource.FIFO,
    "easy": PlanSource.EASY,
    "priority": PlanSource.PRIORITY,
    "greedy": PlanSource.GREEDY,
    "lp_guided": PlanSource.LP_ROUNDING,
    "master_guided": PlanSource.REPAIR,
    "milp": PlanSource.MILP,
    "fast": PlanSource.GREEDY,
}


@dataclass(frozen=True)
class JobAssignment:
    """Where and when one batch job runs.

    ``start_step`` in [0, horizon); ``end_step`` exclusive (= start_step + duration_steps, may
    exceed the horizon); ``block_offset`` the first GPU of its aligned block of ``gpus`` GPUs.
    All four are None when the job is not started inside the horizon. ``running`` marks a job
    that was already running (start_step 0, end_step = its planned remaining steps).
    """

    job_id: str
    start_step: int | None
    end_step: int | None
    block_offset: int | None
    gpus: int | None
    running: bool = False

    @property
    def started(self) -> bool:
        """True when the job runs inside the horizon."""
        return self.start_step is not None

    def to_dict(self) -> dict[str, Any]:
        """``{job_id, start_step, end_step, block_offset, gpus}`` (+ ``running`` when true)."""
        d: dict[str, Any] = {
            "job_id": self.job_id,
            "start_step": self.start_step,
            "end_step": self.end_step,
            "block_offset": self.block_offset,
            "gpus": self.gpus,
        }
        if self.running:
            d["running"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JobAssignment:
        """Inverse of :meth:`to_dict` (missing fields are None, ``running`` False)."""
        return cls(
            job_id=str(d["job_id"]),
            start_step=d.get("start_step"),
            end_step=d.get("end_step"),
            block_offset=d.get("block_offset"),
            gpus=d.get("gpus"),
            running=bool(d.get("running", False)),
        )


@dataclass(frozen=True)
class Plan:
    """A plan over the horizon, from any planner.

    - ``assignments``: one per queued job (not started -> None fields) and one per running job.
    - ``service_gpus``: service -> GPUs allocated per step, shape (horizon_steps,).
    - ``objective``: the DESIGN §5 objective of this plan (see :mod:`optimizer.objective`).
    - ``bound``: MILP dual bound (None for heuristics); ``gap`` = |objective - bound| / |objective|
      as a fraction (None when unknown); ``solve_s`` wall seconds; ``model`` {rows, cols, binaries}
      for the MILP.
    - ``violations``: verifier findings (empty for every plan a planner returns).
    - ``status``: how the solve ended, a :class:`SolveStatus` (``feasible`` for a plan made
      without a solver; for a fallback plan, the MILP's own outcome).
    - ``source``: where the plan came from, a :class:`PlanSource` (``fallback`` when the MILP
      failed and this is the best baseline plan; :attr:`fallback` says the same). When not given
      it is taken from ``planner`` (:data:`SOURCE_OF_PLANNER`; None for an unknown name).
    - ``n_gpus``, ``horizon_steps``: the grid size, for :meth:`owner_grid`.
    - ``notes``: extra human-readable remarks (pruning, diagnosis, rejected jobs).
    - ``solver_status``: for the MILP planner, the solver outcome of
      :data:`optimizer.solver.OUTCOMES` (e.g. ``"no_solution"`` behind a fallback plan), a
      :class:`~optimizer.solver.SolveStatus` (a value it does not know becomes ``unknown``); None for baselines.
    - ``wall_clock_limited``: True when a solve behind this MILP plan stopped on its wall-clock
      time limit (the plan then depends on machine speed and may not reproduce).
    - ``stops`` (issue 30): ``(job_id, lost_steps)`` of the running jobs the plan stops at step 0 (a surge
      replan's preemption, :mod:`optimizer.preemption`); such a job's assignment has no start, block or
      size (``running`` True) and ``lost_steps`` is its work since the last checkpoint plus its restart.

    The legacy status values :data:`LEGACY_STATUSES` are accepted on construction (old plan
    files, callers not yet passing ``source``) and normalised: ``"heuristic"`` -> status
    ``feasible``, source from the planner name; ``"fallback"`` -> status ``solver_status`` (or
    ``unknown``), source ``fallback``.

    Raises:
        ValueError: a status that is neither a :class:`SolveStatus` nor a legacy value, or an
            unknown source.
    """

    planner: str
    status: SolveStatus | str
    assignments: tuple[JobAssignment, ...]
    service_gpus: dict[str, tuple[int, ...]]
    objective: float
    bound: float | None
    gap: float | None
    solve_s: float
    model: dict | None
    violations: tuple[str, ...] = ()
    message: str = ""
    n_gpus: int = 0
    horizon_steps: int = 0
    notes: tuple[str, ...] = field(default=())
    solver_status: SolveStatus | str | None = None
    wall_clock_limited: bool = False
    source: PlanSource | None = None
    stops: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        status, source = str(self.status), self.source
        if status == "heuristic":
            status = SolveStatus.FEASIBLE
        elif status == "fallback":
            status = self.solver_status if self.solver_status in STATUSES else SolveStatus.UNKNOWN
            source = PlanSource.FALLBACK
        if status not in STATUSES:
            raise ValueError(
                f"plan status {self.status!r} is not one of {', '.join(STATUSES)} "
                f"(or legacy {', '.join(LEGACY_STATUSES)})"
            )
        if source is None:
            source = SOURCE_OF_PLANNER.get(self.planner)
        object.__setattr__(self, "status", SolveStatus(status))
        if self.solver_status is not None:
            known = self.solver_status in STATUSES
            object.__setattr__(self, "solver_status", SolveStatus(self.solver_status) if known else SolveStatus.UNKNOWN)
        object.__setattr__(self, "source", None if source is None else PlanSource(source))
        object.__setattr__(self, "assignments", tuple(self.assignments))
        object.__setattr__(self, "violations", tuple(self.violations))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "stops", tuple((str(j), int(n)) for j, n in self.stops))
        object.__setattr__(
            self, "service_gpus", {k: tuple(int(x) for x in v) for k, v in self.service_gpus.items()}
        )

    @property
    def fallback(self) -> bool:
        """True when the MILP failed and this is the best baseline plan (source ``fallback``)."""
        return self.source == PlanSource.FALLBACK

    @property
    def proven_optimal(self) -> bool:
        """True only for a MILP plan solved to the requested gap (never for a fallback plan)."""
        return self.status == SolveStatus.OPTIMAL and not self.fallback

    def job(self, job_id: str) -> JobAssignment:
        """The assignment of one job (KeyError naming the job when absent)."""
        for a in self.assignments:
            if a.job_id == job_id:
                return a
        raise KeyError(f"job {job_id!r} is not in the plan")

    def owner_grid(self, n_gpus: int | None = None, horizon_steps: int | None = None) -> list[list[str]]:
        """Owner of each GPU at each step: shape (horizon_steps, n_gpus).

        The batch or running job id whose block covers the GPU at that step, ``""`` elsewhere.
        Real-time services are counted, not placed (the report layer assigns them to free GPUs).
        """
        N = self.n_gpus if n_gpus is None else n_gpus
        H = self.horizon_steps if horizon_steps is None else horizon_steps
        grid = [["" for _ in range(N)] for _ in range(H)]
        for a in self.assignments:
            if a.start_step is None or a.gpus is None or a.block_offset is None or a.end_step is None:
                continue
            for t in range(max(0, a.start_step), min(H, a.end_step)):
                row = grid[t]
                for g in range(a.block_offset, min(N, a.block_offset + a.gpus)):
                    row[g] = a.job_id
        return grid

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``gpuplan plan --json`` (DESIGN §7.1).

        Keys: status, objective, bound, gap, solve_s, model {rows, cols, binaries}, jobs
        [{job_id, start_step, end_step, block_offset, gpus}], services [{service, gpus}],
        violations; plus planner, source, fallback, message, notes, n_gpus, horizon_steps,
        solver_status, wall_clock_limited; ``stops`` [{job_id, lost_steps}] only when the plan stops a job.
        """
        out = {
            "planner": self.planner,
            "status": str(self.status),
            "source": None if self.source is None else str(self.source),
            "objective": _finite(self.objective),
            "bound": _finite(self.bound),
            "gap": _finite(self.gap),
            "solve_s": _finite(self.solve_s),
            "model": dict(self.model) if self.model is not None else None,
            "jobs": [a.to_dict() for a in self.assignments],
            "services": [{"service": k, "gpus": list(v)} for k, v in self.service_gpus.items()],
            "violations": list(self.violations),
            "fallback": self.fallback,
            "message": self.message,
            "notes": list(self.notes),
            "n_gpus": self.n_gpus,
            "horizon_steps": self.horizon_steps,
            "solver_status": self.solver_status,
            "wall_clock_limited": self.wall_clock_limited,
        }
        if self.stops:  # only when a job is stopped: plans without preemption keep their form
            out["stops"] = [{"job_id": j, "lost_steps": n} for j, n in self.stops]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        """Inverse of :meth:`to_dict`; also reads plan files written before ``source`` existed.

        An old file's ``status`` of ``"heuristic"`` or ``"fallback"`` is normalised as the class
        docstring says; ``"fallback": true`` without a source means source ``fallback``.
        """
        source = d.get("source")
        if source is None and d.get("fallback"):
            source = PlanSource.FALLBACK
        return cls(
            planner=str(d.get("planner", "")),
            status=str(d["status"]),
            assignments=tuple(JobAssignment.from_dict(x) for x in d.get("jobs", [])),
            service_gpus={x["service"]: tuple(x["gpus"]) for x in d.get("services", [])},
            objective=float(d["objective"]) if d.get("objective") is not None else float("nan"),
            bound=d.get("bound"),
            gap=d.get("gap"),
            solve_s=float(d.get("solve_s") or 0.0),
            model=d.get("model"),
            violations=tuple(d.get("violations", [])),
            message=str(d.get("message", "")),
            n_gpus=int(d.get("n_gpus", 0)),
            horizon_steps=int(d.get("horizon_steps", 0)),
            notes=tuple(d.get("notes", [])),
            solver_status=d.get("solver_status"),
            wall_clock_limited=bool(d.get("wall_clock_limited", False)),
            source=None if source is None else PlanSource(source),
            stops=tuple((x["job_id"], x["lost_steps"]) for x in d.get("stops", [])),
        )


def _finite(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x) + 0.0  # + 0.0 turns -0.0 into 0.0
    return x if math.isfinite(x) else None
