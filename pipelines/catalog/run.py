"""The run folder's datasets (:data:`RUN_DATASETS`) and :class:`RunCatalog`, the one reader and writer of a run folder (package docstring: :mod:`pipelines.catalog`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from optimizer.plan import Plan
from optimizer.preemption import stop_details
from optimizer.problem import Problem
from pipelines.io import plan_io, schemas, strict_json
from pipelines.io.atomic import atomic_path, atomic_write_text

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

#: Artifacts of a job-model run (MLflow, written to a temporary folder): the held-out plot, the level lists.
MODEL_RUN_FILES: dict[str, str] = {"pred_vs_actual_plot": "pred_vs_actual_{kind}.png", "levels": "levels.json"}

#: Suffix of the file beside a saved forecaster that records its registered version.
MODEL_VERSION_SUFFIX = ".version.json"

#: The model store's marker of the local days the nightly retraining claimed.
NIGHTLY_MARKER = "nightly_days.json"

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

    def save_plan(self, plan: Plan, problem: Problem | None = None) -> Path:
        """Write ``plan.json`` (:meth:`optimizer.plan.Plan.to_dict`, one line).

        With ``problem`` (the planned one), each entry of ``stops`` also names the job's ``gpus`` and its
        ``lost_gpu_h`` (lost steps x GPUs x step hours: the GPU-h lost, as every other output states a stop's cost);
        :meth:`load_plan` reads the plan back the same.
        """
        doc = plan.to_dict()
        if problem is not None and doc.get("stops"):
            d = {x.job_id: x for x in stop_details(plan, problem)}
            doc["stops"] = [{**x, "gpus": d[x["job_id"]].gpus,
                             "lost_gpu_h": d[x["job_id"]].lost_gpu_h(problem.cluster.step_minutes)}
                            for x in doc["stops"]]
        return self.save("plan", doc)

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
