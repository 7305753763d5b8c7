"""Loading a workspace: the folder, its ``gpuplan.toml`` parsed once into a :class:`Workspace`, and ``gpuplan init``'s text.

The keys and their validation are in :mod:`pipelines.workspace.config`; here: where the folder is
(``--workspace DIR``, else ``$GPUPLAN_WORKSPACE``, else the shipped demo), paths relative to it, the
files a source's glob matches, and the commented template ``gpuplan init`` writes.
"""

from __future__ import annotations

import glob
import os
import tomllib
import uuid
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipelines.io.errors import InputError
from pipelines.io.paths import PROJECT_ROOT
from pipelines.workspace.config import (
    CONFIG_FILE,
    DEMO_WORKSPACE,
    ClusterConfig,
    NodeSpec,
    ServiceSettings,
    SourceConfig,
    WorkspaceConfig,
    read_services,
)

#: The file holding a workspace's id (:attr:`Workspace.workspace_id`), in the workspace folder.
WORKSPACE_ID_FILE = ".gpuplan-workspace-id"


def read_or_create_workspace_id(root: Path) -> str:
    """The workspace id of the folder ``root``: 32 hex digits, written once into ``root/.gpuplan-workspace-id``.

    The first caller creates the file exclusively (``O_CREAT | O_EXCL``: of two processes creating it at
    once, one writes and the other reads the winner's id); later calls read it. Copying or moving the folder
    keeps the id (a copy meant as a new cluster deletes the file). A folder that cannot be written gets a
    name-based UUID of its resolved path (stable while the folder stays where it is) and nothing is written.

    Raises:
        pipelines.io.errors.InputError: the file exists but does not hold 32 hex digits.
    """
    path = Path(root) / WORKSPACE_ID_FILE
    for _ in range(2):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            pass
        else:
            if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
                raise InputError(f"{path}: expected a workspace id of 32 lower-case hex digits, got {text[:40]!r}")
            return text
        new = uuid.uuid4().hex
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue  # another process created it just now: read its id
        except OSError:
            return uuid.uuid5(uuid.NAMESPACE_URL, Path(root).resolve().as_uri()).hex
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new + "\n")
        return new
    return path.read_text(encoding="utf-8").strip()  # pragma: no cover - created and emptied between two reads


