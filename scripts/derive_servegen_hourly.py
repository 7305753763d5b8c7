"""Regenerate data/traffic/servegen_<model>_hourly.csv from the shared ServeGen aggregate.

Usage: .venv/bin/python scripts/derive_servegen_hourly.py [--source ../shared/data/servegen-bailian-llm-2025]

Settings (start date, zone) are read from data/traffic/services.json so that the README, the shipped files
and this script cannot disagree. The shipped files are committed; nothing needs ../shared at run time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.io.traffic_io import derive_servegen_hourly, write_csv_atomic  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    default_src = ROOT.parent / "shared" / "data" / "servegen-bailian-llm-2025"
    ap.add_argument("--source", type=Path, default=default_src)
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "traffic")
    args = ap.parse_args()
    cfg = json.loads((ROOT / "data" / "traffic" / "services.json").read_text())
    agg = pd.read_csv(args.source / "aggregate_10min.csv")
    for svc in cfg["services"]:
        df = derive_servegen_hourly(agg, svc["source_model"], cfg["trace_start_local"], svc["timezone"])
        out = args.out / svc["file"]
        write_csv_atomic(df, out)
        print(f"{out}: {len(df)} hours, peak {df['value'].max():.0f} {svc['units']}, "
              f"{336 - len(df)} hours with no valid window", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
