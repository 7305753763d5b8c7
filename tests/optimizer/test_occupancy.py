"""Who holds which GPUs when (optimizer.occupancy.Occupancy), on a hand-made 8-GPU, 6-step plan."""

from __future__ import annotations

from optimizer.occupancy import DOWN, FREE, Occupancy
from optimizer.plan import JobAssignment, Plan


def _plan() -> Plan:
    return Plan("fifo", "feasible", (
        JobAssignment("R", 0, 2, 0, 4, running=True),  # GPUs 0-3, steps 0-1
        JobAssignment("A", 2, 5, 0, 4),  # GPUs 0-3, steps 2-4
        JobAssignment("B", 1, 9, 4, 2),  # GPUs 4-5, steps 1-5 (clipped to the horizon)
        JobAssignment("Q", None, None, None, None),  # not started: no cell
    ), {}, 0.0, None, None, 0.0, None, n_gpus=8, horizon_steps=6)


def test_the_owner_grid_by_hand():
    occ = Occupancy.of(_plan(), 8, 6, down_gpus=(7,))
    assert occ.ids == ("R", "A", "B") and occ.owner.shape == (6, 8)
    assert occ.owner[0].tolist() == [0, 0, 0, 0, FREE, FREE, FREE, DOWN]
    assert occ.owner[1].tolist() == [0, 0, 0, 0, 2, 2, FREE, DOWN]
    assert occ.owner[5].tolist() == [FREE] * 4 + [2, 2, FREE, DOWN]


def test_holders_count_cells_in_the_order_first_seen_without_the_asking_job():
    occ = Occupancy.of(_plan(), 8, 6, down_gpus=(7,))
    # block [2, 6) over steps 1-2: R (GPUs 2-3 at step 1), B (4-5 at 1 and 2), then A (2-3 at step 2)
    assert occ.holders(range(1, 3), 2, 4) == {"R": 2, "B": 4, "A": 2}
    assert occ.holders(range(1, 3), 2, 4, exclude="B") == {"R": 2, "A": 2}
    assert occ.holders(range(4, 100), 6, 2) == {}  # free and down cells hold nothing; steps clipped
    assert occ.holders(range(3, 3), 0, 8) == {}
