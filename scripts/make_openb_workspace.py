"""Write the typed example workspace ``data/fixtures/workspaces/openb-typed/`` from the real openb cluster.

Usage (from the repository root)::

    PYTHONPATH=. .venv/bin/python scripts/make_openb_workspace.py [--shared ../shared/data] [--out DIR] [--check]

Inputs: from ``--shared`` (``alibaba-openb-gpu-2023/``) the real node list ``openb_node_list_gpu_node.csv``
and the pod list with GPU-type constraints ``openb_pod_list_gpuspec20.csv`` (its ``gpu_spec`` column,
``T4``, ``V100M16|V100M32``); without them, the snapshots this script committed (``nodes.csv``: the chosen
rows of the node list as is; ``pods.csv``: the chosen window's rows of the pod list as is), so every output
is reproduced byte for byte.

Outputs (``--out``, default the workspace folder; ``gpuplan.toml`` there is written by hand, not here):
``nodes.csv`` (read as is by ``[sources.nodes] format = "csv"``), ``pods.csv`` (snapshot) and ``pods.json``
(the full list's trace end and the window's first day, for a derivation from the snapshot), ``sacct.txt``
(``sacct --parsable2`` with a ``Constraints`` column) and ``squeue.json`` (``squeue --json``) at the export
time T, written by the export writers of :mod:`pipelines.replay.slurm_exports`. ``--check``: derive into a
temporary folder and compare with the committed files; exit 1 naming the first that differs. The measured
counts are printed (JSON) on stdout. Nothing is random.

Rules (every one in ``data/fixtures/README.md``, "The typed example workspace"):

- **Nodes** (:data:`NODE_KINDS`): the first node by name of each (model, GPUs) kind: V100M32 with 4 GPUs,
  T4 with 2, G2 with 8, P100 with 2 (16 GPUs, four types, three sizes).
- **Pods**: the non-LS GPU pods created in :data:`WINDOW_DAYS` consecutive trace days; one whose
  ``gpu_spec`` names no type of the nodes is left out (it cannot run there), one too large for every
  eligible node too. Job ids from :data:`BASE_JOB_ID` in (creation, name) order; run time =
  ``deletion - scheduled`` (None: alive at the trace end, never ends); never scheduled: cancelled while
  pending at its deletion.
- **Replay** (:func:`replay`): at every arrival and end, the pending jobs in arrival order each start on the
  smallest eligible node (fewest CPUs, then memory, then name) with its GPUs, CPUs and memory free;
  a job that does not fit waits and does not block later ones (Kubernetes' scheduler queue, as the trace's
  cluster ran), and keeps its ``gpu_spec`` (eligible node models only).
- **Window and T** (:func:`choose`): the first window (first day 115..147) having a 10-minute time with
  at least :data:`MIN_HISTORY` ended jobs, a pending job eligible for V100M32 and a pending T4-only job
  (both waiting for GPUs, not never-scheduled pods); T = such a time with the most pending jobs, then the
  latest. T is unix :data:`T_UNIX` (2025-03-17 00:00 Asia/Shanghai, the end of the ServeGen Prometheus
  fixture); one trace second is one second. ``sacct -S`` is the window's start.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import io
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipelines.io.atomic import atomic_write_text  # noqa: E402
from pipelines.io.errors import InputError  # noqa: E402
from pipelines.replay.jobs import REPLAY_COLUMNS, replay_jobs  # noqa: E402
from pipelines.replay.slurm_exports import sacct_text, squeue_json_text  # noqa: E402

WORKSPACE = ROOT / "data" / "fixtures" / "workspaces" / "openb-typed"
OPENB_DIR = "alibaba-openb-gpu-2023"
NODE_LIST = "openb_node_list_gpu_node.csv"
POD_LIST = "openb_pod_list_gpuspec20.csv"
#: (model, GPUs per node): one node of each, the first by name.
NODE_KINDS: tuple[tuple[str, int], ...] = (("V100M32", 4), ("T4", 2), ("G2", 8), ("P100", 2))
#: Length of the pod window (trace days) and the first days tried.
WINDOW_DAYS = 3
FIRST_DAYS = range(115, 148)
#: The export time must leave at least this many ended jobs (the history) before it.
MIN_HISTORY = 200
#: Candidate export times: every this many seconds of the window.
SCAN_S = 600
BASE_JOB_ID = 900001
DAY_S = 86400
#: T in unix seconds: 2025-03-16T16:00:00Z = 2025-03-17 00:00 Asia/Shanghai (data/fixtures/servegen/prometheus.json ends there).
T_UNIX = 1_742_140_800
TZ_NAME = "Asia/Shanghai"
OUTPUTS = ("nodes.csv", "pods.csv", "pods.json", "sacct.txt", "squeue.json")


@dataclass
class Job:
    """One pod as a job; times in trace seconds. ``eligible``: node models it may run on (None = any)."""

    job_id: int
    pod: str
    qos: str
    phase: str
    gpus: int
    cpu_milli: int
    memory_mib: int
    gpu_spec: str | None
    eligible: frozenset[str] | None
    submit: int
    deletion: int
    run_s: int | None
    held: bool
    start: int | None = None
    end: int | None = None
    node: str | None = None
    model: str | None = None

    def state_at(self, t: int) -> str | None:
        """None (not submitted), 'pending', 'running' or 'ended' at trace second t."""
        if self.submit > t:
            return None
        if self.start is None or self.start > t:
            return "ended" if self.end is not None and self.start is None and self.end <= t else "pending"
        return "running" if self.end is None or self.end > t else "ended"


# ---------------------------------------------------------------- inputs


def load_inputs(shared: Path) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """(node rows, pod rows, from_shared): the shared lists when present, else the committed snapshots.

    Raises InputError when neither is there or a (model, GPUs) kind has no node.
    """
    src_nodes, src_pods = shared / OPENB_DIR / NODE_LIST, shared / OPENB_DIR / POD_LIST
    if src_nodes.is_file() and src_pods.is_file():
        nl = pd.read_csv(src_nodes, dtype=str, keep_default_na=False)
        rows = []
        for model, gpus in NODE_KINDS:
            kind = nl[(nl["model"] == model) & (nl["gpu"] == str(gpus))].sort_values("sn")
            if kind.empty:
                raise InputError(f"{src_nodes}: no node of model {model} with {gpus} GPUs")
            rows.append(kind.iloc[[0]])
        return pd.concat(rows, ignore_index=True), pd.read_csv(src_pods, dtype=str, keep_default_na=False), True
    snaps = WORKSPACE / "nodes.csv", WORKSPACE / "pods.csv"
    if not all(s.is_file() for s in snaps):
        raise InputError(f"neither {src_nodes} and {src_pods} nor the committed snapshots {snaps[0]}, {snaps[1]} exist")
    return (pd.read_csv(snaps[0], dtype=str, keep_default_na=False),
            pd.read_csv(snaps[1], dtype=str, keep_default_na=False), False)


def window_pods(pods: pd.DataFrame, first_day: int) -> pd.DataFrame:
    """The non-LS GPU pods created in trace days ``[first_day, first_day + WINDOW_DAYS)``, (creation, name) order."""
    created = pods["creation_time"].astype(int)
    keep = ((pods["qos"] != "LS") & (pods["num_gpu"].astype(int) >= 1) & (created >= first_day * DAY_S)
            & (created < (first_day + WINDOW_DAYS) * DAY_S))
    out = pods[keep].copy()
    out["_c"] = out["creation_time"].astype(int)
    return out.sort_values(["_c", "name"], kind="stable").drop(columns="_c")


def build_jobs(pods: pd.DataFrame, nodes: pd.DataFrame, trace_end: int) -> tuple[list[Job], dict[str, int]]:
    """The window's pods as jobs (module docstring), and the counts of pods left out by reason."""
    models = set(nodes["model"])
    jobs: list[Job] = []
    left = {"type_not_in_nodes": 0, "too_large": 0}
    for r in pods.itertuples(index=False):
        spec = r.gpu_spec.strip() or None
        eligible = None if spec is None else frozenset(spec.split("|"))
        gpus, cpu, mem = int(r.num_gpu), int(r.cpu_milli), int(r.memory_mib)
        if eligible is not None and not eligible & models:
            left["type_not_in_nodes"] += 1
            continue
        fits = any((eligible is None or n.model in eligible) and int(n.gpu) >= gpus and int(n.cpu_milli) >= cpu
                   and int(n.memory_mib) >= mem for n in nodes.itertuples(index=False))
        if not fits:
            left["too_large"] += 1
            continue
        held = r.scheduled_time == ""
        deletion = int(r.deletion_time)
        run = None if held or deletion >= trace_end else deletion - int(r.scheduled_time)
        job = Job(BASE_JOB_ID + len(jobs), r.name, r.qos, r.pod_phase, gpus, cpu, mem, spec, eligible, int(r.creation_time),
                  deletion, run, held)
        if held and deletion < trace_end:
            job.end = deletion
        jobs.append(job)
    return jobs, left


