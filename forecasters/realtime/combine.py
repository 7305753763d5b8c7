"""Real-time demand chosen by backtest: the driver of the combination (DESIGN §4.4 states every rule).

Pure (no file IO). :func:`fit_combined` reads the history (:mod:`~forecasters.realtime.readable`: which
hours are read as they are), fits the candidates (:mod:`~forecasters.realtime.candidates`) at the origin and
at the previous daily origins, weights them by inverse backtest MAE, chooses the hourly mode
(:mod:`~forecasters.realtime.hourly`) and calibrates the P90 (:mod:`~forecasters.realtime.calibrate`);
:func:`forecast_combined` forecasts from the fit (range guard applied) and :func:`reanchor` moves the hourly
anchor to newer actuals. Settings and fitted state: :mod:`~forecasters.realtime.model`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.realtime.calibrate import calibrate_p90, lead_bands
from forecasters.realtime.candidates import HOURS_PER_DAY, HOURS_PER_WEEK
from forecasters.realtime.hourly import (
    HOURLY_FEATURES,
    HourlyChoice,
    anchored,
    choose_hourly,
    correction_decay,
    guard_test,
    hourly_features,
)
from forecasters.realtime.model import RULE, Combined, CombineSettings, OriginFit
from forecasters.realtime.origins import fit_origin
from forecasters.realtime.profile import check_hourly_series, forecast
from forecasters.realtime.readable import (
    adjusted,
    anchor_rule,
    flags_are_steps,
    last_change,
    last_usable_before,
    readable_hours,
    same_hour_mean,
    usable,
    value_bounds,
)

# ------------------------------------------------------------------------------------------ fit steps


@dataclass(frozen=True)
class _Read:
    """The history as the combination reads it: values and masks, shape ``(n,)`` each; ``ref`` ``(n + 24,)``."""

    y: np.ndarray
    obs: np.ndarray  # observed (not in ``exclude``)
    fit_use: np.ndarray  # observed and not flagged: the profile's hours
    use: np.ndarray  # readable hours (candidates, scoring, level correction)
    anchorable: np.ndarray  # hours that may anchor the hourly mode
    read_flagged: bool
    ref: np.ndarray  # same-hour reference, 24 hours past the end
    z: np.ndarray  # values adjusted by ``ref``


@dataclass(frozen=True)
class _Day:
    """One scored inner origin: position ``o``, scored target positions ``t``, candidates there ``(k, len(t))``."""

    o: int
    t: np.ndarray
    mat: np.ndarray


def _read_history(y: np.ndarray, idx: pd.DatetimeIndex, exclude, outliers, s: CombineSettings) -> _Read:
    """Masks, same-hour reference and readable hours of the history (DESIGN §4.4, "readable hours")."""
    n = len(y)
    obs = usable(idx, exclude)
    flagged = ~usable(idx, outliers) & obs
    fit_use = obs & ~flagged
    window = s.n_origins * HOURS_PER_DAY
    ref = same_hour_mean(np.concatenate([y, np.full(HOURS_PER_DAY, np.nan)]),
                         np.concatenate([fit_use, np.zeros(HOURS_PER_DAY, dtype=bool)]), s.mean_days)
    z = adjusted(y, ref[:n])
    use = readable_hours(y, obs, flagged, z, window, s.range_multiple)
    read_flagged = flags_are_steps(y, obs, flagged, use)
    anchorable = (readable_hours(y, obs, np.zeros(n, dtype=bool), z, window, s.range_multiple) if read_flagged
                  else use)
    return _Read(y=y, obs=obs, fit_use=fit_use, use=use, anchorable=anchorable, read_flagged=read_flagged,
                 ref=ref, z=z)


def _anchor_state(idx: pd.DatetimeIndex, r: _Read, s: CombineSettings) -> dict[str, Any]:
    """The :class:`Combined` fields of the anchor, the last observed hour, the references and the rule."""
    y, z, ref, n = r.y, r.z, r.ref, len(r.y)
    bounds = value_bounds(y, r.use, s.range_multiple)
    rule = anchor_rule(z, r.use, n - s.n_origins * HOURS_PER_DAY, n, bounds)
    last_obs = int(np.flatnonzero(r.obs)[-1]) if r.obs.any() else None
    ref_hist = np.concatenate([np.full(max(HOURS_PER_WEEK - n, 0), np.nan), ref[max(n - HOURS_PER_WEEK, 0):n]])
    anchor = int(np.flatnonzero(r.anchorable)[-1]) if r.anchorable.any() else None
    return {"anchor_rule": rule, "bounds": bounds, "last_ts": None if last_obs is None else idx[last_obs],
            "last_value": None if last_obs is None else float(y[last_obs]),
            "last_z": float("nan") if last_obs is None else float(z[last_obs]), "hour_ref": ref[n:],
            "ref_hist": ref_hist, "read_flagged": r.read_flagged,
            "anchor_ts": None if anchor is None else idx[anchor],
            "anchor_value": None if anchor is None else float(y[anchor]),
            "anchor_z": float("nan") if anchor is None else float(z[anchor]),
            "anchor_change": last_change(y, r.anchorable, anchor)}


def _inner_fits(series: pd.Series, r: _Read, timezone: str, s: CombineSettings,
                memo: dict) -> list[tuple[int, OriginFit]]:
    """The candidates at the ``n_origins`` previous daily origins that have enough history, newest first."""
    n = len(series)
    inner: list[tuple[int, OriginFit]] = []
    for j in range(1, s.n_origins + 1):
        o = n - HOURS_PER_DAY * j
        if o < s.min_history_h or int(r.fit_use[:o].sum()) < s.profile.min_points:
            break
        inner.append((o, fit_origin(series, r.fit_use, r.use, o, timezone, s, memo)))
    return inner


def _scored_days(series: pd.Series, use: np.ndarray, final: OriginFit, inner: list[tuple[int, OriginFit]],
                 names: list[str], horizon_h: int) -> list[_Day]:
    """Each inner origin's scored hours (empty days dropped).

    Readable, inside the history, and (with a level shift the final profile follows) after the change only
    when that origin's profile knew it.
    """
    n = len(series)
    days = []
    for o, f in inner:
        t = np.arange(o, min(o + horizon_h, n))
        ok = use[t]
        if final.shift_since is not None and f.shift_since is None:
            ok &= series.index[t] < final.shift_since
        t = t[ok]
        if t.size == 0:
            continue
        days.append(_Day(o=o, t=t, mat=np.vstack([f.predict(c, t - o) for c in names])))
    return days


def _inverse_mae(cand: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Backtest MAE per candidate and the inverse-MAE weights; shapes ``(k,)``.

    Rows of ``cand`` ``(k, m)`` against ``act`` ``(m,)``; weights ``(1 / MAE_c) / sum_d (1 / MAE_d)`` (a
    candidate with MAE 0 takes all the weight, shared with any other at 0).
    """
    maes = np.mean(np.abs(cand - act[None, :]), axis=1)
    w = (maes == 0).astype(float) if (maes == 0).any() else 1.0 / maes
    return maes, w / w.sum()


