"""The surge stop rule (issue 30, DESIGN §5.1): hand-solvable cases."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.preemption import lost_value, min_loss_cover, rt_shortfall, surge_stops
from optimizer.problem import Problem


def _p(demand0, running, current=2):
    return Problem.from_dict({
        "cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 2},
        "services": [{"service": "chat", "demand_gpus": [demand0, 2], "max_gpus": 8, "swap_cap_gpus": 4,
                      "current_gpus": current}],
        "running": running,
    })


def _r(jid, prio, gpus, off, pre=True, since=0, restart=0, ci=None):
    d = {"job_id": jid, "kind": "training", "priority": prio, "gpus": gpus, "block_offset": off,
         "remaining_steps": 4, "preemptible": pre, "steps_since_checkpoint": since, "restart_steps": restart}
    if ci is not None:
        d["checkpoint_interval_steps"] = ci
    return d


# 8 GPUs: P1 (prio 1, 2 GPUs, 3 steps since its checkpoint: loses 1 x 2 x 3 = 6), P2 (prio 2, 2 GPUs, at its
# checkpoint, restart 1: loses 2 x 2 x 1 = 4), N (prio 0.5, not preemptible); 2 GPUs free.
RUN = [_r("P1", 1, 2, 0, since=3, ci=4), _r("P2", 2, 2, 2, restart=1, ci=4), _r("N", 0.5, 2, 4, pre=False)]


def test_only_a_stop_serves_the_surge_the_cheapest_is_stopped():
    p = _p(4, RUN)  # wants min(4, 8, 2 + 4) = 4, 2 free: short by 2
    assert rt_shortfall(p) == 2
    assert [lost_value(r) for r in p.running] == [6, 4, 0]
    assert surge_stops(p, "loss") == ("P2",)  # least work lost; never N although N is cheapest by priority
    assert surge_stops(p, "priority") == ("P1",)  # the baselines' Slurm/Kueue order: lowest priority preemptible


def test_no_surge_nothing_stopped():
    p = _p(2, RUN)
    assert rt_shortfall(p) == 0 and surge_stops(p) == ()


def test_swap_cap_limits_what_a_stop_may_serve():
    p = _p(8, RUN, current=0)  # wants min(8, 8, 0 + 4) = 4 only
    assert rt_shortfall(p) == 2 and surge_stops(p) == ("P2",)


def test_job_at_its_checkpoint_loses_only_the_restart():
    p = _p(4, RUN)
    p2 = next(r for r in p.running if r.job_id == "P2")
    assert p2.lost_steps == 1  # 0 since the checkpoint + restart 1


def test_never_more_than_needed_largest_first_check():
    run = [_r("S", 1, 1, 0), _r("B", 1, 4, 4, since=1), _r("M", 1, 2, 2, pre=False)]
    p = _p(3, run)  # 1 free, wants 3: short by 2
    # cheapest first takes S (loss 0, frees 1), then B (loss 4, frees 4): S is then not needed
    assert surge_stops(p) == ("B",)


def test_disallowed_jobs_past_the_cap_are_not_stopped():
    """A job past its cap of stops comes to the rule as not preemptible (optimizer.simulate._preemption_fields)."""
    p2_capped = _r("P2", 2, 2, 2, pre=False, restart=1, ci=4)
    assert surge_stops(_p(4, [RUN[0], p2_capped, RUN[2]])) == ("P1",)
    assert surge_stops(_p(4, [_r("P1", 1, 2, 0, pre=False, since=3, ci=4), p2_capped, RUN[2]])) == ()


def test_one_larger_job_is_cheaper_than_two_small_ones_taken_cheapest_first():
    # 8 GPUs: A (2 GPUs, 1 step since its checkpoint: loses 2), B and C (1 GPU each, prio 0.5, 3 steps: lose 1.5
    # each), N (2 GPUs, not preemptible); the service wants 4, 2 are free: short by 2. Cheapest first would stop B
    # and C (3.0); the least total loss is A alone (2.0).
    run = [_r("A", 1, 2, 0, since=1), _r("B", 0.5, 1, 2, since=3), _r("C", 0.5, 1, 3, since=3),
           _r("N", 1, 2, 4, pre=False)]
    p = _p(4, run)
    assert rt_shortfall(p) == 2 and [lost_value(r) for r in p.running] == [2, 1.5, 1.5, 0]
    assert surge_stops(p, "loss") == ("A",)
    assert surge_stops(p, "priority") == ("B", "C")  # the baselines' order: lowest priority first


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 6)), min_size=0, max_size=7), st.integers(1, 12))
def test_min_loss_cover_is_the_cheapest_cover_by_enumeration(items, need):
    gpus = [g for g, _c in items]
    loss = [c / 2 for _g, c in items]
    got = min_loss_cover(gpus, loss, need)
    assert got == sorted(got)
    if sum(gpus) < need:
        assert got == list(range(len(items)))
        return
    best = min((sum(loss[i] for i in sub), sum(gpus[i] for i in sub))
               for k in range(len(items) + 1) for sub in itertools.combinations(range(len(items)), k)
               if sum(gpus[i] for i in sub) >= need)
    assert (sum(loss[i] for i in got), sum(gpus[i] for i in got)) == best
