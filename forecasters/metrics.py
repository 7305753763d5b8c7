"""Accuracy metrics of duration forecasts (pure numpy). Fractions are fractions (0.12, not 12)."""

from __future__ import annotations

import numpy as np


def _pair(y, q) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y, dtype=float)
    q = np.asarray(q, dtype=float)
    if y.shape != q.shape or y.ndim != 1 or y.size == 0:
        raise ValueError(f"metrics need two equal, non-empty 1-d arrays; got {y.shape} and {q.shape}")
    return y, q


def mae(y, yhat) -> float:
    """Mean absolute error, same unit as ``y`` (hours here)."""
    y, yhat = _pair(y, yhat)
    return float(np.mean(np.abs(y - yhat)))


def median_ae(y, yhat) -> float:
    """Median absolute error, same unit as ``y`` (hours here)."""
    y, yhat = _pair(y, yhat)
    return float(np.median(np.abs(y - yhat)))


def ape(y, yhat) -> np.ndarray:
    """Absolute percentage errors ``|y - yhat| / y`` as fractions, ``(n,)``; ``y`` must be > 0."""
    y, yhat = _pair(y, yhat)
    if np.any(y <= 0):
        raise ValueError("percentage errors need positive actual durations")
    return np.abs(y - yhat) / y


def mape(y, yhat) -> float:
    """Mean absolute percentage error (fraction)."""
    return float(np.mean(ape(y, yhat)))


def median_ape(y, yhat) -> float:
    """Median absolute percentage error (fraction)."""
    return float(np.median(ape(y, yhat)))


def pinball(y, q, tau: float) -> float:
    """Mean pinball (quantile) loss of quantile ``tau`` in the unit of ``y``: ``max(tau*e, (tau-1)*e)``, ``e = y - q``."""
    y, q = _pair(y, q)
    e = y - q
    return float(np.mean(np.maximum(tau * e, (tau - 1.0) * e)))


def coverage(y, lo, hi) -> float:
    """Share of ``y`` with ``lo <= y <= hi`` (fraction)."""
    y, lo = _pair(y, lo)
    _, hi = _pair(y, hi)
    return float(np.mean((y >= lo) & (y <= hi)))
