"""The format adapter of the real traces: the ``real_trace`` benchmark scenario and the queue's pods.

Two small files under ``data/traces/`` are shipped with the project (so nothing reads anything
outside the repository at run time; their paths are :mod:`pipelines.catalog`'s):
:func:`derive_trace_slice` re-creates them from the public traces, :func:`parse_real_trace` reads
them into the pure :class:`optimizer.scenarios.RealTraceData`, :func:`read_pod_window` reads the pods
for the current queue.

- ``alibaba_openb_window.csv`` (scenario ``real_trace``, :func:`choose_window_day`) and
  ``alibaba_openb_window_b.csv`` (``real_trace_b``, :func:`choose_second_window_day`): the Alibaba
  cluster-trace-gpu-v2023 "openb" GPU pods relevant to one 48 h window (see ``data/traces/README.md``): columns ``name, qos, num_gpu, gpu_milli,
  pod_phase, creation_s, scheduled_s, deletion_s`` with times in seconds relative to the window
  start (negative = before it; ``scheduled_s`` empty for pods never scheduled).
- ``servegen_m-small_30min.csv``: ServeGen (Alibaba Bailian) m-small total request rate, 30-minute
  means of the published 10-minute totals: ``t_s`` (seconds relative to the window start),
  ``rate_rps`` (empty where every 10-minute window of the half hour was all-zero: a collection gap,
  treated as missing, not as zero demand).

Run ``python -m pipelines.catalog derive-traces SRC`` to re-derive them, ``SRC`` being a folder with the
public traces downloaded as described in ``data/traces/README.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from optimizer.problem import Node
from optimizer.scenarios import RealTraceData, TracePod
from pipelines.io.atomic import atomic_path
from pipelines.io.errors import InputError

DAY_S = 86_400
STEP_S = 1_800
#: Trace days considered for the window: 99.7 % of pods are created in days 115-149 (README).
CANDIDATE_DAYS = range(116, 147)
#: ServeGen day mapped to the window start (t = 0 is local midnight; day 0 is the history day).
SERVE_WINDOW_DAY = 1
POD_COLUMNS = ("name", "qos", "num_gpu", "gpu_milli", "pod_phase", "creation_s", "scheduled_s", "deletion_s")


def _atomic_write_csv(frame, path: Path) -> None:
    with atomic_path(path, make_parents=True) as tmp:
        frame.to_csv(tmp, index=False, lineterminator="\n")


def choose_window_day(pods) -> int:
    """Trace day (integer day of ``creation_time``) that starts the 48 h window.

    Rule: among days in :data:`CANDIDATE_DAYS` (each with a full history day before and a full
    24 h horizon day after the window inside the trace), the first day of the two-day span with
    the most non-LS GPU pods that were scheduled (i.e. actually ran). Ties: the earliest day.
    """
    b = pods[(pods["num_gpu"] > 0) & (pods["qos"] != "LS") & pods["scheduled_time"].notna()]
    per_day = (b["creation_time"] // DAY_S).astype(int).value_counts()
    best, best_n = None, -1
    for d in CANDIDATE_DAYS:
        n = int(per_day.get(d, 0) + per_day.get(d + 1, 0))
        if n > best_n:
            best, best_n = d, n
    return int(best)


def choose_second_window_day(first_day: int) -> int:
    """Trace day that starts the second window (scenario ``real_trace_b``).

    Rule: the earliest day of :data:`CANDIDATE_DAYS` whose four days (history day, two window days,
    horizon day) are disjoint from those of the window starting at ``first_day``. For the openb
    trace (``first_day`` = 122, span 121-124) this is day 116 (span 115-118): another week, another
    mix (179 scheduled batch pods instead of 317). Raises :class:`InputError` when no day fits.
    """
    for d in CANDIDATE_DAYS:
        if d + 2 < first_day - 1 or d - 1 > first_day + 2:
            return int(d)
    raise InputError(f"no candidate day in {CANDIDATE_DAYS.start}-{CANDIDATE_DAYS.stop - 1} is disjoint from day {first_day}")


def _window_pods(pods: pd.DataFrame, day: int,
                 extra: tuple[str, ...] = ()) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The pods of the window starting at trace day ``day``: (the window's rows, its LS pods, its other pods).

    LS pods alive in [start - 24 h, end + 24 h) and the other GPU pods created in the 48 h window; times in s from
    the start; the string columns ``extra`` kept as they are.
    """
    t0 = day * DAY_S
    lo, hi = t0 - DAY_S, t0 + 3 * DAY_S
    g = pods[pods["num_gpu"] > 0]
    ls = g[(g["qos"] == "LS") & g["scheduled_time"].notna()]
    ls = ls[(ls["scheduled_time"] < hi) & (ls["deletion_time"] > lo)]
    batch = g[(g["qos"] != "LS") & (g["creation_time"] >= t0) & (g["creation_time"] < t0 + 2 * DAY_S)]
    keep = pd.concat([ls, batch]).sort_values(["creation_time", "name"])
    out = pd.DataFrame(
        {
            "name": keep["name"].astype(str),
            "qos": keep["qos"].astype(str),
            "num_gpu": keep["num_gpu"].astype(int),
            "gpu_milli": keep["gpu_milli"].astype(int),
            "pod_phase": keep["pod_phase"].astype(str),
            "creation_s": (keep["creation_time"] - t0).astype(int),
            "scheduled_s": (keep["scheduled_time"] - t0).astype("Int64"),
            "deletion_s": (keep["deletion_time"] - t0).astype(int),
            **{c: keep[c].astype(str) for c in extra},
        }
    )
    return out, ls, batch


