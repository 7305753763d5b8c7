"""Holdout check of the job forecasters on the shipped history AND on a fresh generated world.

A guard against tuning to the shipped holdout: every kind is fitted on the earliest 80 % of
its jobs and evaluated on the latest 20 % (``forecasters.jobs.time_split``), once on the shipped
history (``data/histories``, generator seed 0) and once on a fresh world drawn with
``generate_history(kind, n, seed=1)`` with the same number of jobs ``n`` as the shipped file.
A change to the forecasters should improve both, not only the shipped one.

Usage::

    .venv/bin/python scripts/fresh_world_eval.py [--kind training ...] [--json]

Prints one table row per (kind, world): the model's MAE (h), MAPE, median APE and P10-P90
coverage, the MAE/MAPE of the per-variant median and analytic baselines, the model's MAE gain
over the per-variant median and the share of exact GPU counts. ``--json`` prints
``{"<world>": {"<kind>": <gpuplan train --json document>}}`` instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from domain import JOB_KINDS  # noqa: E402
from forecasters.generators import generate_history  # noqa: E402
from forecasters.jobs import evaluate, fit, predict, time_split  # noqa: E402
from pipelines.catalog import shipped_history  # noqa: E402

TEST_FRACTION = 0.2
FRESH_SEED = 1


def run(kind: str, history) -> dict:
    """Fit on the earliest 80 % of ``history``; :func:`forecasters.jobs.evaluate` on the rest.

    Adds ``"gpus_exact"``: the share of test jobs whose predicted GPU count equals ``gpus_used``.
    """
    train, test = time_split(history, TEST_FRACTION)
    model = fit(kind, train)
    doc = evaluate(model, test)
    kept = test[test["duration_h"] > 0]
    doc["gpus_exact"] = float((predict(model, kept)["gpus_pred"].to_numpy() == kept["gpus_used"].to_numpy()).mean())
    doc["duration_rounds"] = int(model.info["duration_rounds"])
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", action="append", choices=JOB_KINDS, help="kind(s) to check (default: all three)")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    args = ap.parse_args(argv)
    kinds = args.kind or list(JOB_KINDS)
    docs: dict[str, dict[str, dict]] = {"shipped": {}, f"fresh_seed{FRESH_SEED}": {}}
    for kind in kinds:
        shipped = shipped_history(kind)
        docs["shipped"][kind] = run(kind, shipped)
        docs[f"fresh_seed{FRESH_SEED}"][kind] = run(kind, generate_history(kind, len(shipped), seed=FRESH_SEED))
        print(f"{kind}: done", file=sys.stderr)
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    head = f"{'kind':16} {'world':12} {'MAE h':>8} {'MAPE':>6} {'medAPE':>6} {'cov':>6} | {'med MAE':>8} {'med MAPE':>8} | {'an MAE':>8} {'an MAPE':>7} | {'MAE vs med':>10} {'gpus ok':>7}"
    print(head)
    print("-" * len(head))
    for kind in kinds:
        for world, d in docs.items():
            m, b = d[kind]["metrics"], d[kind]["baselines"]
            med, an = b["per_variant_median"], b["analytic"]
            gain = 1.0 - m["mae_h"] / med["mae_h"]
            print(
                f"{kind:16} {world:12} {m['mae_h']:8.4f} {m['mape']:6.4f} {m['median_ape']:6.4f} "
                f"{m['coverage_p10_p90']:6.3f} | {med['mae_h']:8.3f} {med['mape']:8.3f} | "
                f"{an['mae_h']:8.4f} {an['mape']:7.4f} | {gain:10.1%} {d[kind]['gpus_exact']:7.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
