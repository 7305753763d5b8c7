"""The machine's state refused before any work, in one line, exit 2 (field cases 015, 018, and the full disk).

- 015: a runs folder that cannot be written (a read-only mount) is named before training or solving.
- 018: a ``PREFECT_API_URL`` nobody answers is named (the setting and its value), not 37 s of retries ending in
  "internal error".
- a full disk (ENOSPC) anywhere in a command: one line naming the path, exit 2.
"""

from __future__ import annotations

import errno
import os
import subprocess

import pytest
import typer
from typer.testing import CliRunner

from pipelines.cli.app import app
from pipelines.cli.support import environment_error_line, run_guarded


def _bad(args: list[str], env: dict[str, str] | None = None) -> str:
    res = CliRunner().invoke(app, args, env=env)
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.fixture()
def read_only_folder(tmp_path):
    """A folder no write can go into: a read-only tmpfs mount as root (permission bits do not stop root)."""
    folder = tmp_path / "runs"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_read_only_runs_folder_is_refused_before_any_work(read_only_folder, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    line = _bad(["run", "--out", str(read_only_folder)])
    assert line == (f"error: runs folder {read_only_folder} is not writable (Read-only file system): make it "
                    "writable, or give another folder (--out)") or line == (
        f"error: runs folder {read_only_folder} is not writable (Permission denied): make it writable, or give "
        "another folder (--out)")
    assert os.listdir(read_only_folder) == []


def test_an_unreachable_prefect_api_url_is_named_in_one_line(tmp_path):
    url = "http://127.0.0.1:16999/api"  # a port of this project's test range with nothing listening
    line = _bad(["run", "--out", str(tmp_path / "runs")], env={"PREFECT_API_URL": url})
    assert line == (f"error: PREFECT_API_URL={url}: no Prefect server answers ([Errno 111] Connection refused); "
                    "start that server (`prefect server start`) or unset PREFECT_API_URL to use a temporary one")
    assert not (tmp_path / "runs").exists()  # no run folder, and the runs folder this run created is gone again
    (tmp_path / "runs").mkdir()  # one that was there before stays, empty
    assert _bad(["run", "--out", str(tmp_path / "runs")], env={"PREFECT_API_URL": url}) == line
    assert os.listdir(tmp_path / "runs") == []


def test_a_full_disk_names_the_path_exit_2(capsys):
    exc = OSError(errno.ENOSPC, "No space left on device", "/srv/ws/runs/20250316T1600Z/plan.parquet")

    def body() -> int:
        raise exc

    with pytest.raises(typer.Exit) as got:
        run_guarded(body)
    # the command's behaviour first (the code before the fix: exit 1 "internal error: OSError: [Errno 28] ...")
    assert capsys.readouterr().err.splitlines() == [
        "error: cannot write /srv/ws/runs/20250316T1600Z/plan.parquet: no space left on the device (No space left "
        "on device); free space or fix the folder, then run again"]
    assert got.value.exit_code == 2
    assert environment_error_line(exc) == (
        "cannot write /srv/ws/runs/20250316T1600Z/plan.parquet: no space left on the device (No space left on "
        "device); free space or fix the folder, then run again")


def test_other_os_errors_stay_internal(capsys):
    def body() -> int:
        raise OSError(errno.EIO, "Input/output error", "/dev/sdz")

    with pytest.raises(typer.Exit) as got:
        run_guarded(body)
    assert got.value.exit_code == 1
    assert capsys.readouterr().err.startswith("internal error: OSError: [Errno 5] Input/output error")
