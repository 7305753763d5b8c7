"""The nightly retraining of an operator's workspace: a time-ordered holdout and the promotion gate.

- :func:`split_at_cutoff`: the stored history up to the cut-off (the scheduled time of the
  nightly run), and its holdout: the jobs submitted in the last ``holdout_days`` before the cut-off.
- :func:`gate`: the new version becomes ``champion`` only if it is no worse than the current
  champion on the same holdout, by the mean pinball loss of its P50 and P90
  (:data:`GATE_METRIC`, hours; a proper scoring rule for quantiles, Gneiting & Raftery 2007),
  else it is the ``challenger`` and the reason is recorded. A holdout with fewer than
  ``min_holdout_runs`` finished runs cannot show that, so the champion stays (unless there is none).

The candidate scored on the holdout is trained on the history *before* the holdout; the version
registered is refitted on the whole history up to the cut-off (the holdout's days included). The
champion was trained at an earlier cut-off and may have seen part of the holdout, which can only
favour it: the gate errs towards keeping the champion.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd

#: The score the gate compares (lower is better): mean of the P50 and P90 pinball losses (hours).
GATE_METRIC = "mean_pinball_h"
#: Relative slack of "no worse" (float rounding only).
TOLERANCE = 1e-9


def split_at_cutoff(history: pd.DataFrame, cutoff: datetime, holdout_days: float) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                                          pd.DataFrame]:
    """``(upto, train, holdout)``: records submitted before ``cutoff``; of those, before / in the last ``holdout_days``.

    ``holdout`` keeps only jobs that ended by the cut-off (what was known then).
    """
    cut = pd.Timestamp(cutoff).tz_convert("UTC")
    sub = pd.to_datetime(history["submitted_at"], utc=True)
    upto = history[sub < cut]
    # a record that ended after the cut-off was pending or running then: the cut-off's view of it
    ended = pd.to_datetime(upto["ended_at"], utc=True)
    upto = upto[ended.isna() | (ended <= cut)]
    edge = cut - pd.Timedelta(days=holdout_days)
    s = pd.to_datetime(upto["submitted_at"], utc=True)
    return upto.reset_index(drop=True), upto[s < edge].reset_index(drop=True), upto[s >= edge].reset_index(drop=True)


def score(evaluation: dict[str, Any]) -> float:
    """:data:`GATE_METRIC` of an evaluation (:func:`forecasters.scheduler.evaluate_scheduler_model`)."""
    m = evaluation["metrics"]
    return (float(m["pinball_p50_h"]) + float(m["pinball_p90_h"])) / 2.0


def gate(candidate: dict[str, Any] | None, champion: dict[str, Any] | None, min_holdout_runs: int) -> tuple[bool, str]:
    """``(promote, reason)`` for a new version given both evaluations on the same holdout.

    ``candidate`` None: the holdout had no finished run to score. ``champion`` None: there is no champion yet.
    """
    if champion is None and candidate is None:
        return True, "first version (no champion yet; no finished run in the holdout to score it)"
    if champion is None:
        return True, f"first version (no champion yet); holdout {GATE_METRIC} {score(candidate or {}):.4f}"
    n = 0 if candidate is None else int(candidate["metrics"]["n"])
    if candidate is None or n < min_holdout_runs:
        return False, (f"holdout has {n} finished runs (< min_holdout_runs = {min_holdout_runs}): cannot show the "
                       f"new version is no worse; the champion stays")
    new, old = score(candidate), score(champion)
    if new <= old * (1 + TOLERANCE):
        return True, f"holdout {GATE_METRIC} {new:.4f} <= champion {old:.4f} on {n} runs"
    return False, f"holdout {GATE_METRIC} {new:.4f} > champion {old:.4f} on {n} runs: kept as challenger"
