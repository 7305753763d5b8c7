"""Job-forecaster stage: train and evaluate a forecaster, forecast the queue, predict a job file.

Durations in the problem use the P50 forecast (``DURATION_QUANTILE``); GPUs ``max(gpus_requested,
gpus_pred)``. Generated queued jobs of ``ELASTIC_KINDS`` may also run on twice that (up to
``MAX_ELASTIC_GPUS``), with the duration forecast at that size (:func:`forecasters.jobs.predict_for_sizes`):
the MILP picks the size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forecasters import jobs as J
from pipelines.io import schemas

#: Duration quantile planned (the risk report uses P90 for deadline risk).
DURATION_QUANTILE = "p50"
#: Kinds whose generated queued jobs may also run on twice their GPUs (data parallel).
ELASTIC_KINDS = ("training", "batch_inference")
#: Largest elastic size (GPUs).
MAX_ELASTIC_GPUS = 16
#: Share of the history (latest jobs by submission) held out to evaluate a trained forecaster.
TEST_FRACTION = 0.2


@dataclass(frozen=True)
class TrainedModel:
    """Output of :func:`train`.

    The fitted model, its held-out jobs and the evaluation document
    (:func:`forecasters.jobs.evaluate`: ``n_train``, ``n_test``, ``metrics``, ``baselines``).
    """

    model: Any
    test: pd.DataFrame
    doc: dict[str, Any]


def train(kind: str, history: pd.DataFrame, seed: int = 0, test_fraction: float = TEST_FRACTION) -> TrainedModel:
    """Fit ``kind`` on the earliest ``1 - test_fraction`` of ``history`` (by submission time).

    Then evaluate it on the rest against the baselines (:func:`forecasters.jobs.time_split`, ``fit``,
    ``evaluate``).
    """
    train_rows, test = J.time_split(history, test_fraction)
    model = J.fit(kind, train_rows, seed=seed)
    return TrainedModel(model, test, J.evaluate(model, test))


def held_out(trained: TrainedModel) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """``(predictions, actual duration_h, ok)`` on the held-out jobs.

    ``ok`` masks the rows with a
    positive actual duration (failed-at-launch rows excluded, case C21). The predictions carry the
    analytic baseline's duration too (``analytic_h``, hours: :func:`forecasters.jobs.analytic_baseline_h`).
    """
    pred = J.predict(trained.model, trained.test)
    pred["analytic_h"] = J.analytic_baseline_h(trained.model, trained.test)
    actual = trained.test["duration_h"].to_numpy(float)
    return pred, actual, actual > 0


def predict_document(model: Any, jobs: pd.DataFrame, step_minutes: float | None = None) -> dict[str, Any]:
    """Forecast every job of ``jobs`` (``gpuplan predict``); unknown categories are refused.

    Returns ``{"kind", "jobs": [{"job_id", "duration_p10_h", "duration_p50_h", "duration_p90_h",
    "gpus_pred", "flags"}]}`` in the input's order (hours as forecast; with ``step_minutes``, each at
    least one step of it and flagged ``clipped_min_duration`` where raised).

    Raises:
        InputError: a non-numeric value or an unknown or missing category (row, column, value named).
    """
    pred = J.predict(model, jobs, on_unseen="error", step_minutes=step_minutes)
    rows = [
        {
            "job_id": r.job_id,
            "duration_p10_h": float(r.duration_p10_h),
            "duration_p50_h": float(r.duration_p50_h),
            "duration_p90_h": float(r.duration_p90_h),
            "gpus_pred": int(r.gpus_pred),
            "flags": list(r.flags),
        }
        for r in pred.itertuples(index=False)
    ]
    return {"kind": model.kind, "jobs": rows}


def forecast_jobs(model: Any, queue: pd.DataFrame, step_minutes: int) -> pd.DataFrame:
    """Duration quantiles (hours, >= one step) and GPU count per queued/running job of one kind.

    Returns :data:`pipelines.io.schemas.JOB_FORECASTS`: ``queue``'s planning columns plus
    ``duration_p10_h, duration_p50_h, duration_p90_h, gpus_pred``, ``flags`` (joined by ``,``) and
    ``size_options`` (JSON ``[{"gpus", "duration_h", "duration_p10_h", "duration_p50_h", "duration_p90_h"}]`` of
    the elastic sizes, or None): ``duration_h`` is the planned quantile (:data:`DURATION_QUANTILE`) at that
    size, the three quantiles let the risk report judge a job on the size the plan chose.
    """
    pred = J.predict(model, queue, step_minutes=step_minutes)
    keep = [*schemas.QUEUE, "gpus_requested"]
    out = queue[keep].reset_index(drop=True).copy()
    for col in ("duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred"):
        out[col] = pred[col].to_numpy()
    out["flags"] = [",".join(f) for f in pred["flags"]]
    out["size_options"] = None
    elastic = (out["state"] == "queued") & (out["source"] == "generated") & out["kind"].isin(ELASTIC_KINDS)
    if elastic.any():
        base = np.maximum(out["gpus_requested"].to_numpy(int), out["gpus_pred"].to_numpy(int))
        idx = np.flatnonzero(elastic.to_numpy() & (2 * base <= MAX_ELASTIC_GPUS))
        for i in idx:
            opts = J.predict_for_sizes(model, queue.iloc[[i]], [int(2 * base[i])], step_minutes=step_minutes)
            fit = opts[opts["fits"]]
            out.at[i, "size_options"] = json.dumps([
                {"gpus": int(r["gpus"]), "duration_h": float(r[f"duration_{DURATION_QUANTILE}_h"]),
                 **{f"duration_{q}_h": float(r[f"duration_{q}_h"]) for q in ("p10", "p50", "p90")}}
                for _, r in fit.iterrows()])
    return out


def forecast_queue(models: dict[str, Any], queue: dict[str, pd.DataFrame], step_minutes: int) -> pd.DataFrame:
    """:func:`forecast_jobs` for every non-empty kind of ``queue`` with ``models[kind]``, stacked."""
    parts = [forecast_jobs(models[kind], q, step_minutes) for kind, q in queue.items() if len(q)]
    return schemas.check_columns(pd.concat(parts, ignore_index=True), schemas.JOB_FORECASTS, "job forecasts")
