"""Real-time coverage risk from measured calibration (DESIGN §6.4).

The plan gives every service at least its P90 demand forecast, so "planned below the P90" is empty by
construction; the risk is that the P90 itself is too low. It is measured on the run's forecast
against actual (``bands``: each service's forecast fitted up to 24 h before the plan start and set
against the last 24 actual hours, :func:`pipelines.stages.realtime.fit_realtime_forecasts`), never on the
hours the forecast was fitted on:

- **measured P90 coverage** per service and local hour-of-day band (:data:`HOUR_BANDS` bands of 6 h on
  the service's clock): the share of scored hours with actual ≤ P90, hours above P90 and the longest run of them. A
  service whose coverage over the day is below :data:`COVERAGE_TARGET` (0.9 for the P90) is flagged.
- **P(demand > plan)** per service and step, empirical: the recent forecast ratios ``r = actual / P50``
  (scored hours with P50 > 0) of the step's hour band when the band has at least
  :attr:`~forecasters.realtime.CombineSettings.min_band_residuals` of them, else of the whole day
  (the combination's own pooling rule), each applied to the step's P50 traffic and converted to GPUs
  like the forecast (:func:`forecasters.realtime.to_gpus`, the service's capacity, headroom, minimum
  and replica size; no upper clip, so demand beyond ``max_gpus`` counts): the share of ratios whose GPU
  need exceeds the planned GPUs. The ratios are of 24 h-ahead forecasts, while the plan's first hours
  use the hourly-anchored forecast, so early steps are judged conservatively. Without the service's
  settings or the P50 traffic (a plan of a given problem file) the normal approximation between the
  P50 and P90 GPU quantiles is used instead (:func:`exceed_probability`), and said so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecasters.realtime import CombineSettings, to_gpus
from pipelines.report.basics import ReportInputs, frame, hours_text, plural, step_ts

Z90 = 1.2815515655446004  # standard normal 0.9 quantile
_COMBINE = CombineSettings()
#: The P90's target coverage: the quantile the plan is given (DESIGN §4.4).
COVERAGE_TARGET = float(_COMBINE.p90_quantile)
#: Local hour-of-day bands of the measured coverage: 4 bands of 6 h. The forecast's own P90 is pooled over
#: the day (``CombineSettings.hour_bands`` = 1 since issue 16: 6-h bands were measured to cover less), but the
#: report still shows in which part of the day the misses fall (issue 14: coverage per service and hour band).
HOUR_BANDS = 4
#: Fewer recent ratios than this in a band: the whole day's ratios (the combination's rule).
MIN_BAND_RATIOS = int(_COMBINE.min_band_residuals)
#: Upper clip for the GPU need of a recent ratio (demand beyond ``max_gpus`` still exceeds the plan).
_NO_CLIP = 1 << 30


def _norm_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def exceed_probability(alloc: float, p50: float, p90: float) -> float:
    """P(demand > alloc) for a demand with median ``p50`` and 0.9-quantile ``p90`` (normal).

    σ = (P90 − P50) / z₀.₉ with z₀.₉ = 1.2816. Degenerate band (p90 <= p50): 1 when alloc < p50,
    else 0.
    """
    sigma = (p90 - p50) / Z90
    if sigma <= 0:
        return 1.0 if alloc < p50 else 0.0
    return _norm_sf((alloc - p50) / sigma)


@dataclass(frozen=True)
class BandCoverage:
    """Measured coverage of one hour band: ``label`` (``"00-06"``), hours scored, hours covered."""

    label: str
    hours: int
    covered: int

    @property
    def coverage(self) -> float | None:
        """Covered / scored, None when nothing was scored."""
        return self.covered / self.hours if self.hours else None


@dataclass(frozen=True)
class ServiceCalibration:
    """One service's measured calibration and its P(demand > plan) per step.

    Attributes:
        service: name; ``timezone``: the clock of its hour bands.
        hours / covered: scored recent hours and those with actual ≤ P90.
        above_h / longest_above_h: hours above P90 and the longest run of them; ``longest_from``: its start.
        bands: per hour band (:class:`BandCoverage`).
        exceed: P(demand > plan) per step, shape (H,); ``method``: ``"empirical"`` or ``"normal"``.
        target: :data:`COVERAGE_TARGET`.
    """

    service: str
    timezone: str
    hours: int
    covered: int
    above_h: int
    longest_above_h: int
    longest_from: pd.Timestamp | None
    bands: tuple[BandCoverage, ...]
    exceed: np.ndarray
    method: str
    target: float = COVERAGE_TARGET
    planned: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))

    @property
    def coverage(self) -> float | None:
        """Measured P90 coverage over the scored hours (None without any)."""
        return self.covered / self.hours if self.hours else None

    @property
    def flagged(self) -> bool:
        """True when the measured coverage is below the target."""
        c = self.coverage
        return c is not None and c < self.target - 1e-12

    def expected_hours_over(self, step_h: float) -> float:
        """Expected hours of the horizon with demand above the plan: Σ_t P_t × step hours."""
        return float(np.sum(self.exceed) * step_h)


def band_label(b: int, n_bands: int = HOUR_BANDS) -> str:
    """Hour band ``b`` of ``n_bands`` as local hours: band 0 of 4 -> ``"00-06"``."""
    w = 24 // n_bands
    return f"{b * w:02d}-{(b + 1) * w:02d}"


def _band_of(ts: pd.DatetimeIndex, timezone: str, n_bands: int = HOUR_BANDS) -> np.ndarray:
    return (ts.tz_convert(timezone).hour.to_numpy() * n_bands) // 24


def _longest_run(mask: np.ndarray) -> tuple[int, int]:
    """(length, start index) of the longest run of True in ``mask`` ((0, -1) without any)."""
    best, best_at, run = 0, -1, 0
    for i, m in enumerate(mask):
        run = run + 1 if m else 0
        if run > best:
            best, best_at = run, i - run + 1
    return best, best_at


def _need_gpus(traffic: np.ndarray, svc: object) -> np.ndarray:
    conv = dict(svc.gpu_conversion())  # type: ignore[attr-defined]
    conv["max_gpus"] = _NO_CLIP * int(conv.get("replica_gpus", 1))
    return to_gpus(np.maximum(traffic, 0.0), **conv)


def calibrate(inp: ReportInputs) -> list[ServiceCalibration]:
    """Every planned service's measured calibration and P(demand > plan) per step (module docstring).

    Services in :meth:`ReportInputs.service_names` order. A service without recent bands has 0 scored
    hours (never flagged) and the normal approximation.
    """
    H = inp.problem.horizon_steps
    bands = inp.bands if inp.bands is not None else pd.DataFrame(columns=["service", "ts", "actual", "p50", "p90"])
    out = []
    for name in inp.service_names():
        svc = inp.service(name)
        tz = str(getattr(svc, "timezone", "UTC") or "UTC")
        b = bands[bands["service"] == name].sort_values("ts")
        ok = b["actual"].notna().to_numpy()
        b = b[ok]
        ts = pd.DatetimeIndex(pd.to_datetime(b["ts"], utc=True))
        actual, p50, p90 = (b[c].to_numpy(float) for c in ("actual", "p50", "p90"))
        above = actual > p90
        run, at = _longest_run(above)
        band = _band_of(ts, tz)
        band_cov = tuple(BandCoverage(band_label(k), int((band == k).sum()), int(((band == k) & ~above).sum()))
                         for k in range(HOUR_BANDS))
        planned = np.asarray(inp.plan.service_gpus.get(name, (0,) * H)[:H], dtype=int)
        exceed, method = _exceedance(inp, name, svc, tz, planned, actual, p50, band)
        out.append(ServiceCalibration(
            service=name, timezone=tz, hours=int(len(actual)), covered=int((~above).sum()),
            above_h=int(above.sum()), longest_above_h=int(run), longest_from=ts[at] if at >= 0 else None,
            bands=band_cov, exceed=exceed, method=method, planned=planned))
    return out


def _exceedance(inp: ReportInputs, name: str, svc: object | None, tz: str, planned: np.ndarray, actual: np.ndarray,
                p50: np.ndarray, band: np.ndarray) -> tuple[np.ndarray, str]:
    H = len(planned)
    d = inp.demand[inp.demand["service"] == name].set_index("step")
    use = p50 > 0
    ratios, r_band = actual[use] / p50[use], band[use]
    if svc is not None and "traffic_p50" in d.columns and len(ratios):
        steps_ts = pd.DatetimeIndex([step_ts(inp, t) for t in range(H)])
        step_band = _band_of(steps_ts, tz)
        p = np.zeros(H)
        for t in range(H):
            if t not in d.index:
                continue
            rb = ratios[r_band == step_band[t]]
            r = rb if len(rb) >= MIN_BAND_RATIOS else ratios
            need = _need_gpus(r * float(d.loc[t, "traffic_p50"]), svc)
            p[t] = float(np.mean(need > planned[t]))
        return p, "empirical"
    p = np.zeros(H)
    for t in range(H):
        if t in d.index:
            p[t] = exceed_probability(planned[t], float(d.loc[t, "demand_gpus_p50"]), float(d.loc[t, "demand_gpus_p90"]))
    return p, "normal"


def calibration_rows(inp: ReportInputs, cal: list[ServiceCalibration]) -> pd.DataFrame:
    """The measured calibration as table rows: ``rt_calibration`` and ``rt_exceedance``.

    ``rt_calibration``: per service ``all`` then each hour band (``label``), ``value`` the coverage,
    ``count`` the hours scored, ``probability`` the target; ``rt_exceedance``: per service and step,
    ``probability`` = P(demand > plan), ``gpus`` the planned GPUs, ``label`` the method.
    """
    rows = []
    for c in cal:
        rows.append({"section": "rt_calibration", "service": c.service, "label": "all", "count": c.hours,
                     "value": c.coverage, "probability": c.target, "reason": calibration_text(c, inp.step_h)})
        for bc in c.bands:
            rows.append({"section": "rt_calibration", "service": c.service, "label": f"{bc.label} {c.timezone}",
                         "count": bc.hours, "value": bc.coverage, "probability": c.target,
                         "reason": f"{bc.covered} of {plural(bc.hours, 'hour')} at or below P90"})
        for t, p in enumerate(c.exceed):
            rows.append({"section": "rt_exceedance", "service": c.service, "step": t,
                         "start_ts": step_ts(inp, t),
                         "gpus": int(c.planned[t]) if t < len(c.planned) else None, "probability": float(p),
                         "label": c.method})
    return frame(rows)


def calibration_text(c: ServiceCalibration, step_h: float) -> str:
    """One service's measured calibration and exceedance in words (the page and the table's ``reason``)."""
    if not c.hours:
        head = "no recent forecast-against-actual hours: coverage not measured"
    else:
        head = (f"P90 covered {c.covered} of the last {plural(c.hours, 'hour')} ({c.coverage:.2f}, target "
                f"{c.target:.2f})")
        if c.above_h:
            head += (f"; actual above P90 for {plural(c.above_h, 'hour')}, longest run {hours_text(c.longest_above_h)}"
                     f" from {c.longest_from:%Y-%m-%d %H:%M}Z")
    if c.flagged:
        head = "BELOW TARGET: " + head + ": the P90 the plan is built on has been too low recently"
    pmax = float(np.max(c.exceed)) if len(c.exceed) else 0.0
    how = ("recent forecast errors" if c.method == "empirical"
           else "normal approximation between the P50 and P90 forecasts, not measured")
    return (f"{head}. P(demand > plan) per step up to {pmax:.2f}; expected "
            f"{c.expected_hours_over(step_h):.1f} h of the horizon above plan ({how})")
