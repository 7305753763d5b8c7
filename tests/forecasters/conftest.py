"""Small fitted job models shared by the forecaster tests (few rounds, one thread: fast); warnings as errors.

Every test under ``tests/forecasters`` runs with numpy's floating-point warnings (``RuntimeWarning``:
overflow, invalid value, divide by zero) and statsmodels' model warnings (``ModelWarning``: convergence,
value, ...) turned into errors (issue 31: the forecast path raises none).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

ROUNDS = 40

#: The warnings that fail a forecaster test (module docstring).
ERROR_FILTERS = ("error::RuntimeWarning", "error::statsmodels.tools.sm_exceptions.ModelWarning")


def pytest_collection_modifyitems(config, items):
    """Add :data:`ERROR_FILTERS` to the tests of this folder only (a conftest's hook sees the whole session)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            for f in ERROR_FILTERS:
                item.add_marker(pytest.mark.filterwarnings(f))


@pytest.fixture(scope="session")
def training_history() -> pd.DataFrame:
    from forecasters.generators import generate_history

    return generate_history("training", 600, seed=11)


@pytest.fixture(scope="session")
def training_model(training_history):
    from forecasters.jobs import fit

    return fit("training", training_history, num_rounds=ROUNDS)


@pytest.fixture(scope="session")
def training_queue() -> pd.DataFrame:
    from forecasters.generators import generate_queue

    return generate_queue("training", 200, seed=5)
