"""An operator's workspace: a folder with ``gpuplan.toml`` naming the cluster, its services, its sources and its store.

``gpuplan.toml`` is read with :mod:`tomllib` and validated with pydantic (every error names the key
and the file, one line). Keys (``docs/operations.md``, "Connect your cluster"):

- ``[cluster]``: ``nodes = {name = gpus, ...}`` (or typed, ``{name = {gpus = 8, gpu_type = "h100"}, ...}``,
  :class:`NodeSpec`) or ``n_nodes`` × ``gpus_per_node``; ``gpu_type``;
  ``partitions`` (the partitions/queues planned; default all);
  ``timezone`` (IANA zone of the scheduler's clock: sacct prints local times without an offset);
  ``step_minutes`` (default 30); ``horizon_steps`` (default 48).
- ``[[services]]``: the real-time services (the fields of ``data/traffic/services.json``), or
  ``services_file`` naming such a JSON file (the demo's).
- ``[sources.history]``, ``[sources.queue]``, ``[sources.traffic]``: ``format`` (:data:`FORMATS`) and
  ``path`` (a file or a glob of drop-in exports, relative to the workspace); traffic also
  ``service_label`` (Prometheus label naming the service) and ``value_units``.
- ``[store]``: ``path`` of the accumulated data (default ``store`` inside the workspace).
- ``[tracking]``: ``uri`` of the MLflow store (default: the project's embedded store).
- ``[dask]``: ``address`` of the Dask scheduler for ``gpuplan bench`` (``tcp://HOST:PORT``, ``local``
  or ``local:N``; default none, in-process; ``--dask`` wins).
- ``[kinds]``: ``qos = {name = kind}``, ``partition = {name = kind}``, ``default`` — the job kind
  of a record whose comment/annotations do not say (``gpuplan.kind=...``).
- ``[priorities]``: ``qos = {name = weight}``, ``default`` — the planner's priority weight.
- ``[replan]``: ``max_input_age_min`` (90) — older queue exports or traffic fail a re-plan; ``planner`` (``milp``;
  ``fast`` for the fast mode, or a baseline) — the planner of ``gpuplan run`` and the replans.
- ``[retrain]``: ``holdout_days`` (2), ``min_holdout_runs`` (10) — the nightly promotion gate.
- ``[sources.nodes]`` (optional): the cluster's inventory, ``format`` ``slurm-sinfo-json``,
  ``kubernetes-nodes-json``, ``csv`` or ``parquet`` (:mod:`pipelines.workspace.sources.nodes`); the newest
  ingested export is the cluster (it replaces ``[cluster] nodes``).
- ``[preemption]`` (issue 30, opt-in): ``qos``, ``partitions`` (names, case-insensitive, that mark a job
  preemptible), ``checkpoint_interval_min`` and ``restart_min`` (their defaults);
  :mod:`pipelines.workspace.preemption` applies them with the per-job fields.
- ``[gpu_types]``: export name -> planned type name (``"NVIDIA-A100-SXM4-80GB" = "a100_80gb"``, ``G2 = "g2"``),
  over :mod:`domain.gpus`'s names (:mod:`pipelines.workspace.gpu_types`).

The shipped demo workspace is ``data/demo`` (:data:`DEMO_WORKSPACE`); its history and queue have the
format ``demo`` (the shipped generated LLM histories and the queue built from the Alibaba openb
window plus generated LLM jobs, read at plan time). Every command takes ``--workspace DIR``
(default ``$GPUPLAN_WORKSPACE``, else the demo).
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from domain.kinds import JOB_KINDS
from domain.units import is_pow2
from pipelines.io import strict_json
from pipelines.io.errors import InputError
from pipelines.io.paths import PROJECT_ROOT

#: The config file of a workspace.
CONFIG_FILE = "gpuplan.toml"
#: The shipped demo workspace.
DEMO_WORKSPACE: Path = PROJECT_ROOT / "data" / "demo"
#: Source formats (``demo``: the shipped demo's history and queue).
FORMATS: tuple[str, ...] = ("csv", "parquet", "slurm-sacct", "slurm-squeue-json", "kueue-json", "prometheus-json",
                            "prometheus-http", "demo", "slurm-sinfo-json", "kubernetes-nodes-json")
#: Formats each source role accepts.
ROLE_FORMATS: dict[str, tuple[str, ...]] = {
    "history": ("csv", "parquet", "slurm-sacct", "kueue-json", "demo"),
    "queue": ("csv", "parquet", "slurm-squeue-json", "slurm-sacct", "kueue-json", "demo"),
    "traffic": ("csv", "parquet", "prometheus-json", "prometheus-http"),
    "nodes": ("slurm-sinfo-json", "kubernetes-nodes-json", "csv", "parquet"),
}

Format = Literal["csv", "parquet", "slurm-sacct", "slurm-squeue-json", "kueue-json", "prometheus-json",
                 "prometheus-http", "demo", "slurm-sinfo-json", "kubernetes-nodes-json"]


def _check_zone(v: str) -> str:
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{v!r} is not an IANA time zone (e.g. 'Europe/Berlin', 'UTC')") from None
    return v


def _number_types(annotation: Any) -> tuple[bool, bool]:
    """``(takes a number, takes a bool)`` of a field's annotation (``float | None`` -> (True, False))."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    return any(a in (int, float) for a in args), any(a is bool or a is Any for a in args)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: Any) -> Any:
        """Refuse ``true``/``false`` where a number is expected (pydantic would read ``true`` as 1 or 1.0)."""
        if isinstance(value, bool) and info.field_name in cls.model_fields:
            number, boolean = _number_types(cls.model_fields[info.field_name].annotation)
            if number and not boolean:
                raise ValueError(f"expected a number, not {str(value).lower()}")
        return value


