"""The workspace store: job and traffic records that grow with every ingest (partitioned parquet).

Layout under the store folder (``[store] path`` of ``gpuplan.toml``)::

    jobs/source=<slurm|kueue|table>/month=<YYYY-MM of submit>/part.parquet   job records (domain.records.JOB_RECORD)
    traffic/service=<name>/month=<YYYY-MM>/part.parquet                     traffic samples (TRAFFIC_RECORD)
    queue_snapshot.parquet                                                  keys of the newest queue export's jobs
    queue_snapshot.json                                                     that export's file name and time
    .lock                                                                   one writer at a time (fcntl)

The schema is the store's own (:data:`~pipelines.workspace.sources.records.JOB_ARROW_SCHEMA`,
:data:`~pipelines.workspace.sources.records.TRAFFIC_ARROW_SCHEMA`; listed in :mod:`pipelines.catalog` as
``store_jobs`` / ``store_traffic``), never one file's inferred one: every partition is written with it
and every file is read into it (a column missing from an older file is null, a ``null``-typed column of
a file written by an older version, e.g. ``gpu_type`` of a month without GPU types, is cast), so one
month without a GPU type beside one with it reads. :meth:`Store.upgrade` (run by every ingest) rewrites
the files of an older version in the store's schema. Writes are upserts by key
(:data:`domain.records.JOB_KEY`, :data:`domain.records.TRAFFIC_KEY`): a record already stored and
unchanged is not added again; a changed one (a pending job that has since finished) replaces the
stored one. Each touched partition is rewritten whole into a temporary file next to it; only when
every temporary file is written are they renamed into place (``os.replace``, atomic per file), so an
ingest that fails half-way leaves every partition as it was (nothing stored is lost).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from domain.records import ACTIVE_STATES, JOB_KEY, JOB_RECORD, TRAFFIC_KEY, TRAFFIC_RECORD
from pipelines.io import strict_json
from pipelines.io.atomic import atomic_write_text, fsync_path, temp_sibling
from pipelines.io.errors import InputError
from pipelines.io.run_folder import file_lock
from pipelines.workspace.sources.records import (
    JOB_ARROW_SCHEMA,
    OWN_MARKING_FIELDS,
    TRAFFIC_ARROW_SCHEMA,
    job_frame,
    traffic_frame,
)

PART_FILE = "part.parquet"
SNAPSHOT_FILE = "queue_snapshot.parquet"
SNAPSHOT_INFO_FILE = "queue_snapshot.json"
#: The newest ingested node inventory (``[sources.nodes]``): node records with the planned ``gpu_type``.
NODES_FILE = "nodes.parquet"
NODES_INFO_FILE = "nodes.json"
#: A job id seen again with a submit time at most this many hours away is the same job read in another
#: time zone (UTC offsets span -12 h .. +14 h).
REKEY_WINDOW_H = 26


@dataclass(frozen=True)
class Table:
    """One record table of the store: its folder, columns, key and the partition columns (name -> function)."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    part_by: str  # column whose value is the first partition level
    time_col: str  # column whose month is the second level
    schema: pa.Schema  # the stored type of every column (module docstring)


JOBS = Table("jobs", JOB_RECORD, JOB_KEY, "source", "submitted_at", JOB_ARROW_SCHEMA)
TRAFFIC = Table("traffic", TRAFFIC_RECORD, TRAFFIC_KEY, "service", "ts", TRAFFIC_ARROW_SCHEMA)


def conform(data: pa.Table, table: Table, where: str) -> pa.Table:
    """``data`` (one stored file) in ``table.schema``: columns in order, missing ones null, each cast to its type.

    Raises:
        InputError: a column holds values that cannot be cast (``where`` and the column named).
    """
    columns = []
    for field in table.schema:
        if field.name not in data.column_names:
            columns.append(pa.nulls(data.num_rows, field.type))
            continue
        col = data[field.name]
        if col.type != field.type:
            try:
                col = col.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise InputError(f"{where}: column {field.name} of type {col.type} cannot be read as {field.type} "
                                 f"({' '.join(str(exc).split())[:120]})") from None
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=table.schema)


