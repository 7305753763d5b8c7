"""Builders for hourly traffic frames used by the realtime tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def naive_local_frame(start: str, end: str, tz: str, value_fn=None, drop_nonexistent=True) -> pd.DataFrame:
    """Naive local hourly stamps (text) from start to end inclusive, as a CSV export would have them.

    Wall-clock hours are generated from the real instants, so a spring-forward hour is absent and a
    fall-back hour appears twice (file order = time order).
    """
    lo = pd.Timestamp(start).tz_localize(tz)
    hi = pd.Timestamp(end).tz_localize(tz, ambiguous=False)
    utc = pd.date_range(lo.tz_convert("UTC"), hi.tz_convert("UTC"), freq="h")
    local = utc.tz_convert(tz)
    vals = value_fn(local) if value_fn is not None else np.full(len(local), 10.0)
    return pd.DataFrame({"ts": local.strftime("%Y-%m-%d %H:%M:%S"), "value": vals})


def utc_frame(start: str, periods: int, values) -> pd.DataFrame:
    """UTC-aware hourly stamps (ISO text ending in Z) with the given values."""
    idx = pd.date_range(pd.Timestamp(start, tz="UTC"), periods=periods, freq="h")
    return pd.DataFrame({"ts": idx.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": np.asarray(values, dtype=float)})


@pytest.fixture
def weekly_pattern():
    """True multiplicative pattern (168,) by local hour of week: daily and weekday/weekend shape."""
    how = np.arange(168)
    hod = how % 24
    daily = 1 + 0.4 * np.sin(2 * np.pi * (hod - 8) / 24) + 0.15 * np.cos(4 * np.pi * hod / 24)
    weekly = 1 + 0.2 * np.cos(2 * np.pi * how / 168) + 0.1 * np.sin(4 * np.pi * how / 168)
    return 100.0 * daily * weekly


@pytest.fixture
def make_naive_local():
    """Fixture form of :func:`naive_local_frame`."""
    return naive_local_frame


@pytest.fixture
def make_utc():
    """Fixture form of :func:`utc_frame`."""
    return utc_frame
