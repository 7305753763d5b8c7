"""The lab Slurm of ``scripts/slurm-lab.sh`` as a session fixture (issue 28).

:func:`slurm_lab` starts the lab in a temporary folder through the project's own script, runs the workload
driver (``scripts/slurm_lab_workload.py``: the history mix, then the queue scenario), captures the documented
``sacct`` command (UTC and the cluster's zone), ``squeue --json`` and ``sinfo --json``, and stops every daemon by
PID at the end of the session. Without the Slurm binaries the tests skip, except when ``$CI`` is set (``.ci/run``
installs them), where they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from lab_support import LAB_SH, Lab, missing_binaries, workload  # noqa: E402


@pytest.fixture(scope="session")
def slurm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Start the lab, run the workloads, capture the exports; stop every daemon by PID afterwards."""
    missing = missing_binaries()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI: Slurm lab binaries missing: {', '.join(missing)} (.ci/run installs them)")
        pytest.skip(f"no Slurm lab binaries: {', '.join(missing)}")
    state = tmp_path_factory.mktemp("slurm-lab")
    t0 = time.monotonic()
    started = subprocess.run(["bash", str(LAB_SH), "start", str(state)], capture_output=True, text=True,
                             timeout=180)
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        t1 = time.monotonic()
        # the timeout job ends 60-90 s in: the queue scenario and the loop test run meanwhile, and the sacct
        # exports are captured when a test first needs them (Lab.history_outputs waits for it)
        history = workload.submit_history(state, wait_timeout=False)
        queue = workload.submit_queue(state)
        lab = Lab(state, workload.lab_env(state), history, queue, start_s=t1 - t0,
                  workload_s=time.monotonic() - t1)
        lab.outputs["sacct-queue-time.txt"] = lab.sacct_documented("UTC")
        lab.outputs["squeue.json"] = lab.run("squeue", "--json")
        lab.outputs["sinfo.json"] = lab.run("sinfo", "--json")
        lab.captured_at = time.time()
        yield lab
    finally:
        subprocess.run(["bash", str(LAB_SH), "stop", str(state)], capture_output=True, text=True, timeout=120)
