"""Derive the shipped heterogeneous openb windows (data/traces/openb_het_*.csv, issue 26) and print their offered load.

Usage:
    .venv/bin/python scripts/derive_het_windows.py [--source ../shared/data] [--out data]
    .venv/bin/python scripts/derive_het_windows.py --check    # re-derive into a temporary folder, byte-compare

Writes ``openb_het_nodes.csv`` (the node slice), ``openb_het_window_a.csv`` (scenario ``openb-het-a``, trace
days 122-123) and ``openb_het_window_b.csv`` (``openb-het-b``, days 116-117) through
:func:`pipelines.catalog.derive_het_traces`; every rule is in data/traces/README.md. Then builds each
scenario at seed 0 and prints its cluster, jobs, typed jobs and offered load. ``--check`` exits 1 when a
re-derived file differs from the shipped one; a missing source exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.scenarios import build  # noqa: E402
from pipelines.catalog import (  # noqa: E402
    HET_TRACE_WINDOWS,
    PUBLIC_TRACE_SOURCES,
    SHIPPED_FILES,
    derive_het_traces,
    load_real_trace,
)
from pipelines.io.errors import InputError  # noqa: E402

#: The files this script writes, relative to the data folder.
HET_FILES = (SHIPPED_FILES["het_nodes"], SHIPPED_FILES["het_pods_a"], SHIPPED_FILES["het_pods_b"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=None, help="folder of the shared public traces")
    ap.add_argument("--out", type=Path, default=ROOT / "data", help="data folder to write (traces/ inside it)")
    ap.add_argument("--check", action="store_true", help="derive into a temporary folder and byte-compare with --out")
    args = ap.parse_args(argv)
    src = args.source or Path(os.environ.get("GPUPLAN_SHARED_DATA", ROOT.parent / "shared" / "data"))
    keys = ("openb_pods_gpuspec", "openb_pods_multigpu", "openb_nodes")
    missing = [PUBLIC_TRACE_SOURCES[k] for k in keys if not (src / PUBLIC_TRACE_SOURCES[k]).is_file()]
    if missing:
        print(f"--source {src}: missing {missing[0]} (the shared public traces)", file=sys.stderr)
        return 2
    try:
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                derive_het_traces(src, Path(tmp))
                bad = [f for f in HET_FILES
                       if not (args.out / f).is_file() or (Path(tmp) / f).read_bytes() != (args.out / f).read_bytes()]
            for f in bad:
                print(f"{args.out / f}: differs from its re-derivation", file=sys.stderr)
            print("check: " + ("FAILED" if bad else f"{len(HET_FILES)} files byte-identical"))
            return 1 if bad else 0
        summary = derive_het_traces(src, args.out)
    except InputError as e:
        print(str(e), file=sys.stderr)
        return 2
    for name, s in summary.items():
        print(f"{name}: {s}")
    for name in HET_TRACE_WINDOWS:
        sc = build(name, 0, trace=load_real_trace(args.out / "traces", name))
        p = sc.params
        print(f"{name}: {p['nodes']} nodes, {p['n_gpus']} GPUs, {p['n_jobs']} jobs ({p['typed_jobs']} typed, "
              f"{p['dropped_no_eligible_node']} dropped), ls_scale {p['ls_scale']}, offered load {p['offered_load_total']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
