"""pipelines.io.atomic: the one atomic writer (temp file in the target's folder, fsync, os.replace)."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from pipelines.io import atomic
from pipelines.io.atomic import atomic_dir, atomic_path, atomic_write_bytes, atomic_write_text


def listing(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_success_replaces_content_and_leaves_only_the_target(tmp_path):
    target = tmp_path / "plan.json"
    target.write_text("old")
    assert atomic_write_text(target, "new ü") == target
    assert target.read_bytes() == "new ü".encode()
    assert listing(tmp_path) == ["plan.json"]
    atomic_write_bytes(tmp_path / "sub" / "x.bin", b"\x00\x01", make_parents=True)
    assert (tmp_path / "sub" / "x.bin").read_bytes() == b"\x00\x01"
    assert listing(tmp_path) == ["plan.json", "sub"]
    assert listing(tmp_path / "sub") == ["x.bin"]


def test_raise_midway_keeps_previous_file_and_leaves_no_temp(tmp_path):
    (tmp_path / "other.txt").write_text("x")
    target = tmp_path / "plan.parquet"
    target.write_bytes(b"previous")
    before = listing(tmp_path)
    seen = []
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half a fi")
            seen.append(tmp)
            assert tmp.parent == tmp_path and tmp.suffix == ".parquet" and tmp.name.startswith(".plan.")
            assert listing(tmp_path) == sorted(before + [tmp.name])
            raise RuntimeError("disk full")
    assert listing(tmp_path) == before
    assert target.read_bytes() == b"previous"
    assert not seen[0].exists()


def test_keyboard_interrupt_and_failing_fsync_also_clean_up(tmp_path, monkeypatch):
    target = tmp_path / "risk_report.md"
    target.write_text("v1")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_text("v2 partial")
            raise KeyboardInterrupt
    assert listing(tmp_path) == ["risk_report.md"]

    def broken_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(atomic.os, "fsync", broken_fsync)  # fails after the bytes were written
    with pytest.raises(OSError, match="Input/output error"):
        atomic_write_text(target, "v2")
    assert listing(tmp_path) == ["risk_report.md"]
    assert target.read_text() == "v1"


def test_missing_folder_is_an_error_without_make_parents(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write_bytes(tmp_path / "nope" / "a.bin", b"1")
    assert listing(tmp_path) == []


def test_file_mode_follows_the_umask_like_open(tmp_path):
    mask = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "a.txt", "a")
    finally:
        os.umask(mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640


def test_path_writers_such_as_parquet_round_trip(tmp_path):
    df = pd.DataFrame({"job_id": ["a", "b"], "gpus": [1, 4]})
    target = tmp_path / "jobs.parquet"
    for gpus in ([1, 4], [2, 8]):
        with atomic_path(target) as tmp:
            df.assign(gpus=gpus).to_parquet(tmp, index=False)
        assert pd.read_parquet(target)["gpus"].tolist() == gpus
    assert listing(tmp_path) == ["jobs.parquet"]


def test_atomic_dir_replaces_a_folder_or_keeps_it_on_error(tmp_path):
    target = tmp_path / "model"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("1")
    assert listing(tmp_path) == ["model"] and listing(target) == ["a.txt"]
    with pytest.raises(ValueError, match="bad booster"):
        with atomic_dir(target) as tmp:
            (tmp / "b.txt").write_text("2")
            raise ValueError("bad booster")
    assert listing(tmp_path) == ["model"] and listing(target) == ["a.txt"]
    with atomic_dir(target) as tmp:
        (tmp / "b.txt").write_text("2")
    assert listing(tmp_path) == ["model"] and listing(target) == ["b.txt"]
