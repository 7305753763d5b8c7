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
champion was refitted up to its own earlier cut-off, so both are scored only on the holdout rows
submitted after that cut-off (:func:`pipelines.models.scheduler.unseen_by_champion`): rows neither saw.
Until enough such rows exist (``min_holdout_runs``) the champion stays and the new version is the
``challenger``.
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


#: The job forecasters' gate metric (lower is better): the P50's mean absolute error on the holdout (hours).
JOB_GATE_METRIC = "mae_h"
#: The strongest baseline a job forecaster must match: the kind's noise-free analytic (physics) duration
#: (:func:`forecasters.jobs.evaluate`'s ``baselines["analytic"]``, the prior the boosting starts from).
JOB_GATE_BASELINE = "analytic"


def analytic_ratio(doc: dict[str, Any]) -> float:
    """The model's holdout MAE over the analytic baseline's (``doc``: :func:`forecasters.jobs.evaluate`); 1.0 = only matches it."""
    return float(doc["metrics"][JOB_GATE_METRIC]) / float(doc["baselines"][JOB_GATE_BASELINE][JOB_GATE_METRIC])


#: Relative slack of "no worse than the analytic baseline": 1 % of its holdout MAE. The shipped generated
#: histories follow the prior, so the boosting can only match it: measured ratios 1.0011 (training),
#: 1.0000 (quantization), 1.0062 (batch inference) on 796 / 594 / 597 held-out jobs (seed 0,
#: ``pipelines.stages.models.train`` on ``data/jobs``). A ratio inside the slack is reported as a match, never as a win.
ANALYTIC_TOLERANCE = 0.01


def job_gate(candidate: dict[str, Any], champion: dict[str, Any] | None) -> tuple[bool, str]:
    """``(promote, reason)`` of a job forecaster version; both evaluations on the same holdout.

    The rule (issue 33): the new version becomes ``champion`` only if its holdout MAE of the P50
    (:data:`JOB_GATE_METRIC`, hours) is no worse than the analytic baseline's on that holdout (within
    :data:`ANALYTIC_TOLERANCE`, said as "matches" when above it) **and** no worse than the current
    champion's on the same holdout (within :data:`TOLERANCE`; None: there is none); else it is the
    ``challenger``. ``candidate``, ``champion``: :func:`forecasters.jobs.evaluate` documents.
    """
    new = float(candidate["metrics"][JOB_GATE_METRIC])
    base = float(candidate["baselines"][JOB_GATE_BASELINE][JOB_GATE_METRIC])
    n = int(candidate["n_test"])
    r = new / base
    ratio = (f"{r:.4f} × analytic baseline" + (": it only matches the analytic baseline" if r >= 1 - ANALYTIC_TOLERANCE
                                                else ""))
    if new > base * (1 + ANALYTIC_TOLERANCE):
        return False, (f"holdout MAE {new:.4f} h > analytic baseline {base:.4f} h + {ANALYTIC_TOLERANCE:.0%} on {n} jobs "
                       f"({r:.4f} × analytic baseline): kept as challenger")
    if champion is None:
        return True, f"first version; holdout MAE {new:.4f} h vs analytic baseline {base:.4f} h on {n} jobs ({ratio})"
    old = float(champion["metrics"][JOB_GATE_METRIC])
    if new > old * (1 + TOLERANCE):
        return False, f"holdout MAE {new:.4f} h > champion {old:.4f} h on {n} jobs ({ratio}): kept as challenger"
    return True, (f"holdout MAE {new:.4f} h <= champion {old:.4f} h on {n} jobs, analytic baseline {base:.4f} h "
                  f"({ratio})")
