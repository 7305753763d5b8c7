"""Logging and registering forecaster models in MLflow: job forecasters and the scheduler forecaster.

Job forecasters are logged through one path, :func:`log_job_model` (lightgbm flavour + registered
pyfunc, one pip-requirement list :func:`model_pip_requirements`); model logging needs MLflow's fluent
API (the rest of :mod:`pipelines.tracking` uses explicit run ids). Versions are described, aliased
and gated by holdout metrics (:func:`holdout_tags`).
"""

from __future__ import annotations

import json
import logging
import pickle
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightgbm
import numpy as np
import pandas as pd
import pyarrow

from forecasters.jobs import predict as job_predict
from pipelines.catalog import MODEL_RUN_FILES
from pipelines.config.settings import Settings
from pipelines.models import job_files as job_models
from pipelines.report.forecast_plots import plot_pred_vs_actual
from pipelines.tracking.runs import clean_metrics, flatten, log_run, run_name, tag_values
from pipelines.tracking.store import mlflow_client, quiet_mlflow, set_alias


def model_pip_requirements() -> list[str]:
    """The pip requirements of every logged model: the installed versions, pinned.

    Pinned because the pyfunc forecaster is unpickled by reference and the boosters are LightGBM
    text models: the versions they were logged (and checked) with are the ones known to load
    them. Given explicitly, ``log_model`` skips its ~10 s requirement inference (docs/STACK.md).
    """
    import mlflow  # lazily: import cost, see pipelines.tracking.store

    return [
        f"lightgbm=={lightgbm.__version__}",
        f"pandas=={pd.__version__}",
        f"numpy=={np.__version__}",
        f"pyarrow=={pyarrow.__version__}",
        f"mlflow=={mlflow.__version__}",
    ]


def registered_model_name(kind: str) -> str:
    """Name of the registered forecaster of ``kind`` (``gpuplan-<kind>-forecaster``)."""
    return f"gpuplan-{kind}-forecaster"


