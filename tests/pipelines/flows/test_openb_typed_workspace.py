"""``gpuplan run`` and ``gpuplan whatif`` on the shipped typed example workspace (issue 27).

``data/fixtures/workspaces/openb-typed``: four real openb nodes (V100M32 × 4 GPUs, T4 × 2, G2 × 8, P100 × 2,
read as is from ``nodes.csv`` through ``[sources.nodes]``), the gpuspec20 pods of trace days 121-123 as a
sacct history and a squeue export at T, where two type-constrained jobs wait: 900321 (``T4``) and 900322
(``V100M16|V100M32``). One run of the workspace (copied, its ServeGen path made absolute) is shared by the
tests; each checks it against the node list and the pods' own ``gpu_spec``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[3]
WS = ROOT / "data" / "fixtures" / "workspaces" / "openb-typed"
#: the nodes' GPU models as the node list names them -> the planned type names
PLANNED = {"V100M32": "v100_32gb", "T4": "t4_16gb", "G2": "g2", "P100": "p100_16gb"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run folder of ``gpuplan run --workspace <copy of openb-typed>`` (MLflow and models in the module's tmp)."""
    from typer.testing import CliRunner

    from pipelines.cli.app import app

    root = tmp_path_factory.mktemp("openb-typed")
    ws = root / "ws"
    shutil.copytree(WS, ws, ignore=shutil.ignore_patterns("store", "runs"))
    text = (ws / "gpuplan.toml").read_text()
    (ws / "gpuplan.toml").write_text(text.replace('"../../servegen/', f'"{ROOT / "data" / "fixtures" / "servegen"}/'))
    env = {"GPUPLAN_TRACKING_URI": f"sqlite:///{root / 'mlruns' / 'mlflow.db'}", "GPUPLAN_RUNS_DIR": str(root / "runs"),
           "GPUPLAN_MODELS_DIR": str(root / "models"), "DO_NOT_TRACK": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.setenv("GPUPLAN_WORKSPACE", str(ws))  # recorded: the CLI sets it for the process; undone after the module
        res = CliRunner().invoke(app, ["run", "--workspace", str(ws), "--out", str(root / "runs")])
        assert res.exit_code == 0, res.output
        yield {"folder": (root / "runs" / "latest").resolve(), "ws": ws, "env": env}


def _models() -> dict[str, str]:
    nodes = pd.read_csv(WS / "nodes.csv")
    return dict(zip(nodes["sn"], nodes["model"]))


def _specs() -> dict[str, str | None]:
    """Job id -> the pod's gpu_spec (None: any type), from the pods snapshot in job-id order (script rule)."""
    sacct = (WS / "sacct.txt").read_text().splitlines()
    header = sacct[0].split("|")
    pods = pd.read_csv(WS / "pods.csv", dtype=str, keep_default_na=False).set_index("name")
    out = {}
    for line in sacct[1:]:
        f = line.split("|")
        if "." in f[0]:
            continue
        spec = pods.at[f[header.index("JobName")], "gpu_spec"]
        out[f[0]] = spec or None
    return out


def test_every_type_constrained_job_is_planned_only_on_its_types(run):
    from optimizer.verify import verify
    from pipelines.stages.whatif import load_base

    folder, models, specs = run["folder"], _models(), _specs()
    base = load_base(folder)  # reads problem.json + plan.json and runs the verifier (refuses a failing plan)
    assert verify(base.plan, base.problem) == []
    assert {n.name: (n.gpus, n.gpu_type) for n in base.problem.cluster.nodes} == {
        "openb-node-0026": (8, "g2"), "openb-node-0247": (4, "v100_32gb"), "openb-node-0036": (2, "t4_16gb"),
        "openb-node-0000": (2, "p100_16gb")}
    assert {j.job_id: j.gpu_types for j in base.problem.jobs} == {"900321": ("t4_16gb",), "900322": ("v100_32gb",)}
    plan = pd.read_parquet(folder / "plan.parquet")
    rows = plan[plan["row_type"] == "job"].set_index("job_id")
    assert sorted(rows.index) == sorted(["900321", "900322"] + [r.job_id for r in base.problem.running])
    typed = [j for j in rows.index if specs[j] is not None]
    assert len(typed) == 5  # the two queued ones and three running (900167 and 900316 T4, 900293 P100)
    for job_id in typed:
        nodes = rows.loc[job_id, "node"].split(",")
        assert {models[n] for n in nodes} <= set(specs[job_id].split("|")), (job_id, nodes, specs[job_id])
        assert rows.loc[job_id, "gpu_type"] in {PLANNED[m] for m in specs[job_id].split("|") if m in PLANNED}
    grid = plan[(plan["row_type"] == "gpu_step") & plan["owner"].isin(typed)]
    assert len(grid) > 0
    assert all(models[n] in specs[o].split("|") for o, n in zip(grid["owner"], grid["node"]))
    # both queued jobs wait for their own type: each starts when the first running job on its node ends
    for job_id, node in (("900321", "openb-node-0036"), ("900322", "openb-node-0247")):
        assert rows.loc[job_id, "node"] == node
        on_node = rows[(rows["node"] == node) & rows["running"]]
        assert int(rows.loc[job_id, "start_step"]) == int(on_node["end_step"].min()) > 0, job_id


def test_the_commands_file_names_only_nodes_of_the_planned_type(run):
    models = _models()
    lines = [ln for ln in (run["folder"] / "commands.sh").read_text().splitlines()
             if ln.startswith("scontrol update JobId=")]
    listed = {ln.split()[2].removeprefix("JobId="): ln.split("ReqNodeList=")[1].split()[0].split(",") for ln in lines}
    assert listed == {"900321": ["openb-node-0036"], "900322": ["openb-node-0247"]}
    assert {j: {models[n] for n in ns} for j, ns in listed.items()} == {"900321": {"T4"}, "900322": {"V100M32"}}


def test_report_and_summary_show_per_type_utilisation_and_typed_wait_reasons(run):
    folder = run["folder"]
    plan = pd.read_parquet(folder / "plan.parquet")
    grid = plan[(plan["row_type"] == "gpu_step") & (plan["owner_type"] == "job")]
    step_h = 0.5
    batch_h = {t: float(n) * step_h for t, n in grid.groupby("gpu_type").size().items()}
    summary = json.loads((folder / "summary.json").read_text())
    # the cluster as it is: four nodes of three sizes and four types (gpus_per_node is only the largest node's)
    assert summary["cluster"]["node_gpus"] == {"openb-node-0247": 4, "openb-node-0036": 2, "openb-node-0026": 8,
                                               "openb-node-0000": 2}
    assert summary["cluster"]["node_gpu_types"] == {"openb-node-0247": "v100_32gb", "openb-node-0036": "t4_16gb",
                                                    "openb-node-0026": "g2", "openb-node-0000": "p100_16gb"}
    types = summary["headline"]["gpu_types"]
    assert [(t["gpu_type"], t["gpus"]) for t in types] == [("g2", 8), ("v100_32gb", 4), ("t4_16gb", 2),
                                                           ("p100_16gb", 2)]
    horizon_h = summary["headline"]["horizon_h"]
    for t in types:
        assert t["batch_gpu_h"] == batch_h.get(t["gpu_type"], 0.0), t
        assert t["batch_utilization_pct"] == round(100 * t["batch_gpu_h"] / (t["gpus"] * horizon_h), 2)
    report = (folder / "risk_report.md").read_text()
    row = next(ln for ln in report.splitlines() if ln.startswith("| Per GPU type (batch work) |"))
    for t in types:
        assert f"{t['gpu_type']} {t['gpus']} GPUs: " in row and f"({t['batch_gpu_h']:g} GPU-h)" in row
    t4 = next(ln for ln in report.splitlines() if ln.startswith("| 900321 |"))
    v100 = next(ln for ln in report.splitlines() if ln.startswith("| 900322 |"))
    assert "needs 1 × t4_16gb: all 1 t4_16gb node busy until" in t4 and "on openb-node-0036" in t4
    assert "needs 1 × v100_32gb: all 1 v100_32gb node busy until" in v100 and "on openb-node-0247" in v100
    # each type's one node is full of batch work: shrinking real-time (counted on the whole cluster) would not help
    assert "would fit" not in t4 and "would fit" not in v100


def test_whatif_added_v100m32_starts_the_v100_job_earlier_and_leaves_t4_jobs_alone(run):
    from typer.testing import CliRunner

    from pipelines.cli.app import app

    with pytest.MonkeyPatch.context() as mp:
        for k, v in run["env"].items():
            mp.setenv(k, v)
        res = CliRunner().invoke(app, ["whatif", str(run["folder"]), "--add-gpus", "V100M32:8", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["base"]["gpus_up"] == 16 and doc["whatif"]["gpus_up"] == 24
    assert doc["whatif"]["verified"] is True
    changed = {j["job_id"]: j for j in doc["jobs"]}
    specs = _specs()
    # exactly one job moves: the V100-constrained one, earlier, onto an added V100M32 node
    assert list(changed) == ["900322"] and specs["900322"] == "V100M16|V100M32"
    v = changed["900322"]
    assert v["change"] == "earlier" and v["start_step_whatif"] == 0 < v["start_step_base"]
    assert v["nodes_base"] == "openb-node-0247" and v["nodes_whatif"].startswith("added-")
    assert v["reason"].startswith("starts earlier: runs on added GPUs")
    # every T4-only job, queued or running, keeps its start and its node (none is listed as changed)
    problem = json.loads((run["folder"] / "problem.json").read_text())
    in_run = [j["job_id"] for j in problem["jobs"]] + [r["job_id"] for r in problem["running"]]
    t4_only = sorted(j for j in in_run if specs[j] == "T4")
    assert t4_only == ["900167", "900316", "900321"]
    assert not set(t4_only) & set(changed)