class NodeSpec(_Strict):
    """One node of a typed ``[cluster] nodes`` table: ``gpu-001 = {gpus = 8, gpu_type = "h100"}``.

    Attributes:
        gpus: GPUs of the node (>= 1).
        gpu_type: its GPU type as the operator names it (matched through ``[gpu_types]`` and
            :mod:`domain.gpus`, :mod:`pipelines.workspace.gpu_types`); None: the cluster's ``gpu_type``.
        domain: placement domain (a network block a gang stays inside); None.
        down: no job starts there (drained, down).
    """

    gpus: int = Field(ge=1)
    gpu_type: str | None = None
    domain: str | None = None
    down: bool = False


class ClusterConfig(_Strict):
    """``[cluster]``: the planned GPUs, the scheduler's clock and the planning clock.

    Give ``nodes`` (name -> GPUs per node, ``gpu-001 = 8``; or typed, name -> :class:`NodeSpec`,
    ``gpu-001 = {gpus = 8, gpu_type = "h100"}``; both forms may be mixed) or ``n_nodes`` and
    ``gpus_per_node`` (nodes named ``node-00`` ...). An untyped cluster (every node a bare count, one
    ``gpu_type`` label) has nodes of one power-of-two size and a power-of-two total, as the planner's
    contiguous blocks assume; a typed one (:attr:`typed`: a node with its own type) may have nodes of
    different sizes and types. ``partitions``: the scheduler partitions (Kueue: queue names) these nodes
    serve; only their jobs are planned (all jobs still teach the forecaster). Running jobs on nodes
    outside ``nodes`` are never planned on this cluster. With ``[sources.nodes]`` the newest ingested
    inventory replaces ``nodes`` (:attr:`pipelines.workspace.load.Workspace.cluster`), and ``nodes`` may be
    left out: the cluster is then the inventory alone (a plan before the first ingest is refused).
    """

    nodes: dict[str, int | NodeSpec] | None = None
    n_nodes: int | None = Field(default=None, ge=1)
    gpus_per_node: int | None = Field(default=None, ge=1)
    gpu_type: str = "unknown"
    partitions: list[str] | None = None
    timezone: str = "UTC"
    step_minutes: int = Field(default=30, ge=1, le=1440)
    horizon_steps: int = Field(default=48, ge=1)

    _zone = field_validator("timezone")(_check_zone)

    @field_validator("nodes", mode="before")
    @classmethod
    def _node_values(cls, v: Any) -> Any:
        """Each node a whole GPU count or a :class:`NodeSpec` table; errors name the node and the key."""
        if not isinstance(v, dict):
            return v
        out: dict[str, int | NodeSpec] = {}
        for name, spec in v.items():
            if isinstance(spec, bool) or not isinstance(spec, int | dict | NodeSpec):
                raise ValueError(f"nodes.{name} = {spec!r}: expected GPUs (8) or {{gpus = 8, gpu_type = \"h100\"}}")
            if isinstance(spec, dict):
                try:
                    spec = NodeSpec.model_validate(spec)
                except ValidationError as exc:
                    first = exc.errors()[0]
                    key = ".".join(str(x) for x in first.get("loc", ()))
                    msg = "unknown key" if first.get("type") == "extra_forbidden" else first.get("msg", "")
                    raise ValueError(f"nodes.{name}.{key}: {msg}") from None
            out[str(name)] = spec
        return out

    @model_validator(mode="after")
    def _shape(self) -> ClusterConfig:
        if self.nodes is not None:
            if self.n_nodes is not None or self.gpus_per_node is not None:
                raise ValueError("give either nodes or n_nodes and gpus_per_node, not both")
            if not self.nodes:
                raise ValueError("nodes is empty")
            for name, spec in self.nodes.items():
                if isinstance(spec, int) and spec < 1:
                    raise ValueError(f"nodes.{name} = {spec}: expected GPUs >= 1")
            if self.typed:
                return self
            sizes = set(self.node_sizes.values())
            if len(sizes) > 1:
                raise ValueError(f"nodes have different GPU counts {sorted(sizes)}; give each node its type "
                                 f"(nodes = {{ name = {{gpus = 8, gpu_type = \"h100\"}}, ... }}) to plan nodes of "
                                 f"different sizes")
        elif self.n_nodes is None and self.gpus_per_node is None:
            return self  # no nodes written: the cluster is the [sources.nodes] inventory (WorkspaceConfig checks)
        elif self.n_nodes is None or self.gpus_per_node is None:
            raise ValueError("give nodes = {name = gpus, ...} or both n_nodes and gpus_per_node")
        g = self.node_gpus
        if not is_pow2(g):
            raise ValueError(f"GPUs per node = {g} is not a power of two")
        if not is_pow2(self.n_gpus):
            raise ValueError(f"{len(self.node_names)} nodes x {g} GPUs = {self.n_gpus} GPUs is not a power of two")
        return self

    @property
    def typed(self) -> bool:
        """Whether a node names its own type, domain or down state (``{gpus = 8, gpu_type = "h100"}``)."""
        return any(isinstance(v, NodeSpec) for v in (self.nodes or {}).values())

    @property
    def node_specs(self) -> dict[str, NodeSpec]:
        """Every node as a :class:`NodeSpec` (a bare count gets the cluster's ``gpu_type``), in GPU order."""
        if self.nodes is None:
            return {n: NodeSpec(gpus=int(self.gpus_per_node or 0), gpu_type=self.gpu_type) for n in self.node_names}
        return {n: (v if isinstance(v, NodeSpec) else NodeSpec(gpus=v)).model_copy(
            update={"gpu_type": (v.gpu_type if isinstance(v, NodeSpec) and v.gpu_type else self.gpu_type)})
            for n, v in self.nodes.items()}

    @property
    def node_sizes(self) -> dict[str, int]:
        """Node name -> GPUs."""
        return {n: s.gpus for n, s in self.node_specs.items()}

    @property
    def node_names(self) -> list[str]:
        """Node names in GPU order (node ``i`` holds GPUs ``i*gpus_per_node ...``)."""
        if self.nodes is not None:
            return list(self.nodes)
        n = int(self.n_nodes or 0)
        return [f"node-{i:0{max(2, len(str(n - 1)))}d}" for i in range(n)]

    @property
    def node_gpus(self) -> int:
        """GPUs per node (the largest node's on a typed cluster of several sizes)."""
        if self.nodes:
            return max(self.node_sizes.values())
        return int(self.gpus_per_node or 0)

    @property
    def n_gpus(self) -> int:
        """GPUs of the cluster (the sum over its nodes)."""
        if self.nodes:
            return sum(self.node_sizes.values())
        return self.node_gpus * len(self.node_names)

    @property
    def gpu_types(self) -> list[str]:
        """The nodes' type names as given, first appearance order."""
        return list(dict.fromkeys(str(s.gpu_type) for s in self.node_specs.values()))

    @property
    def homogeneous(self) -> bool:
        """One node size, one type, no node down: the shape the untyped (version 1) problem plans."""
        specs = list(self.node_specs.values())
        return len({s.gpus for s in specs}) == 1 and len({s.gpu_type for s in specs}) == 1 and \
            not any(s.down for s in specs)


