"""Units and the planning clock: powers of two, hours -> steps, the horizon.

One rule converts hours to planning steps (:func:`hours_to_steps`), one rounds up to a power of
two (:func:`pow2_ceil`, :func:`pow2_ceil_array`); every package uses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import numpy as np
import numpy.typing as npt

from domain.errors import InputError

#: Digits a step count is rounded to before it is ceiled, so 8.0000001 steps is 8, not 9
#: (case C22 in docs/cases.md: float noise from a regressor must not add a step).
ROUND_DIGITS = 6

Rounding = Literal["ceil", "nearest"]


def is_pow2(n: object) -> bool:
    """True when ``n`` is an ``int`` that is a positive power of two (1, 2, 4, ...)."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and (n & (n - 1)) == 0


def pow2_ceil(n: float) -> int:
    """The smallest power of two >= ``n`` (at least 1): 0 -> 1, 1 -> 1, 3 -> 4, 2.3 -> 4, 8 -> 8.

    ``n`` is rounded to ``ROUND_DIGITS`` first (8.0000001 -> 8).

    Raises:
        InputError: ``n`` is not a finite number.
    """
    x = float(n)
    if not math.isfinite(x):
        raise InputError(f"GPU count {n!r} is not a finite number")
    c = max(1, math.ceil(round(x, ROUND_DIGITS)))
    return 1 << (c - 1).bit_length()


def pow2_ceil_array(x: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """:func:`pow2_ceil` element-wise: the smallest power of two >= each value, at least 1.

    The same rule: round to ``ROUND_DIGITS`` digits, ceil, next power of two (0 -> 1, 3 -> 4,
    2.3 -> 4, 8.0000001 -> 8). Used for memory-driven GPU counts and rounded-up GPU requests.

    Args:
        x: scalar or array of GPU counts (any shape, any real dtype).

    Returns:
        int64 array of ``x``'s shape (0-d for a scalar).

    Raises:
        InputError: a value is not a finite number, or is above ``2**62`` (no int64 power of two).
    """
    a = np.asarray(x, dtype=float)
    bad = ~np.isfinite(a)
    if bad.any():
        raise InputError(f"GPU count {a[bad].flat[0]!r} is not a finite number")
    if (a > 2.0**62).any():
        raise InputError(f"GPU count {a[a > 2.0**62].flat[0]!r} is too large (at most 2**62)")
    c = np.maximum(np.ceil(np.round(a, ROUND_DIGITS)), 1.0)
    # frexp(c) = (m, e) with c = m * 2**e and 0.5 <= m < 1 (exact): c is 2**(e - 1) when m is 0.5,
    # else the next power of two is 2**e
    m, e = np.frexp(c)
    e = np.where(m == 0.5, e - 1, e)
    return np.asarray(np.left_shift(np.int64(1), e.astype(np.int64)), dtype=np.int64)


def _steps(hours: float, step_minutes: float, rounding: Rounding) -> float:
    x = round(hours * 60.0 / step_minutes, ROUND_DIGITS)
    if rounding == "ceil":
        return max(1.0, math.ceil(x))
    if rounding == "nearest":
        return max(1.0, float(round(x)))
    raise ValueError(f"rounding must be 'ceil' or 'nearest', got {rounding!r}")


def hours_to_steps(hours: float, step_minutes: float, *, rounding: Rounding = "ceil") -> int:
    """Whole planning steps for a duration in hours, at least 1.

    The rule: ``max(1, ceil(round(hours * 60 / step_minutes, 6)))``. ``rounding="ceil"`` is for
    every forecast or planned duration (a plan never reserves less than the forecast);
    ``rounding="nearest"`` (Python's ``round``, half to even) is only for discretising the *truth*
    of a generated world onto the step grid (optimizer.scenarios), where the drawn duration is a
    sample, not a promise. Examples at 30-minute steps: -0.4 h and 0.2 h -> 1; 0.51 h -> 2
    (ceil) or 1 (nearest); 4.0000001 h -> 8.

    Raises:
        InputError: ``hours`` is not a finite number, or ``step_minutes`` is not > 0.
    """
    try:
        h = float(hours)
    except (TypeError, ValueError):
        raise InputError(f"duration_h {hours!r} is not a number") from None
    if not math.isfinite(h):
        raise InputError(f"duration_h {hours!r} is not a finite number")
    if not (math.isfinite(step_minutes) and step_minutes > 0):
        raise InputError(f"step_minutes must be > 0, got {step_minutes!r}")
    return int(_steps(h, step_minutes, rounding))


def hours_to_steps_array(
    hours: npt.ArrayLike, step_minutes: float, *, nonfinite_steps: int | None = None
) -> npt.NDArray[np.int64]:
    """:func:`hours_to_steps` (ceil rule) element-wise: ``(n,)`` hours -> ``(n,)`` int64 steps.

    Args:
        hours: scalar or array of durations in hours.
        step_minutes: planning step in minutes (> 0).
        nonfinite_steps: steps given to a NaN/inf duration; ``None`` raises instead.

    Raises:
        InputError: a non-finite duration when ``nonfinite_steps`` is None, or ``step_minutes`` <= 0.
    """
    if not (math.isfinite(step_minutes) and step_minutes > 0):
        raise InputError(f"step_minutes must be > 0, got {step_minutes!r}")
    h = np.asarray(hours, dtype=float)
    bad = ~np.isfinite(h)
    if bad.any() and nonfinite_steps is None:
        raise InputError(f"duration_h {h[bad].flat[0]!r} is not a finite number")
    steps = np.ceil(np.round(np.where(bad, 0.0, h) * 60.0 / step_minutes, ROUND_DIGITS))
    steps = np.maximum(steps, 1.0)
    if bad.any():
        steps = np.where(bad, float(nonfinite_steps or 1), steps)
    return steps.astype(np.int64)


@dataclass(frozen=True)
class Horizon:
    """The planning clock: ``n_steps`` steps of ``step_minutes`` from ``start`` (UTC).

    Step ``t`` covers ``[start + t·Δ, start + (t+1)·Δ)``. A value object, never a bare integer
    (gaps count steps, not rows).

    Raises:
        InputError: ``start`` is naive, ``step_minutes`` <= 0 or ``n_steps`` < 1.
    """

    start: datetime
    step_minutes: int
    n_steps: int

    def __post_init__(self) -> None:
        if self.start.tzinfo is None:
            raise InputError(f"horizon start {self.start.isoformat()} has no time zone (expected UTC)")
        if self.step_minutes <= 0:
            raise InputError(f"step_minutes must be > 0, got {self.step_minutes}")
        if self.n_steps < 1:
            raise InputError(f"horizon n_steps must be >= 1, got {self.n_steps}")

    @property
    def step(self) -> timedelta:
        """One step as a ``timedelta``."""
        return timedelta(minutes=self.step_minutes)

    @property
    def step_h(self) -> float:
        """One step in hours."""
        return self.step_minutes / 60.0

    @property
    def end(self) -> datetime:
        """The first instant after the horizon."""
        return self.start + self.n_steps * self.step

    def ts(self, step: int) -> datetime:
        """Start instant of ``step`` (may be outside ``0..n_steps-1``)."""
        return self.start + step * self.step

    def steps_until(self, when: datetime) -> int:
        """Whole steps from ``start`` until ``when``, rounded up.

        A deadline at 00:10 on 30-minute steps from 00:00 is step 1.
        """
        return math.ceil((when - self.start) / self.step - 1e-9)
