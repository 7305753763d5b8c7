"""Typed settings for the pipelines shell: paths, MLflow tracking URI, Prefect environment.

The roots the shell reads and writes under are named here (data, runs, models, MLflow); the
datasets inside them (names, formats, schemas) are :mod:`pipelines.catalog`'s. Settings are a frozen pydantic model built by :func:`load_settings` from defaults
plus environment overrides:

| environment variable | setting | default |
|---|---|---|
| ``GPUPLAN_TRACKING_URI`` (else ``MLFLOW_TRACKING_URI``) | ``tracking_uri`` | ``sqlite:///<project>/mlruns/mlflow.db`` |
| ``GPUPLAN_ARTIFACT_ROOT`` | ``artifact_root`` (MLflow artifacts) | beside a ``GPUPLAN_TRACKING_URI`` SQLite file, else ``<project>/mlruns/artifacts`` |
| ``GPUPLAN_RUNS_DIR`` | ``runs_dir`` | ``<project>/runs`` |
| ``GPUPLAN_MODELS_DIR`` | ``models_dir`` | ``<project>/mlruns/models`` (git-ignored) |
| ``GPUPLAN_NIGHTLY_TZ`` | ``nightly_timezone`` (IANA) | ``UTC`` |
| ``GPUPLAN_N_GPUS`` | ``n_gpus`` | ``64`` |
| ``GPUPLAN_SOLVE_TIME_LIMIT_S`` | ``solve_time_limit_s`` (HiGHS) | ``30`` |
| ``GPUPLAN_SOLVE_TIMEOUT_S`` | ``solve_timeout_s`` (Prefect task) | ``180`` |
| ``GPUPLAN_SERVE_SCHEDULES`` | ``serve_schedules`` (``0`` = serve without schedules) | ``1`` |
| ``GPUPLAN_WORKSPACE`` | ``workspace_dir`` (and the cluster, runs, models, tracking it gives) | ``data/demo`` |
| ``GPUPLAN_MLFLOW_UI_URL`` | ``mlflow_ui_url`` (links from Prefect artifacts to MLflow runs) | the tracking URI when it is ``http(s)``, else none |

The MLflow default is a SQLite store inside the project's ``mlruns/`` folder with artifacts
under ``mlruns/artifacts`` (case C28: MLflow >= 3.13 refuses the plain-folder store and would
otherwise fall back to ``./mlflow.db`` in the current directory).

:func:`apply_env_defaults` sets the Prefect/MLflow environment measured in STACK.md (ephemeral
server start-up timeout 120 s, analytics and telemetry off) without overriding values the
operator already set. Call it before importing prefect.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipelines.io.errors import InputError
from pipelines.io.paths import PROJECT_ROOT  # noqa: E402 - re-exported

if TYPE_CHECKING:
    from pipelines.workspace.load import Workspace

#: Environment defaults (STACK.md, "Prefect 3.9" and "MLflow 3.17").
ENV_DEFAULTS: dict[str, str] = {
    # first start of the temporary server with a new database took > 20 s on 2 cores
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    # with analytics on, a telemetry job hit "database is locked"
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    # flow and task runs send their INFO lines to the Prefect API (the run page shows them; logging.yml of
    # Prefect 3.9: the "prefect" logger's level is PREFECT_LOGGING_LEVEL, prefect.flow_runs/task_runs
    # inherit it and carry the API handler) ...
    "PREFECT_LOGGING_LEVEL": "INFO",
    # ... while the terminal stays quiet: the console handler (on the root logger) shows WARNING and above
    # only (override of logging.yml's handlers.console.level, PREFECT_LOGGING_[PATH]_[KEY])
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING",
}

#: The database of the temporary server a flow starts when no ``PREFECT_API_URL`` is set, inside
#: ``PREFECT_HOME``: never ``prefect.db``, the file a ``prefect server start`` with the same home uses.
EPHEMERAL_DB = "gpuplan-ephemeral.db"
#: Prefect 3.9's setting of the server database (``ServerDatabaseSettings.connection_url``).
PREFECT_DB_VAR = "PREFECT_SERVER_DATABASE_CONNECTION_URL"
#: Set to ``1`` when :data:`PREFECT_DB_VAR` was chosen by :func:`apply_env_defaults` (so a child process with
#: another ``PREFECT_HOME`` or with ``PREFECT_API_URL`` re-derives it instead of keeping the parent's).
PREFECT_DB_MARK = "GPUPLAN_PREFECT_DB_DEFAULTED"


def apply_env_defaults() -> dict[str, str]:
    """Set :data:`ENV_DEFAULTS` in ``os.environ`` where not already set.

    Also keeps Prefect's own files inside the project: ``PREFECT_HOME`` defaults to
    ``<project>/.prefect`` (git-ignored) instead of ``~/.prefect``, so the main job writes nothing
    outside the clone; and without ``PREFECT_API_URL`` the temporary server gets its own database file
    there (:func:`_ephemeral_database`), never the one of a running ``prefect server``. Call before
    importing prefect.

    Returns the variables that were set by this call (name -> value).
    """
    applied: dict[str, str] = {}
    defaults = {"PREFECT_HOME": str(PROJECT_ROOT / ".prefect"), **ENV_DEFAULTS}
    for key, value in defaults.items():
        if key not in os.environ:
            os.environ[key] = value
            applied[key] = value
    applied.update(_ephemeral_database())
    return applied


def _ephemeral_database() -> dict[str, str]:
    """Give the temporary server of ephemeral mode its own SQLite file (``<PREFECT_HOME>/gpuplan-ephemeral.db``).

    With no ``PREFECT_API_URL``, Prefect starts a temporary server on the database
    ``sqlite+aiosqlite:///<PREFECT_HOME>/prefect.db`` (Prefect 3.9 ``settings/models/_defaults.py``),
    the same file as a ``prefect server start`` with that home: both would migrate and write one SQLite
    file. Here the temporary server gets :data:`EPHEMERAL_DB` in ``PREFECT_HOME`` instead. An operator's
    own database setting is kept; with ``PREFECT_API_URL`` set no database is chosen (the server has
    its own), and a value chosen by a parent gpuplan process is re-derived or dropped.

    Returns the variables set (name -> value).
    """
    ours = os.environ.get(PREFECT_DB_MARK) == "1"
    if os.environ.get(PREFECT_DB_VAR) and not ours:
        return {}  # the operator's choice
    if ours:
        os.environ.pop(PREFECT_DB_VAR, None)
        os.environ.pop(PREFECT_DB_MARK, None)
    if os.environ.get("PREFECT_API_URL") or os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL"):
        return {}
    home = Path(os.environ["PREFECT_HOME"]).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    url = f"sqlite+aiosqlite:///{(home / EPHEMERAL_DB).resolve()}"
    os.environ[PREFECT_DB_VAR] = url
    os.environ[PREFECT_DB_MARK] = "1"
    return {PREFECT_DB_VAR: url}


def default_tracking_uri(project_root: Path = PROJECT_ROOT) -> str:
    """The embedded MLflow store: ``sqlite:///<abs project>/mlruns/mlflow.db``."""
    return sqlite_uri((project_root / "mlruns" / "mlflow.db").resolve())