def derive_trace_slice(pod_src: Path, serve_src: Path, pods_out: Path, serve_out: Path, day: int | None = None) -> dict:
    """Extract the shipped slices from the public traces; returns a summary dict.

    Reads the openb pod list ``pod_src`` (``openb_pod_list_default.csv``) and the ServeGen
    ``serve_src`` (``aggregate_10min.csv``). Keeps GPU pods (``num_gpu > 0``): latency-sensitive (LS)
    pods alive at any time in [window start - 24 h, window end + 24 h) and the other pods created
    inside the window. ``day``: the trace day starting the window (None = :func:`choose_window_day`).
    Writes ``pods_out`` and ``serve_out`` atomically. Raises :class:`InputError` when a source file
    is missing.
    """
    for p in (pod_src, serve_src):
        if not p.is_file():
            raise InputError(f"trace source file not found: {p}")
    pods = pd.read_csv(pod_src)
    day = choose_window_day(pods) if day is None else int(day)
    out, ls, batch = _window_pods(pods, day)
    _atomic_write_csv(out, Path(pods_out))

    agg = pd.read_csv(serve_src)
    m = agg[agg["model"] == "m-small"].sort_values("t_s")
    s0 = SERVE_WINDOW_DAY * DAY_S
    m = m[(m["t_s"] >= s0 - DAY_S) & (m["t_s"] < s0 + 3 * DAY_S)].copy()
    m["rate"] = m["total_rate_rps"].where(m["total_rate_rps"] > 0)  # all-zero window = gap
    m["slot"] = (m["t_s"] - s0) // STEP_S
    half = m.groupby("slot")["rate"].mean()  # mean of the non-missing 10-min totals
    serve = pd.DataFrame({"t_s": (half.index * STEP_S).astype(int), "rate_rps": np.round(half.values, 3)})
    _atomic_write_csv(serve, Path(serve_out))
    return {
        "window_day": day,
        "ls_pods": int(len(ls)),
        "batch_pods": int(len(batch)),
        "serve_slots": int(len(serve)),
        "serve_missing_slots": int(serve["rate_rps"].isna().sum()),
    }


