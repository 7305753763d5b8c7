"""Profile: weekly component kept (C03), constant series (C06), local clock across DST (C08), recovery."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from forecasters.errors import InputError
from forecasters.realtime import (
    ProfileSettings,
    fit_profile,
    fitted,
    forecast,
    hour_of_week_profile,
    ingest,
    recalibrate,
    to_gpus,
)


def _utc_series(start: str, values) -> pd.Series:
    idx = pd.date_range(pd.Timestamp(start, tz="UTC"), periods=len(values), freq="h")
    return pd.Series(np.asarray(values, dtype=float), index=idx)


def _weekday_weekend(n: int, start="2025-06-02T00:00") -> pd.Series:
    idx = pd.date_range(pd.Timestamp(start, tz="UTC"), periods=n, freq="h")
    weekend = idx.day_of_week.to_numpy() >= 5
    vals = np.where(weekend, 30.0, 80.0) + 10 * np.sin(2 * np.pi * idx.hour.to_numpy() / 24)
    return pd.Series(vals, index=idx)


# --- C03 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [335, 336])
def test_c03_two_weeks_or_less_is_explicitly_degraded(n):
    prof = fit_profile(_weekday_weekend(n))
    assert prof.status == "degraded"
    assert f"weekly seasonality needs more than 336 hourly points; got {n}" in prof.messages[0]
    assert "weekly_168h" in prof.components  # fitted, but flagged: never silently lost


def test_c03_337_points_has_both_components_and_is_ok():
    prof = fit_profile(_weekday_weekend(337))
    assert prof.status == "ok" and prof.messages == ()
    assert {"daily_24h", "weekly_168h"} <= set(prof.components)


def test_c03_error_mode_and_below_one_week():
    with pytest.raises(InputError, match="weekly seasonality needs more than 336 hourly points; got 336"):
        fit_profile(_weekday_weekend(336), settings=ProfileSettings(on_short_history="error"))
    prof = fit_profile(_weekday_weekend(100))
    assert prof.status == "degraded" and "weekly_168h" not in prof.components
    assert "weekly component NOT estimated" in prof.messages[0]
    with pytest.raises(InputError, match="at least 48"):
        fit_profile(_weekday_weekend(47))


def test_c03_statsmodels_warnings_become_flags(monkeypatch):
    import statsmodels.api as sm

    real_ols = sm.OLS

    class WarningOLS(real_ols):
        def fit(self, *a, **k):
            warnings.warn("condition number is large", UserWarning, stacklevel=1)
            return super().fit(*a, **k)

    monkeypatch.setattr(sm, "OLS", WarningOLS)
    prof = fit_profile(_weekday_weekend(400))
    assert prof.status == "degraded"
    assert any("UserWarning: condition number is large" in m for m in prof.messages)


# --- C06 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [0.0, 4.0])
def test_c06_constant_series_exact(level):
    idx = pd.date_range("2025-07-07T00:00Z", "2025-07-27T23:00Z", freq="h")
    df = pd.DataFrame({"ts": idx.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": level})
    s, d = ingest(df, None)
    assert len(s) == 504 and d["constant"] is True and d["outliers"] == []
    prof = fit_profile(s, "UTC", exclude=d["imputed"])
    assert prof.constant and prof.components == ("constant",) and prof.transform == "none"
    np.testing.assert_allclose(hour_of_week_profile(prof), np.full(168, level), atol=1e-9)
    fc = forecast(recalibrate(prof, s), 24)
    assert np.isfinite(fc[["p50", "p90"]].to_numpy()).all()
    np.testing.assert_allclose(fc["p50"], level, atol=1e-9)
    np.testing.assert_allclose(fc["p90"], level, atol=1e-9)
    gpus = to_gpus(fc["p90"], capacity_per_gpu_per_h=1.0, headroom=0.0, min_gpus=0, max_gpus=8)
    assert gpus.tolist() == [int(level)] * 24


def test_zeros_skip_the_log_transform():
    s = _weekday_weekend(400)
    s.iloc[::7] = 0.0
    prof = fit_profile(s)
    assert prof.transform == "none"
    fc = forecast(prof, 24)
    assert np.isfinite(fc[["p50", "p90"]].to_numpy()).all() and (fc["p50"] >= 0).all()


# --- C08 local clock across DST ----------------------------------------------------------------------------
def test_c08_0900_local_peak_stays_at_0900_across_clock_change():
    utc = pd.date_range(pd.Timestamp("2025-03-03 00:00", tz="Europe/London").tz_convert("UTC"),
                        pd.Timestamp("2025-04-13 23:00", tz="Europe/London").tz_convert("UTC"), freq="h")
    local = utc.tz_convert("Europe/London")
    vals = np.where((local.hour == 9) & (local.day_of_week < 5), 100.0, 40.0)
    df = pd.DataFrame({"ts": local.strftime("%Y-%m-%d %H:%M:%S"), "value": vals})
    assert len(df) == 1007
    s, d = ingest(df, "Europe/London")
    prof = fit_profile(s, "Europe/London", exclude=d["outliers"])
    fc = forecast(prof, 24).set_index("ts")
    assert fc.index[0] == pd.Timestamp("2025-04-13T23:00Z")  # Monday 00:00 BST
    assert fc.loc[pd.Timestamp("2025-04-14T08:00Z"), "p50"] >= 90  # 09:00 BST
    assert fc.loc[pd.Timestamp("2025-04-14T09:00Z"), "p50"] <= 50  # 10:00 BST
    # the same data on a UTC clock blends the two offsets and loses the peak
    utc_prof = fit_profile(s, "UTC", exclude=d["outliers"])
    utc_fc = forecast(utc_prof, 24).set_index("ts")
    assert utc_fc.loc[pd.Timestamp("2025-04-14T08:00Z"), "p50"] < 90


# --- recovery and recalibration ----------------------------------------------------------------------------
def test_synthetic_24h_168h_pattern_recovered_within_5pct_every_hour_of_week(weekly_pattern):
    rng = np.random.default_rng(42)
    weeks = 4
    start = pd.Timestamp("2025-01-06T00:00Z")  # a Monday: hour-of-week 0 = Monday 00:00 UTC
    truth = np.tile(weekly_pattern, weeks)
    noisy = truth * np.exp(rng.normal(0, 0.03, truth.size))
    prof = fit_profile(_utc_series(str(start.tz_localize(None)), noisy), "UTC",
                       settings=ProfileSettings(trend=False))
    rel = np.abs(hour_of_week_profile(prof) / weekly_pattern - 1)
    assert rel.max() < 0.05
    fc = forecast(prof, 168)
    assert fc["ts"].iloc[0] == start + pd.Timedelta(weeks=weeks)
    assert np.abs(fc["p50"].to_numpy() / weekly_pattern - 1).max() < 0.05
    assert (fc["p90"] >= fc["p50"]).all()


def test_recalibrate_scales_level_and_replaces_previous_factor(weekly_pattern):
    s = _utc_series("2025-01-06T00:00", np.tile(weekly_pattern, 3))
    prof = fit_profile(s, "UTC", settings=ProfileSettings(trend=False))
    nxt = forecast(prof, 6)
    actual = pd.Series(1.2 * nxt["p50"].to_numpy(), index=pd.DatetimeIndex(nxt["ts"]))
    rec = recalibrate(prof, actual, window_h=6)
    assert rec.level_factor == pytest.approx(1.2, rel=1e-6) and prof.level_factor == 1.0
    np.testing.assert_allclose(forecast(rec, 6, start=nxt["ts"].iloc[0])["p50"], actual.to_numpy(), rtol=1e-6)
    again = recalibrate(rec, actual, window_h=6)
    assert again.level_factor == pytest.approx(1.2, rel=1e-6)  # replaces, does not compound
    np.testing.assert_allclose(fitted(prof, actual.index), nxt["p50"], rtol=1e-9)
    capped = recalibrate(prof, actual * 10, window_h=6)
    assert capped.level_factor == 2.0


def test_trailing_window_refit_uses_recent_hours_only(weekly_pattern):
    old = np.tile(weekly_pattern, 2) * 5.0
    new = np.tile(weekly_pattern, 3)
    s = _utc_series("2025-01-06T00:00", np.concatenate([old, new]))
    prof = fit_profile(s, "UTC", settings=ProfileSettings(trend=False, trailing_window_h=3 * 168))
    assert prof.n_points == 504 and prof.t0_ == s.index[336]
    np.testing.assert_allclose(hour_of_week_profile(prof), weekly_pattern, rtol=1e-6)


def test_forecast_validates_arguments(weekly_pattern):
    prof = fit_profile(_utc_series("2025-01-06T00:00", np.tile(weekly_pattern, 3)), "UTC")
    with pytest.raises(InputError, match="horizon_h"):
        forecast(prof, 0)
    with pytest.raises(InputError, match="no time zone"):
        forecast(prof, 3, start=pd.Timestamp("2025-02-01 00:00"))
    with pytest.raises(InputError, match="regular hourly grid"):
        fit_profile(_utc_series("2025-01-06T00:00", np.ones(100)).drop(
            pd.Timestamp("2025-01-06T05:00Z")))