def sqlite_uri(db: Path, query: str = "") -> str:
    """The ``sqlite:///`` URI of the database file ``db`` (absolute), safe for SQLAlchemy and MLflow (case 010).

    SQLAlchemy URL-decodes the database part of a URL (``%20`` becomes a space), so a folder named
    ``a%20b`` would send the store to ``a b``; every ``%`` is written ``%25``. Space, ``#`` and ``:`` pass
    through as they are (SQLAlchemy splits the database part only at ``?``). :func:`sqlite_file` is the inverse.
    """
    return "sqlite:///" + str(db).replace("%", "%25") + (f"?{query}" if query else "")


def sqlite_file(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI made by :func:`sqlite_uri` (``%25`` back to ``%``); None otherwise."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri[len("sqlite:///"):].split("?", 1)[0].replace("%25", "%"))


def literal_sqlite_uri(uri: str, base: Path) -> str:
    """An operator's tracking URI with a ``sqlite:///PATH`` made absolute and safe (cases 009, 010); others as given.

    ``PATH`` is a file path taken literally, never URL-decoded (``%20`` stays ``%20``); a relative one is
    resolved against ``base`` (the workspace for ``[tracking] uri``: every path in ``gpuplan.toml`` is
    workspace-relative; the current folder for an environment variable). A ``?query`` is kept.
    """
    if not uri.startswith("sqlite:///"):
        return uri
    path, _, query = uri[len("sqlite:///"):].partition("?")
    if not path or path == ":memory:":
        return uri
    p = Path(path).expanduser()
    return sqlite_uri((p if p.is_absolute() else base / p).resolve(), query)


class Settings(BaseModel):
    """Pipeline settings (frozen). Paths are absolute.

    Attributes:
        project_root: the repository folder.
        data_dir: shipped inputs (``data/``).
        runs_dir: where ``gpuplan run`` and the replan deployment write run folders.
        models_dir: current trained forecasters (one file per kind).
        mlruns_dir: the embedded MLflow folder (database and artifacts).
        tracking_uri: MLflow tracking URI, always explicit.
        artifact_root: folder under which each experiment gets its artifact location.
        n_gpus / gpus_per_node / step_minutes / horizon_steps: the planned cluster (DESIGN §3).
        solve_time_limit_s: HiGHS time limit per plan (s).
        solve_timeout_s: Prefect ``timeout_seconds`` of the solve task (s); must exceed the
            solver's own limit so a healthy solve is never cut (case C26).
        train_timeout_s: Prefect ``timeout_seconds`` of one forecaster's training task (s).
        nightly_cron / nightly_timezone: nightly retraining schedule (cron in an IANA zone).
        replan_every_min: re-planning interval (min); plans are labelled by UTC slot.
        freshness_max_h: the newest plan older than this fails the freshness check (C25).
        serve_schedules: attach the cron schedules when serving (False: on-demand only, for demos
            and tests that must not start scheduled runs).
        seed: seed for generated LLM jobs in the queue.
        workspace_dir: the workspace planned (:mod:`pipelines.workspace`; default the shipped demo).
        mlflow_ui_url: base URL of an MLflow UI showing ``tracking_uri`` (e.g. ``http://127.0.0.1:5000``), used
            for links to MLflow runs in Prefect artifacts; None: runs are named by id and store only.
    """

    model_config = ConfigDict(frozen=True)

    project_root: Path = PROJECT_ROOT
    data_dir: Path = PROJECT_ROOT / "data"
    runs_dir: Path = PROJECT_ROOT / "runs"
    models_dir: Path = PROJECT_ROOT / "mlruns" / "models"
    mlruns_dir: Path = PROJECT_ROOT / "mlruns"
    tracking_uri: str = Field(default_factory=default_tracking_uri)
    artifact_root: Path = PROJECT_ROOT / "mlruns" / "artifacts"
    n_gpus: int = 64
    gpus_per_node: int = 8
    step_minutes: int = 30
    horizon_steps: int = 48
    solve_time_limit_s: float = 30.0
    solve_timeout_s: float = 180.0
    train_timeout_s: float = 600.0
    nightly_cron: str = "0 2 * * *"
    nightly_timezone: str = "UTC"
    replan_every_min: int = 30
    freshness_max_h: float = 2.0
    serve_schedules: bool = True
    seed: int = 0
    workspace_dir: Path = PROJECT_ROOT / "data" / "demo"
    mlflow_ui_url: str | None = None

    @field_validator("nightly_timezone")
    @classmethod
    def _valid_zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise InputError(f"nightly_timezone: unknown IANA time zone {v!r}") from exc
        return v

    @field_validator("n_gpus", "gpus_per_node")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v < 1 or v & (v - 1):
            raise InputError(f"n_gpus/gpus_per_node: expected a power of two, got {v}")
        return v

    def with_(self, **changes: object) -> Settings:
        """A copy with some fields changed (validated)."""
        return Settings(**{**self.model_dump(), **changes})


def shipped_workspace(ws: Workspace) -> bool:
    """True for the shipped demo folder itself (``data/demo``): shipped data, so its runs and models live in the clone.

    A copy of it (``gpuplan init WS --demo``) is an operator's folder like any other: runs under
    ``WS/runs``, models under its store.
    """
    from pipelines.workspace.config import DEMO_WORKSPACE

    return ws.root == DEMO_WORKSPACE.resolve()


#: Where a workspace's queue, job histories and job forecasters come from (:func:`job_side`).
JobSide = Literal["shipped", "store"]


def job_side(ws: Workspace) -> JobSide:
    """Where the queue, job histories and job forecasters of ``ws`` come from: the one place that asks.

    ``shipped``: ``[sources.queue]`` format ``demo``, the shipped files (generated LLM job histories, the
    Alibaba openb trace as the queue; one forecaster per job kind). ``store``: an operator's exports,
    ingested into the workspace's store (the scheduler-history forecaster). Traffic is read from
    ``[sources.traffic]`` on both sides.
    """
    return "shipped" if ws.source("queue").format == "demo" else "store"


def workspace_defaults(ws: Workspace) -> dict[str, object]:
    """Settings the loaded workspace ``ws`` gives.

    The cluster shape and planning clock (``[cluster]``); for any folder but the shipped demo
    (:func:`shipped_workspace`) also ``runs_dir`` = ``<workspace>/runs``, ``models_dir`` =
    ``<store>/models`` and ``tracking_uri`` from ``[tracking] uri``. Environment variables and explicit
    overrides still win.
    """
    c = ws.cluster
    from domain.units import pow2_ceil

    # a typed cluster is planned in its padded layout (optimizer.problem.Cluster: the next power of two)
    n_gpus, per_node = (pow2_ceil(c.n_gpus), pow2_ceil(c.node_gpus)) if c.typed else (c.n_gpus, c.node_gpus)
    out: dict[str, object] = {"workspace_dir": ws.root, "n_gpus": n_gpus, "gpus_per_node": per_node,
                              "step_minutes": c.step_minutes, "horizon_steps": c.horizon_steps}
    if not shipped_workspace(ws):
        out.update(runs_dir=ws.root / "runs", models_dir=ws.store_dir / "models")
        if ws.config.tracking.uri:
            out["tracking_uri"] = literal_sqlite_uri(ws.config.tracking.uri, ws.root)
    return out


#: The workspaces parsed by this process: folder -> (the ``gpuplan.toml`` text, the workspace) (:func:`open_workspace`).
_PARSED: dict[Path, tuple[str, Workspace]] = {}


def open_workspace(folder: str | Path | None = None) -> Workspace:
    """:func:`pipelines.workspace.load.load_workspace`, parsed once per process while ``gpuplan.toml`` keeps its text.

    ``gpuplan run`` opens the workspace in the command (to check the inputs before Prefect starts) and again
    in the flow run; the file is read both times but parsed once (a changed file is parsed again).

    Raises:
        pipelines.io.errors.InputError: the folder or its ``gpuplan.toml`` missing, or the config invalid.
    """
    from pipelines.workspace.config import CONFIG_FILE, DEMO_WORKSPACE
    from pipelines.workspace.load import load_workspace, parse_workspace

    root = Path(folder if folder is not None else (os.environ.get("GPUPLAN_WORKSPACE") or DEMO_WORKSPACE)).expanduser()
    try:
        text = (root / CONFIG_FILE).read_text(encoding="utf-8")
    except OSError:
        return load_workspace(root)  # its one-line error naming what is missing
    key = root.resolve()
    hit = _PARSED.get(key)
    if hit is None or hit[0] != text:
        hit = _PARSED[key] = (text, parse_workspace(text, root, root / CONFIG_FILE))
    return hit[1]


def load_settings(workspace: str | Path | Workspace | None = None, **overrides: object) -> Settings:
    """Build :class:`Settings` from defaults, the workspace (:func:`workspace_defaults`), environment variables, then ``overrides``.

    ``workspace``: a loaded :class:`pipelines.workspace.load.Workspace` (its ``gpuplan.toml`` is not read
    again), or a folder (else ``$GPUPLAN_WORKSPACE``, else the shipped demo) loaded here.

    A SQLite ``tracking_uri`` from any of them puts the MLflow artifacts in ``artifacts/`` beside its
    database file unless ``artifact_root`` is given (``GPUPLAN_ARTIFACT_ROOT`` or an override).

    Raises:
        pipelines.io.errors.InputError: an unknown time zone, a non-power-of-two GPU count, or an
            invalid workspace.
    """
    from pipelines.workspace.load import Workspace

    ws = workspace if isinstance(workspace, Workspace) else open_workspace(workspace)
    env: dict[str, object] = workspace_defaults(ws)
    if os.environ.get("GPUPLAN_TRACKING_URI"):  # the operator's: a sqlite path taken literally (case 010)
        env["tracking_uri"] = literal_sqlite_uri(os.environ["GPUPLAN_TRACKING_URI"], Path.cwd())
    elif os.environ.get("MLFLOW_TRACKING_URI"):
        # already a URI (``%25`` for ``%``): ``mlflow.set_tracking_uri`` exports this variable, so a second
        # load_settings in the process reads back the encoded form and must not encode it again
        env["tracking_uri"] = os.environ["MLFLOW_TRACKING_URI"]
    if os.environ.get("GPUPLAN_ARTIFACT_ROOT"):
        env["artifact_root"] = Path(os.environ["GPUPLAN_ARTIFACT_ROOT"]).resolve()
    for var, key in (("GPUPLAN_RUNS_DIR", "runs_dir"), ("GPUPLAN_MODELS_DIR", "models_dir")):
        if os.environ.get(var):
            env[key] = Path(os.environ[var]).resolve()
    if os.environ.get("GPUPLAN_MLFLOW_UI_URL"):
        env["mlflow_ui_url"] = os.environ["GPUPLAN_MLFLOW_UI_URL"].rstrip("/")
    if os.environ.get("GPUPLAN_NIGHTLY_TZ"):
        env["nightly_timezone"] = os.environ["GPUPLAN_NIGHTLY_TZ"]
    for var, key, typ in (("GPUPLAN_N_GPUS", "n_gpus", int), ("GPUPLAN_SOLVE_TIME_LIMIT_S", "solve_time_limit_s", float),
                          ("GPUPLAN_SOLVE_TIMEOUT_S", "solve_timeout_s", float)):
        if os.environ.get(var):
            try:
                env[key] = typ(os.environ[var])
            except ValueError as exc:
                raise InputError(f"{var}: expected a number, got {os.environ[var]!r}") from exc
    if os.environ.get("GPUPLAN_SERVE_SCHEDULES"):
        env["serve_schedules"] = os.environ["GPUPLAN_SERVE_SCHEDULES"].strip().lower() not in ("0", "false", "no", "off")
    from pydantic import ValidationError

    merged = {**env, **overrides}
    db = str(merged.get("tracking_uri") or "")
    if "artifact_root" not in merged and db.startswith("sqlite:///"):
        # artifacts beside the database (whoever chose it: environment, workspace, caller), never in the
        # clone's mlruns/ for a store elsewhere (experiments would point there and leave orphan folders)
        merged["artifact_root"] = (sqlite_file(db) or Path()).resolve().parent / "artifacts"
    if not merged.get("mlflow_ui_url") and db.startswith(("http://", "https://")):  # a tracking server is its UI
        merged["mlflow_ui_url"] = db.rstrip("/")
    try:
        return Settings(**merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first.get("loc", ())) or "settings"
        raise InputError(f"setting {field}: {first.get('msg', exc)}") from None
