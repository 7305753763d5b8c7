"""Traffic → GPUs: ceil(traffic (1 + headroom) / capacity), band, replica rounding (DESIGN §4.4)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from forecasters.errors import InputError
from forecasters.realtime import to_gpus

ROOT = Path(__file__).resolve().parents[3]


def test_hand_checked_conversion():
    traffic = [0.0, 90.0, 100.0, 101.0, 350.0, 10_000.0]
    got = to_gpus(traffic, capacity_per_gpu_per_h=110.0, headroom=0.1, min_gpus=1, max_gpus=8)
    # 0 -> 0 -> min 1; 99/110 -> 1; 110/110 -> 1; 111.1/110 -> 2; 385/110 = 3.5 -> 4; huge -> max 8
    assert got.tolist() == [1, 1, 1, 2, 4, 8]
    assert got.dtype == np.int64


def test_replica_rounding_and_float_noise():
    got = to_gpus([300.0, 500.0, 0.0], capacity_per_gpu_per_h=100.0, headroom=0.0, min_gpus=2, max_gpus=8,
                  replica_gpus=2)
    assert got.tolist() == [4, 6, 2]
    # 0.1 * 3 * (1 + 0) / 0.1 = 3.0000000000000004 in floats: still 3 GPUs
    assert to_gpus([0.1 * 3], 0.1, 0.0, 0, 8).tolist() == [3]


def test_bad_settings_named():
    with pytest.raises(InputError, match="max_gpus 7 is not a multiple of replica_gpus 2"):
        to_gpus([1.0], 1.0, 0.0, 2, 7, replica_gpus=2)
    with pytest.raises(InputError, match="capacity_per_gpu_per_h"):
        to_gpus([1.0], 0.0, 0.0, 0, 8)
    with pytest.raises(InputError, match="negative"):
        to_gpus([-1.0], 1.0, 0.0, 0, 8)
    with pytest.raises(InputError, match="NaN"):
        to_gpus([np.nan], 1.0, 0.0, 0, 8)


def test_shipped_service_settings_map_peak_to_stated_share():
    cfg = json.loads((ROOT / "data" / "traffic" / "services.json").read_text())
    import pandas as pd

    for svc in cfg["services"]:
        peak = pd.read_csv(ROOT / "data" / "traffic" / svc["file"])["value"].max()
        at_peak = to_gpus([peak], svc["capacity_per_gpu_per_h"], 0.0, 0, cfg["reference_cluster_gpus"])[0]
        assert at_peak == round(svc["peak_share_of_cluster"] * cfg["reference_cluster_gpus"])
        got = to_gpus([peak], svc["capacity_per_gpu_per_h"], svc["headroom"], svc["min_gpus"],
                      svc["max_gpus"], svc["replica_gpus"])[0]
        assert svc["min_gpus"] <= got <= svc["max_gpus"] and got % svc["replica_gpus"] == 0
