"""The nightly promotion gate, the cut-off split, and the replan's freshness check (exact messages)."""

from __future__ import annotations

import pandas as pd
import pytest

from pipelines.stages.queue.store import StaleInputError, check_fresh
from pipelines.stages.retrain import gate, score, split_at_cutoff
from pipelines.workspace.sources.tabular import parse_jobs

NOW = pd.Timestamp("2025-03-16T16:00:00Z").to_pydatetime()


def _eval(p50: float, p90: float, n: int = 20) -> dict:
    return {"metrics": {"n": n, "pinball_p50_h": p50, "pinball_p90_h": p90}}


def test_gate_both_outcomes_and_small_holdouts():
    assert score(_eval(0.2, 0.4)) == pytest.approx(0.3)
    assert gate(_eval(0.2, 0.4), None, 10) == (True, "first version (no champion yet); holdout mean_pinball_h 0.3000")
    assert gate(_eval(0.2, 0.4), _eval(0.2, 0.4), 10) == (
        True, "holdout mean_pinball_h 0.3000 <= champion 0.3000 on 20 runs")
    assert gate(_eval(0.3, 0.4), _eval(0.2, 0.4), 10) == (
        False, "holdout mean_pinball_h 0.3500 > champion 0.3000 on 20 runs: kept as challenger")
    promote, why = gate(_eval(0.1, 0.1, n=4), _eval(0.2, 0.4), 10)
    assert not promote and why.startswith("holdout has 4 finished runs (< min_holdout_runs = 10)")
    assert gate(None, None, 10)[0] is True


def test_split_at_cutoff_keeps_what_was_known_then():
    f = parse_jobs(pd.DataFrame({
        "job_id": ["a", "b", "c", "d"],
        "submitted_at": ["2025-03-13T00:00:00Z", "2025-03-15T12:00:00Z", "2025-03-16T10:00:00Z",
                         "2025-03-16T17:00:00Z"],
        "started_at": ["2025-03-13T00:10:00Z", "2025-03-15T12:10:00Z", "2025-03-16T10:10:00Z", None],
        "ended_at": ["2025-03-13T02:00:00Z", "2025-03-15T14:00:00Z", "2025-03-16T18:00:00Z", None],
        "gpus": [1, 1, 1, 1]}), "UTC").frame
    upto, train, holdout = split_at_cutoff(f, NOW, holdout_days=2)
    # d was submitted after the cut-off; c ended after it (still running then): both unknown at the cut-off
    assert list(upto["job_id"]) == ["a", "b"]
    assert list(train["job_id"]) == ["a"] and list(holdout["job_id"]) == ["b"]


def test_fresh_inputs_pass_and_stale_ones_fail_with_their_age():
    check_fresh(pd.Timestamp("2025-03-16T15:00:00Z"), "squeue-a.json", pd.Timestamp("2025-03-16T15:50:00Z"), NOW, 90)
    with pytest.raises(StaleInputError) as e:
        check_fresh(pd.Timestamp("2025-03-15T13:55:00Z"), "squeue-b.json", pd.Timestamp("2025-03-16T15:50:00Z"),
                    NOW, 90)
    assert str(e.value) == ("queue export squeue-b.json is 1 d 2 h 5 min old (taken 2025-03-15T13:55:00Z, now "
                            "2025-03-16T16:00:00Z; [replan] max_input_age_min = 90): export and ingest a fresh one; "
                            "the previous plan stays published")
    with pytest.raises(StaleInputError, match=r"^traffic \(newest sample\) is 3 h 0 min old"):
        check_fresh(pd.Timestamp("2025-03-16T15:30:00Z"), "q", pd.Timestamp("2025-03-16T13:00:00Z"), NOW, 90)
    with pytest.raises(StaleInputError, match="no queue export has been ingested"):
        check_fresh(None, "", pd.Timestamp("2025-03-16T15:30:00Z"), NOW, 90)
