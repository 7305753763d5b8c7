"""How far below persistence can a one-hour-ahead forecast get on the four real series? (DESIGN §4.4)

Usage: .venv/bin/python benchmarks/hourly_ceiling_real.py [--shared-data DIR] [--series NAME ...] [--no-lightgbm]

Evidence for the hourly target (<= 0.95 x persistence's MAE): the same series, origins and scored hours as
``benchmarks/forecast_realtime_real.py`` (every local midnight with >= 168 h of history; every hour with data),
persistence ``y[t-1]`` as there. Each model forecasts ``y[t]`` from the hours before ``t``; its coefficients
are refitted at every origin on the 28 days before it only (hours whose value or previous hour is a masked
gap left out), so nothing is fitted on the hours scored, except the last line.

Features (all known at ``t - 1``): ``d1 = y[t-1] - y[t-2]``, ``d2 = y[t-2] - y[t-3]`` (AR terms on the
differences: hourly means of an integrated process have MA(1) differences, Working 1960), ``gap7 = m7(t) -
y[t-1]`` and ``seas7 = m7(t) - m7(t-1)`` (``m7`` the mean of the same hour over the 7 days before),
``d24 = y[t-24] - y[t-25]``, ``gap24 = y[t-24] - y[t-1]``, ``hour`` (UTC hour of day) and ``d168 =
y[t-168] - y[t-169]``. Models of the change ``y[t] - y[t-1]``:

* ``lad:<features>``: least absolute deviations (:func:`forecasters.realtime.hourly.lad_fit`, the score is
  MAE) on the listed features, no intercept (all coefficients 0 = persistence);
* ``lightgbm``: LightGBM (objective L1, 100 trees, learning rate 0.05, 8 leaves) on all eight features;
* ``oracle (in-sample)``: LAD on the 7 numeric features plus an intercept fitted ON THE SCORED HOURS
  themselves: not a forecast, an optimistic bound for this model class.

Printed: each model's MAE / persistence's MAE per series.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

WINDOW_H = 28 * 24
FEATURES = ("d1", "d2", "gap7", "seas7", "d24", "gap24", "hour", "d168")
LAD_SETS = {"lad:d1": ("d1",), "lad:d1,d2": ("d1", "d2"), "lad:seas7": ("seas7",), "lad:gap7,seas7": ("gap7", "seas7"),
            "lad:gap24,seas7": ("gap24", "seas7"), "lad:d1,d2,gap7,seas7,d24,gap24": ("d1", "d2", "gap7", "seas7",
                                                                                        "d24", "gap24")}


def _features(y: np.ndarray, hours: np.ndarray) -> np.ndarray:
    """Feature matrix (n, 8) of every hour (NaN where a lag is missing)."""
    n = len(y)
    tot, cnt = np.zeros(n), np.zeros(n)
    for k in range(1, 8):
        lag = 24 * k
        if lag < n:
            tot[lag:] += y[:-lag]
            cnt[lag:] += 1
    m7 = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
    dy = np.r_[np.nan, np.diff(y)]
    f = np.full((n, len(FEATURES)), np.nan)
    f[3:, 0], f[3:, 1] = dy[2:-1], dy[1:-2]
    f[1:, 2], f[1:, 3] = m7[1:] - y[:-1], m7[1:] - m7[:-1]
    f[25:, 4], f[24:, 5] = dy[1:-24], y[:-24] - y[23:-1]
    f[:, 6] = hours
    f[169:, 7] = dy[1:-168]
    return f


def evaluate(name: str, df, timezone: str, use_lightgbm: bool) -> dict[str, float]:
    """Ratios to persistence of each model (module docstring) on one series."""
    import pandas as pd

    from forecasters.realtime import ingest
    from forecasters.realtime.hourly import lad_fit

    series, diag = ingest(df, timezone)
    y = series.to_numpy()
    masked = series.index.isin(pd.DatetimeIndex(pd.to_datetime(diag["imputed"], utc=True)))
    local = series.index.tz_convert(timezone)
    first = next(i for i, (ts, lt) in enumerate(zip(series.index, local))
                 if lt.hour == 0 and ts >= series.index[0] + pd.Timedelta(hours=168))
    origins = list(range(first, len(y) - 23, 24))
    f = _features(y, series.index.hour.to_numpy().astype(float))
    dy = np.r_[np.nan, np.diff(y)]
    sae: dict[str, float] = {}
    pers = 0.0
    scored = []
    for o in origins:
        hrs = np.array([i for i in range(o, o + 24) if not masked[i]])
        scored.append(hrs)
        pers += float(np.abs(y[hrs] - y[hrs - 1]).sum())
        tr = np.arange(max(4, o - WINDOW_H), o)
        tr = tr[~masked[tr] & ~masked[tr - 1]]
        for label, cols in LAD_SETS.items():
            idx = [FEATURES.index(c) for c in cols]
            ok = tr[np.isfinite(f[tr][:, idx]).all(axis=1)]
            b = lad_fit(f[ok][:, idx], dy[ok])
            pred = y[hrs - 1] + np.nan_to_num(f[hrs][:, idx]) @ b
            sae[label] = sae.get(label, 0.0) + float(np.abs(y[hrs] - pred).sum())
        if use_lightgbm:
            import lightgbm as lgb

            model = lgb.LGBMRegressor(objective="l1", n_estimators=100, learning_rate=0.05, num_leaves=8,
                                      min_child_samples=20, verbose=-1, n_jobs=1)
            model.fit(np.nan_to_num(f[tr]), dy[tr])
            pred = y[hrs - 1] + model.predict(np.nan_to_num(f[hrs]))
            sae["lightgbm"] = sae.get("lightgbm", 0.0) + float(np.abs(y[hrs] - pred).sum())
    allh = np.concatenate(scored)
    allh = allh[~masked[allh - 1]]
    num = [FEATURES.index(c) for c in FEATURES if c != "hour"]
    x = np.column_stack([np.nan_to_num(f[allh][:, num]), np.ones(allh.size)])
    b = lad_fit(x, dy[allh])
    out = {k: v / pers for k, v in sae.items()}
    out["oracle (in-sample)"] = float(np.abs(dy[allh] - x @ b).sum() / np.abs(dy[allh]).sum())
    out["_origins"] = len(origins)
    return out


def main() -> int:
    from forecast_realtime_real import load_series, shared_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared-data", help="folder with philly-derived-2017/ and alibaba-openb-gpu-2023/")
    ap.add_argument("--series", nargs="*", help="only these series (servegen-m-small servegen-m-mid philly openb)")
    ap.add_argument("--no-lightgbm", action="store_true", help="skip the LightGBM model")
    args = ap.parse_args()
    data, notes = load_series(shared_dir(args.shared_data))
    for note in notes:
        print(f"note: {note}")
    names = [n for n in data if not args.series or n in args.series]
    results = {n: evaluate(n, data[n][0], data[n][1], not args.no_lightgbm) for n in names}
    models = [k for k in next(iter(results.values())) if not k.startswith("_")] if results else []
    print("one hour ahead, MAE / persistence's MAE (y[t-1]) on the benchmark's hours:")
    print(f"{'model':34s} " + " ".join(f"{n:>16s}" for n in names))
    print(f"{'origins':34s} " + " ".join(f"{results[n]['_origins']:16d}" for n in names))
    for m in models:
        print(f"{m:34s} " + " ".join(f"{results[n][m]:16.3f}" for n in names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
