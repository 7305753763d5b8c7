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
stdout. Nothing is random; a re-run writes identical bytes (``tests/test_fixtures.py``).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import heapq
import io
import json
import math
import sys
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipelines.atomic import atomic_write_text  # noqa: E402
from pipelines.errors import InputError  # noqa: E402
from pipelines.trace_io import read_pod_window  # noqa: E402

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
USER = ACCOUNT = NAMESPACE = "openb"
PARTITION = QUEUE_NAME = "gpu"
CLUSTER_QUEUE = "openb-gpu"
CLUSTER_NAME = "openb"
#: Priority by QoS: 1000 x the benchmark's QoS weight (domain.kinds.QOS_PRIORITY: Guaranteed 4,
#: Burstable 2, BE 1), used as the Slurm Priority and the Kueue workload priority.
QOS_PRIORITY = {"Guaranteed": 4000, "Burstable": 2000, "BE": 1000}
#: Slurm sets the end_time of a running job without a time limit to start + one year (slurmctld).
UNLIMITED_END_S = 365 * 24 * 3600
#: The ServeGen aggregate's window (s); the Prometheus step.
STEP_S = 600
PROM_QUERY = "sum by (service) (rate(llm_requests_total[10m]))"
SACCT_FIELDS = ("JobID", "JobName", "User", "Account", "Partition", "QOS", "Priority", "Submit", "Eligible",
                "Start", "End", "Elapsed", "Timelimit", "State", "ReqTRES", "AllocTRES", "NodeList", "Comment")
UID_NS = uuid.UUID("6f1d7f3e-3c55-5b8e-9a57-6a3c1f0e2b11")


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
    ``start_s``/``end_s``/``node`` are the replay's (None: not started / not ended).
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


def go_float(value: float) -> str:
    """A sample value as Prometheus prints it: Go ``strconv.FormatFloat(v, 'f', -1, 64)``.

    Source: prometheus ``util/jsonutil/marshal.go`` (``MarshalFloat``: format 'e' only below 1e-6
    or from 1e21 on). Shortest round-trip digits, positional, no trailing ``.0``.
    """
    if not math.isfinite(value):
        raise InputError(f"prometheus value {value!r} is not finite")
    a = abs(value)
    if a != 0 and (a < 1e-6 or a >= 1e21):
        raise InputError(f"prometheus value {value!r} would print in exponent form (not expected here)")
    return np.format_float_positional(value, unique=True, trim="-")


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
            vals = ",".join(f'[{t0 + t + STEP_S},"{go_float(v)}"]' for t, v in mine)
            series.append(f'{{"metric":{{"service":"{svc["service"]}"}},"values":[{vals}]}}')
        body = '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(series) + "]}}"
        atomic_write_text(dst, body, make_parents=True)
    else:
        snap = COMMITTED / "servegen" / "prometheus.json"
        if not snap.is_file():
            raise InputError(f"traffic: neither {src} nor the committed {snap} exists")
        body = snap.read_text()
        if snap.resolve() != dst.resolve():
            atomic_write_text(dst, body, make_parents=True)
    doc = json.loads(body)
    return int(max(v[0] for s in doc["data"]["result"] for v in s["values"]))


# ---------------------------------------------------------------- replay


def build_jobs(window: pd.DataFrame, requests: dict[str, tuple[int, int]]) -> list[Job]:
    """The non-LS GPU pods of the window (every :data:`SUBSET_EVERY`-th by creation time) as jobs.

    Run time = ``deletion_s - scheduled_s``; None for a pod still alive at the trace end (its
    ``deletion_s`` equals the window file's last deletion time, the trace end). A pod without
    ``scheduled_s`` is ``held``: the trace never ran it (it was deleted while pending).
    """
    trace_end = int(window["deletion_s"].max())
    pods = window[(window["qos"] != "LS") & (window["num_gpu"] >= 1)].sort_values(["creation_s", "name"])
    pods = pods.iloc[::SUBSET_EVERY]
    jobs = []
    for i, r in enumerate(pods.itertuples(index=False)):
        if int(r.num_gpu) > GPUS_PER_NODE:
            raise InputError(f"pod {r.name}: {r.num_gpu} GPUs do not fit one {GPUS_PER_NODE}-GPU node")
        held = pd.isna(r.scheduled_s)
        run = None if held or int(r.deletion_s) >= trace_end else int(r.deletion_s) - int(r.scheduled_s)
        cpu, mem = requests[str(r.name)]
        jobs.append(Job(BASE_JOB_ID + i, str(r.name), str(r.qos), int(r.num_gpu), str(r.pod_phase), cpu, mem,
                        int(r.creation_s), int(r.deletion_s), run, held))
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
        return "pending" if job.deletion_s > t else "ended"
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


