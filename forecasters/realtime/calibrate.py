"""The real-time combination's P90: split-conformal per lead band at an adaptive (ACI) level (DESIGN §4.4).

Residuals of the forecast as issued at each inner origin (ratio ``actual / P50``, or the difference when
some P50 is 0); the quantile rule is :func:`domain.conformal.conformal_upper`; the level is replayed over
the backtest days by adaptive conformal inference (:func:`aci_alpha`). Pure, on arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from domain.conformal import conformal_upper
from forecasters.errors import InputError

HOURS_PER_DAY = 24


@dataclass(frozen=True)
class P90:
    """A calibrated P90 (:func:`calibrate_p90`).

    Attributes:
        kind: ``"ratio"`` (P90 = P50 x q) or ``"additive"`` (P90 = P50 + q).
        alpha: the miss rate the quantiles are taken at, after the adaptive update.
        bands: quantile per local hour-of-day band, shape ``(n_bands,)``.
        hourly_q90: quantile of the one-hour-ahead mode (its out-of-day residuals; same kind).
        band_coverage: per band, the share of the replayed days' hours at or below the P90 issued for them
            (each day's quantiles from the days before it, at the ACI level of that day; NaN for a band with
            no replayed hour): the band's measured coverage.
    """

    kind: str
    alpha: float
    bands: np.ndarray
    hourly_q90: float
    band_coverage: tuple[float, ...] = ()


def conformal_quantile(residuals: np.ndarray, level: float) -> float:
    """Split-conformal upper quantile: the ``ceil((n + 1) level)``-th smallest of ``n`` residuals (:func:`domain.conformal.conformal_rank`).

    The ``(n + 1)`` is the finite-sample correction (Angelopoulos and Bates, *A Gentle Introduction to
    Conformal Prediction*, 2021, eq. 1). The rank is clipped to ``1..n``: the largest residual when it exceeds
    ``n`` (a level the residuals cannot resolve, e.g. ``level >= 1`` from the adaptive update, where
    Gibbs and Candès take the whole line: a finite P90 takes the largest residual seen), the smallest when
    ``level <= 0``. Raises ``InputError`` for an empty input.
    """
    if np.size(residuals) == 0:
        raise InputError("conformal_quantile: no residuals")
    return conformal_upper(residuals, level)


def aci_alpha(residuals: np.ndarray, day: np.ndarray, alpha: float, gamma: float, bands: np.ndarray | None = None,
              n_bands: int = 1, min_band: int = HOURS_PER_DAY) -> float:
    """Miss rate after adaptive conformal inference replayed over the backtest days, oldest first.

    Adaptive conformal inference (Gibbs and Candès, "Adaptive Conformal Inference Under Distribution Shift",
    NeurIPS 2021, eq. 2): ``alpha_{t+1} = alpha_t + gamma (alpha - err_t)``, ``err_t = 1`` when the actual
    was above the upper quantile issued for it. Replay: from ``alpha``, each day ``e`` but the oldest gets the
    P90 it would have been issued, the quantile at level ``1 - alpha_e`` (:func:`conformal_quantile`) of the
    residuals of the days before it (per band when ``n_bands > 1``, a band with fewer than ``min_band``
    residuals pooled), fixed for the day like a day-ahead P90; each of its hours then updates ``alpha``. So a
    run of recent misses widens the next P90, a run of easy days narrows it, and with ``gamma = 0`` the level
    stays ``1 - alpha``.

    Args:
        residuals: score per backtest hour (ratio actual / P50 or difference), shape ``(n,)``.
        day: the day of each residual, larger = older (0 = the most recent), shape ``(n,)``.
        alpha: target miss rate (0.1 for a P90).
        gamma: step size (Gibbs and Candès use 0.005).
        bands: band of each residual (None: one band), as in the P90 itself.
        n_bands: number of bands.
        min_band: fewer residuals in a band: the pooled quantile.

    Returns:
        The miss rate to take the next quantile at (may leave [0, 1]; :func:`conformal_quantile` clips the rank).
    """
    return _aci_replay(residuals, day, alpha, gamma, bands, n_bands, min_band)[0]


def _aci_replay(residuals: np.ndarray, day: np.ndarray, alpha: float, gamma: float, bands: np.ndarray | None,
                n_bands: int, min_band: int) -> tuple[float, np.ndarray, np.ndarray]:
    """:func:`aci_alpha`'s replay: ``(alpha, hours covered per band, hours replayed per band)``."""
    r = np.asarray(residuals, dtype=float)
    d = np.asarray(day)
    b = np.zeros(r.size, dtype=np.int64) if bands is None else np.asarray(bands)
    a = float(alpha)
    hit, cnt = np.zeros(n_bands), np.zeros(n_bands)
    for e in sorted(set(d.tolist()), reverse=True)[1:]:
        older, cur = d > e, d == e
        pooled = conformal_quantile(r[older], 1 - a)
        q = np.array([conformal_quantile(r[older & (b == k)], 1 - a) if (older & (b == k)).sum() >= min_band
                      else pooled for k in range(n_bands)])
        inside = r[cur] <= q[b[cur]]
        np.add.at(hit, b[cur], inside.astype(float))
        np.add.at(cnt, b[cur], 1.0)
        a += gamma * (alpha * int(cur.sum()) - int((~inside).sum()))
    return a, hit, cnt


