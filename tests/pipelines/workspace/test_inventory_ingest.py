"""``[cluster]`` typed by hand, ``[sources.nodes]`` ingested per type, the newest inventory as the next plan's cluster (issue 27)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pipelines.io.errors import InputError
from pipelines.workspace.config import NodeSpec
from pipelines.workspace.ingest import ingest
from pipelines.workspace.load import load_workspace
from pipelines.workspace.store import Store

INV = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "inventory"

SOURCES = """
[[services]]
service = "chat"
capacity_per_gpu_per_h = 1000
min_gpus = 1
max_gpus = 4
swap_cap_gpus = 1

[sources.history]
format = "csv"
path = "hist.csv"

[sources.queue]
format = "csv"
path = "queue.csv"

[sources.traffic]
format = "csv"
path = "traffic.csv"
"""


def _ws(root: Path, cluster: str, extra: str = ""):
    (root / "gpuplan.toml").write_text(cluster + SOURCES + extra)
    return load_workspace(root)


def _sources(root: Path, queue_types: tuple[str, str] = ("h100", "")) -> None:
    (root / "hist.csv").write_text("job_id,submitted_at,started_at,ended_at,gpus\n"
                                   "1,2025-03-01T10:00:00Z,2025-03-01T10:05:00Z,2025-03-01T11:05:00Z,2\n")
    (root / "queue.csv").write_text("job_id,submitted_at,state,gpus,gpu_types\n"
                                    f"9,2025-03-02T08:00:00Z,PENDING,4,{queue_types[0]}\n"
                                    f"10,2025-03-02T08:30:00Z,PENDING,2,{queue_types[1]}\n")
    rows = ["ts,value,service"] + [f"2025-03-02T{h:02d}:00:00Z,{100 + h},chat" for h in range(24)]
    (root / "traffic.csv").write_text("\n".join(rows) + "\n")


def test_cluster_typed_by_hand_mixed_sizes_and_the_old_form(tmp_path):
    ws = _ws(tmp_path, '[cluster]\nnodes = { gpu-001 = {gpus = 8, gpu_type = "h100"}, gpu-002 = {gpus = 4, '
                       'gpu_type = "a100", down = true}, gpu-003 = 4 }\ngpu_type = "a100"\n')
    c = ws.config.cluster
    assert c.typed and not c.homogeneous
    assert (c.node_names, c.n_gpus, c.node_gpus) == (["gpu-001", "gpu-002", "gpu-003"], 16, 8)
    assert c.node_specs == {"gpu-001": NodeSpec(gpus=8, gpu_type="h100"),
                            "gpu-002": NodeSpec(gpus=4, gpu_type="a100", down=True),
                            "gpu-003": NodeSpec(gpus=4, gpu_type="a100")}
    assert c.gpu_types == ["h100", "a100"]
    old = _ws(tmp_path, '[cluster]\nnodes = { a1 = 4, a2 = 4 }\ngpu_type = "H100"\n').config.cluster
    assert (old.typed, old.homogeneous, old.n_gpus, old.gpu_types) == (False, True, 8, ["H100"])
    with pytest.raises(InputError, match=r"nodes have different GPU counts \[4, 8\]; give each node its type"):
        _ws(tmp_path, "[cluster]\nnodes = { a1 = 4, a2 = 8 }\n")
    with pytest.raises(InputError, match=r"gpuplan.toml: cluster.nodes: nodes.a1.gpus: Input should be greater than or equal to 1$"):
        _ws(tmp_path, "[cluster]\nnodes = { a1 = {gpus = 0, gpu_type = \"h100\"} }\n")


SINFO_WS = '[cluster]\nnodes = { x = 8 }\n'
NODES_SRC = '\n[sources.nodes]\nformat = "slurm-sinfo-json"\npath = "exports/sinfo-*.json"\n'


def test_ingest_reports_nodes_per_type_and_the_newest_export_is_the_cluster(tmp_path):
    (tmp_path / "exports").mkdir()
    first = tmp_path / "exports" / "sinfo-1.json"
    shutil.copy(INV / "sinfo-22.05-drained.json", first)
    os.utime(first, (1_800_000_000, 1_800_000_000))
    _sources(tmp_path)
    ws = _ws(tmp_path, SINFO_WS, NODES_SRC)
    assert ws.cluster.node_names == ["x"]  # before any ingest: [cluster] as written
    rep = ingest(ws)
    nodes = rep["sources"]["nodes"]
    assert (nodes["file"], nodes["read"], nodes["gpu_nodes"], nodes["rejected"]) == ("sinfo-1.json", 6, 6, 0)
    assert nodes["by_type"] == {"a100_40gb": {"nodes": 2, "gpus": 8, "down_nodes": 0, "down_gpus": 0},
                                "h100_80gb": {"nodes": 4, "gpus": 32, "down_nodes": 1, "down_gpus": 8}}
    assert nodes["changed"]["down"] == ["h100-3"] and len(nodes["changed"]["added"]) == 6
    assert rep["sources"]["queue"]["eligible_jobs_by_type"] == {"any": 1, "h100_80gb": 1}
    c = load_workspace(tmp_path).cluster
    assert (c.n_gpus, c.typed, c.node_specs["h100-3"].down, c.node_specs["a100-0"].gpu_type) == (
        40, True, True, "a100_40gb")
    # the next export: h100-3 back up, a100-1 gone
    doc = json.loads(first.read_text())
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] != "a100-1"]
    for n in doc["nodes"]:
        if n["name"] == "h100-3":
            n["state_flags"] = []
    second = tmp_path / "exports" / "sinfo-2.json"
    second.write_text(json.dumps(doc))
    os.utime(second, (1_800_003_600, 1_800_003_600))
    rep = ingest(load_workspace(tmp_path))
    assert rep["sources"]["nodes"]["changed"] == {"added": [], "removed": ["a100-1"], "down": [], "up": ["h100-3"]}
    assert rep["sources"]["nodes"]["by_type"]["a100_40gb"] == {"nodes": 1, "gpus": 4, "down_nodes": 0, "down_gpus": 0}
    c = load_workspace(tmp_path).cluster
    assert (c.n_gpus, "a100-1" in c.node_names, c.node_specs["h100-3"].down) == (36, False, False)


def test_unknown_types_stop_the_ingest_in_one_line(tmp_path):
    (tmp_path / "exports").mkdir()
    shutil.copy(INV / "sinfo-22.05-drained.json", tmp_path / "exports" / "sinfo-1.json")
    _sources(tmp_path, ("h100", "G9"))
    ws = _ws(tmp_path, SINFO_WS, NODES_SRC)
    with pytest.raises(InputError) as err:
        ingest(ws)
    assert str(err.value) == ("job 10: GPU type 'G9' is not a known type (known: a100_40gb, h100_80gb); name it in "
                              "[gpu_types] of gpuplan.toml, e.g. \"G9\" = \"a100_40gb\"")
    assert not Store(ws.store_dir).exists()
    # a node type no table knows: named with its export; an alias makes it known
    table = "name,gpus,gpu_type\nn1,8,G2\nn2,4,T4\n"
    (tmp_path / "nodes.csv").write_text(table)
    _sources(tmp_path, ("g2", "T4"))
    csv_src = '\n[sources.nodes]\nformat = "csv"\npath = "nodes.csv"\n'
    with pytest.raises(InputError, match=r"^sources.nodes: nodes.csv: node n1: GPU type 'G2' is not a known type"):
        ingest(_ws(tmp_path, SINFO_WS, csv_src))
    rep = ingest(_ws(tmp_path, SINFO_WS, csv_src + '\n[gpu_types]\nG2 = "g2"\n'))
    assert rep["sources"]["nodes"]["by_type"] == {"g2": {"nodes": 1, "gpus": 8, "down_nodes": 0, "down_gpus": 0},
                                                  "t4_16gb": {"nodes": 1, "gpus": 4, "down_nodes": 0, "down_gpus": 0}}
    assert rep["sources"]["queue"]["eligible_jobs_by_type"] == {"g2": 1, "t4_16gb": 1}
    # a node of 6 GPUs in the export: refused at ingest naming the node and the file (it used to pass the ingest and
    # fail the run inside the plan's cluster check, naming gpuplan.toml)
    (tmp_path / "nodes.csv").write_text("name,gpus,gpu_type\nn1,8,G2\nn2,6,T4\nn3,3,T4\n")
    with pytest.raises(InputError) as err:
        ingest(_ws(tmp_path, SINFO_WS, csv_src + '\n[gpu_types]\nG2 = "g2"\n'))
    assert str(err.value) == ("sources.nodes: nodes.csv: node n2 has 6 GPUs (and 1 more): every node needs a "
                              "power-of-two number of GPUs (1, 2, 4, 8, ...); list it with a power-of-two count (the rest unused) or leave it out")


def test_the_workspace_plan_refuses_a_node_of_another_size_in_one_line(tmp_path):
    _ws(tmp_path, '[cluster]\nnodes = { a1 = 4, a2 = 4 }\n').check_plannable()  # untyped: planned as before
    _ws(tmp_path, '[cluster]\nnodes = { a1 = {gpus = 8, gpu_type = "h100"}, a2 = {gpus = 4, gpu_type = "a100", '
        'down = true} }\n').check_plannable()  # typed: the version-2 problem
    ws = _ws(tmp_path, '[cluster]\nnodes = { a1 = {gpus = 8, gpu_type = "h100"}, a2 = {gpus = 6, gpu_type = "a100", '
                       'down = true} }\n')
    with pytest.raises(InputError) as err:
        ws.check_plannable()
    assert str(err.value) == (f"{tmp_path / 'gpuplan.toml'}: cluster: 1 x 6-GPU a100, 1 x 8-GPU h100; down: a2 (14 GPUs): "
                              "every node needs a power-of-two number of GPUs (1, 2, 4, 8, ...) for the planner's "
                              "aligned blocks")


def test_gpuplan_ingest_prints_nodes_per_type_and_exits_2_on_an_unknown_type(tmp_path):
    from typer.testing import CliRunner

    from pipelines.cli.app import app

    (tmp_path / "exports").mkdir()
    shutil.copy(INV / "sinfo-22.05-drained.json", tmp_path / "exports" / "sinfo-1.json")
    _sources(tmp_path)
    _ws(tmp_path, SINFO_WS, NODES_SRC)
    res = CliRunner().invoke(app, ["ingest", "--workspace", str(tmp_path)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "nodes    sinfo-1.json: read 6 nodes, 6 with GPUs, rejected 0" in lines
    assert "         a100_40gb        2 nodes      8 GPUs" in lines
    assert "         h100_80gb        4 nodes     32 GPUs  (1 nodes / 8 GPUs down)" in lines
    _sources(tmp_path, ("h100", "G9"))
    res = CliRunner().invoke(app, ["ingest", "--workspace", str(tmp_path)])
    assert res.exit_code == 2
    assert "job 10: GPU type 'G9' is not a known type (known: a100_40gb, h100_80gb)" in res.output


def test_the_inventory_pulled_by_a_command_each_ingest(tmp_path):
    _sources(tmp_path)
    src = INV / "kubectl-nodes.json"
    ws = _ws(tmp_path, SINFO_WS, f'\n[sources.nodes]\nformat = "kubernetes-nodes-json"\ncommand = "cat {src}"\n')
    nodes = ingest(ws)["sources"]["nodes"]
    assert nodes["file"].startswith("nodes-") and nodes["file"].endswith(".json")
    assert nodes["by_type"] == {"a100_80gb": {"nodes": 2, "gpus": 16, "down_nodes": 1, "down_gpus": 8},
                                "h100_80gb": {"nodes": 1, "gpus": 8, "down_nodes": 1, "down_gpus": 8},
                                "t4_16gb": {"nodes": 1, "gpus": 4, "down_nodes": 0, "down_gpus": 0}}
    assert (tmp_path / "store" / "raw" / nodes["file"]).is_file()


def test_with_an_inventory_source_the_cluster_needs_no_nodes(tmp_path):
    (tmp_path / "nodes.csv").write_text("name,gpus,gpu_type\nn1,8,H100\nn2,4,T4\n")
    _sources(tmp_path)
    csv_src = '\n[sources.nodes]\nformat = "csv"\npath = "nodes.csv"\n'
    ws = _ws(tmp_path, '[cluster]\ntimezone = "UTC"\n', csv_src)
    # before any ingest the newest export is the cluster, read as it is now
    assert {n: (s.gpus, s.gpu_type) for n, s in ws.cluster.node_specs.items()} == {"n1": (8, "h100_80gb"),
                                                                                   "n2": (4, "t4_16gb")}
    ingest(ws)
    (tmp_path / "nodes.csv").write_text("name,gpus,gpu_type\nn1,8,H100\n")  # an export not yet ingested
    assert list(ws.cluster.node_specs) == ["n1", "n2"]  # the ingested inventory is the cluster
    # without [sources.nodes] a cluster without nodes is refused, naming both ways to give them
    with pytest.raises(InputError, match=r"cluster: give nodes = \{name = gpus, \.\.\.\} or both n_nodes and "
                                         r"gpus_per_node \(or the cluster's inventory in \[sources.nodes\]\)"):
        _ws(tmp_path, '[cluster]\ntimezone = "UTC"\n')