# ---------------------------------------------------------------- formatting helpers


def elapsed_str(seconds: int) -> str:
    """Slurm's ``[D-]HH:MM:SS`` (sacct ``_elapsed_time``: days prefix only when >= 1 day)."""
    d, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def mem_str(mib: int) -> str:
    """A TRES memory count as Slurm prints it (exact unit conversion only): 16384 -> 16G, 5600 -> 5600M."""
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def cpus(job: Job) -> int:
    """Whole CPUs for a pod's ``cpu_milli`` (Slurm allocates whole CPUs): ceil(milli / 1000), at least 1."""
    return max(1, -(-job.cpu_milli // 1000))


def tres(job: Job, *, alloc: bool, billing: bool = True) -> dict[str, str]:
    """The job's TRES as name -> count text (mem left out when the pod requests 0 MiB)."""
    out = {"cpu": str(cpus(job)), "node": "1", "gres/gpu": str(job.gpus)}
    if billing:
        out["billing"] = str(cpus(job))
    if job.memory_mib > 0:
        out["mem"] = mem_str(job.memory_mib)
    if alloc and job.node is not None:
        out[f"gres/gpu:{job.node.model.lower()}"] = str(job.gpus)
    return out


def sacct_tres(items: dict[str, str]) -> str:
    """sacct's ReqTRES/AllocTRES text: ``name=count`` sorted as sacct prints them (by that text)."""
    return ",".join(sorted(f"{k}={v}" for k, v in items.items()))


#: TRES ids (slurmdb: cpu 1, mem 2, node 4, billing 5, GRES after): squeue's tres_*_str order.
_TRES_ORDER = {"cpu": 0, "mem": 1, "node": 2, "billing": 3}


def squeue_tres(items: dict[str, str]) -> str:
    """squeue's tres_req_str/tres_alloc_str text: cpu, mem, node, billing, then GRES (untyped first)."""
    keys = sorted(items, key=lambda k: (_TRES_ORDER.get(k, 9), k))
    return ",".join(f"{k}={items[k]}" for k in keys)


def k8s_cpu(milli: int) -> str:
    """A CPU quantity in Kubernetes canonical form: 4000 -> "4", 3152 -> "3152m"."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def k8s_mem(mib: int) -> str:
    """A memory quantity in Kubernetes canonical form: 16384 -> "16Gi", 5600 -> "5600Mi"."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


# ---------------------------------------------------------------- writers


class Clock:
    """Replay seconds -> cluster clock: ``T`` (replay) is ``t_export`` (unix s) in zone :data:`TZ_NAME`."""

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


def sacct_lines(jobs: list[Job], t: int, clock: Clock) -> list[str]:
    """The sacct ``--parsable2`` lines (header first) of every job submitted by T.

    Field rules follow Slurm's ``src/sacct/print.c``: steps print no User, Partition, QOS,
    Priority, Timelimit, ReqTRES or Comment; a step's Submit and Eligible are its start; the batch
    step's AllocTRES has no billing; unknown times print ``Unknown``; CANCELLED without a known
    requester prints no ``by <uid>``. A job ended while pending has Start = End (slurmctld sets
    both to the cancel time), no node and no steps.
    """
    lines = ["|".join(SACCT_FIELDS)]
    for job in jobs:
        st = status_at(job, t)
        if st is None:
            continue
        prio = str(QOS_PRIORITY[job.qos])
        submit = clock.local(job.submit_s)
        base = [str(job.job_id), job.pod, USER, ACCOUNT, PARTITION, job.qos.lower(), prio, submit, submit]
        req = sacct_tres(tres(job, alloc=False))
        if job.held or st == "pending":
            if st == "pending":
                start = end = "Unknown"
                state = "PENDING"
            else:
                start = end = clock.local(job.deletion_s)
                state = "CANCELLED"
            lines.append("|".join([*base, start, end, "00:00:00", "UNLIMITED", state, req, "", "None assigned", ""]))
            continue
        assert job.start_s is not None and job.node is not None
        start = clock.local(job.start_s)
        if st == "running":
            end, el, state, step_state = "Unknown", elapsed_str(t - job.start_s), "RUNNING", ("RUNNING", "RUNNING")
        else:
            assert job.end_s is not None
            end, el = clock.local(job.end_s), elapsed_str(job.end_s - job.start_s)
            if job.phase == "Failed":
                state, step_state = "FAILED", ("FAILED", "COMPLETED")
            else:
                state, step_state = "COMPLETED", ("COMPLETED", "COMPLETED")
        alloc = sacct_tres(tres(job, alloc=True))
        lines.append("|".join([*base, start, end, el, "UNLIMITED", state, req, alloc, job.node.name, ""]))
        batch_alloc = sacct_tres(tres(job, alloc=True, billing=False))
        for step, step_alloc, sst in (("batch", batch_alloc, step_state[0]), ("extern", alloc, step_state[1])):
            lines.append("|".join([f"{job.job_id}.{step}", step, "", ACCOUNT, "", "", "", start, start, start, end,
                                   el, "", sst, "", step_alloc, job.node.name, ""]))
    return lines


def _num(n: int | float, *, is_set: bool = True, infinite: bool = False) -> dict:
    return {"set": is_set, "infinite": infinite, "number": n}


def _exit(status: str = "SUCCESS") -> dict:
    return {"status": [status], "return_code": _num(0), "signal": {"id": _num(0, is_set=False), "name": ""}}


def squeue_job(job: Job, t: int, clock: Clock) -> dict:
    """One job of ``squeue --json`` (data_parser v0.0.40, Slurm 23.11) at T, fields in Slurm's order.

    Field names and shapes: a real 23.11.1 ``/slurm/v0.0.40/jobs`` response and slurmrestd 24.05 output
    (same job fields, v0.0.40 ``job_resources`` shape). Values the trace does not have are neutral
    (empty text, ``set: false``) or the placeholders listed in data/fixtures/README.md.
    """
    running = status_at(job, t) == "running"
    ncpu = cpus(job)
    submit = clock.epoch(job.submit_s)
    start = clock.epoch(job.start_s) if running and job.start_s is not None else 0
    node = job.node.name if running and job.node is not None else ""
    if running:
        resources = {"allocated_cores": ncpu, "allocated_cpus": 0, "allocated_hosts": 1,
                     "allocated_nodes": [{"nodename": node, "cpus_used": 0, "memory_used": 0,
                                          "memory_allocated": job.memory_mib}],
                     "nodes": node}
    else:
        resources = {}
    return {
        "account": ACCOUNT, "accrue_time": _num(submit), "admin_comment": "", "allocating_node": "",
        "array_job_id": _num(0), "array_task_id": _num(0, is_set=False), "array_max_tasks": _num(0),
        "array_task_string": "", "association_id": 0, "batch_features": "", "batch_flag": True, "batch_host": node,
        "flags": [], "burst_buffer": "", "burst_buffer_state": "", "cluster": CLUSTER_NAME, "cluster_features": "",
        "command": "", "comment": "", "container": "", "container_id": "", "contiguous": False, "core_spec": 0,
        "thread_spec": 32766, "cores_per_socket": _num(0, is_set=False), "billable_tres": _num(float(ncpu)),
        "cpus_per_task": _num(1), "cpu_frequency_minimum": _num(0, is_set=False),
        "cpu_frequency_maximum": _num(0, is_set=False), "cpu_frequency_governor": _num(0, is_set=False),
        "cpus_per_tres": "", "cron": "", "deadline": _num(0), "delay_boot": _num(0), "dependency": "",
        "derived_exit_code": _exit(), "eligible_time": _num(submit),
        "end_time": _num(start + UNLIMITED_END_S if running else 0), "excluded_nodes": "", "exit_code": _exit(),
        "extra": "", "failed_node": "", "features": "", "federation_origin": "", "federation_siblings_active": "",
        "federation_siblings_viable": "", "gres_detail": [], "group_id": 1000, "group_name": USER,
        "het_job_id": _num(0), "het_job_id_set": "", "het_job_offset": _num(0), "job_id": job.job_id,
        "job_resources": resources, "job_size_str": [], "job_state": ["RUNNING" if running else "PENDING"],
        "last_sched_evaluation": _num(start if running else clock.epoch(t)), "licenses": "", "mail_type": [],
        "mail_user": "", "max_cpus": _num(0), "max_nodes": _num(0), "mcs_label": "", "memory_per_tres": "",
        "name": job.pod, "network": "", "nodes": node, "nice": 0,
        "tasks_per_core": _num(0, is_set=False, infinite=True), "tasks_per_tres": _num(0), "tasks_per_node": _num(0),
        "tasks_per_socket": _num(0, is_set=False, infinite=True), "tasks_per_board": _num(0), "cpus": _num(ncpu),
        "node_count": _num(1), "tasks": _num(1), "partition": PARTITION, "prefer": "",
        "memory_per_cpu": _num(0, is_set=False), "memory_per_node": _num(job.memory_mib),
        "minimum_cpus_per_node": _num(ncpu), "minimum_tmp_disk_per_node": _num(0), "power": {"flags": []},
        "preempt_time": _num(0), "preemptable_time": _num(0), "pre_sus_time": _num(0),
        "priority": _num(QOS_PRIORITY[job.qos]), "profile": ["NOT_SET"], "qos": job.qos.lower(), "reboot": False,
        "required_nodes": "", "minimum_switches": 0, "requeue": False, "resize_time": _num(0), "restart_cnt": 0,
        "resv_name": "", "scheduled_nodes": "", "selinux_context": "", "shared": [], "exclusive": [],
        "oversubscribe": False, "show_flags": ["DETAIL", "LOCAL"], "sockets_per_board": 0,
        "sockets_per_node": _num(0, is_set=False), "start_time": _num(start), "state_description": "",
        "state_reason": "None", "standard_error": "", "standard_input": "/dev/null", "standard_output": "",
        "submit_time": _num(submit), "suspend_time": _num(0), "system_comment": "",
        "time_limit": _num(0, is_set=False, infinite=True), "time_minimum": _num(0),
        "threads_per_core": _num(0, is_set=False), "tres_bind": "", "tres_freq": "", "tres_per_job": "",
        "tres_per_node": f"gres/gpu:{job.gpus}", "tres_per_socket": "", "tres_per_task": "",
        "tres_req_str": squeue_tres(tres(job, alloc=False)),
        "tres_alloc_str": squeue_tres(tres(job, alloc=True)) if running else "",
        "user_id": 1000, "user_name": USER, "maximum_switch_wait_time": 0, "wckey": "",
        "current_working_directory": "",
    }


def slurm_json(value: object, indent: int = 0) -> str:
    """JSON as Slurm's serializer/json prints it (pretty): 2-space indent, ``"key": value``, empty
    lists/objects opened and closed on their own lines, ``/`` escaped as ``\\/`` (real squeue/slurmrestd output).
    """
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{\n" + pad + "}"
        items = [f"{inner}{slurm_json(str(k))}: {slurm_json(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if not value:
            return "[\n" + pad + "]"
        return "[\n" + ",\n".join(inner + slurm_json(v, indent + 1) for v in value) + "\n" + pad + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("/", "\\/")
    return json.dumps(value)


def squeue_doc(jobs: list[Job], t: int, clock: Clock) -> str:
    """The whole ``squeue --json`` output at T (pending and running jobs, job id order)."""
    active = [j for j in jobs if status_at(j, t) in ("pending", "running")]
    doc = {
        "jobs": [squeue_job(j, t, clock) for j in active],
        "last_backfill": _num(clock.epoch(t)),
        "last_update": _num(clock.epoch(t)),
        "meta": {
            "plugin": {"type": "", "name": "", "data_parser": "data_parser/v0.0.40",
                       "accounting_storage": "accounting_storage/slurmdbd"},
            "client": {"source": "/dev/pts/0", "user": USER, "group": USER},
            "command": ["squeue", "--json"],
            "slurm": {"version": {"major": "23", "micro": "4", "minor": "11"}, "release": "23.11.4",
                      "cluster": CLUSTER_NAME},
        },
        "errors": [],
        "warnings": [],
    }
    return slurm_json(doc) + "\n"


def _uid(kind: str, pod: str) -> str:
    return str(uuid.uuid5(UID_NS, f"{kind}/{pod}"))


def workload_name(pod: str, job_uid: str) -> str:
    """Kueue's Workload name for a batch/v1 Job: ``job-<name>-<first 5 hex of sha1(Kind, Group, name, uid)>``.

    Source: kueue ``pkg/controller/jobframework`` ``GetWorkloadNameForOwnerWithGVK`` / ``getHash``.
    """
    digest = hashlib.sha1(f"Job\nbatch\n{pod}\n{job_uid}".encode()).hexdigest()
    return f"job-{pod}-{digest[:5]}"


def workload(job: Job, t: int, clock: Clock, rv: int) -> dict:
    """One ``kueue.x-k8s.io/v1beta1`` Workload as ``kubectl get -o json`` prints it at T.

    Conditions and messages: Kueue docs "Troubleshooting Jobs" (QuotaReserved/Admitted) and the job
    reconciler (Finished, reason Succeeded/Failed). A pending workload has an empty status (not
    yet attempted; the trace gives no reason). API: kueue ``apis/kueue/v1beta1/workload_types.go``.
    """
    st = status_at(job, t)
    job_uid = _uid("job", job.pod)
    requests = {"cpu": k8s_cpu(job.cpu_milli), "nvidia.com/gpu": str(job.gpus)}
    if job.memory_mib > 0:
        requests["memory"] = k8s_mem(job.memory_mib)
    meta: dict = {
        "creationTimestamp": clock.utc(job.submit_s), "generation": 1,
        "labels": {"kueue.x-k8s.io/job-uid": job_uid},
        "name": workload_name(job.pod, job_uid), "namespace": NAMESPACE,
        "ownerReferences": [{"apiVersion": "batch/v1", "blockOwnerDeletion": True, "controller": True, "kind": "Job",
                             "name": job.pod, "uid": job_uid}],
        "resourceVersion": str(rv), "uid": _uid("workload", job.pod),
    }
    status: dict = {}
    if st in ("running", "ended"):
        assert job.start_s is not None and job.node is not None
        flavor = job.node.model.lower()
        status["admission"] = {"clusterQueue": CLUSTER_QUEUE, "podSetAssignments": [
            {"count": 1, "flavors": {k: flavor for k in requests}, "name": "main", "resourceUsage": dict(requests)}]}
        conds = [
            {"lastTransitionTime": clock.utc(job.start_s), "message": f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}",
             "observedGeneration": 1, "reason": "QuotaReserved", "status": "True", "type": "QuotaReserved"},
            {"lastTransitionTime": clock.utc(job.start_s), "message": "The workload is admitted",
             "observedGeneration": 1, "reason": "Admitted", "status": "True", "type": "Admitted"},
        ]
        if st == "ended":
            assert job.end_s is not None
            failed = job.phase == "Failed"
            conds.append({"lastTransitionTime": clock.utc(job.end_s),
                          "message": "Job has reached the specified backoff limit" if failed
                          else "Job finished successfully",
                          "observedGeneration": 1, "reason": "Failed" if failed else "Succeeded", "status": "True",
                          "type": "Finished"})
        else:
            meta["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
        status["conditions"] = conds
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": meta,
        "spec": {
            "active": True,
            "podSets": [{"count": 1, "name": "main", "template": {"metadata": {}, "spec": {
                "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(job.gpus)},
                                                              "requests": requests}}],
                "restartPolicy": "Never"}}}],
            "priority": QOS_PRIORITY[job.qos], "priorityClassName": job.qos.lower(),
            "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass", "queueName": QUEUE_NAME,
        },
        "status": status,
    }


