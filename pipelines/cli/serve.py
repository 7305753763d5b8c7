"""Serve the Prefect deployments (nightly retrain, 30-min replan, bench, what-if)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli.support import WORKSPACE_HELP, run_guarded, use_workspace


def serve(
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
) -> None:
    """Serve the Prefect deployments so they appear in the Prefect UI."""

    def body() -> int:
        use_workspace(workspace)
        # imported here, not at the top (the Prefect environment defaults are applied in pipelines.cli.app): prefect and the
        # flows cost ~2.5 s (measured on the 2-core machine against ~0.14 s for the whole CLI).
        from pipelines.config.settings import load_settings
        from pipelines.flows import deployments

        settings = load_settings()
        from pipelines.cli.support import check_writable_folder

        check_writable_folder(settings.runs_dir)  # the replans write there (case 015)
        from pipelines.tracking import store as tracking_store

        tracking_store.init_store(settings)  # an unusable MLflow store fails here in one line
        url = deployments.require_persistent_server()
        name = {base: deployments.deployment_name(base, settings) for base in deployments.DEPLOYMENT_FLOWS}
        typer.echo(f"serving {name['nightly-retrain']} ({settings.nightly_cron} {settings.nightly_timezone}), "
                   f"{name['replan']} (every {settings.replan_every_min} min, UTC slots), {name['benchmark']} and "
                   f"{name['whatif']} (on demand) against {url}", err=True)
        deployments.serve(settings)
        return 0

    run_guarded(body)