def _day_ahead_guard(days: list[_Day], names: list[str], act: np.ndarray, w: np.ndarray,
                     maes: np.ndarray, level: float, rule: str = "naive_wins") -> tuple[np.ndarray, dict[str, float]]:
    """The day-ahead guard against naive 24 h: the weights to use and the record of the test.

    Each inner day is forecast by the combination weighted on the *other* days (leave-one-day-out: the weights
    on all days are in-sample for each of them), and its per-day MAE is compared with naive 24 h's by the
    one-sided test :func:`forecasters.realtime.hourly.guard_test` at ``level``. Rule ``"naive_wins"``: naive
    24 h alone (weight 1) when it beats that combination significantly. Rule ``"must_beat"`` (the hourly
    guard's rule): naive 24 h alone unless the combination beats it significantly. Without a ``naive24``
    candidate or with fewer than 2 days, the weights unchanged.
    """
    if rule not in ("naive_wins", "must_beat"):
        raise InputError(f"day_ahead_guard_rule must be 'naive_wins' or 'must_beat'; got {rule!r}")
    if "naive24" not in names or len(days) < 2:
        return w, {}
    j = names.index("naive24")
    sizes = np.array([d.t.size for d in days])
    ends = np.cumsum(sizes)
    mat = np.hstack([d.mat for d in days])
    err = np.zeros(len(days))
    for i, d in enumerate(days):
        other = np.ones(mat.shape[1], dtype=bool)
        other[ends[i] - sizes[i]:ends[i]] = False
        _, wi = _inverse_mae(mat[:, other], act[other])
        err[i] = np.abs(wi @ d.mat - act[ends[i] - sizes[i]:ends[i]]).sum()
    naive_day = np.array([np.abs(d.mat[j] - act[ends[i] - sizes[i]:ends[i]]).mean() for i, d in enumerate(days)])
    comb_mae, naive_mae = float(err.sum() / act.size), float(maes[j])
    if rule == "naive_wins":
        test = guard_test(err / sizes, naive_day, level)  # naive 24 h's gain over the combination
        fallback = bool(test["wins"])
    else:
        test = guard_test(naive_day, err / sizes, level)  # the combination's gain over naive 24 h
        fallback = not test["wins"]
    rec = {"combination_mae": comb_mae, "naive24_mae": naive_mae, "t": test["t"], "t_crit": test["t_crit"],
           "fallback": float(fallback)}
    if not fallback:
        return w, rec
    return np.eye(len(names))[j], rec


