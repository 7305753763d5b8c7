"""A gpuplan workspace on the lab cluster's h100 partition (4 nodes x 8 GPUs), for the lab tests (issue 28).

History: the documented ``sacct`` export (UTC); queue: ``squeue --json``; traffic: the shipped ServeGen m-small
hourly series (``data/traffic/servegen_m-small_hourly.csv``, 336 h) shifted so that its last hour is the hour of
the queue export, as an hourly CSV (the plan starts at the queue export's time, never after the traffic's end).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipelines.io.paths import PROJECT_ROOT

SERVEGEN_M_SMALL = PROJECT_ROOT / "data" / "traffic" / "servegen_m-small_hourly.csv"

TOML = """\
# gpuplan workspace on the lab Slurm (scripts/slurm-lab.sh): the h100 partition
[cluster]
nodes = {{ h100-0 = 8, h100-1 = 8, h100-2 = 8, h100-3 = 8 }}
gpu_type = "h100"
partitions = ["h100"]
timezone = "{tz}"

[[services]]
service = "m-small"
timezone = "Asia/Shanghai"
capacity_per_gpu_per_h = 1100000
headroom = 0.1
min_gpus = 1
max_gpus = 4
swap_cap_gpus = 4
replica_gpus = 1

[sources.history]
format = "slurm-sacct"
path = "exports/sacct-*.txt"
timezone = "UTC"

[sources.queue]
format = "slurm-squeue-json"
path = "exports/squeue-*.json"

[sources.traffic]
format = "csv"
path = "exports/traffic.csv"
value_units = "per_hour"

[kinds]
default = "training"

[priorities]
qos = {{ high = 4, normal = 2, low = 1 }}

[tracking]
uri = "sqlite:///{root}/mlflow.db"
"""


def shifted_traffic(end_hour_utc: pd.Timestamp) -> pd.DataFrame:
    """The shipped m-small hourly series moved so its last ``ts`` is ``end_hour_utc`` (``ts, value, service``)."""
    frame = pd.read_csv(SERVEGEN_M_SMALL)
    ts = pd.to_datetime(frame["ts"], utc=True)
    shift = pd.Timestamp(end_hour_utc).tz_convert("UTC").floor("h") - ts.max()
    return pd.DataFrame({"ts": (ts + shift).dt.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": frame["value"],
                         "service": frame["service"]})


def write_workspace(root: Path, sacct_utc: str, squeue_json: str, exported_at_utc: pd.Timestamp, tz: str) -> Path:
    """Write the workspace (``gpuplan.toml`` + ``exports/``) into ``root``; returns ``root``."""
    (root / "exports").mkdir(parents=True, exist_ok=True)
    (root / "gpuplan.toml").write_text(TOML.format(tz=tz, root=root))
    (root / "exports" / "sacct-lab.txt").write_text(sacct_utc)
    (root / "exports" / "squeue-lab.json").write_text(squeue_json)
    # the traffic's last hour is the export's hour: the plan starts there (a later traffic hour makes
    # `gpuplan run` fail in the risk report's profile plot: "forecast start ... is before the forecast origin")
    shifted_traffic(pd.Timestamp(exported_at_utc)).to_csv(root / "exports" / "traffic.csv", index=False)
    return root
