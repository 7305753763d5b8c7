"""The real-time combination's settings and fitted state: :class:`CombineSettings`, :class:`OriginFit`, :class:`Combined`.

Fitted by :func:`forecasters.realtime.combine.fit_combined`; the rules are in DESIGN §4.4. Values in the
series' units per hour; times UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecasters.realtime.candidates import CANDIDATES, HOURS_PER_DAY, HOURS_PER_WEEK, Path
from forecasters.realtime.hourly import HOURLY_FEATURES
from forecasters.realtime.profile import Profile, ProfileSettings
from forecasters.realtime.readable import AnchorRule

#: Rule name recorded with every combination (DESIGN §4.4).
RULE = ("inverse-MAE weights over the last 7 daily origins; split-conformal P90 with an adaptive (ACI) level; "
        "hourly: inverse-MAE combination of LAD change models, leave-one-day-out, or persistence")


@dataclass(frozen=True)
class CombineSettings:
    """Settings of :func:`forecasters.realtime.combine.fit_combined` (DESIGN §4.4; defaults stated here).

    Attributes:
        candidates: names from :data:`forecasters.realtime.candidates.CANDIDATES` to combine.
        n_origins: previous daily origins scored (7).
        horizon_h: hours scored ahead of each inner origin (24, day-ahead).
        min_history_h: history an inner origin needs (48 h, the profile's minimum).
        mean_days: days in the same-hour mean (7).
        ets_window_h: hours the ETS level is fitted on (336).
        mstl_window_h: hours MSTL decomposes (672).
        p90_quantile: the upper quantile (0.9).
        hour_bands: lead bands of the P90 (4: hours 0-5, 6-11, 12-17, 18-23 after the origin; further hours take
            the last band).
        lead_band_h: hours per lead band (6).
        min_band_residuals: fewer residuals in a band: the pooled quantile (24).
        aci_gamma: step of the adaptive conformal update of the P90's miss rate (0.005, Gibbs and Candès 2021;
            0 = plain split conformal).
        aci_widen_only: the update may only widen the P90 (its miss rate never above ``1 - p90_quantile``).
        hourly_models: names from :data:`forecasters.realtime.hourly.HOURLY_MODELS` the hourly mode
            combines (persistence always; ``full``, with the last change, was measured no better and is not
            in the default).
        hourly_se_rule: standard errors the hourly combination must beat persistence by (1.0).
        hourly_guard_level: one-sided level at which the hourly mode must beat persistence from the last observed
            hour (:func:`forecasters.realtime.hourly.guard_test`; 0.05).
        hourly_guard_margin: share of persistence's per-day MAE the hourly mode must gain in that test (0.0).
        hourly_live_prior_h: hours of the inner days' measured one-hour MAEs (the kept model's and observed
            persistence's) the running guard's sums start from (24, :data:`forecasters.realtime.combine.LIVE_PRIOR_H`;
            chosen in issue 31's sixth session from 0, 24, 36, 48 h and the whole inner days).
        day_ahead_guard: the guard of the day-ahead combination against naive 24 h on the inner days
            (leave-one-day-out combination, :func:`forecasters.realtime.combine.fit_combined`).
        day_ahead_guard_rule: ``"naive_wins"`` (naive 24 h alone when it beats the combination significantly) or
            ``"must_beat"`` (naive 24 h alone unless the combination beats it significantly).
        day_ahead_guard_level: the one-sided level of that test.
        day_ahead_guard_on: ``"combination"`` (the test on the day-ahead combination ``C``, before the hourly mode)
            or ``"issued"`` (on the P50 as issued, anchored on the last hour; a fallback is naive 24 h from the
            second hour on, the hourly mode for the first).
        anchor_decay_max: the largest decay ``rho`` per hour of the hourly anchor's correction to the day-ahead
            P50 (the measured lag-1 autocorrelation is clipped to it; 0.99).
        anchor_decay: ``"lag1"`` (``rho`` the lag-1 autocorrelation of the combination's relative errors) or
            ``"backtest"`` (``rho`` of a grid whose anchored P50 as issued erred least on the inner days).
        drop_wild_candidates: leave out a candidate whose next ``guard_horizon_h`` hours at the origin leave the
            range guard's bounds (its backtest never saw that), unless every candidate does.
        range_multiple: the range guard's ``m`` (2.0).
        guard_horizon_h: hours checked by the range guard at fit time (168).
        profile: :class:`forecasters.realtime.ProfileSettings` of the profile candidate.
    """

    candidates: tuple[str, ...] = tuple(CANDIDATES)
    n_origins: int = 7
    horizon_h: int = HOURS_PER_DAY
    min_history_h: int = 2 * HOURS_PER_DAY
    mean_days: int = 7
    ets_window_h: int = 2 * HOURS_PER_WEEK
    mstl_window_h: int = 4 * HOURS_PER_WEEK
    p90_quantile: float = 0.9
    hour_bands: int = 4
    lead_band_h: int = 6
    min_band_residuals: int = HOURS_PER_DAY
    aci_gamma: float = 0.005
    aci_widen_only: bool = True
    hourly_models: tuple[str, ...] = ("persistence", "blend", "seasonal", "blend_seasonal")
    hourly_se_rule: float = 1.0
    hourly_guard_level: float = 0.05
    hourly_guard_margin: float = 0.0
    hourly_live_prior_h: float = 24.0
    day_ahead_guard: bool = True
    day_ahead_guard_rule: str = "naive_wins"
    day_ahead_guard_level: float = 0.05
    day_ahead_guard_on: str = "combination"
    anchor_decay_max: float = 0.99
    anchor_decay: str = "lag1"
    drop_wild_candidates: bool = True
    range_multiple: float = 2.0
    guard_horizon_h: int = HOURS_PER_WEEK
    profile: ProfileSettings = field(default_factory=ProfileSettings)


@dataclass(frozen=True)
class OriginFit:
    """The candidates fitted at one origin (history before ``origin``).

    Attributes:
        origin: UTC hour of the first forecast hour.
        profile: recalibrated profile (the ``profile`` candidate).
        shape: the same profile without level correction (the hourly mode's ``S``).
        paths: candidate name -> its path (:data:`forecasters.realtime.candidates.CANDIDATES`), for the
            candidates that succeeded; always ``profile``.
        failed: candidate name -> reason, for those that raised.
        shift_since: start of the level shift the profile detected (None = none).
    """

    origin: pd.Timestamp
    profile: Profile
    shape: Profile
    paths: dict[str, Path]
    failed: dict[str, str]
    shift_since: pd.Timestamp | None

    def predict(self, name: str, h: np.ndarray) -> np.ndarray:
        """Candidate ``name`` at hour offsets ``h`` (int array, >= 0) from the origin; shape ``(len(h),)``.

        Raises ``KeyError`` for a candidate that failed or was not fitted.
        """
        return self.paths[name].at(h)


@dataclass(frozen=True)
class Combined:
    """A fitted combination (DESIGN §4.4). Values in the series' units per hour; times UTC.

    Attributes:
        method: human-readable description (rule and weights).
        status: ``"ok"``, ``"level_shift"`` or ``"degraded"`` (the profile's, degraded further by the
            range guard or a too-short history).
        messages: the profile's messages and the combination's notes.
        components: the profile's components plus ``"combination"``.
        timezone: IANA zone of the seasonal clock.
        origin: UTC hour of the first forecast hour (the hour after the history).
        fit: the candidates at ``origin`` (:class:`OriginFit`).
        weights: candidate -> weight (sum 1).
        scores: candidate -> backtest MAE (series units per hour) on ``n_scored_h`` hours.
        n_scored_h: backtest hours scored; ``n_inner_origins``: origins they come from.
        p90_kind: ``"ratio"`` or ``"additive"``; ``p90_bands``: quantile per hour band (shape ``(bands,)``).
        p90_alpha: the miss rate the P90 quantiles are taken at (``1 - p90_alpha``), after the adaptive update
            (``1 - p90_quantile`` without it).
        hourly_model: ``"combination"`` (of :data:`forecasters.realtime.hourly.HOURLY_MODELS`), ``"persistence"`` or ``"none"`` (no
            backtest); ``hourly_coef``: its coefficients on :data:`HOURLY_FEATURES`, shape ``(3,)`` (all 0 for
            persistence); ``hourly_weights``: model -> weight in the combination; ``rho``: the decay per hour
            of its correction to the day-ahead P50.
        hourly_q90: P90 quantile of the one-hour-ahead mode (same kind as ``p90_kind``).
        hourly_scores: leave-one-day-out backtest MAE of ``hourly`` (the mode used), ``persistence``,
            ``combination`` (before the one-standard-error rule), each model, and ``day_ahead`` (the
            combination of candidates alone).
        read_flagged: whether hours ingest flagged anchor the hourly mode (when the rule accepts them as
            unflagged): on this history, persisting a flagged hour erred less than persisting the hour before it.
        anchor_ts / anchor_value: the last usable actual hour and its value (None without one).
        anchor_change: ``y_a - y_{a-1}`` at the anchor when the hour before it anchors too, else 0.
        bounds: the range guard's ``(low, high)``.
        anchor_rule: the :class:`AnchorRule` of flagged hours (None = nothing to judge by: never read).
        last_ts / last_value / last_z: the last observed history hour (flagged or not), its value and its
            adjusted value (by the same-hour reference, :func:`forecasters.realtime.readable.same_hour_mean`).
        anchor_z: the anchor's adjusted value.
        hour_ref: same-hour reference of the 24 hours after the origin (mean of the clean values 1..7
            days before each), shape ``(24,)``; NaN where none.
        ref_hist: the same reference of the last 168 history hours (the anchors' ``r(a)``), shape ``(168,)``
            (NaN-padded at the front for a shorter history).
        settings: the :class:`CombineSettings` used.
        calibration: the P90's calibration residuals: ``ts`` (UTC hours), ``actual``, ``p50`` (as issued at
            each inner origin) and ``day`` (inner origin, 0 = the most recent).
        hourly_anchor: ``"observed"`` (the guard fell back to persistence from the last observed hour,
            ``obs_ts``) or ``"readable"`` (the hourly model from the readable anchor,
            :mod:`forecasters.realtime.readable`).
        hourly_guard: the hourly guard's one-sided test against observed persistence
            (:func:`forecasters.realtime.hourly.guard_test`).
        day_ahead_guard: the day-ahead guard against naive 24 h (``combination_mae``, ``naive24_mae`` of the
            leave-one-day-out combination on the inner days, ``fallback`` 1.0 when naive 24 h replaced it).
        obs_ts / obs_value: the last observed hour (flagged or not, never imputed) and its value, moved by
            :func:`forecasters.realtime.combine.reanchor`: with ``hourly_anchor = "observed"`` the P50 of the
            hour after it is that value (persistence), the hours further on the readable anchor's decayed P50.
        p90_band_coverage: per lead band (``p90_bands``), the share of the inner days' hours at or below the P90
            each would have been issued (replayed oldest first, each day's quantiles from the days before it).
        hourly_live: the running guard's record since the fit (:func:`forecasters.realtime.combine.reanchor`):
            ``(model_sae, persistence_sae, hours)``, the sums of absolute one-hour errors of the hourly model and of
            persistence on the consecutive observed hours re-anchored on (``hours`` of them), both starting from one
            day at the inner days' out-of-day MAE; while ``hours > 0`` and ``model_sae > persistence_sae`` the
            one-hour forecast is persistence (:attr:`live_persistence`).
    """

    method: str
    status: str
    messages: tuple[str, ...]
    components: tuple[str, ...]
    timezone: str
    origin: pd.Timestamp
    fit: OriginFit
    weights: dict[str, float]
    scores: dict[str, float]
    n_scored_h: int
    n_inner_origins: int
    p90_kind: str
    p90_bands: np.ndarray
    p90_alpha: float
    hourly_model: str
    hourly_coef: np.ndarray
    hourly_weights: dict[str, float]
    rho: float
    hourly_q90: float
    hourly_scores: dict[str, float]
    read_flagged: bool
    anchor_ts: pd.Timestamp | None
    anchor_value: float | None
    anchor_change: float
    bounds: tuple[float, float]
    anchor_rule: AnchorRule | None
    last_ts: pd.Timestamp | None
    last_value: float | None
    last_z: float
    anchor_z: float
    hour_ref: np.ndarray
    ref_hist: np.ndarray
    settings: CombineSettings
    calibration: dict[str, np.ndarray] = field(default_factory=dict)
    hourly_anchor: str = "readable"
    hourly_guard: dict[str, float] = field(default_factory=dict)
    day_ahead_guard: dict[str, float] = field(default_factory=dict)
    p90_band_coverage: tuple[float, ...] = ()
    obs_ts: pd.Timestamp | None = None
    obs_value: float | None = None
    hourly_live: tuple[float, float, int] = (0.0, 0.0, 0)

    @property
    def live_persistence(self) -> bool:
        """The running guard: a model of the change that erred more than persistence since the fit is not used."""
        return self.hourly_model == "combination" and self.hourly_live[2] > 0 and \
            self.hourly_live[0] > self.hourly_live[1]

    @property
    def profile(self) -> Profile:
        """The recalibrated weekly profile at the origin (the ``profile`` candidate)."""
        return self.fit.profile

    @property
    def level_factor(self) -> float:
        """The profile candidate's level correction (1.0 = none)."""
        return float(self.fit.profile.level_factor)

    def selection(self) -> dict[str, Any]:
        """JSON-ready record of the choice: rule, candidates' backtest MAE and weights, hourly mode, P90."""
        return {
            "rule": RULE,
            "n_inner_origins": int(self.n_inner_origins),
            "n_scored_h": int(self.n_scored_h),
            "candidates": {c: {"mae": float(self.scores[c]), "weight": float(self.weights.get(c, 0.0))}
                           for c in self.scores},
            "failed": dict(self.fit.failed),
            "p90": {"kind": self.p90_kind, "bands": [float(q) for q in self.p90_bands],
                    "alpha": float(self.p90_alpha), "lead_band_h": int(self.settings.lead_band_h),
                    "band_coverage": [float(c) for c in self.p90_band_coverage]},
            "day_ahead_guard": {k: float(v) for k, v in self.day_ahead_guard.items()},
            "hourly": {"kind": self.hourly_model, "rho": float(self.rho), "q90": float(self.hourly_q90),
                       "coef": {f: float(b) for f, b in zip(HOURLY_FEATURES, self.hourly_coef)},
                       "weights": {m: float(v) for m, v in self.hourly_weights.items()},
                       "read_flagged": bool(self.read_flagged), "anchor": self.hourly_anchor,
                       "guard": {k: float(v) for k, v in self.hourly_guard.items()},
                       **{f"mae_{k}": float(v) for k, v in self.hourly_scores.items()}},
            "bounds": [float(b) for b in self.bounds],
        }

