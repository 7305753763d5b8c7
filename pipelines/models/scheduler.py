"""The scheduler-history forecaster of a workspace: its model folder, the MLflow pyfunc, the gated nightly retraining.

- The workspace's current model (the ``champion``) is ``<models_dir>/scheduler``: ``model.pkl``
  (:class:`forecasters.scheduler.SchedulerModel`, pickled; LightGBM boosters pickle whole) and
  ``meta.json`` (registered ``version``, ``cutoff``, ``history_rows``, ``reason``), swapped in
  atomically (:func:`pipelines.io.atomic.atomic_dir`). Plans use it; before the first nightly run a
  plan fits one on the spot (and says so).
- :func:`nightly_fit` is the gated retraining (:mod:`pipelines.stages.retrain`): train on the store up to
  the cut-off, score against the champion on the same holdout, log to MLflow, register a version,
  move ``champion`` only when the gate says so (else ``challenger``), record why.
- :func:`read_history_file` and :func:`train_from_history` are ``gpuplan train --history FILE``: a
  scheduler history read from one export (any job format of the sources), scored leakage-free on its
  latest 20 % (:func:`forecasters.scheduler.time_split_as_of`), refitted on all of it and saved as
  the champion (``gpuplan predict --kind scheduler`` loads it; nothing is refitted there).
"""

from __future__ import annotations

import json
import pickle
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.config.settings import Settings
from pipelines.io import strict_json
from pipelines.io.atomic import atomic_dir
from pipelines.io.errors import InputError
from pipelines.io.lazy import lazy_class
from pipelines.models.pyfunc import pyfunc_class
from pipelines.stages import retrain
from pipelines.workspace.load import Workspace
from pipelines.workspace.store import Store

FOLDER = "scheduler"
MODEL_FILE = "model.pkl"
META_FILE = "meta.json"


def model_path(settings: Settings) -> Path:
    """The workspace's champion model folder: ``<models_dir>/scheduler``."""
    return settings.models_dir / FOLDER


def save_champion(settings: Settings, model: Any, meta: dict[str, Any]) -> Path:
    """Write ``model`` and ``meta`` as the champion (atomic folder swap); returns the folder."""
    path = model_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(path) as tmp:
        (tmp / MODEL_FILE).write_bytes(pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL))
        (tmp / META_FILE).write_text(json.dumps(meta, indent=1, default=str))
    return path


def load_champion(settings: Settings) -> tuple[Any, dict[str, Any]] | None:
    """``(model, meta)`` of the champion, or None when there is none (or it cannot be read)."""
    path = model_path(settings)
    try:
        model = pickle.loads((path / MODEL_FILE).read_bytes())
        meta = strict_json.loads((path / META_FILE).read_text(), str(path / META_FILE))
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, InputError):
        return None
    return model, meta


def _evaluate(model: Any, holdout: pd.DataFrame) -> dict[str, Any] | None:
    from forecasters.scheduler import evaluate_scheduler_model

    try:
        return evaluate_scheduler_model(model, holdout)
    except InputError:  # no finished run in the holdout
        return None


def unseen_by_champion(holdout: pd.DataFrame, champion_cutoff: object) -> pd.DataFrame:
    """The holdout rows neither model saw: those submitted at or after the champion's cut-off (``meta["cutoff"]``).

    The registered champion was refitted on everything up to its own cut-off, which (nightly, with a
    holdout of several days) covers most of tonight's holdout; scored there it would be graded on jobs
    it was fitted on (issue 33). The candidate is fitted before the holdout, so these rows are unseen
    by both. No cut-off recorded (a champion saved by hand): the whole holdout.
    """
    if champion_cutoff is None or holdout.empty:
        return holdout
    sub = pd.to_datetime(holdout["submitted_at"], utc=True)
    return holdout[sub >= pd.Timestamp(str(champion_cutoff)).tz_convert("UTC")].reset_index(drop=True)


def nightly_fit(settings: Settings, ws: Workspace, cutoff: datetime) -> tuple[Any, dict[str, Any]]:
    """Retrain the workspace's forecaster on its store up to ``cutoff`` and gate it (module docstring).

    Returns ``(model, doc)``: the version to register (fitted on the whole history up to the
    cut-off) and ``{"cutoff", "history_rows", "train_rows", "holdout_rows", "scored_rows", "promoted", "reason",
    "candidate", "champion", "champion_version_before"}`` (candidate/champion: their holdout
    evaluations or None, both on :func:`unseen_by_champion` of the holdout). The caller logs and registers it (:func:`pipelines.tracking.models.log_scheduler_model_run`)
    and, when promoted, saves it as the champion (:func:`save_champion`).

    Raises:
        InputError: the store holds no finished run before ``cutoff`` to train on.
    """
    from forecasters.scheduler import fit_scheduler_model

    tz, cfg = ws.config.cluster.timezone, ws.config.retrain
    upto, train, holdout = retrain.split_at_cutoff(Store(ws.store_dir).jobs(), cutoff, cfg.holdout_days)
    try:
        candidate = fit_scheduler_model(train, timezone=tz, seed=settings.seed)
    except InputError:  # nothing before the holdout to learn from
        candidate = None
    current = load_champion(settings)
    scored = unseen_by_champion(holdout, None if current is None else current[1].get("cutoff"))
    cand_eval = _evaluate(candidate, scored) if candidate is not None else None
    champ_eval = _evaluate(current[0], scored) if current is not None else None
    promote, reason = retrain.gate(cand_eval, champ_eval, cfg.min_holdout_runs)
    final = fit_scheduler_model(upto, timezone=tz, seed=settings.seed)
    doc = {"cutoff": pd.Timestamp(cutoff).isoformat(), "history_rows": len(upto), "train_rows": len(train),
           "holdout_rows": len(holdout), "scored_rows": len(scored), "promoted": promote, "reason": reason, "candidate": cand_eval,
           "champion": champ_eval, "champion_version_before": None if current is None else current[1].get("version")}
    return final, doc


