"""The project folder (``PROJECT_ROOT``), imported by :mod:`pipelines.config.settings` and :mod:`pipelines.workspace`."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT: Path = Path(__file__).resolve().parents[2]
