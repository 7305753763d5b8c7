"""Prefect deployment names keyed by the workspace id (issue 32): two clusters served on one Prefect server.

A deployment is upserted by ``flow/name``: with one shared ``plan/replan`` the last ``gpuplan serve`` would overwrite
the other workspace's ``workspace`` parameter and schedules. Same-named folders get different names; every worker of
one workspace gets the same; the shipped demo keeps the plain names.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.config.settings import Settings
from pipelines.workspace.config import DEMO_WORKSPACE
from pipelines.workspace.load import read_or_create_workspace_id


def test_two_workspaces_with_one_folder_name_get_two_deployment_names_and_the_demo_keeps_its_own(tmp_path):
    from pipelines.flows.deployments import DEPLOYMENT_FLOWS, build_deployments, deployment_name

    a, b = tmp_path / "clusterA" / "gpuplan", tmp_path / "clusterB" / "gpuplan"
    for folder in (a, b):
        folder.mkdir(parents=True)
    ida, idb = read_or_create_workspace_id(a), read_or_create_workspace_id(b)
    sa, sb = Settings(workspace_dir=a), Settings(workspace_dir=b)
    assert deployment_name("replan", sa) == f"replan-gpuplan-{ida[:12]}"
    assert deployment_name("replan", sb) == f"replan-gpuplan-{idb[:12]}"
    assert deployment_name("replan", sa) != deployment_name("replan", sb)
    assert deployment_name("replan", Settings(workspace_dir=Path(str(a)))) == deployment_name("replan", sa)  # 2nd worker
    assert deployment_name("replan", Settings(workspace_dir=DEMO_WORKSPACE)) == "replan"
    deps = build_deployments(sa, with_schedules=False)
    assert [(d.flow_name, d.name) for d in deps] == [(flow, f"{base}-gpuplan-{ida[:12]}")
                                                     for base, flow in DEPLOYMENT_FLOWS.items()]
    assert [d.parameters.get("workspace") for d in deps[:2]] == [str(a), str(a)]


def test_the_folder_moved_keeps_the_deployment_name(tmp_path):
    from pipelines.flows.deployments import deployment_name

    old = tmp_path / "old" / "gpuplan"
    old.mkdir(parents=True)
    before = deployment_name("nightly-retrain", Settings(workspace_dir=old))
    new = tmp_path / "new" / "gpuplan"
    new.parent.mkdir()
    old.rename(new)
    assert deployment_name("nightly-retrain", Settings(workspace_dir=new)) == before  # the id file moved with it
