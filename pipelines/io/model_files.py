"""Job forecasters (:class:`forecasters.jobs.JobModel`) on disk: one folder per model, case C11.

A model is a folder::

    duration_booster.txt   LightGBM text model: the correction to log(duration_h) over the analytic
                           prior (add ``forecasters.jobs.offset_log_h`` of the design matrix); its
                           ``pandas_categorical`` line holds the fixed level lists, so
                           ``lightgbm.Booster(model_file=...)`` alone maps categories correctly
    gpus_booster.txt       LightGBM text model: the correction to log2(gpus_used) over the memory
                           prior (``forecasters.jobs.gpus_log2_from``)
    model.json             kind, level lists + version, residual quantiles, baselines, info

:func:`save_model` builds it in a temporary sibling folder and renames it into place.
:func:`load_model` checks that both boosters' stored categories equal the stored level lists.
The MLflow pyfunc around it is :mod:`pipelines.models.job_files`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.io.atomic import atomic_dir
from pipelines.io.errors import InputError

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
    (:func:`pipelines.io.atomic.atomic_dir`); an existing model at ``path`` is replaced (moved aside,
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
