"""The bench's preemptible share (issue 30): a separate stream; 0 changes nothing."""

import pytest

from optimizer.preemption import bench_order, with_preemptible_share
from optimizer.scenarios import build


def test_share_zero_is_the_scenario_itself_and_draws_are_by_seed():
    sc = build("mixed", seed=3)
    assert with_preemptible_share(sc, 0.0, 3) is sc
    a, b = with_preemptible_share(sc, 0.3, 3), with_preemptible_share(sc, 0.3, 3)
    assert a == b
    marked = [j.job_id for j in a.jobs if j.preemptible]
    assert 0 < len(marked) < len(sc.jobs)
    assert all(j.checkpoint_interval_steps == 2 and j.restart_steps == 1 for j in a.jobs if j.preemptible)
    # the scenario's own draws are untouched: only the preemption fields differ
    strip = lambda s: [(j.job_id, j.gpus, j.true_steps, j.forecast_steps, j.priority, j.arrival_step) for j in s.jobs]  # noqa: E731
    assert strip(a) == strip(sc) and a.services == sc.services
    assert all(j.preemptible for j in with_preemptible_share(sc, 1.0, 3).jobs)
    with pytest.raises(ValueError, match="preemptible share"):
        with_preemptible_share(sc, 1.5, 3)


def test_baselines_use_the_priority_order():
    assert [bench_order(p) for p in ("fifo", "easy", "priority", "milp", "fast")] == [
        "priority", "priority", "priority", "loss", "loss"]
