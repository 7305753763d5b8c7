"""The CLI's progress hook: each stage of a flow reports its start and end (no Prefect import here)."""

from __future__ import annotations

from collections.abc import Callable

from pipelines.config.settings import JobSide

ProgressHook = Callable[[str, str], None]
_progress: ProgressHook | None = None

#: The stages of ``gpuplan run`` shown as progress bars, by :func:`pipelines.config.settings.job_side`: the
#: shipped side trains three job-kind forecasters; the store side ingests its exports first and has one
#: scheduler-history forecaster.
PLAN_STAGES: dict[JobSide, tuple[str, ...]] = {
    "shipped": ("ingest traffic", "forecaster training", "forecaster quantization", "forecaster batch_inference",
                "real-time forecast", "queue + forecasts", "solve (milp)", "plan + risk report", "mlflow"),
    "store": ("ingest sources", "real-time forecast", "queue + forecasts", "solve (milp)", "plan + risk report",
              "mlflow"),
}


def set_progress(hook: ProgressHook | None) -> None:
    """Install a callback ``hook(stage, event)`` (event ``start``/``done``/``failed``) used by the CLI's bars."""
    global _progress
    _progress = hook


class Stage:
    """Report a stage's start and end to the progress hook (a context manager)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        if _progress is not None:
            _progress(self.name, "start")

    def __exit__(self, *exc: object) -> None:
        if _progress is not None:
            _progress(self.name, "done" if exc[0] is None else "failed")
