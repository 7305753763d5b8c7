"""Saving, loading and MLflow logging of job forecasters (:class:`forecasters.jobs.JobModel`), case C11.

On disk a model is a folder::

    duration_booster.txt   LightGBM text model: the correction to log(duration_h) over the analytic
                           prior (add ``forecasters.jobs.offset_log_h`` of the design matrix); its
                           ``pandas_categorical`` line holds the fixed level lists, so
                           ``lightgbm.Booster(model_file=...)`` alone maps categories correctly
    gpus_booster.txt       LightGBM text model: the correction to log2(gpus_used) over the memory
                           prior (``forecasters.jobs.gpus_log2_from``)
    model.json             kind, level lists + version, residual quantiles, baselines, info

:func:`save_model` builds it in a temporary sibling folder and renames it into place.
:func:`load_model` checks that both boosters' stored categories equal the stored level lists.

MLflow (:func:`log_model_mlflow`): the duration booster in the **lightgbm flavour** (signature
from the design matrix with categoricals as strings: MLflow has no category type) and the whole
forecaster as a **pyfunc** (:class:`JobModelPyfunc`) that takes ``job_id`` and the raw feature
columns of any string dtype (e.g. parsed from JSON), casts them to the fixed level lists and returns the prediction
frame (``flags`` joined with ``;``). ``pip_requirements`` are given explicitly so ``log_model``
does not spend ~10 s inferring them (``docs/STACK.md``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.atomic import atomic_dir
from pipelines.errors import InputError

FORMAT_VERSION = 2  # 2: boosters return corrections to physics priors
DURATION_FILE = "duration_booster.txt"
GPUS_FILE = "gpus_booster.txt"
META_FILE = "model.json"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


def _meta(model) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "kind": model.kind,
        "levels": {c: list(v) for c, v in model.levels.items()},
        "levels_version": model.levels_version,
        "model_features": list(model.model_features),
        "residual_quantiles_log": [float(v) for v in model.residual_quantiles_log],
        "baseline": _jsonable(model.baseline),
        "info": _jsonable(model.info),
    }


def save_model(model, path: str | Path) -> Path:
    """Write ``model`` (a :class:`forecasters.jobs.JobModel`) to the folder ``path``; return it.

    The folder is written under a temporary name and renamed into place
    (:func:`pipelines.atomic.atomic_dir`); an existing model at ``path`` is replaced (moved aside,
    then deleted once the new one is in place).
    """
    path = Path(path)
    with atomic_dir(path) as tmp:
        model.duration_booster.save_model(str(tmp / DURATION_FILE))
        model.gpus_booster.save_model(str(tmp / GPUS_FILE))
        (tmp / META_FILE).write_text(json.dumps(_meta(model), indent=1, sort_keys=True), encoding="utf-8")
    return path


def _booster(path: Path):
    import lightgbm as lgb

    if not path.is_file():
        raise InputError(f"model file missing: {path}")
    try:
        return lgb.Booster(model_file=str(path))
    except Exception as exc:  # lightgbm raises LightGBMError for corrupt files
        raise InputError(f"model file {path} is corrupt: {' '.join(str(exc).split())[:160]}") from None


def load_model(path: str | Path):
    """Load a model folder written by :func:`save_model`.

    Raises:
        InputError: the folder, a file in it, or its metadata is missing or corrupt; the stored
            categories of a booster differ from the stored level lists; unknown format version.
    """
    from forecasters.jobs import JobModel
    from forecasters.schema import spec_for

    path = Path(path)
    if not path.is_dir():
        raise InputError(f"no model folder at {path}")
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"model metadata missing: {path / META_FILE}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"model metadata {path / META_FILE} is corrupt: {exc}") from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise InputError(f"{path}: model format {meta.get('format_version')!r}, expected {FORMAT_VERSION}")
    spec = spec_for(meta["kind"])
    levels = {c: tuple(v) for c, v in meta["levels"].items()}
    expected_cats = [list(levels[c]) for c in spec.features if c in spec.categorical]
    dur = _booster(path / DURATION_FILE)
    gpus = _booster(path / GPUS_FILE)
    for name, b in (("duration", dur), ("gpus", gpus)):
        if b.pandas_categorical != expected_cats:
            raise InputError(f"{path}: the {name} booster's stored categories differ from model.json's level lists")
    return JobModel(
        kind=meta["kind"],
        levels=levels,
        levels_version=meta["levels_version"],
        duration_booster=dur,
        gpus_booster=gpus,
        residual_quantiles_log=tuple(meta["residual_quantiles_log"]),
        baseline=meta["baseline"],
        info=meta["info"],
    )


def pip_requirements() -> list[str]:
    """Pinned requirements of a logged model (the installed versions)."""
    import lightgbm
    import mlflow
    import pyarrow

    return [
        f"lightgbm=={lightgbm.__version__}",
        f"pandas=={pd.__version__}",
        f"numpy=={np.__version__}",
        f"pyarrow=={pyarrow.__version__}",
        f"mlflow=={mlflow.__version__}",
    ]


def _string_frame(model, jobs: pd.DataFrame) -> pd.DataFrame:
    """``job_id`` + raw features, categoricals as plain object strings (what JSON gives), for signatures."""
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


def _pyfunc_output(pred: pd.DataFrame) -> pd.DataFrame:
    out = pred.copy()
    out["flags"] = [";".join(f) for f in out["flags"]]
    return out


def _make_pyfunc_class():
    import mlflow.pyfunc

    class JobModelPyfunc(mlflow.pyfunc.PythonModel):
        """MLflow pyfunc around a saved job forecaster: raw features in, prediction frame out."""

        def load_context(self, context):  # noqa: D401 - mlflow hook
            self._model = load_model(context.artifacts["job_model"])

        def predict(self, context, model_input, params=None):  # noqa: D401 - mlflow hook
            from forecasters.jobs import predict as job_predict

            frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
            return _pyfunc_output(job_predict(self._model, frame))

    JobModelPyfunc.__module__ = __name__
    JobModelPyfunc.__qualname__ = "JobModelPyfunc"
    return JobModelPyfunc


_PYFUNC_CLASS = None


def __getattr__(name: str):
    """Build :class:`JobModelPyfunc` lazily (importing mlflow costs seconds) and keep it picklable by reference."""
    global _PYFUNC_CLASS
    if name == "JobModelPyfunc":
        if _PYFUNC_CLASS is None:
            _PYFUNC_CLASS = _make_pyfunc_class()
        return _PYFUNC_CLASS
    raise AttributeError(name)


def log_model_mlflow(model, example_jobs: pd.DataFrame, *, name: str | None = None, tmp_dir: str | Path | None = None) -> dict[str, str]:
    """Log ``model`` to the active MLflow run (or a new one) in the lightgbm flavour and as a pyfunc.

    The caller sets the tracking URI (an absolute ``sqlite:///...`` path; never the default).

    Args:
        model: a fitted :class:`forecasters.jobs.JobModel`.
        example_jobs: a few jobs (raw features) for the input example and signatures.
        name: base name of the two logged models (default ``<kind>_forecaster``).
        tmp_dir: folder for the temporary saved copy packed into the pyfunc (default: system temp).

    Returns:
        ``{"lightgbm_uri", "pyfunc_uri", "run_id"}``.
    """
    import tempfile

    import mlflow
    import mlflow.lightgbm
    from mlflow.models import infer_signature

    from forecasters.jobs import predict as job_predict

    base = name or f"{model.kind}_forecaster"
    raw = _string_frame(model, example_jobs)
    design = model.design_matrix(raw.drop(columns="job_id"))
    design_str = design.copy()
    for c in model.spec.categorical:
        design_str[c] = design_str[c].astype(object).astype(str)
    dur_sig = infer_signature(design_str, model.duration_booster.predict(design))
    out_frame = _pyfunc_output(job_predict(model, raw))
    py_sig = infer_signature(raw, out_frame)
    reqs = pip_requirements()
    active = mlflow.active_run()
    run_ctx = mlflow.start_run() if active is None else None
    try:
        run = mlflow.active_run()
        lgb_info = mlflow.lightgbm.log_model(
            model.duration_booster, name=f"{base}_duration_lgbm", signature=dur_sig, pip_requirements=reqs
        )
        with tempfile.TemporaryDirectory(dir=tmp_dir) as td:
            saved = save_model(model, Path(td) / "job_model")
            py_info = mlflow.pyfunc.log_model(
                name=f"{base}_pyfunc",
                python_model=__getattr__("JobModelPyfunc")(),
                artifacts={"job_model": str(saved)},
                signature=py_sig,
                input_example=raw.head(3),
                pip_requirements=reqs,
            )
        return {"lightgbm_uri": lgb_info.model_uri, "pyfunc_uri": py_info.model_uri, "run_id": run.info.run_id}
    finally:
        if run_ctx is not None:
            mlflow.end_run()
