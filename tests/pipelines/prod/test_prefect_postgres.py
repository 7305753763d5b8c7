"""Prefect's server on PostgreSQL serving the replan to two ``gpuplan serve`` workers (issue 32).

One ``prefect server start`` with ``PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://...`` (its own
database on the lab server), MLflow on PostgreSQL too, two ``gpuplan serve`` processes (two containers) on one
runs folder. Two deployment runs of ``plan/replan`` for the same slot: both complete, exactly one run folder is
published for the slot, ``latest`` points at it, one MLflow plan run, and the other run logs
``replan of slot S skipped: ...`` (mechanism: the runs folder's slot claim,
:func:`pipelines.io.run_folder.claim_slot`). Waits are on events read from the server (healthy, deployment
registered, flow run final), with a deadline as a safety stop only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _post(url: str, body: dict) -> object:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _until(what: str, probe, deadline_s: float, procs: list[subprocess.Popen], logs: list[Path]):
    """Poll ``probe()`` (an event read from the server) until it returns a value; a safety deadline only."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for p, log in zip(procs, logs):
            if p.poll() is not None:
                raise AssertionError(f"{what}: a process exited {p.returncode}: {log.read_text()[-3000:]}")
        try:
            got = probe()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what}: not seen within {deadline_s} s: " + " | ".join(
        log.read_text()[-1500:] for log in logs))


@pytest.fixture()
def prefect_on_postgres(postgres, pg_database, tmp_path, stop_group):
    """A ``prefect server start`` on its own PostgreSQL database; yields ``{"url", "env"}``; stopped by its PID."""
    db = pg_database("prefect")
    port = int(os.environ.get("GPUPLAN_PREFECT_PORT") or _free_port())
    url = f"http://127.0.0.1:{port}/api"
    home = tmp_path / "prefect_home"
    home.mkdir()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
           "PREFECT_API_DATABASE_CONNECTION_URL": f"postgresql+asyncpg://gpuplan@127.0.0.1:{postgres['port']}/{db}",
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    for var in ("PREFECT_SERVER_DATABASE_CONNECTION_URL", "GPUPLAN_PREFECT_DB_DEFAULTED", "PREFECT_API_URL"):
        env.pop(var, None)
    log_path = tmp_path / "prefect-server.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([str(VENV_BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port),
                             "--no-ui"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _until("prefect server healthy", lambda: _get(url + "/health") is True, 180, [proc], [log_path])
        yield {"url": url, "home": str(home), "db": db}
    finally:
        stop_group(proc, signal.SIGTERM)
        log.close()


