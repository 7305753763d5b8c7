"""Seeded generator of planning problems (for the benchmark, examples and property tests).

``random_problem`` draws a cluster with one diurnal real-time service and a queue of batch
jobs of mixed power-of-two sizes and priorities. Pure: returns a :class:`Problem`, no IO.
"""

from __future__ import annotations

import math

import numpy as np

from optimizer.problem import Cluster, Job, PlanSettings, Problem, RunningJob, Service, SizeOption


def diurnal_demand(horizon_steps: int, step_minutes: int, low_gpus: int, high_gpus: int, peak_hour: float = 14.0,
                   start_hour: float = 0.0) -> tuple[int, ...]:
    """Demand per step following one cosine day: ``high_gpus`` at ``peak_hour``, ``low_gpus`` 12 h away.

    Shape (horizon_steps,), whole GPUs, ``start_hour`` the local hour of step 0.
    """
    out = []
    for t in range(horizon_steps):
        hour = start_hour + t * step_minutes / 60.0
        phase = math.cos(2 * math.pi * (hour - peak_hour) / 24.0)
        out.append(int(round(low_gpus + (high_gpus - low_gpus) * (1 + phase) / 2)))
    return tuple(out)


def random_problem(
    n_gpus: int = 64,
    n_jobs: int = 30,
    horizon_steps: int = 48,
    seed: int = 0,
    *,
    step_minutes: int = 30,
    gpus_per_node: int = 8,
    sizes: tuple[int, ...] = (1, 2, 4, 8, 16),
    size_weights: tuple[float, ...] = (0.25, 0.25, 0.2, 0.2, 0.1),
    priorities: tuple[float, ...] = (1.0, 2.0, 3.0, 5.0),
    max_duration_steps: int = 16,
    release_within: int | None = None,
    rt_low_frac: float = 0.15,
    rt_high_frac: float = 0.6,
    n_running: int = 2,
    settings: PlanSettings | None = None,
) -> Problem:
    """A seeded problem: one diurnal service plus ``n_jobs`` queued and ``n_running`` running jobs.

    The service's demand swings between ``rt_low_frac`` and ``rt_high_frac`` of the cluster
    (peak 14:00, step 0 = 00:00), band [low/2, cluster], swap cap 1/8 of the cluster per step,
    current allocation = demand at step 0. Queued jobs: sizes drawn from ``sizes`` (capped at the
    cluster), durations 1..max_duration_steps, priorities from ``priorities``, releases in
    [0, release_within) (default half the horizon). Running jobs are packed from GPU 0 upwards.
    """
    rng = np.random.default_rng(seed)
    cluster = Cluster(n_gpus=n_gpus, gpus_per_node=min(gpus_per_node, n_gpus), step_minutes=step_minutes,
                      horizon_steps=horizon_steps)
    low = int(round(rt_low_frac * n_gpus))
    high = int(round(rt_high_frac * n_gpus))
    demand = diurnal_demand(horizon_steps, step_minutes, low, high)
    service = Service(
        service="chat",
        demand_gpus=demand,
        min_gpus=low // 2,
        max_gpus=n_gpus,
        swap_cap_gpus=max(1, n_gpus // 8),
        current_gpus=demand[0],
    )
    allowed = [s for s in sizes if s <= n_gpus]
    w = np.array([size_weights[sizes.index(s)] for s in allowed], dtype=float)
    w /= w.sum()
    rel_max = max(1, release_within if release_within is not None else horizon_steps // 2)
    kinds = ("training", "quantization", "batch_inference")
    jobs = []
    for k in range(n_jobs):
        g = int(rng.choice(allowed, p=w))
        d = int(rng.integers(1, max_duration_steps + 1))
        jobs.append(
            Job(
                job_id=f"J{k:03d}",
                kind=kinds[k % 3],
                priority=float(rng.choice(priorities)),
                release_step=int(rng.integers(0, rel_max)),
                sizes=(SizeOption(g, d, 1.0),),
            )
        )
    running = []
    off = 0
    for k in range(n_running):
        g = min(int(rng.choice([1, 2, 4])), n_gpus)
        off = -(-off // g) * g
        if off + g > n_gpus:
            break
        running.append(RunningJob(f"R{k:02d}", "training", float(rng.choice(priorities)), g, off,
                                  int(rng.integers(1, max(2, horizon_steps // 4)))))
        off += g
    return Problem(cluster, settings or PlanSettings(), (service,), tuple(jobs), tuple(running))