def replay(jobs: list[Job], nodes: pd.DataFrame) -> None:
    """Place the jobs on the nodes (module docstring "Replay"); sets start, end, node, model of each started job."""
    order = sorted(nodes.itertuples(index=False), key=lambda n: (int(n.cpu_milli), int(n.memory_mib), int(n.gpu), n.sn))
    free = {n.sn: [int(n.gpu), int(n.cpu_milli), int(n.memory_mib)] for n in order}
    model = {n.sn: n.model for n in order}
    arrivals = sorted((j for j in jobs if not j.held), key=lambda j: (j.submit, j.job_id))
    events = sorted({j.submit for j in arrivals})
    heapq.heapify(events)
    running: list[tuple[int, int, str]] = []
    pending: list[Job] = []
    k = 0
    by_id = {j.job_id: j for j in jobs}
    while events:
        t = heapq.heappop(events)
        while events and events[0] == t:
            heapq.heappop(events)
        while running and running[0][0] <= t:
            _, jid, name = heapq.heappop(running)
            j = by_id[jid]
            free[name][0] += j.gpus
            free[name][1] += j.cpu_milli
            free[name][2] += j.memory_mib
        while k < len(arrivals) and arrivals[k].submit <= t:
            pending.append(arrivals[k])
            k += 1
        waiting = []
        for j in pending:
            node = next((n.sn for n in order if (j.eligible is None or n.model in j.eligible)
                         and free[n.sn][0] >= j.gpus and free[n.sn][1] >= j.cpu_milli
                         and free[n.sn][2] >= j.memory_mib), None)
            if node is None:
                waiting.append(j)
                continue
            free[node][0] -= j.gpus
            free[node][1] -= j.cpu_milli
            free[node][2] -= j.memory_mib
            j.start, j.node, j.model = t, node, model[node]
            j.end = None if j.run_s is None else t + j.run_s
            if j.end is not None:
                heapq.heappush(running, (j.end, j.job_id, node))
                heapq.heappush(events, j.end)
        pending = waiting
    if pending:
        raise InputError(f"replay: job {pending[0].job_id} ({pending[0].pod}) never starts")


