"""Builders for hourly traffic frames used by the CLI tests of `gpuplan train --kind realtime`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def utc_frame(start: str, periods: int, values) -> pd.DataFrame:
    """UTC-aware hourly stamps (ISO text ending in Z) with the given values."""
    idx = pd.date_range(pd.Timestamp(start, tz="UTC"), periods=periods, freq="h")
    return pd.DataFrame({"ts": idx.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": np.asarray(values, dtype=float)})


@pytest.fixture
def make_utc():
    """Fixture form of :func:`utc_frame`."""
    return utc_frame