def log_job_model(
    settings: Settings,
    run_id: str,
    model: Any,
    example_jobs: Any,
    *,
    alias: str = "champion",
    description: str | None = None,
    version_tags: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Log a job forecaster to ``run_id``, register it and point ``alias`` at it (case C11).

    The one model-logging path: the main job's training (:func:`log_job_model_run` from
    :func:`pipelines.models.jobs.train_or_load`, run by ``gpuplan run``, the nightly flow and
    ``gpuplan predict`` when no model is saved) calls it. Logged:

    * ``duration_lgbm``, ``gpus_lgbm``: the two boosters in the **lightgbm flavour**, unchanged,
      so ``mlflow.lightgbm.load_model`` gives back a booster whose stored category lists
      (``pandas_categorical``) are the model's fixed level lists; it takes the forecaster's design
      matrix (``model.design_matrix``, ``category`` columns; the GPU booster its first
      ``booster.feature_name()`` columns). Signature: the design matrix with
      categoricals as strings (MLflow has no category type, docs/STACK.md). No input example:
      MLflow validates one through the generic pyfunc, which cannot cast strings to categories.
    * ``forecaster``: the whole forecaster as a **pyfunc**
      (:class:`pipelines.models.job_files.JobModelPyfunc`), the registered, servable model: input
      ``job_id`` + the raw feature columns with categoricals as plain strings (as parsed from
      JSON), output the prediction frame of ``forecasters.jobs.predict`` (``flags`` joined with
      ``;``). Signature and input example (``example_jobs``, at most 5 rows).

    The forecaster is registered as a new version of :func:`registered_model_name` with ``alias``
    pointed at it (aliases, not the deprecated stages), the version's ``description`` and its tags
    ``version_tags`` (the holdout metrics, :func:`holdout_tags`); ``mlflow.pyfunc.load_model(
    "models:/gpuplan-<kind>-forecaster@champion")`` serves it. Before registering, the logged
    pyfunc is reloaded and must reproduce the in-memory predictions on the example (1e-9 h).

    Args:
        settings: where the store and registry are (``tracking_uri``).
        run_id: an existing run (e.g. from :func:`log_run`); reopened and finished again.
        model: a fitted :class:`forecasters.jobs.JobModel`.
        example_jobs: ``(n >= 1, ...)`` jobs with the kind's raw feature columns (``job_id``
            optional); the first 5 rows are used.
        alias: registry alias pointed at the new version.
        description: the new version's description in the registry (None: none).
        version_tags: the new version's tags (the holdout metrics, :func:`holdout_tags`); values as text.

    Returns:
        ``{"run_id", "duration_uri", "gpus_uri", "pyfunc_uri", "registered_name", "version"}``.

    Raises:
        ValueError: the reloaded pyfunc does not reproduce the forecaster's predictions.
    """
    import mlflow  # lazily: import cost, see pipelines.tracking.store
    import mlflow.lightgbm
    import mlflow.pyfunc
    from mlflow.models import infer_signature

    mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_registry_uri(settings.tracking_uri)
    raw = job_models.raw_feature_frame(model, example_jobs.head(5))
    design = model.design_matrix(raw.drop(columns="job_id"))
    design_str = design.copy()
    for c in model.spec.categorical:
        design_str[c] = design_str[c].astype(object).astype(str)
    expected = job_models.pyfunc_output(job_predict(model, raw))
    reqs = model_pip_requirements()
    name = registered_model_name(model.kind)
    uris: dict[str, str] = {"run_id": run_id}
    with quiet_mlflow(), mlflow.start_run(run_id=run_id):
        for key, booster in (("duration", model.duration_booster), ("gpus", model.gpus_booster)):
            cols = list(booster.feature_name())  # the GPU booster takes a prefix of the design matrix
            sig = infer_signature(design_str[cols], booster.predict(design[cols]))
            info = mlflow.lightgbm.log_model(booster, name=f"{key}_lgbm", signature=sig, pip_requirements=reqs)
            uris[f"{key}_uri"] = info.model_uri
        with tempfile.TemporaryDirectory() as td:
            saved = job_models.save_model(model, Path(td) / "job_model")
            info = mlflow.pyfunc.log_model(
                name="forecaster",
                python_model=job_models.JobModelPyfunc(),
                artifacts={"job_model": str(saved)},
                signature=infer_signature(raw, expected),
                input_example=raw,
                pip_requirements=reqs,
            )
        uris["pyfunc_uri"] = info.model_uri
        got = mlflow.pyfunc.load_model(info.model_uri).predict(raw)
        for col in ("duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred"):
            if not np.allclose(got[col].to_numpy(float), expected[col].to_numpy(float), rtol=0, atol=1e-9):
                raise ValueError(f"{name}: the logged pyfunc does not reproduce {col} of the forecaster")
        mv = mlflow.register_model(info.model_uri, name, tags=tag_values(version_tags or {}))
    describe_version(settings, name, str(mv.version), description)
    set_alias(settings, name, alias, mv.version)
    return {**uris, "registered_name": name, "version": str(mv.version)}


def holdout_tags(metrics: Mapping[str, Any], prefix: str = "holdout.") -> dict[str, float]:
    """Registry version tags of holdout metrics: finite numbers of ``metrics`` (flat) as ``<prefix><name>``."""
    return {f"{prefix}{k}": float(v) for k, v in clean_metrics(metrics).items()}


def describe_version(settings: Settings, name: str, version: str, description: str | None) -> None:
    """Set a registered model version's description (``MlflowClient.update_model_version``); None: nothing."""
    if description:
        mlflow_client(settings).update_model_version(name, version, description=description)


def alias_version(settings: Settings, name: str, alias: str) -> str | None:
    """The version (text) a registered model's ``alias`` points at, or None when it has none."""
    try:
        return str(mlflow_client(settings).get_model_version_by_alias(name, alias).version)
    except Exception:  # noqa: BLE001 - MLflow raises a RestException for a missing alias or model
        return None


