"""Stage logic of the main job: traffic -> profiles, queue -> forecasts -> optimizer problem -> outputs.

Plain functions (the Prefect tasks in :mod:`pipelines.flows` only wire them); every function
takes and returns file paths for what crosses a task boundary.

Choices (documented settings, not hidden constants):

- **Plan start ("now" of the shipped data)**: the first UTC hour after the shipped ServeGen
  traffic (:func:`plan_start`); the profiles are fitted on all shipped hours before it.
- **Forecast against actual**: for each service the profile is also fitted on the history up
  to 24 h before the end and its 24 h-ahead P50/P90 are shown against the last shipped day
  (``bands.parquet``; MAE and P90 coverage of that day are logged to MLflow).
- **Real-time demand in the problem**: the P90 GPU demand (``DEMAND_QUANTILE``), each hour
  repeated over its two 30-min steps; ``current_gpus`` is the GPU need of the last actual hour.
- **Current queue** (:func:`build_queue`): the real-trace job mix plus generated LLM jobs.
  *Real trace*: the non-latency-sensitive GPU pods of the shipped Alibaba openb window
  (``data/traces/alibaba_openb_window.csv``, see ``data/traces/README.md``) created in its first 24 h, ``N_TRACE_JOBS``
  of them picked evenly by arrival; they keep their GPU count (fractional -> 1), QoS class
  (priority: Guaranteed 4, Burstable 2, BE 1) and arrival order, shifted so that they were
  submitted over the 24 h before the plan start and all wait now (a 64-GPU slice of a cluster
  that had 6,212 GPUs). QoS BE pods become batch-inference jobs, Burstable/Guaranteed pods
  training jobs; their features are drawn by the job generators (:mod:`forecasters.generators`) with
  ``gpus_requested`` fixed to the pod's GPU count. *Generated LLM jobs*: ``N_LLM_JOBS`` training,
  quantization and batch-inference jobs from the same generators, priorities in {1, 2, 4, 8},
  some with deadlines, plus ``N_RUNNING`` running training jobs on aligned blocks.
- **Durations in the problem**: the P50 forecast (``DURATION_QUANTILE``), rounded up to whole
  steps (>= 1); the risk report uses P90 for deadline risk. GPUs: ``max(gpus_requested,
  gpus_pred)``. Generated training and batch-inference jobs may also run on twice that
  (``ELASTIC_KINDS``, up to ``MAX_ELASTIC_GPUS``), with the duration forecast at that size and
  efficiency = GPU-hours at the request ÷ GPU-hours at the larger size (≤ 1): the MILP picks.
"""

from __future__ import annotations

import json
import math
import pickle
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines.atomic import atomic_path, atomic_write_bytes, atomic_write_text
from pipelines.config import Settings
from pipelines.errors import InputError

JOB_KINDS: tuple[str, ...] = ("training", "quantization", "batch_inference")
DEMAND_QUANTILE = "p90"
DURATION_QUANTILE = "p50"
N_TRACE_JOBS = 24
N_LLM_JOBS = 30
N_RUNNING = 3
QOS_PRIORITY = {"Guaranteed": 4.0, "Burstable": 2.0, "BE": 1.0}
QOS_KIND = {"Guaranteed": "training", "Burstable": "training", "BE": "batch_inference"}
BAND_DAY_H = 24
#: kinds whose generated queued jobs may also run on twice their GPUs (data parallel), with the
#: duration forecast at that size (forecasters.jobs.predict_for_sizes); at most this many GPUs
ELASTIC_KINDS = ("training", "batch_inference")
MAX_ELASTIC_GPUS = 16


# ---------------------------------------------------------------- helpers


def _write_parquet(df: pd.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)
    return path


def _write_json(obj: Any, path: Path) -> Path:
    atomic_write_text(path, json.dumps(obj, indent=1, default=str))
    return path


def load_services(settings: Settings) -> list[dict[str, Any]]:
    """The real-time service settings of ``data/traffic/services.json`` (see ``data/traffic/README.md``).

    Raises:
        pipelines.errors.InputError: file missing or a service without a required field.
    """
    path = settings.data_dir / "traffic" / "services.json"
    if not path.is_file():
        raise InputError(f"service settings not found: {path}")
    doc = json.loads(path.read_text())
    need = ("service", "file", "timezone", "capacity_per_gpu_per_h", "headroom", "min_gpus", "max_gpus",
            "swap_cap_gpus")
    for i, s in enumerate(doc.get("services", [])):
        miss = [k for k in need if k not in s]
        if miss:
            raise InputError(f"{path}: services[{i}] missing {', '.join(miss)}")
    return list(doc["services"])


# ---------------------------------------------------------------- traffic and profiles


def ingest_traffic(settings: Settings, work: Path) -> Path:
    """Ingest every service's hourly traffic (UTC, gaps imputed, outliers flagged).

    Writes ``traffic.parquet`` (``service, ts, value, excluded``) and ``ingest.json`` (the
    diagnostics per service) into ``work``; returns the parquet path.
    """
    from pipelines.traffic_io import ingest_service

    frames, diags = [], {}
    for svc in load_services(settings):
        series, diag = ingest_service(svc, settings.data_dir / "traffic")
        excluded = set(diag["imputed"]) | set(diag["outliers"])
        iso = series.index.strftime("%Y-%m-%dT%H:%M:%SZ")
        frames.append(pd.DataFrame({"service": svc["service"], "ts": series.index, "value": series.to_numpy(),
                                    "excluded": [t in excluded for t in iso]}))
        diags[svc["service"]] = diag
    out = work / "traffic.parquet"
    _write_parquet(pd.concat(frames, ignore_index=True), out)
    _write_json(diags, work / "ingest.json")
    return out


