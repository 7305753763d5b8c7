"""F04: several writers on one runs folder; stale temporary folders judged by lock + heartbeat age, never PID."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.io.run_folder import STALE_AFTER_S, clean_stale_temp

WRITER = Path(__file__).with_name("_run_folder_writer.py")
REPO = Path(__file__).resolve().parents[3]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def _start(out: Path, tag: str, when: str, prefix: list[str] | None = None) -> tuple[subprocess.Popen, Path, Path]:
    ready, go = out.parent / f"{tag}.ready", out.parent / f"{tag}.go"
    args = [*(prefix or []), sys.executable, str(WRITER), str(out), when, tag, str(ready), str(go)]
    proc = subprocess.Popen(args, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, ready, go


def _wait_file(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"writer exited {proc.returncode} before {path.name}: {out} {err[-2000:]}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def _finish(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # never leave a writer behind (by PID)
            proc.kill()
            proc.wait(timeout=30)
    lines = out.strip().splitlines()
    assert lines, (proc.returncode, err[-2000:])
    return json.loads(lines[-1])


def _entries(out: Path) -> set[str]:
    return {p.name for p in out.iterdir()}


COMMITTED = {"latest", ".latest.lock", "20250901T0000Z_a", "20250901T0100Z_b"}


def test_two_writers_on_one_host_both_commit(tmp_path):
    out = tmp_path / "runs"
    a, a_ready, a_go = _start(out, "a", "2025-09-01T00:00:00+00:00")
    b, b_ready, b_go = _start(out, "b", "2025-09-01T01:00:00+00:00")
    try:
        _wait_file(a_ready, a)
        _wait_file(b_ready, b)
        # both in progress at once: two temporary folders, each with its writer file
        names = _entries(out)
        assert {n for n in names if n.startswith(".tmp-")} == {a_ready.read_text(), b_ready.read_text()}
        assert len([n for n in names if n.startswith(".lock-")]) == 2
    finally:
        b_go.touch()
        a_go.touch()
        ra, rb = _finish(a), _finish(b)
    assert ra["ok"] and rb["ok"], (ra, rb)
    assert _entries(out) == COMMITTED
    assert os.readlink(out / "latest") == "20250901T0100Z_b"


def test_writer_in_another_pid_namespace_keeps_a_live_run(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed")
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        if "Operation not permitted" in probe.stderr or f"errno {errno.EPERM}" in probe.stderr:
            pytest.skip(f"unshare --pid refused with EPERM (no privilege for a PID namespace): {probe.stderr.strip()}")
        raise AssertionError(f"unshare failed: {probe.stderr}")
    out = tmp_path / "runs"
    a, a_ready, a_go = _start(out, "a", "2025-09-01T00:00:00+00:00")
    try:
        _wait_file(a_ready, a)
        a_tmp = out / a_ready.read_text()
        assert a_tmp.is_dir()
        # a second writer in its own PID namespace (it is PID 1 there; it cannot see writer a)
        b, b_ready, b_go = _start(out, "b", "2025-09-01T01:00:00+00:00",
                                  ["unshare", "--pid", "--fork", "--mount-proc"])
        try:
            _wait_file(b_ready, b)
            assert a_tmp.is_dir() and (a_tmp / "plan.txt").read_text() == "a"  # b's start kept a's run
        finally:
            b_go.touch()
            rb = _finish(b)
        assert rb["ok"], rb
        assert a_tmp.is_dir()
    finally:
        a_go.touch()
        ra = _finish(a)
    assert ra["ok"], ra
    assert _entries(out) == COMMITTED
    assert (out / "20250901T0000Z_a" / "plan.txt").read_text() == "a"


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_crashed_writers_temp_cleaned_after_age_fresh_kept(tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    # crashed writers (no lock holder), heartbeat older than the limit: old -pid1 naming and new naming
    old_pid1 = out / ".tmp-20250901T0000Z_x-pid1"
    old_new = out / ".tmp-20250901T0000Z_y-0123456789ab"
    old_new_lock = out / ".lock-20250901T0000Z_y-0123456789ab"
    # crashed just now (no lock holder) but a recent heartbeat: kept until it ages
    fresh = out / ".tmp-20250901T0100Z_z-ba9876543210"
    fresh_lock = out / ".lock-20250901T0100Z_z-ba9876543210"
    fresh_pid = out / f".tmp-20250901T0100Z_w-pid{999_999_999}"
    orphan_lock = out / ".lock-20250901T0000Z_o-00000000aaaa"
    for d in (old_pid1, old_new, fresh, fresh_pid):
        d.mkdir()
        (d / "plan.txt").write_text("half")
    for f in (old_new_lock, fresh_lock, orphan_lock):
        f.touch()
    for p in (old_pid1, old_new, old_new_lock, orphan_lock):
        _age(p, STALE_AFTER_S + 60)
    removed = clean_stale_temp(out)
    assert set(removed) == {old_pid1, old_new}
    assert _entries(out) == {fresh.name, fresh_lock.name, fresh_pid.name}
    # once their heartbeat is old too, they go
    for p in (fresh, fresh_lock, fresh_pid):
        _age(p, STALE_AFTER_S + 1)
    assert set(clean_stale_temp(out)) == {fresh, fresh_pid}
    assert _entries(out) == set()