def workloads_doc(jobs: list[Job], t: int, clock: Clock) -> str:
    """``kubectl get workloads.kueue.x-k8s.io -A -o json`` at T: a v1 List, keys sorted, 4-space indent.

    Jobs deleted while pending are absent (their Workload is garbage-collected with the Job).
    """
    items = []
    for job in jobs:
        st = status_at(job, t)
        if st is None or (job.held and st == "ended"):
            continue
        items.append(workload(job, t, clock, 1_000_000 + len(items)))
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    return json.dumps(doc, indent=4, sort_keys=True, ensure_ascii=False) + "\n"


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
                    + [(j.end_s, -1, -j.gpus) for j in jobs if j.end_s is not None])
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

    openb = args.out / "openb"
    atomic_write_text(openb / "sacct.txt", "\n".join(sacct_lines(jobs, t, clock)) + "\n", make_parents=True)
    atomic_write_text(openb / "squeue.json", squeue_doc(jobs, t, clock), make_parents=True)
    atomic_write_text(openb / "workloads.json", workloads_doc(jobs, t, clock), make_parents=True)
    summary = summarize(jobs, t, clock, nodes, scan)
    summary["prometheus_end_utc"] = datetime.fromtimestamp(t_export, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = json.loads((args.out / "servegen" / "prometheus.json").read_text())
    summary["prometheus_series"] = {s["metric"]["service"]: len(s["values"]) for s in doc["data"]["result"]}
    first = min(v[0] for s in doc["data"]["result"] for v in s["values"])
    summary["prometheus_span_days"] = (t_export - first + STEP_S) / 86400
    summary["prometheus_zero_samples"] = {s["metric"]["service"]: sum(v[1] == "0" for v in s["values"])
                                          for s in doc["data"]["result"]}
    summary["window_start_plus"] = str(timedelta(seconds=t))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
