"""The day-ahead guard against naive 24 h (DESIGN §4.4, issue 31), on hand-made inner days with exact values.

Each case: two candidates (naive 24 h and one other) whose forecasts sit above an actual of 0 by a constant per
day, so every error is the forecast itself and the leave-one-day-out combination's error is its weighted sum.
"""

from __future__ import annotations

import numpy as np
import pytest

from forecasters.errors import InputError
from forecasters.realtime.combine import _Day, _day_ahead_guard, _inverse_mae

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
