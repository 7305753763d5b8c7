"""The combination rule (DESIGN §4.4): inverse-MAE weights, split-conformal P90, hourly mode, ETS level."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from forecasters.errors import InputError
from forecasters.realtime.combine import (
    CANDIDATES,
    conformal_quantile,
    fit_combined,
    forecast_combined,
    same_hour_mean,
    ses_level,
)

IDX = pd.date_range("2025-06-02T00:00Z", periods=24 * 21, freq="h")  # three weeks from a Monday


def test_conformal_quantile_is_the_ceil_n_plus_1_rank():
    r = np.arange(10, 0, -1.0)  # 10 .. 1, unsorted on purpose
    assert conformal_quantile(r, 0.9) == 10.0  # ceil(11 * 0.9) = 10th smallest
    assert conformal_quantile(r, 0.5) == 6.0  # ceil(5.5) = 6th
    assert conformal_quantile(np.arange(1.0, 20.0), 0.9) == 18.0  # n = 19: ceil(18) = 18th
    assert conformal_quantile([3.0], 0.9) == 3.0  # rank 2 > n: the largest
    with pytest.raises(InputError, match="no residuals"):
        conformal_quantile([], 0.9)


def test_ses_level_by_least_squares_hand_case():
    # one-step errors: 10 (any alpha), then 10 (1 - alpha): SSE = 100 + 100 (1 - alpha)^2, least at alpha = 1
    assert ses_level(np.array([10.0, 20.0, 20.0])) == 20.0
    # a constant series: every alpha gives the constant
    assert ses_level(np.full(50, 7.0)) == 7.0
    with pytest.raises(ValueError, match="non-finite"):
        ses_level(np.array([1.0, np.nan]))


def test_same_hour_mean_uses_only_clean_hours_before():
    y = np.arange(24 * 3, dtype=float)
    clean = np.ones(72, dtype=bool)
    clean[30] = False  # day 1, hour 6
    ref = same_hour_mean(y, clean, days=7)
    assert np.isnan(ref[:24]).all()
    assert ref[30] == 6.0  # day 1 hour 6: day 0 hour 6
    assert ref[54] == 6.0  # day 2 hour 6: day 1's (not clean) skipped, day 0's only
    assert ref[55] == (7.0 + 31.0) / 2


def test_exactly_periodic_series_gives_the_exact_candidates_all_the_weight():
    v = 100.0 + (np.arange(len(IDX)) % 24) * 5.0  # integer-valued daily pattern: naive-24 and the 7-day mean exact
    comb = fit_combined(pd.Series(v, index=IDX), "UTC")
    assert comb.scores["naive24"] == 0.0 and comb.scores["mean7"] == 0.0 and comb.scores["ets"] > 50
    assert comb.weights == {"profile": 0.0, "naive24": 0.5, "mean7": 0.5, "ets": 0.0, "mstl_ets": 0.0}
    fc = forecast_combined(comb, 48)
    np.testing.assert_array_equal(fc["p50"].to_numpy(), v[:48])  # 2025-06-23 is a Monday: the same hours
    np.testing.assert_array_equal(fc["p90"].to_numpy(), v[:48])  # residual ratios all 1: P90 = P50
    assert comb.p90_kind == "ratio" and comb.p90_bands.tolist() == [1.0, 1.0, 1.0, 1.0]
    # the hourly mode: the day-ahead P50 is exact, persistence is not; w = 0 (no anchor)
    assert (comb.hourly_kind, comb.hourly_w) == ("flat", 0.0)
    assert comb.hourly_scores["hourly"] == 0.0 < comb.hourly_scores["persistence"]


def test_weights_are_inverse_mae_and_p50_is_their_combination():
    hod = IDX.hour.to_numpy()
    y = 100 * (1 + 0.4 * np.sin(2 * np.pi * hod / 24)) * np.exp(np.random.default_rng(2).normal(0, 0.08, len(IDX)))
    comb = fit_combined(pd.Series(y, index=IDX), "UTC")
    # 7 x 24 backtest hours, all readable (no one-hour change beyond 6 robust SDs in 8 % log-normal noise)
    assert list(comb.weights) == list(CANDIDATES) and comb.n_inner_origins == 7 and comb.n_scored_h == 168
    inv = {c: 1 / m for c, m in comb.scores.items()}
    for c, w in comb.weights.items():
        assert w == pytest.approx(inv[c] / sum(inv.values()), rel=1e-12)
    # without the hourly anchor the P50 is exactly the weighted candidates and P90 = P50 x the band's quantile
    plain = dataclasses.replace(comb, anchor_ts=None)
    fc = forecast_combined(plain, 24)
    h = np.arange(24)
    expected = sum(w * comb.fit.predict(c, h) for c, w in comb.weights.items())
    np.testing.assert_allclose(fc["p50"].to_numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(fc["p90"].to_numpy(), expected * comb.p90_bands[h // 6], rtol=1e-12)
    assert (comb.p90_bands > 1).all()


def test_hourly_mode_is_persistence_on_a_random_walk_and_a_ratio_anchor_on_a_drifting_pattern():
    rw = 200 + np.cumsum(np.random.default_rng(5).normal(0, 3, len(IDX)))
    comb = fit_combined(pd.Series(rw, index=IDX), "UTC")
    assert (comb.hourly_kind, comb.hourly_w) == ("flat", 1.0)
    assert comb.hourly_scores["hourly"] == comb.hourly_scores["persistence"]
    # persistence forecasts the last hour for the first hour ahead
    assert forecast_combined(comb, 1)["p50"].iat[0] == pytest.approx(rw[-1])
    hod = IDX.hour.to_numpy()
    level = np.exp(np.cumsum(np.random.default_rng(6).normal(0, 0.02, len(IDX))))
    y = 100 * (1 + 0.5 * np.sin(2 * np.pi * hod / 24)) * level
    comb = fit_combined(pd.Series(y, index=IDX), "UTC")
    assert (comb.hourly_kind, comb.hourly_w) == ("ratio", 1.0)
    assert comb.hourly_scores["hourly"] < comb.hourly_scores["persistence"] / 4
    assert 0 < comb.rho < 1


def test_too_short_history_is_the_profile_alone_and_says_so():
    s = pd.Series(100 + 20 * np.sin(2 * np.pi * np.arange(60) / 24), index=IDX[:60])
    comb = fit_combined(s, "UTC")
    assert comb.weights == {"profile": 1.0} and comb.status == "degraded"
    assert comb.messages[-1].startswith("history too short for the combination backtest")
    assert len(forecast_combined(comb, 24)) == 24


def test_memo_reuses_origins_without_changing_the_result():
    y = 100 + np.random.default_rng(4).normal(0, 5, len(IDX))
    s = pd.Series(y, index=IDX)
    memo: dict = {}
    a = forecast_combined(fit_combined(s, "UTC", memo=memo), 24)
    n_entries = len(memo)
    b = forecast_combined(fit_combined(s.iloc[:-24], "UTC", memo=memo), 24)
    # a day earlier, the final origin and six inner ones are the first fit's: only the oldest inner origin is
    # new (its profile and its candidates)
    assert len(memo) == n_entries + 2
    pd.testing.assert_frame_equal(b, forecast_combined(fit_combined(s.iloc[:-24], "UTC"), 24))
    pd.testing.assert_frame_equal(a, forecast_combined(fit_combined(s, "UTC"), 24))


def test_forecast_before_the_origin_is_refused():
    comb = fit_combined(pd.Series(100.0 + np.arange(len(IDX)) % 24, index=IDX), "UTC")
    with pytest.raises(InputError, match="before the forecast origin"):
        forecast_combined(comb, 2, start=comb.origin - pd.Timedelta(hours=1))
    with pytest.raises(InputError, match="horizon_h must be >= 1"):
        forecast_combined(comb, 0)


def test_selection_record_is_json_ready():
    import json

    y = 100 + np.random.default_rng(4).normal(0, 5, len(IDX))
    sel = fit_combined(pd.Series(y, index=IDX), "UTC").selection()
    doc = json.loads(json.dumps(sel, allow_nan=False))
    assert set(doc) == {"rule", "n_inner_origins", "n_scored_h", "candidates", "failed", "p90", "hourly", "bounds"}
    assert list(doc["candidates"]) == list(CANDIDATES) and doc["failed"] == {}
    assert set(doc["hourly"]) == {"kind", "w", "rho", "q90", "mae_hourly", "mae_persistence", "mae_day_ahead",
                                  "mae_best"}
