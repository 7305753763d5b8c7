"""Case C22 at the forecaster: non-power-of-two GPU requests are rounded up, flagged, and predicted
at the rounded count; a request below one GPU is refused naming the row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasters.errors import InputError
from forecasters.jobs import FLAG_REQUEST_ROUNDED, predict, round_requests_pow2


def test_round_requests_pow2_values():
    feats = pd.DataFrame({"gpus_requested": [3.0, 6.0, 5.0, 8.0000001, 16.0, 1.0]})
    out, rounded = round_requests_pow2(feats, feats)
    assert out["gpus_requested"].tolist() == [4.0, 8.0, 8.0, 8.0, 16.0, 1.0]
    assert rounded.tolist() == [True, True, True, True, False, False]


def test_request_below_one_gpu_is_refused_with_row():
    feats = pd.DataFrame({"gpus_requested": [4.0, 0.0]})
    with pytest.raises(InputError, match=r"row 1.*gpus_requested.*must be >= 1"):
        round_requests_pow2(feats, feats)


def test_predict_rounds_request_and_equals_the_power_of_two_prediction(training_model, training_queue):
    base = training_queue.head(3).copy()
    odd = base.assign(gpus_requested=[3, 5, 6])
    even = base.assign(gpus_requested=[4, 8, 8])
    p_odd = predict(training_model, odd)
    p_even = predict(training_model, even)
    cols = ["duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred"]
    np.testing.assert_array_equal(p_odd[cols].to_numpy(), p_even[cols].to_numpy())
    assert all(FLAG_REQUEST_ROUNDED in f for f in p_odd["flags"])
    assert not any(FLAG_REQUEST_ROUNDED in f for f in p_even["flags"])
    g = p_odd["gpus_pred"].to_numpy()
    assert np.all((g & (g - 1)) == 0)
