"""The current job forecasters: load the saved one, or train, save and track a new one.

One function (:func:`train_or_load`: read -> stage -> write -> track) shared by the flows
(``gpuplan run``, the nightly retraining, re-planning) and ``gpuplan predict``, so the model the
planner uses and the one ``predict`` prints are the same saved model (``models_dir/<kind>``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any

import pandas as pd

from forecasters import jobs as J
from pipelines.catalog import Catalog
from pipelines.config.settings import Settings
from pipelines.io.errors import InputError
from pipelines.stages import models
from pipelines.stages import retrain as gates
from pipelines.tracking import models as tracking_models


def data_params_hash(kind: str, history: pd.DataFrame, seed: int, test_fraction: float = models.TEST_FRACTION) -> str:
    """sha256 (hex) of a training: the history's rows (pandas' row hashes, column names) and the fit parameters.

    The same history, kind, seed, holdout share, level lists and LightGBM version give the same hash:
    a retrain on unchanged data is recognised by it (:data:`pipelines.tracking.models.DATA_HASH_TAG`).
    """
    import lightgbm

    from forecasters.schema import LEVELS_VERSION

    h = hashlib.sha256()
    h.update(pd.util.hash_pandas_object(history, index=False).to_numpy().tobytes())
    h.update(json.dumps({"kind": kind, "columns": [str(c) for c in history.columns], "seed": seed,
                         "test_fraction": test_fraction, "levels_version": LEVELS_VERSION,
                         "lightgbm": lightgbm.__version__}, sort_keys=True).encode())
    return h.hexdigest()


#: One LightGBM train/load at a time in this process. The flows start the three job forecasters as
#: concurrent Prefect tasks (:meth:`pipelines.flows.jobs.ShippedJobs.start_models`, a thread pool).
#: LightGBM documents thread safety only for prediction (LightGBM issue #666) and has open data
#: races in its native predictor set-up (#6142); a served replan's flow run here died once with
#: SIGSEGV in ``lib_lightgbm.so`` (dmesg) while the three kinds trained at once under load (the exact
#: race was not pinned down). The lock keeps the tasks, and their overlap with the realtime fit on
#: the flow's thread, but runs the native work one kind after another.
LIGHTGBM_LOCK = threading.Lock()


def train_or_load(settings: Settings, kind: str, retrain: bool = False,
                  notify: Callable[[str], None] | None = None) -> Any:
    """The current ``kind`` forecaster (:class:`forecasters.jobs.JobModel`), under :data:`LIGHTGBM_LOCK`.

    Trained first when
    missing, unreadable or ``retrain``.

    Training: :func:`pipelines.stages.models.train` on the shipped history (time-ordered split, fit on
    the earlier jobs with ``settings.seed``, evaluate on the later ones against the baselines). Then:

    * unchanged data: a registered version already carries this training's :func:`data_params_hash`
      (tag :data:`pipelines.tracking.models.DATA_HASH_TAG`): nothing new is logged or registered; the
      saved model stays (or, if none is saved, this fit, identical to that version, is saved as it);
    * else the gate (:func:`pipelines.stages.retrain.job_gate`): the saved model (the champion) is
      scored on the same holdout; the new version is logged (:func:`pipelines.tracking.models.log_job_model_run`)
      and registered as ``champion`` (saved for the planner) only if no worse than the champion and the
      analytic baseline, else as ``challenger`` (the saved champion stays; with no saved champion at all
      the challenger is saved so the planner has a model, and ``notify`` says so).

    ``notify`` (e.g. the CLI's stderr, the flow's log) is told why a model is trained instead of loaded,
    the model's MAE ratio to the analytic baseline and the gate's decision.

    Raises:
        pipelines.io.errors.InputError: the shipped history is missing or invalid.
    """
    with LIGHTGBM_LOCK:
        return _train_or_load(settings, kind, retrain, notify)


def _train_or_load(settings: Settings, kind: str, retrain: bool,
                   notify: Callable[[str], None] | None) -> Any:
    say = notify or (lambda _msg: None)
    catalog = Catalog(settings)
    saved = catalog.load_model(kind)
    if saved is not None and not retrain:
        return saved
    where = catalog.model_path(kind)
    why = ("retraining as asked" if retrain else
           "no saved model" if not where.exists() else "the saved model cannot be read and is replaced")
    say(f"{kind} forecaster at {where}: {why}; training on the shipped history (a few seconds)")
    history, source = catalog.history(kind)
    digest = data_params_hash(kind, history, settings.seed)
    name = tracking_models.registered_model_name(kind)
    trained = models.train(kind, history, seed=settings.seed)
    ratio = gates.analytic_ratio(trained.doc)
    say(f"{kind} forecaster: holdout MAE {trained.doc['metrics']['mae_h']:.4f} h = {ratio:.3f} × analytic baseline "
        f"({trained.doc['baselines']['analytic']['mae_h']:.4f} h) on {trained.doc['n_test']} jobs of the generated history")
    same = tracking_models.version_with_tag(settings, name, tracking_models.DATA_HASH_TAG, digest)
    if same is not None:
        say(f"{kind} forecaster: unchanged data and parameters (sha256 {digest[:12]}, version {same}): nothing new "
            "registered")
        if saved is not None:
            return saved
        catalog.save_model(kind, trained.model)
        champion = tracking_models.alias_version(settings, name, "champion")
        catalog.save_model_version(kind, {"name": name, "version": same,
                                          "alias": "champion" if champion == same else "challenger", "run_id": None})
        return trained.model
    champ_doc = None
    if saved is not None:
        try:
            champ_doc = J.evaluate(saved, trained.test)
        except InputError as exc:  # the champion cannot score this holdout (other level lists): no comparison
            say(f"{kind} forecaster: the champion cannot be scored on the new holdout ({exc}); compared with the "
                "analytic baseline only")
    promote, reason = gates.job_gate(trained.doc, champ_doc)
    alias = "champion" if promote else "challenger"
    rid = tracking_models.log_job_model_run(settings, kind, trained.model, trained.doc, trained.test,
                                            models.held_out(trained), source, alias=alias, reason=reason,
                                            extra_tags={tracking_models.DATA_HASH_TAG: digest})
    version = tracking_models.alias_version(settings, name, alias)
    say(f"{kind} forecaster: version {version} registered as {alias}: {reason}")
    if promote or saved is None:
        if not promote:
            say(f"{kind} forecaster: no champion saved yet; the planner uses this challenger until one is promoted")
        catalog.save_model(kind, trained.model)
        catalog.save_model_version(kind, {"name": name, "version": version, "alias": alias, "run_id": rid})
        return trained.model
    return saved


def model_version(settings: Settings, kind: str) -> dict[str, Any]:
    """Which registered version the saved ``kind`` forecaster is (``{"name", "version", "alias", "run_id"}``).

    ``{"version": None, "note": ...}`` for a model saved before versions were recorded.
    """
    return Catalog(settings).model_version(kind) or {
        "name": tracking_models.registered_model_name(kind), "version": None,
        "note": f"saved model {Catalog(settings).model_path(kind)} has no recorded registry version"}
