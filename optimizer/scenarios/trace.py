"""The real-trace scenario: job mix and arrivals from the Alibaba openb GPU trace, real-time demand from its latency-sensitive pods and ServeGen traffic.

The data (:class:`RealTraceData` of :class:`TracePod`) is read by
:func:`pipelines.catalog.load_real_trace`; this module only turns it into a
:class:`~optimizer.scenarios.types.Scenario` (:func:`real_trace`). Priority by QoS class is
:data:`domain.kinds.QOS_PRIORITY`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from domain.kinds import QOS_PRIORITY
from domain.units import pow2_ceil
from optimizer.errors import InputError
from optimizer.problem import Cluster, Node
from optimizer.scenarios.types import HORIZON_STEPS, STEP_MINUTES, WINDOW_STEPS, Scenario, SimJob
from optimizer.scenarios.workload import (
    make_service,
    offered_load,
    offered_load_total,
    scenario_cluster,
    scenario_rng,
    scenario_settings,
)


@dataclass(frozen=True)
class TracePod:
    """One pod of the Alibaba openb trace, times in seconds relative to the window start.

    ``num_gpu`` whole GPUs (0..8); ``gpu_milli`` the GPU share of a sharing pod (1000 = full
    GPU); ``scheduled_s`` None when the pod never ran.
    """

    name: str
    qos: str
    num_gpu: int
    gpu_milli: int
    creation_s: int
    scheduled_s: int | None
    deletion_s: int
    gpu_spec: str = ""

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The GPU types the pod may run on: ``gpu_spec`` split on ``|``, each once, in order (``()`` = any type).

        The trace repeats a type in a few specs (``openb-pod-1915``: ``V100M16|V100M32|V100M32``).
        """
        return tuple(dict.fromkeys(x for x in self.gpu_spec.split("|") if x))

    @property
    def gpu_share(self) -> float:
        """GPUs the pod occupies: ``num_gpu``, or ``gpu_milli / 1000`` for a fractional 1-GPU pod."""
        if self.num_gpu == 1 and 0 < self.gpu_milli < 1000:
            return self.gpu_milli / 1000.0
        return float(self.num_gpu)

    @property
    def run_s(self) -> int:
        """Seconds the pod ran: ``deletion_s - scheduled_s`` (0 when it never ran)."""
        return 0 if self.scheduled_s is None else self.deletion_s - self.scheduled_s


@dataclass(frozen=True)
class RealTraceData:
    """The shipped real-trace slice (read by :func:`pipelines.catalog.load_real_trace`).

    ``nodes``: the typed cluster slice of a heterogeneous window (``openb-het-*``; empty = the
    homogeneous windows, planned on ``n_gpus`` GPUs of one type).

    ``pods``: LS pods alive around the window and non-LS GPU pods created in it.
    ``serve_rates``: (t_s, rate_rps or None for a collection gap) every 30 min, t_s relative to
    the window start, covering [-24 h, +72 h).
    """

    pods: tuple[TracePod, ...]
    serve_rates: tuple[tuple[int, float | None], ...]
    source: str = ""
    nodes: tuple[Node, ...] = ()


def _interpolate_missing(values: Sequence[float | None]) -> np.ndarray:
    """Linear interpolation over None entries (nearest value at the edges).

    Raises when all entries are missing.
    """
    v = np.array([np.nan if x is None else float(x) for x in values])
    ok = ~np.isnan(v)
    if not ok.any():
        raise InputError("real trace: serve_rates has no observed value")
    idx = np.arange(len(v))
    return np.interp(idx, idx[ok], v[ok])


def ls_demand_curve(pods: Sequence[TracePod], first_step: int, n: int, step_s: int = 1800) -> np.ndarray:
    """GPUs held by latency-sensitive pods per step, time-averaged over each step.

    Shape (n,), floats; step ``k`` covers seconds ``[(first_step + k) * step_s, +step_s)``. A pod
    contributes ``gpu_share x overlap / step_s`` (overlap of [scheduled_s, deletion_s) with the
    step). Pods that never ran contribute nothing.
    """
    out = np.zeros(n)
    t0 = first_step * step_s
    for p in pods:
        if p.qos != "LS" or p.scheduled_s is None or p.num_gpu <= 0:
            continue
        a, b = max(p.scheduled_s, t0), min(p.deletion_s, t0 + n * step_s)
        if b <= a:
            continue
        k0, k1 = (a - t0) // step_s, (b - 1 - t0) // step_s
        for k in range(k0, k1 + 1):
            lo, hi = t0 + k * step_s, t0 + (k + 1) * step_s
            out[k] += p.gpu_share * (min(b, hi) - max(a, lo)) / step_s
    return out


