"""F07: an MLflow store that cannot be used gives one line naming the store and the fix, exit 2, outputs untouched."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.config.settings import load_settings
from pipelines.tracking import store as tracking_store

VENV_BIN = Path(sys.executable).parent


def _settings(tmp_path: Path, db: Path):
    return load_settings(tracking_uri=f"sqlite:///{db}", artifact_root=tmp_path / "art", mlruns_dir=tmp_path)


def test_messages_of_each_kind(tmp_path):
    s = _settings(tmp_path, tmp_path / "m.db")
    old = tracking_store.store_error(s, RuntimeError("Detected out-of-date database schema (found version 75868b020152, "
                                               "but expected dc11669786a5). Take a backup of your database, then "
                                               "run 'mlflow db upgrade <database_uri>'"))
    assert str(old) == (f"MLflow store sqlite:///{tmp_path}/m.db has an older database schema than the installed "
                        f"MLflow: back up {tmp_path}/m.db, then run '{VENV_BIN}/mlflow db upgrade "
                        f"sqlite:///{tmp_path}/m.db'")
    locked = tracking_store.store_error(s, sqlite3.OperationalError("database is locked"))
    assert str(locked).endswith("is locked by another process: wait for it to finish (or stop it) and retry")
    ro = tracking_store.store_error(s, sqlite3.OperationalError("attempt to write a readonly database"))
    assert "is read-only" in str(ro) and "set GPUPLAN_TRACKING_URI" in str(ro)
    assert all("\n" not in str(e) for e in (old, locked, ro))


def test_real_unusable_stores_fail_fast_in_one_line(tmp_path):
    (tmp_path / "g.db").write_text("not a database " * 50)
    with pytest.raises(tracking_store.StoreError, match=r"g.db cannot be used: DatabaseError: file is not a database"):
        tracking_store.init_store(_settings(tmp_path, tmp_path / "g.db"))
    (tmp_path / "d.db").mkdir()
    with pytest.raises(tracking_store.StoreError, match=r"d.db cannot be opened: folder .* is missing or not writable"):
        tracking_store.init_store(_settings(tmp_path, tmp_path / "d.db"))
    # a store another process holds the write lock on
    db = tmp_path / "busy.db"
    tracking_store.init_store(_settings(tmp_path, db))
    holder = sqlite3.connect(db)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(tracking_store.StoreError, match=r"busy.db is locked by another process"):
            tracking_store.init_store(_settings(tmp_path, db))
    finally:
        holder.rollback()
        holder.close()


def test_gpuplan_run_with_an_unusable_store_exits_2_without_touching_outputs(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("garbage " * 100)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "keep.txt").write_text("previous outputs")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPUPLAN_TRACKING_URI": f"sqlite:///{bad}",
           "DO_NOT_TRACK": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    res = subprocess.run([str(VENV_BIN / "gpuplan"), "run", "--out", str(runs)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert lines[-1].startswith(f"error: MLflow store sqlite:///{bad} cannot be used: DatabaseError")
    assert "Traceback" not in res.stderr
    assert sorted(p.name for p in runs.iterdir()) == ["keep.txt"]


def test_a_copied_workspace_names_where_its_relative_source_path_was_looked_for(tmp_path):
    """The typed example workspace reads its traffic from ``../../servegen/prometheus.json``: copied elsewhere, the
    one-line error names the key, the path as written, the folder it is relative to and where it was looked for."""
    import shutil

    from pipelines.io.errors import InputError
    from pipelines.workspace.load import load_workspace

    root = Path(__file__).resolve().parents[3]
    ws_dir = tmp_path / "a" / "b" / "copy"
    shutil.copytree(root / "data" / "fixtures" / "workspaces" / "openb-typed", ws_dir,
                    ignore=shutil.ignore_patterns("store", ".gpuplan-id"))
    ws = load_workspace(ws_dir)
    assert [p.name for p in ws.source_files("nodes")] == ["nodes.csv"]  # a path inside the folder still reads
    with pytest.raises(InputError) as err:
        ws.source_files("traffic")
    assert str(err.value) == (
        f"{ws_dir / 'gpuplan.toml'}: sources.traffic.path = '../../servegen/prometheus.json': no such file "
        f"(a relative path is read from the workspace folder {ws_dir}, here {tmp_path / 'a' / 'servegen' / 'prometheus.json'}; "
        "write the path from that folder, or an absolute one)")


def test_a_run_that_fails_on_its_inputs_leaves_no_empty_runs_folder(tmp_path):
    """The runs folder is created early (a read-only one is refused before any work) and removed again when the run
    then fails on its inputs with nothing written: here a copied workspace whose traffic path no longer exists."""
    import shutil

    root = Path(__file__).resolve().parents[3]
    ws_dir = tmp_path / "copy"
    shutil.copytree(root / "data" / "fixtures" / "workspaces" / "openb-typed", ws_dir,
                    ignore=shutil.ignore_patterns("store", "runs"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DO_NOT_TRACK": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
           "GPUPLAN_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    for out in ([], ["--out", str(tmp_path / "runs")]):  # the default <workspace>/runs, then a named folder
        res = subprocess.run([str(VENV_BIN / "gpuplan"), "run", "--workspace", str(ws_dir), *out], env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 2
        # refused before Prefect, MLflow and the imports start: the error is the only line, no tracking database
        assert res.stderr.strip().splitlines() == [
            f"error: {ws_dir / 'gpuplan.toml'}: sources.traffic.path = '../../servegen/prometheus.json': no such file "
            f"(a relative path is read from the workspace folder {ws_dir}, here {tmp_path.parent / 'servegen' / 'prometheus.json'}; "
            "write the path from that folder, or an absolute one)"], res.stderr
        assert not (tmp_path / "mlflow.db").exists()
    assert not (ws_dir / "runs").exists()
    assert not (tmp_path / "runs").exists()