#: Fields every entry of a ``services.json`` must have (``data/traffic/README.md``).
REQUIRED_FIELDS = ("service", "file", "timezone", "capacity_per_gpu_per_h", "headroom", "min_gpus", "max_gpus",
                   "swap_cap_gpus")


class ServiceSettings(_Strict):
    """One real-time service: a ``[[services]]`` entry of ``gpuplan.toml`` or of ``services.json``.

    The one service type of the shell: validated here, read by the real-time stage
    (:mod:`pipelines.stages.realtime`) and the problem builder. Frozen.

    Attributes:
        service: name; ``file``: its hourly traffic file (relative to the traffic folder; ``""`` in a
            workspace, whose traffic comes from ``[sources.traffic]``);
        timezone: IANA zone of its local clock (seasonality); it takes precedence over any zone the
            traffic stamps carry (default ``UTC``);
        capacity_per_gpu_per_h: traffic one GPU serves per hour (file units, > 0); ``headroom``: fraction
            (>= 0, default 0.1);
        min_gpus / max_gpus / swap_cap_gpus / replica_gpus: GPU bounds, largest change per step, replica size;
        units: the traffic units (``requests/h``; a ``services.json`` entry without one: ``traffic/h``).
    """

    service: str = Field(min_length=1)
    timezone: str = "UTC"
    capacity_per_gpu_per_h: float = Field(gt=0)
    headroom: float = Field(default=0.1, ge=0)
    min_gpus: int = Field(ge=0)
    max_gpus: int = Field(ge=1)
    swap_cap_gpus: int = Field(ge=1)
    replica_gpus: int = Field(default=1, ge=1)
    units: str = "requests/h"
    file: str = ""

    _zone = field_validator("timezone")(_check_zone)

    @model_validator(mode="after")
    def _band(self) -> ServiceSettings:
        """The band :func:`forecasters.realtime.to_gpus` needs, checked when the config is read (not mid-flow)."""
        if self.min_gpus > self.max_gpus:
            raise ValueError(f"min_gpus {self.min_gpus} > max_gpus {self.max_gpus}: need min_gpus <= max_gpus")
        for name, v in (("min_gpus", self.min_gpus), ("max_gpus", self.max_gpus)):
            if v % self.replica_gpus:
                raise ValueError(f"{name} {v} is not a multiple of replica_gpus {self.replica_gpus}")
        return self

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> ServiceSettings:
        """One ``services[i]`` entry of a ``services.json`` (all of :data:`REQUIRED_FIELDS` needed; other keys ignored).

        ``where`` names the entry in errors.

        Raises:
            pipelines.io.errors.InputError: a required field is missing, or a value is out of range.
        """
        miss = [k for k in REQUIRED_FIELDS if k not in d]
        if miss:
            raise InputError(f"{where} missing {', '.join(miss)}")
        try:
            return cls(service=str(d["service"]), file=str(d["file"]), timezone=str(d["timezone"]),
                       capacity_per_gpu_per_h=float(d["capacity_per_gpu_per_h"]), headroom=float(d["headroom"]),
                       min_gpus=int(d["min_gpus"]), max_gpus=int(d["max_gpus"]),
                       swap_cap_gpus=int(d["swap_cap_gpus"]), replica_gpus=int(d.get("replica_gpus", 1)),
                       units=str(d.get("units", "traffic/h")))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(x) for x in first.get("loc", ()))
            msg = str(first.get("msg", "")).removeprefix("Value error, ")
            raise InputError(f"{where}: {loc}: {msg}" if loc else f"{where}: {msg}") from None

    def gpu_conversion(self) -> dict[str, Any]:
        """Keyword arguments of :func:`forecasters.realtime.to_gpus` for this service."""
        return {"capacity_per_gpu_per_h": self.capacity_per_gpu_per_h, "headroom": self.headroom,
                "min_gpus": self.min_gpus, "max_gpus": self.max_gpus, "replica_gpus": self.replica_gpus}


