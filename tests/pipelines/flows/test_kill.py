"""`kill -9` during `gpuplan run` leaves the previous run folder and the `latest` pointer intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipelines.io.run_folder import LATEST, LOCK_PREFIX, STALE_AFTER_S, RunFolder, latest_run, list_runs

VENV_BIN = Path(sys.executable).parent


@pytest.mark.heavy
def test_kill_9_mid_run_keeps_previous_run_and_latest(srv_env, tmp_path):
    out = tmp_path / "runs"
    prev = RunFolder.begin(out, datetime(2025, 3, 16, 15, tzinfo=UTC), "previous")
    (prev.tmp_path / "risk_report.md").write_text("previous report\n")
    prev_info, _ = prev.commit()
    proc = subprocess.Popen([str(VENV_BIN / "gpuplan"), "run", "--out", str(out)], env=srv_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    started = None
    while time.monotonic() < deadline and proc.poll() is None:
        tmps = [p for p in out.glob(".tmp-*") if (p / "traffic.parquet").exists()]
        if tmps:
            started = tmps[0]
            break
        time.sleep(0.2)
    assert started is not None, "the run never started writing its temporary folder"
    os.kill(proc.pid, signal.SIGKILL)  # kill -9, by PID
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert latest_run(out).run_id == "previous"
    assert os.readlink(out / LATEST) == prev_info.path.name
    assert (out / LATEST / "risk_report.md").read_text() == "previous report\n"
    assert [r.run_id for r in list_runs(out)] == ["previous"]
    assert started.exists()  # the killed run's temporary folder, never published
    # its lock died with it, but its heartbeat is recent: the next run keeps it for now
    # (on a volume shared between hosts a recent heartbeat is all that protects a live run)
    RunFolder.begin(out, datetime(2025, 3, 16, 16, tzinfo=UTC), "next").abort()
    assert started.exists()
    writer_file = out / (LOCK_PREFIX + started.name[len(".tmp-"):])
    old = time.time() - STALE_AFTER_S - 1
    for p in (started, writer_file):
        os.utime(p, (old, old))  # the heartbeat has aged past the limit
    RunFolder.begin(out, datetime(2025, 3, 16, 16, tzinfo=UTC), "next2").abort()
    assert not started.exists() and not writer_file.exists()  # cleaned by the next run
    assert latest_run(out).run_id == "previous"