#: Registry version tag: sha256 of the training history and the fit parameters
#: (:func:`pipelines.models.jobs.data_params_hash`); a retrain on unchanged data finds it and registers nothing.
DATA_HASH_TAG = "gpuplan.data_params_sha256"


def version_with_tag(settings: Settings, name: str, key: str, value: str) -> str | None:
    """The newest version of registered model ``name`` whose tag ``key`` is ``value`` (text), or None."""
    try:
        versions = mlflow_client(settings).search_model_versions(f"name='{name}'")
    except Exception:  # noqa: BLE001 - MLflow raises a RestException for a missing model
        return None
    hits = [int(v.version) for v in versions if (v.tags or {}).get(key) == value]
    return str(max(hits)) if hits else None


def job_model_note(kind: str, doc: Mapping[str, Any], source: str, cutoff: str | None, reason: str | None) -> str:
    """The description of a job forecaster's run and version: MAE, its ratio to the analytic baseline, the gate's reason.

    Says plainly when the model only matches the analytic prior (ratio within 2 %), and that the shipped
    histories are generated (``data/jobs/README.md``): no operator's jobs were learnt from.
    """
    m = doc.get("metrics") or {}
    bases = doc.get("baselines") or {}
    mae = float(m.get("mae_h", float("nan")))
    base = float((bases.get("analytic") or {}).get("mae_h", float("nan")))
    ratio = mae / base if base else float("nan")
    text = (f"{kind} duration forecaster (LightGBM boosting on the analytic prior's residual; P10/P50/P90 hours and "
            f"GPUs), trained on the {doc.get('n_train')} earliest jobs of the generated history {Path(source).name} "
            f"up to {cutoff or 'n/a'}; held out: the {doc.get('n_test')} latest. Holdout MAE {mae:.4f} h = "
            f"{ratio:.3f} × analytic baseline ({base:.4f} h); other baselines "
            + ", ".join(f"{b} {v.get('mae_h', float('nan')):.4f} h" for b, v in bases.items() if b != "analytic") + ".")
    if abs(ratio - 1.0) <= 0.02:
        text += (" On this generated history the model only matches the analytic baseline (the history follows the "
                 "prior, so there is little for the boosting to learn).")
    if reason:
        text += f" Gate: {reason}."
    return text


def log_job_model_run(settings: Settings, kind: str, model: Any, doc: Mapping[str, Any], test: pd.DataFrame,
                      held_out: tuple[pd.DataFrame, np.ndarray, np.ndarray], source: str,
                      alias: str = "champion", reason: str | None = None,
                      extra_tags: Mapping[str, Any] | None = None) -> str:
    """Log a trained ``kind`` forecaster to its experiment; returns the run id.

    The run's description (``mlflow.note.content``) and the version's are :func:`job_model_note` (the MAE
    "× analytic baseline", "generated history", the gate's ``reason``); ``extra_tags`` go on the run and the
    version (e.g. :data:`DATA_HASH_TAG`).

    Params: kind, history path (``source``), level-list version, train/test sizes, model info.
    Metrics: the evaluation document ``doc`` flattened (:func:`flatten`). Artifacts: the
    predicted-vs-actual plot of the held-out jobs (``held_out`` = predictions, actual hours, ok mask;
    :func:`pipelines.stages.models.held_out`) and the level lists; then the model itself
    (:func:`log_job_model`, with the first test jobs as input example).
    """
    pred, actual, ok = held_out
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / MODEL_RUN_FILES["pred_vs_actual_plot"].format(kind=kind)
        plot_pred_vs_actual(kind, pred, actual, ok, dict(doc), png)
        levels = Path(tmp) / MODEL_RUN_FILES["levels"]
        levels.write_text(json.dumps({"levels_version": model.levels_version, "levels": model.levels}))
        params = {"kind": kind, "history": source, "levels_version": model.levels_version,
                  "n_train": doc.get("n_train"), "n_test": doc.get("n_test"),
                  **{f"info.{k}": v for k, v in model.info.items() if not isinstance(v, dict)}}
        curve = model.info.get("oof_mse_log_by_round")
        cutoff = _data_cutoff(test)
        note = job_model_note(kind, doc, source, cutoff, reason)
        metrics = flatten(doc)
        base = ((doc.get("baselines") or {}).get("analytic") or {}).get("mae_h")
        if base:
            metrics["mae_ratio_vs_analytic"] = float((doc.get("metrics") or {})["mae_h"]) / float(base)
        rid = log_run(settings, kind, run_name(kind, cutoff), params={**params, "cutoff": cutoff, "alias": alias},
                      metrics=metrics, artifacts={f"plots/{png.name}": png, "model_meta/levels.json": levels},
                      metric_steps={"cv.oof_mse_log": curve} if isinstance(curve, (list, tuple)) else None,
                      tags={"gpuplan.stage": "train", "gpuplan.kind": kind, "gpuplan.history": "generated",
                            "mlflow.note.content": note, **tag_values(extra_tags or {})})
    m = doc.get("metrics") or {}
    description = f"{note} MLflow run {rid}."
    tags = {**holdout_tags(m), **holdout_tags({f"{b}.mae_h": v.get("mae_h") for b, v in
                                               (doc.get("baselines") or {}).items()}, "holdout.baseline."),
            "holdout.n_jobs": doc.get("n_test"), "cutoff": cutoff, **(extra_tags or {})}
    log_job_model(settings, rid, model, test.head(5), alias=alias, description=description, version_tags=tags)
    return rid


