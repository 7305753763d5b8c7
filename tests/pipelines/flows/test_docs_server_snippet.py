"""The Prefect server snippet of docs/operations.md runs as written on a fresh clone (issue 33).

A fresh clone has no ``.prefect/``; ``PREFECT_HOME=$PWD/.prefect/server`` then made Prefect fail with
"unable to open database file … Application startup failed". The test copies the snippet's lines out of
the doc (only the port changes, to a free one), runs them with ``bash`` in an empty folder holding only
``.venv``, waits for ``/health`` (or the process's exit) and stops the server by its PID.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
VENV = Path(sys.executable).parent.parent


def server_snippet() -> list[str]:
    """The shell lines of the doc's 'terminal 1' block, up to and including ``prefect server start``."""
    text = (ROOT / "docs" / "operations.md").read_text()
    block = text.split("# terminal 1: the server", 1)[1].split("# terminal 2", 1)[0]
    lines = [ln.split("  #", 1)[0].strip() for ln in block.splitlines()[1:]]
    return [ln for ln in lines if ln]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.mark.heavy
def test_docs_server_snippet_starts_on_a_fresh_clone(tmp_path):
    lines = server_snippet()
    assert lines[-1] == ".venv/bin/prefect server start --host 127.0.0.1 --port 4200", lines
    port = _free_port()
    script = "\n".join(lines[:-1] + [re.sub(r"--port 4200$", f"--port {port}", lines[-1])]) + "\n"
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(VENV)  # the clone after scripts/setup.sh, without its .prefect/
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "GPUPLAN_"))}
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen(["bash", "-e", "-c", f"cd {clone}\n{script}"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api/health"
    try:
        deadline = time.monotonic() + 180
        while not _healthy(url):  # the health endpoint, or the snippet's exit, ends the wait
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "server not healthy after 180 s"
            time.sleep(0.5)
        assert (clone / ".prefect" / "server" / "prefect.db").is_file()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the group we started, by its PID
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
    assert "unable to open database file" not in (tmp_path / "server.log").read_text()
