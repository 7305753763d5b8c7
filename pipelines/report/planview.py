"""The plan as arrays for the report's wait reasons and risks (:class:`PlanView`, built once per report).

Who holds which GPUs when is :class:`optimizer.occupancy.Occupancy` (shared with the what-if explanations);
the view adds per-job starts, ends, sizes and blocks, the GPUs per step in batch work, real-time and idle,
the services' need and the GPUs fixed by running jobs or down.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optimizer.capacity import service_need
from optimizer.occupancy import Occupancy
from pipelines.report.basics import ReportInputs, up_gpus


@dataclass(frozen=True)
class PlanView:
    """The plan as arrays for the wait reasons (built once per report by :func:`plan_view`).

    Attributes:
        H, N, n_up: steps, GPUs, GPUs up; ``gpn``: GPUs per node.
        occupancy: who holds which GPUs when (:class:`optimizer.occupancy.Occupancy`; :attr:`owner` its (H, N)
            grid of indices into :attr:`ids`, -1 free, -2 down); ``start``/``end``/``gpus``/``offset``: per id
            (``offset``: the first GPU of its block).
        running: ids of running jobs.
        batch / rt / idle: GPUs per step in batch work, real-time, neither (H,).
        need: (services, H) real-time need (:func:`optimizer.capacity.service_need`); ``demand_floor``:
            (services, H) P90 demand within each band (no swap cap).
        fixed: (H, N) bool, GPUs held by running jobs or down.
        running_gpus: (H,) GPUs of running jobs.
    """

    H: int
    N: int
    n_up: int
    gpn: int
    occupancy: Occupancy
    start: dict[str, int]
    end: dict[str, int]
    gpus: dict[str, int]
    offset: dict[str, int]
    running: frozenset[str]
    batch: np.ndarray
    rt: np.ndarray
    idle: np.ndarray
    need: np.ndarray
    demand_floor: np.ndarray
    fixed: np.ndarray
    running_gpus: np.ndarray

    @property
    def owner(self) -> np.ndarray:
        """(H, N) int: the index into :attr:`ids` of the job holding each GPU, -1 free, -2 down."""
        return self.occupancy.owner

    @property
    def ids(self) -> tuple[str, ...]:
        """Job ids (queued and running) in assignment order."""
        return self.occupancy.ids


def plan_view(inp: ReportInputs) -> PlanView:
    """The arrays of :class:`PlanView` for ``inp``'s problem and plan."""
    problem, plan = inp.problem, inp.plan
    H, N = problem.horizon_steps, problem.n_gpus
    occ = Occupancy.of(plan, N, H, getattr(problem, "down_gpus", ()) or ())
    owner, ids = occ.owner, occ.ids
    start, end, gpus, offset, running = {}, {}, {}, {}, set()
    for a in plan.assignments:
        if a.start_step is None or a.gpus is None or a.block_offset is None or a.end_step is None:
            continue
        start[a.job_id], end[a.job_id], gpus[a.job_id] = int(a.start_step), int(a.end_step), int(a.gpus)
        offset[a.job_id] = int(a.block_offset)
        if a.running:
            running.add(a.job_id)
    batch = (owner >= 0).sum(axis=1)
    rt = np.zeros(H, dtype=np.int64)
    for v in plan.service_gpus.values():
        rt += np.asarray(v[:H], dtype=np.int64)
    n_up = up_gpus(problem)
    run_idx = [i for i, j in enumerate(ids) if j in running]
    fixed = np.isin(owner, run_idx) | (owner == -2)
    running_gpus = np.isin(owner, run_idx).sum(axis=1)
    need = service_need(problem) if problem.services else np.zeros((0, H), dtype=np.int64)
    floor = np.array([np.clip(np.asarray(s.demand_gpus[:H], dtype=np.int64), s.min_gpus, s.max_gpus)
                      for s in problem.services], dtype=np.int64).reshape(len(problem.services), H)
    return PlanView(H=H, N=N, n_up=n_up, gpn=int(problem.cluster.gpus_per_node), occupancy=occ,
                    start=start, end=end, gpus=gpus, offset=offset, running=frozenset(running), batch=batch, rt=rt,
                    idle=n_up - batch - rt, need=need, demand_floor=floor, fixed=fixed, running_gpus=running_gpus)
