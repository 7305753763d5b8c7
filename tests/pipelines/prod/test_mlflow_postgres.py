"""MLflow tracking and registry on a real PostgreSQL server (issue 32): the round trip and the alias race.

- Round trip: the store initialised on ``postgresql://`` (psycopg2), a run logged with an artifact in the shared
  artifact folder, a version registered, ``champion`` set and read back, the artifact read back through MLflow.
- Alias race: two processes, released together by one barrier, each register a version of one model and point
  ``champion`` at it (:func:`pipelines.tracking.store.set_alias`). Neither fails (MLflow's own setter raised
  ``UniqueViolation`` on ``registered_model_alias_pk`` for the second process on PostgreSQL), both versions exist
  with distinct numbers (1 and 2), and the alias names exactly one of them: one champion decision.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

from pipelines.config.settings import load_settings
from pipelines.tracking import store as tracking_store
from pipelines.tracking.runs import log_run


def test_registry_round_trip_on_postgres(pg_mlflow, tmp_path):
    s = load_settings()
    shared = Path(pg_mlflow["GPUPLAN_ARTIFACT_ROOT"])
    assert s.tracking_uri.startswith("postgresql://gpuplan@127.0.0.1:")
    assert s.artifact_root == shared
    ids = tracking_store.init_store(s)
    assert sorted(ids) == sorted(tracking_store.EXPERIMENTS)
    assert tracking_store.init_store(s) == ids  # idempotent on a second call
    note = tmp_path / "note.txt"
    note.write_text("champion of cluster A\n")
    rid = log_run(s, "scheduler", "round trip", params={"workspace": "/srv/a"}, metrics={"mae_h": 1.25},
                  artifacts={"notes/note.txt": note})
    c = tracking_store.mlflow_client(s)
    run = c.get_run(rid)
    assert run.data.params["workspace"] == "/srv/a" and run.data.metrics["mae_h"] == 1.25
    assert run.info.artifact_uri.startswith(shared.as_uri())
    c.create_registered_model("gpuplan-scheduler-a-000000000001")
    mv = c.create_model_version("gpuplan-scheduler-a-000000000001", f"runs:/{rid}/notes", run_id=rid)
    c.set_registered_model_alias("gpuplan-scheduler-a-000000000001", "champion", mv.version)
    got = c.get_model_version_by_alias("gpuplan-scheduler-a-000000000001", "champion")
    assert (str(got.version), got.run_id) == ("1", rid)
    back = Path(c.download_artifacts(rid, "notes/note.txt", str(tmp_path / "dl")))
    assert back.read_text() == "champion of cluster A\n"


def _register_and_alias(env: dict, barrier, name: str, tag: str, out) -> None:
    os.environ.update(env)
    s = load_settings()
    c = tracking_store.mlflow_client(s)
    rid = log_run(s, "scheduler", f"racer {tag}", params={"racer": tag})
    barrier.wait(timeout=120)  # both racers registered their runs: go together
    mv = c.create_model_version(name, f"runs:/{rid}/forecaster", run_id=rid)
    tracking_store.set_alias(s, name, "champion", mv.version)  # the registry's alias setter gpuplan uses
    out.put((tag, str(mv.version)))


def test_two_processes_setting_champion_leave_one_alias_and_two_versions(pg_mlflow):
    s = load_settings()
    tracking_store.init_store(s)
    c = tracking_store.mlflow_client(s)
    name = "gpuplan-scheduler-race-000000000002"
    c.create_registered_model(name)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_register_and_alias, args=(dict(pg_mlflow), barrier, name, t, out)) for t in "AB"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0]
    got = dict(out.get(timeout=5) for _ in procs)
    assert sorted(got.values()) == ["1", "2"]  # no version number given twice
    versions = sorted(c.search_model_versions(f"name='{name}'"), key=lambda v: int(v.version))
    assert [str(v.version) for v in versions] == ["1", "2"]
    champ = c.get_model_version_by_alias(name, "champion")
    assert str(champ.version) in ("1", "2")
    assert {k: str(v) for k, v in c.get_registered_model(name).aliases.items()} == {"champion": str(champ.version)}
