"""Rolling-origin backtest: baselines and metrics on hand-checkable series; recalibration decay."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasters.realtime import ProfileSettings, backtest, fit_profile, forecast, recalibrate


def _series(values, start="2025-01-06T00:00Z") -> pd.Series:
    idx = pd.date_range(pd.Timestamp(start), periods=len(values), freq="h")
    return pd.Series(np.asarray(values, dtype=float), index=idx)


def test_baseline_maes_are_exact_for_a_known_series():
    # pattern repeats daily; the second week is 10 units above the first: seasonal naive misses by
    # exactly 10 every hour, naive-24 is exact except on the first test day (also 10).
    n = 336
    hod = np.arange(n) % 24
    vals = 100 + 20 * np.sin(2 * np.pi * hod / 24) + np.where(np.arange(n) >= 168, 10.0, 0.0)
    res = backtest(_series(vals), "UTC", settings=ProfileSettings(trend=False))
    m = res["variants"]["day_ahead"]
    assert res["n_days"] == 7 and m["n_hours"] == 168
    assert m["mae_snaive168"] == pytest.approx(10.0)
    assert m["mae_naive24"] == pytest.approx(10.0 / 7)
    assert m["mase_snaive168"] == pytest.approx(m["mae"] / 10.0)
    # hourly recalibration sees the level step after the first hour and beats the day-ahead forecast
    h = res["variants"]["hourly_recal"]
    assert h["mae"] < m["mae"]


def test_masked_hours_are_not_scored():
    n = 336
    vals = 100 + 20 * np.sin(2 * np.pi * (np.arange(n) % 24) / 24)
    s = _series(vals)
    masked = [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in s.index[200:210]]
    res = backtest(s, "UTC", exclude=masked)
    assert res["variants"]["day_ahead"]["n_hours"] == 168 - 10
    # outliers are kept out of the fit but still scored (they are real demand)
    res = backtest(s, "UTC", outliers=masked, n_days=2)
    assert res["variants"]["day_ahead"]["n_hours"] == 48


def test_persistence_from_the_last_observed_hour_does_not_read_an_imputed_gap():
    n = 336
    vals = 100 + 20 * np.sin(2 * np.pi * (np.arange(n) % 24) / 24)
    vals[200:202] = 0.0  # two masked hours whose stored (imputed) value is 0
    s = _series(vals)
    masked = list(s.index[200:202])
    m = backtest(s, "UTC", exclude=masked)["variants"]["hourly_recal"]
    assert m["n_hours"] == 166
    # only hour 202 differs: y[t-1] is the stored 0, the last observed hour is 199
    diff = (vals[202] - abs(vals[202] - vals[199])) / 166
    assert m["mae_persistence"] - m["mae_persistence_obs"] == pytest.approx(diff, rel=1e-9)
    assert m["mase_persistence_obs"] == pytest.approx(m["mae"] / m["mae_persistence_obs"], rel=1e-12)


def test_level_correction_decays_with_the_residual_autocorrelation():
    rng = np.random.default_rng(1)
    n = 504
    e = np.zeros(n)
    for t in range(1, n):
        e[t] = 0.8 * e[t - 1] + rng.normal(0, 0.05)
    hod = np.arange(n) % 24
    s = _series(np.exp(np.log(100 + 30 * np.sin(2 * np.pi * hod / 24)) + e))
    prof = fit_profile(s, "UTC")
    assert 0.6 < prof.phi_ < 0.95
    base = forecast(prof, 48)
    last = pd.Series([1.5 * base["p50"].iat[0]], index=[s.index[-1] + pd.Timedelta(hours=1)])
    # anchor one hour into the forecast: at h hours after it the factor is 1.5 ** (phi ** h)
    rec = recalibrate(prof, last)
    fc = forecast(rec, 48)
    ratio = fc["p50"].to_numpy() / base["p50"].to_numpy()
    h = np.arange(48) - 0.0
    expected = np.where(h == 0, 1.5, 1.5 ** (prof.phi_ ** h))
    np.testing.assert_allclose(ratio, expected, rtol=1e-9)
    assert (fc["p90"] >= fc["p50"]).all()


def test_backtest_accepts_one_shot_iterables_and_refuses_off_grid_start():
    """A generator of excluded hours counts like a list; an off-grid test_start is a clear InputError."""
    import pandas as pd
    import pytest

    from forecasters.errors import InputError
    from forecasters.realtime.backtest import backtest

    idx = pd.date_range("2025-06-02", periods=24 * 16, freq="h", tz="UTC")
    hour = idx.hour.to_numpy()
    y = pd.Series(100.0 + 50.0 * ((hour >= 9) & (hour < 18)), index=idx)
    gone = list(idx[24 * 7 + 10 : 24 * 7 + 13])
    # the excluded hours (10-12 h of the first test day, a 150 plateau) carry a spike of 1000: excluded,
    # they are not scored, and the naive-24 forecast of the same hours one day later (lag = the spike)
    # misses by 850 on 3 of the 45 scored hours; the weekly-periodic series makes seasonal naive exact.
    y[gone] = 1000.0
    for excl in (gone, (t for t in gone)):
        m = backtest(y, "UTC", exclude=excl, n_days=2)["variants"]["day_ahead"]
        assert m["n_hours"] == 48 - 3
        assert m["mae_naive24"] == pytest.approx(3 * 850.0 / 45)
        assert m["mae_snaive168"] == pytest.approx(0.0)
    # negative control: not excluded, the spikes are scored (6 x 850 over 48 h; 3 x 850 for lag 168)
    m = backtest(y, "UTC", n_days=2)["variants"]["day_ahead"]
    assert (m["n_hours"], m["mae_naive24"], m["mae_snaive168"]) == (48, pytest.approx(6 * 850 / 48),
                                                                     pytest.approx(3 * 850 / 48))
    with pytest.raises(InputError, match="not an hour of the series"):
        backtest(y, "UTC", test_start=idx[24 * 8] + pd.Timedelta(minutes=30), n_days=1)


def test_coverage_mae_and_mape_by_hand_on_a_known_miss():
    # two weeks of a noiseless daily pattern, then one test day whose actuals are the pattern + 500 at
    # every 4th hour (6 hours, far above any P90) and the pattern - 30 elsewhere (18 hours, below P50 and
    # P90): P90 covers exactly 18 / 24 = 0.75; the day-ahead P50 is the pattern, so MAE = (6 x 500 +
    # 18 x 30) / 24 = 147.5, and both naive baselines (lags = the pattern) miss by the same amounts.
    n = 336
    pat = 100 + 20 * np.sin(2 * np.pi * (np.arange(n + 24) % 24) / 24)
    bump = np.where(np.arange(24) % 4 == 0, 500.0, -30.0)
    vals = pat.copy()
    vals[n:] += bump
    s = _series(vals)
    res = backtest(s, "UTC", test_start=s.index[n], n_days=1, settings=ProfileSettings(trend=False))
    m = res["variants"]["day_ahead"]
    assert m["n_hours"] == 24
    assert m["p90_coverage"] == 0.75
    assert m["mae"] == pytest.approx(147.5, rel=1e-6)
    assert m["mae_snaive168"] == pytest.approx(147.5) and m["mae_naive24"] == pytest.approx(147.5)
    assert m["mase_snaive168"] == pytest.approx(1.0, rel=1e-6)
    actual = vals[n:]
    assert m["mape_pct"] == pytest.approx(100 * np.mean(np.abs(bump) / actual), rel=1e-6)
    # the scored hours themselves (the forecast-against-actual plot of the nightly MLflow run)
    h = res["hours"]
    assert h["ts"] == [t.isoformat() for t in s.index[n:]] and np.allclose(h["actual"], actual)
    assert np.allclose(h["snaive168"], vals[n - 168:n - 144]) and np.allclose(h["naive24"], vals[n - 24:n])
    assert np.mean(np.abs(np.array(h["actual"]) - h["p50"])) == pytest.approx(m["mae"], rel=1e-12)
    assert np.mean(np.array(h["actual"]) <= h["p90"]) == m["p90_coverage"]


def test_p90_coverage_counts_hours_at_or_below_p90_not_p50():
    # a noisy history (5 % log-normal, seeded) gives a P90 5-8 % above the pattern and a P50 within
    # 2.5 % of it. Test day: 6 hours far above (+500), 6 hours at +4 % (above P50, below P90), 12 hours
    # far below (-30): P90 covers 18 / 24 = 0.75 (a P50 band would cover 12 / 24; an interval from
    # P50 up would cover 6 / 24).
    n = 336
    pat = 100 + 20 * np.sin(2 * np.pi * (np.arange(n + 24) % 24) / 24)
    rng = np.random.default_rng(7)
    vals = pat.copy()
    vals[:n] *= np.exp(rng.normal(0.0, 0.05, n))
    k = np.arange(24) % 4
    vals[n:] = np.where(k == 0, pat[n:] + 500, np.where(k == 1, pat[n:] * 1.04, pat[n:] - 30))
    s = _series(vals)
    m = backtest(s, "UTC", test_start=s.index[n], n_days=1, settings=ProfileSettings(trend=False))
    assert m["variants"]["day_ahead"]["p90_coverage"] == 0.75