def real_trace(
    data: RealTraceData,
    seed: int = 0,
    *,
    name: str = "real_trace",
    n_gpus: int = 32,
    ls_scale: float = 1.0,
    batch_sample: float = 1.0,
    serve_peak_gpus: int = 4,
    duration_error_sigma: float = 0.3,
    margin: float = 0.1,
    recalibrate_steps: int = 4,
) -> Scenario:
    """Job mix and arrivals from the Alibaba openb GPU trace; real-time demand from real traffic.

    - Window: 48 h (96 steps of 30 min) of the trace slice in ``data`` (``real_trace``: trace days
      122-123, :func:`pipelines.io.trace_io.choose_window_day`; ``real_trace_b``: days 116-117,
      :func:`pipelines.io.trace_io.choose_second_window_day`); one history day before it (for the
      seasonal naive forecast) and one horizon day after it. ``name`` labels the scenario.
    - Cluster: ``n_gpus`` = 32 (4 nodes x 8). The LS pods hold 17-24 GPUs at a time and the batch
      pods offer 305.5 (days 122-123) / 490.0 (days 116-117) GPU-h inside the window; with
      ``serve_peak_gpus`` = 4 the offered load (:func:`~optimizer.scenarios.workload.offered_load_total`,
      GPU-h demanded / GPU-h available) is 1.017 and 0.993: contended, as the benchmark needs
      (``data/traces/README.md``; printed by ``scripts/derive_trace_windows.py``). 16 GPUs could not
      hold the LS pods; 64 would leave the cluster half idle.
    - Service ``alibaba-ls``: the latency-sensitive (LS) pods' GPUs summed over time (time-averaged
      per step, fractional GPU shares included), times ``ls_scale``, rounded up to whole GPUs.
      Band [0, 3/4 of the cluster], swap cap 8.
    - Service ``servegen-m-small``: ServeGen m-small request rate (collection gaps interpolated),
      scaled so its peak over the four days is ``serve_peak_gpus`` GPUs: ``ceil(rate / peak x
      serve_peak_gpus)``. Band [1, 2 x serve_peak_gpus], swap cap 4.
    - Both services are forecast seasonal-naive (the same step 24 h earlier) plus ``margin``,
      level-recalibrated over the last ``recalibrate_steps`` steps.
    - Batch jobs: every non-LS GPU pod created in the window that was scheduled (pending pods never
      ran and have no duration), kept with probability ``batch_sample`` (seeded). Arrival =
      ``creation_s`` floored to the step; true duration = ``deletion_s - scheduled_s`` (the real
      run time, also for pods that failed) rounded *up* to whole 30-min steps (>= 1), which
      overstates the many sub-30-minute pods (the step is the scheduling quantum); GPUs =
      ``num_gpu`` (a fractional sharing pod takes 1 whole GPU) rounded up to a power of two.
      Priority by QoS: :data:`domain.kinds.QOS_PRIORITY`. The forecast duration is true x exp(N(0,
      ``duration_error_sigma``)). Kind (not in the trace; used only for the stacked plot):
      >= 2 GPUs -> training, 1 GPU running >= 1 h -> batch_inference, else quantization.
    - Typed (``data.nodes`` given: the heterogeneous ``openb-het-*`` windows, issue 26): the cluster is
      those nodes (:class:`~optimizer.problem.Cluster` with ``nodes``; ``n_gpus`` is then ignored and the
      bands and the offered load use the nodes' GPU count); each batch job may run only on its pod's
      ``gpu_spec`` types (empty = any); a pod that no eligible node is large enough for is dropped
      (counted in ``params["dropped_no_eligible_node"]``). Every type runs at speed 1 (the trace gives
      no per-type speed). The services are not typed (service types are a later step).
    """
    rng = scenario_rng(seed, name)
    typed = bool(data.nodes)
    if typed:
        n_gpus = sum(n.gpus for n in data.nodes)
        largest: dict[str, int] = {}
        for nd in data.nodes:
            largest[nd.gpu_type] = max(largest.get(nd.gpu_type, 0), nd.gpus)
    H, W = HORIZON_STEPS, WINDOW_STEPS
    step_s = STEP_MINUTES * 60
    total = W + H
    ls_full = ls_demand_curve(data.pods, -H, H + total, step_s)  # history day + window + horizon
    ls_full = np.array([math.ceil(round(v * ls_scale, 6)) for v in ls_full], dtype=int)
    rates = dict(data.serve_rates)
    keys = list(range(-H * step_s, total * step_s, step_s))
    missing = [k for k in keys if k not in rates]
    if missing:
        raise InputError(f"real trace: serve_rates has no row for t_s = {missing[0]}")
    r = _interpolate_missing([rates[k] for k in keys])
    serve_full = np.ceil(np.round(r / r.max() * serve_peak_gpus, 6)).astype(int)
    services = []
    for sname, full, band_max, cap, band_min in (
        ("alibaba-ls", ls_full, 3 * n_gpus // 4, 8, 0),
        ("servegen-m-small", serve_full, 2 * serve_peak_gpus, 4, 1),
    ):
        services.append(
            make_service(
                sname,
                full[H:],
                max_gpus=band_max,
                swap_cap_gpus=cap,
                min_gpus=band_min,
                forecast=full[:total],
                recalibrate_steps=recalibrate_steps,
                margin=margin,
            )
        )
    jobs = []
    batch = [p for p in data.pods if p.qos != "LS" and p.num_gpu > 0 and p.scheduled_s is not None]
    batch = [p for p in batch if 0 <= p.creation_s < W * step_s]
    batch.sort(key=lambda p: (p.creation_s, p.name))
    n_seen = len(batch)
    dropped = 0
    for p in batch:
        keep = rng.random() < batch_sample
        err = math.exp(rng.normal(0.0, duration_error_sigma)) if duration_error_sigma > 0 else 1.0
        if not keep:
            continue
        types: tuple[str, ...] = ()
        if typed:
            types = p.gpu_types
            room = [g for t, g in largest.items() if not types or t in types]
            if not room or max(room) < pow2_ceil(p.num_gpu):
                dropped += 1
                continue
        run_s = max(0, p.run_s)
        true_steps = max(1, math.ceil(run_s / step_s))
        fc_steps = max(1, math.ceil(round(run_s * err / step_s, 6)))
        gpus = pow2_ceil(p.num_gpu)
        if gpus >= 2:
            kind = "training"
        elif run_s >= 3600:
            kind = "batch_inference"
        else:
            kind = "quantization"
        jobs.append(
            SimJob(
                job_id=p.name,
                kind=kind,
                priority=QOS_PRIORITY.get(p.qos, 1.0),
                arrival_step=p.creation_s // step_s,
                gpus=min(gpus, n_gpus),
                true_steps=true_steps,
                forecast_steps=fc_steps,
                gpu_types=types,
            )
        )
    true_gpu_h = sum(
        p.run_s / 3600.0 * pow2_ceil(p.num_gpu) for p in batch if p.name in {j.job_id for j in jobs}
    )
    params = {
        "seed": seed,
        "n_gpus": n_gpus,
        "window": "48 h of the shipped slice (data/traces/README.md)",
        "ls_scale": ls_scale,
        "batch_sample": batch_sample,
        "batch_pods_in_window": n_seen,
        "n_jobs": len(jobs),
        "serve_peak_gpus": serve_peak_gpus,
        "duration_error_sigma": duration_error_sigma,
        "margin": margin,
        "recalibrate_steps": recalibrate_steps,
        **({"dropped_no_eligible_node": dropped,
            "typed_jobs": sum(1 for j in jobs if j.gpu_types),
            "nodes": len(data.nodes)} if typed else {}),
        "batch_gpu_h_true": round(true_gpu_h, 1),
        "batch_gpu_h_after_step_rounding": sum(j.gpus * j.true_steps for j in jobs) * STEP_MINUTES / 60,
        "ls_demand_mean_gpus": round(float(np.mean(services[0].demand_true[:W])), 2),
        "serve_demand_mean_gpus": round(float(np.mean(services[1].demand_true[:W])), 2),
        "offered_load": offered_load(jobs, services, n_gpus, W),
        "offered_load_total": offered_load_total(jobs, services, n_gpus, W),
    }
    return Scenario(
        name=name,
        seed=seed,
        cluster=(Cluster(n_gpus=0, step_minutes=STEP_MINUTES, horizon_steps=HORIZON_STEPS, nodes=data.nodes)
                 if typed else scenario_cluster(n_gpus)),
        settings=scenario_settings(),
        n_steps=W,
        services=tuple(services),
        jobs=tuple(jobs),
        exact_forecasts=False,
        description="job mix and arrivals from the Alibaba openb GPU trace; LS + ServeGen real-time demand",
        params=params,
    )
