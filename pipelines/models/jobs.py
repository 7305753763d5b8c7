"""The current job forecasters: load the saved one, or train, save and track a new one.

One function (:func:`train_or_load`: read -> stage -> write -> track) shared by the flows
(``gpuplan run``, the nightly retraining, re-planning) and ``gpuplan predict``, so the model the
planner uses and the one ``predict`` prints are the same saved model (``models_dir/<kind>``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.catalog import Catalog
from pipelines.config.settings import Settings
from pipelines.stages import models
from pipelines.tracking import models as tracking_models


def train_or_load(settings: Settings, kind: str, retrain: bool = False,
                  notify: Callable[[str], None] | None = None) -> Any:
    """The current ``kind`` forecaster (:class:`forecasters.jobs.JobModel`).

    Trained first when
    missing, unreadable or ``retrain``.

    Training: :func:`pipelines.stages.models.train` on the shipped history (time-ordered split, fit on
    the earlier jobs with ``settings.seed``, evaluate on the later ones against the baselines), saved
    to the model store (:meth:`pipelines.catalog.Catalog.save_model`, atomic), then logged
    (:func:`pipelines.tracking.models.log_job_model_run`: params, metrics, the predicted-vs-actual plot and
    the model, registered with alias ``champion``) to the ``kind`` experiment.

    ``notify`` (e.g. the CLI's stderr) is told, in one line, why a model is trained instead of loaded:
    asked to retrain, no saved model, or a saved model that cannot be read (it is replaced).

    Raises:
        pipelines.io.errors.InputError: the shipped history is missing or invalid.
    """
    catalog = Catalog(settings)
    model = None if retrain else catalog.load_model(kind)
    if model is not None:
        return model
    if notify is not None:
        where = catalog.model_path(kind)
        why = ("retraining as asked" if retrain else
               "no saved model" if not where.exists() else "the saved model cannot be read and is replaced")
        notify(f"{kind} forecaster at {where}: {why}; training on the shipped history (a few seconds)")
    history, source = catalog.history(kind)
    trained = models.train(kind, history, seed=settings.seed)
    catalog.save_model(kind, trained.model)
    rid = tracking_models.log_job_model_run(settings, kind, trained.model, trained.doc, trained.test,
                                     models.held_out(trained), source)
    name = tracking_models.registered_model_name(kind)
    version = tracking_models.alias_version(settings, name, "champion")
    catalog.save_model_version(kind, {"name": name, "version": version, "alias": "champion", "run_id": rid})
    return trained.model


def model_version(settings: Settings, kind: str) -> dict[str, Any]:
    """Which registered version the saved ``kind`` forecaster is (``{"name", "version", "alias", "run_id"}``).

    ``{"version": None, "note": ...}`` for a model saved before versions were recorded.
    """
    return Catalog(settings).model_version(kind) or {
        "name": tracking_models.registered_model_name(kind), "version": None,
        "note": f"saved model {Catalog(settings).model_path(kind)} has no recorded registry version"}
