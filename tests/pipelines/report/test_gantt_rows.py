"""The Gantt's node rows: a typed cluster's own nodes (names, types, sizes), not gpus_per_node slices (issue 27)."""

from __future__ import annotations

from optimizer.problem import Cluster, Node, PlanSettings, Problem
from pipelines.report.plots import node_rows


def test_a_typed_cluster_is_drawn_by_its_nodes_in_layout_order_with_the_padding_last():
    # layout: largest node first (h1 GPUs 0-3), then a1 4-5, a2 6-7, t1 8; 16-GPU index space, 9-15 padding
    nodes = (Node("a1", 2, "a100", "r1"), Node("h1", 4, "h100"), Node("a2", 2, "a100", "r2"), Node("t1", 1, "t4"))
    p = Problem(Cluster(0, 8, 30, 4, nodes=nodes), PlanSettings(), (), ())
    rows, labels = node_rows(p, ["ignored", "names"])
    assert rows == [(0, 4, "h1 (h100)"), (4, 6, "a1 (a100)"), (6, 8, "a2 (a100)"), (8, 9, "t1 (t4)"),
                    (9, 16, "padding")]
    assert labels == ["h1 (h100)\nGPUs 0-3", "a1 (a100)\nGPUs 4-5", "a2 (a100)\nGPUs 6-7", "t1 (t4) GPU 8",
                      "padding\nGPUs 9-15"]


def test_a_homogeneous_cluster_keeps_its_node_names_when_there_is_one_per_node():
    p = Problem(Cluster(16, 8, 30, 4), PlanSettings(), (), ())
    assert node_rows(p, ["x", "y"]) == ([(0, 8, "x"), (8, 16, "y")], ["x\nGPUs 0-7", "y\nGPUs 8-15"])
    assert node_rows(p, ["x"])[0] == [(0, 8, "node-00"), (8, 16, "node-01")]