def plan_start(settings: Settings) -> datetime:
    """First UTC hour after the shipped traffic of every service (the "now" of ``gpuplan run``)."""
    from pipelines.traffic_io import read_traffic

    ends = []
    for svc in load_services(settings):
        df = read_traffic(settings.data_dir / "traffic" / svc["file"])
        ends.append(pd.to_datetime(df["ts"], utc=True).max())
    return (max(ends) + pd.Timedelta(hours=1)).to_pydatetime().astimezone(UTC)


def _series(traffic: pd.DataFrame, service: str) -> tuple[pd.Series, list[pd.Timestamp]]:
    t = traffic[traffic["service"] == service].sort_values("ts")
    s = pd.Series(t["value"].to_numpy(float), index=pd.DatetimeIndex(t["ts"]).tz_convert("UTC"))
    s.index.freq = "h"
    return s, list(s.index[t["excluded"].to_numpy(bool)])


def fit_profiles(settings: Settings, traffic_path: Path, work: Path, as_of: datetime, log: bool = True) -> Path:
    """Fit each service's weekly profile on the hours before ``as_of``, recalibrate its level
    on the last 6 actual hours, and back-test the last shipped day for the bands.

    Writes ``profiles.pkl`` ({service: Profile}), ``bands.parquet`` (``service, ts, actual,
    p50, p90``) and ``rt_status.json`` ({service: [status, message]}); logs one run per
    service to the ``realtime`` experiment when ``log``. Returns the pickle path.
    """
    from forecasters.realtime import fit_profile, forecast, recalibrate

    traffic = pd.read_parquet(traffic_path)
    as_of_ts = pd.Timestamp(as_of).tz_convert("UTC")
    profiles, status, bands, metrics = {}, {}, [], {}
    for svc in load_services(settings):
        name = svc["service"]
        s, excl = _series(traffic, name)
        hist = s[s.index < as_of_ts]
        prof = fit_profile(hist, svc["timezone"], exclude=[e for e in excl if e < as_of_ts])
        prof = recalibrate(prof, hist.drop(index=[e for e in excl if e in hist.index]))
        profiles[name] = prof
        status[name] = [prof.status, "; ".join(prof.messages)]
        # back-test: fit up to 24 h before the end of the history, forecast the last day
        cut = hist.index[-1] - pd.Timedelta(hours=BAND_DAY_H - 1)
        early = hist[hist.index < cut]
        bp = fit_profile(early, svc["timezone"], exclude=[e for e in excl if e < cut])
        bp = recalibrate(bp, early.drop(index=[e for e in excl if e in early.index]))
        fc = forecast(bp, BAND_DAY_H, start=cut)
        actual = hist.reindex(pd.DatetimeIndex(fc["ts"])).to_numpy()
        bands.append(pd.DataFrame({"service": name, "ts": fc["ts"], "actual": actual, "p50": fc["p50"],
                                   "p90": fc["p90"]}))
        ok = ~np.isnan(actual)
        metrics[name] = {
            "band_mae": float(np.mean(np.abs(actual[ok] - fc["p50"].to_numpy()[ok]))),
            "band_mape": float(np.mean(np.abs(actual[ok] - fc["p50"].to_numpy()[ok]) / np.maximum(actual[ok], 1e-9))),
            "band_p90_coverage": float(np.mean(actual[ok] <= fc["p90"].to_numpy()[ok])),
            "level_factor": float(prof.level_factor),
            "history_hours": int(len(hist)),
        }
    atomic_write_bytes(work / "profiles.pkl", pickle.dumps(profiles))
    _write_parquet(pd.concat(bands, ignore_index=True), work / "bands.parquet")
    _write_json(status, work / "rt_status.json")
    _write_json(metrics, work / "rt_metrics.json")
    if log:
        _log_profiles(settings, work, profiles, metrics, as_of)
    return work / "profiles.pkl"


def _log_profiles(settings: Settings, work: Path, profiles: dict, metrics: dict, as_of: datetime) -> None:
    from forecasters.realtime import forecast
    from pipelines import tracking

    bands = pd.read_parquet(work / "bands.parquet")
    for name, prof in profiles.items():
        fc = forecast(prof, 168, start=as_of)
        png = work / f"profile_{name}.png"
        _plot_profile(name, prof, fc, bands[bands["service"] == name], as_of, png)
        tracking.log_run(settings, "realtime", f"profile-{name}",
                         params={"service": name, "method": prof.method, "status": prof.status,
                                 "timezone": prof.timezone, "components": ",".join(prof.components),
                                 "as_of": as_of.isoformat()},
                         metrics=metrics[name], artifacts={f"plots/{png.name}": png},
                         tags={"gpuplan.stage": "profile"})


