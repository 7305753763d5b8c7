"""Job durations learned from a real scheduler history: the Alibaba openb GPU pods, split by time (issue 16).

Usage: PYTHONPATH=. .venv/bin/python benchmarks/forecast_jobs_real.py [--data DIR] [--test-share 0.2]
       [--bootstrap 1000] [--pods default|gpuspec20] [--json]  (DIR: default ``../shared/data`` next to the repository)

Data: ``alibaba-openb-gpu-2023/openb_pod_list_default.csv`` (Weng et al., ATC '23; read its README);
``--pods gpuspec20``: ``openb_pod_list_gpuspec20.csv``, the same pods with ``gpu_spec`` filled for
1,444 GPU pods (the GPU types a pod *requested*, ``|`` = any of, e.g. ``V100M16|V100M32``; empty =
any), put in the records' annotation ``gpu_types``, which the forecaster reads as the requested
type set (:func:`forecasters.scheduler.features.requested_types`). The trace does not say where a
pod ran, so the records' ``gpu_type`` stays empty and per-type durations are not measurable here.
Every GPU pod (``num_gpu >= 1``) becomes a job record (:data:`domain.records.JOB_RECORD`):
``submitted_at`` = creation, ``started_at`` = scheduling, ``ended_at`` = deletion (trace second 0 is
put at :data:`T0`, UTC: the trace has no date or zone, so submit hour and weekday are the trace's
clock), ``gpus`` = ``num_gpu``, ``qos``; the requests every Kubernetes pod carries go in
``annotations`` as ``cpu_milli``, ``memory_mib`` and ``gpu_milli`` (the GPU share of a sharing pod);
no user, account, partition, job name, GPU type or time limit (the trace has none). The runtime
is the GPU occupancy ``deletion - scheduling`` (what a plan reserves; most pods end in phase
``Running``: deleted while running, they held their GPUs exactly that long); ``Failed`` pods are
``failed``, every other ended pod ``completed``. Pods alive at the trace end are censored.

Split: the GPU pods with a runtime, ordered by creation; the cut is the creation time of the first
of the latest ``--test-share``. The model is fitted on the history **as it was at the cut**
(:func:`records_as_of`: a pod still running then is ``running``, not a target; one not yet
scheduled is ``pending``), so no duration known only after the cut is used. The test pods are those
created at or after the cut that ended before the trace end, scored on their whole runtime.

Forecasts scored (MAE of the P50 in hours, no step rounding; P10-P90 coverage; width P90/P10):

* ``model``: :func:`forecasters.scheduler.fit_scheduler_model` on the history at the cut, its
  ``recent`` features (if chosen) reading the runs that ended before each test pod's creation
  (:func:`forecasters.scheduler.refresh_recent`, the planner's store at planning time);
* ``model_frozen``: the same model, recent runs frozen at the cut;
* ``per_gpu_count_median``: the median runtime of the training targets with the same GPU count
  (the issue's baseline; P10/P90 their 10th/90th percentiles), global median for an unseen count;
* ``global_median``; ``per_user_median``: not applicable (openb has no users; printed as such).

The issue's bar: model MAE <= 0.9 x per-GPU-count median, P10-P90 coverage in [0.75, 0.85]. A
bootstrap (pods resampled, seeded) gives a 90 % interval of the MAE ratio.

Measured (2026-12-03, main's forecaster with 7 leaves and rounds up to 3,200 chosen on ``--split
calibration``): ``--pods gpuspec20`` (243 of the 1,237 test pods name types) MAE ratio 0.8994 (bootstrap
90 % 0.869 .. 0.931), coverage 0.784: the issue-27 bar (<= 0.9) is met, on its edge; the default list
0.9030 (0.871 .. 0.935), coverage 0.787: not met (it was 0.9000 with 15 leaves and 800 rounds). DESIGN §4.5.

Philly check (``philly-derived-2017/philly_runtime.csv``: runtimes only, no time, user or size):
a seeded random 80/20 split; coverage of the training P10-P90 (the forecaster's fallback with no
features); and the running-job rule (:func:`forecasters.scheduler.model.residual_quantiles_h`):
for a job that has run ``e``, the Pareto-tail median ``2e`` against the empirical
``P(T > 2e | T > e)``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forecasters.scheduler import fit_scheduler_model, predict_runtime, refresh_recent  # noqa: E402
from pipelines.workspace.sources.records import job_frame  # noqa: E402

#: Trace second 0 (the trace has no calendar date; a Monday, UTC).
T0 = pd.Timestamp("2023-01-02T00:00:00Z")
#: The issue's bars.
MAE_RATIO_BAR = 0.9
COVERAGE_BAND = (0.75, 0.85)


#: ``--pods`` choice -> the openb pod list read (``gpuspec20``: the same pods, ``gpu_spec`` filled for 1,444 GPU pods).
POD_LISTS: dict[str, str] = {"default": "openb_pod_list_default.csv", "gpuspec20": "openb_pod_list_gpuspec20.csv"}


def load_openb(data: Path, pods_list: str = "default") -> pd.DataFrame:
    """GPU pods of the openb list ``pods_list`` (:data:`POD_LISTS`), sorted by creation; ``alive_at_end`` = censored."""
    pods = pd.read_csv(data / "alibaba-openb-gpu-2023" / POD_LISTS[pods_list], dtype={"gpu_spec": str})
    trace_end = pods["deletion_time"].max()
    gpu = pods[pods["num_gpu"] >= 1].sort_values("creation_time", kind="stable").reset_index(drop=True)
    gpu["alive_at_end"] = gpu["deletion_time"] >= trace_end
    return gpu


def records_as_of(pods: pd.DataFrame, cut_s: float | None) -> pd.DataFrame:
    """Job records of ``pods`` as a scheduler export at trace second ``cut_s`` shows them (None: at the trace end).

    Only pods created before ``cut_s``. State at the cut: ``pending`` (not scheduled yet),
    ``running`` (scheduled, not deleted; also a pod alive at the trace end), else ended:
    ``cancelled`` when never scheduled, ``failed`` for phase Failed, else ``completed``.
    """
    p = pods if cut_s is None else pods[pods["creation_time"] < cut_s]
    cut = np.inf if cut_s is None else cut_s
    rows = []
    for r in p.itertuples(index=False):
        sched = None if pd.isna(r.scheduled_time) else float(r.scheduled_time)
        ended = r.deletion_time <= cut and not r.alive_at_end
        if sched is None or sched > cut:
            state = "cancelled" if ended and sched is None else "pending"
            started = None
        elif not ended:
            state, started = "running", sched
        else:
            state, started = ("failed" if r.pod_phase == "Failed" else "completed"), sched
        end = float(r.deletion_time) if ended else None
        rows.append({
            "source": "alibaba-openb", "job_id": r.name, "submitted_at": T0 + pd.Timedelta(seconds=float(r.creation_time)),
            "eligible_at": None, "started_at": None if started is None else T0 + pd.Timedelta(seconds=started),
            "ended_at": None if end is None else T0 + pd.Timedelta(seconds=end),
            "state": state, "censored": False,
            "elapsed_s": (end - started) if (end is not None and started is not None) else None,
            "time_limit_s": None, "gpus": int(r.num_gpu), "gpu_type": None, "nodes": None, "user": None,
            "account": None, "partition": None, "qos": r.qos, "priority": None, "job_name": None, "kind": None,
            "annotations": json.dumps({"cpu_milli": str(r.cpu_milli), "memory_mib": str(r.memory_mib),
                                       "gpu_milli": str(r.gpu_milli), **_requested_types(r)}),
        })
    return job_frame(rows)


def _requested_types(pod: object) -> dict[str, str]:
    """``{"gpu_types": gpu_spec}`` when the pod names GPU types (the ``gpuspec`` lists; ``|`` = any of), else ``{}``."""
    spec = getattr(pod, "gpu_spec", None)
    return {"gpu_types": spec} if isinstance(spec, str) and spec.strip() else {}


def score(y: np.ndarray, p10: np.ndarray, p50: np.ndarray, p90: np.ndarray) -> dict[str, float]:
    """MAE and median absolute error of the P50 (hours), P10-P90 and P90 coverage, width P90/P10 quantiles."""
    ratio = p90 / np.maximum(p10, 1e-12)
    return {
        "n": int(len(y)),
        "mae_h": float(np.mean(np.abs(y - p50))),
        "median_ae_h": float(np.median(np.abs(y - p50))),
        "coverage_p10_p90": float(np.mean((y >= p10) & (y <= p90))),
        "coverage_p90": float(np.mean(y <= p90)),
        "width_ratio_p90_p10_q10_q50_q90": [float(v) for v in np.quantile(ratio, (0.1, 0.5, 0.9))],
    }


def bootstrap_ratio(y: np.ndarray, a: np.ndarray, b: np.ndarray, n: int, seed: int = 0) -> list[float]:
    """5th, 50th, 95th percentiles of MAE(a) / MAE(b) over ``n`` resamples of the pods (seeded)."""
    rng = np.random.default_rng(seed)
    ea, eb = np.abs(y - a), np.abs(y - b)
    r = np.empty(n)
    for k in range(n):
        i = rng.integers(0, len(y), len(y))
        r[k] = ea[i].mean() / eb[i].mean()
    return [float(v) for v in np.quantile(r, (0.05, 0.5, 0.95))]


def openb_report(data: Path, test_share: float, n_boot: int, pods_list: str = "default",
                 split: str = "report") -> dict:
    """Every figure of the openb benchmark on the pod list ``pods_list`` (module docstring).

    ``split``: ``report`` (the latest ``test_share`` held out) or ``calibration`` (only the pods
    created before the report cut; of those, the latest ``test_share / (1 - test_share)`` held out:
    with 0.2, trained on the first 60 %, scored on the next 20 %; recent runs read as of the report cut).
    """
    pods = load_openb(data, pods_list)
    ran = pods[pods["scheduled_time"].notna()].reset_index(drop=True)
    report_cut_s = float(ran["creation_time"].iloc[int(np.floor(len(ran) * (1 - test_share)))])
    if split == "calibration":
        pods = pods[pods["creation_time"] < report_cut_s].reset_index(drop=True)
        ran = ran[ran["creation_time"] < report_cut_s].reset_index(drop=True)
        share = test_share / (1.0 - test_share)
        cut_s = float(ran["creation_time"].iloc[int(np.floor(len(ran) * (1 - share)))])
    else:
        cut_s = report_cut_s
    history = records_as_of(pods, cut_s)
    final = records_as_of(pods, None) if split == "report" else records_as_of(pods, report_cut_s)
    test_pods = ran[(ran["creation_time"] >= cut_s) & ~ran["alive_at_end"]]
    whole = final if split == "report" else records_as_of(pods, None)  # the test pods' whole runtimes
    test = whole[whole["job_id"].isin(set(test_pods["name"]))].reset_index(drop=True)
    y = ((test["ended_at"] - test["started_at"]).dt.total_seconds() / 3600.0).to_numpy()

    t = time.perf_counter()
    model = fit_scheduler_model(history, timezone="UTC", seed=0)
    fit_s = time.perf_counter() - t
    jobs = test.assign(state="pending", started_at=pd.NaT, ended_at=pd.NaT, elapsed_s=np.nan)
    frozen = predict_runtime(model, jobs)
    online = predict_runtime(refresh_recent(model, final), jobs)

    tr = history[history["state"].isin(["completed", "failed"]) & (history["elapsed_s"] > 0)]
    tr_h = (tr["elapsed_s"] / 3600.0).to_numpy()
    by_gpu = pd.Series(tr_h).groupby(tr["gpus"].to_numpy())
    q = {g: np.quantile(v.to_numpy(), (0.1, 0.5, 0.9)) for g, v in by_gpu}
    gq = np.quantile(tr_h, (0.1, 0.5, 0.9))
    base = np.array([q.get(int(g), gq) for g in test["gpus"]])
    glob = np.tile(gq, (len(test), 1))

    def cols(pred: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (pred["duration_p10_h"].to_numpy(), pred["duration_p50_h"].to_numpy(), pred["duration_p90_h"].to_numpy())

    forecasts = {
        "model": score(y, *cols(online)),
        "model_frozen": score(y, *cols(frozen)),
        "per_gpu_count_median": score(y, base[:, 0], base[:, 1], base[:, 2]),
        "global_median": score(y, glob[:, 0], glob[:, 1], glob[:, 2]),
    }
    ratio = forecasts["model"]["mae_h"] / forecasts["per_gpu_count_median"]["mae_h"]
    cov = forecasts["model"]["coverage_p10_p90"]
    flags = pd.Series([f for fl in online["flags"] for f in fl.split(",") if f]).value_counts().to_dict()
    return {
        "data": f"alibaba-openb-gpu-2023/{POD_LISTS[pods_list]}",
        "split": split,
        "n_test_typed": int(sum("gpu_types" in json.loads(a) for a in test["annotations"])),
        "cut_trace_day": cut_s / 86400.0,
        "n_history_records": int(len(history)),
        "n_history_targets": int(model.info["n_targets"]),
        "n_history_running_at_cut": int(model.info["n_active"]),
        "n_test": int(len(test)),
        "n_test_excluded_alive_at_end": int(((ran["creation_time"] >= cut_s) & ran["alive_at_end"]).sum()),
        "fit_seconds": round(fit_s, 1),
        "model_features": model.info["features"],
        "feature_selection": model.info["feature_selection"],
        "calibration": model.info["calibration"],
        "forecasts": forecasts,
        "per_user_median": "n/a: the openb trace has no user (nor account, job name, time limit)",
        "mae_ratio_model_vs_per_gpu_median": ratio,
        "mae_ratio_bootstrap_5_50_95": bootstrap_ratio(y, online["duration_p50_h"].to_numpy(), base[:, 1], n_boot),
        "mae_ratio_frozen_vs_per_gpu_median": forecasts["model_frozen"]["mae_h"] / forecasts["per_gpu_count_median"]["mae_h"],
        "flags_on_test": {str(k): int(v) for k, v in flags.items()},
        "bar_mae_ratio_le_0_9": bool(ratio <= MAE_RATIO_BAR),
        "bar_coverage_0_75_0_85": bool(COVERAGE_BAND[0] <= cov <= COVERAGE_BAND[1]),
    }


def philly_report(data: Path, seed: int = 0) -> dict:
    """The Philly runtime check (module docstring)."""
    rt = pd.read_csv(data / "philly-derived-2017" / "philly_runtime.csv")["runtime"].to_numpy(dtype=float) / 3600.0
    rt = rt[rt > 0]
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(rt))
    cut = int(0.8 * len(rt))
    tr, te = rt[idx[:cut]], rt[idx[cut:]]
    q10, q50, q90 = np.quantile(tr, (0.1, 0.5, 0.9))
    tail = {}
    for e in (0.1, 1.0, 10.0, 48.0):
        alive = rt[rt > e]
        tail[f"{e:g}h"] = {"n_longer": int(len(alive)), "share_beyond_2e": float(np.mean(alive > 2 * e)),
                           "pareto_says": 0.5}
    return {
        "data": "philly-derived-2017/philly_runtime.csv",
        "n": int(len(rt)),
        "quantiles_h_p10_p50_p90": [float(q10), float(q50), float(q90)],
        "fallback_coverage_p10_p90_random_split": float(np.mean((te >= q10) & (te <= q90))),
        "fallback_mae_h": float(np.mean(np.abs(te - q50))),
        "running_job_tail_check": tail,
    }


def _print(doc: dict) -> None:
    o = doc["openb"]
    print(f"{o['data']} ({o['split']} split):")
    print(f"openb GPU pods: cut at trace day {o['cut_trace_day']:.2f}; history at the cut {o['n_history_records']} records "
          f"({o['n_history_targets']} finished runs, {o['n_history_running_at_cut']} pending/running); "
          f"{o['n_test']} test pods ({o['n_test_typed']} naming GPU types; {o['n_test_excluded_alive_at_end']} alive at the trace end excluded); "
          f"fit {o['fit_seconds']} s")
    fs = o["feature_selection"]
    print(f"  feature groups chosen on the latest 20 % of the history: {fs.get('chosen')} ({fs.get('rounds')} rounds); "
          + ", ".join(f"{k}: MAE {v['mae_h']:.3f} h" for k, v in fs.get("candidates", {}).items()))
    print(f"  {'forecast':<24}{'n':>6}{'MAE h':>9}{'med AE h':>10}{'P10-P90 cov':>13}{'P90 cov':>9}"
          f"{'P90/P10 q10 / q50 / q90':>28}")
    for name, m in o["forecasts"].items():
        w = m["width_ratio_p90_p10_q10_q50_q90"]
        print(f"  {name:<24}{m['n']:>6}{m['mae_h']:>9.3f}{m['median_ae_h']:>10.3f}{m['coverage_p10_p90']:>13.3f}"
              f"{m['coverage_p90']:>9.3f}{w[0]:>12.1f} /{w[1]:>6.1f} /{w[2]:>6.1f}")
    print(f"  per_user_median: {o['per_user_median']}")
    b = o["mae_ratio_bootstrap_5_50_95"]
    print(f"  MAE ratio model / per-GPU-count median: {o['mae_ratio_model_vs_per_gpu_median']:.4f} "
          f"(bootstrap 90 % interval {b[0]:.3f} .. {b[2]:.3f}); frozen recent runs: "
          f"{o['mae_ratio_frozen_vs_per_gpu_median']:.3f}")
    print(f"  bar MAE <= 0.9 x per-GPU median: {'met' if o['bar_mae_ratio_le_0_9'] else 'NOT met'}; "
          f"P10-P90 coverage in [0.75, 0.85]: {'met' if o['bar_coverage_0_75_0_85'] else 'NOT met'}")
    print(f"  flags on test pods: {o['flags_on_test'] or 'none'}")
    p = doc["philly"]
    print(f"philly runtimes ({p['n']} jobs, no features): P10/P50/P90 {', '.join(f'{v:.2f}' for v in p['quantiles_h_p10_p50_p90'])} h; "
          f"fallback P10-P90 coverage on a random 20 %: {p['fallback_coverage_p10_p90_random_split']:.3f}; "
          f"MAE of the median {p['fallback_mae_h']:.3f} h")
    for e, v in p["running_job_tail_check"].items():
        print(f"  running for {e}: {v['n_longer']} jobs, share running past twice that {v['share_beyond_2e']:.3f} "
              f"(Pareto tail rule: 0.5)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="folder of the shared data sets")
    ap.add_argument("--test-share", type=float, default=0.2, help="share of the latest pods held out (default 0.2)")
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the MAE ratio (default 1000)")
    ap.add_argument("--pods", choices=sorted(POD_LISTS), default="default",
                    help="openb pod list: default, or gpuspec20 (requested GPU types as the gpu_types feature)")
    ap.add_argument("--split", choices=("report", "calibration"), default="report",
                    help="report: the latest --test-share held out; calibration: inside the pods before that cut "
                         "(first 60 %% trained, next 20 %% scored): where changes are chosen")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()
    for sub in ("alibaba-openb-gpu-2023", "philly-derived-2017"):
        if not (args.data / sub).is_dir():
            print(f"error: {args.data / sub} not found; pass --data DIR (the folder holding {sub})", file=sys.stderr)
            return 2
    doc = {"openb": openb_report(args.data, args.test_share, args.bootstrap, args.pods, args.split), "philly": philly_report(args.data)}
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        _print(doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