def _to_arrow(frame: pd.DataFrame, table: Table) -> pa.Table:
    """A typed record frame -> an arrow table in the store's schema (what every partition is written as)."""
    return pa.Table.from_pandas(frame[list(table.columns)], schema=table.schema, preserve_index=False)


@dataclass(frozen=True)
class UpsertCount:
    """Records added (new key) and updated (known key, changed content) by one upsert.

    And the rows that changed nothing (not compared: two counts are equal when they change the store alike):
    ``unchanged`` (already stored as they are), ``older`` (earlier in the job's life than the stored record,
    which is kept) and ``superseded`` (another row of the same key in the same upsert was kept: the one
    furthest along its life, later among equals). Per origin, added + updated + unchanged + older +
    superseded = the rows given.
    """

    added: int
    updated: int
    unchanged: int = dc_field(default=0, compare=False)
    older: int = dc_field(default=0, compare=False)
    superseded: int = dc_field(default=0, compare=False)


def _partition_value(v: str) -> str:
    """A partition folder value: ``/``, ``=`` and leading dots are not allowed in a hive folder name."""
    return str(v).replace("/", "%2F").replace("=", "%3D").lstrip(".") or "_"


def _row_hash(frame: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One hash per row over ``columns`` (NaN == NaN), to tell a changed record from an unchanged one."""
    return pd.util.hash_pandas_object(frame[list(columns)].astype(str), index=False)


class _StagedParquet:
    """Parquet files written to temporary siblings and renamed over their targets only when all are written.

    A context manager: on any exception (``KeyboardInterrupt`` too) the temporary files are removed and the
    targets are untouched; on success each is renamed (``os.replace``, atomic per file) in write order.
    """

    def __init__(self) -> None:
        self.staged: list[tuple[Path, Path]] = []

    def write(self, path: Path, data: pa.Table, label: str) -> None:
        """Write ``data`` to a temporary sibling of ``path`` (named with ``label``) and fsync it."""
        tmp = temp_sibling(path, label)
        self.staged.append((tmp, path))
        pq.write_table(data, tmp)
        fsync_path(tmp)

    def __enter__(self) -> _StagedParquet:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            for tmp, _ in self.staged:
                tmp.unlink(missing_ok=True)
            return
        for tmp, path in self.staged:
            os.replace(tmp, path)


class Store:
    """The record store of one workspace (module docstring)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _dir(self, table: Table) -> Path:
        return self.root / table.name

    def exists(self) -> bool:
        """True when anything has been ingested."""
        return any(self._dir(t).is_dir() for t in (JOBS, TRAFFIC))

    # ------------------------------------------------------------- read

    def read(self, table: Table) -> pd.DataFrame:
        """Every record of ``table`` (its columns, typed), empty with those columns when nothing is stored."""
        files = self._files(table)
        if not files:
            return _empty(table)
        frame = pa.concat_tables([self._read_file(f, table) for f in files]).to_pandas()
        return _typed(frame[list(table.columns)], table)

    def _files(self, table: Table) -> list[Path]:
        folder = self._dir(table)
        return sorted(folder.glob(f"*/*/{PART_FILE}")) if folder.is_dir() else []

    @staticmethod
    def _read_file(path: Path, table: Table) -> pa.Table:
        """One partition file in the store's schema (:func:`conform`)."""
        return conform(pq.read_table(path), table, str(path))

    def upgrade(self) -> int:
        """Rewrite every partition file not in the store's schema (written by an older version); returns how many.

        The files are rewritten as :meth:`upsert` writes (temporary files, renamed when all are
        written; under the store's lock). Values are unchanged.
        """
        if not self.exists():
            return 0
        with file_lock(self.root / ".lock"), _StagedParquet() as staged:
            for table in (JOBS, TRAFFIC):
                for path in self._files(table):
                    if pq.read_schema(path).remove_metadata().equals(table.schema):
                        continue
                    staged.write(path, self._read_file(path, table), "upgrade")
        return len(staged.staged)

    def jobs(self) -> pd.DataFrame:
        """All job records."""
        return self.read(JOBS)

    def traffic(self) -> pd.DataFrame:
        """All traffic samples."""
        return self.read(TRAFFIC)

    def queue(self) -> pd.DataFrame:
        """The jobs of the newest queue export that are still pending or running (job records)."""
        snap = self.root / SNAPSHOT_FILE
        if not snap.exists():
            return _empty(JOBS)
        keys = pd.read_parquet(snap)
        jobs = self.jobs()
        merged = jobs.merge(keys[list(JOB_KEY)], on=list(JOB_KEY), how="inner")
        return merged[merged["state"].isin(ACTIVE_STATES)].reset_index(drop=True)

    # ------------------------------------------------------------- write

    def upsert(self, table: Table, records: pd.DataFrame, origin: Sequence[str] | None = None,
               marking_read: Sequence[bool] | None = None) -> dict[str, UpsertCount]:
        """Add new records and replace changed ones (by ``table.key``); returns counts per origin.

        - Of several rows with one key, the furthest along its life (ended > running > pending,
          :func:`lifecycle_rank`) wins, later rows among equals. A stored job record is never
          replaced by one earlier in its life (a stale queue export cannot turn a finished job back
          into a pending one).
        - A field the new record lacks (None, NaN, empty text, ``{}`` annotations) keeps the stored
          value: an export with fewer columns never erases what a richer one recorded.
        - Except a job's own preemption marking (issue 30): a record whose ``marking_read`` is True (its
          export carries the comment / labels column, ``ParseResult.marking_read``) states
          :data:`~pipelines.workspace.sources.records.OWN_MARKING_FIELDS` whole: its annotations are the
          stored ones without those keys, updated with its own (an emptied comment clears them; other keys
          another source added stay).
        - A job already stored under the same source and job id with a submit time at most
          :data:`REKEY_WINDOW_H` hours away is the same job read in another time zone (a corrected
          ``timezone`` setting): the stored record is replaced, not duplicated (job ids are reused
          only after the scheduler's id space wraps, years apart).

        ``marking_read``: one flag per row (default all False: the rule above for every field).
        ``origin`` (one label per row, e.g. the source role) attributes each added or updated
        record to the row that was kept; default one group ``""``. Raises whatever the filesystem
        raises; then nothing is changed.
        """
        labels = list(origin) if origin is not None else [""] * len(records)
        counts = {lab: [0, 0, 0, 0, 0] for lab in dict.fromkeys(labels)}
        if records.empty:
            return {k: UpsertCount(*v) for k, v in counts.items()}
        key = list(table.key)
        flags = list(marking_read) if marking_read is not None else [False] * len(records)
        records = _typed(records[list(table.columns)], table).assign(_origin=labels, _rank=0, _marking=flags)
        if table is JOBS:
            records["_rank"] = lifecycle_rank(records)
        records = records.reset_index(drop=True).reset_index().sort_values(["_rank", "index"], kind="stable")
        dropped = records.duplicated(key, keep="last").to_numpy()
        for lab in records.loc[dropped, "_origin"]:
            counts[lab][4] += 1
        records = records[~dropped].drop(columns="index")
        stale = self._rekeyed(records) if table is JOBS else records.iloc[0:0][key]
        rekeyed: set[tuple] = set()
        if len(stale):
            rekeyed = set(map(tuple, records.merge(stale.rename(columns={"submitted_at": "_old_sub"}),
                                                   on=["source", "job_id"], how="inner")[key].itertuples(index=False)))
        parts = {(str(p), m): g for (p, m), g in records.groupby(
            [records[table.part_by].astype(str), records[table.time_col].dt.strftime("%Y-%m")], sort=True)}
        for p, m in zip(stale[table.part_by].astype(str), stale[table.time_col].dt.strftime("%Y-%m")):
            parts.setdefault((p, m), records.iloc[0:0])
        with file_lock(self.root / ".lock"), _StagedParquet() as staged:
            for (part, month), new in sorted(parts.items()):
                path = self._dir(table) / f"{table.part_by}={_partition_value(part)}" / f"month={month}" / PART_FILE
                old = (_typed(self._read_file(path, table).to_pandas(), table) if path.exists()
                       else _empty(table))
                gone = old.merge(stale.assign(_gone=True), on=key, how="left")["_gone"].notna().to_numpy()
                old = old[~gone]
                merged_new, is_new, changed, kept_old = self._merge(table, new, old)
                for lab, a, u, ko, k in zip(merged_new["_origin"], is_new, changed, kept_old,
                                            merged_new[key].itertuples(index=False)):
                    again = tuple(k) in rekeyed
                    counts[lab][0] += int(a and not again)
                    counts[lab][1] += int(u or (a and again))
                    counts[lab][2] += int(not (a or u or ko))
                    counts[lab][3] += int(bool(ko) and not a)
                if not (is_new.any() or changed.any() or gone.any()):
                    continue
                take = merged_new[is_new | changed][list(table.columns)]
                replaced = old.merge(take[key].assign(_gone=True), on=key, how="left")
                kept = old[replaced["_gone"].isna().to_numpy()][list(table.columns)]
                merged = pd.concat([kept, take], ignore_index=True)
                merged = merged.sort_values(key, kind="stable").reset_index(drop=True)
                path.parent.mkdir(parents=True, exist_ok=True)
                staged.write(path, _to_arrow(merged, table), "ingest")
        return {k: UpsertCount(*v) for k, v in counts.items()}

    def _rekeyed(self, records: pd.DataFrame) -> pd.DataFrame:
        """Stored job keys that ``records`` replace under a shifted submit time (:meth:`upsert`)."""
        stored = self.jobs()[list(JOB_KEY)]
        if stored.empty:
            return stored
        m = records[list(JOB_KEY)].merge(stored, on=["source", "job_id"], suffixes=("", "_stored"))
        shift = (m["submitted_at"] - m["submitted_at_stored"]).abs()
        hit = (shift > pd.Timedelta(0)) & (shift <= pd.Timedelta(hours=REKEY_WINDOW_H))
        out = m.loc[hit, ["source", "job_id", "submitted_at_stored"]].rename(
            columns={"submitted_at_stored": "submitted_at"})
        exact = out.merge(records[list(JOB_KEY)], on=list(JOB_KEY), how="left", indicator=True)
        return out[(exact["_merge"] == "left_only").to_numpy()].reset_index(drop=True)

    @staticmethod
    def _merge(table: Table, new: pd.DataFrame, old: pd.DataFrame) -> tuple[pd.DataFrame, Any, Any, Any]:
        """New rows with missing fields filled from the stored ones; ``(rows, is_new, changed, kept_old)`` masks.

        ``kept_old``: a known row earlier in its life than the stored record (the stored one stays).
        """
        key = list(table.key)
        cols = [c for c in table.columns if c not in key]
        old = old.assign(_old_rank=lifecycle_rank(old) if table is JOBS else 0)
        m = new.merge(old.rename(columns={c: f"{c}__old" for c in cols}), on=key, how="left", indicator=True)
        is_new = (m["_merge"] == "left_only").to_numpy()
        marking = m["_marking"].fillna(False).astype(bool).to_numpy() if "_marking" in m else is_new & False
        for c in cols:
            v = m[c]
            missing = v.isna() | v.astype(str).isin(["", "{}", "None", "nan", "NaT"])
            m[c] = v.where(~missing | is_new, m[f"{c}__old"])
            if c == "annotations":  # a job's own marking read again: stated whole (upsert's docstring)
                redo = marking & ~is_new
                m.loc[redo, c] = [_marked_annotations(a, b) for a, b in zip(v[redo], m.loc[redo, f"{c}__old"],
                                                                              strict=True)]
        m = m.drop(columns=[f"{c}__old" for c in cols] + ["_merge"])
        m = _typed(m[list(table.columns)], table).assign(_origin=m["_origin"].to_numpy(), _rank=m["_rank"].to_numpy(),
                                                         _old_rank=m["_old_rank"].to_numpy())
        known = ~is_new
        keep_old = known & (m["_old_rank"].to_numpy(float) > m["_rank"].to_numpy(float))
        new_hash = _row_hash(m, table.columns).to_numpy()
        old_hash = (m[key].merge(old.assign(_h=_row_hash(old, table.columns).to_numpy())[[*key, "_h"]],
                                 on=key, how="left")["_h"].to_numpy())
        changed = known & ~keep_old & (old_hash != new_hash)
        return m, is_new, changed, keep_old

    def set_queue_snapshot(self, records: pd.DataFrame, exported_at: pd.Timestamp | None = None,
                           file: str = "", note: str = "") -> None:
        """Remember the keys of the newest queue export (the jobs :meth:`queue` returns while still active).

        ``exported_at`` (UTC; the export file's modification time) and ``file`` go to
        ``queue_snapshot.json`` (:meth:`queue_snapshot_info`): the replan's freshness check and plan start;
        ``note`` (e.g. the export clock going back) is kept there for the plan's notes.
        """
        keys = _typed(records[list(JOBS.columns)], JOBS)[list(JOB_KEY)].drop_duplicates()
        path = self.root / SNAPSHOT_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_sibling(path, "ingest")
        keys.to_parquet(tmp, index=False)
        info = {"file": file, "exported_at": None if exported_at is None else pd.Timestamp(exported_at).isoformat(),
                "jobs": int(len(keys)), "note": note}
        atomic_write_text(self.root / SNAPSHOT_INFO_FILE, json.dumps(info, indent=1))
        os.replace(tmp, path)

    def set_node_inventory(self, nodes: pd.DataFrame, exported_at: pd.Timestamp | None = None, file: str = "") -> None:
        """Keep the newest node inventory as the next plan's cluster; ``nodes.json`` says its file and time.

        ``nodes``: :data:`pipelines.workspace.sources.nodes.NODE_RECORD` columns (``gpu_type`` the planned
        name) plus ``export_gpu_type``, the name the export gave.
        """
        path = self.root / NODES_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_sibling(path, "ingest")
        nodes.reset_index(drop=True).to_parquet(tmp, index=False)
        info = {"file": file, "exported_at": None if exported_at is None else pd.Timestamp(exported_at).isoformat(),
                "nodes": int(len(nodes))}
        atomic_write_text(self.root / NODES_INFO_FILE, json.dumps(info, indent=1))
        os.replace(tmp, path)

    def node_inventory(self) -> pd.DataFrame | None:
        """The newest ingested node inventory (:meth:`set_node_inventory`), None before any."""
        path = self.root / NODES_FILE
        return pd.read_parquet(path) if path.exists() else None

    def queue_snapshot_info(self) -> dict | None:
        """``{"file", "exported_at" (ISO UTC or None), "jobs", "note"}`` of the newest queue export, None before any."""
        path = self.root / SNAPSHOT_INFO_FILE
        if not path.exists():
            return None
        return strict_json.loads(path.read_text(), str(path))


def _marked_annotations(new: Any, old: Any) -> str:
    """Stored ``annotations`` (JSON text) after a record that read the job's own marking (:meth:`Store.upsert`).

    ``old``'s keys except :data:`OWN_MARKING_FIELDS`, updated with ``new``'s; sorted-key JSON text.
    """
    mine = json.loads(new) if isinstance(new, str) and new.strip() else {}
    before = json.loads(old) if isinstance(old, str) and old.strip() else {}
    return json.dumps({**{k: v for k, v in before.items() if k not in OWN_MARKING_FIELDS}, **mine}, sort_keys=True)


def lifecycle_rank(jobs: pd.DataFrame) -> pd.Series:
    """0 for a pending job, 1 running, 2 ended (any other state): how far along its life a record is."""
    state = jobs["state"].astype(str)
    return pd.Series((~state.isin(ACTIVE_STATES)).astype(int) * 2 + (state == "running").astype(int),
                     index=jobs.index)


def _empty(table: Table) -> pd.DataFrame:
    return job_frame([]) if table is JOBS else traffic_frame([])


def _typed(frame: pd.DataFrame, table: Table) -> pd.DataFrame:
    """``frame`` with the table's dtypes (a parquet round trip keeps them; this fixes frames built elsewhere)."""
    rows = frame.to_dict(orient="records")
    return job_frame(rows) if table is JOBS else traffic_frame(rows)
