"""The ``prometheus-http`` traffic source against a real Prometheus 2.42 (``scripts/prometheus-lab.sh``, issue 28).

The server holds two weeks of the shipped ServeGen series (backfilled with promtool, all but the last hour) and
scrapes a live exporter for the last hour. The hourly series gpuplan pulls over HTTP equals the file source's
(the same shifted series as a query_range body) to 1e-6; a server that is down or answers an error body gives
one line and exit 2, with the store untouched. Waits are on events (the exporter's count, the server's answer).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from pipelines.io.paths import PROJECT_ROOT
from pipelines.workspace.ingest import parse_traffic_file
from pipelines.workspace.load import load_workspace
from pipelines.workspace.sources import prometheus, pull

sys.path.insert(0, str(Path(__file__).parent))
from lab_support import workload  # noqa: E402

LAB_SH = PROJECT_ROOT / "scripts" / "prometheus-lab.sh"
HELPER = PROJECT_ROOT / "scripts" / "prometheus_lab.py"
FIXTURES = PROJECT_ROOT / "tests" / "fixtures" / "slurm-lab"
GPUPLAN = Path(sys.executable).with_name("gpuplan")
QUERY = "sum by (service) (servegen_request_rate)"
DOWN_URL = "http://127.0.0.1:16899"  # in this suite's port range, never listened on

TOML = """\
[cluster]
nodes = {{ h100-0 = 8, h100-1 = 8, h100-2 = 8, h100-3 = 8 }}
partitions = ["h100"]
timezone = "Europe/Berlin"

[[services]]
service = "m-mid"
capacity_per_gpu_per_h = 750000
min_gpus = 2
max_gpus = 8
swap_cap_gpus = 4
replica_gpus = 2

[[services]]
service = "m-small"
capacity_per_gpu_per_h = 1100000
min_gpus = 1
max_gpus = 4
swap_cap_gpus = 4

[sources.history]
format = "slurm-sacct"
path = "sacct.txt"
timezone = "UTC"

[sources.queue]
format = "slurm-squeue-json"
path = "squeue.json"

[sources.traffic]
{traffic}

[tracking]
uri = "sqlite:///{root}/mlflow.db"
"""


def _workspace(root: Path, traffic: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "sacct-utc.txt", root / "sacct.txt")
    shutil.copy(FIXTURES / "squeue.json", root / "squeue.json")
    (root / "gpuplan.toml").write_text(TOML.format(traffic=traffic, root=root))
    return root


def _http(url: str, step: str = "600", lookback_h: float = 14 * 24 + 1) -> str:
    return (f'format = "prometheus-http"\nurl = "{url}"\nquery = "{QUERY}"\nstep = "{step}"\n'
            f"lookback_h = {lookback_h}\ntimeout_s = 5")


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 (the lab's URL)
        return json.loads(r.read())


@pytest.fixture(scope="session")
def prom_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Start the lab Prometheus; wait until the last hour has been scraped; stop it by PID afterwards."""
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        if os.environ.get("CI"):
            pytest.fail("CI: prometheus/promtool missing (.ci/run installs them)")
        pytest.skip("no prometheus binary")
    state = tmp_path_factory.mktemp("prometheus-lab")
    started = subprocess.run(["bash", str(LAB_SH), "start", str(state)], capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        env = dict(kv.split("=", 1) for kv in started.stdout.split()[1:])
        live = f"{env['PROM_LAB_URL']}/api/v1/query?query=count_over_time(servegen_request_rate%5B1h%5D)"

        def scraped() -> bool:
            res = _get_json(live)["data"]["result"]
            return len(res) == 2 and all(r["value"][1] == "6" for r in res)

        workload.wait_until(scraped, "the live hour's 6 samples per service scraped", 60)
        yield env
    finally:
        subprocess.run(["bash", str(LAB_SH), "stop", str(state)], capture_output=True, text=True, timeout=60)


def _file_hourly(end_unix: int, start_s: int) -> pd.DataFrame:
    body = subprocess.run([sys.executable, str(HELPER), "shifted_body", str(end_unix)], capture_output=True,
                          text=True, check=True).stdout
    doc = json.loads(body)
    for s in doc["data"]["result"]:
        s["values"] = [v for v in s["values"] if v[0] >= start_s]
    res = prometheus.parse_query_range(json.dumps(doc), "service", ["m-mid", "m-small"])
    return prometheus.aggregate_hourly(res.frame, per_hour=True)


def test_http_source_equals_file_source(prom_lab: dict[str, str], tmp_path: Path) -> None:
    """Pulled over HTTP (one chunk, then in 500-point chunks): the file's hourly series to 1e-6, every hour."""
    ws = load_workspace(_workspace(tmp_path / "ws", _http(prom_lab["PROM_LAB_URL"])))
    end = int(prom_lab["PROM_LAB_END"])
    files = ws.source_files("traffic")
    assert [p.parent for p in files] == [ws.store_dir / "raw"]  # kept for replay
    got = prometheus.aggregate_hourly(parse_traffic_file(ws, files[0]).frame, per_hour=True)
    want = _file_hourly(end, end - 14 * 24 * 3600)
    hours = {(end - 600 * i) // 3600 for i in range(2016)}  # 336 or 337 UTC hours, by the end's minute
    assert len(want) == 2 * len(hours) and want["n_samples"].sum() == 2 * 2016
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), rtol=1e-6, atol=1e-6)
    step_s = 600
    start = (end // step_s * step_s) - (14 * 24 * 3600 + 3600)
    assert len(pull.chunks(start, end, step_s, 500)) == 5  # 2023 points
    body = pull.fetch_query_range(prom_lab["PROM_LAB_URL"], QUERY, start, end, step_s, max_points=500)
    chunked = prometheus.aggregate_hourly(
        prometheus.parse_query_range(body, "service", ["m-mid", "m-small"]).frame, per_hour=True)
    pd.testing.assert_frame_equal(chunked.reset_index(drop=True), want.reset_index(drop=True), rtol=1e-6, atol=1e-6)


def _ingest(ws: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(GPUPLAN), "ingest", "--workspace", str(ws)], capture_output=True, text=True,
                          timeout=120)


def _snapshot(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()} \
        if store.exists() else {}


def test_server_down_one_line_exit_2(tmp_path: Path) -> None:
    """Nothing listens: three attempts, then one line naming the source and URL, exit 2, no store written."""
    ws = _workspace(tmp_path / "ws", _http(DOWN_URL))
    done = _ingest(ws)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "sources.traffic" in lines[0] and DOWN_URL in lines[0], done.stderr
    assert "after 3 attempts" in lines[0]
    assert not (ws / "store").exists()


def test_error_body_keeps_store(prom_lab: dict[str, str], tmp_path: Path) -> None:
    """A first ingest stores; then a query Prometheus refuses (400 bad_data): one line, exit 2, store unchanged."""
    ws = _workspace(tmp_path / "ws", _http(prom_lab["PROM_LAB_URL"]))
    first = _ingest(ws)
    assert first.returncode == 0, first.stderr[-2000:]
    before = _snapshot(ws / "store")
    bad = TOML.format(traffic=_http(prom_lab["PROM_LAB_URL"]).replace(QUERY, "sum by (service) ("), root=ws)
    (ws / "gpuplan.toml").write_text(bad)
    done = _ingest(ws)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad_data" in lines[0] and "sources.traffic" in lines[0], done.stderr
    assert _snapshot(ws / "store") == before