def qualifies(jobs: list[Job], t: int) -> tuple[bool, int, int]:
    """(a V100M32-eligible and a T4-only job wait for GPUs at t, ended jobs, pending jobs) at trace second t."""
    states = [(j, j.state_at(t)) for j in jobs]
    waiting = [j for j, s in states if s == "pending" and not j.held]
    v100 = any(j.eligible is not None and "V100M32" in j.eligible for j in waiting)
    t4 = any(j.eligible == frozenset({"T4"}) for j in waiting)
    ended = sum(s == "ended" for _, s in states)
    pending = sum(s == "pending" for _, s in states)
    return v100 and t4 and ended >= MIN_HISTORY, ended, pending


def choose(pods: pd.DataFrame, nodes: pd.DataFrame, trace_end: int, days: range) -> tuple[int, int, list[Job], dict]:
    """(first day, T in trace seconds, replayed jobs, left-out counts) of the first qualifying window (module docstring).

    Raises InputError when no window of ``days`` qualifies.
    """
    for first in days:
        sel = window_pods(pods, first)
        if sel.empty:
            continue
        jobs, left = build_jobs(sel, nodes, trace_end)
        replay(jobs, nodes)
        best = None
        for t in range(first * DAY_S, (first + WINDOW_DAYS) * DAY_S, SCAN_S):
            ok, _, pending = qualifies(jobs, t)
            if ok and (best is None or (pending, t) >= best):
                best = (pending, t)
        if best is not None:
            return first, best[1], jobs, left
    raise InputError(f"no window of {WINDOW_DAYS} days starting on days {days.start}..{days.stop - 1} has a V100M32-"
                     f"eligible and a T4-only job pending with {MIN_HISTORY} ended jobs")


def final_state(job: Job) -> str:
    """How the job ends: CANCELLED (never scheduled, deleted), PENDING (never scheduled, alive), RUNNING (never ends), COMPLETED/FAILED."""
    if job.held:
        return "CANCELLED" if job.end is not None else "PENDING"
    if job.end is None:
        return "RUNNING"
    return "FAILED" if job.phase == "Failed" else "COMPLETED"


