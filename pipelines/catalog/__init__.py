"""The data catalog (the Kedro habit): the one package that knows every dataset's path, format and schema.

Three places hold data:

- **the run folder** of one ``gpuplan run`` / re-plan (:class:`RunCatalog`, datasets :data:`RUN_DATASETS`):
  ingested traffic, ingest diagnostics, bands, real-time status and metrics, the queue, job forecasts,
  demand, forecasts, the problem, the plan, its tables, the summary, the risk report and the plots;
- **the model store** ``Settings.models_dir`` (:class:`Catalog`): one folder per job kind
  (:mod:`pipelines.io.model_files`) and the nightly local-day marker;
- **a workspace's record store** (:data:`STORE_DATASETS`): job records and traffic samples as
  partitioned parquet, each partition in the store's own arrow schema (never one file's inferred
  schema), written and read by :class:`pipelines.workspace.store.Store`;
- **the shipped data** ``Settings.data_dir`` (:class:`Catalog` and the module-level readers): the
  real-time services and their traffic files, the job histories, the real-trace slices
  (:data:`SHIPPED_FILES`), and the public traces they are derived from (:data:`PUBLIC_TRACE_SOURCES`).

Every reader and writer of those datasets goes through here; frames are checked against their
column schema (:mod:`pipelines.io.schemas`) when written and read; every write is atomic
(:mod:`pipelines.io.atomic`). The format adapters (:mod:`pipelines.io.traffic_io`, :mod:`pipelines.io.job_io`,
:mod:`pipelines.io.trace_io`, :mod:`pipelines.io.plan_io`, :mod:`pipelines.io.model_files`) parse and
serialise; they are given paths by this module and know no file names. A new place (a workspace's
sources) is a new root plus its entries here.

``python -m pipelines.catalog derive-traces SRC [DATA_DIR]`` re-derives the shipped real-trace slices
from the public traces under ``SRC`` (see ``data/traces/README.md``).

:mod:`pipelines.catalog.run` holds the run folder, :mod:`pipelines.catalog.shipped` the shipped data,
the files a user names and the model store; both are imported from here.
"""

from pipelines.catalog.run import (
    MODEL_RUN_FILES,
    MODEL_VERSION_SUFFIX,
    NIGHTLY_MARKER,
    PLAN_ARTIFACTS,
    RUN_DATASETS,
    Dataset,
    Format,
    RunCatalog,
)
from pipelines.catalog.shipped import (
    DATA_DIR,
    HET_EVERY_K,
    HET_TRACE_WINDOWS,
    PUBLIC_TRACE_SOURCES,
    SHIPPED_FILES,
    TRACE_DIR,
    TRACE_WINDOWS,
    Catalog,
    derive_het_traces,
    derive_traces,
    history_path,
    load_real_trace,
    read_jobs_file,
    read_problem_file,
    read_traffic_file,
    shipped_history,
    write_plan_file,
)
from pipelines.catalog.store import STORE_DATASETS, StoreDataset

__all__ = [
    "Catalog",
    "DATA_DIR",
    "Dataset",
    "Format",
    "HET_EVERY_K",
    "HET_TRACE_WINDOWS",
    "MODEL_RUN_FILES",
    "MODEL_VERSION_SUFFIX",
    "NIGHTLY_MARKER",
    "PLAN_ARTIFACTS",
    "PUBLIC_TRACE_SOURCES",
    "RUN_DATASETS",
    "RunCatalog",
    "SHIPPED_FILES",
    "STORE_DATASETS",
    "StoreDataset",
    "TRACE_DIR",
    "TRACE_WINDOWS",
    "derive_het_traces",
    "derive_traces",
    "history_path",
    "load_real_trace",
    "read_jobs_file",
    "read_problem_file",
    "read_traffic_file",
    "shipped_history",
    "write_plan_file",
]
