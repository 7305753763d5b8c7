"""The data catalog (the Kedro habit): the one module that knows every dataset's path, format and schema.

Three places hold data:

- **the run folder** of one ``gpuplan run`` / re-plan (:class:`RunCatalog`, datasets :data:`RUN_DATASETS`):
  ingested traffic, ingest diagnostics, bands, real-time status and metrics, the queue, job forecasts,
  demand, forecasts, the problem, the plan, its tables, the summary, the risk report and the plots;
- **the model store** ``Settings.models_dir`` (:class:`Catalog`): one folder per job kind
  (:mod:`pipelines.io.model_files`) and the nightly local-day marker;
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
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from optimizer.plan import Plan
from optimizer.problem import Problem
from optimizer.scenarios import RealTraceData
from pipelines.config.settings import PROJECT_ROOT, Settings
from pipelines.io import job_io, model_files, plan_io, schemas, strict_json, trace_io, traffic_io
from pipelines.io.atomic import atomic_path, atomic_write_text
from pipelines.io.errors import InputError
from pipelines.workspace.config import ServiceSettings, read_services

Format = Literal["parquet", "json", "text", "png"]


@dataclass(frozen=True)
class Dataset:
    """One dataset of a folder.

    Attributes:
        name: catalog name (``traffic``).
        filename: file name inside its folder; may hold ``{service}`` (one file per service).
        fmt: ``parquet`` (a frame), ``json``, ``text`` (Markdown) or ``png``.
        columns: required columns of a frame (:mod:`pipelines.io.schemas`); empty for other formats.
        indent: JSON indent (None: one line).
        description: what it holds, its units, who writes it.
    """

    name: str
    filename: str
    fmt: Format
    columns: tuple[str, ...] = ()
    indent: int | None = 1
    description: str = ""


def _ds(*args: Any, **kw: Any) -> tuple[str, Dataset]:
    d = Dataset(*args, **kw)
    return d.name, d


#: The datasets of a run folder (DESIGN §3 outputs).
RUN_DATASETS: dict[str, Dataset] = dict([
    _ds("traffic", "traffic.parquet", "parquet", schemas.TRAFFIC,
        description="ingested hourly traffic per service, UTC, gaps imputed, excluded hours flagged"),
    _ds("ingest", "ingest.json", "json", description="ingest diagnostics per service"),
    _ds("bands", "bands.parquet", "parquet", schemas.BANDS,
        description="last shipped day: 24 h-ahead P50/P90 against actual traffic"),
    _ds("rt_status", "rt_status.json", "json", description="service -> [profile status, message]"),
    _ds("rt_metrics", "rt_metrics.json", "json", description="service -> band MAE/MAPE/P90 coverage, level factor"),
    _ds("queue", "queue.parquet", "parquet", schemas.QUEUE_TABLE, description="the current queue, features as JSON"),
    _ds("queue_notes", "queue_notes.json", "json",
        description="an operator's workspace: queue counts and the forecaster version that made the job forecasts"),
    _ds("jobs", "jobs.parquet", "parquet", schemas.JOB_FORECASTS, description="per-job forecasts and queue columns"),
    _ds("demand", "demand.parquet", "parquet", schemas.DEMAND, description="GPU demand per service and step"),
    _ds("forecasts", "forecasts.parquet", "parquet", schemas.FORECASTS,
        description="DESIGN §3 forecasts: job rows and service-step rows"),
    _ds("problem", "problem.json", "json", description="the optimizer problem (DESIGN §3.1)"),
    _ds("plan", "plan.json", "json", indent=None, description="the verified plan (optimizer.plan.Plan.to_dict)"),
    _ds("plan_tables", "plan.parquet", "parquet", schemas.PLAN_TABLES,
        description="the plan as job, service-step and GPU-step rows"),
    _ds("summary", "summary.json", "json", description="status, objective, gap, planned metrics"),
    _ds("commands", "commands.sh", "text",
        description="an operator's workspace: reviewable scheduler commands for the next interval (never run)"),
    _ds("commands_table", "commands.tsv", "text",
        description="the same as rows: job_id, kind, action, start_step, planned start (UTC, local), nodes, gpus"),
    _ds("risk_report_table", "risk_report.parquet", "parquet", description="risk report rows (pipelines.report)"),
    _ds("risk_report_page", "risk_report.md", "text", description="risk report page (pipelines.report)"),
    _ds("risk_report_html", "risk_report.html", "text",
        description="the risk report page as one self-contained HTML file, plots embedded (pipelines.report)"),
    _ds("gantt_plot", "gantt.png", "png", description="plan Gantt chart (pipelines.report)"),
    _ds("demand_plot", "demand.png", "png", description="demand and planned GPUs (pipelines.report)"),
    _ds("bands_plot", "bands.png", "png", description="forecast against actual (pipelines.report)"),
    _ds("outlook_plot", "outlook.png", "png", description="queue outlook (pipelines.report)"),
    _ds("profile_plot", "profile_{service}.png", "png", description="one service's weekly profile"),
])

#: Run-folder datasets logged as artifacts of a plan run: name -> artifact sub-folder.
PLAN_ARTIFACTS: dict[str, str] = {
    "gantt_plot": "plots", "demand_plot": "plots", "bands_plot": "plots", "outlook_plot": "plots",
    "risk_report_page": "report", "risk_report_html": "report", "risk_report_table": "report", "plan_tables": "plan", "problem": "plan",
    "summary": "plan", "commands": "plan", "commands_table": "plan",
}

#: Shipped data, relative to ``Settings.data_dir`` (each folder's README describes its files).
SHIPPED_FILES: dict[str, str] = {
    "services": "traffic/services.json",
    "traffic_dir": "traffic",
    "history_training": "histories/training_jobs.parquet",
    "history_quantization": "histories/quantization_jobs.parquet",
    "history_batch_inference": "histories/batch_inference_jobs.parquet",
    "trace_dir": "traces",
    "trace_pods": "traces/alibaba_openb_window.csv",
    "trace_pods_b": "traces/alibaba_openb_window_b.csv",
    "trace_serve": "traces/servegen_m-small_30min.csv",
}

#: The public traces the shipped slices are derived from, relative to the shared data folder.
PUBLIC_TRACE_SOURCES: dict[str, str] = {
    "openb_pods": "alibaba-openb-gpu-2023/openb_pod_list_default.csv",
    "servegen_aggregate": "servegen-bailian-llm-2025/aggregate_10min.csv",
}

#: Artifacts of a job-model run (MLflow, written to a temporary folder): the held-out plot, the level lists.
MODEL_RUN_FILES: dict[str, str] = {"pred_vs_actual_plot": "pred_vs_actual_{kind}.png", "levels": "levels.json"}

#: Suffix of the file beside a saved forecaster that records its registered version.
MODEL_VERSION_SUFFIX = ".version.json"

#: The model store's marker of the local days the nightly retraining claimed.
NIGHTLY_MARKER = "nightly_days.json"

#: Shipped data folder of this checkout.
DATA_DIR: Path = PROJECT_ROOT / "data"
#: Shipped real-trace folder of this checkout.
TRACE_DIR: Path = DATA_DIR / SHIPPED_FILES["trace_dir"]


# ---------------------------------------------------------------- shipped data without settings


def history_path(kind: str, data_dir: Path = DATA_DIR) -> Path:
    """Path of the shipped history of ``kind`` (``data/histories/<kind>_jobs.parquet``).

    Raises:
        InputError: unknown kind.
    """
    key = f"history_{kind}"
    if key not in SHIPPED_FILES:
        raise InputError(f"no shipped history for kind {kind!r}")
    return Path(data_dir) / SHIPPED_FILES[key]


def shipped_history(kind: str, data_dir: Path = DATA_DIR) -> pd.DataFrame:
    """The shipped generated history of ``kind``, validated (:func:`pipelines.io.job_io.load_history`)."""
    return job_io.load_history(history_path(kind, data_dir), kind)


#: Real-trace scenario -> key of its pod window in :data:`SHIPPED_FILES` (``data/traces/README.md``).
TRACE_WINDOWS: dict[str, str] = {"real_trace": "trace_pods", "real_trace_b": "trace_pods_b"}


def load_real_trace(trace_dir: Path = TRACE_DIR, scenario: str = "real_trace") -> RealTraceData:
    """The shipped real-trace slices of ``trace_dir`` for ``scenario`` as :class:`optimizer.scenarios.RealTraceData`.

    ``scenario``: ``real_trace`` (openb window of trace days 122-123) or ``real_trace_b`` (days
    116-117); both use the same ServeGen file. Parsed by :func:`pipelines.io.trace_io.parse_real_trace`.
    Raises :class:`InputError` for another scenario name or a missing/malformed file.
    """
    if scenario not in TRACE_WINDOWS:
        raise InputError(f"real-trace scenario {scenario!r}: expected one of {', '.join(TRACE_WINDOWS)}")
    trace_dir = Path(trace_dir)
    return trace_io.parse_real_trace(trace_dir / Path(SHIPPED_FILES[TRACE_WINDOWS[scenario]]).name,
                                     trace_dir / Path(SHIPPED_FILES["trace_serve"]).name)


def derive_traces(shared_data: Path, data_dir: Path = DATA_DIR) -> dict:
    """Re-derive the shipped real-trace slices from the public traces under ``shared_data``.

    Window a (``real_trace``, :func:`pipelines.io.trace_io.choose_window_day`) and window b
    (``real_trace_b``, :func:`pipelines.io.trace_io.choose_second_window_day`), each through
    :func:`pipelines.io.trace_io.derive_trace_slice` (both write the same ServeGen file). Returns
    ``{"real_trace": summary, "real_trace_b": summary}``.
    """
    pods_src = Path(shared_data) / PUBLIC_TRACE_SOURCES["openb_pods"]
    serve_src = Path(shared_data) / PUBLIC_TRACE_SOURCES["servegen_aggregate"]
    serve_out = Path(data_dir) / SHIPPED_FILES["trace_serve"]
    a = trace_io.derive_trace_slice(pods_src, serve_src, Path(data_dir) / SHIPPED_FILES["trace_pods"], serve_out)
    b = trace_io.derive_trace_slice(pods_src, serve_src, Path(data_dir) / SHIPPED_FILES["trace_pods_b"], serve_out,
                                    day=trace_io.choose_second_window_day(a["window_day"]))
    return {"real_trace": a, "real_trace_b": b}


# ---------------------------------------------------------------- files a user names


def read_problem_file(path: Path, on_invalid_job: Literal["raise", "drop"] = "raise") -> Problem:
    """A problem file a user names (``gpuplan plan --problem``), validated (:func:`pipelines.io.plan_io.read_problem`)."""
    return plan_io.read_problem(path, on_invalid_job=on_invalid_job)


def write_plan_file(path: Path, tables: pd.DataFrame, plan: Plan) -> Path:
    """Write a plan parquet a user names (``gpuplan plan --out``).

    Writes ``tables`` (:data:`pipelines.io.schemas.PLAN_TABLES`)
    with the plan's summary in the parquet metadata (:func:`pipelines.io.plan_io.write_plan_parquet`).
    """
    schemas.check_columns(tables, schemas.PLAN_TABLES, str(path))
    return plan_io.write_plan_parquet(tables, plan, path)


def read_jobs_file(path: Path, kind: str) -> pd.DataFrame:
    """Jobs to forecast from a file a user names (``gpuplan predict --jobs``; :func:`pipelines.io.job_io.load_jobs`)."""
    return job_io.load_jobs(path, kind)


def read_traffic_file(path: Path) -> pd.DataFrame:
    """An hourly traffic file a user names (``gpuplan profile --traffic``; :func:`pipelines.io.traffic_io.read_traffic`)."""
    return traffic_io.read_traffic(path)


# ---------------------------------------------------------------- a run folder


class RunCatalog:
    """The datasets of one run folder (:data:`RUN_DATASETS`); every write atomic, frames schema-checked."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @staticmethod
    def dataset(name: str) -> Dataset:
        """The :class:`Dataset` called ``name``.

        Raises:
            KeyError: not a run-folder dataset.
        """
        return RUN_DATASETS[name]

    def path(self, name: str, **fields: str) -> Path:
        """Path of dataset ``name`` in this folder (``fields`` fill ``{service}``-style names)."""
        return self.folder / self.dataset(name).filename.format(**fields)

    def exists(self, name: str, **fields: str) -> bool:
        """True when dataset ``name`` has been written to this folder."""
        return self.path(name, **fields).exists()

    def save(self, name: str, value: Any, **fields: str) -> Path:
        """Write ``value`` as dataset ``name`` atomically; returns its path.

        A ``parquet`` dataset takes a frame (checked against its schema, written without the index); a
        ``json`` dataset any JSON value (dates as ISO text); a ``text`` dataset a string.

        Raises:
            pipelines.io.errors.InputError: a frame without a column of its schema.
        """
        ds = self.dataset(name)
        path = self.path(name, **fields)
        if ds.fmt == "parquet":
            schemas.check_columns(value, ds.columns, path.name)
            with atomic_path(path) as tmp:
                value.to_parquet(tmp, index=False)
        elif ds.fmt == "json":
            atomic_write_text(path, json.dumps(value, indent=ds.indent, default=str))
        elif ds.fmt == "text":
            atomic_write_text(path, value)
        else:
            raise ValueError(f"dataset {name}: {ds.fmt} files are written by their plot function (see png_target)")
        return path

    def load(self, name: str, **fields: str) -> Any:
        """Read dataset ``name``: a frame (schema-checked), a JSON value or a string.

        Raises:
            FileNotFoundError: not written; pipelines.io.errors.InputError: a column of its schema missing.
        """
        ds = self.dataset(name)
        path = self.path(name, **fields)
        if ds.fmt == "parquet":
            return schemas.check_columns(pd.read_parquet(path), ds.columns, path.name)
        if ds.fmt == "json":
            return strict_json.loads(path.read_text(), str(path))
        return path.read_text()

    def png_target(self, name: str, **fields: str) -> Path:
        """Path a plot function writes dataset ``name`` (a ``png``) to (it writes atomically itself)."""
        if self.dataset(name).fmt != "png":
            raise ValueError(f"dataset {name} is not a plot")
        return self.path(name, **fields)

    def save_problem(self, problem: Problem) -> Path:
        """Write ``problem.json`` (:meth:`optimizer.problem.Problem.to_dict`)."""
        return self.save("problem", problem.to_dict())

    def load_problem(self) -> Problem:
        """Read and validate ``problem.json``."""
        return plan_io.read_problem(self.path("problem"))

    def save_plan(self, plan: Plan) -> Path:
        """Write ``plan.json`` (:meth:`optimizer.plan.Plan.to_dict`, one line)."""
        return self.save("plan", plan.to_dict())

    def load_plan(self) -> Plan:
        """Read ``plan.json``."""
        return Plan.from_dict(self.load("plan"))

    def artifacts(self) -> dict[str, Path]:
        """The files of this folder a plan run logs to MLflow: ``<sub>/<file name>`` -> path, those present."""
        out = {}
        for name, sub in PLAN_ARTIFACTS.items():
            p = self.path(name)
            if p.exists():
                out[f"{sub}/{p.name}"] = p
        return out