def _issued_guard(days: list[_Day], names: list[str], act: np.ndarray, r: _Read, coef: np.ndarray, rho: float,
                  observed: np.ndarray, level: float, rule: str) -> dict[str, float]:
    """The day-ahead guard on the P50 *as issued*: the record of the test (``fallback`` 1.0: naive 24 h alone).

    The P50 as issued is :func:`_issued_p50` (the combination anchored on the last hour before each inner
    origin), each inner day weighted on the other days (leave-one-day-out), tested against naive 24 h on the
    same hours by :func:`forecasters.realtime.hourly.guard_test` at ``level`` (``rule`` as in
    :func:`_day_ahead_guard`); ``{}`` without a ``naive24`` candidate or with fewer than 2 days.
    """
    if "naive24" not in names or len(days) < 2:
        return {}
    j = names.index("naive24")
    sizes = np.array([d.t.size for d in days])
    ends = np.cumsum(sizes)
    mat = np.hstack([d.mat for d in days])
    issued_day, naive_day = np.zeros(len(days)), np.zeros(len(days))
    for i, d in enumerate(days):
        other = np.ones(mat.shape[1], dtype=bool)
        other[ends[i] - sizes[i]:ends[i]] = False
        _, wi = _inverse_mae(mat[:, other], act[other])
        a = act[ends[i] - sizes[i]:ends[i]]
        issued_day[i] = np.abs(_issued_p50([d], wi, r, coef, rho, observed) - a).mean()
        naive_day[i] = np.abs(d.mat[j] - a).mean()
    if rule == "naive_wins":
        test = guard_test(issued_day, naive_day, level)
        fallback = bool(test["wins"])
    else:
        test = guard_test(naive_day, issued_day, level)
        fallback = not test["wins"]
    return {"combination_mae": float((issued_day * sizes).sum() / sizes.sum()),
            "naive24_mae": float((naive_day * sizes).sum() / sizes.sum()), "t": test["t"], "t_crit": test["t_crit"],
            "fallback": float(fallback)}


#: The decays :func:`_decay_by_backtest` chooses from (0: the anchor moves only the first hour).
DECAY_GRID = (0.0, 0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99)


def _decay_by_backtest(days: list[_Day], w: np.ndarray, r: _Read, coef: np.ndarray, observed: np.ndarray,
                       act: np.ndarray, rho_max: float) -> float:
    """The anchor's decay ``rho``: the one of :data:`DECAY_GRID` whose P50 as issued erred least on the inner days.

    At most ``rho_max``; the P50 as issued is :func:`_issued_p50`; on a tie the smallest ``rho``.
    """
    grid = [g for g in DECAY_GRID if g <= rho_max] or [0.0]
    maes = [float(np.abs(_issued_p50(days, w, r, coef, g, observed) - act).mean()) for g in grid]
    return float(grid[int(np.argmin(maes))])


def _issued_p50(days: list[_Day], w: np.ndarray, r: _Read, coef: np.ndarray, rho: float,
                observed: np.ndarray | None) -> np.ndarray:
    """The P50 as issued at each inner origin, concatenated over the days; shape ``(m,)``.

    The combination with the hourly model at the last anchorable hour before the origin, its correction
    decaying with ``rho``; with ``observed`` (the hourly guard fell back to persistence) the hour right after
    the last observed hour is that hour's value.
    """
    anchorable = r.anchorable
    before = last_usable_before(anchorable)
    before_obs = None if observed is None else last_usable_before(observed)
    issued = []
    for d in days:
        a0 = int(before[d.o])
        c = w @ d.mat
        if a0 < 0:
            issued.append(c)
            continue
        k = (d.t - a0).astype(float)
        p = anchored(c, k, float(r.y[a0]), last_change(r.y, anchorable, a0), r.ref[d.t], float(r.ref[a0]), coef, rho)
        if before_obs is not None and before_obs[d.o] >= 0:  # the hour after the last observed: the hourly mode
            o0 = int(before_obs[d.o])
            h1 = anchored(c, np.ones(c.size), float(r.y[o0]), 0.0, r.ref[d.t], float(r.ref[o0]), coef, rho)
            p = np.where(d.t - o0 == 1, h1, p)
        issued.append(p)
    return np.concatenate(issued)


def _method(names: list[str], weights: dict[str, float], kind: str, alpha: float, hourly: HourlyChoice,
            profile_method: str) -> str:
    """The human-readable description of a fitted combination (rule and weights)."""
    if hourly.kind == "persistence":
        hdesc = "persistence" + (" from the last observed hour (guard)" if hourly.anchor == "observed" else "")
    else:
        hdesc = ("combination (" + ", ".join(f"{m} {v:.2f}" for m, v in hourly.weights.items()) + "): y_a + "
                 + " + ".join(f"{b:.3f} x {f}" for f, b in zip(HOURLY_FEATURES, hourly.coef)))
    return (f"combination of {', '.join(names)} by {RULE.split(';')[0]} "
            f"({', '.join(f'{c} {weights[c]:.2f}' for c in names)}); P90 split-conformal ({kind}, level "
            f"{1 - alpha:.3f} after ACI); hourly: {hdesc}; profile: {profile_method}")


