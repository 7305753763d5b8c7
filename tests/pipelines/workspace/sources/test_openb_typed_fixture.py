"""The typed example workspace's exports are what scripts/make_openb_workspace.py derives, byte for byte (issue 27).

Two re-derivations with ``--check`` (derive into a temporary folder, compare every file with the committed
one): from the committed snapshots alone (``nodes.csv``, ``pods.csv``, ``pods.json``; always runs) and
from the public traces in the shared folder (skipped when absent). The counts are the script's, pinned
from its run on the shared data (data/fixtures/README.md, "The typed example workspace").
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
WS = ROOT / "data" / "fixtures" / "workspaces" / "openb-typed"
SHARED = Path(os.environ.get("GPUPLAN_SHARED_DATA", ROOT.parent / "shared" / "data"))
SHARED_INPUTS = (SHARED / "alibaba-openb-gpu-2023" / "openb_node_list_gpu_node.csv",
                 SHARED / "alibaba-openb-gpu-2023" / "openb_pod_list_gpuspec20.csv")


def _script():
    spec = importlib.util.spec_from_file_location("make_openb_workspace", ROOT / "scripts" / "make_openb_workspace.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def _check(shared: Path, capsys) -> dict:
    assert _script().main(["--shared", str(shared), "--check"]) == 0, capsys.readouterr().out
    return json.loads(capsys.readouterr().out)


def _pinned(summary: dict) -> None:
    assert (summary["first_day"], summary["T_trace_s"], summary["T_utc"]) == (121, 10_666_200, "2025-03-16T16:00:00Z")
    assert summary["nodes"] == ["openb-node-0247:V100M32:4", "openb-node-0036:T4:2", "openb-node-0026:G2:8",
                                "openb-node-0000:P100:2"]
    assert (summary["pods_in_window"], summary["jobs"], summary["typed_jobs"]) == (416, 412, 79)
    assert summary["left_out"] == {"type_not_in_nodes": 3, "too_large": 1}
    assert (summary["submitted_by_T"], summary["ended_by_T"], len(summary["running_at_T"])) == (324, 313, 9)
    # the two jobs waiting at T are both type-constrained: one T4-only, one V100M16|V100M32
    assert summary["pending_at_T"] == ["900321:openb-pod-1778:T4:1", "900322:openb-pod-1779:V100M16|V100M32:1"]
    assert (summary["replay_jobs_that_waited"], summary["replay_typed_jobs_that_waited"]) == (15, 15)


def test_rederivation_from_committed_snapshots_is_byte_identical(tmp_path, capsys):
    _pinned(_check(tmp_path / "no-shared-data", capsys))


@pytest.mark.skipif(not all(p.is_file() for p in SHARED_INPUTS), reason="shared openb traces absent")
def test_rederivation_from_shared_traces_is_byte_identical(capsys):
    _pinned(_check(SHARED, capsys))


def test_check_mode_names_a_file_that_differs(tmp_path, capsys):
    out = tmp_path / "ws"
    out.mkdir()
    for name in ("nodes.csv", "pods.csv", "pods.json", "sacct.txt", "squeue.json"):
        (out / name).write_bytes((WS / name).read_bytes())
    (out / "sacct.txt").write_text((WS / "sacct.txt").read_text().replace("900322|", "900999|"))
    assert _script().main(["--shared", str(tmp_path / "none"), "--out", str(out), "--check"]) == 1
    assert capsys.readouterr().out.strip() == f"{out / 'sacct.txt'}: differs from a re-derivation (run without --check to rewrite)"


def test_exports_carry_the_type_constraints_as_slurm_prints_them():
    from pipelines.workspace.sources.slurm import parse_sacct
    from pipelines.workspace.sources.slurm_squeue import parse_squeue_json

    lines = (WS / "sacct.txt").read_text().splitlines()
    assert lines[0].endswith("|Comment|Constraints")
    t4 = next(ln for ln in lines if ln.startswith("900321|"))
    v100 = next(ln for ln in lines if ln.startswith("900322|"))
    assert t4.endswith("|PENDING|billing=4,cpu=4,gres/gpu:t4=1,gres/gpu=1,mem=5600M,node=1||None assigned||")
    assert v100.endswith("|None assigned||V100M16|V100M32")  # several types: the --constraint, unescaped
    hist = parse_sacct((WS / "sacct.txt").read_text(), timezone="Asia/Shanghai").frame.set_index("job_id")
    ann = {j: json.loads(hist.at[j, "annotations"]) for j in ("900321", "900322")}
    assert ann == {"900321": {"gpu_types": "t4"}, "900322": {"constraint": "V100M16|V100M32"}}
    queue = parse_squeue_json((WS / "squeue.json").read_text()).frame.set_index("job_id")
    assert {j: json.loads(queue.at[j, "annotations"]) for j in ("900321", "900322")} == ann
    assert sorted(queue.index[queue["state"] == "pending"]) == ["900321", "900322"]
