"""Scheduler runtime forecaster (:mod:`forecasters.scheduler`) on hand-built job-record frames."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

import forecasters.scheduler as S
from domain.errors import InputError
from domain.records import JOB_RECORD
from pipelines.workspace.sources.records import job_frame

T0 = pd.Timestamp("2026-01-05 00:00", tz="UTC")  # a Monday


def rec(i: int, *, user: str | None = "alice", state: str = "completed", elapsed_h: float | None = 1.0,
        limit_h: float | None = 4.0, started: bool = True, gpus: int = 1, annotations: dict | None = None,
        job_name: str = "train-x", submitted: pd.Timestamp | None = None, censored: bool = False) -> dict:
    """One job record (dict of :data:`JOB_RECORD` keys), submitted ``i`` hours after ``T0`` unless given."""
    sub = submitted if submitted is not None else T0 + pd.Timedelta(hours=i)
    start = sub + pd.Timedelta(minutes=1) if started else None
    return {
        "source": "slurm", "job_id": str(i), "submitted_at": sub, "eligible_at": sub, "started_at": start,
        "ended_at": (start + pd.Timedelta(hours=elapsed_h)) if started and elapsed_h is not None
        and state not in ("running", "pending") else None,
        "state": state, "censored": censored, "elapsed_s": None if elapsed_h is None else elapsed_h * 3600.0,
        "time_limit_s": None if limit_h is None else limit_h * 3600.0, "gpus": gpus, "gpu_type": "a100",
        "nodes": None, "user": user, "account": "acct", "partition": "gpu", "qos": "normal", "priority": 1.0,
        "job_name": job_name, "kind": None, "annotations": annotations or {},
    }


def frame(rows: list[dict]) -> pd.DataFrame:
    """Typed job-record frame, as the source adapters write it."""
    out = job_frame(rows)
    assert tuple(out.columns) == JOB_RECORD
    return out


def synthetic_history(n: int, seed: int = 0, censored_share: float = 0.05) -> pd.DataFrame:
    """Runtime = limit x a per-user fraction (0.05 .. 0.9) x lognormal(0, 0.25), capped at the limit.

    Each user has a usual limit (1 .. 48 h), doubled for 30 % of its jobs; 5 % of the runs are
    cancelled after a uniform share of their runtime.
    """
    rng = np.random.default_rng(seed)
    n_users = 12
    frac = np.linspace(0.05, 0.9, n_users)
    user_limit = rng.choice([1.0, 2.0, 4.0, 8.0, 24.0, 48.0], n_users)
    u = rng.integers(0, n_users, n)
    limit_h = user_limit[u] * rng.choice([1.0, 2.0], n, p=[0.7, 0.3])
    run_h = np.minimum(limit_h * frac[u] * rng.lognormal(0.0, 0.25, n), limit_h)
    sub = T0 + pd.to_timedelta(np.sort(rng.uniform(0, 90 * 24, n)), unit="h")
    cens = rng.random(n) < censored_share
    state = np.where(run_h >= limit_h, "timeout", np.where(rng.random(n) < 0.1, "failed", "completed")).astype(object)
    state[cens] = "cancelled"
    elapsed_h = np.where(cens, run_h * rng.uniform(0.1, 1.0, n), run_h)
    rows = [rec(i, user=f"u{u[i]}", state=str(state[i]), elapsed_h=float(elapsed_h[i]), limit_h=float(limit_h[i]),
                submitted=sub[i], gpus=int(2 ** (i % 4)), censored=bool(cens[i]),
                annotations={"params_b": str(7 * (u[i] % 3 + 1))}) for i in range(n)]
    return frame(rows)


@pytest.fixture(scope="module")
def synthetic() -> tuple[pd.DataFrame, pd.DataFrame, S.SchedulerModel]:
    train, test = S.time_split(synthetic_history(3000, seed=1), 0.2)
    return train, test, S.fit_scheduler_model(train)


# --- targets and censoring ------------------------------------------------------------------------------

def test_run_buckets_and_fit_report_count_each_state_exactly():
    rows = [rec(i, elapsed_h=1.0 + 0.01 * i) for i in range(40)]                  # 40 completed
    rows += [rec(40 + i, state="timeout", elapsed_h=4.0) for i in range(3)]         # 3 timeout (at the limit)
    rows += [rec(43 + i, state="failed", elapsed_h=0.2) for i in range(2)]          # 2 failed
    rows += [rec(45, state="out_of_memory", elapsed_h=0.1)]                          # 1 oom
    rows += [rec(46 + i, state="cancelled", elapsed_h=2.0) for i in range(5)]       # 5 cancelled after start
    rows += [rec(51 + i, state="preempted", elapsed_h=0.5) for i in range(2)]       # 2 preempted
    rows += [rec(53, state="node_fail", elapsed_h=0.5)]                              # 1 node failure
    rows += [rec(54 + i, state="cancelled", elapsed_h=None, started=False) for i in range(3)]  # never started
    rows += [rec(57 + i, state="pending", elapsed_h=None, started=False) for i in range(2)]
    rows += [rec(59, state="running", elapsed_h=0.3)]
    rows += [rec(60, state="completed", elapsed_h=0.0)]                              # no runtime
    h = frame(rows)
    buckets = S.run_buckets(h)
    assert (buckets == "target").sum() == 46
    assert (buckets == "censored").sum() == 8
    m = S.fit_scheduler_model(h)
    info = m.info
    assert m.mode == S.MODE_LIGHTGBM
    assert info["n_rows"] == 61
    assert info["n_targets"] == 46
    assert info["n_targets_by_state"] == {"completed": 40, "failed": 2, "out_of_memory": 1, "timeout": 3}
    assert info["n_censored"] == 8
    assert info["n_censored_by_state"] == {"cancelled": 5, "node_fail": 1, "preempted": 2}
    assert info["n_not_started"] == 3
    assert info["n_active"] == 3
    assert info["n_no_runtime"] == 1


def test_censored_runs_are_not_targets():
    """Adding censored runs (long elapsed) changes neither the target count nor the fallback quantiles."""
    base = [rec(i, elapsed_h=h) for i, h in enumerate([1.0, 2.0, 3.0])]
    cens = [rec(10 + i, state=s, elapsed_h=3.5, censored=True) for i, s in enumerate(["cancelled", "preempted"])]
    m0, m1 = S.fit_scheduler_model(frame(base)), S.fit_scheduler_model(frame(base + cens))
    assert m1.info["n_targets"] == 3 and m1.info["n_censored"] == 2
    assert m0.user_quantiles_h == m1.user_quantiles_h == {"alice": pytest.approx((1.2, 2.0, 2.8))}


def test_timeout_rows_are_targets_at_their_elapsed_clipped_to_the_limit():
    rows = [rec(0, state="timeout", elapsed_h=4.0, limit_h=4.0),
            rec(1, state="timeout", elapsed_h=2.0 + 30 / 3600, limit_h=2.0),  # 30 s of grace after the limit
            rec(2, state="completed", elapsed_h=1.0, limit_h=4.0)]
    h = frame(rows)
    assert S.target_hours(h).tolist() == pytest.approx([4.0, 2.0, 1.0])
    m = S.fit_scheduler_model(h)
    assert m.info["n_targets_by_state"] == {"completed": 1, "timeout": 2}
    assert m.info["n_targets_clipped_to_limit"] == 1
    assert m.user_quantiles_h["alice"] == pytest.approx(tuple(np.quantile([4.0, 2.0, 1.0], [0.1, 0.5, 0.9])))


# --- the time limit cap ---------------------------------------------------------------------------------

def test_a_one_hour_limit_caps_every_quantile():
    rng = np.random.default_rng(3)
    rows = [rec(i, elapsed_h=float(rng.uniform(2.0, 6.0)), limit_h=8.0) for i in range(60)]
    m = S.fit_scheduler_model(frame(rows))
    jobs = frame([rec(100, state="pending", elapsed_h=None, started=False, limit_h=1.0),
                  rec(101, state="pending", elapsed_h=None, started=False, limit_h=8.0)])
    p = S.predict_runtime(m, jobs)
    assert list(p.columns) == list(S.RUNTIME_COLUMNS)
    # runs took 2-6 h, so every uncapped quantile is above the 1 h limit: all three are the limit itself
    assert p.loc[0, ["duration_p10_h", "duration_p50_h", "duration_p90_h"]].tolist() == [1.0, 1.0, 1.0]
    assert bool(p.loc[0, "capped_at_limit"]) is True
    assert 2.0 < p.loc[1, "duration_p50_h"] < 6.0 and bool(p.loc[1, "capped_at_limit"]) is False
    assert p["gpus_pred"].tolist() == [1, 1]


def test_no_time_limit_at_all_still_trains():
    rows = [rec(i, user=f"u{i % 3}", elapsed_h=1.0 + (i % 3), limit_h=None) for i in range(60)]
    m = S.fit_scheduler_model(frame(rows))
    assert m.mode == S.MODE_LIGHTGBM and m.info["n_targets_without_limit"] == 60
    p = S.predict_runtime(m, frame([rec(200, user="u2", limit_h=None, state="pending", started=False)]))
    assert np.isfinite(p[["duration_p10_h", "duration_p50_h", "duration_p90_h"]].to_numpy()).all()
    assert not p["capped_at_limit"].any()
    assert 2.0 < p.loc[0, "duration_p50_h"] < 4.0  # u2 runs 3 h
    # sbatch --time=0 means no limit: the same forecast, not capped at 0
    p0 = S.predict_runtime(m, frame([rec(200, user="u2", limit_h=0.0, state="pending", started=False)]))
    assert p0.loc[0, "duration_p50_h"] == p.loc[0, "duration_p50_h"] and not p0["capped_at_limit"].any()


# --- features -------------------------------------------------------------------------------------------

def test_unseen_user_is_finite_and_flagged():
    rows = [rec(i, user=f"u{i % 3}", elapsed_h=1.0 + (i % 3)) for i in range(60)]
    m = S.fit_scheduler_model(frame(rows))
    p = S.predict_runtime(m, frame([rec(300, user="carol"), rec(301, user="u1"), rec(302, user=None)]))
    assert np.isfinite(p[["duration_p10_h", "duration_p50_h", "duration_p90_h"]].to_numpy()).all()
    assert p["flags"].tolist() == ["unseen_user", "", ""]
    empty = S.predict_runtime(m, frame([rec(0)]).iloc[:0])
    assert list(empty.columns) == list(S.RUNTIME_COLUMNS) and len(empty) == 0


def test_rare_levels_are_missing_and_flagged():
    rows = [rec(i, user="rare" if i < S.MIN_LEVEL_COUNT - 1 else "common") for i in range(40)]
    m = S.fit_scheduler_model(frame(rows))
    assert m.spec.levels["user"] == ("common",)
    assert S.predict_runtime(m, frame([rec(0, user="rare")]))["flags"].tolist() == ["unseen_user"]


def test_numeric_annotation_becomes_a_feature():
    rng = np.random.default_rng(5)
    tokens = rng.choice([1.0, 2.0, 5.0, 10.0], 120)
    rows = [rec(i, elapsed_h=0.5 * t, limit_h=12.0, annotations={"tokens_b": str(t), "variant": "lora"})
            for i, t in enumerate(tokens)]
    rows.append(rec(500, annotations={"rare_key": "1"}))  # in < 5 % of the rows: not a feature
    m = S.fit_scheduler_model(frame(rows))
    assert m.spec.numeric_annotations == ("tokens_b",)
    assert m.spec.categorical_annotations == ("variant",)
    assert "ann_tokens_b" in m.info["features"] and "ann_rare_key" not in m.info["features"]
    p = S.predict_runtime(m, frame([rec(600, annotations={"tokens_b": "1"}), rec(601, annotations={"tokens_b": "10"}),
                                    rec(602)]))
    p50 = p["duration_p50_h"].to_numpy()
    assert p50[0] < 1.0 < 3.0 < p50[1]  # 0.5 h vs 5 h
    assert np.isfinite(p50[2])          # absent annotation -> NaN feature, still a forecast


def test_submit_hour_and_weekday_are_in_the_cluster_time_zone():
    h = frame([rec(0, submitted=pd.Timestamp("2026-01-05 23:30", tz="UTC"))])  # Monday 23:30 UTC
    raw = S.FeatureSpec(timezone="Europe/Paris").raw(h)
    assert (raw["submit_hour"][0], raw["submit_weekday"][0]) == (0.0, 1.0)  # Tuesday 00:30 in Paris
    raw_utc = S.FeatureSpec(timezone="UTC").raw(h)
    assert (raw_utc["submit_hour"][0], raw_utc["submit_weekday"][0]) == (23.0, 0.0)
    assert raw["log_time_limit_h"][0] == pytest.approx(math.log(4.0))
    assert raw["log2_gpus"][0] == 0.0


def test_name_token():
    assert S.name_token("train-llama3_70b.sh") == "train"
    assert S.name_token("  _Eval42x") == "eval"
    assert S.name_token("1234") is None and S.name_token("") is None


# --- small histories and running jobs ----------------------------------------------------------------------

def test_small_history_falls_back_to_per_user_quantiles():
    rows = [rec(i, user="alice", elapsed_h=h) for i, h in enumerate([1.0, 2.0, 3.0])]
    rows += [rec(10, user="bob", elapsed_h=4.0, limit_h=8.0)]
    m = S.fit_scheduler_model(frame(rows))
    assert m.mode == S.MODE_FALLBACK and m.boosters is None
    assert m.info["fallback_reason"].startswith("4 target runs < 30")
    jobs = frame([rec(20, user="alice", limit_h=8.0), rec(21, user="bob", limit_h=8.0),
                  rec(22, user="carol", limit_h=8.0), rec(23, user="bob", limit_h=2.0)])
    p = S.predict_runtime(m, jobs)
    assert p["duration_p50_h"].tolist() == pytest.approx([2.0, 4.0, 2.5, 2.0])  # user median, else global; cap
    assert p["duration_p10_h"].tolist() == pytest.approx([1.2, 4.0, 1.3, 2.0])
    assert p["duration_p90_h"].tolist() == pytest.approx([2.8, 4.0, 3.7, 2.0])
    assert p["capped_at_limit"].tolist() == [False, False, False, True]
    assert p["flags"].tolist() == ["median_fallback", "median_fallback", "unseen_user,median_fallback",
                                   "median_fallback"]


def test_running_job_remaining_time():
    m = S.fit_scheduler_model(frame([rec(i, elapsed_h=h, limit_h=6.0) for i, h in enumerate([1, 2, 3, 4, 5])]))
    now = pd.Timestamp("2026-02-01 12:00", tz="UTC").to_pydatetime()
    started = [now - timedelta(hours=3.5), now - timedelta(hours=5.0), now - timedelta(hours=5.2)]
    rows = [rec(100 + k, state="running", elapsed_h=None, limit_h=5.0) for k in range(3)]
    for r, s in zip(rows, started):
        r["started_at"] = pd.Timestamp(s)
    rows.append(rec(103, state="pending", elapsed_h=None, started=False, limit_h=5.0))
    p = S.predict_runtime(m, frame(rows), now=now)
    # quantiles of [1..5] h: 1.4, 3, 4.6. Job 0 has run 3.5 h: P10 and P50 are outrun; only 2 training
    # runs are longer (< MIN_SURVIVORS), so the Pareto tail: 3.5/0.9 and 3.5/0.5 = 7; sorted with
    # P90 4.6 -> (3.889, 4.6, 7), capped at the 5 h limit
    assert p["elapsed_h"].tolist() == pytest.approx([3.5, 5.0, 5.2, 0.0])
    assert p.loc[0, ["duration_p10_h", "duration_p50_h", "duration_p90_h"]].tolist() == pytest.approx(
        [3.5 / 0.9, 4.6, 5.0])
    assert p.loc[0, ["remaining_p10_h", "remaining_p50_h", "remaining_p90_h"]].tolist() == pytest.approx(
        [3.5 / 0.9 - 3.5, 1.1, 1.5])
    assert p.loc[1, ["remaining_p10_h", "remaining_p50_h", "remaining_p90_h"]].tolist() == [0.0, 0.0, 0.0]
    assert p.loc[1, "duration_p90_h"] == pytest.approx(5.0) and bool(p.loc[1, "capped_at_limit"])
    assert p.loc[2, ["remaining_p10_h", "remaining_p50_h", "remaining_p90_h"]].tolist() == [0.0, 0.0, 0.0]
    assert p.loc[3, ["remaining_p10_h", "remaining_p50_h", "remaining_p90_h"]].tolist() == pytest.approx(
        [1.4, 3.0, 4.6])
    with pytest.raises(InputError, match="is running: pass now"):
        S.predict_runtime(m, frame(rows))
    with pytest.raises(InputError, match="timezone-aware"):
        S.predict_runtime(m, frame(rows), now=datetime(2026, 2, 1, 12, 0))


def test_running_job_outliving_its_forecast_uses_the_longer_training_runs():
    from forecasters.scheduler.model import residual_quantiles_h

    # 40 runs of 1 h and 30 runs of 10..39 h: a job at 8 h is read from the 30 longer runs
    runtimes = np.sort(np.r_[np.ones(40), np.arange(10.0, 40.0)])
    assert residual_quantiles_h(runtimes, 8.0).tolist() == pytest.approx(
        np.quantile(np.arange(10.0, 40.0), [0.1, 0.5, 0.9]).tolist())
    # at 35 h only 4 are longer: the Pareto tail e / (1 - q)
    assert residual_quantiles_h(runtimes, 35.0).tolist() == pytest.approx([35 / 0.9, 70.0, 350.0])


# --- censored runs and the P90 ----------------------------------------------------------------------------

def test_censored_p90_raise_by_hand():
    # 10 runs of one user, P90 1 h each, limit 10 h; m = floor(0.1 * 10) = 1 exceedance allowed.
    users = np.array(["a"] * 10, dtype=object)
    value = np.array([0.5] * 7 + [2.0, 4.0, 3.0])
    cens = np.array([False] * 7 + [True, True, False])
    p90 = np.ones(10)
    limit = np.full(10, 10.0)
    # exceeding: 2, 4, 3 -> d = log 4, log 3, log 2; the 2nd largest is log 3
    assert S.censored_p90_raise(users, value, p90, limit, cens) == {"a": pytest.approx(math.log(3.0))}
    # no censored run exceeds -> no raise (the targets alone are the model's business)
    assert S.censored_p90_raise(users, value, p90, limit, np.zeros(10, dtype=bool)) == {}
    # a censored run at its limit is covered by the cap
    assert S.censored_p90_raise(users, value, p90, np.array([10.0] * 7 + [2.0, 4.0, 3.0]), cens) == {}
    # fewer than MIN_USER_RUNS runs: not checked
    assert S.censored_p90_raise(users[:4], value[6:], p90[:4], limit[:4], cens[6:]) == {}


def test_censored_runs_raise_a_users_p90_in_the_fallback():
    rows = [rec(i, user="bob", elapsed_h=1.0, limit_h=8.0) for i in range(20)]
    rows += [rec(20 + i, user="bob", state="cancelled", elapsed_h=5.0, limit_h=8.0) for i in range(5)]
    rows += [rec(30 + i, user="alice", elapsed_h=2.0, limit_h=8.0) for i in range(9)]
    rows += [rec(40, user="alice", state="preempted", elapsed_h=6.0, limit_h=8.0)]
    m = S.fit_scheduler_model(frame(rows))
    assert m.info["n_censored"] == 6 and m.info["p90_raised_users"] == 1
    # bob: 25 runs, 2 may exceed, 5 censored at 5 h do -> P90 x 5; alice: 1 of 10 may, 1 does -> none
    assert m.p90_raise_log == {"bob": pytest.approx(math.log(5.0))}
    p = S.predict_runtime(m, frame([rec(50, user="bob", limit_h=8.0), rec(51, user="alice", limit_h=8.0),
                                    rec(52, user="bob", limit_h=3.0)]))
    assert p["duration_p50_h"].tolist() == pytest.approx([1.0, 2.0, 1.0])
    assert p["duration_p90_h"].tolist() == pytest.approx([5.0, 2.0, 3.0])


def test_censored_runs_raise_p90_with_lightgbm():
    rows = [rec(i, user="hog", elapsed_h=1.0 + 0.01 * (i % 7), limit_h=12.0) for i in range(40)]
    rows += [rec(40 + i, user="hog", state="preempted", elapsed_h=6.0, limit_h=12.0) for i in range(10)]
    rows += [rec(50 + i, user="ok", elapsed_h=2.0 + 0.01 * (i % 5), limit_h=12.0) for i in range(40)]
    h = frame(rows)
    m = S.fit_scheduler_model(h)
    assert m.mode == S.MODE_LIGHTGBM and set(m.p90_raise_log) == {"hog"}
    hog = h.loc[h["user"] == "hog"].drop(columns=["state", "started_at"]).reset_index(drop=True)
    value = hog["elapsed_s"].to_numpy() / 3600
    p90 = S.predict_runtime(m, hog)["duration_p90_h"].to_numpy()
    assert (value > p90 + 1e-9).sum() <= 5          # floor(0.1 * 50) runs may exceed after the raise
    assert p90.max() >= 6.0 - 1e-9                  # up from ~1 h


# --- evaluation ---------------------------------------------------------------------------------------------

def test_evaluation_baselines_by_hand():
    train = [rec(i, user="alice", elapsed_h=h) for i, h in enumerate([1.0, 2.0, 3.0])]
    train += [rec(10, user="bob", elapsed_h=4.0, limit_h=8.0)]
    m = S.fit_scheduler_model(frame(train))
    holdout = frame([
        rec(100, user="alice", elapsed_h=2.0, limit_h=4.0),
        rec(101, user="bob", elapsed_h=6.0, limit_h=None),
        rec(102, user="carol", elapsed_h=1.0, limit_h=2.0),
        rec(103, user="alice", state="cancelled", elapsed_h=3.0, limit_h=4.0),   # censored: over its P90 2.8
        rec(104, user="alice", state="pending", elapsed_h=None, started=False),
    ])
    ev = S.evaluate_scheduler_model(m, holdout)
    assert (ev["n_train"], ev["n_test"], ev["n_test_censored"], ev["test_censored_over_p90"]) == (4, 3, 1, 1)
    g = ev["baselines"]["global_median"]  # 2.5 h for all: errors 0.5, 3.5, 1.5
    assert g["n"] == 3
    assert g["mae_h"] == pytest.approx(5.5 / 3) and g["median_ae_h"] == pytest.approx(1.5)
    assert g["pinball_p50_h"] == pytest.approx(5.5 / 6)
    assert g["pinball_p90_h"] == pytest.approx((0.05 + 3.15 + 0.15) / 3)
    assert g["coverage_p90"] == pytest.approx(2 / 3)
    u = ev["baselines"]["per_user_median"]  # alice 2, bob 4, carol (unseen) 2.5: errors 0, 2, 1.5
    assert u["mae_h"] == pytest.approx(3.5 / 3) and u["median_ae_h"] == pytest.approx(1.5)
    # how much the P50 tells jobs apart: one value for all -> 1.0; P50s 2, 4, 2.5 -> numpy's linear 10th/90th
    # percentiles 2.1 and 3.7
    assert g["p50_spread_q90_q10"] == 1.0 and u["p50_spread_q90_q10"] == pytest.approx(3.7 / 2.1)
    t = ev["baselines"]["time_limit"]  # alice 4, carol 2 (bob has none): errors 2, 1
    assert t["n"] == 2 and t["mae_h"] == pytest.approx(1.5) and t["coverage_p90"] == 1.0
    # model (fallback): alice 2 / P90 2.8, bob 4 / 4, carol global 2.5 / 3.7 capped at 2 -> errors 0, 2, 1
    assert ev["metrics"]["mae_h"] == pytest.approx(1.0)
    assert ev["metrics"]["coverage_p90"] == pytest.approx(2 / 3)
    assert t["model_on_same_runs"]["mae_h"] == pytest.approx(0.5)


def test_model_learns_user_and_limit_and_beats_the_baselines(synthetic):
    train, test, m = synthetic
    assert m.mode == S.MODE_LIGHTGBM and m.info["calibration"]["n"] >= 50
    ev = S.evaluate_scheduler_model(m, test)
    mae = ev["metrics"]["mae_h"]
    assert mae < 0.4 * ev["baselines"]["global_median"]["mae_h"]
    assert mae < 0.9 * ev["baselines"]["per_user_median"]["mae_h"]
    assert mae < 0.5 * ev["baselines"]["time_limit"]["mae_h"]
    assert 0.8 <= ev["metrics"]["coverage_p90"] <= 0.97


def test_quantiles_are_monotone_and_below_the_limit(synthetic):
    _, test, m = synthetic
    p = S.predict_runtime(m, test.drop(columns=["state", "started_at"]))
    q = p[["duration_p10_h", "duration_p50_h", "duration_p90_h"]].to_numpy()
    assert (q[:, 0] <= q[:, 1]).all() and (q[:, 1] <= q[:, 2]).all() and (q > 0).all()
    assert (q[:, 2] <= test["time_limit_s"].to_numpy() / 3600 + 1e-12).all()


def test_time_ordered_calibration_widens_p90_after_a_drift():
    """The latest 20 % of the runs are far noisier: their split-conformal shift widens P90 (and P10)."""
    rng = np.random.default_rng(8)
    sigma = np.where(np.arange(400) < 320, 0.05, 0.6)
    rows = [rec(i, elapsed_h=float(2.0 * rng.lognormal(0.0, sg)), limit_h=24.0) for i, sg in enumerate(sigma)]
    m = S.fit_scheduler_model(frame(rows))
    cal = m.info["calibration"]
    assert cal["n"] == 80 and cal["coverage_p90_before"] < 0.75
    assert cal["shift_p90_log"] > 0.3 and cal["shift_p10_log"] < -0.3
    assert m.shifts_log == (cal["shift_p10_log"], cal["shift_p90_log"])
    job = frame([rec(900, limit_h=24.0)])
    x, _ = m.spec.design(job)
    p = S.predict_runtime(m, job)
    assert p.loc[0, "duration_p90_h"] == pytest.approx(math.exp(m.boosters[2].predict(x)[0] + cal["shift_p90_log"]))
    assert p.loc[0, "duration_p10_h"] == pytest.approx(math.exp(m.boosters[0].predict(x)[0] + cal["shift_p10_log"]))


def test_conformal_shift_ranks():
    scores = np.arange(1.0, 21.0)[::-1]  # 20 .. 1, any order
    assert S.conformal_shift(scores, 0.9) == 19.0  # ceil(21 * 0.9) = 19th smallest
    assert S.conformal_shift(scores, 0.1) == 2.0   # floor(21 * 0.1) = 2nd smallest
    assert S.conformal_shift(np.array([0.3]), 0.9) == 0.3


# --- bad input ----------------------------------------------------------------------------------------------

def test_bad_input_is_refused_with_a_message():
    good = [rec(i) for i in range(3)]
    with pytest.raises(InputError, match="timezone 'Mars/Base'"):
        S.fit_scheduler_model(frame(good), timezone="Mars/Base")
    with pytest.raises(InputError, match="no finished uncensored run"):
        S.fit_scheduler_model(frame([rec(0, state="pending", elapsed_h=None, started=False)]))
    bad = frame(good)
    bad["annotations"] = ["{}", "not json", "{}"]
    with pytest.raises(InputError, match=r"row 1 \(job_id '1'\), column 'annotations'"):
        S.fit_scheduler_model(bad)
    with pytest.raises(InputError, match=r"row 2 \(job_id '2'\), column 'time_limit_s': value -3600.0 must be >= 0"):
        S.fit_scheduler_model(frame(good[:2] + [rec(2, limit_h=-1.0)]))
    with pytest.raises(InputError, match="missing column"):
        S.fit_scheduler_model(frame(good).drop(columns=["time_limit_s"]))


def test_fit_input_is_not_modified():
    h = frame([rec(i, elapsed_h=1.0 + i) for i in range(5)])
    before = h.copy()
    S.fit_scheduler_model(h)
    pd.testing.assert_frame_equal(h, before)
    assert json.loads(h["annotations"].iloc[0]) == {}