def lead_bands(lead_h: np.ndarray, band_h: int, n_bands: int) -> np.ndarray:
    """Lead band ``min(lead_h // band_h, n_bands - 1)`` of hours ``lead_h`` (>= 0) after an origin; int ``(n,)``."""
    return np.minimum(np.asarray(lead_h, dtype=np.int64) // band_h, n_bands - 1)


def hour_bands(idx: pd.DatetimeIndex, timezone: str, n_bands: int) -> np.ndarray:
    """Local hour-of-day band (0..n_bands-1) of each UTC stamp; shape ``(len(idx),)``."""
    return (idx.tz_convert(timezone).hour.to_numpy() * n_bands) // HOURS_PER_DAY


def calibrate_p90(actual: np.ndarray, p50: np.ndarray, day: np.ndarray, band: np.ndarray, hourly_actual: np.ndarray,
                  hourly_pred: np.ndarray, *, quantile: float, gamma: float, widen_only: bool, n_bands: int,
                  min_band: int) -> P90:
    """The P90 from the backtest: split-conformal quantiles per band at the ACI level.

    Args:
        actual: the scored hours' actuals, shape ``(n,)``.
        p50: the P50 issued for them, shape ``(n,)``.
        day: inner origin of each hour (0 = the most recent), shape ``(n,)``.
        band: its band (:func:`lead_bands`: hours after its inner origin), shape ``(n,)``.
        hourly_actual: the hourly mode's out-of-day actuals, shape ``(m,)``.
        hourly_pred: its out-of-day predictions of them, shape ``(m,)``.
        quantile: the upper quantile (0.9).
        gamma: the ACI step (0 = plain split conformal).
        widen_only: the level may only widen (miss rate at most ``1 - quantile``).
        n_bands: number of hour bands.
        min_band: the fewest residuals a band needs for its own quantile (else the pooled one).

    Raises:
        forecasters.errors.InputError: no residuals (``n = 0``).
    """
    kind = "ratio" if (p50 > 0).all() and (hourly_pred > 0).all() else "additive"
    resid = actual / p50 if kind == "ratio" else actual - p50
    alpha0 = 1.0 - quantile
    alpha, hit, cnt = _aci_replay(resid, day, alpha0, gamma, band, n_bands, min_band)
    if widen_only:
        alpha = min(alpha, alpha0)
    pooled = conformal_quantile(resid, 1.0 - alpha)
    q_bands = np.array([conformal_quantile(resid[band == b], 1.0 - alpha)
                        if (band == b).sum() >= min_band else pooled for b in range(n_bands)])
    h_resid = hourly_actual / hourly_pred if kind == "ratio" else hourly_actual - hourly_pred
    hq = conformal_quantile(h_resid, 1.0 - alpha) if h_resid.size else (1.0 if kind == "ratio" else 0.0)
    cov = tuple(float(h / c) if c > 0 else float("nan") for h, c in zip(hit, cnt))
    return P90(kind=kind, alpha=float(alpha), bands=q_bands, hourly_q90=hq, band_coverage=cov)
