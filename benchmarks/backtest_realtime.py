"""Rolling-origin backtest of the real-time forecast on the shipped ServeGen series (issue 4).

Usage: .venv/bin/python benchmarks/backtest_realtime.py [--json] [--no-trend]

For each service in data/traffic/services.json: ingest the shipped hourly file (zone from services.json),
then forecast each day of the second week 24 h ahead from the history before it (re-ingested and refitted
per origin: :func:`forecasters.realtime.combine.fit_combined`, the forecast ``gpuplan run`` plans with),
and one hour ahead with the hourly mode. Prints MAE, MASE against seasonal naive (168 h), naive 24 h and
persistence, MAPE, P90 coverage and each candidate's own day-ahead MASE, with the issue's bars (day-ahead
<= 0.90 x naive-24 and <= 0.75 x seasonal-naive-168 MAE, hourly <= 0.95 x persistence, P90 coverage in
[0.85, 0.95]). The same numbers as ``gpuplan train --kind realtime``. For the four real series (ServeGen,
Philly, Alibaba openb) over every origin: benchmarks/forecast_realtime_real.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--no-trend", action="store_true",
                    help="sensitivity run: profile candidate without the linear trend (not the shipped default)")
    args = ap.parse_args()

    from forecasters.realtime import ProfileSettings, backtest, ingest
    from pipelines.io.traffic_io import read_traffic

    cfg = json.loads((ROOT / "data" / "traffic" / "services.json").read_text())
    results = {}
    for svc in cfg["services"]:
        t = time.perf_counter()
        df = read_traffic(ROOT / "data" / "traffic" / svc["file"])
        series, diag = ingest(df, svc["timezone"])
        settings = ProfileSettings(trend=False) if args.no_trend else None
        res = backtest(series, svc["timezone"], exclude=diag["imputed"], settings=settings)
        res.pop("hours", None)  # the per-hour forecast against actual (MLflow's plot): not part of this table
        res["seconds"] = round(time.perf_counter() - t, 2)
        res["masked_hours"] = len(diag["imputed"])
        res["outliers"] = diag["outliers"]
        results[svc["service"]] = res
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for name, res in results.items():
        print(f"\n{name}: {res['n_days']} origins {res['origins'][0]} .. {res['origins'][-1]}, "
              f"{res['masked_hours']} masked gap hours, outliers {res['outliers']}, {res['seconds']} s")
        print(f"  method (last origin): {res['method']} (status {res['status']})")
        print(f"  {'forecast':14s} {'MAE':>11s} {'MASE168':>8s} {'MASE24':>7s} {'MASE1h':>7s} {'MAPE%':>6s} "
              f"{'P90cov':>7s} {'n':>4s}  bars")
        for v, m in res["variants"].items():
            if v == "day_ahead":
                ok = m["mase_naive24"] <= 0.90 and m["mase_snaive168"] <= 0.75
                bar = f"MAE {'PASS' if ok else 'MISS'} (<= 0.90 x naive24, <= 0.75 x sN168)"
            else:
                ok = m["mase_persistence"] <= 0.95
                bar = f"MAE {'PASS' if ok else 'MISS'} (<= 0.95 x persistence)"
            cov = 0.85 <= m["p90_coverage"] <= 0.95
            print(f"  {v:14s} {m['mae']:11.0f} {m['mase_snaive168']:8.3f} {m['mase_naive24']:7.3f} "
                  f"{m['mase_persistence']:7.3f} {m['mape_pct']:6.2f} {m['p90_coverage']:7.3f} {m['n_hours']:4d}  "
                  f"{bar}, coverage {'PASS' if cov else 'MISS'}")
        for c, m in res["candidates"].items():
            print(f"  candidate {c:9s} {m['mae']:11.0f} {m['mase_snaive168']:8.3f} {m['mase_naive24']:7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
