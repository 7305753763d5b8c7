"""The real-trace windows (issue 15): trace fields -> jobs on a hand-made pod table, the offered load by hand,
the second window's rule, and the shipped windows re-derived byte for byte from the shared traces."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pandas as pd
import pytest

from optimizer.scenarios import SimJob, SimService, build, offered_load_total
from pipelines.catalog import load_real_trace
from pipelines.io import trace_io

ROOT = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("GPUPLAN_SHARED_DATA", ROOT.parent / "shared" / "data"))
DAY = 120
T0 = DAY * 86_400


def _pods() -> pd.DataFrame:
    cols = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
    rows = [
        # a GPU-sharing BE pod (half a GPU) created 100 s into the window, ran 600 s
        ("p1", 1000, 1, 1, 500, "", "BE", "Succeeded", T0 + 100, T0 + 700, T0 + 100),
        # a 3-GPU Burstable pod created in step 10, started 60 s later, ran 7,201 s
        ("p2", 1000, 1, 3, 1000, "", "Burstable", "Failed", T0 + 18_010, T0 + 18_070 + 7_201, T0 + 18_070),
        # a 1-GPU Guaranteed pod created in step 51 of the window (day 2), ran exactly 1 h
        ("p3", 1000, 1, 1, 1000, "", "Guaranteed", "Succeeded", T0 + 86_400 + 5_400, T0 + 86_400 + 9_000,
         T0 + 86_400 + 5_400),
        ("p4", 1000, 1, 1, 1000, "", "BE", "Pending", T0 + 200, T0 + 900, None),  # never ran: dropped
        ("p5", 1000, 1, 1, 1000, "", "BE", "Succeeded", T0 - 100, T0 + 900, T0 - 100),  # created before the window
        ("p6", 1000, 1, 2, 1000, "", "LS", "Running", T0 - 200_000, T0 + 400_000, T0 - 200_000),  # LS: real-time
        ("p7", 1000, 1, 1, 1000, "", "BE", "Succeeded", T0 + 2 * 86_400, T0 + 2 * 86_400 + 60, T0 + 2 * 86_400),
        ("p8", 1000, 1, 0, 0, "", "BE", "Succeeded", T0 + 300, T0 + 900, T0 + 300),  # no GPU
    ]
    df = pd.DataFrame(rows, columns=cols.split(","))
    df["scheduled_time"] = df["scheduled_time"].astype("Int64")
    return df


def _derive(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    _pods().to_csv(src / "pods.csv", index=False)
    # ServeGen m-small at a constant 2 requests/s over days 0-3 (10-minute windows): 4 GPUs at every step
    t = range(0, 4 * 86_400, 600)
    pd.DataFrame({"model": "m-small", "t_s": list(t), "total_rate_rps": 2.0, "active_clients": 1}).to_csv(
        src / "agg.csv", index=False)
    out = tmp_path / "traces"
    summary = trace_io.derive_trace_slice(src / "pods.csv", src / "agg.csv", out / "alibaba_openb_window.csv",
                                          out / "servegen_m-small_30min.csv", day=DAY)
    assert summary == {"window_day": DAY, "ls_pods": 1, "batch_pods": 4, "serve_slots": 192, "serve_missing_slots": 0}
    return out


def test_trace_fields_map_to_the_exact_job_list(tmp_path):
    sc = build("real_trace", 0, trace=load_real_trace(_derive(tmp_path)), duration_error_sigma=0.0)
    # arrival = creation floored to the 30-min step; duration = run time rounded up to steps;
    # GPUs = num_gpu rounded up to a power of two (a sharing pod takes one GPU); priority by QoS
    # (BE 1, Burstable 2, Guaranteed 4); kind: >= 2 GPUs training, 1 GPU >= 1 h batch inference, else quantization.
    assert sc.jobs == (
        SimJob("p1", "quantization", 1.0, 0, 1, 1, 1),
        SimJob("p2", "training", 2.0, 10, 4, 5, 5),
        SimJob("p3", "batch_inference", 4.0, 51, 1, 2, 2),
    )
    assert sc.cluster.n_gpus == 32 and sc.n_steps == 96
    ls, serve = sc.services
    assert set(ls.demand_true) == {2}  # p6 holds 2 GPUs over the history day, the window and the horizon day
    assert set(serve.demand_true) == {4}  # ServeGen at its peak all the time -> serve_peak_gpus = 4
    # offered load: (1 + 20 + 2 batch GPU-steps + 2 x 96 LS + 4 x 96 ServeGen) / (32 x 96) = 599 / 3072
    assert sc.params["offered_load_total"] == 0.195


def test_offered_load_total_by_hand():
    # 8 GPUs, 4 steps: a 4-GPU job of 3 steps arriving at step 2 is cut at the window end (2 steps);
    # a 2-GPU job of 1 step at step 0; real-time demand 1, 2, 3, 4 (the steps after the window do not count).
    jobs = [SimJob("a", "training", 1.0, 2, 4, 3, 3), SimJob("b", "training", 1.0, 0, 2, 1, 1)]
    svc = SimService("s", 0, 8, 8, 0, demand_true=(1, 2, 3, 4, 9, 9), demand_forecast=(1, 2, 3, 4, 9, 9))
    assert offered_load_total(jobs, [svc], 8, 4) == round((8 + 2 + 10) / 32, 3) == 0.625
    with pytest.raises(ValueError, match="n_gpus = 0"):
        offered_load_total(jobs, [svc], 0, 4)


def test_second_window_is_the_earliest_disjoint_span():
    assert trace_io.choose_second_window_day(122) == 116  # 115-118 is disjoint from 121-124
    assert trace_io.choose_second_window_day(116) == 120  # 119-122 is the first span after 115-118
    assert trace_io.choose_second_window_day(119) == 123  # 115-118 would share day 118 with 118-121


def test_shipped_windows_offered_load():
    a = build("real_trace", 0, trace=load_real_trace())
    b = build("real_trace_b", 0, trace=load_real_trace(scenario="real_trace_b"))
    assert (a.name, len(a.jobs), a.params["offered_load_total"]) == ("real_trace", 317, 1.017)
    assert (b.name, len(b.jobs), b.params["offered_load_total"]) == ("real_trace_b", 179, 0.993)


@pytest.mark.skipif(not (SHARED / "alibaba-openb-gpu-2023" / "openb_pod_list_default.csv").is_file(),
                    reason="needs the shared public traces (../shared/data or $GPUPLAN_SHARED_DATA)")
def test_shipped_windows_rederive_byte_for_byte(capsys):
    spec = importlib.util.spec_from_file_location("derive_trace_windows", ROOT / "scripts" / "derive_trace_windows.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check", "--source", str(SHARED)]) == 0
    assert "3 files byte-identical" in capsys.readouterr().out
