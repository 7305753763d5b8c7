"""The store's schema is its own (records.JOB_ARROW_SCHEMA), never inferred from one file (issue 28).

A month whose every job has no GPU type beside a month with one, and a store written by the older
version (``pa.Table.from_pandas`` without a schema: all-null columns typed ``null``), both read; the
older files are rewritten in the store's schema by the next ingest.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.io.errors import InputError
from pipelines.workspace.sources.records import JOB_ARROW_SCHEMA, job_frame
from pipelines.workspace.store import JOBS, PART_FILE, TRAFFIC, Store


def _job(job_id: str, submitted: str, gpu_type: str | None, source: str = "slurm") -> dict:
    return {"source": source, "job_id": job_id, "submitted_at": submitted, "state": "completed", "gpus": 4,
            "gpu_type": gpu_type, "started_at": submitted, "ended_at": pd.Timestamp(submitted) + pd.Timedelta("1h"),
            "elapsed_s": 3600.0}


def test_a_month_without_gpu_types_beside_one_with_them_reads(tmp_path):
    store = Store(tmp_path)
    store.upsert(JOBS, job_frame([_job("1", "2025-01-10T00:00Z", None)]))  # January: untyped (gres/gpu=8)
    store.upsert(JOBS, job_frame([_job("2", "2025-02-10T00:00Z", "a100")]))  # February: typed
    store.upsert(JOBS, job_frame([_job("ns/w", "2025-02-11T00:00Z", None, source="kueue")]))  # Kueue: never a type
    jobs = store.jobs().sort_values("job_id").reset_index(drop=True)
    assert list(jobs["job_id"]) == ["1", "2", "ns/w"]
    assert list(jobs["gpu_type"]) == [None, "a100", None]
    # every partition file carries the store's schema, an all-null column included
    for path in sorted(tmp_path.glob(f"jobs/*/*/{PART_FILE}")):
        assert pq.read_schema(path).remove_metadata().equals(JOB_ARROW_SCHEMA), path
    # a second ingest of the same records reads the store again and adds nothing
    again = store.upsert(JOBS, job_frame([_job("1", "2025-01-10T00:00Z", None)]))
    assert (again[""].added, again[""].updated) == (0, 0)


def _write_old_version(path, rows: list[dict]) -> None:
    """How the previous version wrote a partition: arrow's inferred schema (all-None columns typed null)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(job_frame(rows), preserve_index=False), path)


def test_a_store_of_the_older_version_is_read_and_upgraded(tmp_path):
    jan = tmp_path / "jobs" / "source=slurm" / "month=2025-01" / PART_FILE
    feb = tmp_path / "jobs" / "source=slurm" / "month=2025-02" / PART_FILE
    _write_old_version(jan, [_job("1", "2025-01-10T00:00Z", None)])
    _write_old_version(feb, [_job("2", "2025-02-10T00:00Z", "a100")])
    assert pq.read_schema(jan).field("gpu_type").type == pa.null()  # the fault's precondition
    # the old reader (one dataset, the first file's schema) failed here: Unsupported cast from string to null
    store = Store(tmp_path)
    assert sorted(store.jobs()["job_id"]) == ["1", "2"]
    assert store.upgrade() == 2  # both files lack the store's schema (null columns, large_string)
    for path in (jan, feb):
        assert pq.read_schema(path).remove_metadata().equals(JOB_ARROW_SCHEMA)
    assert store.upgrade() == 0
    jobs = store.jobs().sort_values("job_id")
    assert list(jobs["gpu_type"]) == [None, "a100"] and list(jobs["gpus"]) == [4, 4]


def test_a_file_missing_a_column_reads_it_as_null_and_a_wrong_type_is_named(tmp_path):
    path = tmp_path / "jobs" / "source=slurm" / "month=2025-01" / PART_FILE
    frame = job_frame([_job("1", "2025-01-10T00:00Z", "h100")]).drop(columns=["qos"])
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    jobs = Store(tmp_path).jobs()
    assert jobs["qos"].tolist() == [None] and jobs["gpu_type"].tolist() == ["h100"]
    bad = pa.Table.from_pandas(frame.assign(gpus="four"), preserve_index=False)
    pq.write_table(bad, path)
    with pytest.raises(InputError, match=r"month=2025-01/part.parquet: column gpus of type (large_)?string cannot be read as int64"):
        Store(tmp_path).jobs()


def test_traffic_partitions_share_the_schema(tmp_path):
    store = Store(tmp_path)
    from pipelines.workspace.sources.records import traffic_frame

    store.upsert(TRAFFIC, traffic_frame([{"service": "chat", "ts": "2025-01-01T00:00Z", "value": None},
                                         {"service": "chat", "ts": "2025-02-01T00:00Z", "value": 3.5}]))
    t = store.traffic().sort_values("ts")
    assert t["value"].isna().tolist() == [True, False] and t["value"].iloc[1] == 3.5


def test_the_catalog_names_the_store_tables_with_the_store_schema():
    from pipelines.catalog import STORE_DATASETS

    assert STORE_DATASETS["store_jobs"].schema.equals(JOB_ARROW_SCHEMA)
    assert STORE_DATASETS["store_jobs"].pattern == "jobs/source=<source>/month=<YYYY-MM of submit>/part.parquet"
    assert STORE_DATASETS["store_traffic"].key == ("service", "ts")
