"""A plan that cannot be made stops cleanly (issue 30 operator trial): one error line, what to do, no traceback.

Without a preemptible job, a step-0 real-time need the cluster cannot serve made ``gpuplan run --workspace W`` exit 2
after ~100 lines of tracebacks: the solve task's and the flow's, and ``log-profiles`` (still drawing in the thread
pool) crashing when the flow left, before the one-line infeasible error.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from optimizer.diagnose import InfeasibleProblemError
from optimizer.problem import Problem
from pipelines.flows.observe import BadInputTraceFilter
from pipelines.stages.solve import solve

ROOT = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent

HINT_TAIL = ("mark checkpointing jobs preemptible ([preemption] qos or partitions in gpuplan.toml, or "
             "gpuplan.preemptible=true on the job) so the plan may stop them, lower a service's min_gpus, or add GPUs")


def _short_doc() -> dict:
    """8 GPUs; R (4 GPUs, not preemptible) runs; chat's min_gpus 6: 10 GPUs needed at step 0, 8 up."""
    return {"cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 4},
            "services": [{"service": "chat", "demand_gpus": [6, 6, 6, 6], "min_gpus": 6, "max_gpus": 8,
                          "swap_cap_gpus": 8, "current_gpus": 6}],
            "jobs": [],
            "running": [{"job_id": "R", "kind": "training", "priority": 1, "gpus": 4, "block_offset": 0,
                         "remaining_steps": 4}]}


def test_an_infeasible_solve_says_what_the_operator_can_do_with_the_numbers():
    with pytest.raises(InfeasibleProblemError) as err:
        solve(Problem.from_dict(_short_doc()), "priority")
    c = err.value.conflict
    assert (c.step, c.need, c.up, c.realtime, c.running, c.shortfall, c.preemptible_running) == (0, 10, 8, 6, 4, 2, 0)
    assert err.value.hint == ("what you can do: at step 0 the services need at least 6 GPUs (chat 6 (min_gpus 6)) and "
                              "running jobs hold 4 (none preemptible): 10 GPUs needed, 8 up, 2 short; " + HINT_TAIL)


def test_a_bad_input_record_of_prefect_s_run_loggers_keeps_its_line_and_loses_its_traceback():
    def record(exc: BaseException) -> logging.LogRecord:
        try:
            raise exc
        except BaseException:
            return logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, "Task run failed: %r", (exc,),
                                     sys.exc_info())

    bad, internal = record(InfeasibleProblemError("infeasible: x")), record(RuntimeError("bug"))
    f = BadInputTraceFilter()
    assert f.filter(bad) and f.filter(internal)
    assert bad.exc_info is None and bad.getMessage() == "Task run failed: InfeasibleProblemError('infeasible: x')"
    assert internal.exc_info is not None and internal.exc_info[0] is RuntimeError


@pytest.mark.heavy
def test_gpuplan_run_of_a_step_0_need_the_cluster_cannot_serve_exits_2_in_two_lines(tmp_path, copy_slurm_fixture):
    """The openb Slurm workspace (64 GPUs, 7 held by running jobs, none preemptible) with m-mid's min_gpus 60:
    61 real-time GPUs + 7 running = 68 > 64 at step 0."""
    services = json.loads((ROOT / "data" / "traffic" / "services.json").read_text())
    for s in services["services"]:
        s["file"] = str(ROOT / "data" / "traffic" / s["file"])
    services["services"][1] |= {"min_gpus": 60, "max_gpus": 64}
    (tmp_path / "services.json").write_text(json.dumps(services))
    ws = copy_slurm_fixture(tmp_path / "ws")
    toml = (ws / "gpuplan.toml").read_text()
    (ws / "gpuplan.toml").write_text(toml.replace(str(ROOT / "data" / "traffic" / "services.json"),
                                                  str(tmp_path / "services.json")))
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "keep.txt").write_text("previous outputs")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DO_NOT_TRACK": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
           "GPUPLAN_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "GPUPLAN_MODELS_DIR": str(tmp_path / "m")}
    res = subprocess.run([str(VENV_BIN / "gpuplan"), "run", "--workspace", str(ws), "--out", str(runs)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "Crash detected" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines()[-2:] == [
        "error: infeasible: real-time minimums plus running jobs exceed the cluster at step 0: 68 > 64 (real-time 61, "
        "running 7, capacity 64, shortfall 4; smallest allocation per service given band, swap cap and current_gpus: "
        "m-small 1, m-mid 60)",
        "what you can do: at step 0 the services need at least 61 GPUs (m-small 1 (min_gpus 1), m-mid 60 (min_gpus "
        "60)) and running jobs hold 7 (none preemptible): 68 GPUs needed, 64 up, 4 short; " + HINT_TAIL]
    assert sorted(p.name for p in runs.iterdir()) == ["keep.txt"]  # nothing published, nothing lost


def test_settle_waits_for_every_background_future_and_raises_none_of_their_failures(monkeypatch):
    """The futures a failed plan leaves (log-profiles, train-or-load) are waited for, so Prefect's task runner does not
    cancel them mid-run; a failed one is a warning line, not a second exception."""
    from types import SimpleNamespace

    from pipelines.flows import plan as plan_flow

    warned: list[str] = []
    monkeypatch.setattr(plan_flow, "log", lambda: SimpleNamespace(warning=lambda fmt, *a: warned.append(fmt % a)))

    class Future:
        def __init__(self, failed: bool):
            self.waited, self.task_run_id = False, "t-failed" if failed else "t-ok"
            self.state = SimpleNamespace(is_failed=lambda: failed, is_crashed=lambda: False, message="boom")

        def wait(self):
            self.waited = True

    fs = [Future(False), Future(True)]
    plan_flow.settle(fs)
    assert [f.waited for f in fs] == [True, True]
    assert warned == ["background task t-failed did not finish: boom"]
