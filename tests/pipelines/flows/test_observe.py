"""What a Prefect run shows (pipelines.flows.observe): log lines, the plan summary, estimated starts, retraining rows.

Hand-made summaries and risk-report rows; every expected string and number is written out.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from pipelines.flows import observe, retrain_rows

T0 = pd.Timestamp("2025-03-16T16:00Z")


def _report() -> pd.DataFrame:
    """Three queued jobs (one not started within the horizon) and two jobs at risk, as pipelines.report writes them."""
    rows = [
        {"section": "queue_eta", "job_id": "B", "kind": "training", "start_step": 3, "end_step": 7,
         "start_ts": T0 + pd.Timedelta(minutes=90), "end_ts": T0 + pd.Timedelta(minutes=210), "gpus": 8, "value": 2.0,
         "reason": "needs 8 GPUs; only 4 free at step 0"},
        {"section": "queue_eta", "job_id": "A", "kind": "quantization", "start_step": 0, "end_step": 2,
         "start_ts": T0, "end_ts": T0 + pd.Timedelta(hours=1), "gpus": 2, "value": 1.0, "reason": "starts at release"},
        {"section": "queue_eta", "job_id": "C", "kind": "training", "start_step": None, "end_step": None,
         "start_ts": T0 + pd.Timedelta(hours=24), "end_ts": None, "gpus": 64, "value": 1.0,
         "reason": "after the 24 h horizon"},
        {"section": "job_at_risk", "job_id": "B", "kind": "training", "start_step": 3,
         "start_ts": T0 + pd.Timedelta(minutes=90), "end_ts": pd.Timestamp("2025-03-17T00:21:30Z"), "gpus": 8,
         "value": 2.0, "reason": "P90 finish after deadline | late"},
        {"section": "job_at_risk", "job_id": "C", "kind": "training", "start_step": None, "start_ts": None,
         "end_ts": None, "gpus": 64, "value": 1.0, "reason": "not started within the horizon"},
        {"section": "idle_window", "start_step": 1, "end_step": 2, "start_ts": T0, "end_ts": T0, "gpus": 3,
         "value": 1.5, "reason": "3 GPUs free for 0.5 h"},
    ]
    df = pd.DataFrame(rows)
    for c in ("start_step", "end_step", "gpus"):
        df[c] = df[c].astype("Int64")
    for c in ("start_ts", "end_ts"):
        df[c] = pd.to_datetime(df[c], utc=True)
    return df


SUMMARY = {"run": "20250316T1600Z_abc", "plan_start": "2025-03-16T16:00:00+00:00", "planner": "milp",
           "status": "optimal", "source": "decomposition", "fallback": False, "objective": 3312.82, "bound": 3314.24,
           "mip_gap": 0.000428, "solve_s": 1.95,
           "metrics": {"planned_utilization_pct": 68.684, "planned_value": 1974.0, "jobs_started": 53.0,
                       "jobs_total": 54.0, "planned_rt_unmet_gpu_h": 0.0, "planned_rt_sla_pct": 100.0,
                       "idle_gpu_h": 370.0},
           "rt_status": {"m-small": ["degraded", "weekly seasonality needs more than 336 hourly points"]},
           "models": {"training": {"name": "gpuplan-training-forecaster", "version": "3", "alias": "champion"},
                      "scheduler": {"name": "gpuplan-scheduler-x", "version": None,
                                    "note": "no champion yet (no nightly retraining): fitted at plan time"}}}


def test_artifact_keys_are_lowercase_letters_digits_and_dashes():
    assert observe.artifact_key("plan-summary", "/srv/My Cluster_1") == "plan-summary-my-cluster-1"
    assert observe.artifact_key("estimated-starts", Path("/repo/data/demo")) == "estimated-starts-demo"
    assert observe.artifact_key("retrain-metrics", None) == "retrain-metrics-demo"


def test_instants_and_ages_as_text():
    assert observe.fmt_ts(pd.Timestamp("2025-03-17T00:21:30Z")) == "2025-03-17 00:21:30Z"
    assert observe.fmt_ts(datetime(2025, 3, 16, 19, 30, tzinfo=UTC)) == "2025-03-16 19:30Z"
    assert observe.fmt_ts(None) == "" and observe.fmt_ts(pd.NaT) == ""
    assert [observe.age_text(h) for h in (0.75, 1.0, 47.9, 49.0)] == ["45 min", "1.0 h", "47.9 h", "2.0 d"]


def test_inputs_age_at_the_plan_start_and_now():
    lines = observe.inputs_age_lines(T0, T0 - pd.Timedelta(hours=1), T0 + pd.Timedelta(hours=48),
                                     queue_at=T0 - pd.Timedelta(minutes=20), queue_file="squeue-1.json")
    assert lines == ["plan start 2025-03-16 16:00Z (now 2025-03-18 16:00Z)",
                     "traffic: newest hour 2025-03-16 15:00Z, 1.0 h before the plan start, 2.0 d before now",
                     "queue export squeue-1.json taken 2025-03-16 15:40Z, 20 min before the plan start, 2.0 d "
                     "before now"]
    assert observe.inputs_age_lines(T0, None, T0)[1] == "traffic: none read"


def test_headline_from_planned_metrics_counts_waiting_and_at_risk_jobs():
    rows = observe.headline_rows(SUMMARY, _report())
    assert rows == [("planned utilisation", "68.7 %"),
                    ("real-time P90 demand covered", "100.0 % (0.0 GPU-h short)"),
                    ("jobs started / waiting / at risk", "53 / 1 / 2 (of 54 queued)"),
                    ("idle GPU-hours over the horizon", "370.0"),
                    ("training forecaster", "gpuplan-training-forecaster v3"),
                    ("scheduler forecaster", "no champion yet (no nightly retraining): fitted at plan time")]


def test_headline_of_the_risk_report_in_the_pages_order():
    doc = {**SUMMARY, "headline": {
        "planned_utilization_pct": 68.684, "rt_covered_p50_pct": 100.0, "rt_covered_p90_pct": 99.87,
        "rt_coverage_target": 0.9, "rt_below_target": ["m-small"], "jobs_queued": 54, "jobs_start_now": 12,
        "jobs_start_later": 41, "jobs_waiting": 1, "jobs_at_risk": 2, "idle_gpu_h": 357.5,
        "newest_input": {"what": "traffic_hour", "ts": "2025-03-16 15:00Z"}, "input_age_h_at_plan_start": 1.0,
        "rt_services": {"m-small": {"recent_p90_coverage": 0.67}},
        "models": {"jobs": {"training": {"name": "gpuplan-training-forecaster", "version": "3"}}}}}
    assert observe.headline_rows(doc, None) == [
        ("planned utilisation", "68.7 %"), ("real-time demand covered (P50 / P90)", "100.0 % / 99.9 %"),
        ("services below P90 coverage target 0.90", "m-small"),
        ("jobs started / waiting / at risk", "53 / 1 / 2 (of 54 queued)"),
        ("idle GPU-hours over the horizon", "357.5"),
        ("newest input", "traffic_hour 2025-03-16 15:00Z (1.0 h before the plan start)"),
        ("training forecaster", "gpuplan-training-forecaster v3")]


def test_estimated_starts_earliest_first_and_not_started_last():
    rows = observe.starts_rows(_report())
    assert rows == [
        {"job_id": "A", "kind": "quantization", "priority": 1.0, "gpus": 2, "start_utc": "2025-03-16 16:00Z",
         "planned_end_utc": "2025-03-16 17:00Z", "reason": "starts at release"},
        {"job_id": "B", "kind": "training", "priority": 2.0, "gpus": 8, "start_utc": "2025-03-16 17:30Z",
         "planned_end_utc": "2025-03-16 19:30Z", "reason": "needs 8 GPUs; only 4 free at step 0"},
        {"job_id": "C", "kind": "training", "priority": 1.0, "gpus": 64, "start_utc": "after 2025-03-17 16:00Z",
         "planned_end_utc": "", "reason": "after the 24 h horizon"}]
    assert [r["job_id"] for r in observe.starts_rows(_report(), limit=2)] == ["A", "B"]
    assert observe.starts_rows(None) == [] and observe.starts_rows(pd.DataFrame()) == []


def test_plan_markdown_has_headline_jobs_at_risk_and_links(tmp_path):
    run_dir = tmp_path / "20250316T1600Z_abc"
    run_dir.mkdir()
    link = {"run_id": "r123", "experiment": "gpuplan-plans", "tracking_uri": "sqlite:////x/mlflow.db",
            "url": "http://127.0.0.1:5000/#/experiments/7/runs/r123"}
    md = observe.plan_markdown(SUMMARY, _report(), run_dir, link)
    assert md.startswith("# Plan 20250316T1600Z_abc\n")
    assert "Plan start **2025-03-16 16:00Z**; status **optimal** (verified), plan from `decomposition`." in md
    assert "Objective 3,313, bound 3,314, gap 0.04 %, solve 1.9 s." in md  # 1.95 rounds half to even
    assert "| jobs started / waiting / at risk | 53 / 1 / 2 (of 54 queued) |" in md
    assert "## Jobs at risk (2)" in md
    assert ("| B | training | 8 | 2025-03-16 17:30Z | 2025-03-17 00:21:30Z | P90 finish after deadline \\| late |"
            in md)
    assert "- `m-small`: **degraded** — weekly seasonality needs more than 336 hourly points" in md
    assert f"- run folder: [{run_dir}]({run_dir.as_uri()})" in md
    assert f"- risk report: [risk_report.md]({(run_dir / 'risk_report.md').as_uri()})" in md
    assert ("- MLflow run: [r123](http://127.0.0.1:5000/#/experiments/7/runs/r123) (experiment `gpuplan-plans` "
            "in `sqlite:////x/mlflow.db`)") in md
    (run_dir / "risk_report.html").write_text("<html></html>")  # the self-contained page, when written
    md = observe.plan_markdown(SUMMARY, _report(), run_dir, {**link, "url": None})
    assert f"- risk report: [risk_report.html]({(run_dir / 'risk_report.html').as_uri()})" in md
    assert "- MLflow run: `r123` (experiment `gpuplan-plans` in `sqlite:////x/mlflow.db`)" in md


def test_long_tables_stop_at_the_limit_and_say_how_many_more():
    rows = [{"a": i} for i in range(23)]
    text = observe.rows_table(rows, ["a"])
    assert text.count("\n| ") == 20 and text.endswith("… and 3 more (the run folder's `risk_report.parquet` has all)")
    assert observe.rows_table([], ["a"]) == "_none_"


def test_unflatten_gives_back_the_evaluation_document():
    flat = {"metrics.mae_h": 1.2, "metrics.mape": 0.1, "baselines.per_variant_median.mae_h": 11.0, "n_test": 796.0}
    assert retrain_rows.unflatten(flat) == {"metrics": {"mae_h": 1.2, "mape": 0.1},
                                       "baselines": {"per_variant_median": {"mae_h": 11.0}}, "n_test": 796.0}


def test_retraining_rows_put_each_model_beside_its_baselines_and_name_the_champion():
    doc = {"n_test": 796.0, "metrics": {"mae_h": 1.209, "mape": 0.102, "pinball_p90": 0.269,
                                        "coverage_p10_p90": 0.791},
           "baselines": {"per_variant_median": {"mae_h": 10.98, "mape": 2.19}, "analytic": {"mae_h": 1.208}}}
    rows = retrain_rows.job_model_rows("training", doc, {"version": "3", "alias": "champion"})
    assert [(r["model"], r["version"], r["alias"], r["mae"], r["mape_frac"], r["n_scored"]) for r in rows] == [
        ("LightGBM", "3", "champion", 1.209, 0.102, 796), ("baseline: per_variant_median", None, None, 10.98, 2.19, 796),
        ("baseline: analytic", None, None, 1.208, None, 796)]
    assert rows[0]["coverage_frac"] == 0.791 and rows[0]["coverage_of"] == "P10-P90" and set(rows[0]) == set(
        retrain_rows.RETRAIN_COLUMNS)
    night = {"promoted": False, "champion_version_before": "4", "reason": "kept as challenger",
             "candidate": {"metrics": {"mae_h": 2.0, "pinball_p90_h": 0.9, "coverage_p90": 0.85, "n": 40},
                           "baselines": {"time_limit": {"mae_h": 9.0, "pinball_p90_h": 3.0, "coverage_p90": 1.0,
                                                        "n": 40}, "global_median": None}},
             "champion": {"metrics": {"mae_h": 1.5, "pinball_p90_h": 0.7, "coverage_p90": 0.9, "n": 40}}}
    rows = retrain_rows.scheduler_rows(night, "5")
    assert [(r["model"], r["version"], r["alias"], r["mae"]) for r in rows] == [
        ("new version", "5", "challenger", 2.0), ("previous champion", "4", "champion", 1.5),
        ("baseline: time_limit", None, None, 9.0)]
    rt = {"services": {"m-small": {"units": "requests/h", "n_hours": 167,
                                   "metrics": {"mae": 808.0, "mase_snaive168": 0.71, "mase_naive24": 0.85, "mape": 0.17,
                                               "p90_coverage": 0.83},
                                   "hourly_recal": {"mae": 504.0, "mase_snaive168": 0.44, "mase_naive24": 0.53,
                                                    "mape": 0.10, "p90_coverage": 0.84},
                                   "baselines": {"snaive168": {"mae": 1144.0}, "naive24": {"mae": 951.0}}}}}
    rows = retrain_rows.realtime_rows(rt)
    assert [(r["forecaster"], r["model"], r["mae"], r["mae_units"], r["mae_ratio_vs_snaive168"], r["coverage_frac"])
            for r in rows] == [
        ("realtime m-small", "combination, day ahead", 808.0, "requests/h", 0.71, 0.83),
        ("realtime m-small", "combination, 1 h ahead", 504.0, "requests/h", 0.44, 0.84),
        ("realtime m-small", "baseline: snaive168", 1144.0, "requests/h", None, None),
        ("realtime m-small", "baseline: naive24", 951.0, "requests/h", None, None)]
    md = retrain_rows.retrain_markdown("2025-10-26", retrain_rows.job_model_rows("training", doc, {"version": "3",
                                                                                          "alias": "champion"}),
                                  ["real-time accuracy: MLflow run r1"])
    assert "- training: version **3** (MAE 1.2 h)" in md and "- real-time accuracy: MLflow run r1" in md


def test_the_stale_inputs_warning_names_which_input_is_newest(monkeypatch):
    """The flow's WARNING (before the queue is read) names what its "newest input" is: the traffic's newest hour
    here; the risk report's line also counts job submissions, so the two may name different instants."""
    from pipelines.flows import jobs, publish
    from pipelines.stages.realtime import IngestedTraffic

    seen: list[str] = []

    class Capture:
        def info(self, msg, *args):
            pass

        def warning(self, msg, *args):
            seen.append(msg % args)

    monkeypatch.setattr(publish, "log", lambda: Capture())
    frame = pd.DataFrame({"ts": pd.to_datetime(["2025-03-16T14:00Z", "2025-03-16T15:00Z"], utc=True)})
    inp = jobs.PlanInputs(services=[], data=None, ingested=IngestedTraffic(frame, {}), start=T0)
    publish.log_inputs(inp, T0 + pd.Timedelta(hours=3))
    assert seen == ["shipped data: inputs 4 h old: the newest input (2025-03-16 15:00Z, the traffic's newest hour) "
                    "is older than the limit of 1 h; this plan is built from stale data (the demo plans from the "
                    "2025 data it ships)"]