def test_two_serve_workers_on_prefect_over_postgres_plan_a_slot_once(prefect_on_postgres, pg_mlflow, make_problem,
                                                                     stop_group, tmp_path):
    url = prefect_on_postgres["url"]
    env = {**os.environ, **pg_mlflow, "PREFECT_API_URL": url, "GPUPLAN_SERVE_SCHEDULES": "0",
           "PREFECT_HOME": prefect_on_postgres["home"]}
    for var in ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL",
                "GPUPLAN_PREFECT_DB_DEFAULTED", "MLFLOW_TRACKING_URI"):
        env.pop(var, None)
    procs, logs, files = [], [], []
    t0 = time.monotonic()
    try:
        for i in (1, 2):
            path = tmp_path / f"serve-{i}.log"
            f = open(path, "w")
            files.append(f)
            logs.append(path)
            procs.append(subprocess.Popen([str(VENV_BIN / "gpuplan"), "serve"], cwd=tmp_path, env=env, stdout=f,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        dep = _until("deployment plan/replan registered",
                     lambda: _post(url + "/deployments/filter", {"deployments": {"name": {"any_": ["replan"]}}}),
                     240, procs, logs)
        assert len(dep) == 1  # both workers serve the one deployment
        for path in logs:  # both workers are serving (their start line), before any run is created
            _until(f"{path.name} serving", lambda p=path: "serving nightly-retrain" in p.read_text(), 240, procs, logs)
        out_dir = tmp_path / "shared-runs"
        problem = make_problem(8)
        params = {"problem_path": str(problem), "out_dir": str(out_dir), "scheduled_at": "2025-09-01T10:00:00+00:00"}
        runs = [_post(url + f"/deployments/{dep[0]['id']}/create_flow_run", {"parameters": params})["id"]
                for _ in range(2)]

        def finals():
            states = [_get(url + f"/flow_runs/{r}")["state"] for r in runs]
            return states if all(s and s["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") for s in states) \
                else None

        states = _until("both flow runs final", finals, 300, procs, logs)
        assert [s["type"] for s in states] == ["COMPLETED", "COMPLETED"], [s["message"] for s in states]
        wall_s = time.monotonic() - t0

        def shipped():  # a flow run's logs reach the server in batches, after its final state: wait for them
            got = [r["message"] for r in _post(url + "/logs/filter", {"logs": {"flow_run_id": {"any_": runs}},
                                                                     "limit": 200})]
            done = any(m.startswith("published run folder ") for m in got) and any(
                m.startswith("replan of slot 20250901T1000Z skipped: ") for m in got)
            return got if done else None

        msgs = _until("both runs' log lines on the server", shipped, 120, procs, logs)
    finally:
        for p in procs:
            stop_group(p, signal.SIGINT)
        for f in files:
            f.close()
    published = sorted(p.name for p in out_dir.iterdir() if re.match(r"^\d{8}T\d{4}Z_", p.name))
    assert len(published) == 1 and published[0].startswith("20250901T1000Z_")
    assert (out_dir / "latest").resolve().name == published[0]
    skipped = [m for m in msgs if m.startswith("replan of slot 20250901T1000Z skipped: ")]
    assert len(skipped) == 1 and (skipped[0].endswith("running in another process") or
                                  skipped[0].endswith(f"already published as {published[0]}")), skipped
    assert sum(m.startswith("published run folder ") for m in msgs) == 1
    from pipelines.config.settings import load_settings
    from pipelines.tracking import runs as tracking_runs

    plans = [r for r in tracking_runs.finished_runs(load_settings(), "plans")
             if r.data.params.get("run_dir", "").startswith(str(out_dir))]
    assert len(plans) == 1  # one MLflow plan run of this folder, on PostgreSQL
    print(f"two workers + two runs on Prefect/PostgreSQL: {wall_s:.1f} s")


def _serve_workers(n: int, env: dict, tmp_path: Path, url: str, procs: list, logs: list, files: list) -> dict:
    """Start ``n`` ``gpuplan serve`` processes (own sessions); returns the ``plan/replan`` deployment once all serve."""
    for i in range(1, n + 1):
        path = tmp_path / f"serve-{i}.log"
        f = open(path, "w")
        files.append(f)
        logs.append(path)
        procs.append(subprocess.Popen([str(VENV_BIN / "gpuplan"), "serve"], cwd=tmp_path, env=env, stdout=f,
                                      stderr=subprocess.STDOUT, start_new_session=True))
    dep = _until("deployment plan/replan registered",
                 lambda: _post(url + "/deployments/filter", {"deployments": {"name": {"any_": ["replan"]}}}),
                 240, procs, logs)
    for path in logs:
        _until(f"{path.name} serving", lambda p=path: "serving nightly-retrain" in p.read_text(), 240, procs, logs)
    return dep[0]


def _flock_holders(path: Path) -> list[int]:
    """PIDs holding an ``flock`` on ``path`` (``/proc/locks``: ``FLOCK ADVISORY WRITE <pid> <maj:min:inode>``)."""
    ino = path.stat().st_ino
    out = []
    for line in Path("/proc/locks").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].split(":")[-1] == str(ino):
            out.append(int(parts[4]))
    return out


def test_a_served_worker_killed_9_mid_replan_keeps_latest_and_the_registry_and_the_next_slot_plans(
        prefect_on_postgres, pg_mlflow, make_problem, stop_group, tmp_path):
    # issue 32: two `gpuplan serve` workers (two containers); the one running slot 10:30's replan is killed with
    # SIGKILL while it holds the slot claim and its temporary run folder exists. The stage is an event, not a
    # time: the replan's problem file is a FIFO, so the flow run blocks reading it right after it claimed the slot,
    # began the run folder and logged "replan ... building in <tmp>"; the test waits for the claim's flock holder
    # in /proc/locks and the temporary folder, then kills that worker's whole session (the container dies).
    import fcntl

    from pipelines.config.settings import load_settings
    from pipelines.io.run_folder import LATEST, SLOT_CLAIM_PREFIX, list_runs
    from pipelines.tracking import runs as tracking_runs
    from pipelines.tracking.store import experiment_name, mlflow_client

    url = prefect_on_postgres["url"]
    env = {**os.environ, **pg_mlflow, "PREFECT_API_URL": url, "GPUPLAN_SERVE_SCHEDULES": "0",
           "PREFECT_HOME": prefect_on_postgres["home"]}
    for var in ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL",
                "GPUPLAN_PREFECT_DB_DEFAULTED", "MLFLOW_TRACKING_URI"):
        env.pop(var, None)
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []
    files: list = []
    out_dir = tmp_path / "shared-runs"
    problem = make_problem(8)
    fifo = tmp_path / "problem.fifo"
    os.mkfifo(fifo)

    def run_slot(dep_id: str, slot_time: str, path: Path) -> str:
        params = {"problem_path": str(path), "out_dir": str(out_dir), "scheduled_at": slot_time}
        return _post(url + f"/deployments/{dep_id}/create_flow_run", {"parameters": params})["id"]

    def final(run_id: str):
        state = _get(url + f"/flow_runs/{run_id}")["state"]
        return state if state and state["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

    try:
        dep = _serve_workers(2, env, tmp_path, url, procs, logs, files)
        first = run_slot(dep["id"], "2025-09-01T10:00:00+00:00", problem)
        assert _until("slot 10:00 final", lambda: final(first), 300, procs, logs)["type"] == "COMPLETED"
        (published_a,) = [r.path.name for r in list_runs(out_dir)]
        settings = load_settings()
        client = mlflow_client(settings)
        models_before = sorted((m.name, str(m.latest_versions)) for m in client.search_registered_models())

        killed_run = run_slot(dep["id"], "2025-09-01T10:30:00+00:00", fifo)
        lock = out_dir / f"{SLOT_CLAIM_PREFIX}20250901T1030Z.lock"
        holder = _until("slot 10:30 claimed and its run folder begun",
                        lambda: (lock.exists() and list(out_dir.glob(".tmp-20250901T1030Z*"))
                                 and _flock_holders(lock)), 300, procs, logs)[0]
        tmp_b = list(out_dir.glob(".tmp-20250901T1030Z*"))
        worker = next(p for p in procs if p.pid in {os.getsid(holder), *_ancestors(holder)})
        os.killpg(worker.pid, signal.SIGKILL)  # the container dies: the worker and its flow-run process
        if _alive(holder):
            os.kill(holder, signal.SIGKILL)  # a flow-run process in its own session dies with the container too
        worker.wait(timeout=30)
        assert worker.returncode == -signal.SIGKILL
        survivor = next(p for p in procs if p is not worker)
        survivor_log = logs[procs.index(survivor)]
        procs.remove(worker)

        # the claim died with its holder: the lock is free once no process has the lock file open
        try:
            _until("the killed worker's processes gone", lambda: not _openers(lock) or None, 60, [survivor],
                   [survivor_log])
        except AssertionError as exc:
            raise AssertionError(f"{lock} still open by {_openers(lock)}") from exc
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError if a dead worker still held it
        finally:
            os.close(fd)
        assert os.readlink(out_dir / LATEST) == published_a  # latest still on the complete previous run
        assert [r.path.name for r in list_runs(out_dir)] == [published_a]  # nothing of 10:30 published
        assert len(tmp_b) == 1 and tmp_b[0].exists()  # its temporary folder, never renamed into place
        plans = [r for r in tracking_runs.finished_runs(settings, "plans")
                 if r.data.params.get("run_dir", "").startswith(str(out_dir))]
        assert [Path(r.data.params["run_dir"]).name for r in plans] == [published_a]
        exp = client.get_experiment_by_name(experiment_name(settings, "plans"))
        running = [r for r in client.search_runs([exp.experiment_id]) if r.info.status != "FINISHED"
                   and r.data.params.get("run_dir", "").startswith(str(out_dir))]
        assert running == []  # no half-logged plan run
        assert sorted((m.name, str(m.latest_versions)) for m in client.search_registered_models()) == models_before

        nxt = run_slot(dep["id"], "2025-09-01T11:00:00+00:00", problem)  # the survivor plans the next slot
        state = _until("slot 11:00 final", lambda: final(nxt), 300, [survivor], [survivor_log])
        assert state["type"] == "COMPLETED", state["message"]
        assert _get(url + f"/flow_runs/{killed_run}")["state"]["type"] != "COMPLETED"
    finally:
        for p in procs:
            stop_group(p, signal.SIGINT)
        for f in files:
            f.close()
    names = [r.path.name for r in list_runs(out_dir)]
    assert len(names) == 2 and names[0] == published_a and names[1].startswith("20250901T1100Z_")
    assert os.readlink(out_dir / LATEST) == names[1]


def _ancestors(pid: int) -> list[int]:
    """The parent PIDs of ``pid`` up to PID 1 (``/proc/<pid>/status``)."""
    out = []
    while pid > 1:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        out.append(pid)
    return out


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        state = next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                     if line.startswith("State:"))
    except OSError:
        return False
    return state != "Z"


