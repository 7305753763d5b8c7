"""The record store's datasets: where each table lives under ``[store] path`` and its schema (the one it is read in).

The store itself (upserts, locking, upgrade) is :class:`pipelines.workspace.store.Store`; this entry
names its two tables for the catalog, with the arrow schema every partition is written and read in
(:data:`pipelines.workspace.sources.records.JOB_ARROW_SCHEMA`, ``TRAFFIC_ARROW_SCHEMA``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from pipelines.workspace.store import JOBS, PART_FILE, TRAFFIC


@dataclass(frozen=True)
class StoreDataset:
    """One table of the record store: its partition path pattern (relative to the store), key and schema."""

    name: str
    pattern: str
    key: tuple[str, ...]
    schema: pa.Schema
    description: str


#: The record store's tables (catalog name -> dataset).
STORE_DATASETS: dict[str, StoreDataset] = {
    "store_jobs": StoreDataset(
        "store_jobs", f"{JOBS.name}/{JOBS.part_by}=<source>/month=<YYYY-MM of submit>/{PART_FILE}", JOBS.key,
        JOBS.schema, "one job record per (source, job_id, submitted_at); domain.records.JOB_RECORD"),
    "store_traffic": StoreDataset(
        "store_traffic", f"{TRAFFIC.name}/{TRAFFIC.part_by}=<service>/month=<YYYY-MM>/{PART_FILE}", TRAFFIC.key,
        TRAFFIC.schema, "one traffic sample per (service, ts), in the source's units"),
}