def test_headline_names_the_jobs_stopped_at_step_0():
    """Issue 30 (operator trial): the plan-summary headline (and the run's log line) ignored a stop."""
    stop = pd.DataFrame([{"section": "stop_now", "job_id": "P2", "kind": "training", "step": 0, "gpus": 2,
                          "count": 2, "value": 2.0, "shortfall_gpus": 2, "reason": "real-time short"},
                         {"section": "stop_now", "job_id": "P7", "kind": "training", "step": 0, "gpus": 1,
                          "count": 1, "value": 0.5, "shortfall_gpus": 2, "reason": "real-time short"}])
    rows = observe.headline_rows(SUMMARY, pd.concat([_report(), stop], ignore_index=True))
    assert rows[-1] == ("stopped at step 0 (requeued)", "P2 (2 GPUs, 2 GPU-h lost); P7 (1 GPU, 0.5 GPU-h lost)")
    assert observe.headline_rows(SUMMARY, _report())[-1][0] == "scheduler forecaster"


def test_estimated_starts_list_a_job_stopped_at_step_0_first():
    """Issue 30 (operator trial): the Prefect table of estimated starts left out the job the plan stops now."""
    stop = pd.DataFrame([{"section": "stop_now", "job_id": "P2", "kind": "training", "step": 0, "gpus": 2,
                          "count": 2, "value": 2.0, "shortfall_gpus": 2, "reason": "real-time short of 2 GPUs"}])
    rows = observe.starts_rows(pd.concat([_report(), stop], ignore_index=True))
    assert rows[0] == {"job_id": "P2", "kind": "training", "priority": None, "gpus": 2,
                       "start_utc": "stopped now (requeued)", "planned_end_utc": "",
                       "reason": "stopped at step 0: real-time short of 2 GPUs"}
    assert [r["job_id"] for r in rows] == ["P2", "A", "B", "C"]
    assert [r["job_id"] for r in observe.starts_rows(pd.concat([_report(), stop]), limit=2)] == ["P2", "A"]
    assert observe.starts_rows(_report()) == observe.starts_rows(pd.concat([_report(), stop]))[1:]


def test_the_estimated_starts_row_of_a_stopped_job_has_the_job_s_priority():
    """Operator trial: the row of the job stopped at step 0 had priority null; summary.json's stops give it."""
    stop = pd.DataFrame([{"section": "stop_now", "job_id": "P2", "kind": "training", "step": 0, "gpus": 2,
                          "count": 2, "value": 2.0, "shortfall_gpus": 2, "reason": "real-time short of 2 GPUs"}])
    stops = [{"job_id": "P2", "priority": 1.5, "gpus": 2, "lost_gpu_h": 2.0}]
    rows = observe.starts_rows(pd.concat([_report(), stop], ignore_index=True), stops=stops)
    assert rows[0]["job_id"] == "P2" and rows[0]["priority"] == 1.5
    assert [r["priority"] for r in rows[1:]] == [r["priority"] for r in observe.starts_rows(_report())]
