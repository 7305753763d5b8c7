"""Stale inputs are said at the top of the risk report and of the plan artifact (issue 33)."""

from __future__ import annotations

from pathlib import Path

from pipelines.flows.observe import plan_markdown
from pipelines.report.basics import stale_inputs_line

HEAD = {"newest_input": {"what": "traffic", "ts": "2025-03-16 15:00Z"}, "input_age_h_now": 15012.4}


def test_stale_line_past_the_limit_only():
    assert stale_inputs_line(HEAD) == ("**inputs 15,012 h old** (newest input: traffic at 2025-03-16 15:00Z; "
                                       "limit 1 h)")
    assert stale_inputs_line({**HEAD, "input_age_h_now": 0.9}) is None
    assert stale_inputs_line(None) is None and stale_inputs_line({"input_age_h_now": None}) is None


def test_plan_artifact_starts_with_the_age_of_stale_inputs(tmp_path):
    md = plan_markdown({"run": "20261201T1900Z_x", "status": "optimal", "headline": HEAD}, None, Path(tmp_path), {})
    assert md.splitlines()[:3] == [stale_inputs_line(HEAD), "", "# Plan 20261201T1900Z_x"]
    fresh = plan_markdown({"run": "r", "status": "optimal", "headline": {**HEAD, "input_age_h_now": 0.5}}, None,
                          Path(tmp_path), {})
    assert fresh.startswith("# Plan r\n")
