"""`gpuplan bench --dask` (issue 17): the simulations on a real Dask cluster through Prefect give the in-process bench.csv.

A `dask scheduler` and two `dask worker` processes on 127.0.0.1 (free port), started here and stopped
by PID; the session's real Prefect server (conftest) is the API of the flow and of the workers'
task runs. The bench: `mixed`, MILP and FIFO, `--quick`, two seeds, `--reproducible` (timing
columns empty, so the files compare byte for byte).
"""

from __future__ import annotations

import csv
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.io.errors import InputError
from pipelines.workspace.config import parse_dask

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
BENCH = ["bench", "--scenario", "mixed", "--planners", "milp,fifo", "--quick", "--seeds", "2", "--reproducible"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_parse_dask_values():
    assert parse_dask("tcp://127.0.0.1:8786") == ("tcp://127.0.0.1:8786", 0)
    assert parse_dask("local") == (None, 2) and parse_dask("local:3") == (None, 3)
    for bad in ("local:0", "local:x", "127.0.0.1:8786", "tcp://host"):
        with pytest.raises(InputError, match="--dask"):
            parse_dask(bad)


def _bench(out: Path, env: dict, *extra: str) -> list[dict]:
    proc = subprocess.run([str(BIN / "gpuplan"), *BENCH, "--out", str(out), *extra], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)  # sanity cap only
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "bench.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_bench_on_a_real_dask_scheduler_and_two_workers_equals_in_process(tmp_path, srv_env, stop_group):
    env = {**srv_env, "PYTHONPATH": str(ROOT)}
    port = _port()
    address = f"tcp://127.0.0.1:{port}"
    logs = open(tmp_path / "dask.log", "w")
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], env=env, cwd=ROOT, stdout=logs, stderr=subprocess.STDOUT,
                              start_new_session=True)]
    try:
        deadline = time.monotonic() + 120
        while not _listening(port):
            assert procs[0].poll() is None and time.monotonic() < deadline, (tmp_path / "dask.log").read_text()
            time.sleep(0.5)
        for k in (1, 2):
            procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--nthreads", "1", "--name",
                                           f"w{k}", "--no-dashboard"], env=env, cwd=ROOT, stdout=logs,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        from distributed import Client

        with Client(address, timeout=120) as client:
            client.wait_for_workers(2, timeout=120)
            on_dask = _bench(tmp_path / "dask", env, "--dask", address)
            prefixes = client.run_on_scheduler(
                lambda dask_scheduler: {k: sum(v.state_counts.values()) for k, v in dask_scheduler.task_prefixes.items()})
            workers = client.run_on_scheduler(
                lambda dask_scheduler: sorted(ws.name for ws in dask_scheduler.workers.values()))
        in_process = _bench(tmp_path / "local", env)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                stop_group(p, signal.SIGTERM)
        logs.close()
    # 2 seeds x (milp, fifo, clairvoyant) = 6 simulations, each a Prefect task run on the cluster (Dask
    # keys named after the task function `run_item`; the scheduler counts each task's state transitions)
    assert prefixes.get("run_item", 0) >= 6, prefixes
    assert workers == ["w1", "w2"]
    assert [(r["scenario"], r["planner"]) for r in in_process] == [
        (f"mixed@{s}", p) for s in (0, 1) for p in ("milp", "fifo", "clairvoyant")]
    assert (tmp_path / "dask" / "bench.csv").read_bytes() == (tmp_path / "local" / "bench.csv").read_bytes()
    assert on_dask == in_process


def test_bench_on_a_local_two_worker_cluster_equals_in_process(tmp_path, srv_env):
    """`--dask local:2`: Prefect's DaskTaskRunner starts a local cluster of 2 worker processes and stops it."""
    env = {**srv_env, "PYTHONPATH": str(ROOT)}
    on_local_cluster = _bench(tmp_path / "cluster", env, "--dask", "local:2")
    in_process = _bench(tmp_path / "local", env)
    assert len(in_process) == 6
    assert (tmp_path / "cluster" / "bench.csv").read_bytes() == (tmp_path / "local" / "bench.csv").read_bytes()
    assert on_local_cluster == in_process
