"""Rolling-origin backtest of the real-time forecast against naive baselines (DESIGN §4.4).

The forecast evaluated is the one the pipeline plans with: :func:`forecasters.realtime.combine.fit_combined`
(candidates chosen and weighted by their own backtest, conformal P90 with an adaptive level, hourly change
model anchored on the last readable hour). History at each origin = every hour before it, re-ingested as a
planning run would see it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecasters import metrics as M
from forecasters.errors import InputError
from forecasters.realtime.candidates import CANDIDATES
from forecasters.realtime.combine import fit_combined, forecast_combined, reanchor
from forecasters.realtime.ingest import IngestSettings, ingest
from forecasters.realtime.model import CombineSettings
from forecasters.realtime.profile import ProfileSettings

VARIANTS = ("day_ahead", "hourly_recal")


def _iso_set(stamps) -> pd.DatetimeIndex:
    stamps = list(stamps)
    return pd.DatetimeIndex(pd.to_datetime(stamps, utc=True)) if stamps else pd.DatetimeIndex([], tz="UTC")


def _prefix(series: pd.Series, masked: np.ndarray, end: int, timezone: str, st: IngestSettings | None):
    """Ingest the raw hours ``[0, end)`` (masked hours as missing): ``(series, imputed, outliers)``."""
    raw = pd.DataFrame({"ts": series.index[:end], "value": np.where(masked[:end], np.nan, series.to_numpy()[:end])})
    hist, diag = ingest(raw, timezone, settings=st)
    return hist, _iso_set(diag["imputed"]), _iso_set(diag["outliers"])


def backtest(
    series: pd.Series,
    timezone: str = "UTC",
    exclude=(),
    outliers=(),
    test_start=None,
    n_days: int | None = 7,
    horizon_h: int = 24,
    settings: CombineSettings | ProfileSettings | None = None,
    reingest: bool = True,
    ingest_settings: IngestSettings | None = None,
) -> dict:
    """Rolling-origin evaluation: one origin per day over the test window.

    At each origin ``o`` (``test_start + d·24 h``; default ``test_start`` = first hour + 168 h) the
    forecast is fitted on the hours before ``o`` only and scored on ``[o, o + horizon_h)``:

    * ``day_ahead``: the combination's P50/P90 from ``o`` (:func:`forecasters.realtime.combine.fit_combined`,
      the P50 of the first hours already carrying the hourly anchor at ``o - 1``, as a planning run at ``o``).
    * ``hourly_recal``: at every hour ``t`` of the day the same fit, re-anchored
      (:func:`forecasters.realtime.combine.reanchor`) on the actuals before ``t``, forecasts ``t`` (one hour
      ahead; no refit inside the day).

    History: with ``reingest`` (default) the hours before ``o`` are re-ingested
    (:func:`forecasters.realtime.ingest`; the ``exclude`` hours as missing), so imputation, outlier flags and
    level-shift tests see only the past, as a planning run would; the day's hours are judged as anchors of
    the hourly mode with the imputed/outlier flags ingest gives on the hours before ``o + horizon_h`` (for
    the day's hours those flags use only hours before them: the outlier reference looks ±3 days, and none
    after ``o + horizon_h`` exists). Without ``reingest`` the series is used as given, with ``exclude``
    masked and ``outliers`` (e.g. flags from one ingest of the whole series) treated as flagged.

    Baselines on the same hours, from ``series`` as given (imputed values where a lag hour was a gap):
    seasonal naive ``y[t-168]``, naive-24 ``y[t-24]`` (both known at every origin for horizons <= 24 h) and
    persistence ``y[t-1]`` (the hourly mode's baseline). Where a lag hour was a masked gap its value is ingest's
    imputation, which can read the hour being forecast (a gap of up to 2 h is interpolated to the next observed
    hour); so persistence is also given from the last observed hour before ``t`` (``persistence_obs``, what an
    operator has at ``t - 1``). Hours in ``exclude`` (masked gaps) are neither
    fitted nor scored; ``outliers`` are kept out of the fits (as in production) but scored, since they are
    real demand.

    Args:
        series: ingested hourly UTC series (no NaN).
        timezone: the service's seasonal clock.
        exclude: masked hours (ingest's ``imputed``).
        outliers: hours kept out of the fits (used as given only without ``reingest``; with it the per-origin
            ingest flags its own and these are added).
        test_start: first origin (an hour of the series); default first hour + 168 h.
        n_days: number of daily origins; None = every whole day to the end of the series.
        horizon_h: hours scored per origin (<= 24).
        settings: :class:`forecasters.realtime.combine.CombineSettings`; a
            :class:`forecasters.realtime.ProfileSettings` sets the profile candidate's settings (the rest default).
        reingest: re-ingest the history at each origin (above).
        ingest_settings: settings of that ingest.

    Returns:
        ``{"variants": {name: metrics}, "candidates": {name: {"mae", "mase_naive24", "mase_snaive168",
        "n_hours"}}, "origins": [...], "n_days": k, "skipped": [{"origin", "reason"}], "per_origin": [...],
        "status", "method", "hours"}``. ``hours``: the scored hours of the day-ahead variant as columns
        ``ts`` (ISO), ``actual``, ``snaive168``, ``naive24``, ``persistence``, ``persistence_obs``, ``p50``,
        ``p90`` (the forecast-against-actual of every origin, in order). Metrics: ``mae``, ``mae_snaive168``,
        ``mae_naive24``, ``mae_persistence``, ``mae_persistence_obs``, ``mase_persistence_obs`` (against the
        last observed hour), ``p90_p50_ratio`` (sum of P90 / sum of P50: the width of the band),
        ``mase_snaive168`` (= mae / mae_snaive168 on the same hours), ``mase_naive24``,
        ``mase_persistence``, ``mape_pct`` (hours with actual > 0), ``p90_coverage`` (share of hours with
        actual <= P90), ``n_hours``; all in the series' units. ``per_origin[i]``: ``origin``, ``weights``,
        ``hourly`` (the hourly mode: ``combination`` or ``persistence``), ``n_hours`` and the sums of absolute
        errors ``sae`` per forecast and baseline (for per-period ratios). An origin whose history ingest or the fit refuses (e.g. too many missing hours
        in a short history) is skipped and listed.

    Raises:
        forecasters.errors.InputError: the series is too short for one origin with 168 h of lag, or an
            origin off the hourly grid.
    """
    if isinstance(settings, ProfileSettings):
        settings = CombineSettings(profile=settings)
    idx = series.index
    masked = idx.isin(_iso_set(exclude))
    out_idx = _iso_set(outliers)
    origins = _origins(idx, test_start, n_days, horizon_h)
    pos = {t: i for i, t in enumerate(idx)}
    y = series.to_numpy(dtype=float)
    # position of the last observed (not masked) hour at or before each hour; the first hour if none
    last_obs = np.maximum(np.maximum.accumulate(np.where(masked, -1, np.arange(len(y)))), 0)
    memo: dict = {}
    acc = _Scores(rows={v: [] for v in VARIANTS}, cand_err={c: [] for c in CANDIDATES})
    per_origin, skipped, used = [], [], []
    comb = None
    for o in origins:
        io = pos[o]
        end = min(io + horizon_h, len(idx))
        try:
            hist, imputed, flagged, day_imputed, day_flagged = _histories(series, masked, io, end, timezone,
                                                                          reingest, ingest_settings)
            comb = fit_combined(hist, timezone, exclude=imputed, outliers=flagged.union(out_idx[out_idx < o]),
                                settings=settings, memo=memo)
        except InputError as exc:
            skipped.append({"origin": o.isoformat(), "reason": str(exc)})
            continue
        day_out = day_flagged.union(out_idx[out_idx < idx[end - 1]])
        sae, n_scored = _score_origin(series, y, masked, last_obs, comb, o, io, end, day_imputed, day_out, acc)
        used.append(o)
        per_origin.append({"origin": o.isoformat(), "weights": dict(comb.weights),
                           "hourly": comb.hourly_model, "hourly_anchor": comb.hourly_anchor,
                           "day_ahead_guard": dict(comb.day_ahead_guard), "n_hours": n_scored, "sae": sae,
                           "status": comb.status})
    if comb is None:
        raise InputError(f"backtest: no origin could be evaluated ({skipped[0]['reason'] if skipped else ''})")
    cands, hours = _summary(acc)
    return {"variants": {v: _metrics(np.array(r)) for v, r in acc.rows.items()}, "candidates": cands,
            "origins": [o.isoformat() for o in used], "n_days": len(used), "skipped": skipped,
            "per_origin": per_origin, "status": comb.status, "method": comb.method, "hours": hours}


@dataclass
class _Scores:
    """What the origins accumulate.

    Per variant the scored rows (actual, snaive168, naive24, persistence, persistence_obs, p50, p90), per
    candidate its absolute errors (own, naive24, snaive168, 1), and the day-ahead rows' stamps.
    """

    rows: dict[str, list[tuple[float, ...]]]
    cand_err: dict[str, list[tuple[float, float, float, float]]]
    hour_ts: list[str] = field(default_factory=list)  # the scored hours of rows["day_ahead"], in order


def _origins(idx: pd.DatetimeIndex, test_start, n_days: int | None, horizon_h: int) -> list[pd.Timestamp]:
    """The daily origins of the test window; ``InputError`` when too short for 168 h of lag or off the grid."""
    start = idx[0] + pd.Timedelta(hours=168) if test_start is None else pd.Timestamp(test_start)
    last_origin = idx[-1] - pd.Timedelta(hours=horizon_h - 1)
    count = n_days if n_days is not None else max(int((last_origin - start) / pd.Timedelta(hours=24)) + 1, 0)
    origins = [start + pd.Timedelta(hours=24 * d) for d in range(count)]
    origins = [o for o in origins if o <= last_origin]
    if not origins or start - pd.Timedelta(hours=168) < idx[0]:
        raise InputError(f"backtest: series {idx[0]}..{idx[-1]} too short for a test window from {start} "
                         "with 168 h of lag")
    on_grid = set(idx)
    off_grid = [o for o in origins if o not in on_grid]
    if off_grid:
        raise InputError(f"backtest: origin {off_grid[0].isoformat()} is not an hour of the series "
                         "(test_start must be on the series' hourly grid)")
    return origins


def _histories(series: pd.Series, masked: np.ndarray, io: int, end: int, timezone: str, reingest: bool,
               st: IngestSettings | None):
    """The history before position ``io`` and the flags: ``(hist, imputed, flagged, day_imputed, day_flagged)``.

    With ``reingest`` both from ingest (of the hours before ``io``, and of those before ``end`` for the
    day's anchors); else the series as given with the masked hours as imputed and nothing flagged.
    """
    idx = series.index
    if reingest:
        hist, imputed, flagged = _prefix(series, masked, io, timezone, st)
        _, day_imputed, day_flagged = _prefix(series, masked, end, timezone, st)
        return hist, imputed, flagged, day_imputed, day_flagged
    return series.iloc[:io], idx[:io][masked[:io]], idx[:0], idx[:end][masked[:end]], idx[:0]


def _score_origin(series: pd.Series, y: np.ndarray, masked: np.ndarray, last_obs: np.ndarray, comb, o: pd.Timestamp,
                  io: int, end: int, day_imputed, day_out, acc: _Scores) -> tuple[dict[str, float], int]:
    """Score one origin's hours ``[io, end)`` into ``acc``: ``(sums of absolute errors per forecast, hours)``."""
    idx = series.index
    fc = forecast_combined(comb, end - io, start=o)
    cpred = {c: comb.fit.predict(c, np.arange(end - io)) for c in CANDIDATES
             if c == "profile" or c in comb.fit.paths}
    sae = dict.fromkeys(("day_ahead", "hourly_recal", "naive24", "snaive168", "persistence", "persistence_obs"),
                        0.0)
    n_scored = 0
    for h in range(end - io):
        i = io + h
        if masked[i]:
            continue
        base = (y[i], y[i - 168], y[i - 24], y[i - 1], y[last_obs[i - 1]])
        acc.rows["day_ahead"].append(base + (fc["p50"].iat[h], fc["p90"].iat[h]))
        acc.hour_ts.append(idx[i].isoformat())
        hr = forecast_combined(reanchor(comb, series.iloc[io:i], exclude=day_imputed, outliers=day_out), 1,
                               start=idx[i])
        acc.rows["hourly_recal"].append(base + (hr["p50"].iat[0], hr["p90"].iat[0]))
        for c, p in cpred.items():
            acc.cand_err[c].append((abs(y[i] - p[h]), abs(y[i] - y[i - 24]), abs(y[i] - y[i - 168]), 1.0))
        for k, v in (("day_ahead", fc["p50"].iat[h]), ("hourly_recal", hr["p50"].iat[0]), ("naive24", y[i - 24]),
                     ("snaive168", y[i - 168]), ("persistence", y[i - 1]),
                     ("persistence_obs", y[last_obs[i - 1]])):
            sae[k] += abs(y[i] - float(v))
        n_scored += 1
    return sae, n_scored


def _summary(acc: _Scores) -> tuple[dict, dict]:
    """Each candidate's MAE and MASE against naive 24 h / seasonal naive 168 h, and the day-ahead hours' columns."""
    cands = {}
    for c, e in acc.cand_err.items():
        if not e:
            continue
        a = np.array(e)
        cands[c] = {"mae": float(a[:, 0].mean()), "mase_naive24": _ratio(a[:, 0].sum(), a[:, 1].sum()),
                    "mase_snaive168": _ratio(a[:, 0].sum(), a[:, 2].sum()), "n_hours": int(len(a))}
    cols = ("actual", "snaive168", "naive24", "persistence", "persistence_obs", "p50", "p90")
    day = np.array(acc.rows["day_ahead"]).reshape(-1, len(cols))
    hours = {"ts": acc.hour_ts, **{k: [float(v) for v in day[:, j]] for j, k in enumerate(cols)}}
    return cands, hours


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def _metrics(a: np.ndarray) -> dict:
    """Metrics from rows (actual, snaive168, naive24, persistence, persistence_obs, p50, p90)."""
    act, sn, n24, pers, pers_obs, p50, p90 = a.T
    mae, mae_sn, mae_24, mae_p = M.mae(act, p50), M.mae(act, sn), M.mae(act, n24), M.mae(act, pers)
    mae_po = M.mae(act, pers_obs)
    pos = act > 0
    return {
        "mae": mae,
        "mae_snaive168": mae_sn,
        "mae_naive24": mae_24,
        "mae_persistence": mae_p,
        "mase_snaive168": _ratio(mae, mae_sn),
        "mase_naive24": _ratio(mae, mae_24),
        "mase_persistence": _ratio(mae, mae_p),
        "mae_persistence_obs": mae_po,
        "mase_persistence_obs": _ratio(mae, mae_po),
        "p90_p50_ratio": _ratio(float(p90.sum()), float(p50.sum())),
        "mape_pct": 100 * M.mape(act[pos], p50[pos]) if pos.any() else float("nan"),
        "p90_coverage": float(np.mean(act <= p90)),
        "n_hours": int(len(act)),
    }
