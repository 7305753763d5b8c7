"""Small fitted job models shared by the forecaster tests (few rounds, one thread: fast)."""

from __future__ import annotations

import os

import pandas as pd
import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

ROUNDS = 40


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
