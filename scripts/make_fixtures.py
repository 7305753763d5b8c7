"""Write the real-format scheduler and metrics fixtures under data/fixtures/ from the shipped real traces.

Usage (from the repository root)::

    PYTHONPATH=. .venv/bin/python scripts/make_fixtures.py [--shared ../shared/data] [--out data/fixtures]

Inputs: the shipped Alibaba openb pod window (``data/traces/alibaba_openb_window.csv``), the ServeGen
service settings (``data/traffic/services.json``) and, when ``--shared`` holds them, the public traces
(``alibaba-openb-gpu-2023/openb_node_list_gpu_node.csv`` and ``openb_pod_list_default.csv``,
``servegen-bailian-llm-2025/aggregate_10min.csv``). Without the shared folder the script reads the
snapshots it committed from them (``openb/nodes.csv``, ``openb/pod_requests.csv``) and copies the
committed ``servegen/prometheus.json``, so that every output is reproduced byte for byte.

Outputs (``--out``, default ``data/fixtures``; every rule is in ``data/fixtures/README.md``):
``openb/sacct.txt``, ``openb/squeue.json``, ``openb/workloads.json``, ``openb/nodes.csv``,
``openb/pod_requests.csv``, ``servegen/prometheus.json``. The measured counts are printed (JSON) on
stdout. Nothing is random; a re-run writes identical bytes (``tests/pipelines/workspace/sources/test_fixtures.py``).

The export texts are written by the pure writers of :mod:`pipelines.replay.jobs` from the
replayed job table (:func:`jobs_table`); this script derives the jobs, replays them and picks T.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import io
import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipelines.io.atomic import atomic_write_text  # noqa: E402
from pipelines.io.errors import InputError  # noqa: E402
from pipelines.io.trace_io import read_pod_window  # noqa: E402
from pipelines.replay.jobs import REPLAY_COLUMNS, REPLAY_END, job_states_at, replay_csv_text, replay_jobs  # noqa: E402
from pipelines.replay.kueue_exports import kueue_list_text  # noqa: E402
from pipelines.replay.prometheus_exports import prometheus_text  # noqa: E402
from pipelines.replay.slurm_exports import sacct_text, squeue_json_text  # noqa: E402

WINDOW = ROOT / "data" / "traces" / "alibaba_openb_window.csv"
SERVICES = ROOT / "data" / "traffic" / "services.json"
COMMITTED = ROOT / "data" / "fixtures"
OPENB_DIR = "alibaba-openb-gpu-2023"
SERVEGEN_DIR = "servegen-bailian-llm-2025"

#: Slice: the first 8 nodes (by name) of the openb GPU node list that hold 8 GPUs.
SLICE_NODES = 8
GPUS_PER_NODE = 8
#: Subset rule: every k-th non-LS GPU pod of the window by creation time (k = 1: all of them; the
#: window has 333, and a sparser subset would leave fewer than 200 ended jobs before T).
SUBSET_EVERY = 1
#: The export time must leave at least this many ended jobs (history) before it.
MIN_HISTORY = 200
#: Job ids: sequential in arrival order from this base.
BASE_JOB_ID = 700001
#: The cluster's local clock (the ServeGen services' zone, data/traffic/services.json).
TZ_NAME = "Asia/Shanghai"
#: ``sacct -S`` of the fixture export (local): without it sacct lists only jobs since midnight.
SACCT_START_LOCAL = "2025-03-15T00:00:00"
#: The ServeGen aggregate's window (s); the Prometheus step.
STEP_S = 600
#: The Prometheus query's range (days): the aggregate's 2,016 ten-minute windows per model.
PROM_DAYS = 14
PROM_QUERY = "sum by (service) (rate(llm_requests_total[10m]))"
#: Replayed week: this many consecutive trace days of pod creations, the busiest such span (most
#: non-LS GPU pods) of the full pod list; job ids from WEEK_BASE_JOB_ID (apart from the window's).
WEEK_DAYS = 7
WEEK_BASE_JOB_ID = 800001
DAY_S = 86400


@dataclass(frozen=True)
class Node:
    """One node of the slice: name, GPUs, GPU model (openb code), CPU (milli-cores), memory (MiB)."""

    name: str
    gpus: int
    model: str
    cpu_milli: int
    memory_mib: int


@dataclass
class Job:
    """One pod of the window as a job; times in seconds relative to the window start.

    ``run_s`` is the pod's real run time (deletion - scheduled), None when it was still running at
    the trace end (unknown); ``held`` marks a pod the trace never scheduled (deleted while pending).
    ``start_s``/``end_s``/``node`` are the replay's (None: not started / not ended); a held job's
    ``end_s`` is its deletion (None when deleted at the trace end).
    """

    job_id: int
    pod: str
    qos: str
    gpus: int
    phase: str
    cpu_milli: int
    memory_mib: int
    submit_s: int
    deletion_s: int
    run_s: int | None
    held: bool
    start_s: int | None = None
    end_s: int | None = None
    node: Node | None = None


# ---------------------------------------------------------------- inputs


def _write_csv(path: Path, header: Iterable[str], rows: Iterable[Iterable[object]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(header))
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue(), make_parents=True)


def load_nodes(shared: Path, out: Path) -> list[Node]:
    """The slice's nodes: the first :data:`SLICE_NODES` 8-GPU nodes by name of the openb GPU node list.

    Reads ``<shared>/alibaba-openb-gpu-2023/openb_node_list_gpu_node.csv`` (columns sn, cpu_milli,
    memory_mib, gpu, model) when present, else the committed ``openb/nodes.csv``; writes
    ``<out>/openb/nodes.csv``. Raises InputError when neither is there or too few nodes qualify.
    """
    src = shared / OPENB_DIR / "openb_node_list_gpu_node.csv"
    if src.is_file():
        nl = pd.read_csv(src)
        eight = nl[nl["gpu"] == GPUS_PER_NODE].sort_values("sn").head(SLICE_NODES)
        nodes = [Node(str(r.sn), int(r.gpu), str(r.model), int(r.cpu_milli), int(r.memory_mib))
                 for r in eight.itertuples(index=False)]
    else:
        snap = COMMITTED / "openb" / "nodes.csv"
        if not snap.is_file():
            raise InputError(f"node list: neither {src} nor the committed {snap} exists")
        nc = pd.read_csv(snap)
        nodes = [Node(str(r.name), int(r.gpus), str(r.model), int(r.cpu_milli), int(r.memory_mib))
                 for r in nc.itertuples(index=False)]
    if len(nodes) != SLICE_NODES:
        raise InputError(f"node list: {len(nodes)} nodes with {GPUS_PER_NODE} GPUs, expected {SLICE_NODES}")
    _write_csv(out / "openb" / "nodes.csv", ("name", "gpus", "model", "cpu_milli", "memory_mib"),
               ((n.name, n.gpus, n.model, n.cpu_milli, n.memory_mib) for n in nodes))
    return nodes


def load_pod_requests(shared: Path, out: Path, names: list[str]) -> dict[str, tuple[int, int]]:
    """CPU (milli-cores) and memory (MiB) requested by each pod in ``names`` (the window lacks them).

    Reads ``<shared>/alibaba-openb-gpu-2023/openb_pod_list_default.csv`` when present, else the
    committed ``openb/pod_requests.csv``; writes ``<out>/openb/pod_requests.csv`` (name, cpu_milli,
    memory_mib; window order). Raises InputError when a pod is missing.
    """
    src = shared / OPENB_DIR / "openb_pod_list_default.csv"
    if src.is_file():
        table = pd.read_csv(src, usecols=["name", "cpu_milli", "memory_mib"]).set_index("name")
    else:
        snap = COMMITTED / "openb" / "pod_requests.csv"
        if not snap.is_file():
            raise InputError(f"pod requests: neither {src} nor the committed {snap} exists")
        table = pd.read_csv(snap).set_index("name")
    missing = [n for n in names if n not in table.index]
    if missing:
        raise InputError(f"pod requests: pod {missing[0]!r} not in the pod list ({len(missing)} missing)")
    req = {n: (int(table.at[n, "cpu_milli"]), int(table.at[n, "memory_mib"])) for n in names}
    _write_csv(out / "openb" / "pod_requests.csv", ("name", "cpu_milli", "memory_mib"),
               ((n, *req[n]) for n in names))
    return req


def write_prometheus(shared: Path, out: Path) -> int:
    """Write ``<out>/servegen/prometheus.json`` and return its last sample time (unix s), i.e. T.

    From ``<shared>/servegen-bailian-llm-2025/aggregate_10min.csv`` (rows of the two services'
    models, ``total_rate_rps`` verbatim): the window ``[t_s, t_s + 600)`` is the sample at
    ``t0 + t_s + 600`` (``rate(x[10m])`` at t covers the 10 minutes before t), ``t0`` =
    ``trace_start_local`` in the services' zone (data/traffic/services.json). Series sorted by label
    as Prometheus returns them. Without the shared file the committed body is copied. The body is
    compact JSON without a trailing newline, like the HTTP response. Format source: Prometheus HTTP
    API docs (query_range, range vectors) and ``MarshalTimestamp``/``MarshalFloat``.
    """
    src = shared / SERVEGEN_DIR / "aggregate_10min.csv"
    dst = out / "servegen" / "prometheus.json"
    if src.is_file():
        cfg = json.loads(SERVICES.read_text())
        zones = {s["timezone"] for s in cfg["services"]}
        if len(zones) != 1:
            raise InputError(f"{SERVICES}: services in several time zones {sorted(zones)}")
        t0 = int(pd.Timestamp(cfg["trace_start_local"]).tz_localize(zones.pop()).timestamp())
        with src.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        series = []
        for svc in sorted(cfg["services"], key=lambda s: s["service"]):
            mine = sorted((int(r["t_s"]), float(r["total_rate_rps"])) for r in rows if r["model"] == svc["source_model"])
            if not mine:
                raise InputError(f"{src}: no rows for model {svc['source_model']!r}")
            bad = [t for t, _ in mine if t % STEP_S]
            if bad:
                raise InputError(f"{src}: t_s {bad[0]} of {svc['source_model']} is not on the {STEP_S} s grid")
            series.append({"metric": {"service": svc["service"]}, "values": [[t0 + t + STEP_S, v] for t, v in mine]})
        last = max(v[0] for s in series for v in s["values"])
        doc = {"status": "success", "data": {"resultType": "matrix", "result": series}}
        body = prometheus_text(doc, pd.Timestamp(last, unit="s", tz="UTC"), PROM_DAYS)
        atomic_write_text(dst, body, make_parents=True)
    else:
        snap = COMMITTED / "servegen" / "prometheus.json"
        if not snap.is_file():
            raise InputError(f"traffic: neither {src} nor the committed {snap} exists")
        body = snap.read_text()
        if snap.resolve() != dst.resolve():
            atomic_write_text(dst, body, make_parents=True)
    parsed = json.loads(body)
    return int(max(v[0] for s in parsed["data"]["result"] for v in s["values"]))


# ---------------------------------------------------------------- replay


def build_jobs(pods: pd.DataFrame, requests: dict[str, tuple[int, int]], *, trace_end: int | None = None,
               base_id: int = BASE_JOB_ID, every: int = SUBSET_EVERY) -> list[Job]:
    """The non-LS GPU pods of ``pods`` (every ``every``-th by creation time) as jobs, ids from ``base_id``.

    ``pods`` has the window's columns (name, qos, num_gpu, pod_phase, creation_s, scheduled_s,
    deletion_s); ``trace_end`` defaults to its last deletion time. Run time = ``deletion_s -
    scheduled_s``; None for a pod still alive at the trace end (its ``deletion_s`` is the trace end).
    A pod without ``scheduled_s`` is ``held``: the trace never ran it; it ends (is cancelled) at its
    deletion, never when that is the trace end. Raises InputError for a pod wider than one node.
    """
    trace_end = int(pods["deletion_s"].max()) if trace_end is None else trace_end
    chosen = pods[(pods["qos"] != "LS") & (pods["num_gpu"] >= 1)].sort_values(["creation_s", "name"])
    chosen = chosen.iloc[::every]
    jobs = []
    for i, r in enumerate(chosen.itertuples(index=False)):
        if int(r.num_gpu) > GPUS_PER_NODE:
            raise InputError(f"pod {r.name}: {r.num_gpu} GPUs do not fit one {GPUS_PER_NODE}-GPU node")
        held = pd.isna(r.scheduled_s)
        run = None if held or int(r.deletion_s) >= trace_end else int(r.deletion_s) - int(r.scheduled_s)
        cpu, mem = requests[str(r.name)]
        job = Job(base_id + i, str(r.name), str(r.qos), int(r.num_gpu), str(r.pod_phase), cpu, mem,
                  int(r.creation_s), int(r.deletion_s), run, held)
        if held and job.deletion_s < trace_end:
            job.end_s = job.deletion_s
        jobs.append(job)
    return jobs


def replay(jobs: list[Job], nodes: list[Node]) -> None:
    """Strict FIFO in arrival order on the slice; sets ``start_s``, ``end_s``, ``node`` of each non-held job.

    A job starts at the earliest time >= its arrival and >= the previous job's start when one node
    has its GPUs, CPUs and memory free; of such nodes it takes the smallest (fewest CPUs, then least
    memory, then name: small pods stay off the one large node that the largest pods need). It ends
    ``run_s`` later (never when ``run_s`` is None). Held jobs never start and hold nothing. Raises InputError when a job
    can never fit.
    """
    free = {n.name: [n.gpus, n.cpu_milli, n.memory_mib] for n in nodes}
    by_size = sorted(nodes, key=lambda n: (n.cpu_milli, n.memory_mib, n.gpus, n.name))
    running: list[tuple[float, int, str, int, int, int]] = []
    last_start = None
    for job in jobs:
        if job.held:
            continue
        t = job.submit_s if last_start is None else max(job.submit_s, last_start)
        while True:
            while running and running[0][0] <= t:
                _, _, name, g, c, m = heapq.heappop(running)
                free[name][0] += g
                free[name][1] += c
                free[name][2] += m
            node = next((n for n in by_size if free[n.name][0] >= job.gpus and free[n.name][1] >= job.cpu_milli
                         and free[n.name][2] >= job.memory_mib), None)
            if node is not None:
                break
            if not running or math.isinf(running[0][0]):
                raise InputError(f"pod {job.pod}: never fits the slice ({job.gpus} GPUs)")
            t = int(running[0][0])
        free[node.name][0] -= job.gpus
        free[node.name][1] -= job.cpu_milli
        free[node.name][2] -= job.memory_mib
        job.start_s, job.node = t, node
        job.end_s = None if job.run_s is None else t + job.run_s
        heapq.heappush(running, (math.inf if job.end_s is None else job.end_s, job.job_id, node.name,
                                 job.gpus, job.cpu_milli, job.memory_mib))
        last_start = t


def status_at(job: Job, t: int) -> str | None:
    """The job's state at time t: None (not yet submitted), 'pending', 'running' or 'ended'."""
    if job.submit_s > t:
        return None
    if job.held:
        return "pending" if job.end_s is None or job.end_s > t else "ended"
    if job.start_s is None or job.start_s > t:
        return "pending"
    return "running" if job.end_s is None or job.end_s > t else "ended"


