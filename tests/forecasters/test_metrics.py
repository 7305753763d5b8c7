"""Hand-computed metric values."""

import numpy as np
import pytest

from forecasters import metrics as M


def test_point_metrics_by_hand():
    y = [1.0, 2.0, 4.0]
    yhat = [2.0, 2.0, 3.0]
    assert M.mae(y, yhat) == pytest.approx(2.0 / 3.0)
    assert M.mape(y, yhat) == pytest.approx((1.0 + 0.0 + 0.25) / 3.0)
    assert M.median_ape(y, yhat) == pytest.approx(0.25)


def test_pinball_and_coverage_by_hand():
    y = np.array([1.0, 3.0])
    q = np.array([2.0, 2.0])
    # tau 0.9: under-forecast 1 h costs 0.9, over-forecast 1 h costs 0.1
    assert M.pinball(y, q, 0.9) == pytest.approx((0.1 + 0.9) / 2)
    assert M.pinball(y, q, 0.1) == pytest.approx((0.9 + 0.1) / 2)
    assert M.coverage([1.0, 2.0, 5.0], [0.5, 2.5, 1.0], [1.5, 3.0, 5.0]) == pytest.approx(2 / 3)


def test_percentage_errors_refuse_non_positive_actuals():
    with pytest.raises(ValueError, match="positive"):
        M.mape([0.0, 1.0], [1.0, 1.0])


def test_median_ae_is_the_median_not_the_mean():
    # absolute errors 1, 0, 1, 10: median (1 + 1) / 2 = 1.0, mean 3.0
    assert M.median_ae([1.0, 2.0, 4.0, 10.0], [2.0, 2.0, 3.0, 0.0]) == 1.0
    assert M.mae([1.0, 2.0, 4.0, 10.0], [2.0, 2.0, 3.0, 0.0]) == 3.0
    # APEs 1.0, 0.0, 0.25, 1.0: median (0.25 + 1.0) / 2, mean 2.25 / 4
    assert M.median_ape([1.0, 2.0, 4.0, 10.0], [2.0, 2.0, 3.0, 0.0]) == 0.625
    assert M.mape([1.0, 2.0, 4.0, 10.0], [2.0, 2.0, 3.0, 0.0]) == 0.5625


def test_pinball_weights_under_and_over_forecasts_asymmetrically():
    # e = y - q = (-1.5, +2): tau 0.9 -> (0.1 * 1.5, 0.9 * 2) = (0.15, 1.8); tau 0.1 -> (1.35, 0.2)
    y, q = [0.5, 4.0], [2.0, 2.0]
    assert M.pinball(y, q, 0.9) == pytest.approx(0.975)
    assert M.pinball(y, q, 0.1) == pytest.approx(0.775)
    assert M.pinball(y, q, 0.5) == pytest.approx(0.875)  # half the MAE of 1.75
    assert M.pinball([2.0], [2.0], 0.9) == 0.0


def test_coverage_includes_both_ends():
    # y on lo, on hi, inside, below, above
    assert M.coverage([1.0, 3.0, 2.0, 0.5, 3.5], [1.0] * 5, [3.0] * 5) == pytest.approx(3 / 5)
    assert M.coverage([1.0], [1.0], [1.0]) == 1.0


@pytest.mark.parametrize(("y", "q"), [([1.0, 2.0], [1.0]), ([[1.0]], [[1.0]]), ([], [])])
def test_pairs_must_be_equal_non_empty_1d(y, q):
    with pytest.raises(ValueError, match="equal, non-empty 1-d arrays"):
        M.mae(y, q)
    with pytest.raises(ValueError, match="equal, non-empty 1-d arrays"):
        M.coverage(y, q, q)


def test_percentage_errors_refuse_negative_actuals_and_accept_tiny_positive():
    with pytest.raises(ValueError, match="positive"):
        M.median_ape([-1.0, 1.0], [1.0, 1.0])
    assert M.ape([1e-9], [0.0]).tolist() == [1.0]


def test_unsigned_integer_inputs_are_read_as_floats_and_the_refusal_message_is_exact():
    # uint8 arithmetic would wrap 1 - 2 to 255 (MAE 128.5 instead of 1.5) if neither side were made float
    y, q = np.array([1, 4], dtype=np.uint8), np.array([2, 2], dtype=np.uint8)
    assert M.mae(y, q) == 1.5
    assert M.mae(q, y) == 1.5
    with pytest.raises(ValueError, match=r"^percentage errors need positive actual durations$"):
        M.ape([0.0], [1.0])