def _plot_profile(name: str, prof: Any, fc: pd.DataFrame, b: pd.DataFrame, as_of: datetime, png: Path) -> None:
    from pipelines import risk_report

    with risk_report.PLOT_LOCK:
        plt = risk_report._plt()
        fig, axes = plt.subplots(2, 1, figsize=(11, 6))
        axes[0].fill_between(fc["ts"], fc["p50"], fc["p90"], alpha=0.3, label="P50–P90")
        axes[0].plot(fc["ts"], fc["p50"], lw=1, label="P50")
        axes[0].set_title(f"{name}: 168 h demand profile from {as_of:%Y-%m-%d %H:%M}Z ({prof.status})")
        axes[0].legend(fontsize=7)
        axes[1].fill_between(b["ts"], b["p50"], b["p90"], alpha=0.3, label="P50–P90 forecast")
        axes[1].plot(b["ts"], b["actual"], color="black", lw=1, label="actual")
        axes[1].set_title("last shipped day: 24 h-ahead forecast against actual")
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        with atomic_path(png) as tmp_png:  # the temporary name keeps ".png" for savefig
            fig.savefig(tmp_png, dpi=80)
        plt.close(fig)


def demand_frame(settings: Settings, profiles: dict, traffic: pd.DataFrame, start: datetime) -> pd.DataFrame:
    """GPU demand per service and 30-min step over the horizon.

    Columns ``service, step, ts, traffic_p50, traffic_p90, demand_gpus_p50, demand_gpus_p90``;
    also ``current_gpus`` (GPU need of the last actual hour before ``start``).
    """
    from forecasters.realtime import forecast, to_gpus

    steps_per_h = 60 // settings.step_minutes
    hours = math.ceil(settings.horizon_steps / steps_per_h)
    rows = []
    for svc in load_services(settings):
        name = svc["service"]
        fc = forecast(profiles[name], hours, start=start)
        conv = dict(capacity_per_gpu_per_h=float(svc["capacity_per_gpu_per_h"]), headroom=float(svc["headroom"]),
                    min_gpus=int(svc["min_gpus"]), max_gpus=int(svc["max_gpus"]),
                    replica_gpus=int(svc.get("replica_gpus", 1)))
        g50 = to_gpus(fc["p50"].to_numpy(), **conv)
        g90 = to_gpus(fc["p90"].to_numpy(), **conv)
        s, _ = _series(traffic, name)
        last = s[s.index < pd.Timestamp(start)]
        cur = int(to_gpus([float(last.iloc[-1])], **conv)[0]) if len(last) else int(g90[0])
        for t in range(settings.horizon_steps):
            h = t // steps_per_h
            rows.append({"service": name, "step": t,
                         "ts": pd.Timestamp(start) + pd.Timedelta(minutes=t * settings.step_minutes),
                         "traffic_p50": float(fc["p50"].iloc[h]), "traffic_p90": float(fc["p90"].iloc[h]),
                         "demand_gpus_p50": int(g50[h]), "demand_gpus_p90": int(g90[h]), "current_gpus": cur})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- the current queue


def _trace_pods(settings: Settings) -> pd.DataFrame:
    """Non-LS GPU pods of the shipped openb window created in its first 24 h, by arrival."""
    path = settings.data_dir / "traces" / "alibaba_openb_window.csv"
    if not path.is_file():
        raise InputError(f"real-trace slice not found: {path} (shipped in data/traces; re-derive it with python -m pipelines.trace_io)")
    pods = pd.read_csv(path)
    for col in ("name", "qos", "num_gpu", "creation_s"):
        if col not in pods.columns:
            raise InputError(f"{path}: missing column {col!r}")
    pods = pods[(pods["num_gpu"] > 0) & (pods["qos"] != "LS") & (pods["creation_s"] >= 0)
                & (pods["creation_s"] < 86_400)]
    return pods.sort_values(["creation_s", "name"], kind="stable").reset_index(drop=True)


def _pick_evenly(n_have: int, n_want: int) -> np.ndarray:
    if n_have <= n_want:
        return np.arange(n_have)
    return np.unique(np.linspace(0, n_have - 1, n_want).round().astype(int))


def _features_fitting(kind: str, gpus: int, n: int, rng_seed: int, now: pd.Timestamp) -> pd.DataFrame:
    """``n`` generated queue rows of ``kind`` whose memory need fits ``gpus`` GPUs (requested = gpus)."""
    from forecasters.generators import generate_queue, kind_module

    pool = generate_queue(kind, max(64, 8 * n), seed=rng_seed, now=now)
    pool = pool.assign(gpus_requested=gpus)
    need = kind_module(kind).gpus_used(pool)
    fit = pool[np.asarray(need) <= gpus]
    if len(fit) < n:
        fit = pool.iloc[np.argsort(np.asarray(need), kind="stable")]
    return fit.head(n).reset_index(drop=True)


