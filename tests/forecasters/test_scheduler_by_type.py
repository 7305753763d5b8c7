"""Durations per GPU type (:mod:`forecasters.scheduler.by_type`) on synthetic two-type histories with a known ratio."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forecasters.scheduler as S
from domain.errors import InputError
from forecasters.scheduler.by_type import datasheet_ratio
from forecasters.scheduler.features import requested_types
from forecasters.scheduler.type_history import measure_type_effects
from pipelines.workspace.sources.records import job_frame

T0 = pd.Timestamp("2026-01-05 00:00", tz="UTC")
SLOW, FAST = "a100_40gb", "h100_80gb"
#: Duration on SLOW over duration on FAST (the datasheets say 989 / 312 = 3.17: a different number).
RATIO = 2.0


def two_type_history(n: int = 2400, seed: int = 3, both: bool = True) -> pd.DataFrame:
    """Kinds (user, job name, GPUs) of base duration 0.2 .. 20 h on FAST, RATIO x that on SLOW, lognormal(0, 0.2) noise.

    Long kinds prefer FAST (share 0.2 .. 0.8 by duration rank: a per-type median would be biased);
    ``both=False``: each kind runs on one type only (no measured ratio).
    """
    rng = np.random.default_rng(seed)
    n_kinds = 24
    base = np.exp(np.linspace(np.log(0.2), np.log(20.0), n_kinds))
    p_fast = np.linspace(0.2, 0.8, n_kinds) if both else (np.arange(n_kinds) % 2).astype(float)
    k = rng.integers(0, n_kinds, n)
    fast = rng.random(n) < p_fast[k]
    run_h = base[k] * np.where(fast, 1.0, RATIO) * rng.lognormal(0.0, 0.2, n)
    sub = T0 + pd.to_timedelta(np.sort(rng.uniform(0, 60 * 24, n)), unit="h")
    rows = []
    for i in range(n):
        start = sub[i] + pd.Timedelta(minutes=1)
        rows.append({
            "source": "slurm", "job_id": str(i), "submitted_at": sub[i], "eligible_at": sub[i], "started_at": start,
            "ended_at": start + pd.Timedelta(hours=float(run_h[i])), "state": "completed", "censored": False,
            "elapsed_s": float(run_h[i]) * 3600.0, "time_limit_s": None, "gpus": int(2 ** (k[i] % 3)),
            "gpu_type": FAST if fast[i] else SLOW, "nodes": None, "user": f"u{k[i] % 8}", "account": "acct",
            "partition": "gpu", "qos": "normal", "priority": 1.0, "job_name": f"job{chr(97 + k[i])}-run",
            "kind": None, "annotations": {},
        })
    return job_frame(rows)


def pending(like: pd.DataFrame, user: str, job_name: str, gpus: int, gpu_type: str | None = None) -> pd.DataFrame:
    """One pending job record shaped as ``like``'s rows."""
    r = like.iloc[[0]].copy()
    r["job_id"], r["user"], r["job_name"], r["gpus"], r["gpu_type"] = "new", user, job_name, gpus, gpu_type
    r["state"], r["started_at"], r["ended_at"], r["elapsed_s"] = "pending", pd.NaT, pd.NaT, np.nan
    r["submitted_at"] = T0 + pd.Timedelta(days=61)
    return r.reset_index(drop=True)


@pytest.fixture(scope="module")
def two_type() -> tuple[pd.DataFrame, S.SchedulerModel]:
    h = two_type_history()
    return h, S.fit_scheduler_model(h)


def test_measured_ratio_recovers_the_known_speed_ratio_within_10_percent(two_type):
    _, model = two_type
    measured = model.types.measured_ratio(SLOW, FAST)
    assert measured == pytest.approx(RATIO, rel=0.10)
    speeds = model.info["gpu_types"]["measured_speed"]
    assert speeds[FAST] / speeds[SLOW] == pytest.approx(RATIO, rel=0.10)
    assert model.types.support == {SLOW: 24, FAST: 24}  # every kind ran on both types


def test_a_new_kind_of_job_is_priced_on_the_other_type_by_the_measured_ratio(two_type):
    h, model = two_type
    job = pending(h, "newbie", "fresh-job", 1)
    out = S.predict_runtime_by_type(model, job, [[SLOW, FAST]])
    assert list(out.columns) == list(S.BY_TYPE_COLUMNS)
    assert out["gpu_type"].tolist() == [SLOW, FAST]
    by = out.set_index("gpu_type")
    anchor = by.loc[SLOW, "anchor_type"]  # the type with more runs in the history anchors a job with none
    assert anchor in (SLOW, FAST)
    other = FAST if anchor == SLOW else SLOW
    assert by.loc[anchor, "source"] == "model" and by.loc[other, "source"] == "measured"
    assert by.loc[SLOW, "duration_p50_h"] / by.loc[FAST, "duration_p50_h"] == pytest.approx(RATIO, rel=0.10)
    assert by["flags"].tolist() == ["unseen_user,unseen_name_token"] * 2  # a user and job name new to the history


