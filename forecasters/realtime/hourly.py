"""The hourly mode of the real-time combination: a model of the change from the anchor (DESIGN §4.4).

With ``a`` the last readable hour before ``t``, ``C`` the day-ahead combination and ``r`` the same-hour
reference, each model of :data:`HOURLY_MODELS` forecasts ``y_a + sum_j b_j x_j(t)`` on the
:data:`HOURLY_FEATURES`; coefficients by least absolute deviations (:func:`lad_fit`); the mode is the
inverse-MAE combination of the models scored leave-one-day-out, kept only when it beats persistence by the
one-standard-error rule (:func:`choose_hourly`). Its correction to ``C`` decays by ``rho`` per hour
(:func:`anchored`, :func:`correction_decay`). Pure, on arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from forecasters.realtime.readable import last_usable_before

#: Features of the hourly model, each known at the anchor hour ``a`` for a target hour ``t > a``: the
#: day-ahead combination's gap ``C(t) - y_a``, the seasonal change ``r(t) - r(a)`` (``r`` the mean of the same
#: hour over the last 7 days, :func:`forecasters.realtime.readable.same_hour_mean`) and the last change
#: ``y_a - y_{a-1}``.
HOURLY_FEATURES = ("gap_day_ahead", "seasonal_change", "last_change")
#: The hourly models ``y_a + sum_j b_j x_j(t)``: name -> the features ``x_j`` they use (persistence: none).
HOURLY_MODELS: dict[str, tuple[str, ...]] = {
    "persistence": (),
    "blend": ("gap_day_ahead",),
    "seasonal": ("seasonal_change",),
    "blend_seasonal": ("gap_day_ahead", "seasonal_change"),
    "full": HOURLY_FEATURES,
}


@dataclass(frozen=True)
class HourlyChoice:
    """The hourly mode chosen on the backtest (:func:`choose_hourly`).

    Attributes:
        kind: ``"combination"`` or ``"persistence"``.
        coef: coefficients on :data:`HOURLY_FEATURES`, shape ``(3,)`` (all 0 for persistence).
        weights: model -> weight in the combination (``{"persistence": 1.0}`` for persistence).
        pred / actual: the kind's out-of-day one-hour predictions and the actuals they forecast, shapes ``(m,)``.
        scores: leave-one-day-out MAE of ``hourly`` (the kind), ``persistence``, ``combination``, each model,
            ``persistence_observed`` (the guard's baseline) and ``day_ahead`` (the combination of candidates
            alone); empty with fewer than 2 days.
        anchor: ``"observed"`` (persistence from the last observed hour, flagged or not: the guard's fallback,
            what "same as last hour" means to an operator) or ``"readable"`` (the model, or persistence, from the
            last readable hour, :mod:`forecasters.realtime.readable`).
        guard: the one-sided test against observed persistence (:func:`guard_test`): ``mean_gain``,
            ``se``, ``t``, ``t_crit``, ``days``; None without one.
    """

    kind: str
    coef: np.ndarray
    weights: dict[str, float]
    pred: np.ndarray
    actual: np.ndarray
    scores: dict[str, float]
    anchor: str = "observed"
    guard: dict[str, float] | None = None


#: Bounds of every hourly-model coefficient (dimensionless: a feature and the change it forecasts are both in
#: series units per hour). Beyond twice a feature's own change a one-hour model is extrapolating, never fitting.
COEF_BOUND = 2.0


def lad_fit(x: np.ndarray, z: np.ndarray, bound: float | None = None) -> np.ndarray:
    """Least-absolute-deviations coefficients: ``b`` minimising ``sum_i |z_i - x_i b|`` (``|b_j| <= bound`` if given).

    The exact L1 fit as a linear programme (``min sum(u + v)`` s.t. ``x b + u - v = z``, ``u, v >= 0``;
    Koenker, *Quantile Regression*, 2005, §6.2) solved by HiGHS through :func:`scipy.optimize.linprog`, on
    features and targets scaled to a largest magnitude of 1 (so no product can overflow, whatever the series'
    units), the coefficients optionally bounded to ``[-bound, bound]`` (the hourly models pass
    :data:`COEF_BOUND`). The L1 objective is >= 0, so the programme always has an optimum. No intercept. A
    column that is all 0 gets coefficient 0.

    Args:
        x: design, shape ``(n, k)`` (``k`` may be 0: an empty result).
        z: targets, shape ``(n,)``.
        bound: largest absolute coefficient (in the original units); None = unbounded.

    Returns:
        Coefficients, shape ``(k,)``.

    Raises:
        ValueError: a non-finite input, or HiGHS fails (it does not on a bounded programme).
    """
    from scipy import sparse
    from scipy.optimize import linprog

    x = np.asarray(x, dtype=float)
    z = np.asarray(z, dtype=float)
    n, k = x.shape
    if k == 0 or z.size == 0:
        return np.zeros(k)
    if not (np.isfinite(x).all() and np.isfinite(z).all()):
        raise ValueError("lad_fit: non-finite feature or target")
    cs = np.abs(x).max(axis=0)
    live = cs > 0
    cs = np.where(live, cs, 1.0)
    zs = float(np.abs(z).max()) or 1.0
    xs, zz = x / cs, z / zs
    eye = sparse.identity(n, format="csr")
    a_eq = sparse.hstack([sparse.csr_matrix(xs), eye, -eye], format="csr")
    cost = np.concatenate([np.zeros(k), np.ones(2 * n)])
    lim = None if bound is None else bound * cs / zs  # the bound on b_j = b'_j zs / cs_j
    bounds = [((None, None) if lim is None else (-lim[j], lim[j])) if live[j] else (0.0, 0.0)
              for j in range(k)] + [(0.0, None)] * (2 * n)
    res = linprog(cost, A_eq=a_eq, b_eq=zz, bounds=bounds, method="highs")
    if res.status != 0:
        raise ValueError(f"lad_fit: HiGHS did not solve the L1 programme ({res.message})")
    b = res.x[:k] * zs / cs
    return b if bound is None else np.clip(b, -bound, bound)


#: One-sided level of the hourly guard (:func:`guard_test`): the model replaces persistence only when its gain
#: is significant at 5 %.
GUARD_LEVEL = 0.05


def guard_test(loss_base: np.ndarray, loss_model: np.ndarray, level: float = GUARD_LEVEL) -> dict[str, float]:
    """One-sided test that a model's per-day loss is below a baseline's (Diebold and Mariano 1995, on days).

    The loss differential ``d = loss_base - loss_model`` per day (each a day's MAE: the hours of a day are
    serially correlated, the days are taken as independent, so the day is the unit, as in DM with a
    within-day HAC variance); ``t = mean(d) / (sd(d) / sqrt(n))``; the model wins when ``t`` exceeds the
    Student-t ``1 - level`` quantile with ``n - 1`` degrees of freedom (Harvey, Leybourne and Newbold 1997's
    small-sample form). A model no different from the baseline on every day (``sd = 0``) wins only when its
    mean gain is > 0.

    Args:
        loss_base: the baseline's per-day losses, shape ``(n,)``, ``n >= 2``.
        loss_model: the model's, same shape.
        level: one-sided level (:data:`GUARD_LEVEL`).

    Returns:
        ``{"mean_gain", "se", "t", "t_crit", "days", "wins"}`` (``wins`` 1.0 or 0.0).
    """
    from scipy.stats import t as student_t

    d = np.asarray(loss_base, dtype=float) - np.asarray(loss_model, dtype=float)
    n = d.size
    mean = float(d.mean()) if n else 0.0
    se = float(d.std(ddof=1) / np.sqrt(n)) if n >= 2 else float("inf")
    crit = float(student_t.ppf(1.0 - level, n - 1)) if n >= 2 else float("inf")
    tval = mean / se if se > 0 else (float("inf") if mean > 0 else 0.0)
    wins = n >= 2 and tval > crit
    return {"mean_gain": mean, "se": se if math.isfinite(se) else -1.0, "t": tval if math.isfinite(tval) else 1e9,
            "t_crit": crit if math.isfinite(crit) else -1.0, "days": float(n), "wins": float(wins)}


def hourly_features(day_ahead: np.ndarray, anchor_value: np.ndarray | float, ref_t: np.ndarray,
                    ref_a: np.ndarray | float, last_change: np.ndarray | float) -> np.ndarray:
    """The :data:`HOURLY_FEATURES` of target hours from their anchors; shape ``(n, 3)``.

    ``gap_day_ahead = C(t) - y_a`` (``day_ahead`` = ``C``), ``seasonal_change = r(t) - r(a)`` (0 where either
    reference is NaN), ``last_change`` as given. All in series units per hour; inputs broadcast to ``(n,)``.
    """
    c, ya = np.asarray(day_ahead, dtype=float), np.asarray(anchor_value, dtype=float)
    rt, ra = np.asarray(ref_t, dtype=float), np.asarray(ref_a, dtype=float)
    seas = np.where(np.isfinite(rt) & np.isfinite(ra), rt - ra, 0.0)
    gap = c - ya
    n = np.broadcast(gap, seas, np.asarray(last_change)).shape
    return np.column_stack([np.broadcast_to(gap, n), np.broadcast_to(seas, n),
                            np.broadcast_to(np.asarray(last_change, dtype=float), n)])


def anchored(day: np.ndarray, k: np.ndarray, anchor_value: float, anchor_change: float, ref_t: np.ndarray,
             ref_a: float, coef: np.ndarray, rho: float) -> np.ndarray:
    """P50 with the hourly model: ``C(t) + rho ** (k - 1) (H(t) - C(t))`` at ``k >= 1`` hours after the anchor.

    ``H(t) = y_a + x(t) coef`` (:func:`hourly_features`); ``day`` = ``C``; ``k < 1``: ``C``. Shapes ``(n,)``.
    """
    x = hourly_features(day, anchor_value, ref_t, ref_a, anchor_change)
    h1 = anchor_value + x @ coef
    wk = np.where(k >= 1, rho ** np.maximum(k - 1, 0), 0.0)
    return day + wk * (h1 - day)


def _lag1(e: np.ndarray, ok: np.ndarray) -> float:
    pair = ok[1:] & ok[:-1]
    a, b = e[1:][pair], e[:-1][pair]
    if a.size <= 2 or np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(np.clip(np.corrcoef(a, b)[0, 1], 0.0, 0.99))


def correction_decay(origins: list[int], targets: list[np.ndarray], day_ahead: list[np.ndarray], y: np.ndarray,
                     horizon_h: int) -> float:
    """``rho``: lag-1 autocorrelation of the combination's relative day-ahead errors, clipped to [0, 0.99].

    Per inner origin ``o``: target positions ``t`` and the combination ``C`` there (same shapes); the
    error ``y_t / C_t - 1`` where ``C_t > 0``; one empty slot between origins breaks the pairs.
    """
    e_all, ok_all = [], []
    for o, t, p in zip(origins, targets, day_ahead):
        full = np.full(horizon_h + 1, np.nan)  # one empty slot: a break between origins
        full[t - o] = np.where(p > 0, y[t] / np.where(p > 0, p, 1.0) - 1.0, np.nan)
        e_all.append(np.nan_to_num(full))
        ok_all.append(~np.isnan(full))
    return _lag1(np.concatenate(e_all), np.concatenate(ok_all))


def _hourly_days(targets: list[np.ndarray], day_ahead: list[np.ndarray], y: np.ndarray, anchorable: np.ndarray,
                 ref: np.ndarray, observed: np.ndarray | None = None) -> list[tuple[np.ndarray, ...]]:
    """Per inner day with an anchor: (``y_a``, features ``(m, 3)``, targets ``y_t``, ``C``, observed ``y_o``).

    ``y_o``: the last observed hour before each target (``observed``; ``y_a`` where none or not given).
    """
    before = last_usable_before(anchorable)
    before_obs = last_usable_before(anchorable if observed is None else observed)
    days: list[tuple[np.ndarray, ...]] = []
    for t, c_all in zip(targets, day_ahead):
        a = before[t]
        has = a >= 0
        t, a, c = t[has], a[has], c_all[has]
        if t.size == 0:
            continue
        o = before_obs[t]
        last = np.where(a >= 1, y[a] - y[np.maximum(a - 1, 0)], 0.0) * anchorable[np.maximum(a - 1, 0)]
        days.append((y[a], hourly_features(c, y[a], ref[t], ref[a], last), y[t], c, np.where(o >= 0, y[o], y[a])))
    return days


def _leave_one_day_out(days, models: list[str]) -> tuple[np.ndarray, list[list[np.ndarray]], np.ndarray]:
    """Each model's per-day MAE ``(days, models)``, out-of-day predictions, and coefficients on all days."""
    per_day = np.zeros((len(days), len(models)))
    oof: list[list[np.ndarray]] = [[] for _ in models]
    coefs = np.zeros((len(models), len(HOURLY_FEATURES)))
    z_all = np.concatenate([dd[2] - dd[0] for dd in days])
    for mi, mname in enumerate(models):
        cols = [HOURLY_FEATURES.index(f) for f in HOURLY_MODELS[mname]]
        if cols:
            coefs[mi, cols] = lad_fit(np.vstack([dd[1][:, cols] for dd in days]), z_all, COEF_BOUND)
        for d, (ya, x, yt, *_) in enumerate(days):
            if cols:
                xo = np.vstack([dd[1][:, cols] for j, dd in enumerate(days) if j != d])
                zo = np.concatenate([dd[2] - dd[0] for j, dd in enumerate(days) if j != d])
                pred = ya + x[:, cols] @ lad_fit(xo, zo, COEF_BOUND)
            else:
                pred = ya
            oof[mi].append(pred)
            per_day[d, mi] = np.abs(yt - pred).mean()
    return per_day, oof, coefs