# ------------------------------------------------------------------------------------------ fit


def fit_combined(series: pd.Series, timezone: str = "UTC", exclude=None, outliers=None,
                 settings: CombineSettings | None = None, memo: dict | None = None) -> Combined:
    """Fit the combination at the hour after ``series`` (DESIGN §4.4 for every rule).

    Args:
        series: traffic per hour (>= 0, no NaN), tz-aware regular hourly index (from ingest).
        timezone: IANA zone of the service's local clock.
        exclude: UTC stamps never read as they are (ingest's ``imputed`` hours; flagged hours may be
            listed here too, then they are never read either).
        outliers: UTC stamps flagged as outliers (ingest's ``outliers``): kept out of the profile fit; the
            other candidates, the scoring and the hourly anchor read one only when its one-hour change is
            within the recent range (:mod:`forecasters.realtime.readable`), else it is re-imputed / skipped.
        settings: :class:`CombineSettings`.
        memo: optional dict reused across calls (e.g. the origins of a backtest): the candidates at an
            origin are cached by the exact history content, so a repeated origin is not refitted.

    Returns:
        :class:`Combined`.

    Raises:
        forecasters.errors.InputError: bad index/values, unknown zone or candidate, or a history the
            profile refuses (fewer than 48 usable hours).
    """
    s = settings or CombineSettings()
    memo = {} if memo is None else memo  # the final profile is used twice (shape, candidate)
    series = check_hourly_series(series)
    r = _read_history(series.to_numpy(), series.index, exclude, outliers, s)
    last = _anchor_state(series.index, r, s)
    final = fit_origin(series, r.fit_use, r.use, len(series), timezone, s, memo)
    inner = _inner_fits(series, r, timezone, s, memo)
    names = [c for c in s.candidates if c in final.paths and all(c in f.paths for _, f in inner)]
    messages = list(final.profile.messages)
    for c, why in final.failed.items():
        messages.append(f"candidate {c} failed at the origin ({why}); left out")
    lo, hi = last["bounds"]
    wild = [c for c in names if c != "naive24" and (
        (v := final.predict(c, np.arange(s.guard_horizon_h))) > hi).any() | (v < lo).any()]
    if s.drop_wild_candidates and wild and len(wild) < len(names):  # its backtest never saw it leave the range: it is left out
        names = [c for c in names if c not in wild]
        messages.append(f"candidate(s) {', '.join(wild)} left out: their next {s.guard_horizon_h} h leave the range "
                        f"guard's [{lo:.4g}, {hi:.4g}]")
    days = _scored_days(series, r.use, final, inner, names, s.horizon_h)
    if not days:
        return _profile_only(timezone, final, s, messages, last)

    act = np.concatenate([r.y[d.t] for d in days])
    maes, w = _inverse_mae(np.hstack([d.mat for d in days]), act)
    if s.day_ahead_guard_on not in ("combination", "issued"):
        raise InputError(f"day_ahead_guard_on must be 'combination' or 'issued'; got {s.day_ahead_guard_on!r}")
    w, da_guard = (_day_ahead_guard(days, names, act, w, maes, s.day_ahead_guard_level, s.day_ahead_guard_rule)
                   if s.day_ahead_guard and s.day_ahead_guard_on == "combination" else (w, {}))
    if da_guard.get("fallback"):
        how = ("beat the combination" if s.day_ahead_guard_rule == "naive_wins" else
               "was not beaten significantly by the combination")
        cmp = ">" if s.day_ahead_guard_rule == "naive_wins" else "<="
        messages.append(f"day-ahead guard: naive 24 h (MAE {da_guard['naive24_mae']:.4g}) {how} "
                        f"(leave-one-day-out MAE {da_guard['combination_mae']:.4g}) on the last {len(days)} days "
                        f"(t = {da_guard['t']:.2f} {cmp} {da_guard['t_crit']:.2f}): naive 24 h alone")
    scores = {c: float(m) for c, m in zip(names, maes)}
    weights = {c: float(v) for c, v in zip(names, w)}
    tgt_idx = series.index[np.concatenate([d.t for d in days])]
    day_ahead = [w @ d.mat for d in days]
    rho = min(correction_decay([d.o for d in days], [d.t for d in days], day_ahead, r.y, s.horizon_h),
              s.anchor_decay_max)
    # the hourly mode forecasts the next hour from the last *observed* hour, flagged or not (persistence is its
    # baseline; keeping hours below the range guard's lower bound out lost 4.3 x persistence on openb
    # Burstable's zero runs, so an outage's zero is persisted for its next hour, and only that hour)
    obs_in = r.obs
    hourly = choose_hourly([d.t for d in days], day_ahead, r.y, obs_in, r.ref, s.hourly_models,
                           s.hourly_se_rule, guard_level=s.hourly_guard_level,
                           guard_margin=s.hourly_guard_margin)
    if s.anchor_decay not in ("lag1", "backtest"):
        raise InputError(f"anchor_decay must be 'lag1' or 'backtest'; got {s.anchor_decay!r}")
    if s.anchor_decay == "backtest":
        rho = _decay_by_backtest(days, w, r, hourly.coef, obs_in, act, s.anchor_decay_max)
    if s.day_ahead_guard and s.day_ahead_guard_on == "issued":
        da_guard = _issued_guard(days, names, act, r, hourly.coef, rho, obs_in, s.day_ahead_guard_level,
                                 s.day_ahead_guard_rule)
        if da_guard.get("fallback"):  # naive 24 h alone from the second hour on; the hourly mode for the first
            w, rho = np.eye(len(names))[names.index("naive24")], 0.0
            weights = {c: float(v) for c, v in zip(names, w)}
            day_ahead = [w @ d.mat for d in days]
            hourly = choose_hourly([d.t for d in days], day_ahead, r.y, obs_in, r.ref, s.hourly_models,
                                   s.hourly_se_rule, guard_level=s.hourly_guard_level,
                                   guard_margin=s.hourly_guard_margin)
            how = ("beat the forecast as issued" if s.day_ahead_guard_rule == "naive_wins" else
                   "was not beaten significantly by the forecast as issued")
            messages.append(f"day-ahead guard: naive 24 h (MAE {da_guard['naive24_mae']:.4g}) {how} "
                            f"(leave-one-day-out MAE {da_guard['combination_mae']:.4g}) on the last {len(days)} "
                            f"days (t = {da_guard['t']:.2f}, critical {da_guard['t_crit']:.2f}): naive 24 h alone")
    p50_bt = _issued_p50(days, w, r, hourly.coef, rho, obs_in)
    day_of = np.concatenate([np.full(d.t.size, i) for i, d in enumerate(days)])
    lead = lead_bands(np.concatenate([d.t - d.o for d in days]), s.lead_band_h, s.hour_bands)
    p90 = calibrate_p90(act, p50_bt, day_of, lead, hourly.actual,
                        hourly.pred, quantile=s.p90_quantile, gamma=s.aci_gamma, widen_only=s.aci_widen_only,
                        n_bands=s.hour_bands, min_band=s.min_band_residuals)
    comb = Combined(method=_method(names, weights, p90.kind, p90.alpha, hourly, final.profile.method),
                    status=final.profile.status, messages=tuple(messages),
                    components=tuple(final.profile.components) + ("combination",), timezone=timezone,
                    origin=final.origin, fit=final, weights=weights, scores=scores, n_scored_h=int(act.size),
                    n_inner_origins=len(days), p90_kind=p90.kind, p90_bands=p90.bands, p90_alpha=p90.alpha,
                    hourly_model=hourly.kind, hourly_coef=hourly.coef, hourly_weights=hourly.weights, rho=rho,
                    hourly_q90=p90.hourly_q90, hourly_scores=hourly.scores, settings=s,
                    calibration={"ts": tgt_idx, "actual": act, "p50": p50_bt, "day": day_of},
                    hourly_anchor=hourly.anchor, hourly_guard=dict(hourly.guard or {}), day_ahead_guard=da_guard,
                    obs_ts=series.index[int(np.flatnonzero(obs_in)[-1])] if obs_in.any() else None,
                    obs_value=float(r.y[np.flatnonzero(obs_in)[-1]]) if obs_in.any() else None,
                    p90_band_coverage=p90.band_coverage, hourly_live=_live_prior(hourly, s.hourly_live_prior_h), **last)
    return _guard_status(comb)


