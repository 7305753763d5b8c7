"""Derive the shipped real-trace windows (data/traces/) from the shared public traces, and print their offered load.

Usage:
    .venv/bin/python scripts/derive_trace_windows.py [--source ../shared/data] [--out data/traces]
    .venv/bin/python scripts/derive_trace_windows.py --check    # re-derive into a temporary folder, byte-compare

Writes ``alibaba_openb_window.csv`` (scenario ``real_trace``, trace days 122-123),
``alibaba_openb_window_b.csv`` (``real_trace_b``, days 116-117) and ``servegen_m-small_30min.csv``
(both) through :func:`pipelines.catalog.derive_traces`; every mapping is in data/traces/README.md.
Then builds each scenario at seed 0 and prints its cluster, job count, GPU-hours and offered load
(:func:`optimizer.scenarios.offered_load_total`: GPU-h demanded / GPU-h available over the 48 h window).
``--check`` exits 1 when a re-derived file differs from the shipped one. The source defaults to
``$GPUPLAN_SHARED_DATA`` or ``../shared/data`` beside the clone; a missing source exits 2.
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
    PUBLIC_TRACE_SOURCES,
    SHIPPED_FILES,
    TRACE_DIR,
    TRACE_WINDOWS,
    derive_traces,
    load_real_trace,
)
from pipelines.io.errors import InputError  # noqa: E402

#: The files this script writes, relative to the data folder.
WINDOW_FILES = (SHIPPED_FILES["trace_pods"], SHIPPED_FILES["trace_pods_b"], SHIPPED_FILES["trace_serve"])


def default_source() -> Path:
    """``$GPUPLAN_SHARED_DATA``, else ``../shared/data`` beside the clone."""
    return Path(os.environ.get("GPUPLAN_SHARED_DATA", ROOT.parent / "shared" / "data"))


def window_summary(trace_dir: Path) -> list[dict]:
    """Per real-trace scenario (seed 0): cluster GPUs, jobs, batch and real-time GPU-h in the window, offered load."""
    out = []
    for name in TRACE_WINDOWS:
        sc = build(name, 0, trace=load_real_trace(trace_dir, name))
        w = sc.n_steps
        h = sc.cluster.step_minutes / 60
        batch = sum(j.gpus * min(j.true_steps, max(0, w - j.arrival_step)) for j in sc.jobs) * h
        rt = sum(sum(s.demand_true[:w]) for s in sc.services) * h
        out.append({"scenario": name, "n_gpus": sc.cluster.n_gpus, "jobs": len(sc.jobs), "batch_gpu_h_in_window": batch,
                    "rt_gpu_h": rt, "capacity_gpu_h": sc.cluster.n_gpus * w * h,
                    "offered_load": sc.params["offered_load_total"]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=None, help="folder of the shared public traces")
    ap.add_argument("--out", type=Path, default=ROOT / "data", help="data folder to write (traces/ inside it)")
    ap.add_argument("--check", action="store_true", help="derive into a temporary folder and byte-compare with --out")
    args = ap.parse_args(argv)
    src = args.source or default_source()
    missing = [p for p in PUBLIC_TRACE_SOURCES.values() if not (src / p).is_file()]
    if missing:
        print(f"--source {src}: missing {missing[0]} (the shared public traces)", file=sys.stderr)
        return 2
    try:
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                derive_traces(src, Path(tmp))
                bad = [f for f in WINDOW_FILES
                       if not (args.out / f).is_file() or (Path(tmp) / f).read_bytes() != (args.out / f).read_bytes()]
            for f in bad:
                print(f"{args.out / f}: differs from its re-derivation", file=sys.stderr)
            print("check: " + ("FAILED" if bad else f"{len(WINDOW_FILES)} files byte-identical"))
            return 1 if bad else 0
        summary = derive_traces(src, args.out)
    except InputError as e:
        print(str(e), file=sys.stderr)
        return 2
    for name, s in summary.items():
        print(f"{name}: {s}")
    trace_dir = args.out / Path(SHIPPED_FILES["trace_pods"]).parent if args.out != ROOT / "data" else TRACE_DIR
    for r in window_summary(trace_dir):
        print(f"{r['scenario']}: {r['n_gpus']} GPUs, {r['jobs']} jobs; batch {r['batch_gpu_h_in_window']:.1f} GPU-h "
              f"in the window + real-time {r['rt_gpu_h']:.1f} GPU-h over {r['capacity_gpu_h']:.0f} GPU-h available: "
              f"offered load {r['offered_load']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
