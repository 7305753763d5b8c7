"""Who holds which GPUs when in a plan: one grid of owners, shared by the what-if explanations and the report.

:class:`Occupancy` is the plan's blocks on a (horizon_steps, n_gpus) grid of indices into its job ids
(queued and running jobs, in assignment order; a later assignment over the same cell wins), with
:data:`FREE` and :data:`DOWN` cells; :meth:`Occupancy.holders` answers "who holds this block during these
steps" (:func:`optimizer.whatif.explain`'s reasons, ``pipelines.report.waits``' wait reasons).
Real-time services are counted, not placed, so they hold no cell.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from optimizer.plan import Plan

#: A cell no job holds.
FREE = -1
#: A cell of a GPU that is down (unless a job's block covers it).
DOWN = -2


@dataclass(frozen=True)
class Occupancy:
    """The plan's blocks as an owner grid.

    ``owner``: (horizon_steps, n_gpus) int, the index into ``ids`` of the job whose block covers the GPU at
    that step, :data:`FREE` or :data:`DOWN` elsewhere; ``ids``: the job ids of the plan's started
    assignments (queued and running), in assignment order.
    """

    owner: np.ndarray
    ids: tuple[str, ...]

    @classmethod
    def of(cls, plan: Plan, n_gpus: int, horizon_steps: int, down_gpus: Iterable[int] = ()) -> Occupancy:
        """The owner grid of ``plan`` over ``horizon_steps`` steps and ``n_gpus`` GPUs (blocks clipped to both).

        ``down_gpus``: GPU indices marked :data:`DOWN` where no block covers them. Assignments without a
        start, size, block or end are left out.
        """
        owner = np.full((horizon_steps, n_gpus), FREE, dtype=np.int64)
        down = list(down_gpus)
        if down:
            owner[:, down] = DOWN
        ids: list[str] = []
        for a in plan.assignments:
            if a.start_step is None or a.gpus is None or a.block_offset is None or a.end_step is None:
                continue
            owner[max(0, a.start_step):min(horizon_steps, a.end_step), a.block_offset:a.block_offset + a.gpus] = len(ids)
            ids.append(a.job_id)
        return cls(owner, tuple(ids))

    def holders(self, steps: range, offset: int, gpus: int, exclude: str = "") -> dict[str, int]:
        """The jobs holding GPUs of block ``[offset, offset + gpus)`` during ``steps`` (clipped to the horizon).

        Returns job id -> cells held (GPU-steps), in the order first seen (by step, then GPU), without
        ``exclude`` (the job asking). ``steps`` must have step 1.
        """
        t0, t1 = max(0, steps.start), min(self.owner.shape[0], steps.stop)
        if t1 <= t0:
            return {}
        cells = self.owner[t0:t1, offset:offset + gpus].ravel()
        counts: dict[str, int] = {}
        for k in cells[cells >= 0].tolist():
            jid = self.ids[k]
            if jid != exclude:
                counts[jid] = counts.get(jid, 0) + 1
        return counts