def job_table(jobs: list[Job], offset: int) -> pd.DataFrame:
    """The jobs as the export writers' job table (:data:`pipelines.replay.jobs.REPLAY_COLUMNS` + ``gpu_spec``)."""
    def ts(s: int | None) -> pd.Timestamp:
        return pd.NaT if s is None else pd.Timestamp(s + offset, unit="s", tz="UTC")

    rows = [{"job_id": j.job_id, "pod": j.pod, "qos": j.qos, "gpus": j.gpus, "cpu_milli": j.cpu_milli,
             "memory_mib": j.memory_mib, "node": j.node, "node_model": j.model, "submitted_at": ts(j.submit),
             "started_at": ts(j.start), "ended_at": ts(j.end), "final_state": final_state(j), "gpu_spec": j.gpu_spec}
            for j in jobs]
    return replay_jobs(pd.DataFrame(rows, columns=[*REPLAY_COLUMNS, "gpu_spec"]))


def _csv_text(frame: pd.DataFrame) -> str:
    buf = io.StringIO()
    frame.to_csv(buf, index=False, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    return buf.getvalue()


def derive(shared: Path, out: Path) -> dict:
    """Write every output into ``out``; return the measured counts."""
    nodes, pods, from_shared = load_inputs(shared)
    if from_shared:
        trace_end, days = int(pods["deletion_time"].astype(int).max()), FIRST_DAYS
    else:  # the snapshot holds the chosen window only: its trace end and first day are committed beside it
        meta = json.loads((WORKSPACE / "pods.json").read_text())
        trace_end, days = int(meta["trace_end_s"]), range(int(meta["first_day"]), int(meta["first_day"]) + 1)
    first, t, jobs, left = choose(pods, nodes, trace_end, days)
    offset = T_UNIX - t
    table = job_table(jobs, offset)
    at = pd.Timestamp(T_UNIX, unit="s", tz="UTC")
    window_start = pd.Timestamp((first * DAY_S + offset), unit="s", tz="UTC")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "nodes.csv", _csv_text(nodes))
    atomic_write_text(out / "pods.csv", _csv_text(window_pods(pods, first)))
    atomic_write_text(out / "pods.json", json.dumps({"trace_end_s": trace_end, "first_day": first}, indent=1) + "\n")
    atomic_write_text(out / "sacct.txt", sacct_text(table, at, window_start, TZ_NAME, constraints=True))
    atomic_write_text(out / "squeue.json", squeue_json_text(table, at))
    states = {j.job_id: j.state_at(t) for j in jobs}
    pending = [j for j in jobs if states[j.job_id] == "pending"]
    running = [j for j in jobs if states[j.job_id] == "running"]
    started = [j for j in jobs if j.start is not None]
    return {
        "first_day": first, "last_day": first + WINDOW_DAYS - 1, "T_trace_s": t, "T_unix": T_UNIX,
        "T_utc": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "window_start_utc": window_start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nodes": [f"{n.sn}:{n.model}:{n.gpu}" for n in nodes.itertuples(index=False)],
        "pods_in_window": len(window_pods(pods, first)), "left_out": left, "jobs": len(jobs),
        "typed_jobs": sum(j.gpu_spec is not None for j in jobs),
        "submitted_by_T": sum(s is not None for s in states.values()),
        "ended_by_T": sum(s == "ended" for s in states.values()),
        "running_at_T": [f"{j.job_id}:{j.pod}:{j.gpu_spec or '-'}:{j.node}" for j in running],
        "pending_at_T": [f"{j.job_id}:{j.pod}:{j.gpu_spec or '-'}:{j.gpus}" for j in pending],
        "replay_jobs_that_waited": sum(j.start > j.submit for j in started),
        "replay_typed_jobs_that_waited": sum(j.start > j.submit and j.gpu_spec is not None for j in started),
        "replay_max_wait_s": max((j.start - j.submit for j in started), default=0),
    }


def main(argv: list[str] | None = None) -> int:
    """Derive the workspace's files into ``--out`` (or, with ``--check``, compare a derivation with them)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data",
                    help="folder of the public traces (absent: the committed snapshots are used)")
    ap.add_argument("--out", type=Path, default=WORKSPACE, help="output folder (default the workspace folder)")
    ap.add_argument("--check", action="store_true", help="derive into a temporary folder and compare with --out")
    args = ap.parse_args(argv)
    if not args.check:
        print(json.dumps(derive(args.shared, args.out), indent=1))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        summary = derive(args.shared, Path(tmp))
        for name in OUTPUTS:
            mine = args.out / name
            if not mine.is_file() or (Path(tmp) / name).read_bytes() != mine.read_bytes():
                print(f"{args.out / name}: differs from a re-derivation (run without --check to rewrite)")
                return 1
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
