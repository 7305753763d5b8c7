"""The verifier on stops (issue 30, DESIGN §5.2): only of a preemptible running job, only with real-time need."""

from dataclasses import replace

from optimizer import planners
from optimizer.preemption import surge_stops, with_stops, without_stopped
from optimizer.verify import verify
from tests.optimizer.test_preemption_rule import RUN, _p


def _stopped_plan(p, stops, planner="priority"):
    plan = planners.plan(without_stopped(p, stops), planner)
    return with_stops(plan, p, stops)


def test_the_rule_s_stop_verifies_and_real_time_gets_the_gpus():
    p = _p(4, RUN)
    stops = surge_stops(p)
    plan = _stopped_plan(p, stops, "fast")
    assert verify(plan, p) == []
    assert plan.stops == (("P2", 1),) and plan.service_gpus["chat"][0] == 4


def test_rejects_stop_of_a_non_preemptible_job():
    p = _p(4, RUN)
    v = verify(_stopped_plan(p, ("N",)), p)
    assert any("stop of job 'N': not preemptible" in x for x in v)


def test_rejects_stop_with_no_real_time_need():
    p = _p(2, RUN)
    v = verify(_stopped_plan(p, ("P2",)), p)
    assert any("stop of job 'P2': no real-time need at step 0" in x for x in v)


def test_rejects_a_stop_not_needed_and_wrong_lost_work():
    p = _p(4, RUN)
    v = verify(_stopped_plan(p, ("P1", "P2")), p)
    assert any("not needed" in x for x in v)
    plan = _stopped_plan(p, ("P2",))
    v = verify(replace(plan, stops=(("P2", 0),)), p)
    assert any("lost_steps = 0, the rule gives 1" in x for x in v)


def test_plan_without_stops_keeps_its_json_form_and_stops_round_trip():
    from optimizer.plan import Plan

    p = _p(4, RUN)
    assert "stops" not in planners.plan(p, "priority").to_dict()
    plan = _stopped_plan(p, ("P2",))
    assert Plan.from_dict(plan.to_dict()).stops == (("P2", 1),)
