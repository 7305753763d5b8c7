"""Prefect's database stays inside the project unless the operator says otherwise."""

from __future__ import annotations

import os

from pipelines.config import PROJECT_ROOT, apply_env_defaults


def test_prefect_home_defaults_to_project_folder(monkeypatch):
    monkeypatch.delenv("PREFECT_HOME", raising=False)
    applied = apply_env_defaults()
    assert os.environ["PREFECT_HOME"] == str(PROJECT_ROOT / ".prefect")
    assert applied["PREFECT_HOME"] == str(PROJECT_ROOT / ".prefect")


def test_prefect_home_from_operator_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    applied = apply_env_defaults()
    assert os.environ["PREFECT_HOME"] == str(tmp_path)
    assert "PREFECT_HOME" not in applied