# ---------------------------------------------------------------- shipped data and model store


class Catalog:
    """Shipped data (``settings.data_dir``), the model store (``settings.models_dir``) and run folders."""

    def __init__(self, settings: Settings):
        self.settings = settings

    def shipped(self, key: str) -> Path:
        """Path of a shipped dataset (:data:`SHIPPED_FILES` key) under ``settings.data_dir``."""
        return self.settings.data_dir / SHIPPED_FILES[key]

    def run(self, folder: Path) -> RunCatalog:
        """The datasets of run folder ``folder``."""
        return RunCatalog(folder)

    # shipped data

    def services(self) -> list[ServiceSettings]:
        """The real-time services of ``data/traffic/services.json``, validated (:func:`pipelines.workspace.config.read_services`).

        Raises:
            pipelines.io.errors.InputError: file missing or a service without a required field.
        """
        return read_services(self.shipped("services"))

    def raw_traffic(self, services: list[ServiceSettings]) -> dict[str, pd.DataFrame]:
        """Each service's raw hourly rows (``ts``, ``value``) from its shipped file.

        Read by (:func:`pipelines.io.traffic_io.read_service_traffic`).

        Raises:
            FileNotFoundError: a file missing; pipelines.io.errors.InputError: unreadable, or without rows
                of its service.
        """
        folder = self.shipped("traffic_dir")
        return {s.service: traffic_io.read_service_traffic(folder / s.file, s.service) for s in services}

    def trace_pods(self) -> pd.DataFrame:
        """The shipped Alibaba openb pod window (:data:`pipelines.io.schemas.TRACE_PODS` columns at least).

        Raises:
            pipelines.io.errors.InputError: file missing or a column missing.
        """
        return trace_io.read_pod_window(self.shipped("trace_pods"), schemas.TRACE_PODS)

    def history(self, kind: str) -> tuple[pd.DataFrame, str]:
        """The validated shipped history of ``kind`` and its path (as text, for the model run's params)."""
        path = history_path(kind, self.settings.data_dir)
        return job_io.load_history(path, kind), str(path)

    # model store

    def model_path(self, kind: str) -> Path:
        """Folder of the current ``kind`` forecaster: ``models_dir/<kind>``."""
        return self.settings.models_dir / kind

    def load_model(self, kind: str) -> Any:
        """The current ``kind`` forecaster, or None when missing, unreadable, of another kind or of other level lists.

        Never used then (a corrupt or partial model folder is retrained, never used; so is a model
        whose ``levels_version`` is not the current :data:`forecasters.schema.LEVELS_VERSION`, e.g.
        one saved before ``gpu_type`` covered V100 ... MI300X, which would refuse those types).
        """
        path = self.model_path(kind)
        if not path.is_dir():
            return None
        try:
            model = model_files.load_model(path)
        except InputError:
            return None
        from forecasters.schema import LEVELS_VERSION

        return model if model.kind == kind and model.levels_version == LEVELS_VERSION else None

    def save_model(self, kind: str, model: Any) -> Path:
        """Write ``model`` as the current ``kind`` forecaster (atomic folder swap, :func:`pipelines.io.model_files.save_model`)."""
        return model_files.save_model(model, self.model_path(kind))

    def save_model_version(self, kind: str, doc: dict[str, Any]) -> Path:
        """Record which registered version the saved ``kind`` forecaster is (``<model folder>.version.json``)."""
        path = self.model_path(kind).with_name(f"{kind}{MODEL_VERSION_SUFFIX}")
        return atomic_write_text(path, json.dumps(doc, indent=1))

    def model_version(self, kind: str) -> dict[str, Any] | None:
        """The record of :meth:`save_model_version`, or None."""
        path = self.model_path(kind).with_name(f"{kind}{MODEL_VERSION_SUFFIX}")
        if not path.exists():
            return None
        return strict_json.loads(path.read_text(), str(path))

    def nightly_marker(self) -> Path:
        """The model store's file of local days the nightly retraining claimed."""
        return self.settings.models_dir / NIGHTLY_MARKER


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.catalog derive-traces SRC [DATA_DIR]``: re-derive the shipped trace slices."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "derive-traces":
        print("usage: python -m pipelines.catalog derive-traces SRC [DATA_DIR]  (SRC: the public traces, "
              "see data/traces/README.md)", file=sys.stderr)
        return 2
    print(derive_traces(Path(args[1]), Path(args[2]) if len(args) > 2 else DATA_DIR))
    return 0


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    raise SystemExit(main())
