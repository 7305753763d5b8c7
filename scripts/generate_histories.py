"""Regenerate the shipped job histories under data/histories/ (bit for bit) and check their tail shape.

Usage:
    .venv/bin/python scripts/generate_histories.py            # (re)write the three parquet files
    .venv/bin/python scripts/generate_histories.py --check    # verify the shipped files equal a regeneration
    .venv/bin/python scripts/generate_histories.py --tail     # compare duration tails with Philly / Acme

The sizes and seeds are ``pipelines.io.job_io.SHIPPED``; the generator is
``forecasters.generators.generate_history``. ``--tail`` reads the public traces under
``../shared/data`` (or ``--shared DIR``) when present.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    from forecasters.generators import generate_history, tail_shape
    from pipelines.catalog import history_path
    from pipelines.io.job_io import SHIPPED, write_history

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare shipped files with a regeneration")
    ap.add_argument("--tail", action="store_true", help="print tail-shape comparison with Philly/Acme")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"), help="folder of the public traces")
    args = ap.parse_args(argv)

    status = 0
    for kind, (n, seed) in SHIPPED.items():
        frame = generate_history(kind, n, seed)
        path = history_path(kind)
        if args.check:
            shipped = pd.read_parquet(path)
            try:
                pd.testing.assert_frame_equal(shipped, frame, check_exact=True)
                print(f"{kind}: {path.name} equals generate_history({kind!r}, {n}, {seed})", file=sys.stderr)
            except AssertionError as exc:
                print(f"{kind}: {path.name} DIFFERS: {str(exc).splitlines()[0]}", file=sys.stderr)
                status = 1
        elif not args.tail:
            write_history(frame, path)
            print(f"{kind}: wrote {path} ({path.stat().st_size} bytes, {len(frame)} rows)", file=sys.stderr)
    if args.tail:
        shared = Path(args.shared)
        out: dict[str, dict] = {}
        for kind, (n, seed) in SHIPPED.items():
            out[f"generated_{kind}"] = tail_shape(generate_history(kind, n, seed)["duration_h"].to_numpy())
        philly = shared / "philly-derived-2017" / "philly_runtime.csv"
        if philly.exists():
            out["philly_runtime_s"] = tail_shape(pd.read_csv(philly)["runtime"].to_numpy())
        acme = shared / "acme-trace-summary" / "cluster_summary.csv"
        if acme.exists():
            summ = pd.read_csv(acme)
            for _, row in summ.iterrows():
                if pd.notna(row.get("med_run_time_gpu")) and row["med_run_time_gpu"] > 0:
                    out[f"acme_summary_{row['id']}"] = {
                        "median_s": float(row["med_run_time_gpu"]),
                        "mean_over_median": float(row["avg_run_time_gpu"] / row["med_run_time_gpu"]),
                    }
        print(json.dumps(out, indent=1))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
