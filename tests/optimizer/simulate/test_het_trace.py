"""The heterogeneous openb windows (issue 26): node slice rule, gpu_spec -> eligible types, the multigpu20 pods,
the typed simulator's per-type utilisation, the shipped windows' load and their byte-for-byte re-derivation."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from optimizer.metrics import compute, type_utilization
from optimizer.problem import Node
from optimizer.scenarios import HET_TRACES, SCENARIOS, RealTraceData, TracePod, build
from optimizer.simulate import planner_fn, simulate
from pipelines.catalog import load_real_trace
from pipelines.io import trace_io

ROOT = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("GPUPLAN_SHARED_DATA", ROOT.parent / "shared" / "data"))


def test_every_kth_node_of_each_kind_and_small_kinds_keep_one():
    nodes = pd.DataFrame({"sn": [f"n{i}" for i in range(7)], "gpu": [8, 8, 8, 2, 8, 2, 1],
                          "model": ["G2", "G2", "G2", "T4", "G2", "T4", "A10"]})
    out = trace_io.slice_nodes(nodes, 2)  # G2: n0, n2 (positions 0, 2 of 4); T4: n3; A10: n6
    assert list(out["name"]) == ["n0", "n2", "n3", "n6"]
    assert list(zip(out["gpus"], out["gpu_type"], strict=True)) == [(8, "G2"), (8, "G2"), (2, "T4"), (1, "A10")]


def test_multigpu20_pods_take_times_from_a_donor_of_the_same_size():
    cols = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
            "creation_time", "deletion_time", "scheduled_time"]
    spec = pd.DataFrame([("p0", 1, 1, 4, 1000, "T4", "BE", "Succeeded", 100, 4_100, 100),
                         ("p1", 1, 1, 1, 500, "", "LS", "Running", 0, 9_000, 0)], columns=cols)
    multi = pd.DataFrame([("p0", 1, 1, 4, 1000), ("p1", 1, 1, 1, 500), ("p9", 1, 1, 4, 1000)], columns=cols[:5])
    out = trace_io.het_pod_list(spec, multi)
    extra = out[out["name"] == "p9"].iloc[0]
    assert (extra["source"], extra["qos"], extra["gpu_spec"]) == ("multigpu20", "BE", "")
    assert extra["deletion_time"] - extra["scheduled_time"] == 4_000  # p0's run time, the only 4-GPU donor
    assert 115 * 86_400 <= extra["creation_time"] < 150 * 86_400
    assert list(out["source"]) == ["gpuspec20", "gpuspec20", "multigpu20"]


def _tiny() -> RealTraceData:
    pods = (
        TracePod("t4job", "BE", 2, 1000, 0, 0, 3_600, gpu_spec="T4"),
        TracePod("big-t4", "BE", 8, 1000, 0, 0, 3_600, gpu_spec="T4"),  # no T4 node has 8 GPUs: dropped
        TracePod("anyjob", "Burstable", 1, 300, 1_800, 1_800, 5_400),  # sharing pod: one whole GPU, any type
        TracePod("dup", "BE", 1, 1000, 0, 0, 1_800, gpu_spec="V100M16|V100M32|V100M32"),
    )
    rates = tuple((t, 1.0) for t in range(-48 * 1800, 144 * 1800, 1800))
    nodes = (Node("g", 8, "G2"), Node("t", 4, "T4"), Node("v", 4, "V100M32"))
    return RealTraceData(pods, rates, nodes=nodes)


def test_typed_trace_jobs_carry_their_types():
    sc = build("openb-het-a", 0, trace=_tiny(), duration_error_sigma=0.0)
    assert sc.cluster.typed and sc.cluster.n_gpus == 16 and [n.name for n in sc.cluster.nodes] == ["g", "t", "v"]
    assert {j.job_id: (j.gpus, j.gpu_types) for j in sc.jobs} == {
        "t4job": (2, ("T4",)), "anyjob": (1, ()), "dup": (1, ("V100M16", "V100M32"))}
    assert sc.params["dropped_no_eligible_node"] == 1 and sc.params["n_gpus"] == 16


def test_typed_simulation_per_type_utilisation_adds_up():
    sc = build("openb-het-a", 0, trace=_tiny(), duration_error_sigma=0.0, serve_peak_gpus=1)
    sc = replace(sc, jobs=tuple(j for j in sc.jobs if j.job_id != "dup"), n_steps=4,
                 cluster=replace(sc.cluster, horizon_steps=8))
    res = simulate(sc, planner_fn("priority"), name="priority")
    m = compute(res)
    assert res.violations == 0 and res.n_gpus == 16 and res.type_gpus == {"G2": 8, "T4": 4, "V100M32": 4}
    assert sum(res.type_batch_gpus["T4"]) == 2 * 2  # t4job: 2 GPUs for 2 steps, on the T4 node only
    u = type_utilization(res)
    total = sum(u[t] * n for t, n in res.type_gpus.items()) / 16
    assert total == pytest.approx(m.utilization_pct, abs=1e-3)


def test_het_windows_are_not_in_all():
    assert set(HET_TRACES) == {"openb-het-a", "openb-het-b"} and not set(HET_TRACES) & set(SCENARIOS)


def test_shipped_het_windows_offered_load():
    a = build("openb-het-a", 0, trace=load_real_trace(scenario="openb-het-a"))
    b = build("openb-het-b", 0, trace=load_real_trace(scenario="openb-het-b"))
    assert (len(a.cluster.nodes), a.params["n_gpus"], len(a.jobs), a.params["typed_jobs"],
            a.params["offered_load_total"]) == (12, 51, 334, 67, 0.995)
    assert (len(b.jobs), b.params["typed_jobs"], b.params["ls_scale"], b.params["offered_load_total"]) == (
        187, 44, 1.5, 0.985)


@pytest.mark.skipif(not (SHARED / "alibaba-openb-gpu-2023" / "openb_pod_list_gpuspec20.csv").is_file(),
                    reason="needs the shared public traces (../shared/data or $GPUPLAN_SHARED_DATA)")
def test_shipped_het_windows_rederive_byte_for_byte(capsys):
    spec = importlib.util.spec_from_file_location("derive_het_windows", ROOT / "scripts" / "derive_het_windows.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check", "--source", str(SHARED)]) == 0
    assert "3 files byte-identical" in capsys.readouterr().out