#: Hours of the inner days' measured lead the running guard starts from (one day: :func:`_live_prior`; the
#: default of :attr:`CombineSettings.hourly_live_prior_h`).
LIVE_PRIOR_H = HOURS_PER_DAY


def _live_prior(hourly: HourlyChoice, prior_h: float = LIVE_PRIOR_H) -> tuple[float, float, int]:
    """The running guard's start (:attr:`Combined.hourly_live`): ``prior_h`` hours of the model's measured lead.

    ``prior_h`` (:data:`LIVE_PRIOR_H` = 24 h by default) hours at the kept model's and observed persistence's
    out-of-day one-hour MAE on the inner days, and 0 hours since the fit (``(0, 0, 0)`` for persistence), so the
    hours after the fit must undo that much of the lead before the one-hour forecast falls back to persistence; a
    fit itself never falls back.
    """
    if hourly.kind != "combination" or hourly.actual.size == 0:
        return (0.0, 0.0, 0)
    return (float(hourly.scores["hourly"]) * prior_h, float(hourly.scores["persistence_observed"]) * prior_h, 0)


def _profile_only(timezone: str, final: OriginFit, s: CombineSettings, messages: list[str],
                  last: dict[str, Any]) -> Combined:
    """Too short for one scored inner origin: the recalibrated profile alone (its own P90)."""
    messages = messages + [f"history too short for the combination backtest (needs {s.min_history_h} h before "
                           f"an origin {s.horizon_h} h before the end): the weekly profile alone"]
    comb = Combined(method=final.profile.method + " (alone: no backtest)", status="degraded",
                    messages=tuple(messages), components=tuple(final.profile.components), timezone=timezone,
                    origin=final.origin, fit=final, weights={"profile": 1.0}, scores={}, n_scored_h=0,
                    n_inner_origins=0, p90_kind="profile", p90_bands=np.zeros(s.hour_bands),
                    p90_alpha=1.0 - s.p90_quantile, hourly_model="none", hourly_coef=np.zeros(len(HOURLY_FEATURES)),
                    hourly_weights={}, rho=0.0, hourly_q90=0.0, hourly_scores={}, settings=s, **last)
    return _guard_status(comb)


