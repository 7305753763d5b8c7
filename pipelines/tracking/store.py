"""The MLflow store: its experiments, opening it once before any fan-out, and diagnosing a broken one.

The tracking URI is always explicit (from :class:`pipelines.config.settings.Settings`, case C28); the
store is initialised once, before any fan-out (:func:`init_store`), because several processes
creating the schema of a new SQLite database at once race on migration (case C26). Each
experiment gets an explicit artifact location under ``settings.artifact_root`` so nothing is
written to ``./mlruns`` of the current directory.

SQLite concurrency: :func:`init_store` switches the database to WAL journaling (readers do not
block the writer; persistent in the file) and MLflow 3 sets ``PRAGMA busy_timeout = 20000``
(20 s) on every session it opens (``mlflow/store/db/utils.py``), so concurrent writers wait
instead of failing with "database is locked". A store that cannot be opened is one
:class:`StoreError` line (:func:`store_error`).

mlflow is imported inside the functions that use it: ``import mlflow`` costs ~1.0 s on the 2-core
machine (pandas alone 0.49 s, pandas + mlflow 1.47 s), and ``gpuplan predict`` imports the tracking
modules (through :mod:`pipelines.models.jobs`) but logs nothing when the saved model exists.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.config.settings import Settings, sqlite_file
from pipelines.io.errors import InputError
from pipelines.io.run_folder import file_lock

if TYPE_CHECKING:
    from mlflow import MlflowClient

#: experiment key -> experiment name
EXPERIMENTS: dict[str, str] = {
    "training": "gpuplan-forecaster-training",
    "quantization": "gpuplan-forecaster-quantization",
    "batch_inference": "gpuplan-forecaster-batch_inference",
    "realtime": "gpuplan-forecaster-realtime",
    "scheduler": "gpuplan-forecaster-scheduler",
    "plans": "gpuplan-plans",
    "benchmarks": "gpuplan-benchmarks",
}

#: Experiments about no one cluster (the planners' benchmark on generated scenarios): never keyed by a workspace.
UNKEYED_EXPERIMENTS = frozenset({"benchmarks"})

_LOG = logging.getLogger("gpuplan")


def _slug(text: str) -> str:
    """``text`` with every character but letters, digits, ``-`` and ``_`` replaced by ``-`` (``workspace`` if empty)."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text) or "workspace"


def workspace_key(workspace_dir: Path) -> str | None:
    """``<folder name slug>-<first 12 hex digits of the workspace id>``; None for the shipped demo folder.

    The id is :func:`pipelines.workspace.load.read_or_create_workspace_id` (``<ws>/.gpuplan-workspace-id``):
    stable when the folder moves and unique per cluster, so two workspaces whose folders share a name keep
    their own MLflow experiments, registered models and Prefect deployments (issue 32, case 023). The folder
    name is kept for people reading the lists. The shipped demo (``data/demo``) keeps the names it always
    had: it is one per clone, planned from shipped data, and its store is the clone's own ``mlruns/``.
    """
    from pipelines.workspace.config import DEMO_WORKSPACE
    from pipelines.workspace.load import read_or_create_workspace_id

    root = Path(workspace_dir).resolve()
    if root == DEMO_WORKSPACE.resolve():
        return None
    return f"{_slug(root.name)}-{read_or_create_workspace_id(root)[:12]}"


