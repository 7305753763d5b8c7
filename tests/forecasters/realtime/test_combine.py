"""The combination rule (DESIGN §4.4): inverse-MAE weights, conformal P90 with ACI, hourly change model, ETS level."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from forecasters.errors import InputError
from forecasters.realtime.calibrate import aci_alpha, conformal_quantile
from forecasters.realtime.candidates import CANDIDATES, ses_level
from forecasters.realtime.combine import fit_combined, forecast_combined, reanchor
from forecasters.realtime.hourly import lad_fit
from forecasters.realtime.model import CombineSettings
from forecasters.realtime.readable import same_hour_mean

IDX = pd.date_range("2025-06-02T00:00Z", periods=24 * 21, freq="h")  # three weeks from a Monday


def test_conformal_quantile_is_the_ceil_n_plus_1_rank():
    r = np.arange(10, 0, -1.0)  # 10 .. 1, unsorted on purpose
    assert conformal_quantile(r, 0.9) == 10.0  # ceil(11 * 0.9) = 10th smallest
    assert conformal_quantile(r, 0.5) == 6.0  # ceil(5.5) = 6th
    assert conformal_quantile(np.arange(1.0, 20.0), 0.9) == 18.0  # n = 19: ceil(18) = 18th
    assert conformal_quantile([3.0], 0.9) == 3.0  # rank 2 > n: the largest
    assert conformal_quantile(r, 1.2) == 10.0 and conformal_quantile(r, -0.3) == 1.0  # ACI levels: rank clipped
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
    np.testing.assert_allclose(fc["p50"].to_numpy(), v[:48], rtol=1e-12)  # 2025-06-23 is a Monday: the same hours
    np.testing.assert_allclose(fc["p90"].to_numpy(), v[:48], rtol=1e-12)  # residual ratios all 1: P90 = P50
    assert comb.p90_kind == "ratio" and comb.p90_bands.tolist() == [1.0] * 4  # four 6-h lead bands
    assert comb.p90_alpha == pytest.approx(0.1)  # the adaptive level only widens: never above 0.1
    # the hourly mode: persistence errs by 5 an hour and 115 at midnight (230 / 24 a day); the day-ahead gap
    # and the seasonal change are the same exact change here: every model but persistence is exact, so they
    # share the weight and the combined coefficients add up to 1
    assert comb.hourly_scores["persistence"] == pytest.approx(230 / 24, rel=1e-12)
    assert comb.hourly_model == "combination" and comb.hourly_weights["persistence"] == 0.0
    assert comb.hourly_coef[0] + comb.hourly_coef[1] == pytest.approx(1.0, abs=1e-9)
    assert comb.hourly_scores["hourly"] < 1e-9


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
    plain = dataclasses.replace(comb, anchor_ts=None, obs_ts=None)
    fc = forecast_combined(plain, 24)
    h = np.arange(24)
    expected = sum(w * comb.fit.predict(c, h) for c, w in comb.weights.items())
    np.testing.assert_allclose(fc["p50"].to_numpy(), expected, rtol=1e-12)
    # P90 = P50 x the quantile of the hour's 6-h lead band (hours 0-5, 6-11, 12-17, 18-23 after the origin)
    np.testing.assert_allclose(fc["p90"].to_numpy(), expected * comb.p90_bands[h // 6], rtol=1e-12)
    assert comb.p90_bands.shape == (4,) and (comb.p90_bands > 1).all()
    # each band's P90 = the conformal quantile of its calibration ratios at the level the (widen-only) ACI
    # replay, band by band, left
    cal = comb.calibration
    ratio = cal["actual"] / cal["p50"]
    inner_origin = comb.origin - pd.to_timedelta(24 * (cal["day"] + 1), unit="h")
    lead = ((pd.DatetimeIndex(cal["ts"]) - inner_origin) / pd.Timedelta(hours=1)).to_numpy().astype(int) // 6
    assert sorted(np.bincount(lead).tolist()) == [42, 42, 42, 42]
    assert comb.p90_alpha == min(aci_alpha(ratio, cal["day"], 1 - 0.9, 0.005, lead, 4, 24), 1 - 0.9)
    for b in range(4):
        assert comb.p90_bands[b] == conformal_quantile(ratio[lead == b], 1 - comb.p90_alpha)
    assert len(comb.p90_band_coverage) == 4 and all(0.5 <= c <= 1.0 for c in comb.p90_band_coverage)


def test_hourly_mode_is_persistence_on_a_random_walk():
    rw = 200 + np.cumsum(np.random.default_rng(5).normal(0, 3, len(IDX)))
    comb = fit_combined(pd.Series(rw, index=IDX), "UTC")
    assert comb.hourly_model == "persistence" and comb.hourly_coef.tolist() == [0.0, 0.0, 0.0]
    assert comb.hourly_scores["hourly"] == comb.hourly_scores["persistence"]
    # persistence forecasts the last hour for the first hour ahead
    assert forecast_combined(comb, 1)["p50"].iat[0] == pytest.approx(rw[-1])


def _triangle_days(days: int = 21) -> tuple[pd.Series, np.ndarray]:
    """``y = p(h) + c_d``: p(h) = 100 + 10 |h - 12| (every hourly change +-10; 23:00 -> 00:00 +10), c_d = 20 (d mod 3)."""
    idx = pd.date_range("2025-06-02T00:00Z", periods=24 * days, freq="h")
    h, d = idx.hour.to_numpy(), np.arange(len(idx)) // 24
    c = 20.0 * (np.arange(days) % 3)
    return pd.Series(100.0 + 10.0 * np.abs(h - 12) + c[d], index=idx), c


def test_seasonal_change_model_beats_persistence_by_the_hand_computed_amount():
    s, c = _triangle_days()
    comb = fit_combined(s, "UTC", settings=CombineSettings(hourly_models=("persistence", "seasonal")))
    # persistence: 23 changes of 10 and a midnight change of |10 + c_d - c_{d-1}| = 30 every day
    m_p = 260 / 24
    # inside a day y_t - y_{t-1} = p(h) - p(h-1) = r(t) - r(t-1) exactly (the 7 days before t and t-1 are the
    # same): the seasonal model's LAD coefficient is 1 on any 6 days; at midnight its error is
    # (c_d - c_{d-1}) - (c_{d-1} - c_{d-8}) / 7: 120/7, 300/7, 180/7 for the inner days d = 14, 15, 16 (and again
    # for 17..20), so its leave-one-day-out MAE is 1320 / (7 x 7 x 24)
    m_s = 1320 / 1176
    assert comb.hourly_scores["persistence"] == pytest.approx(m_p, rel=1e-12)
    assert comb.hourly_scores["seasonal"] == pytest.approx(m_s, rel=1e-9)
    # the combination: weights 1/MAE, so the seasonal change's coefficient is w_s = m_p / (m_s + m_p) = 0.906
    w_s = m_p / (m_s + m_p)
    assert comb.hourly_model == "combination" and comb.hourly_weights["seasonal"] == pytest.approx(w_s, rel=1e-9)
    np.testing.assert_allclose(comb.hourly_coef, [0.0, w_s, 0.0], atol=1e-9)
    # its own leave-one-day-out MAE: 23 hours off by 10 (1 - w_s), midnight off by |z - w_s x|, z = 10 + delta_d,
    # x = 10 + delta_{d-1} / 7 (delta_d = c_d - c_{d-1})
    delta = np.diff(c)  # delta[d - 1] = c_d - c_{d-1}
    mid = [abs(10 + delta[d - 1] - w_s * (10 + delta[d - 2] / 7)) for d in range(14, 21)]
    m_c = (23 * 10 * (1 - w_s) * 7 + sum(mid)) / (7 * 24)
    assert comb.hourly_scores["hourly"] == pytest.approx(m_c, rel=1e-9)
    assert m_c / m_p == pytest.approx(0.1878, abs=1e-4)  # (151.15 + 190.58) / 168 = 2.034 against 10.833
    # the first hour ahead (midnight of day 21): y_a + w_s (r(t) - r(a)) = (210 + c_20) + w_s (10 + (c_20 - c_13) / 7)
    first = forecast_combined(comb, 1)["p50"].iat[0]
    assert first == pytest.approx(210 + c[20] + w_s * (10 + (c[20] - c[13]) / 7), rel=1e-9)
    # re-anchored on that hour's actual (p(0) + c_21 = 220), the next hour: 220 + w_s (p(1) - p(0)) = 220 - 10 w_s
    t0 = comb.origin
    moved = reanchor(comb, pd.Series([220.0], index=pd.DatetimeIndex([t0])))
    assert moved.anchor_ts == t0 and moved.anchor_change == pytest.approx(220.0 - (210 + c[20]))
    nxt = forecast_combined(moved, 1, start=t0 + pd.Timedelta(hours=1))["p50"].iat[0]
    assert nxt == pytest.approx(220 - 10 * w_s, rel=1e-9)


def test_lad_fit_is_the_median_and_ignores_an_outlier():
    assert lad_fit(np.ones((5, 1)), np.array([1.0, 2.0, 3.0, 4.0, 100.0]))[0] == pytest.approx(3.0, abs=1e-6)
    x = np.column_stack([np.arange(1.0, 11.0), (-1.0) ** np.arange(10)])
    z = 2.0 * x[:, 0]
    z[9] += 1000.0  # one gross error: least squares moves, least absolute deviations does not
    np.testing.assert_allclose(lad_fit(x, z), [2.0, 0.0], atol=1e-6)
    assert abs(np.linalg.lstsq(x, z, rcond=None)[0][0] - 2.0) > 10
    assert lad_fit(np.zeros((3, 0)), np.ones(3)).shape == (0,)


def test_aci_alpha_replays_the_days_oldest_first_by_hand():
    # day 2 (oldest): residuals 1..24; day 1: 24 misses; day 0: 24 hours inside
    r = np.concatenate([np.arange(1.0, 25.0), np.full(24, 100.0), np.full(24, 50.0)])
    day = np.repeat([2, 1, 0], 24)
    # day 1's P90 from day 2 at level 0.9: the ceil(25 x 0.9) = 23rd of 24 = 23; 24 misses:
    # alpha = 0.1 + 0.01 (0.1 x 24 - 24) = -0.116; day 0's P90 (level 1.116 > 1): the largest of 48 = 100, no miss:
    # alpha = -0.116 + 0.01 x 2.4 = -0.092
    assert aci_alpha(r, day, 0.1, 0.01) == pytest.approx(-0.092, abs=1e-12)
    assert aci_alpha(r, day, 0.1, 0.0) == 0.1  # gamma 0: plain split conformal
    assert aci_alpha(r[:24], day[:24], 0.1, 0.01) == 0.1  # one day: nothing to replay


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
    assert set(doc) == {"rule", "n_inner_origins", "n_scored_h", "candidates", "failed", "p90", "hourly", "bounds",
                        "day_ahead_guard"}
    assert list(doc["candidates"]) == list(CANDIDATES) and doc["failed"] == {}
    assert set(doc["p90"]) == {"kind", "bands", "alpha", "lead_band_h", "band_coverage"}
    assert {"kind", "rho", "q90", "coef", "weights", "read_flagged", "mae_hourly", "mae_persistence",
            "mae_combination", "mae_day_ahead", "mae_blend", "mae_seasonal", "mae_blend_seasonal", "anchor", "guard",
            "mae_persistence_observed"} == set(doc["hourly"])
    assert list(doc["hourly"]["coef"]) == ["gap_day_ahead", "seasonal_change", "last_change"]


def _sine_days(days: int, noise_sd: np.ndarray | float, seed: int) -> tuple[pd.DatetimeIndex, np.ndarray]:
    idx = pd.date_range("2025-06-02T00:00Z", periods=24 * days, freq="h")
    base = 100 * (1 + 0.4 * np.sin(2 * np.pi * idx.hour.to_numpy() / 24))
    return idx, base * np.exp(np.random.default_rng(seed).normal(0, 1, len(idx)) * noise_sd)


def test_adaptive_level_widens_the_p90_after_recent_misses():
    # 3 % noise, then 12 % over the last four days (three of them in the history): the recent inner days miss
    # the quantile of the days before them
    idx, y = _sine_days(22, np.where(np.arange(24 * 22) >= 24 * 18, 0.12, 0.03), seed=7)
    s = pd.Series(y[:-24], index=idx[:-24])
    aci = fit_combined(s, "UTC", settings=CombineSettings(hour_bands=1))  # one pooled band: solvable by hand
    plain = fit_combined(s, "UTC", settings=CombineSettings(aci_gamma=0.0, hour_bands=1))
    # replayed over the 6 inner days after the oldest: 20 misses of 144 hours, alpha = 0.1 + 0.005 (14.4 - 20)
    assert aci.p90_alpha == pytest.approx(0.1 + 0.005 * (0.1 * 144 - 20), abs=1e-12)
    assert plain.p90_alpha == pytest.approx(0.1)
    assert aci.p90_bands[0] == pytest.approx(1.1190, abs=1e-4) and plain.p90_bands[0] == pytest.approx(1.0877, abs=1e-4)
    # the next (noisy) day: 22 of 24 hours at or below the adapted P90, 21 below the plain one
    covered = {k: int((y[-24:] <= forecast_combined(c, 24)["p90"].to_numpy()).sum()) for k, c in
               (("aci", aci), ("plain", plain))}
    assert covered == {"aci": 22, "plain": 21}


def test_flagged_hours_anchor_the_hourly_mode_only_where_they_were_steps():
    idx, base = _sine_days(21, 0.03, seed=1)
    starts = [24 * 5 + 10, 24 * 10 + 10, 24 * 15 + 10]  # three flagged hours in the history
    out = {}
    for kind in ("burst", "spike"):
        y = base.copy()
        for t in starts:
            if kind == "burst":
                y[t:t + 5] *= 1.5  # a 5-hour burst whose first hour is flagged: persisting it was right
            else:
                y[t] *= 1.5  # a one-hour spike: persisting it was wrong
        comb = fit_combined(pd.Series(y, index=idx), "UTC", outliers=[idx[t] for t in starts])
        day = pd.date_range(comb.origin, periods=3, freq="h")
        act = pd.Series(100 * (1 + 0.4 * np.sin(2 * np.pi * day.hour.to_numpy() / 24)), index=day)
        act.iloc[2] *= 1.5  # 02:00: 100 (1 + 0.4 x 0.5) x 1.5 = 180, flagged
        moved = reanchor(comb, act, outliers=[day[2]])
        out[kind] = (comb.read_flagged, moved.anchor_ts == day[2], moved.anchor_value)
    assert out["burst"] == (True, True, pytest.approx(180.0))
    assert out["spike"][:2] == (False, False)  # the flagged 180 is not read: the anchor stays at 01:00
    assert out["spike"][2] == pytest.approx(100 * (1 + 0.4 * np.sin(2 * np.pi / 24)))


def test_fit_combined_names_the_first_bad_hour():
    """The combination checks its series with the profile's checker: the first negative hour is named."""
    idx = pd.date_range("2025-06-02T00:00Z", periods=24 * 8, freq="h")
    y = pd.Series(np.full(len(idx), 10.0), index=idx)
    y.iloc[30] = -1.0
    with pytest.raises(InputError, match="series: value at 2025-06-03T06:00:00\\+00:00 is negative"):
        fit_combined(y, "UTC")
