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
