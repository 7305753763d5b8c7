"""Problem-file reader and plan-parquet writer for ``gpuplan plan`` (DESIGN §3, §3.1, §7.1).

The only file IO around the optimizer's plan: the optimizer itself stays pure.

- :func:`read_problem` loads a problem JSON file and validates it with
  :meth:`optimizer.problem.Problem.from_dict` (``on_invalid_job="drop"`` keeps the other jobs
  and lists the rejected ones, case C21).
- :func:`write_plan_parquet` writes the long ``plan.parquet`` table of
  :func:`pipelines.stages.outputs.plan_tables` (rows ``job``, ``service_step``, ``gpu_step``) atomically
  (temporary file in the same folder, then ``os.replace``), with the plan's summary (planner,
  status, objective, bound, gap, solve_s, model, message, violations) as JSON in the parquet
  schema metadata under the key ``gpuplan_plan``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from optimizer.problem import Problem
from pipelines.io import strict_json
from pipelines.io.atomic import atomic_path
from pipelines.io.errors import InputError

PLAN_METADATA_KEY = b"gpuplan_plan"


def read_problem(path: Path, on_invalid_job: Literal["raise", "drop"] = "raise") -> Problem:
    """Read and validate a problem file (JSON, DESIGN §3.1); returns an ``optimizer.problem.Problem``.

    Raises :class:`pipelines.io.errors.InputError` for a missing/unreadable file or invalid JSON (with
    line and column), and :class:`optimizer.errors.InputError` for invalid content (naming the job
    or service and the field).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"problem file not found: {path}")
    if path.is_dir():
        raise InputError(f"problem file is a directory: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"problem file {path} cannot be read: {exc}") from None
    doc = strict_json.loads(text, f"problem file {path}")
    return Problem.from_dict(doc, on_invalid_job=on_invalid_job)


def plan_summary(plan: Any) -> dict[str, Any]:
    """The plan's JSON document without the per-job and per-service lists."""
    d = plan.to_dict()
    for k in ("jobs", "services"):
        d.pop(k, None)
    return d


def write_plan_parquet(tables: pd.DataFrame, plan: Any, path: Path) -> Path:
    """Write the plan tables ``tables`` to ``path`` atomically.

    With :func:`plan_summary` of ``plan``
    as JSON in the parquet metadata (key ``gpuplan_plan``).

    Raises :class:`pipelines.io.errors.InputError` when the target folder does not exist.
    """
    path = Path(path)
    if not path.parent.exists():
        raise InputError(f"--out folder does not exist: {path.parent}")
    with warnings.catch_warnings():  # pyarrow reads tz-aware columns via Series.values (pandas 3.1 deprecation)
        warnings.filterwarnings("ignore", message="Series.values returning an ndarray")
        table = pa.Table.from_pandas(tables, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[PLAN_METADATA_KEY] = json.dumps(plan_summary(plan)).encode("utf-8")
    table = table.replace_schema_metadata(meta)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return path


def read_plan_summary(path: Path) -> dict[str, Any]:
    """The ``gpuplan_plan`` summary stored in a plan parquet's metadata."""
    meta = pq.read_schema(path).metadata or {}
    if PLAN_METADATA_KEY not in meta:
        raise InputError(f"{path} has no gpuplan plan metadata")
    return json.loads(meta[PLAN_METADATA_KEY])