#: Job formats ``--history`` reads, by file suffix when ``--format`` is not given.
HISTORY_FORMATS: dict[str, str] = {".csv": "csv", ".gz": "csv", ".parquet": "parquet", ".json": "kueue-json",
                                   ".txt": "slurm-sacct", ".sacct": "slurm-sacct"}


def read_history_file(path: Path, fmt: str | None, timezone: str) -> tuple[pd.DataFrame, int, list[str]]:
    """``(records, rows read, rejected-row messages)`` of one scheduler export (``gpuplan train --history``).

    ``fmt``: ``csv``/``parquet`` (the job table of :mod:`pipelines.workspace.sources.tabular`: ``job_id`` and
    ``submitted_at`` required, every record column optional, any other column an annotation),
    ``slurm-sacct`` (``sacct --parsable2``) or ``kueue-json``; None: by the file's suffix
    (:data:`HISTORY_FORMATS`). ``timezone``: the zone of naive times (the cluster's clock).

    Raises:
        InputError: no such file, an unknown format, a file that cannot be read at all, no row read.
    """
    from pipelines.io.csv_sniff import read_operator_csv
    from pipelines.workspace.sources import kueue, slurm, tabular

    path = Path(path)
    if not path.is_file():
        raise InputError(f"--history {path}: no such file")
    fmt = fmt or HISTORY_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(f"--history {path}: cannot tell the format from the suffix {path.suffix!r}; "
                         f"pass --format ({', '.join(sorted(set(HISTORY_FORMATS.values())))})")
    if fmt == "csv":
        res = tabular.parse_jobs(read_operator_csv(path, f"--history {path}", text_columns=("job_id",)), timezone)
    elif fmt == "parquet":
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise InputError(f"--history {path}: cannot be read as parquet ({' '.join(str(exc).split())[:160]})") from None
        res = tabular.parse_jobs(frame, timezone, csv=False)
    elif fmt == "slurm-sacct":
        res = slurm.parse_sacct(path.read_text(encoding="utf-8", errors="replace"), timezone)
    elif fmt == "kueue-json":
        res = kueue.parse_kueue_workloads(path.read_text(encoding="utf-8", errors="replace"))
    else:
        raise InputError(f"--format {fmt!r}: expected one of csv, parquet, slurm-sacct, kueue-json")
    if res.frame.empty:
        first = f" (first: {res.errors[0]})" if res.errors else ""
        raise InputError(f"--history {path}: no job record read from {res.read} rows{first}")
    return res.frame, res.read, list(res.errors)


def train_from_history(settings: Settings, records: pd.DataFrame, timezone: str, label: str) -> tuple[Any, dict[str, Any]]:
    """Score, refit and save the scheduler forecaster of a history (``gpuplan train --history``).

    Scored on the latest 20 % by submit time, fitted on the history as it was at that cut
    (:func:`forecasters.scheduler.time_split_as_of`, :func:`forecasters.scheduler.evaluate_scheduler_model`:
    model, time limit, per-user, per-GPU-count and global medians); then refitted on every record
    and saved as the champion (:func:`save_champion`, meta ``{"version": None, "history": label,
    "history_rows", "reason"}``). The caller logs it (``gpuplan train`` to the ``scheduler`` MLflow
    experiment).

    Returns ``(model, doc)``: doc = the evaluation plus ``history``, ``history_rows``, ``saved``
    (the model folder) and ``fit_report`` (the refitted model's ``info``: chosen feature groups,
    calibration, counts).

    Raises:
        InputError: no finished run to train on, or none to score.
    """
    from forecasters.scheduler import evaluate_scheduler_model, fit_scheduler_model, time_split_as_of

    train, holdout = time_split_as_of(records, 0.2)
    candidate = fit_scheduler_model(train, timezone=timezone, seed=settings.seed)
    doc: dict[str, Any] = {"kind": "scheduler", "history": label, "history_rows": int(len(records)),
                           **evaluate_scheduler_model(candidate, holdout)}
    model = fit_scheduler_model(records, timezone=timezone, seed=settings.seed)
    doc["saved"] = str(save_champion(settings, model, {"version": None, "history": label,
                                                       "history_rows": int(len(records)),
                                                       "reason": "gpuplan train --history"}))
    doc["fit_report"] = {k: model.info.get(k) for k in ("mode", "n_targets", "n_censored", "n_active",
                                                        "feature_selection", "calibration", "features")}
    return model, doc


def _load_pickle(path: str) -> Any:
    return pickle.loads(Path(path).read_bytes())


def _predict_frame(model: Any, frame: pd.DataFrame) -> pd.DataFrame:
    from forecasters.scheduler import predict_runtime

    return predict_runtime(model, frame)


def _make_pyfunc_class() -> type:
    return pyfunc_class("SchedulerModelPyfunc", __name__, "model", _load_pickle, _predict_frame,
                        "MLflow pyfunc around a pickled scheduler forecaster: job records in, runtime quantiles out.")


#: Module ``__getattr__``: :class:`SchedulerModelPyfunc` is built on first use (:func:`pipelines.io.lazy.lazy_class`).
__getattr__ = lazy_class("SchedulerModelPyfunc", _make_pyfunc_class)
