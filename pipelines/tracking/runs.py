"""Logging runs to MLflow: one generic run (:func:`log_run`), names, links, finished runs, plan and benchmark runs.

Logging goes through :class:`mlflow.MlflowClient` with explicit run ids (thread-safe, no global
active run). The forecasters' runs are in :mod:`pipelines.tracking.forecast_runs` and
:mod:`pipelines.tracking.models`.
"""

from __future__ import annotations

import json
import math
import posixpath
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.config.settings import Settings
from pipelines.tracking.store import EXPERIMENTS, experiment_name, init_store, mlflow_client, workspace_key


def clean_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """``metrics`` as MLflow takes them: finite floats only (None, booleans, non-numbers and NaN/inf dropped)."""
    out = {}
    for k, v in metrics.items():
        if v is None or isinstance(v, bool):
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out[k] = f
    return out


#: A parameter value that is a list (or tuple) longer than this is logged as a JSON artifact
#: ``params/<key>.json`` instead (a parameter is one short setting; MLflow caps values at 6,000 characters).
MAX_PARAM_ITEMS = 20


def split_params(params: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """``(params, long_lists)``: values as text (None dropped), and list values of more than :data:`MAX_PARAM_ITEMS` items.

    A long list keeps a short parameter naming where it went: ``"<n> values: params/<key>.json"``.
    """
    short: dict[str, str] = {}
    lists: dict[str, Any] = {}
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)) and len(v) > MAX_PARAM_ITEMS:
            lists[k] = list(v)
            short[k] = f"{len(v)} values: params/{k}.json"
        else:
            short[k] = str(v)[:6000]
    return short, lists


def log_run(
    settings: Settings,
    experiment: str,
    run_name: str,
    *,
    params: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
    artifacts: Mapping[str, Path] | None = None,
    metric_steps: Mapping[str, Sequence[float]] | None = None,
    status: str = "FINISHED",
) -> str:
    """Create one finished MLflow run in the experiment ``experiment_name(settings, experiment)`` and return its run id.

    The experiment is keyed by the workspace (:func:`pipelines.tracking.store.experiment_name`); every run of
    an operator's workspace also carries the tags ``gpuplan.workspace`` (its folder) and ``gpuplan.workspace_id``.

    Args:
        settings: where the store is (``tracking_uri``) and which workspace (``workspace_dir``).
        experiment: a key of :data:`EXPERIMENTS`.
        run_name: the run's name (:func:`run_name`).
        params: logged as strings; None values skipped; a list longer than :data:`MAX_PARAM_ITEMS` goes to
            the artifact ``params/<key>.json`` (:func:`split_params`).
        metrics: numeric values; None, NaN, inf and non-numeric values are skipped (MLflow
            refuses NaN in SQLite stores).
        artifacts: artifact path inside the run (``plots/gantt.png``) -> local file; the file is
            stored under the key's folder with its own name.
        metric_steps: metric name -> values logged as one metric history, step 0, 1, ... (a curve in
            the UI, e.g. a cross-validation loss per boosting round); non-finite values skipped.
        tags: run tags.
        status: terminal status, ``FINISHED`` or ``FAILED``.

    Raises:
        KeyError: unknown experiment key.
    """
    from mlflow.entities import Metric, Param  # lazily: import cost, see pipelines.tracking.store

    client = mlflow_client(settings)
    exp = client.get_experiment_by_name(experiment_name(settings, experiment))
    exp_id = exp.experiment_id if exp is not None else init_store(settings)[experiment]
    run = client.create_run(exp_id, run_name=run_name, tags={**workspace_tags(settings), **(tags or {})})
    rid = run.info.run_id
    try:
        now_ms = int(time.time() * 1000)
        m = [Metric(k, v, now_ms, 0) for k, v in clean_metrics(metrics or {}).items()]
        for key, values in (metric_steps or {}).items():
            m += [Metric(key, float(v), now_ms, i) for i, v in enumerate(values)
                  if v is not None and math.isfinite(float(v))]
        short, lists = split_params(params or {})
        p = [Param(k, v) for k, v in short.items()]
        for i in range(0, max(len(m), len(p)), 100):
            client.log_batch(rid, metrics=m[i:i + 100], params=p[i:i + 100])
        if lists:
            with tempfile.TemporaryDirectory() as td:
                for key, values in lists.items():
                    f = Path(td) / f"{key}.json"
                    f.write_text(json.dumps(values))
                    client.log_artifact(rid, str(f), artifact_path="params")
        for key, path in (artifacts or {}).items():
            client.log_artifact(rid, str(path), artifact_path=posixpath.dirname(key) or None)
    except BaseException:
        client.set_terminated(rid, status="FAILED")
        raise
    client.set_terminated(rid, status=status)
    return rid


def _cut_text(ts: Any) -> str:
    """A cut-off instant as text: ``2025-03-14`` at midnight UTC, else ``2025-03-16 15:00Z``."""
    t = pd.Timestamp(ts)
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    return t.strftime("%Y-%m-%d") if (t.hour, t.minute, t.second) == (0, 0, 0) else t.strftime("%Y-%m-%d %H:%MZ")