def read_services(path: str | os.PathLike) -> list[ServiceSettings]:
    """The real-time services of a ``services.json`` (``data/traffic/README.md``), validated.

    Raises:
        pipelines.io.errors.InputError: file missing, not JSON, or a service without a required field.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"service settings not found: {p}")
    doc = strict_json.loads(p.read_text(), str(p))
    return [ServiceSettings.from_dict(s, f"{p}: services[{i}]") for i, s in enumerate(doc.get("services", []))]


class SourceConfig(_Strict):
    """One ``[sources.<role>]``: an export format and where its files are.

    Attributes:
        format: one of :data:`FORMATS`.
        path: a file or a glob (``exports/sacct-*.txt``), relative to the workspace; ``demo``: unused.
        service_label: Prometheus label that names the service (``prometheus-json``).
        value_units: ``rate_per_s`` (a Prometheus ``rate()``: hourly value = mean rate × 3600) or
            ``per_hour`` (values already per hour: hourly value = mean); default by format.
        sidecar: CSV/parquet of LLM fields keyed by ``job_id`` (extra columns become annotations).
        timezone: IANA zone of the export's naive times when not the cluster's (e.g. ``UTC`` for
            ``TZ=UTC sacct ...``, the command ``docs/operations.md`` recommends).
        command: instead of ``path``, a shell command whose standard output is the export (``sacct ...``,
            ``squeue --json``), run by every ingest (:mod:`pipelines.workspace.sources.pull`).
        timeout_s: seconds a ``command`` (default 120) or one Prometheus request (default 30) may take.
        url, query, step, lookback_h: ``prometheus-http`` only — the server (``http://host:9090``), the PromQL
            range query, its resolution (seconds or ``"10m"``) and the window pulled (hours before now, 360).
        product_label, tolerated_taints: ``kubernetes-nodes-json`` only — the node label naming the GPU
            product (``nvidia.com/gpu.product``) and the taint keys that do not make a node down
            (:mod:`pipelines.workspace.sources.nodes`).
    """

    format: Format
    path: str = ""
    service_label: str = "service"
    value_units: Literal["rate_per_s", "per_hour"] | None = None
    sidecar: str | None = None
    timezone: str | None = None
    command: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    url: str | None = None
    query: str | None = None
    step: int | str = 600
    lookback_h: float = Field(default=360.0, gt=0)
    product_label: str = "nvidia.com/gpu.product"
    tolerated_taints: list[str] = Field(default_factory=lambda: ["nvidia.com/gpu", "amd.com/gpu"])

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str | None) -> str | None:
        return None if v is None else _check_zone(v)

    @model_validator(mode="after")
    def _path(self) -> SourceConfig:
        if self.format == "prometheus-http":
            if not self.url or not self.query:
                raise ValueError("format 'prometheus-http' needs url and query")
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"url {self.url!r}: expected http://HOST:PORT or https://...")
            from pipelines.workspace.sources.pull import parse_step_s

            parse_step_s(self.step)
            return self
        if self.command is not None:
            if not self.command.strip():
                raise ValueError("command is empty")
            if self.path:
                raise ValueError("give either path or command, not both")
            if self.format in ("demo", "parquet"):
                raise ValueError(f"format {self.format!r} cannot come from a command")
            return self
        if self.format != "demo" and not self.path:
            raise ValueError(f"format {self.format!r} needs a path (a file or a glob) or a command")
        return self

    @property
    def pulled(self) -> bool:
        """Whether ingest pulls this source (a ``command`` or ``prometheus-http``) instead of reading files."""
        return self.command is not None or self.format == "prometheus-http"

    @property
    def units(self) -> str:
        """The value units in force (``value_units`` or the format's default)."""
        return self.value_units or ("rate_per_s" if self.format in ("prometheus-json", "prometheus-http")
                                    else "per_hour")


class SourcesConfig(_Strict):
    """``[sources]``: history, queue and traffic; optionally ``nodes``, the cluster's own inventory export."""

    history: SourceConfig
    queue: SourceConfig
    traffic: SourceConfig
    nodes: SourceConfig | None = None

    @model_validator(mode="after")
    def _formats(self) -> SourcesConfig:
        for role, allowed in ROLE_FORMATS.items():
            if getattr(self, role) is None:
                continue
            fmt = getattr(self, role).format
            if fmt not in allowed:
                raise ValueError(f"{role}.format = {fmt!r} is not a {role} format (expected one of {', '.join(allowed)})")
        if (self.history.format == "demo") != (self.queue.format == "demo"):
            raise ValueError("history and queue are both 'demo' or neither")
        return self


class StoreConfig(_Strict):
    """``[store]``: where accumulated records live (relative to the workspace)."""

    path: str = "store"


class TrackingConfig(_Strict):
    """``[tracking]``: the MLflow store (``uri``; default the project's embedded store)."""

    uri: str | None = None


#: Workers of ``--dask local`` when no count is given.
LOCAL_WORKERS = 2


def parse_dask(value: str) -> tuple[str | None, int]:
    """``(address, local_workers)`` from a ``--dask`` value: ``("tcp://h:p", 0)`` or ``(None, N)`` for ``local[:N]``.

    Raises :class:`InputError` (one line naming ``--dask`` and what was expected) otherwise.
    """
    v = value.strip()
    if v == "local" or v.startswith("local:"):
        n = v.partition(":")[2]
        if n and (not n.isdigit() or int(n) < 1):
            raise InputError(f"--dask {value!r}: expected local:N with N >= 1 workers")
        return None, int(n) if n else LOCAL_WORKERS
    if v.startswith("tcp://") and v.rpartition(":")[2].isdigit():
        return v, 0
    raise InputError(f"--dask {value!r}: expected a scheduler address tcp://HOST:PORT, local or local:N")


class DaskConfig(_Strict):
    """``[dask]``: ``address`` of the Dask scheduler that ``gpuplan bench`` sends its simulations to (``tcp://HOST:PORT``, ``local`` or ``local:N``; default none: in-process)."""

    address: str | None = None

    @field_validator("address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                parse_dask(v)
            except InputError:
                raise ValueError(f"{v!r}: expected a scheduler address tcp://HOST:PORT, local or local:N "
                                 "(N >= 1 workers)") from None
        return v


class KindsConfig(_Strict):
    """``[kinds]``: the job kind of a record that does not say (qos first, then partition, then ``default``)."""

    qos: dict[str, str] = Field(default_factory=dict)
    partition: dict[str, str] = Field(default_factory=dict)
    default: str = "training"

    @model_validator(mode="after")
    def _kinds(self) -> KindsConfig:
        for where, table in (("qos", self.qos), ("partition", self.partition), ("default", {"": self.default})):
            for name, kind in table.items():
                if kind not in JOB_KINDS:
                    key = where if not name else f"{where}.{name}"
                    raise ValueError(f"{key} = {kind!r} is not a job kind ({', '.join(JOB_KINDS)})")
        return self


class PrioritiesConfig(_Strict):
    """``[priorities]``: the planner's priority weight by QoS name (``default`` otherwise; names match case-insensitively)."""

    qos: dict[str, float] = Field(default_factory=dict)
    default: float = Field(default=1.0, gt=0)


class PreemptionConfig(_Strict):
    """``[preemption]`` (issue 30, opt-in): which jobs the planner may stop, and what a stop costs.

    ``qos``: Slurm QoS names (Kueue: WorkloadPriorityClass / PriorityClass names, the record's ``qos``) whose
    jobs are preemptible; ``partitions``: Slurm partitions (Kueue: LocalQueue names, the record's
    ``partition``) likewise; both match case-insensitively. ``checkpoint_interval_min`` (minutes > 0; none =
    a job checkpoints never, a stop loses all its work since its start) and ``restart_min`` (minutes >= 0,
    default 0: work a requeued job repeats before it progresses) apply to every preemptible job that does not
    give its own (``gpuplan.checkpoint=`` / ``gpuplan.restart=`` in its comment or labels, CSV columns).
    A job's own ``gpuplan.preemptible=true|false`` wins over both lists. Default: empty lists, nothing
    preemptible (plans unchanged).
    """

    qos: list[str] = Field(default_factory=list)
    partitions: list[str] = Field(default_factory=list)
    checkpoint_interval_min: float | None = Field(default=None, gt=0)
    restart_min: float = Field(default=0.0, ge=0)


class ReplanConfig(_Strict):
    """``[replan]``: the re-plan deployment's freshness rule and the planner of ``gpuplan run`` and the replans.

    ``max_input_age_min``: the newest queue export and the traffic must be at most this old at the
    replan's scheduled time, else the replan fails with their age and the previous plan stays.
    ``planner``: ``milp`` (default, the full mode), ``fast`` (the fast mode: a verified heuristic plan in
    milliseconds, no solver; :mod:`optimizer.fast`), or a baseline ``fifo``, ``easy``, ``priority``
    (:data:`optimizer.planners.PLANNERS`); a flow run's ``planner`` parameter overrides it.
    """

    max_input_age_min: float = Field(default=90.0, gt=0)
    planner: Literal["milp", "fast", "fifo", "easy", "priority"] = "milp"


class RetrainConfig(_Strict):
    """``[retrain]``: the nightly retraining's holdout and promotion rule (``docs/operations.md``).

    ``holdout_days``: the last days of finished runs (by submit time) held out to compare the new
    version with the champion; ``min_holdout_runs``: fewer runs than this cannot show a version is no
    worse, so the champion stays.
    """

    holdout_days: float = Field(default=2.0, gt=0)
    min_holdout_runs: int = Field(default=10, ge=1)


class WorkspaceConfig(_Strict):
    """The whole ``gpuplan.toml``."""

    cluster: ClusterConfig
    services: list[ServiceSettings] = Field(default_factory=list)
    services_file: str | None = None
    sources: SourcesConfig
    store: StoreConfig = Field(default_factory=StoreConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    dask: DaskConfig = Field(default_factory=DaskConfig)
    kinds: KindsConfig = Field(default_factory=KindsConfig)
    priorities: PrioritiesConfig = Field(default_factory=PrioritiesConfig)
    replan: ReplanConfig = Field(default_factory=ReplanConfig)
    preemption: PreemptionConfig = Field(default_factory=PreemptionConfig)
    retrain: RetrainConfig = Field(default_factory=RetrainConfig)
    gpu_types: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _services(self) -> WorkspaceConfig:
        c = self.cluster
        if c.nodes is None and c.n_nodes is None and self.sources.nodes is None:
            raise ValueError("cluster: give nodes = {name = gpus, ...} or both n_nodes and gpus_per_node "
                             "(or the cluster's inventory in [sources.nodes])")
        if self.services and self.services_file:
            raise ValueError("give [[services]] or services_file, not both")
        names = [s.service for s in self.services]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"service {dup[0]!r} is listed twice")
        return self


