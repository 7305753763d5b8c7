"""The shipped data (:data:`SHIPPED_FILES`), the files a user names, and :class:`Catalog` (shipped data and the model store); ``main`` re-derives the real-trace slices (package docstring: :mod:`pipelines.catalog`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from optimizer.plan import Plan
from optimizer.problem import Problem
from optimizer.scenarios import RealTraceData
from pipelines.catalog.run import MODEL_VERSION_SUFFIX, NIGHTLY_MARKER, RunCatalog
from pipelines.config.settings import PROJECT_ROOT, Settings
from pipelines.io import job_io, model_files, plan_io, schemas, strict_json, trace_io, traffic_io
from pipelines.io.atomic import atomic_write_text
from pipelines.io.errors import InputError
from pipelines.workspace.config import ServiceSettings, read_services

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
    "het_nodes": "traces/openb_het_nodes.csv",
    "het_pods_a": "traces/openb_het_window_a.csv",
    "het_pods_b": "traces/openb_het_window_b.csv",
}

#: The public traces the shipped slices are derived from, relative to the shared data folder.
PUBLIC_TRACE_SOURCES: dict[str, str] = {
    "openb_pods": "alibaba-openb-gpu-2023/openb_pod_list_default.csv",
    "servegen_aggregate": "servegen-bailian-llm-2025/aggregate_10min.csv",
    "openb_pods_gpuspec": "alibaba-openb-gpu-2023/openb_pod_list_gpuspec20.csv",
    "openb_pods_multigpu": "alibaba-openb-gpu-2023/openb_pod_list_multigpu20.csv",
    "openb_nodes": "alibaba-openb-gpu-2023/openb_node_list_gpu_node.csv",
}

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
#: Heterogeneous openb scenario (issue 26) -> key of its pod window; both use :data:`SHIPPED_FILES` ``het_nodes``.
HET_TRACE_WINDOWS: dict[str, str] = {"openb-het-a": "het_pods_a", "openb-het-b": "het_pods_b"}
#: The heterogeneous windows' node slice: every HET_EVERY_K-th node of each (type, size) kind; 549 = the
#: largest kind's count (G2 x 8), so every kind keeps exactly one node (``data/traces/README.md``).
HET_EVERY_K = 549


def load_real_trace(trace_dir: Path = TRACE_DIR, scenario: str = "real_trace") -> RealTraceData:
    """The shipped real-trace slices of ``trace_dir`` for ``scenario`` as :class:`optimizer.scenarios.RealTraceData`.

    ``scenario``: ``real_trace`` (openb window of trace days 122-123) or ``real_trace_b`` (days
    116-117); both use the same ServeGen file. ``openb-het-a`` / ``openb-het-b`` (issue 26): the same days
    from the gpuspec20 + multigpu20 pod lists with ``gpu_spec``, and the node slice
    (:func:`pipelines.io.trace_io.parse_het_trace`). Parsed by :func:`pipelines.io.trace_io.parse_real_trace`.
    Raises :class:`InputError` for another scenario name or a missing/malformed file.
    """
    trace_dir = Path(trace_dir)
    if scenario in HET_TRACE_WINDOWS:
        return trace_io.parse_het_trace(trace_dir / Path(SHIPPED_FILES[HET_TRACE_WINDOWS[scenario]]).name,
                                        trace_dir / Path(SHIPPED_FILES["trace_serve"]).name,
                                        trace_dir / Path(SHIPPED_FILES["het_nodes"]).name)
    if scenario not in TRACE_WINDOWS:
        raise InputError(f"real-trace scenario {scenario!r}: expected one of "
                         f"{', '.join((*TRACE_WINDOWS, *HET_TRACE_WINDOWS))}")
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


def derive_het_traces(shared_data: Path, data_dir: Path = DATA_DIR) -> dict:
    """Re-derive the heterogeneous openb windows (issue 26) from the public traces under ``shared_data``.

    The node slice (:func:`pipelines.io.trace_io.slice_nodes` with :data:`HET_EVERY_K`), the pod list
    (:func:`pipelines.io.trace_io.het_pod_list`: gpuspec20 plus multigpu20's added pods) and its two
    windows on the days of ``real_trace`` and ``real_trace_b`` (the same rules, applied to the gpuspec20
    list). Returns ``{"nodes": summary, "openb-het-a": summary, "openb-het-b": summary}``. Raises
    :class:`InputError` for a missing source file.
    """
    src = {k: Path(shared_data) / PUBLIC_TRACE_SOURCES[k]
           for k in ("openb_pods_gpuspec", "openb_pods_multigpu", "openb_nodes")}
    for p in src.values():
        if not p.is_file():
            raise InputError(f"trace source file not found: {p}")
    gpuspec = pd.read_csv(src["openb_pods_gpuspec"])
    nodes = trace_io.slice_nodes(pd.read_csv(src["openb_nodes"]), HET_EVERY_K)
    trace_io.write_csv(nodes, Path(data_dir) / SHIPPED_FILES["het_nodes"])
    pods = trace_io.het_pod_list(gpuspec, pd.read_csv(src["openb_pods_multigpu"]))
    day_a = trace_io.choose_window_day(gpuspec)
    day_b = trace_io.choose_second_window_day(day_a)
    out: dict[str, Any] = {"nodes": {"nodes": int(len(nodes)), "gpus": int(nodes["gpus"].sum())}}
    for name, day in (("openb-het-a", day_a), ("openb-het-b", day_b)):
        out[name] = trace_io.derive_het_window(pods, day, Path(data_dir) / SHIPPED_FILES[HET_TRACE_WINDOWS[name]])
    return out


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


