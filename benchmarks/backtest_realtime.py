"""Rolling-origin backtest of the real-time profile on the shipped ServeGen series (issue 4).

Usage: .venv/bin/python benchmarks/backtest_realtime.py [--json]

For each service in data/traffic/services.json: ingest the shipped hourly file (zone from services.json),
then forecast each day of the second week 24 h ahead from the history so far (refit per origin), also
with the planning-run level correction and with hourly recalibration. Prints MAE, MASE against seasonal
naive (168 h) and naive 24 h, MAPE and P90 coverage, and whether the issue's bars hold
(MAE <= 0.8 x seasonal-naive-168 MAE and P90 coverage in [0.85, 0.95]).
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
                    help="sensitivity run: profile without the linear trend (not the shipped default)")
    args = ap.parse_args()

    from forecasters.realtime import ProfileSettings, backtest, ingest
    from pipelines.traffic_io import read_traffic

    cfg = json.loads((ROOT / "data" / "traffic" / "services.json").read_text())
    results = {}
    for svc in cfg["services"]:
        t = time.perf_counter()
        df = read_traffic(ROOT / "data" / "traffic" / svc["file"])
        series, diag = ingest(df, svc["timezone"])
        settings = ProfileSettings(trend=not args.no_trend)
        res = backtest(series, svc["timezone"], exclude=diag["imputed"], outliers=diag["outliers"],
                       settings=settings)
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
        print(f"  method: {res['method']} (status at last origin: {res['status']})")
        hdr = f"  {'variant':16s} {'MAE':>11s} {'sNaive168':>11s} {'naive24':>11s} {'MASE168':>8s} " \
              f"{'MASE24':>7s} {'MAPE%':>6s} {'P90cov':>7s} {'n':>4s}  bars(MAE<=0.8xsN168, cov 0.85-0.95)"
        print(hdr)
        for v, m in res["variants"].items():
            mae_ok = m["mae"] <= 0.8 * m["mae_snaive168"]
            cov_ok = 0.85 <= m["p90_coverage"] <= 0.95
            print(f"  {v:16s} {m['mae']:11.0f} {m['mae_snaive168']:11.0f} {m['mae_naive24']:11.0f} "
                  f"{m['mase_snaive168']:8.3f} {m['mase_naive24']:7.3f} {m['mape_pct']:6.2f} "
                  f"{m['p90_coverage']:7.3f} {m['n_hours']:4d}  MAE {'PASS' if mae_ok else 'MISS'}, "
                  f"coverage {'PASS' if cov_ok else 'MISS'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