def experiment_name(settings: Settings, experiment: str) -> str:
    """The MLflow experiment of key ``experiment`` for ``settings.workspace_dir``: ``<EXPERIMENTS name>-<workspace_key>``.

    ``experiment_name(s, "plans")`` -> ``"gpuplan-plans-gpuplan-1a2b3c4d5e6f"``; the plain
    :data:`EXPERIMENTS` name for the shipped demo and for :data:`UNKEYED_EXPERIMENTS`.

    Raises:
        KeyError: unknown experiment key.
    """
    plain = EXPERIMENTS[experiment]
    key = None if experiment in UNKEYED_EXPERIMENTS else workspace_key(settings.workspace_dir)
    return plain if key is None else f"{plain}-{key}"


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, or None for any other scheme (:func:`pipelines.config.settings.sqlite_file`)."""
    return sqlite_file(tracking_uri)


def mlflow_client(settings: Settings):
    """An :class:`mlflow.MlflowClient` on ``settings.tracking_uri`` (tracking and registry)."""
    from mlflow import MlflowClient  # lazily: import cost, see the module docstring

    _decode_mlflow_sqlite_mkdir()
    return MlflowClient(tracking_uri=settings.tracking_uri, registry_uri=settings.tracking_uri)


def set_alias(settings: Settings, name: str, alias: str, version: str | int, attempts: int = 3) -> None:
    """Point registered model ``name``'s ``alias`` at ``version``, safe against a concurrent setter (issue 32).

    MLflow 3.17's SQL registry reads the alias row, then inserts it when missing: two processes setting a new
    alias at once both insert, and on PostgreSQL the second fails with ``UniqueViolation`` on
    ``registered_model_alias_pk`` (measured with two processes released by one barrier). The setter that
    lost retries (the row now exists, so it updates it): the alias ends on the last writer's version, no
    process fails. Other errors are raised at once.
    """
    client = mlflow_client(settings)
    for attempt in range(attempts):
        try:
            client.set_registered_model_alias(name, alias, str(version))
            return
        except Exception as exc:  # noqa: BLE001 - MLflow wraps the driver's IntegrityError in MlflowException
            text = str(exc)
            if attempt + 1 == attempts or not ("registered_model_alias_pk" in text or "UniqueViolation" in text
                                               or "UNIQUE constraint failed: registered_model_aliases" in text):
                raise


def _init_lock(settings: Settings):
    """The lock of :func:`init_store`: beside a SQLite database, else in the artifact folder.

    A server store such as PostgreSQL locks in the folder every worker shares, never in the clone's ``mlruns/``.
    """
    db = sqlite_path(settings.tracking_uri)
    folder = db.parent if db is not None else settings.artifact_root
    folder.mkdir(parents=True, exist_ok=True)
    return file_lock(folder / ".init.lock")


class StoreError(InputError):
    """The MLflow store cannot be used (old schema, locked, read-only, missing folder): one line with the fix."""


def store_error(settings: Settings, exc: BaseException) -> StoreError:
    """The one-line :class:`StoreError` for an exception raised while opening or writing the MLflow store.

    Recognised: an out-of-date schema (MLflow's "Detected out-of-date database schema": the exact
    ``mlflow db upgrade`` command of this environment), a locked database, a read-only database or
    folder, a missing folder; anything else is named with its first line.
    """
    uri = settings.tracking_uri
    text = " ".join(str(exc).split())
    low = text.lower()
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    db = sqlite_path(uri)
    if "out-of-date database schema" in low or "alembic" in low and "revision" in low:
        return StoreError(f"MLflow store {uri} has an older database schema than the installed MLflow: back up "
                          f"{db or 'the database'}, then run '{mlflow_bin} db upgrade {uri}'")
    if "database is locked" in low:
        return StoreError(f"MLflow store {uri} is locked by another process: wait for it to finish (or stop it) "
                          f"and retry")
    if "readonly" in low or "read-only" in low or isinstance(exc, PermissionError):
        return StoreError(f"MLflow store {uri} is read-only ({text[:120]}): make {db or 'it'} and its folder "
                          f"writable, or set GPUPLAN_TRACKING_URI to a writable store")
    if "unable to open database file" in low or isinstance(exc, FileNotFoundError):
        where = db.parent if db is not None else uri
        return StoreError(f"MLflow store {uri} cannot be opened: folder {where} is missing or not writable; create "
                          f"it or set GPUPLAN_TRACKING_URI")
    return StoreError(f"MLflow store {uri} cannot be used: {type(exc).__name__}: {text[:200]}")


def init_store(settings: Settings) -> dict[str, str]:
    """Create the tracking database (schema), WAL mode and every experiment (:func:`experiment_name`); idempotent.

    A keyed experiment created beside an existing one of the old plain name logs one WARNING naming both
    (the old one is kept: :func:`pipelines.tracking.runs.finished_runs` still reads this workspace's runs there).

    Call once per process tree before starting concurrent work. Also sets the process-wide
    tracking and registry URIs to ``settings.tracking_uri``.

    Returns:
        experiment key -> experiment id.

    Raises:
        StoreError: the store cannot be used (:func:`store_error`: one line naming the store and the fix).
    """
    try:
        _preflight_sqlite(settings)
        return _init_store(settings)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - the store boundary: one line, never a traceback
        raise store_error(settings, exc) from None


def _preflight_sqlite(settings: Settings) -> None:
    """Open a SQLite store directly first (2 s timeout): MLflow retries a failing engine for ~100 s before it gives up.

    Raises the :mod:`sqlite3` error of a path that is a folder, a file that is not a database, a
    database locked by another writer or read-only; a missing database is fine (MLflow creates it).
    """
    db = sqlite_path(settings.tracking_uri)
    if db is None:
        return
    if db.exists() and not db.is_file():
        raise sqlite3.OperationalError("unable to open database file (the path is a folder)")
    if not db.exists():
        return
    con = sqlite3.connect(db, timeout=2)
    try:
        con.execute("PRAGMA schema_version").fetchone()
        con.execute("BEGIN IMMEDIATE")  # needs the write lock: a locked or read-only database fails here
        con.execute("ROLLBACK")
    finally:
        con.close()


#: The experiment tag MLflow 3.17's UI reads to choose an experiment's view (its web bundle:
#: ``e.find(e => "mlflow.experimentKind" === e.key)``, values ``genai_development`` /
#: ``custom_model_development``); gpuplan's experiments are model training. Where the UI's global
#: "GenAI / Model training" switch is on, it wins over the tag: docs/operations.md says how to switch
#: (``?workflowType=machine_learning`` on the page's address).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
EXPERIMENT_TAGS = {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}


def _init_store(settings: Settings) -> dict[str, str]:
    import mlflow  # lazily: import cost, see the module docstring

    _decode_mlflow_sqlite_mkdir()
    mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_registry_uri(settings.tracking_uri)
    with _init_lock(settings):
        client = mlflow_client(settings)  # creates/migrates the schema for a new SQLite file
        ids: dict[str, str] = {}
        renamed: list[tuple[str, str]] = []  # (name before workspace ids, new name): said once, in one line
        for key in EXPERIMENTS:
            name = experiment_name(settings, key)
            exp = client.get_experiment_by_name(name)
            if exp is None:
                location = (settings.artifact_root / name).resolve()
                location.mkdir(parents=True, exist_ok=True)
                ids[key] = client.create_experiment(name, artifact_location=location.as_uri(),
                                                    tags=dict(EXPERIMENT_TAGS))
                old = client.get_experiment_by_name(EXPERIMENTS[key]) if name != EXPERIMENTS[key] else None
                if old is not None and _has_runs_of(client, old.experiment_id, settings.workspace_dir):
                    renamed.append((EXPERIMENTS[key], name))  # created once per store: this is said once
            else:
                ids[key] = exp.experiment_id
                if (exp.tags or {}).get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:  # a store made before the tag
                    client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        if len(renamed) == 1:
            _LOG.warning("MLflow experiment %r (its name before workspace ids) is kept and still read for "
                         "%s's runs; its new runs go to %r", renamed[0][0], settings.workspace_dir, renamed[0][1])
        elif renamed:
            suffix = renamed[0][1][len(renamed[0][0]):]
            _LOG.warning("MLflow experiments %s (their names before workspace ids) are kept and still read for "
                         "%s's runs; their new runs go to the same names + %r", ", ".join(repr(o) for o, _ in renamed),
                         settings.workspace_dir, suffix)
        db = sqlite_path(settings.tracking_uri)
        if db is not None:
            con = sqlite3.connect(db, timeout=20)
            try:
                con.execute("PRAGMA journal_mode=WAL")
            finally:
                con.close()
    return ids


def _has_runs_of(client: "MlflowClient", experiment_id: str, workspace_dir: Path) -> bool:
    """Whether experiment ``experiment_id`` holds a run of ``workspace_dir`` (an ``MlflowClient``'s search).

    A run of it names the folder in its tag ``gpuplan.workspace`` or param ``workspace``, as
    :func:`pipelines.tracking.runs.finished_runs` reads them. The plain names are also the shipped demo's own experiments, so their mere presence says nothing about this
    workspace (a new workspace after ``scripts/run.sh`` was told its "old" runs were kept). A folder name MLflow's
    filter cannot quote (a ``'``) is taken as having runs (the note is then said, as before).
    """
    root = str(Path(workspace_dir).resolve())
    if "'" in root:
        return True
    return any(client.search_runs([experiment_id], filter_string=flt, max_results=1)
               for flt in (f"tags.`gpuplan.workspace` = '{root}'", f"params.workspace = '{root}'"))


def _decode_mlflow_sqlite_mkdir() -> None:
    """Make MLflow 3.17 create a ``sqlite:///`` store's folder from the decoded path (case 010); idempotent.

    ``mlflow.store.db.utils._make_parent_dirs_if_sqlite`` makes ``Path(uri.removeprefix("sqlite:///")).parent``
    from the still-encoded text while SQLAlchemy opens the decoded path, so the store of ``/x/a%20b/ws/mlflow.db``
    (URI ``.../a%2520b/...``: the database in the right folder) would also leave an empty ``/x/a%2520b/ws``.
    The replacement creates :func:`sqlite_path`'s folder instead; a missing function (another MLflow) is left alone.
    """
    from mlflow.store.db import utils as db_utils

    if getattr(db_utils, "_gpuplan_decoded", False) or not hasattr(db_utils, "_make_parent_dirs_if_sqlite"):
        return

    def make_parent_dirs(db_uri: str) -> None:
        db = sqlite_path(db_uri)
        if db is not None and str(db) not in ("", ":memory:"):
            db.parent.mkdir(parents=True, exist_ok=True)

    db_utils._make_parent_dirs_if_sqlite = make_parent_dirs
    db_utils._gpuplan_decoded = True  # type: ignore[attr-defined]


_QUIET_LOCK = threading.Lock()



@contextlib.contextmanager
def quiet_mlflow() -> Iterator[None]:
    """Silence MLflow's INFO/WARNING chatter and its registration prints (stderr) for the CLI bars."""
    with _QUIET_LOCK:  # redirect_stderr is process-wide: one model logging at a time
        logger = logging.getLogger("mlflow")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                yield
        finally:
            logger.setLevel(level)
