"""Workload driver for the lab Slurm of ``scripts/slurm-lab.sh`` (issue 28): real jobs with short sleeps.

``python scripts/slurm_lab_workload.py history STATE_DIR`` submits the finished-job mix and waits (by polling
``sacct``, never a fixed sleep) until every job is in a final state; ``... queue STATE_DIR`` submits the queue
scenario and waits until its running jobs run. Each prints a JSON manifest: one entry per submitted job with its
Slurm job id, what was asked and what is expected (``tests/pipelines/lab/`` checks gpuplan's ingest of the real
``sacct``/``squeue --json`` output against it).

History mix (:data:`HISTORY`): typed (``--gres=gpu:h100:4``) and untyped (``--gres=gpu:2``) GPU requests, a
failure (exit 3), a timeout (``--time=1`` on h100, killed by slurmctld after its minute), a cancellation before start
(held, then ``scancel``) and after start (``scancel`` once RUNNING), a 2-node gang (16 GPUs), an array
``0-5%2`` (6 tasks, at most 2 at once), two accounts (research, inference) and QoS (high, low, normal).

Queue scenario (:data:`QUEUE`): on a100 a running 4-GPU job and an array ``0-8:2%1`` of 4-GPU tasks (task 0
runs, 2-8 pend); on h100 four jobs pending on their begin time (``--begin=now+2hours``) — a 2-node gang of 16
GPUs, an 8-GPU, a 4-GPU and an untyped 2-GPU job — which gpuplan then plans and whose ``commands.sh`` moves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: name -> (sbatch arguments, the command, expected final state, GPUs, GPU type, nodes).
HISTORY: dict[str, dict[str, Any]] = {
    "typed-h100": {"args": ["-p", "h100", "--gres=gpu:h100:4", "-A", "research", "-q", "high", "-t", "5"],
                   "cmd": "sleep 2", "state": "completed", "gpus": 4, "gpu_type": "h100", "nodes": 1},
    "untyped-a100": {"args": ["-p", "a100", "--gres=gpu:2", "-A", "inference", "-q", "low", "-t", "5"],
                     "cmd": "sleep 2", "state": "completed", "gpus": 2, "gpu_type": "a100", "nodes": 1},
    "fail": {"args": ["-p", "h100", "--gres=gpu:h100:1", "-A", "research", "-t", "5"],
             "cmd": "sleep 1; exit 3", "state": "failed", "gpus": 1, "gpu_type": "h100", "nodes": 1},
    "timeout": {"args": ["-p", "h100", "--gres=gpu:h100:1", "-A", "inference", "-t", "1"],
                "cmd": "sleep 300", "state": "timeout", "gpus": 1, "gpu_type": "h100", "nodes": 1},
    "cancel-pending": {"args": ["-p", "h100", "--gres=gpu:h100:2", "-A", "research", "-t", "5", "--hold"],
                       "cmd": "sleep 1", "state": "cancelled", "gpus": 2, "gpu_type": "h100", "nodes": 1,
                       "cancel": "pending"},
    "cancel-running": {"args": ["-p", "a100", "--gres=gpu:a100:1", "-A", "inference", "-q", "high", "-t", "5"],
                       "cmd": "sleep 300", "state": "cancelled", "gpus": 1, "gpu_type": "a100", "nodes": 1,
                       "cancel": "running"},
    "gang": {"args": ["-p", "h100", "-N", "2", "--gres=gpu:h100:8", "-A", "research", "-q", "high", "-t", "5"],
             "cmd": "sleep 2", "state": "completed", "gpus": 16, "gpu_type": "h100", "nodes": 2},
    "array": {"args": ["-p", "a100", "--gres=gpu:a100:1", "--array=0-5%2", "-A", "inference", "-q", "low",
                       "-t", "5"],
              "cmd": "sleep 1", "state": "completed", "gpus": 1, "gpu_type": "a100", "nodes": 1, "tasks": 6},
}

#: The queue scenario (module docstring).
QUEUE: dict[str, dict[str, Any]] = {
    "run-a100": {"args": ["-p", "a100", "--gres=gpu:a100:4", "-A", "inference", "-t", "30"],
                 "cmd": "sleep 900", "state": "running", "gpus": 4, "gpu_type": "a100", "nodes": 1},
    "array-pending": {"args": ["-p", "a100", "--gres=gpu:a100:4", "--array=0-8:2%1", "-A", "inference",
                               "-t", "10"],
                      "cmd": "sleep 900", "state": "running", "gpus": 4, "gpu_type": "a100", "nodes": 1,
                      "tasks": 5, "pending_tasks": "2-8:2%1"},
    "q-gang": {"args": ["-p", "h100", "-N", "2", "--gres=gpu:h100:8", "-A", "research", "-q", "high",
                        "-t", "120", "--begin=now+2hours"],
               "cmd": "sleep 900", "state": "pending", "gpus": 16, "gpu_type": "h100", "nodes": 2},
    "q-8": {"args": ["-p", "h100", "--gres=gpu:h100:8", "-A", "research", "-q", "low", "-t", "60",
                     "--begin=now+2hours"],
            "cmd": "sleep 900", "state": "pending", "gpus": 8, "gpu_type": "h100", "nodes": 1},
    "q-4": {"args": ["-p", "h100", "--gres=gpu:h100:4", "-A", "inference", "-q", "normal", "-t", "30",
                     "--begin=now+2hours"],
            "cmd": "sleep 900", "state": "pending", "gpus": 4, "gpu_type": "h100", "nodes": 1},
    "q-untyped-2": {"args": ["-p", "h100", "--gres=gpu:2", "-A", "inference", "-q", "normal", "-t", "20",
                             "--begin=now+2hours"],
                    "cmd": "sleep 900", "state": "pending", "gpus": 2, "gpu_type": None, "nodes": 1},
}

FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE"}


def lab_env(state_dir: str | os.PathLike) -> dict[str, str]:
    """The environment of a lab client command: ``SLURM_CONF`` and ``TZ`` from ``<state_dir>/env.sh``."""
    env = dict(os.environ)
    for line in Path(state_dir, "env.sh").read_text().splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export "):].partition("=")
            env[k] = v
    return env


def run(argv: list[str], env: dict[str, str], timeout_s: float = 30) -> str:
    """Run a Slurm client command; its standard output. Raises ``subprocess.CalledProcessError`` on failure."""
    return subprocess.run(argv, env=env, check=True, capture_output=True, text=True, timeout=timeout_s).stdout


def sbatch(name: str, spec: dict[str, Any], env: dict[str, str], out_dir: Path) -> str:
    """Submit one job named ``name``; its job id."""
    out = run(["sbatch", "--parsable", "-J", name, "-o", str(out_dir / "%x-%A_%a.out"), *spec["args"],
               "--wrap", spec["cmd"]], env)
    return out.strip().split(";")[0]


def states(ids: list[str], env: dict[str, str]) -> dict[str, list[str]]:
    """``job id -> the states of its allocations`` (array tasks listed under their array's id), from sacct."""
    out = run(["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "--format=JobID,State"], env)
    got: dict[str, list[str]] = {}
    for line in out.splitlines():
        jid, _, st = line.partition("|")
        got.setdefault(jid.split("_")[0], []).append(st.split()[0] if st else "")
    return got


def wait_until(pred: Any, what: str, timeout_s: float) -> None:
    """Poll ``pred()`` every 0.5 s until true; ``TimeoutError`` naming ``what`` after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > end:
            raise TimeoutError(f"lab workload: {what} not reached in {timeout_s:.0f} s")
        time.sleep(0.5)


def submit_history(state_dir: str | os.PathLike, timeout_s: float = 240, *, wait_timeout: bool = True) -> dict[str, Any]:
    """Submit :data:`HISTORY`, cancel the two to cancel, wait until every job is final; the manifest.

    ``wait_timeout=False``: return once every job but ``timeout`` is final (slurmctld ends that one 60-90 s after
    its start: its limit is one minute and time limits are checked every 30 s); :func:`wait_history` waits for it.
    """
    env = lab_env(state_dir)
    out_dir = Path(state_dir, "job-out")
    out_dir.mkdir(exist_ok=True)
    ids = {name: sbatch(name, spec, env, out_dir) for name, spec in HISTORY.items()}
    run(["scancel", ids["cancel-pending"]], env)
    wait_until(lambda: states([ids["cancel-running"]], env).get(ids["cancel-running"]) == ["RUNNING"],
               "cancel-running RUNNING", 60)
    run(["scancel", ids["cancel-running"]], env)

    manifest = {"jobs": {n: {"job_id": ids[n], **{k: v for k, v in s.items() if k not in ("args", "cmd")},
                             "args": s["args"]} for n, s in HISTORY.items()}}
    wait_history(state_dir, manifest, timeout_s, but=() if wait_timeout else ("timeout",))
    return manifest


def wait_history(state_dir: str | os.PathLike, manifest: dict[str, Any], timeout_s: float = 240,
                 but: tuple[str, ...] = ()) -> None:
    """Wait until every job of a history manifest (except the names in ``but``) is in a final state."""
    env = lab_env(state_dir)
    ids = {n: j["job_id"] for n, j in manifest["jobs"].items() if n not in but}

    def done() -> bool:
        got = states(list(ids.values()), env)
        return all(got.get(i) and all(s in FINAL for s in got[i]) for i in ids.values()) and \
            ("array" not in ids or len(got.get(ids["array"], [])) == HISTORY["array"]["tasks"])

    wait_until(done, "every history job final", timeout_s)


def submit_queue(state_dir: str | os.PathLike, timeout_s: float = 60) -> dict[str, Any]:
    """Submit :data:`QUEUE`, wait until its running jobs run; the manifest."""
    env = lab_env(state_dir)
    out_dir = Path(state_dir, "job-out")
    out_dir.mkdir(exist_ok=True)
    ids = {name: sbatch(name, spec, env, out_dir) for name, spec in QUEUE.items()}

    def running() -> bool:
        out = run(["squeue", "-h", "-r", "-t", "RUNNING", "-o", "%i"], env).split()
        return ids["run-a100"] in out and f"{ids['array-pending']}_0" in out

    wait_until(running, "queue scenario's running jobs", timeout_s)
    return {"jobs": {n: {"job_id": ids[n], **{k: v for k, v in s.items() if k not in ("args", "cmd")},
                         "args": s["args"]} for n, s in QUEUE.items()}}


def main(argv: list[str]) -> int:
    """CLI: ``history|queue STATE_DIR`` -> the manifest as JSON on standard output."""
    if len(argv) != 2 or argv[0] not in ("history", "queue"):
        print("usage: slurm_lab_workload.py history|queue STATE_DIR", file=sys.stderr)
        return 2
    manifest = submit_history(argv[1]) if argv[0] == "history" else submit_queue(argv[1])
    print(json.dumps(manifest, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