def scan_minutes(jobs: list[Job], horizon_s: int) -> list[tuple[int, int, int, int]]:
    """(t, ended, pending, running) job counts at every round minute t in ``[0, horizon_s]`` (window seconds)."""
    out = []
    for t in range(0, horizon_s + 1, 60):
        states = [status_at(j, t) for j in jobs]
        out.append((t, states.count("ended"), states.count("pending"), states.count("running")))
    return out


def choose_export_time(scan: list[tuple[int, int, int, int]]) -> int:
    """The export time T (window seconds) from :func:`scan_minutes`.

    Among minutes with at least :data:`MIN_HISTORY` ended jobs, the one with the most pending
    jobs, then the most running + pending, then the latest. Raises InputError when none qualifies.
    """
    keys = [(pending, pending + running, t) for t, ended, pending, running in scan if ended >= MIN_HISTORY]
    if not keys:
        raise InputError(f"no export time leaves {MIN_HISTORY} ended jobs")
    return max(keys)[2]


# ---------------------------------------------------------------- job table


class Clock:
    """Replay seconds -> unix seconds: replay second ``t_rel`` is unix ``t_export``; local text in :data:`TZ_NAME`."""

    def __init__(self, t_rel: int, t_export: int) -> None:
        """Map replay second ``t_rel`` onto unix second ``t_export``."""
        self.offset = t_export - t_rel
        self.zone = ZoneInfo(TZ_NAME)

    def epoch(self, rel: int) -> int:
        """Unix seconds of replay second ``rel``."""
        return rel + self.offset

    def local(self, rel: int) -> str:
        """Local wall clock without offset, as sacct prints it: ``2025-03-17T09:12:44``."""
        return datetime.fromtimestamp(self.epoch(rel), self.zone).strftime("%Y-%m-%dT%H:%M:%S")

    def utc(self, rel: int) -> str:
        """RFC 3339 UTC with ``Z``, as Kubernetes prints timestamps."""
        return datetime.fromtimestamp(self.epoch(rel), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def stamp(self, rel: int | None) -> pd.Timestamp:
        """The UTC timestamp of replay second ``rel`` (NaT for None)."""
        return pd.NaT if rel is None else pd.Timestamp(self.epoch(rel), unit="s", tz="UTC")


def final_state(job: Job) -> str:
    """How a replayed job ends (``pipelines.replay.jobs.FINAL_STATES``).

    Never scheduled: CANCELLED at its deletion (PENDING when that is the trace end, ``run_s`` None
    is then irrelevant); never ending (``run_s`` None): RUNNING; pod_phase Failed: FAILED; else COMPLETED.
    """
    if job.held:
        return "CANCELLED" if job.end_s is not None else "PENDING"
    if job.end_s is None:
        return "RUNNING"
    return "FAILED" if job.phase == "Failed" else "COMPLETED"


def jobs_table(jobs: list[Job], clock: Clock) -> pd.DataFrame:
    """The replayed jobs as the export writers' job table (``pipelines.replay.jobs.REPLAY_COLUMNS``).

    A held job's ``ended_at`` is its deletion (its cancel time), NaT when deleted at the trace end.
    """
    rows = []
    for j in jobs:
        rows.append({"job_id": j.job_id, "pod": j.pod, "qos": j.qos, "gpus": j.gpus, "cpu_milli": j.cpu_milli,
                     "memory_mib": j.memory_mib, "node": None if j.node is None else j.node.name,
                     "node_model": None if j.node is None else j.node.model, "submitted_at": clock.stamp(j.submit_s),
                     "started_at": clock.stamp(j.start_s), "ended_at": clock.stamp(j.end_s), "final_state": final_state(j)})
    return replay_jobs(pd.DataFrame(rows, columns=list(REPLAY_COLUMNS)))


# ---------------------------------------------------------------- replayed week


def choose_week(pods: pd.DataFrame, days: int = WEEK_DAYS) -> int:
    """First trace day of the ``days`` consecutive creation days with the most non-LS GPU pods (earliest on a tie).

    ``pods``: the pod list with ``creation_s`` (trace seconds), ``qos``, ``num_gpu``. Day k is
    ``[k * 86400, (k + 1) * 86400)`` trace seconds.
    """
    batch = pods[(pods["qos"] != "LS") & (pods["num_gpu"] >= 1)]
    per_day = (batch["creation_s"] // DAY_S).astype(int).value_counts()
    last = int(per_day.index.max())
    spans = [(sum(int(per_day.get(d, 0)) for d in range(first, first + days)), -first)
             for first in range(int(per_day.index.min()), last - days + 2)]
    return -max(spans)[1]


def write_replay_week(shared: Path, out: Path, nodes: list[Node]) -> int | None:
    """Write ``<out>/openb/replay_week.csv``: a week of openb pods replayed FIFO on the slice; return its first trace day.

    From ``<shared>/alibaba-openb-gpu-2023/openb_pod_list_default.csv``: the non-LS GPU pods created
    in the :data:`WEEK_DAYS` trace days from :func:`choose_week`, as jobs (:func:`build_jobs`, the
    trace end = the list's last deletion time, ids from :data:`WEEK_BASE_JOB_ID`) replayed with
    :func:`replay` on ``nodes``; the end of the last day (trace second ``(first + 7) * 86400``) is
    ``pipelines.replay.jobs.REPLAY_END`` (2025-03-16T16:00:00Z), one trace second one second.
    The table is written by ``pipelines.replay.jobs.replay_csv_text``. Without the shared file
    the committed CSV is copied (returns None). Raises InputError when neither is there.
    """
    src = shared / OPENB_DIR / "openb_pod_list_default.csv"
    dst = out / "openb" / "replay_week.csv"
    if not src.is_file():
        snap = COMMITTED / "openb" / "replay_week.csv"
        if not snap.is_file():
            raise InputError(f"replayed week: neither {src} nor the committed {snap} exists")
        if snap.resolve() != dst.resolve():
            atomic_write_text(dst, snap.read_text(), make_parents=True)
        return None
    pl = pd.read_csv(src).rename(columns={"creation_time": "creation_s", "scheduled_time": "scheduled_s",
                                          "deletion_time": "deletion_s"})
    first = choose_week(pl)
    week = pl[(pl["creation_s"] >= first * DAY_S) & (pl["creation_s"] < (first + WEEK_DAYS) * DAY_S)]
    requests = {str(r.name): (int(r.cpu_milli), int(r.memory_mib)) for r in week.itertuples(index=False)}
    jobs = build_jobs(week, requests, trace_end=int(pl["deletion_s"].max()), base_id=WEEK_BASE_JOB_ID, every=1)
    replay(jobs, nodes)
    clock = Clock((first + WEEK_DAYS) * DAY_S, int(REPLAY_END.timestamp()))
    atomic_write_text(dst, replay_csv_text(jobs_table(jobs, clock)), make_parents=True)
    return first


def summarize_week(path: Path) -> dict:
    """Per-day counts of the replayed week (for the README): jobs submitted in each day ``(T_d - 1 day, T_d]``,
    their GPUs, and the jobs pending/running/ended at each day's T_d (``T_d = REPLAY_END - (6 - d)`` days)."""
    table = replay_jobs(pd.read_csv(path, dtype=str, keep_default_na=False))
    days = []
    for d in range(WEEK_DAYS):
        t = REPLAY_END - pd.Timedelta(days=WEEK_DAYS - 1 - d)
        mine = table[(table["submitted_at"] > t - pd.Timedelta(days=1)) & (table["submitted_at"] <= t)]
        states = job_states_at(table, t)
        days.append({"T": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "submitted": len(mine), "gpus": int(mine["gpus"].sum()),
                     "pending": int((states == "pending").sum()), "running": int((states == "running").sum()),
                     "ended": int((states == "ended").sum()),
                     "running_ids": [int(i) for i in states.index[states == "running"]]})
    started = table[table["started_at"].notna()]
    return {"jobs": len(table), "final_states": {k: int(v) for k, v in table["final_state"].value_counts().items()},
            "waited": int((started["started_at"] > started["submitted_at"]).sum()),
            "first_submit": table["submitted_at"].min().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "last_submit": table["submitted_at"].max().strftime("%Y-%m-%dT%H:%M:%SZ"), "days": days}


# ---------------------------------------------------------------- main


def summarize(jobs: list[Job], t: int, clock: Clock, nodes: list[Node], scan: list[tuple[int, int, int, int]]) -> dict:
    """The measured counts printed for the README."""
    by = {"ended": [], "running": [], "pending": []}
    for j in jobs:
        st = status_at(j, t)
        if st is not None:
            by[st].append(j)
    started_hist = [j for j in by["ended"] if not j.held]
    waits = [j.start_s - j.submit_s for j in jobs if j.start_s is not None]
    events = sorted([(j.start_s, 1, j.gpus) for j in jobs if j.start_s is not None]
                    + [(j.end_s, -1, -j.gpus) for j in jobs if j.start_s is not None and j.end_s is not None])
    busy_jobs = busy_gpus = peak_jobs = peak_gpus = 0
    for _, dj, dg in events:  # ends sort before starts at the same second
        busy_jobs, busy_gpus = busy_jobs + dj, busy_gpus + dg
        peak_jobs, peak_gpus = max(peak_jobs, busy_jobs), max(peak_gpus, busy_gpus)
    return {
        "T_local": clock.local(t), "T_utc": clock.utc(t), "T_unix": clock.epoch(t), "T_window_s": t,
        "window_start_local": clock.local(0),
        "jobs_in_window": len(jobs), "jobs_submitted_by_T": sum(len(v) for v in by.values()),
        "history": len(by["ended"]), "history_completed": sum(j.phase != "Failed" for j in started_hist),
        "history_failed": sum(j.phase == "Failed" for j in started_hist),
        "history_cancelled_pending": sum(j.held for j in by["ended"]),
        "running_at_T": len(by["running"]), "pending_at_T": len(by["pending"]),
        "history_gpu_hours": round(sum(j.gpus * (j.end_s - j.start_s) for j in started_hist) / 3600, 2),
        "running_gpu_hours_so_far": round(sum(j.gpus * (t - j.start_s) for j in by["running"]) / 3600, 2),
        "gpus_busy_at_T": sum(j.gpus for j in by["running"]),
        "replay_max_wait_s": max(waits), "replay_jobs_that_waited": sum(w > 0 for w in waits),
        "replay_peak_running_jobs": peak_jobs, "replay_peak_gpus_busy": peak_gpus,
        "max_pending_any_minute": max(p for _, _, p, _ in scan),
        "max_pending_with_history": max(p for _, e, p, _ in scan if e >= MIN_HISTORY),
        "max_active_with_history": max(p + r for _, e, p, r in scan if e >= MIN_HISTORY),
        "nodes": [f"{n.name}:{n.model}" for n in nodes],
    }


def main(argv: list[str] | None = None) -> int:
    """Derive every fixture into ``--out``; print the measured counts as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data",
                    help="folder of the public traces (absent: the committed snapshots are used)")
    ap.add_argument("--out", type=Path, default=COMMITTED, help="output folder (default data/fixtures)")
    args = ap.parse_args(argv)

    t_export = write_prometheus(args.shared, args.out)
    nodes = load_nodes(args.shared, args.out)
    window = read_pod_window(WINDOW, ("name", "qos", "num_gpu", "gpu_milli", "pod_phase", "creation_s",
                                      "scheduled_s", "deletion_s"))
    names = window[(window["qos"] != "LS") & (window["num_gpu"] >= 1)].sort_values(["creation_s", "name"])["name"]
    requests = load_pod_requests(args.shared, args.out, [str(n) for n in names.iloc[::SUBSET_EVERY]])
    jobs = build_jobs(window, requests)
    replay(jobs, nodes)
    window_end = int(window.loc[(window["qos"] != "LS"), "creation_s"].max())
    scan = scan_minutes(jobs, (window_end // 60 + 1) * 60)
    t = choose_export_time(scan)
    clock = Clock(t, t_export)

    table = jobs_table(jobs, clock)
    at = clock.stamp(t)
    openb = args.out / "openb"
    sacct_start = pd.Timestamp(SACCT_START_LOCAL).tz_localize(TZ_NAME)
    atomic_write_text(openb / "sacct.txt", sacct_text(table, at, sacct_start, TZ_NAME), make_parents=True)
    atomic_write_text(openb / "squeue.json", squeue_json_text(table, at), make_parents=True)
    atomic_write_text(openb / "workloads.json", kueue_list_text(table, at), make_parents=True)
    summary = summarize(jobs, t, clock, nodes, scan)
    summary["prometheus_end_utc"] = datetime.fromtimestamp(t_export, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = json.loads((args.out / "servegen" / "prometheus.json").read_text())
    summary["prometheus_series"] = {s["metric"]["service"]: len(s["values"]) for s in doc["data"]["result"]}
    first = min(v[0] for s in doc["data"]["result"] for v in s["values"])
    summary["prometheus_span_days"] = (t_export - first + STEP_S) / 86400
    summary["prometheus_zero_samples"] = {s["metric"]["service"]: sum(v[1] == "0" for v in s["values"])
                                          for s in doc["data"]["result"]}
    summary["window_start_plus"] = str(timedelta(seconds=t))
    first_day = write_replay_week(args.shared, args.out, nodes)
    if first_day is not None:
        summary["replay_week_trace_days"] = [first_day, first_day + WEEK_DAYS - 1]
    summary["replay_week"] = summarize_week(openb / "replay_week.csv")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
