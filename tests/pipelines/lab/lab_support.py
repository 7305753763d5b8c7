"""Support of the lab tests (issue 28): the workload driver, :class:`Lab`, the documented sacct command.

``conftest.py``'s :func:`slurm_lab` starts the lab in a temporary folder through the project's own script, runs the workload
driver (``scripts/slurm_lab_workload.py``: the history mix, then the queue scenario), captures the documented
``sacct`` command (UTC and the cluster's zone), ``squeue --json`` and ``sinfo --json``, and stops every daemon by
PID at the end of the session. Without the Slurm binaries the tests skip, except when ``$CI`` is set (``.ci/run``
installs them), where they fail.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    def history_outputs(self) -> dict[str, str]:
        """The sacct exports, captured once every history job is final (the timeout job last, 60-90 s in)."""
        if "sacct-utc.txt" not in self.outputs:
            workload.wait_history(self.state_dir, self.history)
            self.outputs["sacct-utc.txt"] = self.sacct_documented("UTC")
            self.outputs["sacct-local.txt"] = self.sacct_documented(self.env["TZ"])
        return self.outputs

    def sacct_documented(self, tz: str) -> str:
        """The documented ``sacct`` export (without ``--array``, which Slurm 22.05 lacks), its clock ``tz``."""
        return self.run("sacct", "--allusers", "--allocations", "--parsable2", f"--format={SACCT_FORMAT}",
                        "--starttime=now-1days", "--endtime=now",
                        env={"SLURM_TIME_FORMAT": "standard", "TZ": tz})


def missing_binaries() -> list[str]:
    """The lab's binaries not installed."""
    return [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