def run_name(kind: str, cutoff: Any, subject: str | None = None, on: datetime | None = None) -> str:
    """An MLflow run name: kind, what it is about, data cut-off and the date it ran (UTC).

    ``run_name("realtime", "2025-03-14T00:00Z", on=...)`` -> ``"realtime cutoff=2025-03-14 2026-12-01"``;
    ``run_name("profile", ts, "m-small")`` -> ``"profile m-small cutoff=2025-03-16 15:00Z 2026-12-01"``.
    ``cutoff``: the newest data the run used (None: left out); ``on``: default now.
    """
    day = (pd.Timestamp(on) if on is not None else pd.Timestamp.now(tz="UTC")).strftime("%Y-%m-%d")
    parts = [kind] + ([subject] if subject else []) + ([f"cutoff={_cut_text(cutoff)}"] if cutoff is not None else [])
    return " ".join([*parts, day])


def run_link(settings: Settings, run_id: str) -> dict[str, Any]:
    """Where an MLflow run is: ``{"run_id", "experiment", "tracking_uri", "url"}``.

    ``url`` is the run's page in the MLflow UI at ``settings.mlflow_ui_url``
    (``<ui>/#/experiments/<experiment id>/runs/<run id>``, the MLflow UI's route), None without a UI URL.
    """
    run = mlflow_client(settings).get_run(run_id)
    exp = mlflow_client(settings).get_experiment(run.info.experiment_id)
    url = (f"{settings.mlflow_ui_url}/#/experiments/{run.info.experiment_id}/runs/{run_id}"
           if settings.mlflow_ui_url else None)
    return {"run_id": run_id, "experiment": exp.name, "tracking_uri": settings.tracking_uri, "url": url}


def tag_values(tags: Mapping[str, Any]) -> dict[str, str]:
    """Tag values as text (floats to 6 significant digits); None dropped."""
    return {k: (f"{v:.6g}" if isinstance(v, float) else str(v)) for k, v in tags.items() if v is not None}


def workspace_tags(settings: Settings) -> dict[str, str]:
    """``{"gpuplan.workspace": folder, "gpuplan.workspace_id": id}`` of an operator's workspace; empty for the demo."""
    key = workspace_key(settings.workspace_dir)
    if key is None:
        return {}
    from pipelines.workspace.load import read_or_create_workspace_id

    root = Path(settings.workspace_dir).resolve()
    return {"gpuplan.workspace": str(root), "gpuplan.workspace_id": read_or_create_workspace_id(root)}


def _ran_in(run: Any, root: str) -> bool:
    """True when an MLflow run names the workspace folder ``root`` (tag ``gpuplan.workspace`` or param ``workspace``)."""
    return root in (run.data.tags.get("gpuplan.workspace"), run.data.params.get("workspace"))


def finished_runs(settings: Settings, experiment: str) -> list[Any]:
    """Finished runs of one experiment of ``settings``' workspace (newest first).

    Read from :func:`pipelines.tracking.store.experiment_name`, and also from the experiment's old plain name
    (a store written before workspace ids): there only the runs naming this workspace's folder
    (:func:`_ran_in`), since same-named folders of other clusters shared it.
    """
    client = mlflow_client(settings)
    name = experiment_name(settings, experiment)
    runs: list[Any] = []
    for exp_name in dict.fromkeys([name, EXPERIMENTS[experiment]]):
        exp = client.get_experiment_by_name(exp_name)
        if exp is None:
            continue
        found = [r for r in client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])
                 if r.info.status == "FINISHED"]
        if exp_name != name:
            found = [r for r in found if _ran_in(r, str(Path(settings.workspace_dir).resolve()))]
        runs += found
    return sorted(runs, key=lambda r: r.info.start_time, reverse=True)


def run_metrics(settings: Settings, run_id: str) -> dict[str, float]:
    """The latest value of every metric of one MLflow run (flat names, as logged)."""
    return dict(mlflow_client(settings).get_run(run_id).data.metrics)


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dict -> flat ``a.b.c`` keys (metrics of a run)."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def units_slug(units: str) -> str:
    """Units as a metric-name part: ``"requests/h"`` -> ``"requests_per_h"`` (letters, digits, ``_``)."""
    slug = units.strip().replace("/", "_per_")
    return "".join(c if c.isalnum() or c == "_" else "_" for c in slug).strip("_") or "units"


#: Band metric of :class:`pipelines.stages.realtime.RealtimeForecastFit` -> its MLflow name (``{u}``: the units slug).
BAND_METRIC_NAMES = {"band_mae": "band_mae_{u}", "band_mape": "band_mape_frac",
                     "band_p90_coverage": "band_p90_coverage_last24h_frac", "level_factor": "level_factor_ratio",
                     "history_hours": "history_h"}


