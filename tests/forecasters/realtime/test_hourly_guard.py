"""The hourly mode's guard: on series where no model of the one-hour change beats "same as last hour", it is persistence.

Each series is ingested as a planning run would; the forecast one hour ahead must then be exactly the last
observed hour (flagged or not), and the guard's record must say why (a one-sided test it did not pass).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasters.realtime import ingest
from forecasters.realtime.combine import fit_combined, forecast_combined, reanchor
from forecasters.realtime.hourly import guard_test, lad_fit

IDX = pd.date_range("2025-06-02T00:00Z", periods=24 * 21, freq="h")


def _fit(values: np.ndarray):
    raw = pd.DataFrame({"ts": IDX.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": values})
    series, diag = ingest(raw, "UTC")
    return series, fit_combined(series, "UTC", exclude=diag["imputed"], outliers=diag["outliers"])


def stepped() -> np.ndarray:
    """A level held for days, then a step: 100 for 4 days, 160 for 5, 70 for 3, 130 for the rest."""
    y = np.full(len(IDX), 130.0)
    y[:96], y[96:216], y[216:288] = 100.0, 160.0, 70.0
    return y


def integer_few_values() -> np.ndarray:
    """GPUs held 0..3, each hour keeping the last value with probability 0.85, else a new draw."""
    rng = np.random.default_rng(3)
    y = np.zeros(len(IDX))
    for t in range(1, len(IDX)):
        y[t] = y[t - 1] if rng.random() < 0.85 else float(rng.integers(0, 4))
    return y


def long_zero_runs() -> np.ndarray:
    """Idle (0) for 40-hour runs, then bursts of 8 hours at 50."""
    y = np.zeros(len(IDX))
    for start in range(40, len(IDX), 48):
        y[start:start + 8] = 50.0
    return y


def white_noise_changes() -> np.ndarray:
    """A random walk: its one-hour changes are white noise (persistence is the best one-hour forecast)."""
    return 500.0 + np.cumsum(np.random.default_rng(8).normal(0.0, 5.0, len(IDX)))


@pytest.mark.parametrize("make", [stepped, integer_few_values, long_zero_runs, white_noise_changes])
def test_the_hourly_mode_is_persistence_where_no_change_model_beats_it(make):
    y = make()
    series, comb = _fit(y)
    assert comb.hourly_model == "persistence" and comb.hourly_anchor == "observed"
    assert comb.hourly_coef.tolist() == [0.0, 0.0, 0.0]
    assert comb.hourly_guard["wins"] == 0.0
    # one hour ahead: exactly the last observed hour, from the origin and after re-anchoring on a new hour
    assert forecast_combined(comb, 1)["p50"].iat[0] == pytest.approx(y[-1], abs=1e-9)
    nxt = pd.Series([y[-24]], index=[comb.origin])
    moved = reanchor(comb, nxt)
    assert forecast_combined(moved, 1, start=comb.origin + pd.Timedelta(hours=1))["p50"].iat[0] == y[-24]


def test_a_flat_series_forecasts_its_level():
    series, comb = _fit(np.full(len(IDX), 42.0))
    fc = forecast_combined(comb, 24)
    assert fc["p50"].tolist() == [42.0] * 24 and comb.hourly_model in ("persistence", "none")


def test_guard_test_is_a_one_sided_t_test_on_the_days_by_hand():
    # d = [1, 2, 3]: mean 2, sd 1, se 1/sqrt(3), t = 3.464 > t(0.95, 2) = 2.920: the model wins
    g = guard_test(np.array([5.0, 6.0, 7.0]), np.array([4.0, 4.0, 4.0]))
    assert g["t"] == pytest.approx(2 * np.sqrt(3)) and g["t_crit"] == pytest.approx(2.919986, abs=1e-6)
    assert g["wins"] == 1.0
    # d = [1, -1, 3]: mean 1, sd 2, t = 0.866: not significant
    assert guard_test(np.array([5.0, 3.0, 7.0]), np.array([4.0, 4.0, 4.0]))["wins"] == 0.0
    # worse on average: never
    assert guard_test(np.array([4.0, 4.0]), np.array([5.0, 5.0]))["wins"] == 0.0


def test_lad_fit_cannot_overflow_on_huge_units_and_honours_its_bound():
    # requests/h around 1e150: IRLS normal equations squared them (overflow); the scaled programme does not
    x = np.column_stack([np.linspace(1.0, 2.0, 50) * 1e150])
    z = 0.5 * x[:, 0]
    assert lad_fit(x, z)[0] == pytest.approx(0.5, rel=1e-9)
    assert lad_fit(x, 10 * z, bound=2.0)[0] == pytest.approx(2.0)


def test_persistence_after_masked_hours_is_the_last_observed_value_exactly():
    # the last 2 hours are masked (ingest imputes them): the first hour forecast is the last observed hour
    y = white_noise_changes()
    series, _ = _fit(y)
    masked = list(series.index[-2:])
    comb = fit_combined(series, "UTC", exclude=masked)
    assert comb.hourly_model == "persistence" and comb.hourly_anchor == "observed"
    assert comb.obs_ts == series.index[-3]
    assert forecast_combined(comb, 1)["p50"].iat[0] == y[-3]



def daily_wave() -> np.ndarray:
    """100 + 50 sin(2 pi h / 24) + N(0, 1): the seasonal change model beats persistence by far."""
    h = np.arange(len(IDX))
    return 100.0 + 50.0 * np.sin(2 * np.pi * h / 24) + np.random.default_rng(5).normal(0.0, 1.0, len(IDX))


def test_the_running_guard_falls_back_to_persistence_once_the_model_errs_more_since_the_fit():
    y = daily_wave()
    series, comb = _fit(y)
    assert comb.hourly_model == "combination" and comb.hourly_guard["wins"] == 1.0
    # it starts from one day (24 h) at the inner days' out-of-day MAE of the model and of persistence
    m0, p0 = comb.hourly_scores["hourly"] * 24, comb.hourly_scores["persistence_observed"] * 24
    assert comb.hourly_live == (pytest.approx(m0), pytest.approx(p0), 0) and m0 < p0
    assert not comb.live_persistence
    # the wave stops: 12 hours held at the last value; persistence errs 0 on each, the model of the change does not
    later = pd.date_range(comb.origin, periods=12, freq="h")
    moved = reanchor(comb, pd.Series(np.full(12, y[-1]), index=later))
    sae_model, sae_pers, hours = moved.hourly_live
    assert hours == 12 and sae_pers == pytest.approx(p0) and sae_model > sae_pers and moved.live_persistence
    nxt = forecast_combined(moved, 1, start=later[-1] + pd.Timedelta(hours=1))["p50"].iat[0]
    assert nxt == y[-1]
    # the wave goes on: the model keeps its lead and stays
    cont = 100.0 + 50.0 * np.sin(2 * np.pi * np.arange(len(IDX), len(IDX) + 12) / 24)
    kept = reanchor(comb, pd.Series(cont, index=later))
    assert kept.hourly_live[2] == 12 and kept.hourly_live[0] < kept.hourly_live[1] and not kept.live_persistence
    assert forecast_combined(kept, 1, start=later[-1] + pd.Timedelta(hours=1))["p50"].iat[0] != cont[-1]


def test_the_running_guard_starts_from_the_settings_hours_of_the_measured_lead():
    from forecasters.realtime.model import CombineSettings

    raw = pd.DataFrame({"ts": IDX.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": daily_wave()})
    series, diag = ingest(raw, "UTC")
    comb = fit_combined(series, "UTC", exclude=diag["imputed"], outliers=diag["outliers"],
                        settings=CombineSettings(hourly_live_prior_h=6.0))
    # 6 hours at the inner days' out-of-day MAEs (the default is 24: the test above)
    m, p = comb.hourly_scores["hourly"], comb.hourly_scores["persistence_observed"]
    assert comb.hourly_live == (pytest.approx(6.0 * m), pytest.approx(6.0 * p), 0)


def test_the_guard_margin_takes_its_share_of_persistence_s_loss_off_the_model_s_gain():
    # CombineSettings.hourly_guard_margin m: the test is on (1 - m) x persistence's per-day loss, so the mean gain
    # drops by exactly m x persistence's mean per-day MAE (the inner days of this wave have 24 scored hours each)
    from forecasters.realtime.model import CombineSettings

    raw = pd.DataFrame({"ts": IDX.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": daily_wave()})
    series, diag = ingest(raw, "UTC")

    def fit(m: float):
        return fit_combined(series, "UTC", exclude=diag["imputed"], outliers=diag["outliers"],
                            settings=CombineSettings(hourly_guard_margin=m))

    base, half = fit(0.0), fit(0.02)
    pers = base.hourly_scores["persistence_observed"]
    assert half.hourly_guard["mean_gain"] == pytest.approx(base.hourly_guard["mean_gain"] - 0.02 * pers, rel=1e-9)
    # a margin of the whole loss cannot be beaten (the model would need a negative MAE): persistence exactly
    full = fit(1.0)
    assert full.hourly_guard["wins"] == 0.0 and full.hourly_model == "persistence" and full.hourly_anchor == "observed"
    assert forecast_combined(full, 1)["p50"].iat[0] == series.iat[-1]
