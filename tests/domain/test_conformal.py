"""domain.conformal: the one split-conformal rank rule, by hand."""

from __future__ import annotations

import math

import pytest

from domain.conformal import conformal_rank, conformal_upper


def test_rank_is_ceil_of_n_plus_1_times_level_clamped():
    assert conformal_rank(10, 0.9) == 10  # ceil(11 x 0.9) = ceil(9.9)
    assert conformal_rank(19, 0.9) == 18  # ceil(20 x 0.9) = 18
    assert conformal_rank(5, 0.999) == 5  # ceil(5.994) = 6 > n: the largest
    assert conformal_rank(10, 0.0) == 1 and conformal_rank(10, -0.2) == 1
    with pytest.raises(ValueError, match="n = 0"):
        conformal_rank(0, 0.9)


def test_binary_round_off_does_not_raise_the_rank():
    # 1 - 0.7 is 0.30000000000000004 in binary: 10 x it is 3.0000000000000004, whose ceiling would be 4
    level = 1 - 0.7
    assert math.ceil(10 * level) == 4
    assert conformal_rank(9, level) == 3


def test_upper_quantile_is_the_rank_th_smallest():
    assert conformal_upper([5.0, 1.0, 4.0, 2.0, 3.0], 0.5) == 3.0  # ceil(6 x 0.5) = 3rd smallest
    assert conformal_upper([7.0], 0.9) == 7.0
    with pytest.raises(ValueError):
        conformal_upper([], 0.9)