def test_known_kinds_read_their_own_history_on_each_type(two_type):
    """Every kind ran on both types: both rows ``history``; the boosters' P50 ratio, median over the kinds, within 10 %."""
    h, model = two_type
    kinds = h.drop_duplicates(["user", "job_name", "gpus"]).reset_index(drop=True)
    jobs = pd.concat([pending(h, u, nm, g) for u, nm, g in zip(kinds["user"], kinds["job_name"], kinds["gpus"])],
                     ignore_index=True)
    jobs["job_id"] = [f"k{i}" for i in range(len(jobs))]
    out = S.predict_runtime_by_type(model, jobs, [[SLOW, FAST]] * len(jobs))
    assert set(out["source"]) == {"history"}
    p50 = out.pivot(index="job_id", columns="gpu_type", values="duration_p50_h")
    assert len(p50) == 24
    assert float(np.median(p50[SLOW] / p50[FAST])) == pytest.approx(RATIO, rel=0.10)


def test_without_multi_type_kinds_the_datasheet_ratio_is_used_and_flagged():
    h = two_type_history(n=1200, both=False)
    model = S.fit_scheduler_model(h)
    assert model.types.log_effect == {}
    job = pending(h, "newbie", "fresh-job", 1, gpu_type=SLOW)  # its own type anchors it
    out = S.predict_runtime_by_type(model, job, [[SLOW, FAST, "v100_32gb", "G2"]]).set_index("gpu_type")
    assert out["source"].tolist() == ["model", "datasheet", "datasheet", "unpriced"]
    assert out["anchor_type"].tolist() == [SLOW] * 4
    assert out.loc[FAST, "duration_ratio"] == pytest.approx(312.0 / 989.0)
    assert out.loc["v100_32gb", "duration_ratio"] == pytest.approx(312.0 / 125.0)
    assert out.loc["G2", "duration_ratio"] == 1.0
    assert out.loc[FAST, "duration_p50_h"] == pytest.approx(out.loc[SLOW, "duration_p50_h"] * 312.0 / 989.0)
    new = "unseen_user,unseen_name_token"
    assert out["flags"].tolist() == [new, f"{new},{S.FLAG_DATASHEET}", f"{new},{S.FLAG_DATASHEET}", f"{new},{S.FLAG_UNPRICED}"]


def test_a_kind_with_history_on_one_type_anchors_there():
    h = two_type_history(n=1200, both=False)
    model = S.fit_scheduler_model(h)
    kind = h[h["gpu_type"] == FAST].iloc[0]
    job = pending(h, kind["user"], kind["job_name"], int(kind["gpus"]))
    out = S.predict_runtime_by_type(model, job, [[SLOW, FAST]]).set_index("gpu_type")
    assert out.loc[FAST, "source"] == "history" and out.loc[SLOW, "source"] == "datasheet"
    assert out.loc[SLOW, "anchor_type"] == FAST
    assert out.loc[SLOW, "duration_ratio"] == pytest.approx(989.0 / 312.0)


def test_time_limit_caps_every_type():
    h = two_type_history(n=1200, both=False)
    model = S.fit_scheduler_model(h)
    job = pending(h, "newbie", "fresh-job", 1, gpu_type=FAST)
    job["time_limit_s"] = 0.5 * 3600.0
    out = S.predict_runtime_by_type(model, job, [[FAST, SLOW]])
    assert (out[["duration_p10_h", "duration_p50_h", "duration_p90_h"]].to_numpy() <= 0.5).all()


def test_two_way_fixed_effects_by_hand():
    """k1: A 2 h, B 1 h; k2: A 6 h, B 3 h; k3: B 4 h, C 1 h -> B/A = 1/2, C/B = 1/4; one component; A reference."""
    cells = pd.DataFrame({
        "kind": ["k1", "k1", "k2", "k2", "k3", "k3", "k4"],
        "gpu_type": ["A", "B", "A", "B", "B", "C", "A"],
        "log_h": np.log([2.0, 1.0, 6.0, 3.0, 4.0, 1.0, 9.0]),
        "runs": [9, 2, 9, 2, 2, 3, 50],
    })
    effect, component, support = measure_type_effects(cells)
    assert effect == pytest.approx({"A": 0.0, "B": np.log(0.5), "C": np.log(0.125)})
    assert component == {"A": 0, "B": 0, "C": 0}
    assert support == {"A": 2, "B": 3, "C": 1}  # k4 ran on one type: not used


def test_datasheet_ratio_and_requested_type_set():
    assert datasheet_ratio("h100", "a100") == pytest.approx(312.0 / 989.0)
    assert datasheet_ratio("G2", "a100") is None
    assert requested_types({"gpu_types": "V100M32|V100M16|V100M32"}) == "v100_16gb|v100_32gb"
    assert requested_types({"gpu_types": "G2|T4"}) == "g2|t4_16gb"
    assert requested_types({}) is None


def test_requested_types_become_a_feature_only_when_the_history_has_them(two_type):
    _, model = two_type
    assert "gpu_types" not in model.spec.features
    h = two_type_history(n=600)
    h["annotations"] = ['{"gpu_types": "a100|h100"}' if i % 3 else "{}" for i in range(len(h))]
    m = S.fit_scheduler_model(h)
    assert "gpu_types" in m.spec.features
    assert m.spec.levels["gpu_types"] == ("a100_40gb|h100_80gb",)
    assert not any(f.startswith("ann_gpu_types") for f in m.spec.features)


def test_types_must_match_the_jobs(two_type):
    h, model = two_type
    job = pending(h, "newbie", "fresh-job", 1)
    with pytest.raises(InputError, match="0 entries for 1 jobs"):
        S.predict_runtime_by_type(model, job, [])
    with pytest.raises(InputError, match="empty GPU type name"):
        S.predict_runtime_by_type(model, job, [[" "]])
