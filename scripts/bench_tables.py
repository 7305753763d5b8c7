"""Regenerate the tables of docs/benchmark.md from a bench.csv (issue 15): goals, over-seed aggregates, paired comparison.

Usage:
    .venv/bin/python scripts/bench_tables.py BENCH_CSV                        # print the markdown
    .venv/bin/python scripts/bench_tables.py BENCH_CSV --doc docs/benchmark.md  # replace the generated block
    .venv/bin/python scripts/bench_tables.py S0/bench.csv S1/bench.csv ...     # runs of separate seeds (--first-seed)
    .venv/bin/python scripts/bench_tables.py --issue30 A/bench.csv B/bench.csv --doc docs/benchmark.md  # issue 30's block

The block in the document lies between the lines ``<!-- BEGIN bench_tables -->`` and
``<!-- END bench_tables -->``. Run facts (wall time, load, verified plans) are read from
``bench.json`` beside the CSV when it is there; with several CSVs (one run per seed) each run's
wall time is listed and the one-run runtime goal is left unjudged (–), since no single run measured it. Every figure comes from
:mod:`pipelines.bench.aggregate`. Bad input (missing file or column, a non-number, a document
without the markers): one line on standard error, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.bench.aggregate import issue30_md, read_rows, tables_md  # noqa: E402
from pipelines.io.errors import InputError  # noqa: E402

BEGIN, END = "<!-- BEGIN bench_tables -->", "<!-- END bench_tables -->"
#: The markers of the issue-30 block (``--issue30``): its goals and the rows per scenario, share and seed.
BEGIN30, END30 = "<!-- BEGIN bench_tables issue30 -->", "<!-- END bench_tables issue30 -->"


def quick_in_tests() -> bool:
    """True when the test suite runs ``gpuplan bench --quick`` (tests/pipelines/bench/test_bench.py)."""
    p = ROOT / "tests" / "pipelines" / "bench" / "test_bench.py"
    return p.is_file() and '"--quick"' in p.read_text()


def replace_block(doc: str, block: str, where: str, begin: str = BEGIN, end: str = END) -> str:
    """``doc`` with the text between ``begin`` and ``end`` replaced by ``block``. Raises :class:`InputError` without both markers."""
    if begin not in doc or end not in doc or doc.index(begin) > doc.index(end):
        raise InputError(f"{where}: needs the lines {begin} and {end} (in that order) around the generated tables")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block}{end}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path, nargs="+", help="bench.csv written by gpuplan bench (several: concatenated)")
    ap.add_argument("--doc", type=Path, default=None, help="markdown file whose generated block is replaced")
    ap.add_argument("--issue30", action="store_true",
                    help="the issue-30 block instead (between the issue30 markers): its goals and every row per "
                         "scenario, preemptible share and seed; the CSVs may be of several shares")
    args = ap.parse_args(argv)
    try:
        df = pd.concat([read_rows(p) for p in args.csv], ignore_index=True)
        dup = df[df.duplicated(["scenario", "seed", "planner", "preemptible_share"])]
        if len(dup):
            r = dup.iloc[0]
            raise InputError(f"{r['scenario']}@{r['seed']}/{r['planner']}: the same row is in two CSVs")
        if args.issue30:
            block = issue30_md(df)
            if args.doc is None:
                sys.stdout.write(block)
                return 0
            if not args.doc.is_file():
                raise InputError(f"--doc {args.doc}: file not found")
            args.doc.write_text(replace_block(args.doc.read_text(), block, str(args.doc), BEGIN30, END30))
            print(f"{args.doc}: issue-30 block replaced from {', '.join(map(str, args.csv))}", file=sys.stderr)
            return 0
        if df["preemptible_share"].nunique() > 1:
            raise InputError("the CSVs are of several preemptible shares: the issue-15 tables take one (use --issue30)")
        runs = []
        for p in args.csv:
            meta = p.parent / "bench.json"
            if meta.is_file():
                j = json.loads(meta.read_text())
                runs.append({k: j.get(k) for k in ("wall_s", "load_before", "load_after", "verified_plans", "violations", "quick")})
        run = runs[0] if len(runs) == 1 and len(args.csv) == 1 else None
        if len(args.csv) > 1 and len(runs) == len(args.csv):
            run = {"wall_s": None, "runs": runs, "verified_plans": sum(r["verified_plans"] for r in runs),
                   "violations": sum(r["violations"] for r in runs), "quick": any(r.get("quick") for r in runs)}
        block = tables_md(df, run, quick_in_tests())
        if args.doc is None:
            sys.stdout.write(block)
            return 0
        if not args.doc.is_file():
            raise InputError(f"--doc {args.doc}: file not found")
        args.doc.write_text(replace_block(args.doc.read_text(), block, str(args.doc)))
    except InputError as e:
        print(str(e), file=sys.stderr)
        return 2
    print(f"{args.doc}: generated block replaced from {', '.join(map(str, args.csv))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