class Workspace:
    """A loaded workspace: its folder and validated config."""

    def __init__(self, root: Path, config: WorkspaceConfig):
        self.root = Path(root).resolve()
        self.config = config
        self._id: str | None = None

    @property
    def config_path(self) -> Path:
        """``<root>/gpuplan.toml``."""
        return self.root / CONFIG_FILE

    @property
    def workspace_id(self) -> str:
        """The workspace's stable unique id (:func:`read_or_create_workspace_id`), read once per object.

        Keys what several clusters share: registered model names, MLflow run tags, Prefect deployment names.
        """
        if self._id is None:
            self._id = read_or_create_workspace_id(self.root)
        return self._id

    @property
    def store_dir(self) -> Path:
        """The store folder (absolute)."""
        return self.resolve(self.config.store.path)

    def resolve(self, path: str) -> Path:
        """``path`` relative to the workspace (``~`` expanded; absolute paths kept)."""
        p = Path(os.path.expanduser(path))
        return p if p.is_absolute() else self.root / p

    def source(self, role: str) -> SourceConfig:
        """``[sources.<role>]`` (``nodes``: None when the workspace has no inventory source)."""
        return getattr(self.config.sources, role)

    @property
    def cluster(self) -> ClusterConfig:
        """The cluster the next plan plans: ``[cluster]`` with its ``nodes`` replaced by the newest ingested inventory.

        Without ``[sources.nodes]``, or before its first ingest, ``[cluster]`` as written (when ``[cluster]``
        has no nodes, the newest ``[sources.nodes]`` export read now, :func:`pipelines.workspace.inventory.newest_inventory`,
        whose errors it raises). With it, every
        node of the inventory (``gpuplan ingest`` keeps the newest export, :meth:`Store.set_node_inventory`)
        with its planned type, domain and down state; ``partitions``, clocks and horizon stay ``[cluster]``'s.
        A node list that changed between exports (a node drained, a type added) is this plan's cluster.
        """
        c = self.config.cluster
        if self.config.sources.nodes is None:
            return c
        from pipelines.workspace.store import Store

        inventory = Store(self.store_dir).node_inventory()
        if inventory is None or inventory.empty:
            if c.nodes is not None or c.n_nodes is not None:
                return c
            from pipelines.workspace.inventory import newest_inventory  # no [cluster] nodes: the newest export now

            inventory = newest_inventory(self.source_files("nodes"), self.config.sources.nodes,
                                         self.config.gpu_types, c.gpu_type)[0]
        nodes: dict[str, int | NodeSpec] = {
            str(r.name): NodeSpec(gpus=int(r.gpus), gpu_type=None if r.gpu_type is None else str(r.gpu_type),
                                  domain=None if r.domain is None else str(r.domain), down=bool(r.down))
            for r in inventory.itertuples(index=False)}
        return c.model_copy(update={"nodes": nodes, "n_nodes": None, "gpus_per_node": None})

    def check_plannable(self) -> None:
        """Refuse, in one line, a cluster the workspace plan cannot plan: a node whose GPUs are not a power of two.

        An untyped cluster is planned as the version-1 problem (one power-of-two node size and total, as
        ``[cluster]`` validates); a typed one (:attr:`ClusterConfig.typed`: types per node, or the node
        inventory) as a version-2 problem, whose nodes must each have a power-of-two number of GPUs
        (:class:`optimizer.problem.Node`; the planner's aligned blocks).

        Raises:
            InputError: a node of another size (the cluster's types, sizes and down nodes named).
        """
        from domain.units import is_pow2

        c = self.cluster
        if c.homogeneous and is_pow2(c.node_gpus) and is_pow2(c.n_gpus):
            return
        if c.typed and all(is_pow2(spec.gpus) for spec in c.node_specs.values()):
            return  # planned as a typed (version 2) problem: nodes of power-of-two sizes
        shape: dict[tuple[str, int], int] = {}
        for spec in c.node_specs.values():
            shape[(str(spec.gpu_type), spec.gpus)] = shape.get((str(spec.gpu_type), spec.gpus), 0) + 1
        down = [n for n, spec in c.node_specs.items() if spec.down]
        parts = ", ".join(f"{n} x {g}-GPU {t}" for (t, g), n in sorted(shape.items()))
        raise InputError(f"{self.config_path}: cluster: {parts}" + (f"; down: {', '.join(down[:5])}" if down else "")
                         + f" ({c.n_gpus} GPUs): every node needs a power-of-two number of GPUs (1, 2, 4, 8, ...) "
                         "for the planner's aligned blocks")

    def source_timezone(self, role: str) -> str:
        """The zone of ``[sources.<role>]``'s naive times: its ``timezone``, else ``[cluster] timezone``."""
        return self.source(role).timezone or self.config.cluster.timezone

    def source_files(self, role: str) -> list[Path]:
        """The files of ``[sources.<role>]``: the path itself, or the glob's matches oldest first (mtime, then name).

        A pulled source (``command``, ``prometheus-http``) is pulled now: its one file is the new raw file
        (:func:`pipelines.workspace.sources.pull.pull`; the pull's failure is its one-line ``InputError``).

        Raises:
            InputError: no file matches (the message names the key and the pattern).
        """
        src = self.source(role)
        if src.pulled:  # a command or Prometheus' API: pulled now into the store's raw folder
            from pipelines.workspace.sources.pull import pull

            return [pull(src, role, self.store_dir / "raw")]
        pattern = str(self.resolve(src.path))
        files = [Path(p) for p in glob.glob(pattern)] if glob.has_magic(pattern) else [Path(pattern)]
        files = [p for p in files if p.is_file()]
        if not files:
            where = "" if Path(src.path).expanduser().is_absolute() else \
                f" (a relative path is read from the workspace folder {self.root}, here {os.path.normpath(pattern)}; " \
                "write the path from that folder, or an absolute one)"
            raise InputError(f"{self.config_path}: sources.{role}.path = {src.path!r}: no such file{where}")
        return sorted(files, key=lambda p: (p.stat().st_mtime, p.name))

    def check_source_files(self) -> None:
        """Refuse now, in one line, a file source that matches no file (``gpuplan run`` calls it first).

        Every ``[sources.<role>]`` read from files (not ``demo``, not pulled by a command or from Prometheus) must
        match at least one file: the check :meth:`source_files` makes at ingest, made before Prefect, MLflow and
        the imports start (a wrong relative path was reported after ~26 s of start-up). Globs only, no file read.

        Raises:
            InputError: a path matching no file (the message of :meth:`source_files`: the key, the pattern, and
                where a relative path is read from).
        """
        for role in ("history", "queue", "traffic", "nodes"):
            src = getattr(self.config.sources, role)
            if src is None or src.pulled or src.format == "demo" or not src.path:
                continue
            self.source_files(role)

    def services(self) -> list[ServiceSettings]:
        """The real-time services: ``[[services]]``, or the ``services.json`` named by ``services_file``.

        Raises:
            InputError: the services file missing or invalid.
        """
        if self.config.services_file:
            return read_services(self.resolve(self.config.services_file))
        return list(self.config.services)


