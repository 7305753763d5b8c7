"""The day-ahead guard against naive 24 h and the anchor's decay (DESIGN §4.4, issue 31), with exact values.

Each case: two candidates (naive 24 h and one other) whose forecasts sit above an actual of 0 by a constant per
day, so every error is the forecast itself and the leave-one-day-out combination's error is its weighted sum.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasters.errors import InputError
from forecasters.realtime import ingest
from forecasters.realtime.combine import _Day, _day_ahead_guard, _day_p50, _inverse_mae, fit_combined, forecast_combined
from forecasters.realtime.model import CombineSettings

NAMES = ["naive24", "mean7"]


def _days(naive: list[float], other: list[float]):
    days = [_Day(o=24 * i, t=np.array([24 * i, 24 * i + 1]), mat=np.array([[n, n], [c, c]], float))
            for i, (n, c) in enumerate(zip(naive, other))]
    act = np.zeros(2 * len(days))
    maes, w = _inverse_mae(np.hstack([d.mat for d in days]), act)
    return days, act, w, maes


@pytest.mark.parametrize("rule", ["naive_wins", "must_beat"])
def test_a_combination_significantly_better_than_naive24_is_kept_by_both_rules(rule):
    days, act, w, maes = _days([1.0, 1.0, 1.0], [0.5, 0.6, 0.4])
    w2, rec = _day_ahead_guard(days, NAMES, act, w, maes, 0.05, rule)
    # leave-one-day-out errors 2/3, 0.7241, 0.6129: t = 10.34 > t(0.95, 2 df) = 2.920
    assert w2.tolist() == pytest.approx([1 / 3, 2 / 3]) and rec["fallback"] == 0.0
    assert rec["combination_mae"] == pytest.approx(0.6679, abs=1e-4) and rec["naive24_mae"] == 1.0
    assert abs(rec["t"]) == pytest.approx(10.3404, abs=1e-4) and rec["t_crit"] == pytest.approx(2.9200, abs=1e-4)


def test_a_tie_with_naive24_falls_back_only_under_must_beat():
    days, act, w, maes = _days([0.6, 0.6, 0.6], [0.5, 0.7, 0.6])
    w_nw, rec_nw = _day_ahead_guard(days, NAMES, act, w, maes, 0.05, "naive_wins")
    w_mb, rec_mb = _day_ahead_guard(days, NAMES, act, w, maes, 0.05, "must_beat")
    assert w_nw.tolist() == [0.5, 0.5] and rec_nw["fallback"] == 0.0  # naive 24 h is not significantly better
    assert w_mb.tolist() == [1.0, 0.0] and rec_mb["fallback"] == 1.0  # nor is the combination: naive 24 h alone
    assert rec_mb["t"] == pytest.approx(-0.0481, abs=1e-4)


@pytest.mark.parametrize("rule", ["naive_wins", "must_beat"])
def test_naive24_significantly_better_is_the_forecast_under_both_rules(rule):
    days, act, w, maes = _days([0.5, 0.5, 0.5], [0.9, 1.0, 1.1])
    w2, rec = _day_ahead_guard(days, NAMES, act, w, maes, 0.05, rule)
    assert w2.tolist() == [1.0, 0.0] and rec["fallback"] == 1.0
    assert abs(rec["t"]) == pytest.approx(7.4519, abs=1e-4)


def test_without_naive24_or_with_one_day_the_weights_are_unchanged():
    days, act, w, maes = _days([0.5, 0.5, 0.5], [0.9, 1.0, 1.1])
    assert _day_ahead_guard(days, ["ets", "mean7"], act, w, maes, 0.05, "must_beat") == (w, {})
    assert _day_ahead_guard(days[:1], NAMES, act[:2], w, maes, 0.05, "must_beat") == (w, {})


def test_an_unknown_rule_is_refused():
    days, act, w, maes = _days([0.5, 0.5], [0.9, 1.0])
    with pytest.raises(InputError, match="day_ahead_guard_rule"):
        _day_ahead_guard(days, NAMES, act, w, maes, 0.05, "sometimes")


# ------------------------------------------------------------------ the anchor's decay, chosen by backtest

IDX = pd.date_range("2025-06-02T00:00Z", periods=24 * 21, freq="h")
#: A day's level offset over a 24-h sine (one per day, fixed).
OFFSETS = np.array([0, 40, 10, 50, 20, 60, 0, 30, 5, 45, 15, 55, 25, 35, 0, 40, 10, 50, 20, 60, 0, 30], float)


def _fit_offsets(lead_h: int, **settings):
    """A 24-h sine whose level moves by :data:`OFFSETS` each day, ``lead_h`` hours before midnight."""
    h = np.arange(len(IDX))
    y = 100 + 30 * np.sin(2 * np.pi * h / 24) + OFFSETS[(h + lead_h) // 24]
    raw = pd.DataFrame({"ts": IDX.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": y})
    series, diag = ingest(raw, "UTC")
    return fit_combined(series, "UTC", exclude=diag["imputed"], outliers=diag["outliers"],
                        settings=CombineSettings(**settings))


def test_a_level_that_moves_at_midnight_gets_no_anchor_decay_by_backtest():
    # the last hour before the origin still has the old day's level: carrying its gap into the day only errs; the
    # lag-1 autocorrelation of the errors (within a day the new level's gap persists) said 0.99
    assert _fit_offsets(0, anchor_decay="lag1").rho == 0.99
    comb = _fit_offsets(0, anchor_decay="backtest")
    assert comb.rho == 0.0
    fc = forecast_combined(comb, 24)
    day = _day_p50(comb, pd.DatetimeIndex(fc["ts"]))
    assert fc["p50"].to_numpy()[1:] == pytest.approx(day[1:], abs=1e-9)  # the combination from the second hour


def test_a_level_that_moves_an_hour_before_midnight_keeps_the_anchor_all_day():
    # the last hour already shows the day's level: the anchor's gap holds for the day (lag-1 said 0.817)
    assert _fit_offsets(1, anchor_decay="lag1").rho == pytest.approx(0.8168, abs=1e-4)
    assert _fit_offsets(1, anchor_decay="backtest").rho == 0.99
    assert _fit_offsets(1, anchor_decay="backtest", anchor_decay_max=0.9).rho == 0.9


def test_an_unknown_decay_rule_is_refused():
    with pytest.raises(InputError, match="anchor_decay"):
        _fit_offsets(0, anchor_decay="sometimes")
