"""Where a workspace's MLflow store is, and whose registered model is whose (field cases 009, 010, 023).

- 009: a relative ``[tracking] uri = "sqlite:///mlflow.db"`` is the workspace's ``mlflow.db`` (every path in
  ``gpuplan.toml`` is workspace-relative), never a new database in the current folder.
- 010: a workspace path with a space, ``#``, ``%20`` and ``:`` is a path: the store and its artifacts are inside
  that folder (SQLAlchemy URL-decodes ``%20``; the URI carries it as ``%2520``), and no stray folder is left.
- 023: two workspaces whose folders are both named ``gpuplan`` keep two registered models and two champions
  in one MLflow store (names keyed by the workspace id); the old folder-named model is still found.
- issue 32: they also keep their own experiments (``gpuplan-plans-gpuplan-<id12>``); runs of a store written
  before workspace ids (plain experiment names) are still read, for their own workspace only.
"""

from __future__ import annotations

import os
import pickle
import types
from pathlib import Path

import pytest

from pipelines.config.settings import load_settings
from pipelines.workspace.load import WORKSPACE_ID_FILE, load_workspace, read_or_create_workspace_id

TOML = """
[cluster]
nodes = { a1 = 4, a2 = 4 }
timezone = "UTC"

[[services]]
service = "chat"
capacity_per_gpu_per_h = 1000
min_gpus = 1
max_gpus = 4
swap_cap_gpus = 1

[sources.history]
format = "csv"
path = "hist/*.csv"

[sources.queue]
format = "csv"
path = "queue.csv"

[sources.traffic]
format = "csv"
path = "traffic.csv"

[tracking]
uri = "{uri}"
"""


@pytest.fixture()
def no_env_store(monkeypatch):
    for var in ("GPUPLAN_TRACKING_URI", "MLFLOW_TRACKING_URI", "GPUPLAN_ARTIFACT_ROOT", "GPUPLAN_RUNS_DIR",
                "GPUPLAN_MODELS_DIR"):
        monkeypatch.delenv(var, raising=False)


def _ws(folder: Path, uri: str):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gpuplan.toml").write_text(TOML.replace("{uri}", uri))
    return load_workspace(folder)


def test_relative_sqlite_uri_is_the_workspaces_database_not_the_current_folders(tmp_path, monkeypatch, no_env_store):
    ws = _ws(tmp_path / "ws", "sqlite:///mlflow.db")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    s = load_settings(ws)
    assert s.tracking_uri == f"sqlite:///{tmp_path / 'ws' / 'mlflow.db'}"
    assert s.artifact_root == tmp_path / "ws" / "artifacts"
    from pipelines.tracking.store import init_store

    init_store(s)
    assert (tmp_path / "ws" / "mlflow.db").is_file()
    assert sorted(os.listdir(cwd)) == []  # no mlflow.db, no artifacts/ where the command ran


def test_relative_sqlite_uri_in_a_subfolder_and_an_absolute_one_are_kept(tmp_path, no_env_store):
    assert load_settings(_ws(tmp_path / "a", "sqlite:///store/m.db")).tracking_uri == \
        f"sqlite:///{tmp_path / 'a' / 'store' / 'm.db'}"
    assert load_settings(_ws(tmp_path / "b", f"sqlite:///{tmp_path}/x.db")).tracking_uri == f"sqlite:///{tmp_path}/x.db"
    assert load_settings(_ws(tmp_path / "c", "http://127.0.0.1:16999")).tracking_uri == "http://127.0.0.1:16999"


def test_a_workspace_path_with_space_hash_percent20_and_colon_keeps_its_store_inside(tmp_path, no_env_store):
    parent = tmp_path / "GPU plans #1 %20 a:b"
    folder = parent / "ws"
    ws = _ws(folder, f"sqlite:///{folder}/mlflow.db")
    s = load_settings(ws)
    assert s.tracking_uri == f"sqlite:///{tmp_path}/GPU plans #1 %2520 a:b/ws/mlflow.db"
    assert s.artifact_root == folder / "artifacts"
    from pipelines.tracking.store import init_store, mlflow_client, sqlite_path

    assert sqlite_path(s.tracking_uri) == folder / "mlflow.db"
    ids = init_store(s)
    c = mlflow_client(s)
    c.create_registered_model("m")
    assert (folder / "mlflow.db").is_file() and not (tmp_path / "GPU plans #1   a:b").exists()
    assert sorted(os.listdir(tmp_path)) == ["GPU plans #1 %20 a:b"]  # no stray folder from MLflow's mkdir
    loc = c.get_experiment(ids["plans"]).artifact_location
    from urllib.parse import unquote, urlparse

    plans = f"gpuplan-plans-ws-{ws.workspace_id[:12]}"  # the experiment keyed by the workspace id
    assert Path(unquote(urlparse(loc).path)) == folder / "artifacts" / plans
    assert (folder / "artifacts" / plans).is_dir()
    assert [m.name for m in c.search_registered_models()] == ["m"]


