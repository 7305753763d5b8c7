"""MLflow logging form of job forecasters (:class:`forecasters.jobs.JobModel`), case C11.

On disk a model is the folder of :mod:`pipelines.io.model_files` (:func:`save_model`, :func:`load_model`).
MLflow: :class:`JobModelPyfunc` wraps the whole forecaster as a **pyfunc** that takes ``job_id``
and the raw feature columns of any string dtype (e.g. parsed from JSON; :func:`raw_feature_frame`),
casts them to the fixed level lists and returns the prediction frame (:func:`pyfunc_output`).
It is logged, with the boosters in the lightgbm flavour, by :func:`pipelines.tracking.models.log_job_model`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pipelines.io.lazy import lazy_class
from pipelines.io.model_files import load_model, save_model
from pipelines.models.pyfunc import pyfunc_class

#: ``load_model`` / ``save_model`` are re-exported: the pyfunc loads the model folder it was logged with.
__all__ = ["load_model", "pyfunc_output", "raw_feature_frame", "save_model"]


def raw_feature_frame(model, jobs: pd.DataFrame) -> pd.DataFrame:
    """The pyfunc's input frame.

    Columns: ``job_id`` (str; the row position when absent) + the kind's raw
    features in the model's order, categoricals as plain object strings (what JSON gives),
    booleans ``bool``, integers ``int64``, other numerics ``float64``. Used for signatures and
    input examples. ``jobs``: ``(n, ...)``, extra columns dropped.
    """
    out = jobs[list(model.spec.features)].copy()
    ids = jobs["job_id"] if "job_id" in jobs.columns else pd.Series(range(len(jobs)), index=jobs.index)
    out.insert(0, "job_id", ids.astype(object).astype(str))
    for c in model.spec.categorical:
        out[c] = out[c].astype(object).astype(str)
    for c in model.spec.boolean:
        out[c] = out[c].astype(bool)
    for c in model.spec.integer:
        out[c] = out[c].astype("int64")
    for c in model.spec.numeric:
        if c not in model.spec.boolean and c not in model.spec.integer:
            out[c] = out[c].astype("float64")
    return out


def pyfunc_output(pred: pd.DataFrame) -> pd.DataFrame:
    """The pyfunc's output: ``forecasters.jobs.predict``'s frame with ``flags`` joined by ``;``."""
    out = pred.copy()
    out["flags"] = [";".join(f) for f in out["flags"]]
    return out


def _predict_frame(model: Any, frame: pd.DataFrame) -> pd.DataFrame:
    from forecasters.jobs import predict as job_predict

    return pyfunc_output(job_predict(model, frame))


def _make_pyfunc_class() -> type:
    return pyfunc_class("JobModelPyfunc", __name__, "job_model", load_model, _predict_frame,
                        "MLflow pyfunc around a saved job forecaster: raw features in, prediction frame out.")


#: Module ``__getattr__``: :class:`JobModelPyfunc` is built on first use (:func:`pipelines.io.lazy.lazy_class`).
__getattr__ = lazy_class("JobModelPyfunc", _make_pyfunc_class)
