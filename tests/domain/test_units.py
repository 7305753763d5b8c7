"""The shared vocabulary: one hours -> steps rule, one power-of-two ceiling, the horizon."""

from datetime import UTC, datetime

import numpy as np
import pytest

from domain import JOB_KINDS, Horizon, InputError, JobKind, hours_to_steps, hours_to_steps_array, is_pow2, pow2_ceil
from domain.errors import GpuplanError
from domain.units import pow2_ceil_array


@pytest.mark.parametrize(("hours", "steps"), [(-0.4, 1), (0.0, 1), (0.2, 1), (0.5, 1), (0.51, 2), (4.0000001, 8), (4.2, 9)])
def test_hours_to_steps_ceil_30min(hours: float, steps: int) -> None:
    assert hours_to_steps(hours, 30) == steps


def test_hours_to_steps_nearest_is_for_generated_truth_only() -> None:
    assert hours_to_steps(0.74, 30, rounding="nearest") == 1
    assert hours_to_steps(0.76, 30, rounding="nearest") == 2
    assert hours_to_steps(0.1, 30, rounding="nearest") == 1  # never 0


def test_hours_to_steps_other_step_lengths() -> None:
    assert hours_to_steps(1.0, 15) == 4
    assert hours_to_steps(1.01, 60) == 2


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "x"])
def test_hours_to_steps_refuses_non_finite(bad: object) -> None:
    with pytest.raises(InputError, match="duration_h"):
        hours_to_steps(bad, 30)  # type: ignore[arg-type]


def test_hours_to_steps_array_matches_scalar_and_nan_policy() -> None:
    hours = [0.2, 0.51, 3.0, 4.0000001]
    assert hours_to_steps_array(hours, 30).tolist() == [hours_to_steps(h, 30) for h in hours]
    assert hours_to_steps_array([np.nan, 1.0], 30, nonfinite_steps=1).tolist() == [1, 2]
    with pytest.raises(InputError):
        hours_to_steps_array([np.nan], 30)


@pytest.mark.parametrize(("n", "p"), [(0, 1), (1, 1), (2, 2), (3, 4), (2.3, 4), (5, 8), (8, 8), (8.0000001, 8), (9, 16)])
def test_pow2_ceil(n: float, p: int) -> None:
    assert pow2_ceil(n) == p


def test_pow2_ceil_array_is_pow2_ceil_elementwise() -> None:
    values = [0, 1, 2, 3, 2.3, 5, 8, 8.0000001, 8.000001, 9, -3, 0.5, 1023.9, 1024, 2.0**40 + 1]
    out = pow2_ceil_array(np.array(values))
    assert out.dtype == np.int64 and out.tolist() == [pow2_ceil(v) for v in values]
    assert out.tolist()[:10] == [1, 1, 2, 4, 4, 8, 8, 8, 16, 16]
    assert pow2_ceil_array(np.array([[3.0, 17.0]])).tolist() == [[4, 32]]  # keeps the shape
    scalar = pow2_ceil_array(3)
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and int(scalar) == 4
    assert pow2_ceil_array(np.array([])).shape == (0,)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 2.0**62 + 2.0**20])
def test_pow2_ceil_array_refuses_non_finite(bad: float) -> None:
    assert pow2_ceil_array(np.array([2.0**62])).tolist() == [2**62]
    with pytest.raises(InputError, match="GPU count"):
        pow2_ceil_array(np.array([2.0, bad]))


def test_is_pow2() -> None:
    assert [n for n in range(0, 20) if is_pow2(n)] == [1, 2, 4, 8, 16]
    assert not is_pow2(4.0)
    assert not is_pow2(True)


def test_horizon() -> None:
    h = Horizon(datetime(2025, 3, 16, 16, tzinfo=UTC), 30, 48)
    assert h.end == datetime(2025, 3, 17, 16, tzinfo=UTC)
    assert h.ts(3) == datetime(2025, 3, 16, 17, 30, tzinfo=UTC)
    assert h.steps_until(datetime(2025, 3, 16, 16, 10, tzinfo=UTC)) == 1
    assert h.steps_until(datetime(2025, 3, 16, 17, 0, tzinfo=UTC)) == 2
    with pytest.raises(InputError, match="time zone"):
        Horizon(datetime(2025, 3, 16), 30, 48)


def test_one_input_error_and_kinds() -> None:
    assert issubclass(InputError, GpuplanError) and issubclass(InputError, ValueError)
    assert JOB_KINDS == ("training", "quantization", "batch_inference")
    assert JobKind("quantization") is JobKind.QUANTIZATION