def build_queue(settings: Settings, start: datetime) -> dict[str, pd.DataFrame]:
    """The current queue at ``start``: real-trace job mix + generated LLM jobs (module docstring).

    Returns kind -> frame with the kind's features and ``job_id, kind, priority, state``
    (``queued``/``running``), ``submitted_at``, ``started_at`` (running only), ``block_offset``
    (running only), ``deadline_at`` (optional), ``source`` (``alibaba-openb``/``generated``).
    """
    from forecasters.generators import generate_queue

    now = pd.Timestamp(start).tz_convert("UTC")
    rng = np.random.default_rng(settings.seed)
    parts: dict[str, list[pd.DataFrame]] = {k: [] for k in JOB_KINDS}

    pods = _trace_pods(settings)
    pick = pods.iloc[_pick_evenly(len(pods), N_TRACE_JOBS)].reset_index(drop=True)
    for i, pod in pick.iterrows():
        kind = QOS_KIND.get(str(pod["qos"]), "batch_inference")
        gpus = 1 << max(0, int(pod["num_gpu"]) - 1).bit_length()
        row = _features_fitting(kind, gpus, 1, settings.seed + 1000 + i, now)
        row["job_id"] = f"trace-{pod['name'].removeprefix('openb-pod-')}"
        row["kind"] = kind
        row["priority"] = QOS_PRIORITY.get(str(pod["qos"]), 1.0)
        row["state"] = "queued"
        row["submitted_at"] = now - pd.Timedelta(hours=24) + pd.Timedelta(seconds=int(pod["creation_s"]))
        row["source"] = "alibaba-openb"
        parts[kind].append(row)

    per_kind = {"training": N_LLM_JOBS // 3, "quantization": N_LLM_JOBS // 3,
                "batch_inference": N_LLM_JOBS - 2 * (N_LLM_JOBS // 3)}
    for kind, n in per_kind.items():
        q = generate_queue(kind, n, seed=settings.seed + 7, now=now)
        q["priority"] = rng.choice([1.0, 2.0, 4.0, 8.0], size=n, p=[0.4, 0.3, 0.2, 0.1])
        q["state"] = "queued"
        q["source"] = "generated"
        has_deadline = rng.random(n) < 0.3
        q["deadline_at"] = [now + pd.Timedelta(hours=float(h)) if d else pd.NaT
                            for d, h in zip(has_deadline, rng.uniform(6, 20, n))]
        parts[kind].append(q)

    run = generate_queue("training", N_RUNNING, seed=settings.seed + 11, now=now)
    run["job_id"] = [f"run-{i:02d}" for i in range(N_RUNNING)]
    run["priority"] = 2.0
    run["state"] = "running"
    run["source"] = "generated"
    run["started_at"] = [now - pd.Timedelta(hours=float(h)) for h in rng.uniform(1, 6, N_RUNNING)]
    parts["training"].append(run)

    out = {}
    for kind, frames in parts.items():
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        for col in ("deadline_at", "started_at"):
            if col not in df.columns:
                df[col] = pd.NaT
            df[col] = pd.to_datetime(df[col], utc=True)
        df["submitted_at"] = pd.to_datetime(df["submitted_at"], utc=True)
        df["kind"] = kind
        out[kind] = df.reset_index(drop=True)
    return out


# ---------------------------------------------------------------- forecasts -> problem


def _assign_running_blocks(gpus: list[int], n_gpus: int) -> list[int]:
    """First-fit aligned offsets for running jobs, largest first (buddy layout).

    Raises:
        pipelines.errors.InputError: the running jobs do not fit the cluster.
    """
    used = np.zeros(n_gpus, dtype=bool)
    offsets = [0] * len(gpus)
    for i in sorted(range(len(gpus)), key=lambda k: -gpus[k]):
        g = gpus[i]
        for o in range(0, n_gpus - g + 1, g):
            if not used[o:o + g].any():
                used[o:o + g] = True
                offsets[i] = o
                break
        else:
            raise InputError(f"running jobs do not fit {n_gpus} GPUs (no aligned block of {g})")
    return offsets


def to_problem(settings: Settings, jobs: pd.DataFrame, demand: pd.DataFrame, start: datetime) -> dict[str, Any]:
    """The problem-file dict (DESIGN §3.1) from job forecasts and service demand.

    Args:
        jobs: one row per job: ``job_id, kind, priority, state, submitted_at, started_at,
            deadline_at, gpus_requested, gpus_pred, duration_p10_h, duration_p50_h,
            duration_p90_h`` (and ``block_offset`` for running jobs, else assigned here).
        demand: :func:`demand_frame` output.
    """
    from domain.units import hours_to_steps as duration_to_steps

    step_h = settings.step_minutes / 60.0
    now = pd.Timestamp(start)
    services = []
    settings_by_service = {s["service"]: s for s in load_services(settings)}
    for name, d in demand.groupby("service", sort=False):
        d = d.sort_values("step")
        svc = settings_by_service[name]
        services.append({"service": str(name), "demand_gpus": [int(x) for x in d[f"demand_gpus_{DEMAND_QUANTILE}"]],
                         "min_gpus": int(svc["min_gpus"]), "max_gpus": int(svc["max_gpus"]),
                         "swap_cap_gpus": int(svc["swap_cap_gpus"]), "current_gpus": int(d["current_gpus"].iloc[0])})
    queued = jobs[jobs["state"] == "queued"].sort_values(["submitted_at", "job_id"], kind="stable")
    out_jobs = []
    for r in queued.itertuples(index=False):
        gpus = int(max(r.gpus_requested, r.gpus_pred))
        steps = int(duration_to_steps(float(getattr(r, f"duration_{DURATION_QUANTILE}_h")), settings.step_minutes))
        job = {"job_id": r.job_id, "kind": r.kind, "priority": float(r.priority), "release_step": 0}
        options = json.loads(r.size_options) if isinstance(getattr(r, "size_options", None), str) else []
        if options:
            # first option = the requested size; efficiency = GPU-hours at the request / at this size
            sizes = [{"gpus": gpus, "duration_steps": steps, "efficiency": 1.0}]
            for o in options:
                o_steps = int(duration_to_steps(float(o["duration_h"]), settings.step_minutes))
                if int(o["gpus"]) > gpus and int(o["gpus"]) <= settings.n_gpus:
                    eff = min(1.0, (gpus * steps) / (int(o["gpus"]) * o_steps))
                    sizes.append({"gpus": int(o["gpus"]), "duration_steps": o_steps, "efficiency": round(eff, 4)})
            job["sizes"] = sizes if len(sizes) > 1 else None
        if job.get("sizes") is None:
            job.pop("sizes", None)
            job.update({"gpus": gpus, "duration_steps": steps})
        if pd.notna(r.deadline_at):
            job["deadline_step"] = max(1, int(math.ceil((pd.Timestamp(r.deadline_at) - now) / pd.Timedelta(hours=step_h))))
        out_jobs.append(job)
    running = jobs[jobs["state"] == "running"].sort_values("job_id")
    gpus_run = [int(max(a, b)) for a, b in zip(running["gpus_requested"], running["gpus_pred"])]
    offsets = _assign_running_blocks(gpus_run, settings.n_gpus)
    out_running = []
    for r, g, o in zip(running.itertuples(index=False), gpus_run, offsets):
        elapsed_h = (now - pd.Timestamp(r.started_at)) / pd.Timedelta(hours=1)
        remaining_h = float(getattr(r, f"duration_{DURATION_QUANTILE}_h")) - elapsed_h
        out_running.append({"job_id": r.job_id, "kind": r.kind, "priority": float(r.priority), "gpus": g,
                            "block_offset": int(o), "remaining_steps": max(1, int(math.ceil(remaining_h / step_h)))})
    return {
        "cluster": {"n_gpus": settings.n_gpus, "gpus_per_node": settings.gpus_per_node,
                    "step_minutes": settings.step_minutes, "horizon_steps": settings.horizon_steps},
        "settings": {"time_limit_s": settings.solve_time_limit_s},
        "services": services,
        "jobs": out_jobs,
        "running": out_running,
    }


def build_problem(settings: Settings, model_paths: dict[str, Path], profiles_path: Path, traffic_path: Path,
                  work: Path, start: datetime) -> dict[str, Path]:
    """Queue -> job forecasts + demand forecasts -> ``problem.json`` (and the forecast tables).

    Writes into ``work``: ``queue.parquet`` (every job with its features as JSON text),
    ``jobs.parquet`` (per-job forecast and queue columns), ``demand.parquet``,
    ``forecasts.parquet`` (DESIGN §3: job rows and service-step rows, ``entity`` column),
    ``problem.json``. Returns name -> path (also ``bands``, ``rt_status`` when present).
    """
    profiles = pickle.loads(Path(profiles_path).read_bytes())
    traffic = pd.read_parquet(traffic_path)
    queue = build_queue(settings, start)
    fc_parts = []
    for kind, q in queue.items():
        if len(q):
            fc_parts.append(forecast_jobs(settings, kind, model_paths[kind], q))
    jobs = pd.concat(fc_parts, ignore_index=True)
    demand = demand_frame(settings, profiles, traffic, start)
    problem = to_problem(settings, jobs, demand, start)
    paths = {
        "jobs": _write_parquet(jobs, work / "jobs.parquet"),
        "demand": _write_parquet(demand, work / "demand.parquet"),
        "problem": _write_json(problem, work / "problem.json"),
    }
    qcols = ["job_id", "kind", "priority", "state", "submitted_at", "started_at", "deadline_at", "source"]
    qtab = pd.concat([q.assign(features=q.drop(columns=[c for c in qcols if c in q.columns]).astype(str)
                                .to_dict(orient="records"))[qcols + ["features"]] for q in queue.values()],
                     ignore_index=True)
    qtab["features"] = qtab["features"].map(lambda d: json.dumps(d))
    paths["queue"] = _write_parquet(qtab, work / "queue.parquet")
    fj = jobs[["job_id", "kind", "duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred"]].assign(
        entity="job")
    fs = demand[["service", "step", "ts", "traffic_p50", "traffic_p90", "demand_gpus_p50", "demand_gpus_p90"]].assign(
        entity="service_step")
    paths["forecasts"] = _write_parquet(pd.concat([fj, fs], ignore_index=True), work / "forecasts.parquet")
    for extra in ("bands.parquet", "rt_status.json", "rt_metrics.json"):
        if (work / extra).exists():
            paths[extra.split(".")[0]] = work / extra
    return paths


# ---------------------------------------------------------------- outputs


def plan_tables(problem: Any, plan: Any, start: datetime) -> pd.DataFrame:
    """``plan.parquet`` of DESIGN §3 as one long table with a ``row_type`` column.

    - ``job``: ``job_id, kind, start_step, end_step, block_offset, gpus, running`` (None fields
      when not started in the horizon);
    - ``service_step``: ``service, step, ts, gpus``;
    - ``gpu_step``: ``step, ts, gpu, owner`` (job id, ``service:<name>``, ``down`` or ``""`` idle)
      and ``owner_type`` (``job``/``service``/``down``/``idle``); services are counted by the
      model, so they are shown on the highest GPUs left free by batch blocks.
    """
    from pipelines.risk_report import display_grid

    step = pd.Timedelta(minutes=problem.cluster.step_minutes)
    t0 = pd.Timestamp(start)
    kinds = {j.job_id: j.kind for j in problem.jobs} | {r.job_id: r.kind for r in problem.running}
    rows: list[dict[str, Any]] = []
    for a in plan.assignments:
        rows.append({"row_type": "job", "job_id": a.job_id, "kind": kinds.get(a.job_id, ""),
                     "start_step": a.start_step, "end_step": a.end_step, "block_offset": a.block_offset,
                     "gpus": a.gpus, "running": a.running})
    for svc, gpus in plan.service_gpus.items():
        for t, g in enumerate(gpus):
            rows.append({"row_type": "service_step", "service": svc, "step": t, "ts": t0 + t * step, "gpus": int(g)})
    for t, row in enumerate(display_grid(problem, plan)):
        for g, owner in enumerate(row):
            otype = ("idle" if not owner else "service" if owner.startswith("service:")
                     else "down" if owner == "down" else "job")
            rows.append({"row_type": "gpu_step", "step": t, "ts": t0 + t * step, "gpu": g, "owner": owner,
                         "owner_type": otype})
    df = pd.DataFrame(rows)
    for col in ("start_step", "end_step", "block_offset", "gpus", "step", "gpu"):
        df[col] = df[col].astype("Int64")
    df["running"] = df["running"].astype("boolean")
    df["ts"] = pd.to_datetime(df["ts"], utc=True)
    for col in ("job_id", "kind", "service", "owner", "owner_type"):
        df[col] = df[col].astype("str").where(df[col].notna(), None)
    return df


def plan_metrics(problem: Any, plan: Any, demand: pd.DataFrame) -> dict[str, float]:
    """Planned figures of the DESIGN §6.3 metrics over the horizon (forecasts, not actuals).

    ``utilization_pct`` = 100 × (batch GPU-h + Σ min(planned, P50 demand) GPU-h) / (N × horizon h);
    ``value`` = Σ over planned batch GPU-hours inside the horizon of the job's priority;
    ``rt_unmet_gpu_h`` and ``rt_sla_pct`` against the P90 demand the planner was given;
    ``jobs_started``/``jobs_total``; ``idle_gpu_h``.
    """
    H, N = problem.horizon_steps, problem.n_gpus
    step_h = problem.cluster.step_minutes / 60.0
    prio = {j.job_id: j.priority for j in problem.jobs} | {r.job_id: r.priority for r in problem.running}
    batch_h = value = 0.0
    for a in plan.assignments:
        if a.start_step is None:
            continue
        steps = max(0, min(H, a.end_step) - a.start_step)
        batch_h += a.gpus * steps * step_h
        value += prio.get(a.job_id, 0.0) * a.gpus * steps * step_h
    served_h = unmet_h = dem_h = 0.0
    for svc, gpus in plan.service_gpus.items():
        d = demand[demand["service"] == svc].sort_values("step")
        p50 = d["demand_gpus_p50"].to_numpy(float)[:H]
        p90 = d[f"demand_gpus_{DEMAND_QUANTILE}"].to_numpy(float)[:H]
        a = np.asarray(gpus[:H], dtype=float)
        served_h += float(np.minimum(a, p50).sum()) * step_h
        unmet_h += float(np.maximum(p90 - a, 0).sum()) * step_h
        dem_h += float(p90.sum()) * step_h
    rt_h = sum(float(np.sum(g[:H])) for g in plan.service_gpus.values()) * step_h
    started = sum(1 for a in plan.assignments if a.start_step is not None and not a.running)
    return {
        "utilization_pct": 100.0 * (batch_h + served_h) / (N * H * step_h),
        "value": value,
        "jobs_started": float(started),
        "jobs_total": float(len(problem.jobs)),
        "rt_unmet_gpu_h": unmet_h,
        "rt_sla_pct": 100.0 * (1 - unmet_h / dem_h) if dem_h > 0 else 100.0,
        "idle_gpu_h": N * H * step_h - batch_h - rt_h,
    }


def write_outputs(settings: Settings, work: Path, problem_path: Path, plan_path: Path, run_name: str,
                  extra: dict[str, Path]) -> dict[str, Path]:
    """Write ``plan.parquet``, the risk report (parquet, Markdown, PNGs) and ``summary.json``.

    ``extra`` holds the paths from :func:`build_problem` (``jobs``, ``demand``, ``bands``,
    ``rt_status``); without them (a plan of a given problem file) the report uses the
    problem's demand as both quantiles and has no forecast-against-actual band.
    """
    from optimizer.plan import Plan
    from optimizer.problem import Problem
    from pipelines.risk_report import ReportInputs, write_risk_report

    problem = Problem.from_dict(json.loads(Path(problem_path).read_text()))
    plan = Plan.from_dict(json.loads(Path(plan_path).read_text()))
    if "demand" in extra:
        demand = pd.read_parquet(extra["demand"])
        start = pd.Timestamp(demand["ts"].min()).to_pydatetime()
    else:
        start = datetime.now(UTC).replace(second=0, microsecond=0)
        demand = pd.DataFrame([{"service": s.service, "step": t, "demand_gpus_p50": d, "demand_gpus_p90": d}
                               for s in problem.services for t, d in enumerate(s.demand_gpus)])
    if "jobs" in extra:
        jobs = pd.read_parquet(extra["jobs"])
    else:
        jobs = pd.DataFrame([{"job_id": j.job_id, "kind": j.kind, "priority": j.priority, "state": "queued",
                              "duration_p90_h": j.requested.duration_steps * problem.cluster.step_minutes / 60}
                             for j in problem.jobs])
    bands = pd.read_parquet(extra["bands"]) if "bands" in extra else None
    rt_status = {k: tuple(v) for k, v in json.loads(Path(extra["rt_status"]).read_text()).items()} \
        if "rt_status" in extra else {s.service: ("given", "demand from the problem file") for s in problem.services}
    paths: dict[str, Path] = {}
    paths["plan.parquet"] = _write_parquet(plan_tables(problem, plan, start), work / "plan.parquet")
    inp = ReportInputs(problem=problem, plan=plan, start_ts=start, jobs=jobs, demand=demand, bands=bands,
                       rt_status=rt_status, time_limit_s=problem.settings.time_limit_s)
    paths.update(write_risk_report(work, inp, run_name))
    summary = {"run": run_name, "plan_start": start.isoformat(), "planner": plan.planner, "status": plan.status,
               "proven_optimal": plan.status == "optimal", "fallback": plan.fallback,
               "objective": plan.objective, "bound": plan.bound, "mip_gap": plan.gap, "solve_s": plan.solve_s,
               "model": plan.model, "violations": list(plan.violations), "rt_status": rt_status,
               "metrics": plan_metrics(problem, plan, demand)}
    paths["summary.json"] = _write_json(summary, work / "summary.json")
    return paths


def log_plan_run(settings: Settings, run_dir: Path, run_name: str, planner: str) -> str:
    """Log a published run folder to the ``plans`` experiment; returns the MLflow run id.

    Params: planner, status, plan start, model size, job counts. Metrics: plan metrics
    (:func:`plan_metrics`), ``objective``, ``bound``, ``mip_gap`` (fraction), ``solve_s``,
    ``proven_optimal`` (0/1), real-time band metrics. Artifacts: the Gantt chart, demand bands,
    the risk report page and table, the plan parquet, the problem file.
    """
    from pipelines import tracking

    summary = json.loads((run_dir / "summary.json").read_text())
    metrics = dict(summary["metrics"])
    metrics.update({"objective": summary["objective"], "bound": summary["bound"], "mip_gap": summary["mip_gap"],
                    "solve_s": summary["solve_s"], "proven_optimal": 1.0 if summary["proven_optimal"] else 0.0})
    rtm = run_dir / "rt_metrics.json"
    if rtm.exists():
        for svc, m in json.loads(rtm.read_text()).items():
            metrics.update({f"{svc}.{k}": v for k, v in m.items()})
    model = summary.get("model") or {}
    params = {"planner": planner, "status": summary["status"], "plan_start": summary["plan_start"],
              "fallback": summary["fallback"], "run_dir": str(run_dir),
              **{f"model_{k}": v for k, v in model.items()}}
    params.update({f"rt_status.{k}": v[0] for k, v in summary["rt_status"].items()})
    artifacts = {}
    for name, sub in (("gantt.png", "plots"), ("demand.png", "plots"), ("bands.png", "plots"),
                      ("outlook.png", "plots"), ("risk_report.md", "report"), ("risk_report.parquet", "report"),
                      ("plan.parquet", "plan"), ("problem.json", "plan"), ("summary.json", "plan")):
        if (run_dir / name).exists():
            artifacts[f"{sub}/{name}"] = run_dir / name
    return tracking.log_run(settings, "plans", run_name, params=params, metrics=metrics,
                            tags={"gpuplan.status": summary["status"]}, artifacts=artifacts)


# ---------------------------------------------------------------- job forecasters


def load_history(settings: Settings, kind: str) -> tuple[pd.DataFrame, str]:
    """The validated job history of ``kind`` and its path: ``data/histories/<kind>_jobs.parquet``
    (shipped in ``data/histories``, see its README; read with :mod:`pipelines.job_io`)."""
    from pipelines import job_io

    path = settings.data_dir / "histories" / job_io.HISTORY_FILES[kind]
    return job_io.load_history(path, kind), str(path)


def _model_path(settings: Settings, kind: str) -> Path:
    return settings.models_dir / kind


def train_or_load(settings: Settings, kind: str, retrain: bool = False) -> Path:
    """Return the current ``kind`` forecaster's folder, training it first when missing, unreadable
    or ``retrain``.

    Training: time-ordered split (:func:`forecasters.jobs.time_split`), fit on the earlier jobs,
    evaluate on the later ones against the baselines, save (:func:`pipelines.job_models.save_model`,
    atomic), then log params, metrics, the predicted-vs-actual plot and the model
    (:func:`pipelines.tracking.log_job_model`: both boosters in the lightgbm flavour, the
    forecaster as a pyfunc registered with alias ``champion``) to the ``kind`` experiment.
    """
    from forecasters import jobs as J
    from pipelines import job_models

    path = _model_path(settings, kind)
    if path.is_dir() and not retrain:
        try:
            if job_models.load_model(path).kind == kind:
                return path
        except InputError:
            pass  # a corrupt or partial model folder is retrained, never used
    history, source = load_history(settings, kind)
    train, test = J.time_split(history)
    model = J.fit(kind, train, seed=settings.seed)
    doc = J.evaluate(model, test)
    job_models.save_model(model, path)
    _log_job_model(settings, kind, model, test, doc, source)
    return path


def _flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _log_job_model(settings: Settings, kind: str, model: Any, test: pd.DataFrame, doc: dict[str, Any],
                   source: str) -> str:
    import tempfile

    from forecasters import jobs as J
    from pipelines import tracking

    pred = J.predict(model, test)
    actual = test["duration_h"].to_numpy(float)
    ok = actual > 0
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / f"pred_vs_actual_{kind}.png"
        _plot_pred_vs_actual(kind, pred, actual, ok, doc, png)
        levels = Path(tmp) / "levels.json"
        levels.write_text(json.dumps({"levels_version": model.levels_version, "levels": model.levels}))
        params = {"kind": kind, "history": source, "levels_version": model.levels_version,
                  "n_train": doc.get("n_train"), "n_test": doc.get("n_test"),
                  **{f"info.{k}": v for k, v in model.info.items() if not isinstance(v, dict)}}
        rid = tracking.log_run(settings, kind, f"train-{kind}", params=params, metrics=_flatten(doc),
                               artifacts={f"plots/{png.name}": png, "model_meta/levels.json": levels},
                               tags={"gpuplan.stage": "train"})
    tracking.log_job_model(settings, rid, model, test.head(5))
    return rid


def _plot_pred_vs_actual(kind: str, pred: pd.DataFrame, actual: np.ndarray, ok: np.ndarray, doc: dict,
                         png: Path) -> None:
    from pipelines import risk_report

    with risk_report.PLOT_LOCK:
        plt = risk_report._plt()
        fig, ax = plt.subplots(figsize=(6, 5))
        p50 = pred["duration_p50_h"].to_numpy(float)
        ax.errorbar(actual[ok], p50[ok], yerr=[p50[ok] - pred["duration_p10_h"].to_numpy(float)[ok],
                                               pred["duration_p90_h"].to_numpy(float)[ok] - p50[ok]],
                    fmt=".", ms=3, alpha=0.4, elinewidth=0.5)
        lo, hi = float(actual[ok].min()), float(actual[ok].max())
        ax.plot([lo, hi], [lo, hi], color="black", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("actual duration (h)")
        ax.set_ylabel("predicted P50 (h), bars P10–P90")
        ax.set_title(f"{kind}: held-out jobs (MAPE {doc['metrics']['mape']:.3f})")
        fig.tight_layout()
        with atomic_path(png) as tmp_png:  # the temporary name keeps ".png" for savefig
            fig.savefig(tmp_png, dpi=80)
        plt.close(fig)


def forecast_jobs(settings: Settings, kind: str, model_path: Path, queue: pd.DataFrame) -> pd.DataFrame:
    """Duration quantiles (hours, >= one step) and GPU count per queued/running job of ``kind``.

    Returns ``queue``'s planning columns plus ``duration_p10_h, duration_p50_h, duration_p90_h,
    gpus_pred, flags`` (flags joined by ``,``).
    """
    from forecasters import jobs as J
    from pipelines import job_models

    model = job_models.load_model(model_path)
    pred = J.predict(model, queue, step_minutes=settings.step_minutes)
    keep = ["job_id", "kind", "priority", "state", "submitted_at", "started_at", "deadline_at", "source",
            "gpus_requested"]
    out = queue[keep].reset_index(drop=True).copy()
    for col in ("duration_p10_h", "duration_p50_h", "duration_p90_h", "gpus_pred"):
        out[col] = pred[col].to_numpy()
    out["flags"] = [",".join(f) for f in pred["flags"]]
    out["size_options"] = None
    elastic = (out["state"] == "queued") & (out["source"] == "generated") & out["kind"].isin(ELASTIC_KINDS)
    if elastic.any():
        base = np.maximum(out["gpus_requested"].to_numpy(int), out["gpus_pred"].to_numpy(int))
        idx = np.flatnonzero(elastic.to_numpy() & (2 * base <= MAX_ELASTIC_GPUS))
        for i in idx:
            opts = J.predict_for_sizes(model, queue.iloc[[i]], [int(2 * base[i])], step_minutes=settings.step_minutes)
            fit = opts[opts["fits"]]
            out.at[i, "size_options"] = json.dumps([{"gpus": int(g), "duration_h": float(d)}
                                                    for g, d in zip(fit["gpus"], fit[f"duration_{DURATION_QUANTILE}_h"])])
    return out


# ---------------------------------------------------------------- benchmark


def run_benchmark(settings: Settings, scenario: str, quick: bool, out: Path) -> dict[str, Any]:
    """Run the rolling-horizon benchmark (:mod:`pipelines.bench`, ``docs/benchmark.md``), write its outputs into
    ``out`` and log one run to the ``benchmarks`` experiment: params (scenarios, planners, seed,
    quick, solver budget), metrics ``<scenario>.<planner>.<bench.csv column>``, artifacts
    (``bench.csv``, ``bench.md``, plots). Returns ``{"out_dir", "mlflow_run_id", "wall_s",
    "verified_plans", "violations"}``.
    """
    from pipelines import bench, tracking

    cfg = bench.BenchConfig(scenarios=bench.parse_scenarios(scenario), quick=quick, seed=settings.seed)
    res = bench.run_bench(cfg)
    files = bench.write_outputs(res, out)
    metrics: dict[str, Any] = {"wall_s": res.wall_s, "verified_plans": res.verified_plans,
                               "violations": res.violations}
    for m in res.metrics:
        row = m.row()
        for k, v in row.items():
            if k not in ("scenario", "planner"):
                metrics[f"{row['scenario']}.{row['planner']}.{k}"] = v
    params = {"scenarios": ",".join(cfg.scenarios), "planners": ",".join(cfg.planners), "seed": cfg.seed,
              "quick": cfg.quick, "time_limit_s": cfg.time_limit_s, "mip_rel_gap": cfg.mip_rel_gap,
              "replan_every_steps": cfg.replan_every_steps, "out_dir": str(out)}
    artifacts = {f"bench/{f}": Path(out) / f for f in files if (Path(out) / f).is_file()}
    rid = tracking.log_run(settings, "benchmarks", f"bench-{scenario}{'-quick' if quick else ''}", params=params,
                           metrics=metrics, artifacts=artifacts, tags={"gpuplan.stage": "benchmark"})
    return {"out_dir": str(out), "mlflow_run_id": rid, "wall_s": round(res.wall_s, 1),
            "verified_plans": res.verified_plans, "violations": res.violations}
