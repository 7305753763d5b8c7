"""Ingest a workspace's sources into its store (``gpuplan ingest``), and read what a plan needs.

For each source of ``gpuplan.toml`` (history, queue, traffic), every file of its path (a file or a
glob of drop-in exports, oldest first) is parsed by its format's adapter (:data:`JOB_PARSERS`,
traffic: :func:`parse_traffic_file`); the records are upserted into the store
(:class:`pipelines.workspace.store.Store`). The queue's newest file is the current queue (its pending and
running jobs; :meth:`pipelines.workspace.store.Store.set_queue_snapshot`).

The report (``gpuplan ingest --json``) per source: ``unit`` (what every count of the source counts:
``jobs`` for history and queue, a pending array task being one job once expanded; ``samples`` for
traffic), ``read`` (records read), ``added`` (new keys), ``updated`` (known keys whose record
changed), ``unchanged`` (already stored as they are), ``older`` (earlier in the job's life than the stored
record, which stays), ``superseded`` (the same key as another record read in this ingest, which was kept:
a job in both the history and the queue, or in two exports), ``rejected`` (records refused, in ``unit``: a Prometheus series refused whole counts its
samples), ``error_lines`` and ``errors`` (one message per rejected line, item or series,
``<file>: line N: ...``, at most :data:`MAX_ERRORS` listed) and ``unreadable_files``; job sources
also ``array_records_expanded`` (pending array records such as ``123_[4-9]`` or ``array_task_string``
``412-9999``) and ``array_tasks`` (the task records they became). A file that cannot be read at all,
or that yields nothing usable (every record rejected; a traffic export without samples), is named
in the errors and in ``unreadable_files`` (its records count as none stored), the other files are
kept, and ``gpuplan ingest`` exits 2 after printing the report. ``store_files_upgraded``: partition
files of an older version rewritten in the store's schema (:meth:`Store.upgrade`). The
current queue is the queue export taken last (its own time, ``squeue --json`` ``last_update``, else
its file's modification time). When that time is earlier than the stored snapshot's (the export
clock went back), the queue's ``clock_note`` says so in one line (:func:`export_clock_note`); it is
kept with the snapshot and a plan copies it to its ``queue_notes.json`` (``export_clock``).
``demo`` sources are read at plan time from the shipped files and report ``"demo": true``.

``[sources.nodes]`` (the cluster's inventory, :func:`read_nodes`): its newest export is kept as the next
plan's cluster (:attr:`pipelines.workspace.load.Workspace.cluster`); the report's ``nodes`` says ``file``,
``read``, ``gpu_nodes``, ``without_gpus``, ``rejected``, ``by_type`` (per planned type: ``nodes``, ``gpus``,
``down_nodes``, ``down_gpus``) and ``changed`` since the stored inventory (``added``, ``removed``,
``down``, ``up`` node names). The queue's ``eligible_jobs_by_type`` counts its pending and running jobs by
the types they may run on (``any``: untyped). A node's or a queued job's type that matches no known
type stops the ingest with one line naming it (exit 2; the store is left as it was).

A job in both the history and the queue export (a pending or running job sacct lists too) is one
record: the one furthest along its life, the queue's among equals; ``added``/``updated`` count it
under the source whose record was kept. A stored record is never replaced by an earlier stage of
its life (:meth:`pipelines.workspace.store.Store.upsert`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.io.csv_sniff import read_operator_csv
from pipelines.io.errors import InputError
from pipelines.workspace.gpu_types import GpuTypeTable, eligible_types
from pipelines.workspace.inventory import MAX_ERRORS, newest_inventory, parse_node_export
from pipelines.workspace.load import Workspace
from pipelines.workspace.sources.nodes import NodeParse
from pipelines.workspace.sources.records import ParseResult, job_frame, traffic_frame
from pipelines.workspace.store import JOBS, TRAFFIC, Store, UpsertCount

#: Error messages listed per source (the count is always complete).

SOURCE_OF_FORMAT = {"slurm-sacct": "slurm", "slurm-squeue-json": "slurm", "kueue-json": "kueue", "csv": "table",
                    "parquet": "table"}


def _table(path: Path) -> tuple[pd.DataFrame, bool]:
    """A CSV (sniffed, :func:`pipelines.io.csv_sniff.read_operator_csv`) or parquet file; ``(frame, is_csv)``."""
    if path.suffix.lower() == ".parquet":
        try:
            return pd.read_parquet(path), False
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot be read as parquet: {' '.join(str(exc).split())[:200]}") from None
    return read_operator_csv(path, str(path), text_columns=("job_id", "ts", "service")), True


def parse_job_file(ws: Workspace, role: str, path: Path) -> ParseResult:
    """One export of ``[sources.<role>]`` -> job records (its format's adapter).

    Raises:
        InputError: the file cannot be read at all (not JSON, no header, required column missing).
    """
    src = ws.source(role)
    fmt = src.format
    source = SOURCE_OF_FORMAT[fmt]
    if fmt in ("csv", "parquet"):
        from pipelines.workspace.sources import tabular

        frame, is_csv = _table(path)
        side = _table(ws.resolve(src.sidecar))[0] if src.sidecar else None
        return tabular.parse_jobs(frame, ws.source_timezone(role), csv=is_csv, source=source, sidecar=side)
    text = path.read_text(encoding="utf-8", errors="replace")
    if fmt == "slurm-sacct":
        from pipelines.workspace.sources import slurm

        return slurm.parse_sacct(text, ws.source_timezone(role), source=source)
    if fmt == "slurm-squeue-json":
        from pipelines.workspace.sources import slurm_squeue

        # a running job's elapsed time: at the snapshot's last_update, else at the file's mtime
        exported = pd.Timestamp(path.stat().st_mtime, unit="s", tz="UTC")
        return slurm_squeue.parse_squeue_json(text, source=source, now=exported)
    if fmt == "kueue-json":
        from pipelines.workspace.sources import kueue

        return kueue.parse_kueue_workloads(text, source=source)
    raise InputError(f"sources.{role}.format = {fmt!r} does not hold jobs")


def parse_traffic_file(ws: Workspace, path: Path) -> ParseResult:
    """One traffic export -> traffic records in the source's units (samples, not yet hourly).

    Raises:
        InputError: the file cannot be read at all.
    """
    src = ws.source("traffic")
    services = ws.services()
    if src.format in ("prometheus-json", "prometheus-http"):
        from pipelines.workspace.sources import prometheus

        return prometheus.parse_query_range(path.read_text(encoding="utf-8", errors="replace"), src.service_label,
                                            [s.service for s in services])
    from pipelines.workspace.sources import tabular

    frame, is_csv = _table(path)
    return tabular.parse_traffic(frame, path.name, services, ws.source_timezone("traffic"), csv=is_csv)


def parse_node_file(ws: Workspace, path: Path) -> NodeParse:
    """One export of ``[sources.nodes]`` -> node records (:func:`pipelines.workspace.inventory.parse_node_export`)."""
    return parse_node_export(ws.source("nodes"), path)


def gpu_type_table(ws: Workspace) -> GpuTypeTable:
    """The workspace's type matching: ``[gpu_types]`` over :mod:`domain.gpus` (:mod:`pipelines.workspace.gpu_types`)."""
    return GpuTypeTable(ws.config.gpu_types)


def read_nodes(ws: Workspace) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The newest ``[sources.nodes]`` export as the planned inventory, and its report (module docstring).

    :func:`pipelines.workspace.inventory.newest_inventory` of the source's files, ``[gpu_types]`` and
    ``[cluster] gpu_type`` (an untyped GRES ``gpu:8``); its errors.
    """
    return newest_inventory(ws.source_files("nodes"), ws.source("nodes"), ws.config.gpu_types,
                            ws.config.cluster.gpu_type)


def _inventory_change(before: pd.DataFrame | None, after: pd.DataFrame) -> dict[str, list[str]]:
    """Nodes added, removed, newly down and back up since the stored inventory (names, sorted)."""
    if before is None:
        return {"added": sorted(after["name"]), "removed": [], "down": sorted(after.loc[after["down"], "name"]),
                "up": []}
    old = dict(zip(before["name"], before["down"]))
    new = dict(zip(after["name"], after["down"]))
    return {"added": sorted(set(new) - set(old)), "removed": sorted(set(old) - set(new)),
            "down": sorted(n for n in new if new[n] and not old.get(n, False)),
            "up": sorted(n for n in new if n in old and old[n] and not new[n])}


@dataclass
class SourceRead:
    """What one source's files gave: records, counts, errors, the newest file's records (the current queue)."""

    records: pd.DataFrame
    read: int
    errors: list[str]
    newest: pd.DataFrame | None = None
    newest_file: Path | None = None
    newest_at: pd.Timestamp | None = None  # when that export was taken (its own time, else its file's mtime; UTC)
    unreadable: list[str] = field(default_factory=list)
    unit: str = "jobs"  # what read and rejected count (ParseResult.unit)
    rejected: int = 0  # records rejected, in unit
    arrays_expanded: int = 0
    array_tasks: int = 0
    marking_read: list[bool] = field(default_factory=list)  # per row of records: ParseResult.marking_read


def read_source(ws: Workspace, role: str) -> SourceRead:
    """Parse every file of ``[sources.<role>]`` (oldest first; later records of a key win).

    Raises:
        InputError: the path matches no file.
    """
    files = ws.source_files(role)
    parse: Callable[[Path], ParseResult] = ((lambda p: parse_traffic_file(ws, p)) if role == "traffic"
                                            else (lambda p: parse_job_file(ws, role, p)))
    frames, errors, read, rejected, arrays, tasks = [], [], 0, 0, 0, 0
    marking: list[bool] = []
    unit = "samples" if role == "traffic" else "jobs"
    newest = None
    newest_file = None
    best: tuple[pd.Timestamp, str] | None = None
    unreadable: list[str] = []
    for path in files:
        try:
            res = parse(path)
        except InputError as exc:
            errors.append(f"{path.name}: {exc}")
            unreadable.append(path.name)
            continue
        except (OSError, UnicodeError) as exc:
            errors.append(f"{path.name}: cannot be read ({exc})")
            unreadable.append(path.name)
            continue
        read += res.read
        rejected += res.rejected
        arrays += res.arrays_expanded
        tasks += res.array_tasks
        errors.extend(f"{path.name}: {e}" for e in res.errors)
        if res.frame.empty and (res.read > 0 or role == "traffic"):
            # nothing usable: every record refused (or a traffic export without samples) is a failed export,
            # not a successful ingest of nothing (a cron job must not report success while storing nothing)
            what = (f"all {res.read} {res.unit} rejected" if res.read else f"no {res.unit}")
            errors.append(f"{path.name}: nothing usable: {what} (see the lines above)")
            unreadable.append(path.name)
            continue
        frames.append(res.frame)
        marking += [res.marking_read] * len(res.frame)
        # the current export: the one taken last (what it says, else its mtime), not the last in name order
        taken = (pd.Timestamp(res.exported_at).tz_convert("UTC") if res.exported_at is not None
                 else pd.Timestamp(path.stat().st_mtime, unit="s", tz="UTC").floor("s"))
        if best is None or (taken, path.name) >= best:
            best = (taken, path.name)
            newest, newest_file = res.frame, path
    empty = traffic_frame([]) if role == "traffic" else job_frame([])
    frame = pd.concat(frames, ignore_index=True) if frames else empty
    return SourceRead(frame, read, errors, newest, newest_file, None if best is None else best[0], unreadable, unit,
                      rejected, arrays, tasks, marking)


def ingest(ws: Workspace) -> dict[str, Any]:
    """Ingest every source of ``ws`` into its store; returns the report (module docstring).

    Raises:
        InputError: a source path matches no file.
    """
    store = Store(ws.store_dir)
    # the inventory first: its unknown type, or a queued job's, stops the ingest before the store is written
    inventory, nodes_report = read_nodes(ws) if ws.config.sources.nodes is not None else (None, None)
    upgraded = store.upgrade()  # files an older version wrote, rewritten in the store's schema
    report: dict[str, Any] = {}
    reads: dict[str, SourceRead] = {}
    for role in ("history", "queue", "traffic"):
        if ws.source(role).format == "demo":
            report[role] = {"demo": True, "unit": "samples" if role == "traffic" else "jobs", "read": 0, "added": 0,
                            "updated": 0, "rejected": 0, "errors": []}
        else:
            reads[role] = read_source(ws, role)
    typed_jobs: dict[str, int] = {}
    if "queue" in reads and reads["queue"].newest is not None:
        cluster_types = (list(dict.fromkeys(inventory["gpu_type"])) if inventory is not None
                         else [gpu_type_table(ws).resolve(t) or t for t in ws.config.cluster.gpu_types])
        q = reads["queue"].newest
        active = q[q["state"].isin(("pending", "running"))]
        for types in eligible_types(active, gpu_type_table(ws), cluster_types):  # unknown type: InputError
            for t in types or ("any",):
                typed_jobs[t] = typed_jobs.get(t, 0) + 1
    # one upsert of both job sources: a job in the history and the queue exports is one record (the
    # one furthest along its life; the queue's among equals), so a re-ingest changes nothing
    job_roles = [r for r in ("history", "queue") if r in reads]
    counts = {}
    if job_roles:
        frames = [reads[r].records for r in job_roles]
        origin = [r for r, f in zip(job_roles, frames) for _ in range(len(f))]
        marking = [m for r in job_roles for m in (reads[r].marking_read or [False] * len(reads[r].records))]
        counts.update(store.upsert(JOBS, pd.concat(frames, ignore_index=True), origin, marking))
    if "traffic" in reads:
        counts.update(store.upsert(TRAFFIC, reads["traffic"].records, ["traffic"] * len(reads["traffic"].records)))
    clock_note = ""
    if "queue" in reads and reads["queue"].newest is not None:
        q = reads["queue"]
        name = q.newest_file.name if q.newest_file else ""
        previous = store.queue_snapshot_info()
        clock_note = export_clock_note(previous, q.newest_at, name)
        if not clock_note and previous and previous.get("file") == name and q.newest_at is not None and \
                previous.get("exported_at") == pd.Timestamp(q.newest_at).isoformat():
            clock_note = previous.get("note", "")  # the same export again (a replan's ingest): its note stays
        store.set_queue_snapshot(q.newest, q.newest_at, name, note=clock_note)
    for role, got in reads.items():
        c = counts.get(role, UpsertCount(0, 0))
        report[role] = {"unit": got.unit, "read": got.read, "added": c.added, "updated": c.updated,
                        "unchanged": c.unchanged, "older": c.older, "superseded": c.superseded,
                        "rejected": got.rejected, "error_lines": len(got.errors), "errors": got.errors[:MAX_ERRORS],
                        "unreadable_files": got.unreadable}
        if role != "traffic":
            report[role].update(array_records_expanded=got.arrays_expanded, array_tasks=got.array_tasks)
    if "queue" in report and not report["queue"].get("demo"):
        report["queue"]["clock_note"] = clock_note
        report["queue"]["eligible_jobs_by_type"] = dict(sorted(typed_jobs.items()))
    report = {r: report[r] for r in ("history", "queue", "traffic")}
    if inventory is not None and nodes_report is not None:
        nodes_report["changed"] = _inventory_change(store.node_inventory(), inventory)
        store.set_node_inventory(inventory, pd.Timestamp(nodes_report["exported_at"]), nodes_report["file"])
        report["nodes"] = nodes_report
    return {"workspace": str(ws.root), "store": str(store.root), "store_files_upgraded": upgraded, "sources": report}


def export_clock_note(previous: dict | None, taken: pd.Timestamp | None, file: str) -> str:
    """One line when the new queue export says it was taken before the stored snapshot (the clock went back).

    ``previous``: :meth:`Store.queue_snapshot_info` before this ingest (None: none); ``taken``: the new
    export's time (UTC). The new export is still taken (it is the newer file); the line says so,
    naming both times and files. ``""`` when the clock did not go back.
    """
    if not previous or not previous.get("exported_at") or taken is None:
        return ""
    before = pd.Timestamp(previous["exported_at"]).tz_convert("UTC")
    now = pd.Timestamp(taken).tz_convert("UTC")
    if now >= before:
        return ""
    return (f"queue export clock went back: {file or '(unnamed)'} says {now:%Y-%m-%dT%H:%MZ}, earlier than the stored "
            f"snapshot's {before:%Y-%m-%dT%H:%MZ} ({previous.get('file') or '(unnamed)'}), by "
            f"{(before - now).total_seconds() / 60:g} min; taken as the current queue (check the login node's clock)")


@dataclass(frozen=True)
class WorkspaceData:
    """What a plan of a (non-demo) workspace reads: job history, the current queue and traffic samples."""

    history: pd.DataFrame
    queue: pd.DataFrame
    traffic: pd.DataFrame
    from_store: bool
    snapshot_at: pd.Timestamp | None = None
    snapshot_file: str = ""
    snapshot_note: str = ""  # the export clock going back (:func:`export_clock_note`), "" when it did not


def workspace_data(ws: Workspace) -> WorkspaceData:
    """The store's records when anything was ingested, else the sources parsed now (nothing written).

    Raises:
        InputError: nothing stored and a source path matches no file.
    """
    store = Store(ws.store_dir)
    if store.exists():
        info = store.queue_snapshot_info() or {}
        at = pd.Timestamp(info["exported_at"]) if info.get("exported_at") else None
        return WorkspaceData(store.jobs(), store.queue(), store.traffic(), True, at, info.get("file", ""),
                             info.get("note", ""))
    hist = read_source(ws, "history").records
    q = read_source(ws, "queue")
    newest = q.newest if q.newest is not None else job_frame([])
    queue = newest[newest["state"].isin(("pending", "running"))].reset_index(drop=True)
    jobs = pd.concat([hist, q.records], ignore_index=True).drop_duplicates(list(JOBS.key), keep="last")
    return WorkspaceData(jobs.reset_index(drop=True), queue, read_source(ws, "traffic").records, False,
                         q.newest_at, q.newest_file.name if q.newest_file else "")
