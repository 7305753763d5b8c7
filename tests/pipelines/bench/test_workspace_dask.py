"""The workspace's ``[dask] address`` (issue 17): it reaches the bench runner, ``--dask`` wins over it,
and a bad address is a one-line error naming the key and the file, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import pipelines.bench as bench
from pipelines.cli.app import app
from pipelines.io.errors import InputError
from pipelines.workspace.load import load_workspace

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "data" / "demo" / "gpuplan.toml"


def _workspace(tmp_path: Path, address: str) -> Path:
    """The demo workspace's config with its relative paths made absolute and a ``[dask]`` table."""
    text = DEMO.read_text().replace('"../traffic/', f'"{ROOT / "data" / "traffic"}/')
    (tmp_path / "gpuplan.toml").write_text(text + f'\n[dask]\naddress = "{address}"\n')
    return tmp_path


@pytest.fixture(autouse=True)
def _restore_workspace_env(monkeypatch):
    """``--workspace`` sets ``$GPUPLAN_WORKSPACE`` for the process (pipelines.cli.support.use_workspace): put it back after each test."""
    # setenv first so the variable is recorded as unset: delenv alone records nothing when it is not set, and the
    # value the command writes would leak into later tests (a flow run planning this workspace instead of the demo)
    monkeypatch.setenv("GPUPLAN_WORKSPACE", "")
    monkeypatch.delenv("GPUPLAN_WORKSPACE")


def _bench_cfg(monkeypatch, *args: str):
    """Run ``gpuplan bench ARGS`` up to the runner and return the BenchConfig it was given (nothing is simulated)."""
    seen = []

    def run_bench(cfg, log=None):
        seen.append(cfg)
        raise InputError("stopped by the test before simulating")

    monkeypatch.setattr(bench, "run_bench", run_bench)
    res = CliRunner().invoke(app, ["bench", "--scenario", "mixed", "--quick", *args])
    assert res.exit_code == 2 and "stopped by the test before simulating" in res.stderr, res.output
    return seen[0]


def test_the_workspace_address_reaches_the_bench_runner_and_the_flag_wins(tmp_path, monkeypatch):
    ws = _workspace(tmp_path, "local:3")
    assert load_workspace(ws).config.dask.address == "local:3"
    assert _bench_cfg(monkeypatch, "--workspace", str(ws), "--out", str(tmp_path / "o")).dask == "local:3"
    cfg = _bench_cfg(monkeypatch, "--workspace", str(ws), "--out", str(tmp_path / "o"), "--dask", "tcp://127.0.0.1:8786")
    assert cfg.dask == "tcp://127.0.0.1:8786"


def test_no_dask_table_means_in_process(tmp_path, monkeypatch):
    text = DEMO.read_text().replace('"../traffic/', f'"{ROOT / "data" / "traffic"}/')
    (tmp_path / "gpuplan.toml").write_text(text)
    assert _bench_cfg(monkeypatch, "--workspace", str(tmp_path), "--out", str(tmp_path / "o")).dask is None


@pytest.mark.parametrize("bad", ["127.0.0.1:8786", "tcp://host", "local:0"])
def test_a_bad_workspace_address_is_one_line_naming_the_key_exit_2(tmp_path, bad):
    ws = _workspace(tmp_path, bad)
    res = CliRunner().invoke(app, ["bench", "--scenario", "mixed", "--quick", "--workspace", str(ws),
                                   "--out", str(tmp_path / "o")])
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and "Traceback" not in res.output
    assert lines[0] == (f"error: {ws / 'gpuplan.toml'}: dask.address: {bad!r}: expected a scheduler address "
                        "tcp://HOST:PORT, local or local:N (N >= 1 workers)")


def test_an_address_no_scheduler_answers_is_one_line_exit_2_before_any_flow(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on: bind, read the number, close
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = CliRunner().invoke(app, ["bench", "--scenario", "mixed", "--quick", "--out", str(tmp_path / "o"),
                                   "--dask", f"tcp://127.0.0.1:{port}"])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        f"error: --dask tcp://127.0.0.1:{port}: no Dask scheduler answers there (ConnectionRefusedError: [Errno 111] "
        "Connection refused); start one with `dask scheduler` or use --dask local[:N]"]
    assert not (tmp_path / "o" / "bench.csv").exists()