def test_the_uri_mlflow_exports_is_read_back_as_it_is_not_encoded_twice(tmp_path, monkeypatch, no_env_store):
    # mlflow.set_tracking_uri exports MLFLOW_TRACKING_URI (the encoded form); a later load_settings in the same
    # process (a flow run) must give the same store, not one in a folder named '... %2520 ...'
    folder = tmp_path / "a %20 b" / "ws"
    s = load_settings(_ws(folder, f"sqlite:///{folder}/mlflow.db"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", s.tracking_uri)
    again = load_settings(_ws(folder, f"sqlite:///{folder}/mlflow.db"))
    assert again.tracking_uri == s.tracking_uri == f"sqlite:///{tmp_path}/a %2520 b/ws/mlflow.db"
    assert again.artifact_root == folder / "artifacts"


def test_workspace_id_is_written_once_and_kept(tmp_path):
    first = read_or_create_workspace_id(tmp_path)
    assert len(first) == 32 and (tmp_path / WORKSPACE_ID_FILE).read_text().strip() == first
    assert read_or_create_workspace_id(tmp_path) == first
    (tmp_path / WORKSPACE_ID_FILE).write_text("not-an-id\n")
    from pipelines.io.errors import InputError

    with pytest.raises(InputError, match=r"\.gpuplan-workspace-id: expected a workspace id of 32 lower-case hex"):
        read_or_create_workspace_id(tmp_path)


def _register(settings, ws, version_doc: dict) -> str:
    from pipelines.tracking import models as tracking_models

    return tracking_models.log_scheduler_model_run(settings, ws, types.SimpleNamespace(mode="test"), version_doc,
                                                   alias="champion")


def test_two_workspaces_named_alike_keep_their_own_registered_model_and_champion(tmp_path, no_env_store):
    shared = f"sqlite:///{tmp_path}/shared-mlflow.db"
    a = _ws(tmp_path / "clusterA" / "gpuplan", shared)
    b = _ws(tmp_path / "clusterB" / "gpuplan", shared)
    from pipelines.tracking import models as tracking_models
    from pipelines.tracking.store import init_store, mlflow_client

    sa, sb = load_settings(a), load_settings(b)
    init_store(sa)
    doc = {"cutoff": "2025-03-01T00:00:00+00:00", "promoted": True, "reason": "first", "history_rows": 3}
    assert _register(sa, a, doc) == "1"
    # the expected value first: B's first version of its own model (the code before the fix: version 2 of the
    # one model 'gpuplan-scheduler-gpuplan', and the champion alias moved to B's model)
    assert _register(sb, b, doc) == "1"
    c = mlflow_client(sa)
    assert len(c.search_registered_models()) == 2
    assert a.workspace_id != b.workspace_id
    names = sorted(m.name for m in c.search_registered_models())
    assert names == sorted([f"gpuplan-scheduler-gpuplan-{a.workspace_id[:12]}",
                            f"gpuplan-scheduler-gpuplan-{b.workspace_id[:12]}"])
    for ws in (a, b):
        champ = c.get_model_version_by_alias(tracking_models.scheduler_model_name(ws), "champion")
        assert c.get_run(champ.run_id).data.params["workspace"] == str(ws.root)
        assert tracking_models.find_scheduler_model_name(sa, ws) == tracking_models.scheduler_model_name(ws)


def test_the_old_folder_named_model_is_still_found_for_its_own_workspace_only(tmp_path, no_env_store):
    shared = f"sqlite:///{tmp_path}/shared-mlflow.db"
    a = _ws(tmp_path / "clusterA" / "gpuplan", shared)
    b = _ws(tmp_path / "clusterB" / "gpuplan", shared)
    from pipelines.tracking import models as tracking_models
    from pipelines.tracking.store import init_store, mlflow_client

    s = load_settings(a)
    init_store(s)
    old = tracking_models.legacy_scheduler_model_name(a.root)
    assert old == "gpuplan-scheduler-gpuplan"
    # a version registered by the code before workspace ids: the folder name only, run param workspace = A
    import mlflow

    from pipelines.tracking.runs import log_run

    rid = log_run(s, "scheduler", "old", params={"workspace": str(a.root)})
    with mlflow.start_run(run_id=rid):
        mlflow.log_text(pickle.dumps(0).hex(), "forecaster/x.txt")
    mlflow_client(s).create_registered_model(old)
    mlflow_client(s).create_model_version(old, f"runs:/{rid}/forecaster", run_id=rid)
    assert tracking_models.find_scheduler_model_name(s, a) == old
    assert tracking_models.find_scheduler_model_name(s, b) is None


def test_two_workspaces_named_alike_keep_their_own_experiments_and_runs(tmp_path, no_env_store, caplog):
    shared = f"sqlite:///{tmp_path}/shared-mlflow.db"
    a = _ws(tmp_path / "clusterA" / "gpuplan", shared)
    b = _ws(tmp_path / "clusterB" / "gpuplan", shared)
    from pipelines.tracking import runs as tracking_runs
    from pipelines.tracking.store import EXPERIMENTS, experiment_name, init_store, mlflow_client

    sa, sb = load_settings(a), load_settings(b)
    assert experiment_name(sa, "plans") == f"gpuplan-plans-gpuplan-{a.workspace_id[:12]}"
    assert experiment_name(sb, "plans") == f"gpuplan-plans-gpuplan-{b.workspace_id[:12]}"
    assert experiment_name(sa, "benchmarks") == "gpuplan-benchmarks"  # about no one cluster
    init_store(sa)
    init_store(sb)
    ra = tracking_runs.log_run(sa, "plans", "plan A")
    rb = tracking_runs.log_run(sb, "plans", "plan B")
    assert [r.info.run_id for r in tracking_runs.finished_runs(sa, "plans")] == [ra]
    assert [r.info.run_id for r in tracking_runs.finished_runs(sb, "plans")] == [rb]
    c = mlflow_client(sa)
    names = sorted(e.name for e in c.search_experiments())
    keyed = sorted(f"{v}-gpuplan-{ws.workspace_id[:12]}" for v in EXPERIMENTS.values() if v != "gpuplan-benchmarks"
                   for ws in (a, b))
    assert names == sorted(["Default", "gpuplan-benchmarks", *keyed])  # 6 keyed experiments each, no plain one
    run = c.get_run(ra)
    assert (run.data.tags["gpuplan.workspace"], run.data.tags["gpuplan.workspace_id"]) == (str(a.root), a.workspace_id)
    assert not [r for r in caplog.records if "its name before workspace ids" in r.getMessage()]


def test_an_old_store_with_plain_experiment_names_is_still_read_for_its_own_workspace(tmp_path, no_env_store, caplog):
    shared = f"sqlite:///{tmp_path}/shared-mlflow.db"
    a = _ws(tmp_path / "clusterA" / "gpuplan", shared)
    b = _ws(tmp_path / "clusterB" / "gpuplan", shared)
    from pipelines.tracking import runs as tracking_runs
    from pipelines.tracking.store import init_store, mlflow_client

    sa, sb = load_settings(a), load_settings(b)
    # the store as the code before workspace ids left it: one plain 'gpuplan-plans' with a run of each cluster
    c = mlflow_client(sa)
    old = c.create_experiment("gpuplan-plans", artifact_location=(tmp_path / "old").as_uri())
    old_runs = {}
    for ws in (a, b):
        r = c.create_run(old, run_name="old plan")
        c.log_param(r.info.run_id, "workspace", str(ws.root))
        c.set_terminated(r.info.run_id)
        old_runs[ws.root] = r.info.run_id
    with caplog.at_level("WARNING", logger="gpuplan"):
        init_store(sa)
        init_store(sa)  # idempotent: the keyed experiment exists now, nothing more is said
    said = [r.getMessage() for r in caplog.records if "its name before workspace ids" in r.getMessage()]
    assert said == [f"MLflow experiment 'gpuplan-plans' (its name before workspace ids) is kept and still read for "
                    f"{a.root}'s runs; its new runs go to 'gpuplan-plans-gpuplan-{a.workspace_id[:12]}'"]
    new = tracking_runs.log_run(sa, "plans", "new plan")
    assert [r.info.run_id for r in tracking_runs.finished_runs(sa, "plans")] == [new, old_runs[a.root]]
    assert [r.info.run_id for r in tracking_runs.finished_runs(sb, "plans")] == [old_runs[b.root]]  # B's only
    assert c.get_experiment(old).lifecycle_stage == "active"  # kept


def test_several_old_experiment_names_are_said_in_one_line(tmp_path, no_env_store, caplog):
    a = _ws(tmp_path / "clusterA" / "gpuplan", f"sqlite:///{tmp_path}/shared-mlflow.db")
    from pipelines.tracking.store import init_store, mlflow_client

    sa = load_settings(a)
    c = mlflow_client(sa)
    for name in ("gpuplan-plans", "gpuplan-forecaster-scheduler", "gpuplan-forecaster-training"):
        exp = c.create_experiment(name, artifact_location=(tmp_path / name).as_uri())
        r = c.create_run(exp, run_name="old")
        # two with a run of this workspace (param, as before workspace ids; tag), one with another folder's only
        if name == "gpuplan-plans":
            c.log_param(r.info.run_id, "workspace", str(a.root))
        elif name == "gpuplan-forecaster-scheduler":
            c.set_tag(r.info.run_id, "gpuplan.workspace", str(a.root))
        else:
            c.log_param(r.info.run_id, "workspace", str(tmp_path / "elsewhere"))
    with caplog.at_level("WARNING", logger="gpuplan"):
        init_store(sa)
        init_store(sa)
    said = [r.getMessage() for r in caplog.records if "before workspace ids" in r.getMessage()]
    assert said == [f"MLflow experiments 'gpuplan-forecaster-scheduler', 'gpuplan-plans' (their names before "
                    f"workspace ids) are kept and still read for {a.root}'s runs; their new runs go to the same "
                    f"names + '-gpuplan-{a.workspace_id[:12]}'"]


def test_a_registration_under_the_old_model_name_is_said_once_and_new_versions_go_to_the_keyed_name(
        tmp_path, no_env_store, caplog):
    shared = f"sqlite:///{tmp_path}/shared-mlflow.db"
    a = _ws(tmp_path / "clusterA" / "gpuplan", shared)
    from pipelines.tracking import models as tracking_models
    from pipelines.tracking.runs import log_run
    from pipelines.tracking.store import init_store, mlflow_client

    s = load_settings(a)
    init_store(s)
    old = tracking_models.legacy_scheduler_model_name(a.root)
    rid = log_run(s, "scheduler", "old", params={"workspace": str(a.root)})
    mlflow_client(s).create_registered_model(old)
    mlflow_client(s).create_model_version(old, f"runs:/{rid}/forecaster", run_id=rid)
    doc = {"cutoff": "2025-03-01T00:00:00+00:00", "promoted": True, "reason": "first", "history_rows": 3}
    with caplog.at_level("WARNING", logger="gpuplan"):
        assert _register(s, a, doc) == "1"
        assert _register(s, a, doc) == "2"
    said = [r.getMessage() for r in caplog.records if "its name before workspace ids" in r.getMessage()]
    name = tracking_models.scheduler_model_name(a)
    assert said == [f"registered model 'gpuplan-scheduler-gpuplan' (its name before workspace ids) keeps {a.root}'s "
                    f"earlier versions; new versions and the champion alias go to '{name}'"]
    c = mlflow_client(s)
    assert str(c.get_model_version_by_alias(name, "champion").version) == "2"
    assert [str(v.version) for v in c.search_model_versions(f"name='{old}'")] == ["1"]  # kept


def test_the_shipped_demos_plain_experiments_are_not_called_this_workspaces_old_runs(tmp_path, no_env_store, caplog):
    """The plain names are also the shipped demo's experiments: with none of this workspace's runs in them (a new
    workspace after ``scripts/run.sh``), nothing is said (a new user read the note as "my workspace reads old runs")."""
    a = _ws(tmp_path / "new" / "gpuplan", f"sqlite:///{tmp_path}/shared-mlflow.db")
    from pipelines.tracking.store import EXPERIMENTS, init_store, mlflow_client

    sa = load_settings(a)
    c = mlflow_client(sa)
    for name in EXPERIMENTS.values():
        exp = c.create_experiment(name, artifact_location=(tmp_path / name).as_uri())
        c.log_param(c.create_run(exp, run_name="demo").info.run_id, "workspace", str(tmp_path / "data" / "demo"))
    with caplog.at_level("WARNING", logger="gpuplan"):
        init_store(sa)
    assert not [r for r in caplog.records if "before workspace ids" in r.getMessage()]