def _guard_status(comb: Combined) -> Combined:
    """Degrade the status when the first ``guard_horizon_h`` hours need the range guard."""
    fc = forecast_combined(comb, comb.settings.guard_horizon_h)
    n_clip = int(fc["clipped"].sum())
    if n_clip == 0:
        return comb
    lo, hi = comb.bounds
    raw = _raw(comb, pd.DatetimeIndex(fc["ts"]))[0]
    worst = [c for c in comb.weights
             if ((v := comb.fit.predict(c, np.arange(comb.settings.guard_horizon_h))) > hi).any() or (v < lo).any()]
    msg = (f"range guard: {n_clip} of the next {comb.settings.guard_horizon_h} hours were outside "
           f"[{lo:.4g}, {hi:.4g}] (history min / {comb.settings.range_multiple:g} .. max x "
           f"{comb.settings.range_multiple:g}; unclipped P50 {raw.min():.4g}..{raw.max():.4g}) and are clipped"
           + (f"; candidates beyond it: {', '.join(worst)}" if worst else ""))
    return dataclasses.replace(comb, status="degraded", messages=comb.messages + (msg,))


# ------------------------------------------------------------------------------------------ forecast


def _ref_at(comb: Combined, idx: pd.DatetimeIndex) -> np.ndarray:
    """The same-hour reference ``r`` at UTC hours ``idx``; shape ``(len(idx),)``.

    ``ref_hist`` before the origin (NaN further back), ``hour_ref`` for the next 24 h and, beyond, ``hour_ref``
    repeated daily (the 7-day same-hour mean).
    """
    h = np.round(((idx - comb.origin) / pd.Timedelta(hours=1)).to_numpy()).astype(np.int64)
    out = np.full(len(h), np.nan)
    fut = h >= 0
    out[fut] = comb.hour_ref[h[fut] % HOURS_PER_DAY]
    past = ~fut & (h >= -len(comb.ref_hist))
    out[past] = comb.ref_hist[len(comb.ref_hist) + h[past]]
    return out