def choose_hourly(targets: list[np.ndarray], day_ahead: list[np.ndarray], y: np.ndarray, anchorable: np.ndarray,
                  ref: np.ndarray, hourly_models: tuple[str, ...], se_rule: float,
                  observed: np.ndarray | None = None, guard_level: float = GUARD_LEVEL,
                  guard_margin: float = 0.0) -> HourlyChoice:
    """The hourly mode: the inverse-MAE combination of the hourly models, or persistence (DESIGN §4.4).

    Each model of ``hourly_models`` (persistence always among them) is scored leave-one-day-out on the
    inner days (LAD coefficients from the other days, :func:`lad_fit`); the combination's weights are
    ``(1 / MAE_m) / sum (1 / MAE)`` of those scores (a model with MAE 0 takes all the weight, shared), its
    coefficients the weighted sum of each model's coefficients fitted on every day; it replaces persistence
    only when its own leave-one-day-out MAE is lower by more than ``se_rule`` standard errors of the
    per-day difference. Then the guard: that mode (anchored on the last readable hour) is kept only when
    it beats persistence from the last *observed* hour (``observed``) by :func:`guard_test` at
    ``guard_level`` on the same hours; otherwise the mode is observed persistence (``anchor="observed"``),
    which is also the mode with fewer than 2 days. With ``guard_margin`` ``m > 0`` the test is against
    ``(1 - m)`` x persistence's per-day loss: the mode is kept only when it beats persistence by more than
    that share, significantly.

    Args:
        targets: per inner day, the scored target positions in ``y`` (int, shape ``(m_d,)``).
        day_ahead: per inner day, the day-ahead combination ``C`` at those targets (same shape).
        y: the history, shape ``(n,)``.
        anchorable: hours that may anchor, bool ``(n,)``.
        ref: the same-hour reference of the history (and beyond), shape ``(>= n,)``.
        hourly_models: names from :data:`HOURLY_MODELS`.
        se_rule: standard errors the combination must beat persistence by.
        observed: hours that are observed (not imputed), bool ``(n,)``; None = ``anchorable``.
        guard_level: one-sided level of the guard.
        guard_margin: share of persistence's loss the mode must gain (0: any gain).
    """
    days = _hourly_days(targets, day_ahead, y, anchorable, ref, observed)
    models = ["persistence", *[m for m in hourly_models if m in HOURLY_MODELS and m != "persistence"]]
    zero = np.zeros(len(HOURLY_FEATURES))
    pers_only = {"persistence": 1.0}
    if len(days) < 2:  # nothing to validate on: persistence from the last observed hour
        return HourlyChoice("persistence", zero, pers_only,
                            np.concatenate([dd[4] for dd in days]) if days else np.zeros(0),
                            np.concatenate([dd[2] for dd in days]) if days else np.zeros(0), {})
    per_day, oof, coefs = _leave_one_day_out(days, models)
    counts = np.array([dd[2].size for dd in days], dtype=float)
    total = (per_day * counts[:, None]).sum(axis=0) / counts.sum()
    wm = (total == 0).astype(float) if (total == 0).any() else 1.0 / total
    wm = wm / wm.sum()
    comb_oof = [sum(wm[mi] * oof[mi][d] for mi in range(len(models))) for d in range(len(days))]
    comb_day = np.array([np.abs(dd[2] - comb_oof[d]).mean() for d, dd in enumerate(days)])
    comb_total = float((comb_day * counts).sum() / counts.sum())
    diff = comb_day - per_day[:, 0]
    se = float(np.std(diff, ddof=1) / np.sqrt(diff.size))
    use_comb = -float(np.mean(diff)) > se_rule * se
    act = np.concatenate([dd[2] for dd in days])
    day_mae = float(np.abs(act - np.concatenate([dd[3] for dd in days])).mean())
    obs_day = np.array([np.abs(dd[2] - dd[4]).mean() for dd in days])
    obs_total = float((obs_day * counts).sum() / counts.sum())
    mode_day = comb_day if use_comb else per_day[:, 0]
    guard = guard_test((1.0 - guard_margin) * obs_day, mode_day, guard_level)
    keep = bool(guard["wins"])
    mode_total = comb_total if use_comb else float(total[0])
    scores = {"hourly": mode_total if keep else obs_total, "persistence": float(total[0]),
              "persistence_observed": obs_total, "combination": comb_total, "day_ahead": day_mae,
              **{mname: float(total[mi]) for mi, mname in enumerate(models) if mname != "persistence"}}
    anchor = "observed" if observed is None else "readable"
    if not keep:
        return HourlyChoice("persistence", zero, pers_only, np.concatenate([dd[4] for dd in days]), act, scores,
                            anchor="observed", guard=guard)
    if not use_comb:
        return HourlyChoice("persistence", zero, pers_only, np.concatenate(oof[0]), act, scores,
                            anchor=anchor, guard=guard)
    return HourlyChoice("combination", wm @ coefs, {mname: float(wm[mi]) for mi, mname in enumerate(models)},
                        np.concatenate(comb_oof), act, scores, anchor=anchor, guard=guard)
