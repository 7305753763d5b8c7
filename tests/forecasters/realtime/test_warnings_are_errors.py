"""The forecasters' tests run with numpy and statsmodels warnings as errors (tests/forecasters/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest


def test_a_numpy_overflow_fails_a_forecaster_test():
    with pytest.raises(FloatingPointError if np.geterr()["over"] == "raise" else RuntimeWarning):
        np.array([1e308]) * np.array([10.0])


def test_a_statsmodels_model_warning_fails_a_forecaster_test():
    import warnings

    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    with pytest.raises(ConvergenceWarning):
        warnings.warn("did not converge", ConvergenceWarning, stacklevel=1)