def _data_cutoff(frame: pd.DataFrame) -> str | None:
    """The newest ``submitted_at`` of ``frame`` (ISO, UTC), None without that column or any value."""
    if "submitted_at" not in frame or frame.empty:
        return None
    t = pd.to_datetime(frame["submitted_at"], utc=True).max()
    return None if pd.isna(t) else t.isoformat()


def legacy_scheduler_model_name(workspace: Path) -> str:
    """The registered name before workspace ids: ``gpuplan-scheduler-<folder name>`` (shared by same-named folders, case 023)."""
    return f"gpuplan-scheduler-{_slug(Path(workspace).name)}"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text) or "workspace"


def scheduler_model_name(ws: Any) -> str:
    """Registered name of a workspace's scheduler forecaster: ``gpuplan-scheduler-<folder name>-<id12>``.

    ``id12``: the first 12 hex digits of the workspace id (:attr:`pipelines.workspace.load.Workspace.workspace_id`),
    so two clusters whose folders have the same name keep two registered models and two champions in one
    MLflow (case 023); the folder name is kept for people reading the registry.
    """
    return f"gpuplan-scheduler-{_slug(Path(ws.root).name)}-{ws.workspace_id[:12]}"


def find_scheduler_model_name(settings: Settings, ws: Any) -> str | None:
    """The registered model holding ``ws``'s scheduler versions: the id-keyed name, else the old folder name.

    The old name (:func:`legacy_scheduler_model_name`) counts only when one of its versions was logged from
    this workspace (run param ``workspace`` = its folder), so another cluster's same-named folder is not
    found. None: neither is registered.
    """
    client = mlflow_client(settings)
    name = scheduler_model_name(ws)
    if client.search_model_versions(f"name='{name}'", max_results=1):
        return name
    old = legacy_scheduler_model_name(ws.root)
    for v in client.search_model_versions(f"name='{old}'"):
        if v.run_id and client.get_run(v.run_id).data.params.get("workspace") == str(ws.root):
            return old
    return None