def _openers(path: Path) -> list[str]:
    """``"<pid> <command line>"`` of every live process with ``path`` open (``/proc/*/fd``)."""
    out = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if _alive(int(fd_dir.parent.name)) and any(os.path.realpath(f) == str(path) for f in fd_dir.iterdir()):
                out.append(f"{fd_dir.parent.name} {(fd_dir.parent / 'cmdline').read_bytes()[:200]!r}")
        except OSError:
            continue
    return out


def test_two_workspaces_on_one_prefect_server_keep_their_deployments_and_an_old_replan_is_paused_once(
        prefect_on_postgres, tmp_path, monkeypatch):
    # issue 32: the deployments of two clusters whose folders are both named 'gpuplan', applied to one server as
    # `gpuplan serve` applies them, stay two (each with its own workspace parameter); a plain `plan/replan` left by
    # the code before workspace ids for cluster A is paused by A's serve (said once), B's never touches it.
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.config.settings import Settings
    from pipelines.flows import deployments
    from pipelines.flows.plan import plan_flow
    from pipelines.workspace.load import read_or_create_workspace_id

    roots = [tmp_path / "clusterA" / "gpuplan", tmp_path / "clusterB" / "gpuplan"]
    for root in roots:
        root.mkdir(parents=True)
    sa, sb = (Settings(workspace_dir=r) for r in roots)
    ids = [read_or_create_workspace_id(r)[:12] for r in roots]

    # built outside the event loop (in one, Prefect's to_deployment returns a coroutine), as `gpuplan serve` builds them
    old = plan_flow.to_deployment(name="replan", parameters={"workspace": str(roots[0])})
    built = [dep for s in (sa, sb) for dep in deployments.build_deployments(s, with_schedules=False)]

    async def body():
        for dep in [old, *built]:
            await dep.aapply()
        paused = [await deployments._pause_old_deployments(s) for s in (sa, sb, sa)]
        async with get_client() as client:
            found = await client.read_deployments()
        return paused, sorted((d.name, (d.parameters or {}).get("workspace"), d.paused) for d in found
                              if d.name.startswith("replan"))

    with temporary_settings({PREFECT_API_URL: prefect_on_postgres["url"]}):
        paused, replans = asyncio.run(body())
    assert paused == [["plan/replan"], [], []]  # A's old deployment, paused once; B has none
    assert replans == sorted([("replan", str(roots[0]), True), (f"replan-gpuplan-{ids[0]}", str(roots[0]), False),
                              (f"replan-gpuplan-{ids[1]}", str(roots[1]), False)])
