"""Real-time stage: service settings, ingest traffic, forecasts chosen by backtest, last-day bands, GPU demand.

Choices (documented settings, not hidden constants):

- **Plan start ("now" of the shipped data)**: the first UTC hour after the ingested traffic of every
  service (:func:`plan_start`); the forecasts are fitted on all ingested hours before it.
- **Forecast**: :func:`forecasters.realtime.combine.fit_combined` (DESIGN §4.4): the weekly profile,
  naive 24 h, the 7-day same-hour mean, ETS and MSTL+ETS, each scored on the last 7 daily origins of
  the service's own history, combined with inverse-MAE weights; P90 from split-conformal quantiles of
  the combination's backtest residuals; the first hours anchored on the last usable actual hour (the
  hourly mode, chosen per service by the same backtest). The candidates' scores and the weights are in
  :attr:`RealtimeForecastFit.selection` and logged to MLflow with the profile run.
- **Forecast against actual**: for each service the forecast is also fitted on the history up to
  ``BAND_DAY_H`` hours before its end and its 24 h-ahead P50/P90 are set against the last day
  (the bands; their MAE and P90 coverage are the profile run's metrics). Both fits share one cache,
  so the inner origins they have in common are fitted once.
- **Real-time demand in the problem**: the P90 GPU demand (``DEMAND_QUANTILE``), each hour repeated
  over its planning steps; ``current_gpus`` is the GPU need of the last actual hour.
- **Seasonal clock (zone precedence)**: a service's configured ``timezone`` always wins; the zone its
  traffic stamps carry (a tz-aware column, or ISO offsets that switch at DST dates) is only reported in
  the ingest diagnostics (``zone``), with a message when it disagrees. ``gpuplan profile`` without
  ``--timezone`` is where the file's zone sets the clock (:func:`forecasters.realtime.ingest`).
- **Level shifts (F09)**: one rule, :func:`forecasters.realtime.shift.detect_level_shift`, runs in
  :func:`forecasters.realtime.ingest` (the new level's hours are not outliers) and in every
  :func:`forecasters.realtime.fit_profile` (the forecast follows the new level; status ``level_shift``,
  shown in the risk report's real-time section).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from domain.units import Horizon
from forecasters.realtime import backtest, ingest, to_gpus
from forecasters.realtime.combine import fit_combined, forecast_combined
from pipelines.io import schemas
from pipelines.io.errors import InputError
from pipelines.stages.traffic import planned_forecast
from pipelines.workspace.config import ServiceSettings

#: Demand quantile the planner is given for each service.
DEMAND_QUANTILE = "p90"
#: Length of the forecast-against-actual back-test (hours).
BAND_DAY_H = 24
#: Hours of the profile forecast drawn for each service's profile run.
PROFILE_PLOT_H = 168
#: Rolling-origin settings of :func:`backtest_report` (the defaults of
#: :func:`forecasters.realtime.backtest` and of ``benchmarks/backtest_realtime.py``): one origin per day
#: of the second week of the shipped history, 24 h ahead.
REPORT_N_DAYS = 7
REPORT_HORIZON_H = 24

@dataclass(frozen=True)
class IngestedTraffic:
    """Output of :func:`ingest_traffic`.

    The :data:`pipelines.io.schemas.TRAFFIC` frame and the
    diagnostics per service (:func:`forecasters.realtime.ingest`).
    """

    frame: pd.DataFrame
    diagnostics: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class RealtimeForecastFit:
    """Output of :func:`fit_realtime_forecasts`.

    Attributes:
        profiles: service -> fitted forecast (:class:`forecasters.realtime.combine.Combined`: ``status``,
            ``messages``, ``method``, ``timezone``, ``components``, ``level_factor`` like a profile;
            forecast with :func:`forecasters.realtime.combine.forecast_combined`).
        bands: :data:`pipelines.io.schemas.BANDS` frame (last day, traffic units per hour).
        status: service -> ``[status, "; "-joined messages]``; status ``ok``, ``level_shift`` (a new level
            at the end of the history, followed by the forecast) or ``degraded``.
        metrics: service -> ``band_mae``, ``band_mape`` (fraction), ``band_p90_coverage`` (fraction),
            ``level_factor``, ``history_hours``.
        selection: service -> the choice by backtest
            (:meth:`forecasters.realtime.combine.Combined.selection`: rule, each candidate's backtest
            ``mae`` and ``weight``, the hourly mode, the P90 quantiles) plus ``units`` (the service's).
    """

    profiles: dict[str, Any]
    bands: pd.DataFrame
    status: dict[str, list[str]]
    metrics: dict[str, dict[str, float]]
    selection: dict[str, dict[str, Any]] = field(default_factory=dict)


def ingest_traffic(services: Sequence[ServiceSettings], raw: Mapping[str, pd.DataFrame]) -> IngestedTraffic:
    """Ingest every service's hourly traffic (UTC, gaps imputed, outliers flagged).

    Args:
        services: the service settings.
        raw: service name -> its raw traffic rows (``ts``, ``value``) as read from its file.

    Each service's configured ``timezone`` is the seasonal clock, whatever zone its stamps carry
    (module docstring: zone precedence); the diagnostics' ``zone`` says what the stamps carry and its
    ``message`` notes a disagreement. Hours of a level shift at the end of the history are not
    outliers (``level_shift`` in the diagnostics).

    Returns:
        The :data:`pipelines.io.schemas.TRAFFIC` frame (``excluded`` marks imputed hours and outliers)
        and the ingest diagnostics per service.

    Raises:
        forecasters.errors.InputError: bad stamps or values (named by ingest).
    """
    frames, diags = [], {}
    for svc in services:
        series, diag = ingest(raw[svc.service][["ts", "value"]], svc.timezone)
        excluded = set(diag["imputed"]) | set(diag["outliers"])
        iso = series.index.strftime("%Y-%m-%dT%H:%M:%SZ")
        frames.append(pd.DataFrame({"service": svc.service, "ts": series.index, "value": series.to_numpy(),
                                    "excluded": [t in excluded for t in iso]}))
        diags[svc.service] = diag
    return IngestedTraffic(pd.concat(frames, ignore_index=True), diags)


def plan_start(traffic: pd.DataFrame) -> datetime:
    """First UTC hour after the ingested traffic of every service (the "now" of ``gpuplan run``)."""
    schemas.check_columns(traffic, schemas.TRAFFIC, "traffic")
    end = pd.to_datetime(traffic["ts"], utc=True).max()
    return (end + pd.Timedelta(hours=1)).to_pydatetime().astimezone(UTC)


def series(traffic: pd.DataFrame, service: str) -> tuple[pd.Series, list[pd.Timestamp]]:
    """One service's hourly series (UTC index, freq ``h``) and its excluded hours."""
    t = traffic[traffic["service"] == service].sort_values("ts")
    s = pd.Series(t["value"].to_numpy(float), index=pd.DatetimeIndex(t["ts"]).tz_convert("UTC"))
    s.index.freq = "h"
    return s, list(s.index[t["excluded"].to_numpy(bool)])


def _fit(hist: pd.Series, excl: list[pd.Timestamp], flagged: set[pd.Timestamp], before: pd.Timestamp,
         timezone: str, memo: dict) -> Any:
    """:func:`forecasters.realtime.combine.fit_combined` on ``hist`` (the excluded hours before ``before``)."""
    ex = [e for e in excl if e < before]
    return fit_combined(hist, timezone, exclude=[e for e in ex if e not in flagged],
                        outliers=[e for e in ex if e in flagged], memo=memo)


def fit_realtime_forecasts(services: Sequence[ServiceSettings], traffic: pd.DataFrame, as_of: datetime,
                           diagnostics: Mapping[str, Mapping[str, Any]] | None = None) -> RealtimeForecastFit:
    """Fit each service's forecast on the hours before ``as_of`` and back-test the last day (module docstring).

    Args:
        services: the service settings.
        traffic: the :data:`pipelines.io.schemas.TRAFFIC` frame (``excluded``: imputed hours and outliers).
        as_of: the plan start (UTC).
        diagnostics: the ingest diagnostics per service (:class:`IngestedTraffic`); with them an excluded
            hour that ingest flagged as an outlier (not imputed) may still anchor the forecast when its
            one-hour change is ordinary (:class:`forecasters.realtime.readable.AnchorRule`); without them
            no excluded hour is read.

    Returns:
        :class:`RealtimeForecastFit`.

    Raises:
        pipelines.io.errors.InputError: a service has no traffic hour before ``as_of``.
    """
    schemas.check_columns(traffic, schemas.TRAFFIC, "traffic")
    as_of_ts = pd.Timestamp(as_of).tz_convert("UTC")
    profiles, status, bands, metrics, selection = {}, {}, [], {}, {}
    for svc in services:
        name = svc.service
        s, excl = series(traffic, name)
        outl = (diagnostics or {}).get(name, {}).get("outliers", [])
        flagged = set(pd.DatetimeIndex(pd.to_datetime(list(outl), utc=True))) if outl else set()
        hist = s[s.index < as_of_ts]
        if hist.empty:  # e.g. a queue export older than every traffic hour: the plan would forecast from nothing
            first = f", its first hour is {s.index[0]:%Y-%m-%dT%H:%MZ}" if len(s) else ""
            raise InputError(f"traffic of service {name!r}: no hour before the plan start {as_of_ts:%Y-%m-%dT%H:%MZ} "
                             f"(the queue export's time){first}: export traffic that covers the hours before it")
        memo: dict = {}
        comb = _fit(hist, excl, flagged, as_of_ts, svc.timezone, memo)
        profiles[name] = comb
        status[name] = [comb.status, "; ".join(comb.messages)]
        selection[name] = {**comb.selection(), "units": svc.units}
        # back-test: fit up to 24 h before the end of the history, forecast the last day
        cut = hist.index[-1] - pd.Timedelta(hours=BAND_DAY_H - 1)
        early = hist[hist.index < cut]
        fc = forecast_combined(_fit(early, excl, flagged, cut, svc.timezone, memo), BAND_DAY_H, start=cut)
        actual = hist.reindex(pd.DatetimeIndex(fc["ts"])).to_numpy()
        bands.append(pd.DataFrame({"service": name, "ts": fc["ts"], "actual": actual, "p50": fc["p50"],
                                   "p90": fc["p90"]}))
        ok = ~np.isnan(actual)
        p50 = fc["p50"].to_numpy()[ok]
        metrics[name] = {
            "band_mae": float(np.mean(np.abs(actual[ok] - p50))),
            "band_mape": float(np.mean(np.abs(actual[ok] - p50) / np.maximum(actual[ok], 1e-9))),
            "band_p90_coverage": float(np.mean(actual[ok] <= fc["p90"].to_numpy()[ok])),
            "level_factor": float(comb.level_factor),
            "history_hours": int(len(hist)),
        }
    return RealtimeForecastFit(profiles, pd.concat(bands, ignore_index=True), status, metrics, selection)


def profile_outlook(profile: Any, as_of: datetime) -> pd.DataFrame:
    """The :data:`PROFILE_PLOT_H`-hour P50/P90 forecast of one fitted service from ``as_of`` (``ts, p50, p90``).

    When the traffic runs past ``as_of`` (a live Prometheus pull newer than the queue export) the forecast
    starts at the profile's origin instead: there is no forecast before the origin, as in :func:`demand_frame`.
    """
    start = max(pd.Timestamp(as_of), pd.Timestamp(profile.origin))
    return forecast_combined(profile, PROFILE_PLOT_H, start=start.to_pydatetime())[["ts", "p50", "p90"]]


def demand_frame(services: Sequence[ServiceSettings], profiles: Mapping[str, Any], traffic: pd.DataFrame,
                 start: datetime, step_minutes: int, horizon_steps: int) -> pd.DataFrame:
    """GPU demand per service and planning step over the horizon (:data:`pipelines.io.schemas.DEMAND`).

    ``traffic_*`` in the file's units per hour; ``demand_gpus_*`` from
    :func:`forecasters.realtime.to_gpus`; ``current_gpus`` = GPU need of the last actual hour before
    ``start`` (the first P90 step when there is none).
    """
    start_ts = pd.Timestamp(start)
    clock = Horizon(start_ts, step_minutes, horizon_steps)
    step_ts = [pd.Timestamp(clock.ts(t)) for t in range(horizon_steps)]
    rows = []
    for svc in services:
        name = svc.service
        # A replan at a half hour (20:30Z) plans the hour 20:00Z whose traffic is already in the history (the
        # forecast origin is 21:00Z): those steps take the first forecast hour, never a forecast before the origin.
        fc_start = max(start_ts.floor("h"), pd.Timestamp(profiles[name].origin))
        hour_of_step = [int((max(ts.floor("h"), fc_start) - fc_start) / pd.Timedelta(hours=1)) for ts in step_ts]
        fc = planned_forecast(profiles[name], start_ts, max(hour_of_step) + 1)  # what gpuplan forecast prints
        conv = svc.gpu_conversion()
        g50 = to_gpus(fc["p50"].to_numpy(), **conv)
        g90 = to_gpus(fc["p90"].to_numpy(), **conv)
        s, _ = series(traffic, name)
        last = s[s.index < pd.Timestamp(start)]
        cur = int(to_gpus([float(last.iloc[-1])], **conv)[0]) if len(last) else int(g90[0])
        for t, h in enumerate(hour_of_step):
            rows.append({"service": name, "step": t, "ts": step_ts[t],
                         "traffic_p50": float(fc["p50"].iloc[h]), "traffic_p90": float(fc["p90"].iloc[h]),
                         "demand_gpus_p50": int(g50[h]), "demand_gpus_p90": int(g90[h]), "current_gpus": cur})
    return schemas.check_columns(pd.DataFrame(rows), schemas.DEMAND, "demand frame")


def _report_metrics(m: dict) -> dict:
    """One backtest variant's metrics with MAPE as a fraction; NaN (zero baseline error) as None."""
    doc = {
        "mae": m["mae"],
        "mase_snaive168": m["mase_snaive168"],
        "mase_naive24": m["mase_naive24"],
        "mase_persistence": m["mase_persistence"],
        "mase_persistence_obs": m["mase_persistence_obs"],
        "mape": m["mape_pct"] / 100.0,
        "p90_coverage": m["p90_coverage"],
    }
    return {k: (None if isinstance(v, float) and math.isnan(v) else float(v)) for k, v in doc.items()}


def backtest_report(services: Sequence[ServiceSettings], raw: Mapping[str, pd.DataFrame],
                    hours_out: dict[str, pd.DataFrame] | None = None) -> dict:
    """Backtest report of the real-time forecast on every service (``gpuplan train --kind realtime``).

    For each service: ingest its raw hourly rows, fit the forecast the pipeline uses on the whole history
    (:func:`forecasters.realtime.combine.fit_combined`; its ``status``, ``method`` and ``messages`` are
    reported; two shipped weeks are below the profile's C03 "more than 336 points" rule, hence
    ``"degraded"``), and run the rolling-origin backtest :func:`forecasters.realtime.backtest` with its
    defaults (``REPORT_*``): 7 daily origins over the second week, each re-ingested and refitted on the
    hours before it and scored 24 h ahead; masked gap hours are not scored.

    Args:
        services: the service settings.
        raw: service name -> its raw traffic rows (``ts``, ``value``).
        hours_out: when given, filled with service -> the day-ahead forecast against actual of every scored
            hour (``ts`` UTC, ``actual``, ``p50``, ``p90``, ``snaive168``, ``naive24``, ``persistence``, the
            service's units per hour; ``backtest``'s ``hours``), for the MLflow plot.

    Returns:
        ``{"kind": "realtime", "services": {name: doc}}`` with, per service::

            {"status", "messages", "method", "units", "cutoff", "n_hours", "n_days", "horizon_h", "origins",
             "masked_hours", "outliers",
             "metrics": {"mae", "mase_snaive168", "mase_naive24", "mase_persistence", "mase_persistence_obs",
                         "mape", "p90_coverage"},
             "baselines": {"snaive168": {"mae"}, "naive24": {"mae"}, "persistence": {"mae"},
                           "persistence_obs": {"mae"}},
             "hourly_recal": {same keys as "metrics"},
             "candidates": {name: {"mae", "mase_naive24", "mase_snaive168"}},
             "weights": {name: weight}}

        ``metrics`` is the day-ahead P50/P90 (backtest variant ``day_ahead``); ``hourly_recal`` the
        one-hour-ahead hourly mode (variant ``hourly_recal``); ``candidates`` each candidate's own
        day-ahead P50 on the same hours; ``weights`` the combination fitted on the whole history. ``mae``
        in the file's units per hour (``units``); ``mase_*`` = MAE ÷ the baseline's MAE on the same
        ``n_hours`` hours (seasonal naive ``y[t-168]``, naive ``y[t-24]``, persistence ``y[t-1]`` and
        ``persistence_obs``, the last observed hour: ``y[t-1]`` after a masked gap is ingest's imputation,
        which can read hour ``t``);
        ``mape`` and ``p90_coverage`` are fractions (0..1). A MASE whose baseline error is 0 is None.
        ``cutoff``: the newest hour of the service's ingested traffic (ISO, UTC), the data cut-off.

    Raises:
        forecasters.errors.InputError / ValueError: bad stamps, or a series too short for the backtest.
    """
    out = {}
    for svc in services:
        series_, diag = ingest(raw[svc.service][["ts", "value"]], svc.timezone)
        comb = fit_combined(series_, svc.timezone, exclude=diag["imputed"], outliers=diag["outliers"])
        res = backtest(series_, svc.timezone, exclude=diag["imputed"], n_days=REPORT_N_DAYS,
                       horizon_h=REPORT_HORIZON_H)
        day, hourly = res["variants"]["day_ahead"], res["variants"]["hourly_recal"]
        out[svc.service] = {
            "status": comb.status,
            "messages": list(comb.messages),
            "method": comb.method,
            "units": svc.units,
            "cutoff": series_.index[-1].isoformat(),
            "n_hours": int(day["n_hours"]),
            "n_days": int(res["n_days"]),
            "horizon_h": REPORT_HORIZON_H,
            "origins": list(res["origins"]),
            "masked_hours": len(diag["imputed"]),
            "outliers": list(diag["outliers"]),
            "metrics": _report_metrics(day),
            "baselines": {"snaive168": {"mae": float(day["mae_snaive168"])},
                          "naive24": {"mae": float(day["mae_naive24"])},
                          "persistence": {"mae": float(day["mae_persistence"])},
                          "persistence_obs": {"mae": float(day["mae_persistence_obs"])}},
            "hourly_recal": _report_metrics(hourly),
            "candidates": {c: {k: (None if math.isnan(float(m[k])) else float(m[k]))
                               for k in ("mae", "mase_naive24", "mase_snaive168")}
                           for c, m in res["candidates"].items()},
            "weights": {c: float(w) for c, w in comb.weights.items()},
        }
        if hours_out is not None:
            h = pd.DataFrame(res["hours"])
            hours_out[svc.service] = h.assign(ts=pd.to_datetime(h["ts"], utc=True))
    return {"kind": "realtime", "services": out}
