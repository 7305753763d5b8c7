"""Prefect's database stays inside the project unless the operator says otherwise."""

from __future__ import annotations

import os

import pytest

from pipelines.config.settings import ENV_DEFAULTS, PREFECT_DB_MARK, PREFECT_DB_VAR, PROJECT_ROOT, apply_env_defaults


@pytest.fixture(autouse=True)
def _environment_restored(monkeypatch):
    """Every variable :func:`apply_env_defaults` may set or drop is put back after the test (as it was, or
    absent): a test here must not leave this worker's process on the clone's ``.prefect/`` database."""
    for var in ("PREFECT_HOME", PREFECT_DB_VAR, PREFECT_DB_MARK, "PREFECT_API_URL", *ENV_DEFAULTS):
        was = os.environ.get(var)
        monkeypatch.setenv(var, was if was is not None else "")  # records the original for monkeypatch's undo
        if was is None:
            monkeypatch.delenv(var)


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


def _clean_prefect_db_env(monkeypatch):
    from pipelines.config.settings import PREFECT_DB_MARK, PREFECT_DB_VAR

    for var in (PREFECT_DB_VAR, PREFECT_DB_MARK, "PREFECT_API_URL", "PREFECT_API_DATABASE_CONNECTION_URL"):
        monkeypatch.delenv(var, raising=False)
    return PREFECT_DB_VAR, PREFECT_DB_MARK


def test_temporary_server_gets_its_own_database_not_the_servers(monkeypatch, tmp_path):
    # a `prefect server start` with this PREFECT_HOME uses <home>/prefect.db (Prefect 3.9 default):
    # `gpuplan run` without PREFECT_API_URL must not open that file
    var, mark = _clean_prefect_db_env(monkeypatch)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    applied = apply_env_defaults()
    url = f"sqlite+aiosqlite:///{tmp_path / 'home' / 'gpuplan-ephemeral.db'}"
    assert os.environ[var] == url and applied[var] == url and os.environ[mark] == "1"
    from prefect.settings import Settings as PrefectSettings

    resolved = PrefectSettings().server.database.connection_url.get_secret_value()
    assert resolved == url and resolved != f"sqlite+aiosqlite:///{tmp_path / 'home' / 'prefect.db'}"
    # a child gpuplan process with another home re-derives it; with PREFECT_API_URL it chooses none
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "other"))
    apply_env_defaults()
    assert os.environ[var] == f"sqlite+aiosqlite:///{tmp_path / 'other' / 'gpuplan-ephemeral.db'}"
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    assert var not in apply_env_defaults() and var not in os.environ and mark not in os.environ


def test_operators_database_setting_is_kept(monkeypatch, tmp_path):
    var, mark = _clean_prefect_db_env(monkeypatch)
    monkeypatch.setenv(var, "postgresql+asyncpg://prefect@db/prefect")
    assert var not in apply_env_defaults()
    assert os.environ[var] == "postgresql+asyncpg://prefect@db/prefect" and mark not in os.environ


def test_run_logs_reach_prefect_at_info_while_the_console_shows_warnings(monkeypatch):
    for var in ("PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"):
        monkeypatch.delenv(var, raising=False)
    apply_env_defaults()
    assert os.environ["PREFECT_LOGGING_LEVEL"] == "INFO"
    assert os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "WARNING"
    from prefect.logging.configuration import DEFAULT_LOGGING_SETTINGS_PATH, load_logging_config

    cfg = load_logging_config(DEFAULT_LOGGING_SETTINGS_PATH)  # Prefect's logging.yml with the environment applied
    assert cfg["handlers"]["console"]["level"] == "WARNING" and cfg["handlers"]["api"]["level"] == 0
    assert "api" in cfg["loggers"]["prefect.flow_runs"]["handlers"]
    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "DEBUG")  # the operator's choice wins
    apply_env_defaults()
    assert os.environ["PREFECT_LOGGING_LEVEL"] == "DEBUG"


def test_artifacts_go_beside_any_sqlite_store_unless_given(tmp_path, monkeypatch):
    from pipelines.config.settings import load_settings

    monkeypatch.delenv("GPUPLAN_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("GPUPLAN_ARTIFACT_ROOT", raising=False)
    s = load_settings(tracking_uri=f"sqlite:///{tmp_path / 'st' / 'mlflow.db'}")  # a caller's store
    assert s.artifact_root == tmp_path / "st" / "artifacts"
    s = load_settings(tracking_uri=f"sqlite:///{tmp_path / 'st' / 'mlflow.db'}", artifact_root=tmp_path / "a")
    assert s.artifact_root == tmp_path / "a"
    assert load_settings().mlflow_ui_url is None  # a SQLite store has no UI of its own
    assert load_settings(tracking_uri="http://127.0.0.1:5000").mlflow_ui_url == "http://127.0.0.1:5000"
    monkeypatch.setenv("GPUPLAN_TRACKING_URI", "http://127.0.0.1:5000/")
    assert load_settings().mlflow_ui_url == "http://127.0.0.1:5000"
    monkeypatch.setenv("GPUPLAN_MLFLOW_UI_URL", "http://mlflow.internal:5000/")
    assert load_settings().mlflow_ui_url == "http://mlflow.internal:5000"
