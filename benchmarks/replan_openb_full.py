"""One replan of the whole openb cluster (6,212 GPUs on 1,213 nodes of 12 type/size kinds) with its real queue (issue 26).

Usage:
    nice -n 10 .venv/bin/python benchmarks/replan_openb_full.py [--source ../shared/data] [--day 122] [--planners priority,milp]

The instant is ``--day`` x 86,400 s of trace time (default day 122 00:00, the start of the ``real_trace`` /
``openb-het-a`` window). From ``openb_pod_list_gpuspec20.csv`` plus the pods only ``openb_pod_list_multigpu20.csv``
has (times given as in :func:`pipelines.io.trace_io.het_pod_list`) on ``openb_node_list_gpu_node.csv``:

- running: every GPU pod with ``scheduled <= t < deletion``, placed by first fit over the nodes its ``gpu_spec``
  allows (the trace does not say which node a pod ran on), holding ``num_gpu`` rounded up to a power of two (a
  GPU-sharing pod, ``gpu_milli`` < 1000, one whole GPU) for ``ceil((deletion - t) / 30 min)`` steps; a pod no
  eligible node has room for is left out and counted;
- queued: every GPU pod created at or before ``t`` and scheduled after it (the real queue), plus every pod created
  in the 24-h horizon after ``t`` (released at its creation step); run time ``deletion - scheduled`` rounded up to
  whole 30-min steps; pods that never ran (``Pending``) have no run time and are left out (counted);
- priority by QoS (:data:`domain.kinds.QOS_PRIORITY`; LS 1); no real-time service (the LS pods are jobs here).

Prints per planner: value (DESIGN §5 objective), gap, seconds, verifier findings, and the machine load.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from domain.kinds import QOS_PRIORITY  # noqa: E402
from domain.units import pow2_ceil  # noqa: E402
from optimizer.objective import objective_value  # noqa: E402
from optimizer.planners import plan  # noqa: E402
from optimizer.problem import Cluster, Job, Node, PlanSettings, Problem, RunningJob, SizeOption  # noqa: E402
from optimizer.verify import verify  # noqa: E402
from pipelines.catalog import PUBLIC_TRACE_SOURCES  # noqa: E402
from pipelines.io import trace_io  # noqa: E402

STEP_S, H = 1800, 48


def kind_of(gpus: int, run_s: int) -> str:
    """The trace scenario's kind rule: >= 2 GPUs training, 1 GPU >= 1 h batch inference, else quantization."""
    return "training" if gpus >= 2 else ("batch_inference" if run_s >= 3600 else "quantization")


