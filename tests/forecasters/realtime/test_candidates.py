"""The candidate table of the real-time combination: five kernels by name, each a path of the horizon's shape."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasters.realtime import fit_profile, recalibrate
from forecasters.realtime.candidates import CANDIDATES, CandidateInput


def test_candidate_table_holds_the_five_candidates_and_each_returns_the_horizon_shape():
    assert list(CANDIDATES) == ["profile", "naive24", "mean7", "ets", "mstl_ets"]
    idx = pd.date_range("2025-06-02T00:00Z", periods=24 * 21, freq="h")
    hod = idx.hour.to_numpy()
    y = 100.0 + 30.0 * np.sin(2 * np.pi * hod / 24) + np.random.default_rng(0).normal(0, 2, len(idx))
    series = pd.Series(y, index=idx)
    prof = recalibrate(fit_profile(series, "UTC"), series)
    x = CandidateInput(y=y, profile=prof, origin=idx[-1] + pd.Timedelta(hours=1))
    for horizon in (1, 24, 168):
        h = np.arange(horizon)
        for name, kernel in CANDIDATES.items():
            out = kernel(x).at(h)
            assert isinstance(out, np.ndarray) and out.shape == (horizon,), name
            assert np.isfinite(out).all() and (out >= 0).all(), name