def band_metrics(metrics: Mapping[str, Any], units: str) -> dict[str, Any]:
    """A service's last-day band metrics with units in their names (:data:`BAND_METRIC_NAMES`).

    ``band_mae`` -> ``band_mae_<units slug>`` (:func:`units_slug`: ``requests/h`` -> ``requests_per_h``),
    ``band_mape`` -> ``band_mape_frac``, ``band_p90_coverage`` -> ``band_p90_coverage_last24h_frac`` (the last day's hours); other keys kept.
    """
    u = units_slug(units)
    return {BAND_METRIC_NAMES.get(k, k).format(u=u): v for k, v in metrics.items()}


def log_plan_run(settings: Settings, run_dir: Path, folder_name: str, planner: str, summary: Mapping[str, Any],
                 rt_metrics: Mapping[str, Mapping[str, Any]] | None, artifacts: Mapping[str, Path],
                 units: Mapping[str, str] | None = None) -> str:
    """Log a published run folder to the ``plans`` experiment; returns the MLflow run id.

    Run name ``plan <workspace> cutoff=<plan start> <date>`` (:func:`run_name`; the inputs end at the plan
    start); the folder's name is the tag ``gpuplan.run_folder``.
    Params: planner, status, plan start, fallback, run folder, model size, real-time profile status.
    Metrics: the summary's planned metrics (:func:`pipelines.stages.outputs.planned_metrics`),
    ``objective``, ``bound``, ``mip_gap`` (fraction), ``solve_s``, ``proven_optimal`` (0/1), and the
    real-time band metrics as ``<service>.<metric>`` with units (:func:`band_metrics`; ``units``: service ->
    traffic units). Artifacts: ``artifacts`` (artifact path -> file;
    :meth:`pipelines.catalog.RunCatalog.artifacts`: Gantt chart, demand bands, risk report, plan tables,
    problem, summary; and ``report/risk_report.html`` when the folder has it).
    """
    metrics = dict(summary["metrics"])
    metrics.update({"objective": summary["objective"], "bound": summary["bound"], "mip_gap": summary["mip_gap"],
                    "solve_s": summary["solve_s"], "proven_optimal": 1.0 if summary["proven_optimal"] else 0.0})
    for svc, m in (rt_metrics or {}).items():
        metrics.update({f"{svc}.{k}": v for k, v in band_metrics(m, (units or {}).get(svc, "traffic/h")).items()})
    model = summary.get("model") or {}
    params = {"planner": planner, "status": summary["status"], "plan_start": summary["plan_start"],
              "fallback": summary["fallback"], "run_dir": str(run_dir),
              **{f"model_{k}": v for k, v in model.items()}}
    params.update({f"rt_status.{k}": v[0] for k, v in summary["rt_status"].items()})
    for kind, m in (summary.get("models") or {}).items():  # which forecaster versions made the forecasts
        params.update({f"forecaster.{kind}.{k}": v for k, v in (m or {}).items()})
    cluster = summary.get("cluster") or {}
    if cluster:
        params.update({"workspace": cluster.get("workspace"), "n_gpus": cluster.get("n_gpus")})
    arts = dict(artifacts)
    html = Path(run_dir) / "risk_report.html"
    if html.is_file():
        arts.setdefault("report/risk_report.html", html)
    ws = Path(str(cluster.get("workspace") or "demo")).name
    return log_run(settings, "plans", run_name("plan", summary["plan_start"], ws), params=params, metrics=metrics,
                   tags={"gpuplan.status": summary["status"], "gpuplan.run_folder": folder_name}, artifacts=arts)


def log_benchmark_run(settings: Settings, scenario: str, quick: bool, out: Path, cfg: Any, res: Any,
                      files: Sequence[str]) -> str:
    """Log one benchmark (:mod:`pipelines.bench`) to the ``benchmarks`` experiment; returns the run id.

    Params: scenarios, planners, seed, quick, solver budget, replan interval, output folder. Metrics:
    ``wall_s``, ``verified_plans``, ``violations`` and ``<scenario>.<planner>.<bench.csv column>``.
    Artifacts: the written ``files`` (bench.csv, bench.md, plots) under ``bench/``.
    """
    metrics: dict[str, Any] = {"wall_s": res.wall_s, "verified_plans": res.verified_plans,
                               "violations": res.violations}
    for m in res.metrics:
        row = m.row()
        for k, v in row.items():
            if k not in ("scenario", "planner"):
                metrics[f"{row['scenario']}.{row['planner']}.{k}"] = v
    params = {"scenarios": ",".join(cfg.scenarios), "planners": ",".join(cfg.planners), "seed": cfg.seed,
              "quick": cfg.quick, "time_limit_s": cfg.time_limit_s, "mip_rel_gap": cfg.mip_rel_gap,
              "replan_every_steps": cfg.replan_every_steps, "out_dir": str(out)}
    artifacts = {f"bench/{f}": Path(out) / f for f in files if (Path(out) / f).is_file()}
    return log_run(settings, "benchmarks", f"bench-{scenario}{'-quick' if quick else ''}", params=params,
                   metrics=metrics, artifacts=artifacts, tags={"gpuplan.stage": "benchmark"})
