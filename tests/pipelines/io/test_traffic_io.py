"""Traffic files: ServeGen hourly derivation (gaps masked), reading, shipped files reproducible."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.io.errors import InputError
from pipelines.io.traffic_io import derive_servegen_hourly, read_traffic

ROOT = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("GPUPLAN_SHARED_DATA", ROOT.parent / "shared" / "data")) / "servegen-bailian-llm-2025"


def test_derivation_masks_zero_and_trickle_windows():
    rates = np.full(18, 1000.0)  # three hours of six windows
    rates[6:12] = 0.0            # hour 1: all windows zero -> absent
    rates[12] = 10.0             # hour 2: one trickle window (<= 5 % of median) -> left out of the mean
    rates[13] = 0.0
    rates[14:18] = [1000.0, 1200.0, 800.0, 1000.0]
    agg = pd.DataFrame({"model": "m", "t_s": np.arange(18) * 600, "total_rate_rps": rates})
    out = derive_servegen_hourly(agg, "m", "2025-03-03 00:00", "Asia/Shanghai")
    assert out["ts"].tolist() == ["2025-03-02T16:00:00Z", "2025-03-02T18:00:00Z"]
    assert out["value"].tolist() == [3_600_000.0, 3_600_000.0]
    assert out["valid_windows"].tolist() == [6, 4]
    with pytest.raises(InputError, match="no rows for model 'x'"):
        derive_servegen_hourly(agg, "x", "2025-03-03 00:00", "Asia/Shanghai")


def test_read_traffic_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_traffic(tmp_path / "none.csv")
    bad = tmp_path / "t.txt"
    bad.write_text("ts,value\n")
    with pytest.raises(InputError, match="expected .csv"):
        read_traffic(bad)
    nocol = tmp_path / "t.csv"
    nocol.write_text("time,value\n2025-01-01T00:00Z,1\n")
    with pytest.raises(InputError, match=r"missing column\(s\) \['ts'\]"):
        read_traffic(nocol)


@pytest.mark.skipif(not SHARED.exists(), reason="needs the shared public data (../shared/data/servegen-bailian-llm-2025 or $GPUPLAN_SHARED_DATA)")
def test_shipped_files_are_reproducible_from_shared_data():
    cfg = json.loads((ROOT / "data" / "traffic" / "services.json").read_text())
    agg = pd.read_csv(SHARED / "aggregate_10min.csv")
    for svc in cfg["services"]:
        fresh = derive_servegen_hourly(agg, svc["source_model"], cfg["trace_start_local"], svc["timezone"])
        shipped = pd.read_csv(ROOT / "data" / "traffic" / svc["file"])
        pd.testing.assert_frame_equal(fresh.reset_index(drop=True), shipped, check_dtype=False)
    m_mid = pd.read_csv(ROOT / "data" / "traffic" / "servegen_m-mid_hourly.csv")
    assert len(m_mid) == 336 - 17


def test_parquet_with_aware_datetimes_round_trips_through_ingest(tmp_path):
    from forecasters.realtime import ingest

    idx = pd.date_range("2025-03-29 00:00", periods=48, freq="h", tz="Europe/Berlin")
    f = tmp_path / "t.parquet"
    pd.DataFrame({"ts": idx, "value": np.arange(48.0)}).to_parquet(f)
    s, d = ingest(read_traffic(f), None)
    assert len(s) == 48 and d["missing_hours"] == 0
    assert s.index[0] == pd.Timestamp("2025-03-28T23:00Z") and s.iloc[-1] == 47.0


def test_philly_hourly_demand_by_hand():
    from pipelines.io.traffic_io import derive_philly_hourly

    t0 = pd.Timestamp("2017-10-03 00:00")
    rows = [(t0 + pd.Timedelta(minutes=m), 10) for m in range(60)]  # hour 0: 60 minutes at 10
    rows += [(t0 + pd.Timedelta(hours=1, minutes=m), 50) for m in range(20)]  # hour 1: 20 minutes only
    rows += [(t0 + pd.Timedelta(hours=2, minutes=m), 0) for m in range(60)]  # hour 2: all zero (outage)
    rows += [(t0 + pd.Timedelta(hours=3, minutes=m), m) for m in range(30)]  # hour 3: 30 minutes 0..29
    minutes = pd.DataFrame({"time": [r[0].strftime("%Y-%m-%d %H:%M:%S") for r in rows],
                            "active": [r[1] for r in rows], "total": 420})
    out = derive_philly_hourly(minutes)
    assert out["ts"].tolist() == ["2017-10-03T00:00:00Z", "2017-10-03T03:00:00Z"]
    assert out["value"].tolist() == [10.0, 14.5] and out["minutes"].tolist() == [60, 30]
    with pytest.raises(InputError, match="missing column"):
        derive_philly_hourly(minutes.drop(columns="active"))


def test_openb_gpus_held_per_hour_by_hand():
    from pipelines.io.traffic_io import derive_openb_gpus_hourly

    nan = float("nan")
    pods = pd.DataFrame({
        # A: half a GPU 0.5 h .. 2.5 h; B: 2 GPUs 1.0 h .. 1.5 h; C: never scheduled; D: no GPU;
        # E: 1 GPU from 0 to the trace end (4 h)
        "name": list("ABCDE"), "num_gpu": [1, 2, 4, 0, 1], "gpu_milli": [500, 1000, 1000, 0, 1000],
        "scheduled_time": [1800, 3600, nan, 0, 0], "deletion_time": [9000, 5400, 14400, 14400, 14400],
    })
    out = derive_openb_gpus_hourly(pods, first_day=0, t0_utc="2023-01-01T00:00:00Z")
    assert out["ts"].tolist() == [f"2023-01-01T0{h}:00:00Z" for h in range(4)]
    assert out["value"].tolist() == [0.25 + 1, 0.5 + 1.0 + 1, 0.25 + 1, 1.0]
