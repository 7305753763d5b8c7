"""``gpuplan run --workspace`` on a typed workspace: the openb Slurm fixture with its real node list (issue 27).

The fixture's eight nodes are G3, V100M32 and G2 nodes of the openb trace (`openb_node_list_gpu_node.csv`,
read as is through ``[sources.nodes]``); four pending jobs are added to its ``squeue --json`` with typed
requests (``gres/gpu:v100m32:4``, ``gres/gpu:g3:8``, ``gres/gpu:g2:2``) and one untyped. Every typed job
must be planned only on nodes of its type, read from ``plan.parquet`` against the node list.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[3]


OPENB_NODES = Path("/work/shared/data/alibaba-openb-gpu-2023/openb_node_list_gpu_node.csv")
TYPED = {"700901": ("v100m32", 4, "V100M32"), "700902": ("g3", 8, "G3"), "700903": ("g2", 2, "G2")}


def _typed_workspace(folder: Path, copy_slurm_fixture) -> Path:
    ws = copy_slurm_fixture(folder)
    names = ["openb-node-0022", "openb-node-0023", "openb-node-0024", "openb-node-0026", "openb-node-0027",
             "openb-node-0028", "openb-node-0029", "openb-node-0030"]
    table = pd.read_csv(OPENB_NODES)
    table[table["sn"].isin(names)].to_csv(ws / "nodes.csv", index=False)  # the real rows, as is
    doc = json.loads((ROOT / "data" / "fixtures" / "openb" / "squeue.json").read_text())
    pending = next(j for j in doc["jobs"] if "PENDING" in str(j["job_state"]))
    for job_id, (gres, gpus, _) in {**TYPED, "700904": (None, 8, None)}.items():
        job = copy.deepcopy(pending)
        job["job_id"] = int(job_id)
        job["name"] = f"typed-{job_id}"
        job["tres_per_node"] = f"gres/gpu:{gres}:{gpus}" if gres else f"gres/gpu:{gpus}"
        job["tres_req_str"] = f"cpu=4,node=1,billing=4,gres/gpu={gpus}" + (f",gres/gpu:{gres}={gpus}" if gres else "")
        doc["jobs"].append(job)
    (ws / "squeue.json").write_text(json.dumps(doc))
    text = (ws / "gpuplan.toml").read_text()
    text = text.replace(f'path = "{ROOT / "data" / "fixtures"}/openb/squeue.json"', 'path = "squeue.json"')
    text += '\n[sources.nodes]\nformat = "csv"\npath = "nodes.csv"\n\n[gpu_types]\nG2 = "g2"\nG3 = "g3"\n'
    (ws / "gpuplan.toml").write_text(text)
    return ws


@pytest.mark.skipif(not OPENB_NODES.is_file(), reason="openb node list not present")
def test_a_typed_workspace_plans_each_constrained_job_only_on_its_type(tmp_path, iso_env, copy_slurm_fixture):
    from typer.testing import CliRunner

    from pipelines.cli.app import app

    ws = _typed_workspace(tmp_path / "ws", copy_slurm_fixture)
    res = CliRunner().invoke(app, ["run", "--workspace", str(ws), "--out", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    run = tmp_path / "runs" / "latest"
    problem = json.loads((run / "problem.json").read_text())
    assert problem["version"] == 2
    assert {n["name"]: n["gpu_type"] for n in problem["cluster"]["nodes"]}["openb-node-0023"] == "v100_32gb"
    jobs = {j["job_id"]: j for j in problem["jobs"]}
    assert {k: jobs[k]["gpu_types"] for k in TYPED} == {"700901": ["v100_32gb"], "700902": ["g3"], "700903": ["g2"]}
    assert "gpu_types" not in jobs["700904"]
    plan = pd.read_parquet(run / "plan.parquet")
    rows = plan[(plan["row_type"] == "job") & plan["job_id"].isin(list(TYPED))].set_index("job_id")
    model = dict(zip(pd.read_csv(ws / "nodes.csv")["sn"], pd.read_csv(ws / "nodes.csv")["model"]))
    for job_id, (_, gpus, node_model) in TYPED.items():
        assert rows.loc[job_id, "start_step"] is not pd.NA, f"job {job_id} not started in the horizon"
        nodes = rows.loc[job_id, "node"].split(",")
        assert {model[n] for n in nodes} == {node_model}, (job_id, nodes)
        assert int(rows.loc[job_id, "gpus"]) == gpus
    grid = plan[(plan["row_type"] == "gpu_step") & plan["owner"].isin(list(TYPED))]
    assert set(zip(grid["owner"], grid["node"].map(model))) <= {(k, v[2]) for k, v in TYPED.items()}
    # the commands file names only nodes of the planned type (ReqNodeList of each typed job)
    lines = [ln for ln in (run / "commands.sh").read_text().splitlines() if ln.startswith("scontrol update JobId=")]
    for job_id, (_, _, node_model) in TYPED.items():
        line = next(ln for ln in lines if f"JobId={job_id} " in ln)
        listed = line.split("ReqNodeList=")[1].split()[0].split(",")
        assert {model[n] for n in listed} == {node_model}, line