def build_problem(src: Path, day: int, time_limit_s: float) -> tuple[Problem, dict]:
    """The whole-cluster problem at trace time ``day`` x 86,400 s (module docstring) and its counts."""
    nodes_df = pd.read_csv(src / PUBLIC_TRACE_SOURCES["openb_nodes"])
    pods = trace_io.het_pod_list(pd.read_csv(src / PUBLIC_TRACE_SOURCES["openb_pods_gpuspec"]),
                                 pd.read_csv(src / PUBLIC_TRACE_SOURCES["openb_pods_multigpu"]))
    nodes = tuple(Node(name=str(r.sn), gpus=int(r.gpu), gpu_type=str(r.model)) for r in nodes_df.itertuples())
    cluster = Cluster(n_gpus=0, nodes=nodes, horizon_steps=H)
    t = day * 86_400
    g = pods[pods["num_gpu"] > 0]
    free = {k: list(range(n.gpus)) for k, n in enumerate(cluster.nodes)}  # free local GPUs per node
    offsets = cluster.node_offsets
    running, counts = [], {"running_unplaced": 0, "pending_no_runtime": 0}
    run = g[g["scheduled_time"].notna() & (g["scheduled_time"] <= t) & (g["deletion_time"] > t)]
    for r in run.sort_values(["scheduled_time", "name"]).itertuples():
        gp = pow2_ceil(int(r.num_gpu))
        types = [x for x in str(r.gpu_spec).split("|") if x]
        spot = None
        for k, n in enumerate(cluster.nodes):
            if types and n.gpu_type not in types or n.gpus < gp:
                continue
            for b in range(0, n.gpus, gp):
                if all(x in free[k] for x in range(b, b + gp)):
                    spot = (k, b)
                    break
            if spot:
                break
        if spot is None:
            counts["running_unplaced"] += 1
            continue
        k, b = spot
        free[k] = [x for x in free[k] if not b <= x < b + gp]
        rem = max(1, math.ceil((int(r.deletion_time) - t) / STEP_S))
        running.append(RunningJob(str(r.name), kind_of(gp, int(r.deletion_time - r.scheduled_time)),
                                  QOS_PRIORITY.get(r.qos, 1.0), gp, offsets[k] + b, rem))
    wait = g[(g["creation_time"] <= t) & ~(g["scheduled_time"].notna() & (g["scheduled_time"] <= t))]
    ahead = g[(g["creation_time"] > t) & (g["creation_time"] < t + H * STEP_S)]
    jobs = []
    for r in pd.concat([wait, ahead]).sort_values(["creation_time", "name"]).itertuples():
        if pd.isna(r.scheduled_time):
            counts["pending_no_runtime"] += 1
            continue
        run_s = int(r.deletion_time - r.scheduled_time)
        gp = pow2_ceil(int(r.num_gpu))
        rel = max(0, (int(r.creation_time) - t) // STEP_S)
        jobs.append(Job(str(r.name), kind_of(gp, run_s), QOS_PRIORITY.get(r.qos, 1.0), int(rel),
                        (SizeOption(gp, max(1, math.ceil(run_s / STEP_S))),),
                        gpu_types=tuple(dict.fromkeys(x for x in str(r.gpu_spec).split("|") if x))))
    settings = PlanSettings(time_limit_s=time_limit_s, threads=1)
    problem = Problem(cluster, settings, (), tuple(jobs), tuple(running), ())
    held = sum(r.gpus for r in running)
    counts.update(nodes=len(nodes), gpus=sum(n.gpus for n in nodes), running=len(running), running_gpus=held,
                  queued_at_t=int(len(wait)), arriving_24h=int(len(ahead)), jobs=len(jobs),
                  typed_jobs=sum(1 for j in jobs if j.gpu_types),
                  queued_gpu_h=sum(j.requested.gpus * j.requested.duration_steps for j in jobs) / 2)
    return problem, counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=Path(os.environ.get("GPUPLAN_SHARED_DATA", ROOT.parent / "shared" / "data")))
    ap.add_argument("--day", type=int, default=122)
    ap.add_argument("--planners", default="priority,milp")
    ap.add_argument("--time-limit-s", type=float, default=60.0)
    a = ap.parse_args(argv)
    if not (a.source / PUBLIC_TRACE_SOURCES["openb_nodes"]).is_file():
        print(f"--source {a.source}: missing {PUBLIC_TRACE_SOURCES['openb_nodes']}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    problem, counts = build_problem(a.source, a.day, a.time_limit_s)
    print(f"instant: trace day {a.day} 00:00 ({a.day * 86_400} s); built in {time.perf_counter() - t0:.1f} s: {counts}")
    for name in a.planners.split(","):
        load0 = os.getloadavg()[0]
        ts = time.perf_counter()
        p = plan(problem, planner=name)
        dt = time.perf_counter() - ts
        found = verify(p, problem)
        started = sum(1 for x in p.assignments if not x.running and x.start_step is not None)
        print(f"{name}: value {objective_value(p, problem):.1f}, gap {p.gap}, {dt:.1f} s, source {p.source}, "
              f"verifier {'OK' if not found else found[:3]}, started {started}/{len(problem.jobs)}, "
              f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}" + (f"; note: {p.message}" if p.message else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
