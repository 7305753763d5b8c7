"""The split-conformal rank, defined once (forecasters and optimizer both calibrate upper quantiles with it).

For ``n`` exchangeable scores, the ``k``-th smallest with ``k = ceil((n + 1) · level)`` is at least a new
score with probability >= ``level`` (split conformal: Vovk, Gammerman and Shafer 2005; Lei et al. 2018;
the ``(n + 1)`` finite-sample correction as in Angelopoulos and Bates, *A Gentle Introduction to
Conformal Prediction*, 2021, eq. 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def conformal_rank(n: int, level: float) -> int:
    """The 1-based rank ``ceil((n + 1) · level)`` among ``n`` sorted scores, clamped to ``1 .. n``.

    The product is rounded to 9 decimals before the ceiling, so that binary round-off (``1000 × 0.999``
    is ``999.0000000000001``) does not raise the rank by one. A rank above ``n`` (a level the scores
    cannot resolve) gives ``n``, the largest score; ``level <= 0`` gives 1. Raises ValueError for ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"conformal_rank: n = {n} scores; at least 1 needed")
    k = math.ceil(round((n + 1) * level, 9))
    return min(max(k, 1), n)


def conformal_upper(scores: Sequence[float] | np.ndarray, level: float) -> float:
    """The split-conformal upper quantile of ``scores`` at ``level``: the :func:`conformal_rank`-th smallest.

    Raises ValueError for no scores.
    """
    s = np.sort(np.asarray(scores, dtype=float))
    return float(s[conformal_rank(s.size, level) - 1])
