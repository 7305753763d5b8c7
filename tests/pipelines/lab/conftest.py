"""The lab Slurm of ``scripts/slurm-lab.sh`` as a session fixture (issue 28).

:func:`slurm_lab` starts the lab in a temporary folder through the project's own script, runs the workload
driver (``scripts/slurm_lab_workload.py``: the history mix, then the queue scenario), captures the documented
``sacct`` command (UTC and the cluster's zone), ``squeue --json`` and ``sinfo --json``, and stops every daemon by
PID at the end of the session. Without the Slurm binaries the tests skip, except when ``$CI`` is set (``.ci/run``
installs them), where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pipelines.io.paths import PROJECT_ROOT

LAB_SH = PROJECT_ROOT / "scripts" / "slurm-lab.sh"
BINARIES = ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "sacct", "squeue", "sinfo", "sbatch")
#: The documented history export (docs/operations.md "What to export") for Slurm 22.05: `--array` is 23.02+.
SACCT_FORMAT = ("JobID,JobName,User,Account,Partition,QOS,Priority,Submit,Eligible,Start,End,Elapsed,Timelimit,"
                "State,ReqTRES,AllocTRES,NodeList,Comment")


def _workload_module() -> Any:
    spec = importlib.util.spec_from_file_location("slurm_lab_workload",
                                                  PROJECT_ROOT / "scripts" / "slurm_lab_workload.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


workload = _workload_module()


@dataclass
class Lab:
    """A running lab: its state folder, client environment, manifests and captured outputs."""

    state_dir: Path
    env: dict[str, str]
    history: dict[str, Any]
    queue: dict[str, Any]
    outputs: dict[str, str] = field(default_factory=dict)
    captured_at: float = 0.0
    start_s: float = 0.0
    workload_s: float = 0.0

    def run(self, *argv: str, env: dict[str, str] | None = None, timeout_s: float = 30) -> str:
        """A client command's standard output (raises on a non-zero exit)."""
        return workload.run(list(argv), {**self.env, **(env or {})}, timeout_s)

    def sacct_documented(self, tz: str) -> str:
        """The documented ``sacct`` export (without ``--array``, which Slurm 22.05 lacks), its clock ``tz``."""
        return self.run("sacct", "--allusers", "--allocations", "--parsable2", f"--format={SACCT_FORMAT}",
                        "--starttime=now-1days", "--endtime=now",
                        env={"SLURM_TIME_FORMAT": "standard", "TZ": tz})


def _missing() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]


@pytest.fixture(scope="session")
def slurm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Start the lab, run the workloads, capture the exports; stop every daemon by PID afterwards."""
    missing = _missing()
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
        history = workload.submit_history(state)
        queue = workload.submit_queue(state)
        lab = Lab(state, workload.lab_env(state), history, queue, start_s=t1 - t0,
                  workload_s=time.monotonic() - t1)
        lab.outputs["sacct-utc.txt"] = lab.sacct_documented("UTC")
        lab.outputs["sacct-local.txt"] = lab.sacct_documented(lab.env["TZ"])
        lab.outputs["squeue.json"] = lab.run("squeue", "--json")
        lab.outputs["sinfo.json"] = lab.run("sinfo", "--json")
        lab.captured_at = time.time()
        yield lab
    finally:
        subprocess.run(["bash", str(LAB_SH), "stop", str(state)], capture_output=True, text=True, timeout=120)