def log_scheduler_model_run(settings: Settings, ws: Any, model: Any, doc: Mapping[str, Any], alias: str) -> str:
    """Log one nightly retraining of a workspace's scheduler forecaster; register it; point ``alias`` at it.

    Run in the ``scheduler`` experiment: params (workspace, cut-off, promoted, reason, the champion
    version before), metrics (history/train/holdout rows, the candidate's and the champion's holdout
    evaluations, flattened), the model as a pyfunc (:mod:`pipelines.models.scheduler`) registered as a
    new version of :func:`scheduler_model_name` with ``alias`` (``champion`` or ``challenger``). A store
    whose versions of this workspace sit under the old folder name (:func:`find_scheduler_model_name`) gets
    one WARNING naming both, before the id-keyed model's first version; the old versions are kept.

    Returns the registered version (text).
    """
    import mlflow  # lazily: import cost, see pipelines.tracking.store
    import mlflow.pyfunc

    from pipelines.models import scheduler as scheduler_models

    params = {"workspace": str(ws.root), "cutoff": doc.get("cutoff"), "promoted": doc.get("promoted"),
              "reason": doc.get("reason"), "alias": alias, "champion_version_before": doc.get("champion_version_before"),
              "mode": getattr(model, "mode", None)}
    metrics = {k: doc.get(k) for k in ("history_rows", "train_rows", "holdout_rows", "scored_rows")}
    for key in ("candidate", "champion"):
        if doc.get(key):
            metrics.update(flatten(doc[key], f"{key}."))
    rid = log_run(settings, "scheduler", run_name("scheduler", doc.get("cutoff"), Path(ws.root).name), params=params,
                  metrics=metrics, tags={"gpuplan.stage": "nightly", "gpuplan.workspace": str(ws.root),
                                                "gpuplan.workspace_id": ws.workspace_id})
    mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_registry_uri(settings.tracking_uri)
    name = scheduler_model_name(ws)
    found = find_scheduler_model_name(settings, ws)
    if found is not None and found != name:  # only before the id-keyed model's first version: said once
        logging.getLogger("gpuplan").warning(
            "registered model %r (its name before workspace ids) keeps %s's earlier versions; new versions and the "
            "champion alias go to %r", found, ws.root, name)
    with tempfile.TemporaryDirectory() as td, quiet_mlflow(), mlflow.start_run(run_id=rid):
        pkl = Path(td) / scheduler_models.MODEL_FILE
        pkl.write_bytes(pickle.dumps(model))
        info = mlflow.pyfunc.log_model(name="forecaster", python_model=scheduler_models.SchedulerModelPyfunc(),
                                       artifacts={"model": str(pkl)}, pip_requirements=model_pip_requirements())
        cand = (doc.get("candidate") or {}).get("metrics") or {}
        champ = (doc.get("champion") or {}).get("metrics") or {}
        tags = {**holdout_tags(cand), **holdout_tags(champ, "holdout.champion_before."),
                "cutoff": doc.get("cutoff"), "promoted": doc.get("promoted")}
        mv = mlflow.register_model(info.model_uri, name, tags=tag_values(tags))
    describe_version(settings, name, str(mv.version), (
        f"Scheduler-history runtime forecaster of {ws.root} (P50/P90 hours per job), trained on "
        f"{doc.get('history_rows')} records up to {doc.get('cutoff')}; holdout {doc.get('holdout_rows')} runs"
        + (f", MAE {cand['mae_h']:.3f} h, pinball P90 {cand.get('pinball_p90_h', float('nan')):.3f} h" if "mae_h" in cand
           else "") + f". {alias}: {doc.get('reason')}. MLflow run {rid}."))
    set_alias(settings, name, alias, mv.version)
    return str(mv.version)


def register_nightly(settings: Settings, ws: Any, model: Any, doc: Mapping[str, Any]) -> str:
    """Log and register a gated nightly refit (:func:`pipelines.models.scheduler.nightly_fit`'s ``(model, doc)``).

    The new version gets the ``champion`` alias when ``doc["promoted"]``, else ``challenger``
    (:func:`log_scheduler_model_run`); a promoted model also becomes the saved champion the plans load
    (:func:`pipelines.models.scheduler.save_champion`, with its version, cut-off, history rows and reason).
    Returns the registered version (text).
    """
    from pipelines.models import scheduler as scheduler_models

    version = log_scheduler_model_run(settings, ws, model, doc, alias="champion" if doc["promoted"] else "challenger")
    if doc["promoted"]:
        scheduler_models.save_champion(settings, model, {"version": version, "cutoff": doc["cutoff"],
                                                         "history_rows": doc["history_rows"], "reason": doc["reason"]})
    return version