def _raw(comb: Combined, idx: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    """Unclipped P50 and P90 at UTC stamps ``idx`` (at or after the origin)."""
    h = ((idx - comb.origin) / pd.Timedelta(hours=1)).to_numpy()
    if (h < 0).any():
        raise InputError(f"forecast start {idx[0].isoformat()} is before the forecast origin "
                         f"{comb.origin.isoformat()}")
    h = h.astype(np.int64)
    if comb.p90_kind == "profile":  # profile alone
        fc = forecast(comb.fit.profile, len(idx), start=idx[0])
        return fc["p50"].to_numpy(), fc["p90"].to_numpy()
    names = list(comb.weights)
    w = np.array([comb.weights[c] for c in names])
    p50 = w @ np.vstack([comb.fit.predict(c, h) for c in names])
    q = comb.p90_bands[lead_bands(h, comb.settings.lead_band_h, len(comb.p90_bands))]
    day = p50
    if comb.anchor_ts is not None:
        k = ((idx - comb.anchor_ts) / pd.Timedelta(hours=1)).to_numpy()
        ref_a = float(_ref_at(comb, pd.DatetimeIndex([comb.anchor_ts]))[0])
        p50 = anchored(p50, k, float(comb.anchor_value or 0.0), comb.anchor_change, _ref_at(comb, idx), ref_a,
                       comb.hourly_coef, comb.rho)
        q = np.where(k == 1, comb.hourly_q90, q)
    if comb.hourly_anchor == "observed" and comb.obs_ts is not None:  # the hourly mode: 1 h after the last observed
        # and, when the guard fell back to persistence, the first hour forecast after masked hours too: persistence
        # is then the last observed value exactly, as "same as last hour" reads it (a model of the change keeps
        # its own path there: carried over masked hours it lost to persistence on the shipped m-mid, 1.002 x);
        # the running guard (``live_persistence``) makes it persistence too
        first = ((idx - comb.obs_ts) / pd.Timedelta(hours=1)).to_numpy() == 1
        persist = comb.hourly_model == "persistence" or comb.live_persistence
        if persist:
            first = first | ((np.arange(len(idx)) == 0) & (idx > comb.obs_ts))
        ref_o = float(_ref_at(comb, pd.DatetimeIndex([comb.obs_ts]))[0])
        h1 = anchored(day, np.ones(len(idx)), float(comb.obs_value or 0.0), 0.0, _ref_at(comb, idx), ref_o,
                      np.zeros_like(comb.hourly_coef) if persist else comb.hourly_coef, comb.rho)
        p50 = np.where(first, h1, p50)
        q = np.where(first, comb.hourly_q90, q)
    p90 = p50 * q if comb.p90_kind == "ratio" else p50 + q
    return p50, np.maximum(p90, p50)


def _day_p50(comb: Combined, idx: pd.DatetimeIndex) -> np.ndarray:
    """The day-ahead combination ``C`` (no hourly anchor) at UTC hours ``idx`` at or after the origin."""
    h = np.round(((idx - comb.origin) / pd.Timedelta(hours=1)).to_numpy()).astype(np.int64)
    names = list(comb.weights)
    return np.array([comb.weights[c] for c in names]) @ np.vstack([comb.fit.predict(c, h) for c in names])


def _live_record(comb: Combined, actual: pd.Series) -> tuple[float, float, int]:
    """The running guard's sums (:attr:`Combined.hourly_live`) after the usable hours ``actual`` (sorted, UTC).

    Each hour ``t`` of ``actual`` after ``comb.obs_ts`` whose hour before, ``o = t - 1 h``, was observed (the
    previous hour of ``actual``, or ``obs_ts``) adds ``|y_t - H(t)|`` and ``|y_t - y_o|`` with ``H(t) = y_o +
    x(t) coef`` the hourly model's one-hour forecast from ``o`` (what :func:`forecast_combined` issues for
    ``t`` after re-anchoring on ``o``, range guard widened to ``y_o``). Only for ``hourly_model ==
    "combination"`` with a day-ahead combination; otherwise the record unchanged.
    """
    if comb.hourly_model != "combination" or comb.obs_ts is None or comb.p90_kind == "profile":
        return comb.hourly_live
    new = actual[actual.index > comb.obs_ts]
    if new.empty:
        return comb.hourly_live
    prev_ts = pd.DatetimeIndex([comb.obs_ts]).append(new.index[:-1])
    prev_v = np.concatenate([[float(comb.obs_value or 0.0)], new.to_numpy(dtype=float)[:-1]])
    one = ((new.index - prev_ts) / pd.Timedelta(hours=1)).to_numpy() == 1
    if not one.any():
        return comb.hourly_live
    t, yo, yt = new.index[one], prev_v[one], new.to_numpy(dtype=float)[one]
    x = hourly_features(_day_p50(comb, t), yo, _ref_at(comb, t), _ref_at(comb, prev_ts[one]), 0.0)
    lo, hi = comb.bounds
    pred = np.clip(yo + x @ comb.hourly_coef, np.minimum(lo, yo), np.maximum(hi, yo))
    sae_m, sae_p, n = comb.hourly_live
    return (float(sae_m + np.abs(yt - pred).sum()), float(sae_p + np.abs(yt - yo).sum()), int(n + one.sum()))


def forecast_combined(comb: Combined, horizon_h: int, start=None) -> pd.DataFrame:
    """Forecast P50/P90 per hour from a :class:`Combined`.

    Args:
        comb: from :func:`fit_combined` (optionally :func:`reanchor`-ed).
        horizon_h: number of hours (>= 1).
        start: first UTC hour, at or after ``comb.origin`` (default the origin).

    Returns:
        Frame with ``horizon_h`` rows: ``ts`` (UTC), ``p50``, ``p90`` (series units per hour, ``p90 >=
        p50 >= 0``) and ``clipped`` (bool: the range guard moved the value; its bounds widened to include
        the anchor's value, so persistence of an observed hour is never clipped).

    Raises:
        forecasters.errors.InputError: ``horizon_h < 1``, a naive ``start`` or one before the origin.
    """
    if int(horizon_h) < 1:
        raise InputError(f"horizon_h must be >= 1; got {horizon_h}")
    start = comb.origin if start is None else pd.Timestamp(start)
    if start.tzinfo is None:
        raise InputError(f"forecast start {start} has no time zone; give a UTC timestamp")
    idx = pd.date_range(start.tz_convert("UTC").floor("h"), periods=int(horizon_h), freq="h")
    p50, p90 = _raw(comb, idx)
    lo, hi = comb.bounds
    for v in (comb.anchor_value, comb.obs_value):  # an anchor is never clipped (nor persistence of it)
        if v is not None:
            lo, hi = min(lo, v), max(hi, v)
    c50, c90 = np.clip(p50, lo, hi), np.clip(p90, lo, hi)
    clipped = (c50 != p50) | (c90 != p90)
    return pd.DataFrame({"ts": idx, "p50": c50, "p90": np.maximum(c90, c50), "clipped": clipped})


def reanchor(comb: Combined, actuals: pd.Series, exclude=(), outliers=()) -> Combined:
    """Move the hourly anchor to the last usable hour of ``actuals`` (e.g. each hour of a planning day).

    Args:
        comb: a fitted combination.
        actuals: UTC-indexed traffic per hour after the current anchor, up to (not including) the hour to
            forecast; NaN = missing.
        exclude: UTC stamps never used as an anchor (ingest's imputed hours).
        outliers: UTC stamps flagged as outliers. Every hour (flagged or not) anchors only when
            ``comb.anchor_rule`` accepts it (the fit's rule, :meth:`AnchorRule.accepts`, on values adjusted
            by ``comb.hour_ref``; meant for the 24 hours after the origin); a flagged hour the rule cannot
            judge does not anchor. With ``comb.read_flagged`` the flags are ignored (the rule judges every
            hour as unflagged: an hour outside the range guard's bounds with an unusual change still does not
            anchor).

    The running guard: with a model of the change (``hourly_model == "combination"``) each new observed hour
    right after an observed one adds the model's and persistence's absolute one-hour errors to
    ``hourly_live`` (:func:`_live_record`; it starts from one day of the inner days' out-of-day errors,
    :func:`_live_prior`); while the model's sum exceeds persistence's, the forecast of the hour after the last
    observed one is that hour's value (:attr:`Combined.live_persistence`), and the model again once it
    leads.

    Returns:
        A new :class:`Combined` (the day-ahead P50/P90 and the choices unchanged; ``anchor_change`` the new
        anchor's change from the hour before when that hour anchored too, else 0; ``obs_ts``, ``obs_value``
        and ``hourly_live`` moved to the last observed hour); the input unchanged when no usable hour after
        the current anchor exists.

    Raises:
        forecasters.errors.InputError: an index without a time zone or a negative value.
    """
    if not isinstance(actuals.index, pd.DatetimeIndex) or actuals.index.tz is None:
        raise InputError("actuals: index must be tz-aware UTC hours")
    r = actuals.dropna().astype(float).sort_index()
    r.index = r.index.tz_convert("UTC")
    if (r < 0).any():
        raise InputError("actuals: negative traffic")
    r = r[usable(r.index, exclude)]
    if r.empty:
        return comb
    inside = r  # the last observed hour, flagged or not
    if comb.obs_ts is not None and (inside.index > comb.obs_ts).any():
        comb = dataclasses.replace(comb, obs_ts=inside.index[-1], obs_value=float(inside.iloc[-1]),
                                   hourly_live=_live_record(comb, inside))
    if comb.anchor_ts is not None:
        r = r[r.index > comb.anchor_ts]
    if r.empty:
        return comb
    flagged = ~usable(r.index, outliers)
    offs = (((r.index - comb.origin) / pd.Timedelta(hours=1)).to_numpy().astype(np.int64)) % HOURS_PER_DAY
    z = adjusted(r.to_numpy(), comb.hour_ref[offs])
    if comb.read_flagged:
        flagged[:] = False
    ts: pd.Timestamp | None = comb.anchor_ts
    val: float | None = comb.anchor_value
    za, change = comb.anchor_z, comb.anchor_change
    prev_ts, zp, yp = comb.last_ts, comb.last_z, comb.last_value
    rule = comb.anchor_rule
    for i, (t, v) in enumerate(r.items()):
        consecutive = prev_ts is not None and t - prev_ts == pd.Timedelta(hours=1)
        z_prev, y_prev = (zp, yp) if consecutive else (None, None)
        prev_ts, zp, yp = t, float(z[i]), float(v)
        if rule is not None and math.isfinite(float(z[i])):
            ok = rule.accepts(float(z[i]), float(v), za if ts is not None else None, z_prev, y_prev, bool(flagged[i]))
        else:
            ok = not flagged[i]
        if ok:
            follows = ts is not None and val is not None and t - ts == pd.Timedelta(hours=1)
            change = float(v) - float(val) if follows and val is not None else 0.0
            ts, val, za = t, float(v), float(z[i])
    if ts == comb.anchor_ts:
        return comb
    return dataclasses.replace(comb, anchor_ts=ts, anchor_value=val, anchor_z=za, anchor_change=change)
