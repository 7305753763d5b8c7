"""MLflow runs of the real-time forecast: a service's profile run and the nightly real-time backtest.

Metric names carry the traffic units (:func:`pipelines.tracking.runs.units_slug`); the backtest run
logs the forecast-against-actual plot (:func:`pipelines.report.backtest_plot.plot_backtest`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.config.settings import Settings
from pipelines.tracking.runs import band_metrics, clean_metrics, log_run, run_name, units_slug


def selection_metrics(selection: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
    """Params and metrics of a real-time choice by backtest (:attr:`pipelines.stages.realtime.RealtimeForecastFit.selection`).

    Params: ``selection.rule``, ``selection.candidates`` (comma-joined), ``selection.failed`` (candidate:
    reason), ``hourly.kind`` (``combination`` or ``persistence``), ``hourly.read_flagged``, ``p90.kind``.
    Metrics (``<u>`` = :func:`units_slug` of ``units``): ``cand.<name>.mae_<u>`` (the candidate's day-ahead
    backtest MAE), ``cand.<name>.weight``, ``selection.n_inner_origins``, ``selection.n_scored_h``,
    ``hourly.rho``, ``hourly.coef.<feature>`` (the hourly change model's coefficients),
    ``hourly.weight.<model>`` (its combination weights), ``hourly.mae_<u>`` / ``hourly.persistence_mae_<u>`` /
    ``hourly.day_ahead_mae_<u>`` (one-hour-ahead backtest MAE of the hourly mode, of persistence, of the
    day-ahead P50), ``p90.q_band<k>`` (the conformal quantile per hour band: a ratio to P50, or traffic units
    when the kind is additive), ``p90.alpha`` (the miss rate it is taken at, after the adaptive update),
    ``hourly.q90``. A selection record without a key logs nothing for it (``hourly.w``: the anchor weight of
    records written before the hourly change model).
    """
    u = units_slug(str(selection.get("units", "traffic/h")))
    cands = selection.get("candidates", {})
    hourly = selection.get("hourly", {})
    params = {"selection.rule": selection.get("rule"), "selection.candidates": ",".join(cands),
              "selection.failed": "; ".join(f"{k}: {v}" for k, v in selection.get("failed", {}).items()) or None,
              "hourly.kind": hourly.get("kind"), "p90.kind": selection.get("p90", {}).get("kind")}
    if "read_flagged" in hourly:
        params["hourly.read_flagged"] = bool(hourly["read_flagged"])
    metrics: dict[str, float] = {"selection.n_inner_origins": selection.get("n_inner_origins"),
                                 "selection.n_scored_h": selection.get("n_scored_h")}
    for name, c in cands.items():
        metrics[f"cand.{name}.mae_{u}"] = c.get("mae")
        metrics[f"cand.{name}.weight"] = c.get("weight")
    metrics.update({"hourly.w": hourly.get("w"), "hourly.rho": hourly.get("rho"), "hourly.q90": hourly.get("q90"),
                    f"hourly.mae_{u}": hourly.get("mae_hourly"),
                    f"hourly.persistence_mae_{u}": hourly.get("mae_persistence"),
                    f"hourly.day_ahead_mae_{u}": hourly.get("mae_day_ahead")})
    for k, q in enumerate(selection.get("p90", {}).get("bands", [])):
        metrics[f"p90.q_band{k}"] = q
    metrics["p90.alpha"] = selection.get("p90", {}).get("alpha")
    for f, b in hourly.get("coef", {}).items():
        metrics[f"hourly.coef.{f}"] = b
    for m, v in hourly.get("weights", {}).items():
        metrics[f"hourly.weight.{m}"] = v
    return params, {k: v for k, v in metrics.items() if v is not None}


def log_realtime_forecast_run(settings: Settings, service: str, profile: Any, metrics: Mapping[str, Any], as_of: datetime,
                              png: Path, selection: Mapping[str, Any] | None = None) -> str:
    """Log one service's real-time forecast to the ``realtime`` experiment; returns the run id.

    Params: service, method, status, timezone, components, ``as_of``, and with ``selection`` the choice
    by backtest (:func:`selection_metrics`). Metrics: the band metrics of
    :class:`pipelines.stages.realtime.RealtimeForecastFit` and, with ``selection``, each candidate's backtest
    score and weight and the hourly mode's scores (:func:`selection_metrics`). Artifact: the profile
    plot ``png``.
    """
    params = {"service": service, "method": profile.method, "status": profile.status,
              "timezone": profile.timezone, "components": ",".join(profile.components),
              "as_of": as_of.isoformat()}
    all_metrics = band_metrics(metrics, (selection or {}).get("units", "traffic/h"))
    if selection:
        sel_params, sel_metrics = selection_metrics(selection)
        params.update(sel_params)
        all_metrics.update(sel_metrics)
    cutoff = pd.Timestamp(as_of) - pd.Timedelta(hours=1)  # the newest hour the forecast read
    return log_run(settings, "realtime", run_name("profile", cutoff, service), params=params, metrics=all_metrics,
                   artifacts={f"plots/{png.name}": png}, tags={"gpuplan.stage": "profile", "gpuplan.service": service})


def _ratio_metrics(prefix: str, m: Mapping[str, Any], u: str, hourly: bool = False) -> dict[str, Any]:
    """One backtest variant's metrics with units in their names (``mae_<u>``, ``mae_ratio_vs_*``, ``*_frac``).

    The ratios are MAE ratios on the same hours (not MASE, which scales by the in-sample naive error):
    ``mae_ratio_vs_snaive168``, ``mae_ratio_vs_naive24``, and, one hour ahead only (``hourly``),
    ``mae_ratio_vs_persistence1h``: a day-ahead forecast against 1-h persistence compares two horizons and
    is not logged. The coverage is named by its window: ``p90_coverage_backtest_frac`` (every scored hour of
    the rolling-origin backtest), never the plan's last-day figure (``band_p90_coverage_last24h_frac``).
    """
    out = {f"{prefix}mae_{u}": m.get("mae"), f"{prefix}mae_ratio_vs_snaive168": m.get("mase_snaive168"),
           f"{prefix}mae_ratio_vs_naive24": m.get("mase_naive24"), f"{prefix}mape_frac": m.get("mape"),
           f"{prefix}p90_coverage_backtest_frac": m.get("p90_coverage")}
    if hourly:
        out[f"{prefix}mae_ratio_vs_persistence1h"] = m.get("mase_persistence")
    return out


def realtime_backtest_metrics(doc: Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of the real-time rolling-origin backtest (:func:`pipelines.stages.realtime.backtest_report`).

    Per service ``s`` with units slug ``u`` (:func:`units_slug`: ``requests/h`` -> ``requests_per_h``):
    ``rt.<s>.mae_<u>``, ``rt.<s>.mae_ratio_vs_snaive168``, ``rt.<s>.mae_ratio_vs_naive24``,
    ``rt.<s>.mape_frac``, ``rt.<s>.p90_coverage_backtest_frac`` (the day-ahead P50/P90); the same under
    ``rt.<s>.hourly.`` (one hour ahead) plus ``rt.<s>.hourly.mae_ratio_vs_persistence1h``;
    ``rt.<s>.baseline.<b>.mae_<u>`` (seasonal naive 168 h, naive 24 h, persistence on the same hours);
    ``rt.<s>.cand.<c>.mae_<u>`` and ``rt.<s>.cand.<c>.mae_ratio_vs_naive24`` (each candidate), ``rt.<s>.weight.<c>``; ``rt.<s>.n_scored_h``,
    ``rt.<s>.n_origins``, ``rt.<s>.masked_h``. A ratio whose baseline error is 0 (None) is left out.
    """
    out: dict[str, Any] = {}
    for svc, d in (doc.get("services") or {}).items():
        u, p = units_slug(str(d.get("units", "traffic/h"))), f"rt.{svc}."
        out.update(_ratio_metrics(p, d.get("metrics") or {}, u))
        out.update(_ratio_metrics(f"{p}hourly.", d.get("hourly_recal") or {}, u, hourly=True))
        for b, m in (d.get("baselines") or {}).items():
            out[f"{p}baseline.{b}.mae_{u}"] = m.get("mae")
        for c, m in (d.get("candidates") or {}).items():
            out[f"{p}cand.{c}.mae_{u}"] = m.get("mae")
            out[f"{p}cand.{c}.mae_ratio_vs_naive24"] = m.get("mase_naive24")
            out[f"{p}cand.{c}.mae_ratio_vs_snaive168"] = m.get("mase_snaive168")
        for c, w in (d.get("weights") or {}).items():
            out[f"{p}weight.{c}"] = w
        out.update({f"{p}n_scored_h": d.get("n_hours"), f"{p}n_origins": d.get("n_days"),
                    f"{p}masked_h": d.get("masked_hours")})
    return clean_metrics(out)


def log_realtime_backtest(settings: Settings, doc: Mapping[str, Any], hours: Mapping[str, pd.DataFrame] | None = None,
                          stage: str = "nightly", on: datetime | None = None) -> str:
    """Log the real-time rolling-origin backtest of every service as one run of the ``realtime`` experiment.

    One run per retraining (the nightly flow, ``gpuplan train --kind realtime``), named
    ``realtime cutoff=<newest traffic hour> <date>`` (:func:`run_name`). Metrics:
    :func:`realtime_backtest_metrics`. Params per service: status, units, method, first and last origin,
    horizon; ``cutoff``. Artifacts: the document ``backtest/realtime_backtest.json`` and, with ``hours``
    (:func:`pipelines.stages.realtime.backtest_report`'s ``hours_out``), the forecast-against-actual plot
    ``plots/backtest_realtime.png`` (:func:`pipelines.report.backtest_plot.plot_backtest`). Tag ``gpuplan.stage`` =
    ``stage``. Returns the run id.
    """
    from pipelines.report.backtest_plot import plot_backtest

    svcs = doc.get("services") or {}
    cutoffs = [d["cutoff"] for d in svcs.values() if d.get("cutoff")]
    cutoff = max(cutoffs, key=pd.Timestamp) if cutoffs else None
    params: dict[str, Any] = {"services": ",".join(svcs), "cutoff": cutoff}
    for svc, d in svcs.items():
        origins = d.get("origins") or []
        params.update({f"rt.{svc}.status": d.get("status"), f"rt.{svc}.units": d.get("units"),
                       f"rt.{svc}.method": d.get("method"), f"rt.{svc}.horizon_h": d.get("horizon_h"),
                       f"rt.{svc}.origins": f"{origins[0]} .. {origins[-1]}" if origins else None})
    with tempfile.TemporaryDirectory() as td:
        js = Path(td) / "realtime_backtest.json"
        js.write_text(json.dumps(doc, indent=1, default=str))
        arts = {"backtest/realtime_backtest.json": js}
        if hours:
            png = Path(td) / "backtest_realtime.png"
            plot_backtest(hours, {k: str(d.get("units", "traffic/h")) for k, d in svcs.items()}, png)
            arts["plots/backtest_realtime.png"] = png
        return log_run(settings, "realtime", run_name("realtime", cutoff, on=on), params=params,
                       metrics=realtime_backtest_metrics(doc), artifacts=arts,
                       tags={"gpuplan.stage": stage, "gpuplan.kind": "realtime",
                             "mlflow.note.content": realtime_backtest_note(doc)})


def realtime_backtest_note(doc: Mapping[str, Any]) -> str:
    """The run's description (MLflow's ``mlflow.note.content`` tag, shown as "Description"): one line per service.

    ``<service>: day-ahead MAE <mae> <units> = <r168> x seasonal naive 168 h, <r24> x naive 24 h; P90 coverage
    <c> over <n> hours (<k> daily origins up to <cutoff>)``.
    """
    def r(v: Any) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    lines = ["Rolling-origin backtest of the real-time forecast (24 h ahead, each origin refitted on the hours "
             "before it):", ""]
    for svc, d in (doc.get("services") or {}).items():
        m = d.get("metrics") or {}
        lines.append(f"- {svc}: day-ahead MAE {m.get('mae', float('nan')):,.0f} {d.get('units')} = "
                     f"{r(m.get('mase_snaive168'))} x seasonal naive 168 h, {r(m.get('mase_naive24'))} x naive 24 h; "
                     f"P90 coverage {r(m.get('p90_coverage'))} over {d.get('n_hours')} hours ({d.get('n_days')} daily "
                     f"origins up to {d.get('cutoff')})")
    return "\n".join(lines)
