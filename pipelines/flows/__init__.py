"""Prefect flows and their tasks: one plan path (``plan``), retraining, benchmark, what-if, deployments, schedules, run logs."""

from pipelines.config.settings import apply_env_defaults

apply_env_defaults()  # before any flow module imports prefect (Prefect reads its settings at import)
