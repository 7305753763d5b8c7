"""Problem file: the preemption fields of queued and running jobs (issue 30, DESIGN §3.1)."""

import pytest

from optimizer.errors import InputError
from optimizer.problem import Problem


def _doc(job=None, running=None):
    return {
        "cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 4},
        "services": [{"service": "chat", "demand_gpus": [2, 2, 2, 2], "max_gpus": 8, "swap_cap_gpus": 4,
                      "current_gpus": 2}],
        "jobs": [{"job_id": "A", "kind": "training", "priority": 1, "gpus": 2, "duration_steps": 3, **(job or {})}],
        "running": [{"job_id": "R", "kind": "training", "priority": 2, "gpus": 4, "block_offset": 0,
                     "remaining_steps": 2, **(running or {})}],
    }


def test_old_form_reads_unchanged_all_false():
    p = Problem.from_dict(_doc())
    assert (p.jobs[0].preemptible, p.jobs[0].checkpoint_interval_steps, p.jobs[0].restart_steps) == (False, None, 0)
    r = p.running[0]
    assert (r.preemptible, r.checkpoint_interval_steps, r.restart_steps, r.steps_since_checkpoint) == (False, None, 0, 0)
    d = p.to_dict()
    assert "preemptible" not in d["jobs"][0] and "preemptible" not in d["running"][0]


def test_fields_read_and_round_trip():
    p = Problem.from_dict(_doc({"preemptible": True, "checkpoint_interval_steps": 4, "restart_steps": 1},
                               {"preemptible": True, "checkpoint_interval_steps": 3, "restart_steps": 2,
                                "steps_since_checkpoint": 1}))
    assert p.jobs[0].preemptible and p.jobs[0].checkpoint_interval_steps == 4 and p.jobs[0].restart_steps == 1
    r = p.running[0]
    assert r.lost_steps == 3  # 1 since the checkpoint + 2 restart
    assert Problem.from_dict(p.to_dict()) == p


def test_steps_run_gives_steps_since_checkpoint():
    p = Problem.from_dict(_doc(running={"preemptible": True, "checkpoint_interval_steps": 3, "steps_run": 7}))
    assert p.running[0].steps_since_checkpoint == 1  # checkpoints at 3 and 6
    p = Problem.from_dict(_doc(running={"preemptible": True, "steps_run": 7}))
    assert p.running[0].steps_since_checkpoint == 7  # no checkpoint: everything since the start


@pytest.mark.parametrize(
    ("job", "running", "msg"),
    [
        ({"preemptible": "yes"}, None, "job 'A': preemptible"),
        ({"checkpoint_interval_steps": 0}, None, "job 'A': checkpoint_interval_steps"),
        ({"restart_steps": -1}, None, "job 'A': restart_steps"),
        (None, {"checkpoint_interval_steps": 2.5}, "running job 'R': checkpoint_interval_steps"),
        (None, {"steps_since_checkpoint": -1}, "running job 'R': steps_since_checkpoint"),
        (None, {"steps_run": 2, "steps_since_checkpoint": 1}, "running job 'R'"),
        (None, {"preemptible": 1}, "running job 'R': preemptible"),
    ],
)
def test_bad_value_is_one_input_error_naming_job_and_field(job, running, msg):
    with pytest.raises(InputError, match=msg.replace("(", r"\(")):
        Problem.from_dict(_doc(job, running))


@pytest.mark.parametrize(
    ("running", "msg"),
    [
        ({"checkpoint_interval_steps": 3, "steps_since_checkpoint": 4},
         "running job 'R': steps_since_checkpoint = 4 must be below checkpoint_interval_steps + restart_steps = 3 + 0"),
        ({"checkpoint_interval_steps": 3, "steps_since_checkpoint": 3},
         "running job 'R': steps_since_checkpoint = 3 must be below checkpoint_interval_steps + restart_steps = 3 + 0"),
        ({"preemptible": True, "checkpoint_interval_steps": 2, "restart_steps": 1, "steps_since_checkpoint": 3},
         "running job 'R': steps_since_checkpoint = 3 must be below checkpoint_interval_steps + restart_steps = 2 + 1"),
    ],
)
def test_steps_since_checkpoint_past_the_interval_is_refused(running, msg):
    with pytest.raises(InputError, match=msg.replace("(", r"\(").replace("+", r"\+")) as e:
        Problem.from_dict(_doc(running=running))
    assert "\n" not in str(e.value)


def test_steps_since_checkpoint_may_reach_the_interval_after_a_restart():
    # a requeued run: 1 restart step, then 2 steps of work before its first checkpoint (checkpoint_progress)
    r = Problem.from_dict(_doc(running={"preemptible": True, "checkpoint_interval_steps": 2, "restart_steps": 1,
                                        "steps_since_checkpoint": 2})).running[0]
    assert r.lost_steps == 3
    # without an interval every step since the start counts: no bound
    assert Problem.from_dict(_doc(running={"steps_since_checkpoint": 50})).running[0].steps_since_checkpoint == 50