def parse_real_trace(pod_path: Path, serve_path: Path) -> RealTraceData:
    """Read the shipped slices (pods, 30-min serve rates) into :class:`optimizer.scenarios.RealTraceData`.

    Raises :class:`InputError` naming the file and the column or row when a file is missing or
    malformed.
    """
    pod_path, serve_path = Path(pod_path), Path(serve_path)
    for p in (pod_path, serve_path):
        if not p.is_file():
            raise InputError(f"real-trace file not found: {p}")
    pods = pd.read_csv(pod_path, dtype={"scheduled_s": "Int64"})
    missing = [c for c in POD_COLUMNS if c not in pods.columns]
    if missing:
        raise InputError(f"{pod_path}: missing column(s) {', '.join(missing)}")
    bad = pods[pods["num_gpu"].isna() | (pods["num_gpu"] < 0) | pods["creation_s"].isna() | pods["deletion_s"].isna()]
    if len(bad):
        raise InputError(f"{pod_path}: row {int(bad.index[0]) + 2}: num_gpu, creation_s and deletion_s are required")
    recs = []
    for r in pods.itertuples(index=False):
        sched = None if pd.isna(r.scheduled_s) else int(r.scheduled_s)
        recs.append(
            TracePod(
                name=str(r.name),
                qos=str(r.qos),
                num_gpu=int(r.num_gpu),
                gpu_milli=int(r.gpu_milli),
                creation_s=int(r.creation_s),
                scheduled_s=sched,
                deletion_s=int(r.deletion_s),
            )
        )
    serve = pd.read_csv(serve_path)
    for c in ("t_s", "rate_rps"):
        if c not in serve.columns:
            raise InputError(f"{serve_path}: missing column {c!r}")
    rates = tuple(
        (int(t), None if pd.isna(v) else float(v)) for t, v in zip(serve["t_s"], serve["rate_rps"], strict=True)
    )
    return RealTraceData(pods=tuple(recs), serve_rates=rates, source=str(pod_path.parent))