def _one_line(exc: ValidationError, path: Path) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(x) for x in first.get("loc", ()))
    msg = str(first.get("msg", "")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        msg = "unknown key"
    elif first.get("type") == "missing":
        msg = "required key missing"
    elif first.get("type") == "literal_error":  # name the value given, as the CLI's option errors do
        msg = f"{first.get('input')!r} is not allowed: {msg[0].lower()}{msg[1:]}"
    more = len(exc.errors()) - 1
    return f"{path}: {loc or '(top level)'}: {msg}" + (f" (and {more} more)" if more else "")


def parse_workspace(text: str, root: Path, path: Path | None = None) -> Workspace:
    """Validate the text of a ``gpuplan.toml`` of the workspace ``root``.

    Raises:
        InputError: not TOML, or a key missing, unknown or invalid (one line naming the key and the file).
    """
    path = path or Path(root) / CONFIG_FILE
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    try:
        return Workspace(Path(root), WorkspaceConfig.model_validate(doc))
    except ValidationError as exc:
        raise InputError(_one_line(exc, path)) from None


def load_workspace(folder: str | Path | None = None) -> Workspace:
    """The workspace of ``folder`` (else ``$GPUPLAN_WORKSPACE``, else the shipped demo :data:`DEMO_WORKSPACE`).

    Raises:
        InputError: the folder or its ``gpuplan.toml`` missing, or the config invalid.
    """
    chosen = folder if folder is not None else (os.environ.get("GPUPLAN_WORKSPACE") or DEMO_WORKSPACE)
    root = Path(chosen).expanduser()
    path = root / CONFIG_FILE
    if not root.is_dir():
        raise InputError(f"workspace {root}: no such folder (create one with 'gpuplan init {root}')")
    if not path.is_file():
        raise InputError(f"workspace {root}: no {CONFIG_FILE} (create one with 'gpuplan init {root}')")
    return parse_workspace(path.read_text(encoding="utf-8"), root, path)


_INIT_TEMPLATE = '''\
# gpuplan workspace. Keys: docs/operations.md, "Connect your cluster".
# After editing: gpuplan ingest --workspace DIR ; gpuplan run --workspace DIR
{services_block}
[cluster]
{cluster_block}
# IANA zone of the scheduler's clock (sacct prints local times without an offset)
timezone = "{timezone}"
step_minutes = 30       # planning step
horizon_steps = 48      # 48 x 30 min = 24 h

[sources.history]       # finished jobs: what the runtime forecaster learns from
{history_block}

[sources.queue]         # pending and running jobs: what gets planned (the newest file is the queue)
{queue_block}

[sources.traffic]       # real-time request rate per service
{traffic_block}

[store]
path = "store"          # accumulated records (partitioned parquet), inside the workspace

[tracking]
# uri = "sqlite:////abs/path/mlflow.db"   # MLflow store; default: the project's mlruns/

# [kinds]               # job kind of a job whose comment does not say gpuplan.kind=...
# qos = {{ be = "batch_inference" }}
# partition = {{ quant = "quantization" }}
# default = "training"

# [priorities]          # planner weight per QoS (case-insensitive); default 1
# qos = {{ high = 8, normal = 2, low = 1 }}

# [preemption]          # jobs the planner may stop for unforeseen real-time demand (default none)
# qos = ["scavenger"]     # Slurm QoS / Kueue priority class; partitions = [...] likewise
# checkpoint_interval_min = 60   # a job's own gpuplan.checkpoint=/restart= (comment, label) wins
# restart_min = 5

# [replan]
# max_input_age_min = 90  # a replan fails (keeping the previous plan) when exports are older
# planner = "milp"        # or "fast": a verified heuristic plan in milliseconds, no solver (or fifo, easy, priority)

# [retrain]
# holdout_days = 2        # nightly: the new version must be no worse than the champion on these days
# min_holdout_runs = 10
'''


def init_text(demo: bool = False) -> str:
    """The commented ``gpuplan.toml`` ``gpuplan init`` writes: a cluster template, or (``demo``) the shipped demo.

    The demo text points at the shipped data by absolute path (the workspace may live anywhere).
    """
    if demo:
        data = (PROJECT_ROOT / "data").resolve()
        return _INIT_TEMPLATE.format(
            services_block=f'\nservices_file = "{data / "traffic" / "services.json"}"   # the shipped services\n',
            cluster_block="n_nodes = 8\ngpus_per_node = 8",
            timezone="Asia/Shanghai",
            history_block='format = "demo"        # the shipped generated LLM histories (data/histories)',
            queue_block='format = "demo"        # Alibaba openb pods + generated LLM jobs (data/traces)',
            traffic_block=f'format = "csv"\npath = "{data / "traffic"}/servegen_*_hourly.csv"',
        )
    return _INIT_TEMPLATE.format(
        services_block='''
[[services]]            # one block per real-time service (fields as data/traffic/services.json)
service = "chat"
timezone = "UTC"        # the service's users' clock (daily seasonality)
capacity_per_gpu_per_h = 1000000   # requests one GPU serves per hour
headroom = 0.1
min_gpus = 1
max_gpus = 16
swap_cap_gpus = 4       # most GPUs it may gain or lose per step
replica_gpus = 1
''',
        cluster_block='nodes = { gpu-001 = 8, gpu-002 = 8 }   # or: n_nodes = 8 and gpus_per_node = 8\ngpu_type = "H100"\n'
                      '# typed: nodes = { gpu-001 = {gpus = 8, gpu_type = "h100"}, gpu-002 = {gpus = 4, gpu_type = "a100"} }\n'
                      '# or the inventory: [sources.nodes] format = "slurm-sinfo-json", path = "exports/sinfo-*.json"\n'
                      '# partitions = ["gpu"]   # plan only these partitions (Kueue: queue names); default all',
        timezone="UTC",
        history_block='format = "slurm-sacct"   # or kueue-json, csv, parquet\npath = "exports/sacct-*.txt"',
        queue_block='format = "slurm-squeue-json"   # or kueue-json, csv, parquet\npath = "exports/squeue-*.json"',
        traffic_block='format = "prometheus-json"   # or csv, parquet\npath = "exports/prom-*.json"\n'
                      'service_label = "service"      # the label naming the service\n'
                      'value_units = "rate_per_s"     # a rate() query; "per_hour" for hourly counts',
    )
