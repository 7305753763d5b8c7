"""Node inventories and typed requests read from real-format exports (issue 27; fixtures: tests/fixtures/inventory/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipelines.io.errors import InputError
from pipelines.workspace.gpu_types import GpuTypeTable, eligible_types
from pipelines.workspace.sources.kueue import parse_kueue_workloads
from pipelines.workspace.sources.nodes import (
    gres_gpus,
    parse_kubernetes_nodes_json,
    parse_node_table,
    parse_slurm_nodes_json,
)
from pipelines.workspace.sources.slurm import parse_sacct
from pipelines.workspace.sources.slurm_squeue import parse_squeue_json

ROOT = Path(__file__).resolve().parents[4]
INV = ROOT / "tests" / "fixtures" / "inventory"
LAB = ROOT / "tests" / "fixtures" / "slurm-lab"
OPENB_NODES = Path("/work/shared/data/alibaba-openb-gpu-2023/openb_node_list_gpu_node.csv")


def _by_name(frame: pd.DataFrame) -> dict[str, tuple]:
    return {r.name: (r.gpus, r.gpu_type, r.down) for r in frame.itertuples(index=False)}


def test_sinfo_22_05_two_types_and_a_drained_node():
    got = parse_slurm_nodes_json((INV / "sinfo-22.05-drained.json").read_text())
    assert (got.read, got.errors, got.without_gpus) == (6, [], 0)
    assert _by_name(got.frame) == {
        "a100-0": (4, "a100", False), "a100-1": (4, "a100", False), "h100-0": (8, "h100", False),
        "h100-1": (8, "h100", False), "h100-2": (8, "h100", False), "h100-3": (8, "h100", True)}
    row = got.frame.set_index("name").loc["h100-3"]
    assert (row["state"], row["partitions"]) == ("IDLE+DRAIN", "h100")


def test_scontrol_nodes_24_11_list_states_and_two_type_node_refused():
    got = parse_slurm_nodes_json((INV / "scontrol-nodes-24.11.json").read_text())
    assert got.read == 3
    assert _by_name(got.frame) == {"host2": (8, "h100", True), "host3": (4, "a100", False)}
    assert got.frame.set_index("name").loc["host2", "features"] == "h100,ib"
    assert got.exported_at == pd.Timestamp(1722010273, unit="s", tz="UTC")
    assert len(got.errors) == 1 and got.errors[0].startswith("nodes[0] (host1): gres ")
    assert "names 2 GPU types (fake1, fake2)" in got.errors[0]


def test_sinfo_24_11_items_merge_partitions_and_skip_cpu_nodes():
    got = parse_slurm_nodes_json((INV / "sinfo-24.11.json").read_text())
    assert (got.errors, got.without_gpus) == ([], 1)
    assert _by_name(got.frame) == {"demu4xcpu001": (4, "l40s", True), "demu4xgpu001": (8, "h100", False),
                                   "demu4xgpu002": (8, "h100", False)}
    assert got.frame.set_index("name").loc["demu4xgpu001", "partitions"] == "gpu,cpu"


@pytest.mark.parametrize("gres, expected", [
    ("gpu:a100:8", (8, "a100")), ("gpu:8", (8, None)), ("gpu:a100:4(S:0-1)", (4, "a100")),
    ("gpu:a100:4(S:0),gpu:a100:4(S:1)", (8, "a100")), ("tmpsize:7T,gpu:l40s:4(S:0-1)", (4, "l40s")),
    ("(null)", (0, None)), ("gpu:a100_3g.20gb:7", (7, "a100_3g.20gb")),
])
def test_gres_strings(gres, expected):
    assert gres_gpus(gres) == expected


def test_kubectl_nodes_product_label_cordon_taint_notready():
    got = parse_kubernetes_nodes_json((INV / "kubectl-nodes.json").read_text())
    assert (got.read, got.errors, got.without_gpus) == (5, [], 1)
    assert _by_name(got.frame) == {
        "gpu-a100-1": (8, "NVIDIA-A100-SXM4-80GB", False), "gpu-a100-2": (8, "NVIDIA-A100-SXM4-80GB", True),
        "gpu-t4-1": (4, "Tesla-T4", False), "gpu-h100-1": (8, "NVIDIA-H100-80GB-HBM3", True)}
    table = GpuTypeTable()
    assert [table.resolve(t) for t in got.frame["gpu_type"]] == ["a100_80gb", "a100_80gb", "t4_16gb", "h100_80gb"]


def test_openb_node_list_as_is_with_aliases():
    if not OPENB_NODES.is_file():
        pytest.skip("openb node list not present")
    got = parse_node_table(pd.read_csv(OPENB_NODES))
    assert (got.read, got.errors, len(got.frame), int(got.frame["gpus"].sum())) == (1213, [], 1213, 6212)
    counts = got.frame.groupby("gpu_type")["name"].count().to_dict()
    assert counts == {"A10": 2, "G2": 549, "G3": 39, "P100": 134, "T4": 404, "V100M16": 55, "V100M32": 30}
    table = GpuTypeTable({"G2": "g2", "G3": "g3"})
    assert sorted({table.resolve(t) for t in got.frame["gpu_type"]}) == [
        "a10_24gb", "g2", "g3", "p100_16gb", "t4_16gb", "v100_16gb", "v100_32gb"]
    with pytest.raises(InputError, match=r"node openb-node-\d+: GPU type 'G\d' is not a known type"):
        for name, t in zip(got.frame["name"], got.frame["gpu_type"]):
            GpuTypeTable().require(t, f"node {name}", ["t4_16gb"])


def test_sacct_typed_untyped_and_mig_tres():
    lab = parse_sacct((LAB / "sacct-utc.txt").read_text(), timezone="UTC").frame.set_index("job_id")
    ann = lab["annotations"].map(json.loads)
    # job 1: --gres=gpu:h100:4 (typed request); job 2: --gres=gpu:2 (untyped; ran on a100)
    assert (lab.loc["1", "gpus"], lab.loc["1", "gpu_type"], ann["1"].get("gpu_types")) == (4, "h100", "h100")
    assert (lab.loc["2", "gpus"], lab.loc["2", "gpu_type"], ann["2"].get("gpu_types")) == (2, "a100", None)
    mig = parse_sacct((INV / "sacct-mig-constraint.txt").read_text(), timezone="UTC")
    assert mig.errors == []
    frame = mig.frame.set_index("job_id")
    ann = frame["annotations"].map(json.loads)
    assert (frame.loc["21", "gpus"], frame.loc["21", "gpu_type"], ann["21"]["gpu_types"]) == (1, "a100_3g.20gb",
                                                                                              "a100_3g.20gb")
    assert (frame.loc["22", "gpus"], frame.loc["22", "gpu_type"], ann["22"]) == (4, None, {"constraint": "a100|h100"})
    table = GpuTypeTable()
    assert eligible_types(frame.reset_index(), table, ["a100_40gb", "h100_80gb"]) == [
        ("a100_40gb",), ("a100_40gb", "h100_80gb")]


def test_squeue_json_gres_gpu_h100_4():
    got = parse_squeue_json((LAB / "squeue.json").read_text())
    q = got.frame.set_index("job_id")
    ann = q["annotations"].map(json.loads)
    # job 18: pending, tres_per_node 'gres:gpu:h100:4'; job 19: 'gres:gpu:2' (any type)
    assert (q.loc["18", "state"], q.loc["18", "gpus"], ann["18"]["gpu_types"]) == ("pending", 4, "h100")
    assert (q.loc["19", "gpus"], ann["19"].get("gpu_types")) == (2, None)
    known = ["a100_40gb", "h100_80gb"]
    types = dict(zip(q.index, eligible_types(q.reset_index(), GpuTypeTable(), known)))
    assert (types["18"], types["19"], types["14"]) == (("h100_80gb",), None, ("a100_40gb",))


def test_squeue_features_are_the_constraint():
    doc = json.loads((LAB / "squeue.json").read_text())
    job = next(j for j in doc["jobs"] if j["job_id"] == 19)
    job["features"] = "a100|h100"
    q = parse_squeue_json(json.dumps({**doc, "jobs": [job]})).frame
    assert json.loads(q["annotations"].iloc[0]) == {"constraint": "a100|h100"}
    assert eligible_types(q, GpuTypeTable(), []) == [("a100_40gb", "h100_80gb")]


def test_kueue_gpu_product_node_selector_affinity_and_flavor():
    got = parse_kueue_workloads((INV / "kueue-selector.json").read_text())
    assert got.errors == []
    w = got.frame.set_index("job_id")
    names = [j for j in w.index]
    sel, aff, flv = (next(n for n in names if n.endswith(s)) for s in ("job-a100-sel", "job-aff", "job-admitted-flavor"))
    ann = w["annotations"].map(json.loads)
    assert (w.loc[sel, "gpus"], ann[sel]["gpu_types"]) == (4, "NVIDIA-A100-SXM4-80GB")
    assert (w.loc[aff, "gpus"], ann[aff]["gpu_types"]) == (1, "Tesla-T4|NVIDIA-A100-SXM4-80GB")
    assert (w.loc[flv, "gpu_type"], ann[flv].get("gpu_types")) == ("g2", None)
    types = eligible_types(w.reset_index(), GpuTypeTable({"g2": "g2"}), ["a100_80gb", "t4_16gb"])
    assert types == [("a100_80gb",), ("t4_16gb", "a100_80gb"), None]


def test_unknown_job_type_is_one_line_naming_job_type_and_known():
    frame = pd.DataFrame({"job_id": ["77"], "annotations": [json.dumps({"gpu_types": "G9"})]})
    with pytest.raises(InputError) as err:
        eligible_types(frame, GpuTypeTable({"G2": "g2"}), ["t4_16gb", "g2"])
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("job 77: GPU type 'G9' is not a known type (known: g2, t4_16gb)")


def test_alias_table_and_mig_profiles():
    table = GpuTypeTable({"NVIDIA-A100-SXM4-80GB": "a100_80gb", "G2": "g2"})
    assert table.resolve("nvidia-a100-sxm4-80gb") == "a100_80gb"
    assert table.resolve("g2") == "g2"
    assert table.resolve("a100_3g.20gb") == "a100_40gb"
    assert table.resolve("h100-1g.10gb") == "h100_80gb"
    assert table.resolve("tesla") is None
    assert table.constraint_types("ib&skylake") is None
    assert table.constraint_types("[a100*2|h100]") == ["a100_40gb", "h100_80gb"]
