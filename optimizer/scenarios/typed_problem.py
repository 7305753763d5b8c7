"""A seeded heterogeneous planning problem of moderate size (issue 26): for measuring the pool MILP.

:func:`typed_problem` draws one :class:`~optimizer.problem.Problem` (not a simulator scenario): three GPU types
(``h100`` speed 2, ``a100`` speed 1.4, ``t4`` speed 1; the speeds are this generator's, not measured), nodes of
2, 4 and 8 GPUs, jobs of 1–16 GPUs (16 = a gang of two 8-GPU nodes of one type), about a third of them with a
type constraint (one or two types, as openb's ``gpu_spec``), one real-time service, offered work about
``load`` times the cluster's GPU-steps over the horizon.
"""

from __future__ import annotations

import numpy as np

from optimizer.problem import Cluster, Job, Node, PlanSettings, Problem, Service, SizeOption

#: (gpu_type, node GPUs, share of the GPUs): the node kinds of :func:`typed_problem`.
NODE_KINDS: tuple[tuple[str, int, float], ...] = (
    ("h100", 8, 0.25), ("a100", 8, 0.2), ("a100", 4, 0.15), ("t4", 4, 0.2), ("t4", 2, 0.2))
#: Relative speed per type (reference = t4).
SPEEDS: tuple[tuple[str, float], ...] = (("h100", 2.0), ("a100", 1.4))


def typed_problem(seed: int, n_gpus: int = 256, n_jobs: int = 100, horizon_steps: int = 48, load: float = 1.2,
                  settings: PlanSettings | None = None) -> Problem:
    """The problem of the module docstring; ``n_gpus`` is split over :data:`NODE_KINDS` by share (whole nodes).

    Durations are drawn in reference (t4) steps, 2–24, scaled so the offered GPU-steps are about ``load``
    times ``n_gpus × horizon_steps``; releases in the first half of the horizon.
    """
    rng = np.random.default_rng(seed)
    H = horizon_steps
    nodes = []
    for ty, g, share in NODE_KINDS:
        for k in range(max(1, round(n_gpus * share / g))):
            nodes.append(Node(f"{ty}-{g}g-{k:03d}", g, ty, f"rack{k % 4}"))
    total = sum(n.gpus for n in nodes)
    types = ("h100", "a100", "t4")
    sizes = rng.choice([1, 2, 4, 8, 16], size=n_jobs, p=[0.3, 0.25, 0.2, 0.17, 0.08])
    dur = rng.integers(2, 25, size=n_jobs).astype(np.float64)
    dur *= load * total * H / max(1.0, float((sizes * dur).sum()))
    jobs = []
    for j in range(n_jobs):
        el: tuple[str, ...] = ()
        if rng.random() < 1 / 3:
            el = tuple(sorted(rng.choice(types, size=int(rng.integers(1, 3)), replace=False).tolist()))
        if int(sizes[j]) == 16 and el == ("t4",):
            el = ()  # t4 has no 8-GPU nodes: a 16-GPU t4 gang could never run
        jobs.append(Job(f"j{j:03d}", "training", float(rng.choice([1, 2, 3, 5])), int(rng.integers(0, H // 2)),
                        (SizeOption(int(sizes[j]), max(1, int(round(dur[j])))),), gpu_types=el))
    demand = np.clip(np.round(total * 0.08 * (1 + 0.5 * np.sin(np.arange(H) / H * 2 * np.pi))), 0, None)
    svc = Service("rt", tuple(int(x) for x in demand), 2, total // 4, 8, int(demand[0]))
    cluster = Cluster(0, 8, 30, H, nodes=tuple(nodes), gpu_speed=SPEEDS)
    return Problem(cluster, settings or PlanSettings(), (svc,), tuple(jobs))