def read_pod_window(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """The shipped pod window as a frame (every column), checked for ``columns``.

    Raises:
        InputError: the file is missing (the message says how to re-derive it) or a column is missing.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"real-trace slice not found: {path} (shipped in data/traces; re-derive it with "
                         "python -m pipelines.catalog derive-traces)")
    pods = pd.read_csv(path)
    for col in columns:
        if col not in pods.columns:
            raise InputError(f"{path}: missing column {col!r}")
    return pods


# ---------------------------------------------------------------- heterogeneous openb windows (issue 26)

#: Columns of the heterogeneous pod windows: :data:`POD_COLUMNS`, the pod's ``gpu_spec`` and which list it is from.
HET_POD_COLUMNS = (*POD_COLUMNS, "gpu_spec", "source")
#: Seed of the draw that gives the multigpu20 list's added pods (no times in that file) their times.
HET_EXTRA_SEED = 26
#: Trace days over which the added multigpu20 pods are spread (99.7 % of pods are created in days 115-149).
HET_EXTRA_DAYS = (115, 150)


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` to ``path`` atomically (no index, Unix line ends)."""
    _atomic_write_csv(frame, Path(path))


def slice_nodes(nodes: pd.DataFrame, every_k: int) -> pd.DataFrame:
    """The cluster slice of the heterogeneous windows: every ``every_k``-th node of each (model, gpu) kind.

    Nodes of a kind are taken in file order and the ones at positions 0, k, 2k, ... kept, so each kind
    keeps ``ceil(n / k)`` nodes (a kind smaller than k keeps its first node). Returns ``name, gpus,
    gpu_type`` in file order. Raises :class:`InputError` for ``every_k`` below 1 or a missing column.
    """
    if every_k < 1:
        raise InputError(f"every_k = {every_k}: expected at least 1")
    for c in ("sn", "gpu", "model"):
        if c not in nodes.columns:
            raise InputError(f"node list: missing column {c!r}")
    pos = nodes.groupby(["model", "gpu"]).cumcount()
    keep = nodes[(pos % every_k) == 0]
    return pd.DataFrame({"name": keep["sn"].astype(str), "gpus": keep["gpu"].astype(int),
                         "gpu_type": keep["model"].astype(str)})


def het_pod_list(gpuspec: pd.DataFrame, multigpu: pd.DataFrame) -> pd.DataFrame:
    """The openb pods of the heterogeneous windows: the ``gpuspec20`` list plus the pods only ``multigpu20`` has.

    ``multigpu20`` is the default list (its first 8,152 rows are the same pods) plus 172 added multi-GPU pods
    without times, QoS or ``gpu_spec``. Each added pod gets, by a draw seeded with :data:`HET_EXTRA_SEED` (in
    file order): a creation time uniform over trace days :data:`HET_EXTRA_DAYS`, scheduled at creation, and
    the QoS, phase and run time (``deletion - scheduled``) of a donor drawn uniformly among the scheduled
    non-LS pods of ``gpuspec20`` with the same ``num_gpu``. Returns the ``gpuspec20`` columns plus ``source``
    (``gpuspec20`` or ``multigpu20``).
    """
    base = gpuspec.copy()
    base["source"] = "gpuspec20"
    extra = multigpu[~multigpu["name"].isin(set(base["name"]))]
    donors = base[(base["qos"] != "LS") & base["scheduled_time"].notna() & (base["num_gpu"] > 0)]
    rng = np.random.default_rng(HET_EXTRA_SEED)
    rows = []
    for r in extra.itertuples(index=False):
        pool = donors[donors["num_gpu"] == r.num_gpu]
        t = int(rng.uniform(HET_EXTRA_DAYS[0] * DAY_S, HET_EXTRA_DAYS[1] * DAY_S))
        if pool.empty:
            raise InputError(f"multigpu20 pod {r.name}: no gpuspec20 pod with num_gpu = {r.num_gpu} to take times from")
        d = pool.iloc[int(rng.integers(len(pool)))]
        run = int(d["deletion_time"] - d["scheduled_time"])
        rows.append({"name": r.name, "cpu_milli": r.cpu_milli, "memory_mib": r.memory_mib, "num_gpu": r.num_gpu,
                     "gpu_milli": r.gpu_milli, "gpu_spec": "", "qos": d["qos"], "pod_phase": d["pod_phase"],
                     "creation_time": t, "deletion_time": t + run, "scheduled_time": t, "source": "multigpu20"})
    out = pd.concat([base, pd.DataFrame(rows, columns=base.columns)], ignore_index=True)
    out["scheduled_time"] = out["scheduled_time"].astype("Int64")
    out["gpu_spec"] = out["gpu_spec"].fillna("").astype(str)
    return out


def derive_het_window(pods: pd.DataFrame, day: int, pods_out: Path) -> dict:
    """Write one heterogeneous pod window (the rules of :func:`derive_trace_slice`, plus ``gpu_spec`` and ``source``).

    LS pods alive in [window start - 24 h, window end + 24 h) and the other GPU pods created in the 48 h
    window starting at trace day ``day``; times relative to the window start. Returns a summary dict.
    """
    out, ls, batch = _window_pods(pods, day, ("gpu_spec", "source"))
    _atomic_write_csv(out, Path(pods_out))
    return {"window_day": day, "ls_pods": int(len(ls)), "batch_pods": int(len(batch)),
            "typed_batch_pods": int((batch["gpu_spec"] != "").sum()),
            "multigpu20_batch_pods": int((batch["source"] == "multigpu20").sum())}


def read_het_nodes(path: Path) -> tuple[Node, ...]:
    """The shipped node slice (``name, gpus, gpu_type``) as :class:`optimizer.problem.Node` s.

    Raises :class:`InputError` naming the file and row for a missing file, column or a bad value.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"node slice not found: {path}")
    frame = pd.read_csv(path, dtype={"name": str, "gpu_type": str})
    for c in ("name", "gpus", "gpu_type"):
        if c not in frame.columns:
            raise InputError(f"{path}: missing column {c!r}")
    out = []
    for i, r in enumerate(frame.itertuples(index=False)):
        try:
            out.append(Node(name=str(r.name), gpus=int(r.gpus), gpu_type=str(r.gpu_type)))
        except (ValueError, InputError) as e:
            raise InputError(f"{path}: row {i + 2}: {e}") from None
    return tuple(out)


def parse_het_trace(pod_path: Path, serve_path: Path, nodes_path: Path) -> RealTraceData:
    """A heterogeneous window: :func:`parse_real_trace` plus each pod's ``gpu_spec`` and the node slice."""
    data = parse_real_trace(pod_path, serve_path)
    pods = pd.read_csv(pod_path, dtype={"gpu_spec": str})
    if "gpu_spec" not in pods.columns:
        raise InputError(f"{pod_path}: missing column 'gpu_spec'")
    spec = dict(zip(pods["name"].astype(str), pods["gpu_spec"].fillna(""), strict=True))
    recs = tuple(replace(p, gpu_spec=spec[p.name]) for p in data.pods)
    return replace(data, pods=recs, nodes=read_het_nodes(nodes_path))
