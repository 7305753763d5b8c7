"""Queue stage: the current queue at the plan start, real-trace job mix plus generated LLM jobs.

- *Real trace*: the non-latency-sensitive GPU pods of the shipped Alibaba openb window (read by
  :meth:`pipelines.catalog.Catalog.trace_pods`, see ``data/traces/README.md``) created in its first 24 h,
  ``N_TRACE_JOBS`` of them picked evenly by arrival; they keep their GPU count (rounded up to a power of
  two), QoS class (priority :data:`domain.kinds.QOS_PRIORITY`, kind :data:`domain.kinds.QOS_KIND`) and
  arrival order, shifted so that they were submitted over the 24 h before the plan start and all wait
  now (a 64-GPU slice of a cluster that had 6,212 GPUs). Their features are drawn by the job
  generators (:mod:`forecasters.generators`) with ``gpus_requested`` fixed to the pod's GPU count.
- *Generated LLM jobs*: ``N_LLM_JOBS`` training, quantization and batch-inference jobs from the same
  generators, priorities in {1, 2, 4, 8}, some with deadlines, plus ``N_RUNNING`` running training jobs.
"""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pandas as pd

from domain.kinds import JOB_KINDS, QOS_KIND, QOS_PRIORITY
from domain.units import pow2_ceil
from forecasters.generators import generate_queue, kind_module
from pipelines.io import schemas

N_TRACE_JOBS = 24
N_LLM_JOBS = 30
N_RUNNING = 3
#: Trace pods considered: created in the first day of the window (seconds).
TRACE_WINDOW_S = 86_400


def select_trace_pods(pods: pd.DataFrame) -> pd.DataFrame:
    """Non-LS GPU pods created in the first :data:`TRACE_WINDOW_S` seconds of the window, by arrival.

    ``pods``: :data:`pipelines.io.schemas.TRACE_PODS` columns (``creation_s`` relative to the window start).
    """
    schemas.check_columns(pods, schemas.TRACE_PODS, "trace pods")
    pods = pods[(pods["num_gpu"] > 0) & (pods["qos"] != "LS") & (pods["creation_s"] >= 0)
                & (pods["creation_s"] < TRACE_WINDOW_S)]
    return pods.sort_values(["creation_s", "name"], kind="stable").reset_index(drop=True)


def pick_evenly(n_have: int, n_want: int) -> np.ndarray:
    """Indices of ``n_want`` of ``n_have`` items spread evenly (all of them when there are fewer)."""
    if n_have <= n_want:
        return np.arange(n_have)
    return np.unique(np.linspace(0, n_have - 1, n_want).round().astype(int))


def features_fitting(kind: str, gpus: int, n: int, rng_seed: int, now: pd.Timestamp) -> pd.DataFrame:
    """``n`` generated queue rows of ``kind`` whose memory need fits ``gpus`` GPUs (requested = gpus)."""
    pool = generate_queue(kind, max(64, 8 * n), seed=rng_seed, now=now)
    pool = pool.assign(gpus_requested=gpus)
    need = kind_module(kind).gpus_used(pool)
    fit = pool[np.asarray(need) <= gpus]
    if len(fit) < n:
        fit = pool.iloc[np.argsort(np.asarray(need), kind="stable")]
    return fit.head(n).reset_index(drop=True)


def build_queue(pods: pd.DataFrame, seed: int, start: datetime) -> dict[str, pd.DataFrame]:
    """The current queue at ``start`` (module docstring).

    Args:
        pods: the shipped trace pods (:data:`pipelines.io.schemas.TRACE_PODS` columns at least).
        seed: seed of the generated jobs.
        start: the plan start (aware).

    Returns:
        kind -> frame with the kind's features and :data:`pipelines.io.schemas.QUEUE` (``state``
        ``queued``/``running``, ``started_at`` for running jobs only, ``deadline_at`` optional,
        ``source`` ``alibaba-openb``/``generated``), for every kind of :data:`domain.kinds.JOB_KINDS`.
    """
    now = pd.Timestamp(start).tz_convert("UTC")
    rng = np.random.default_rng(seed)
    parts: dict[str, list[pd.DataFrame]] = {k: [] for k in JOB_KINDS}

    trace = select_trace_pods(pods)
    pick = trace.iloc[pick_evenly(len(trace), N_TRACE_JOBS)].reset_index(drop=True)
    for i, pod in pick.iterrows():
        kind = QOS_KIND.get(str(pod["qos"]), "batch_inference")
        gpus = pow2_ceil(int(pod["num_gpu"]))
        row = features_fitting(kind, gpus, 1, seed + 1000 + i, now)
        row["job_id"] = f"trace-{pod['name'].removeprefix('openb-pod-')}"
        row["kind"] = kind
        row["priority"] = QOS_PRIORITY.get(str(pod["qos"]), 1.0)
        row["state"] = "queued"
        row["submitted_at"] = now - pd.Timedelta(hours=24) + pd.Timedelta(seconds=int(pod["creation_s"]))
        row["source"] = "alibaba-openb"
        parts[kind].append(row)

    per_kind = {"training": N_LLM_JOBS // 3, "quantization": N_LLM_JOBS // 3,
                "batch_inference": N_LLM_JOBS - 2 * (N_LLM_JOBS // 3)}
    for kind, n in per_kind.items():
        q = generate_queue(kind, n, seed=seed + 7, now=now)
        q["priority"] = rng.choice([1.0, 2.0, 4.0, 8.0], size=n, p=[0.4, 0.3, 0.2, 0.1])
        q["state"] = "queued"
        q["source"] = "generated"
        has_deadline = rng.random(n) < 0.3
        q["deadline_at"] = [now + pd.Timedelta(hours=float(h)) if d else pd.NaT
                            for d, h in zip(has_deadline, rng.uniform(6, 20, n))]
        parts[kind].append(q)

    run = generate_queue("training", N_RUNNING, seed=seed + 11, now=now)
    run["job_id"] = [f"run-{i:02d}" for i in range(N_RUNNING)]
    run["priority"] = 2.0
    run["state"] = "running"
    run["source"] = "generated"
    run["started_at"] = [now - pd.Timedelta(hours=float(h)) for h in rng.uniform(1, 6, N_RUNNING)]
    parts["training"].append(run)

    out = {}
    for kind, frames in parts.items():
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        for col in ("deadline_at", "started_at"):
            if col not in df.columns:
                df[col] = pd.NaT
            df[col] = pd.to_datetime(df[col], utc=True)
        df["submitted_at"] = pd.to_datetime(df["submitted_at"], utc=True)
        df["kind"] = kind
        out[kind] = schemas.check_columns(df.reset_index(drop=True), schemas.QUEUE, f"{kind} queue")
    return out


def queue_table(queue: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The queue as one table (:data:`pipelines.io.schemas.QUEUE_TABLE`).

    The planning columns, and each
    job's other columns (its features) as JSON text of their string values.
    """
    qcols = list(schemas.QUEUE)
    qtab = pd.concat([q.assign(features=q.drop(columns=[c for c in qcols if c in q.columns]).astype(str)
                                .to_dict(orient="records"))[[*qcols, "features"]] for q in queue.values()],
                     ignore_index=True)
    qtab["features"] = qtab["features"].map(lambda d: json.dumps(d))
    return qtab
