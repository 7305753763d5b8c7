"""Session-wide isolation: no test writes into the clone's ``mlruns/`` (the operator's MLflow store and models).

Every test session points ``GPUPLAN_TRACKING_URI`` (and with it the MLflow artifacts, which go beside the
SQLite file, :func:`pipelines.config.settings.load_settings`) and ``GPUPLAN_MODELS_DIR`` at a temporary folder, so
a test that forgets its own store logs there, not into ``mlruns/``. A test's own fixture (``iso_env``,
``monkeypatch.setenv``) still wins for that test. At the end of the session the entries of ``mlruns/``
are compared with those at its start: anything new fails the session, naming what appeared.
"""

from __future__ import annotations

from pathlib import Path

import pytest

MLRUNS = Path(__file__).resolve().parents[1] / "mlruns"


def mlruns_entries(root: Path = MLRUNS) -> set[str]:
    """Relative paths of every file and folder under ``root`` down to run folders (3 levels), e.g.
    ``artifacts/gpuplan-plans/<run id>``; empty when ``root`` does not exist."""
    if not root.is_dir():
        return set()
    out = set()
    for depth in ("*", "*/*", "*/*/*"):
        out.update(str(p.relative_to(root)) for p in root.glob(depth))
    return out


@pytest.fixture(scope="session", autouse=True)
def mlflow_outside_the_clone(tmp_path_factory):
    """Point the MLflow store and the model store of the whole session at a temporary folder; check ``mlruns/``."""
    before = mlruns_entries()
    root = tmp_path_factory.mktemp("session_mlflow")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUPLAN_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        mp.setenv("GPUPLAN_MODELS_DIR", str(root / "models"))
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.delenv("GPUPLAN_ARTIFACT_ROOT", raising=False)
        yield root
    new = sorted(mlruns_entries() - before)
    assert not new, (f"tests left {len(new)} new entries in {MLRUNS} (use a temporary store: the iso_env fixture "
                     f"or GPUPLAN_TRACKING_URI): {new[:10]}")
