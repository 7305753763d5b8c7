"""The main job end to end on a workspace (default: the shipped demo, real ServeGen traffic and generated job histories) (DESIGN §7.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli_support import WORKSPACE_HELP, run_guarded, use_workspace

#: Default folder of the run folders (relative to the working directory).
DEFAULT_OUT = Path("runs")

#: stages shown as progress bars (names used by pipelines.flows)
STAGES = ("ingest traffic", "forecaster training", "forecaster quantization", "forecaster batch_inference",
          "real-time profiles", "queue + forecasts", "solve (milp)", "plan + risk report", "mlflow")
#: the stages of an operator's workspace (its exports ingested first; one scheduler-history forecaster)
WORKSPACE_STAGES = ("ingest sources", "real-time profiles", "queue + forecasts", "solve (milp)", "plan + risk report",
                    "mlflow")


def run(
    out_opt: Annotated[Path | None, typer.Option("--out", help="Folder that holds run folders and 'latest' "
                                             "(created if missing; its parent folder must exist; default: ./runs "
                                             "for the demo, <workspace>/runs for a workspace).")] = None,
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
) -> None:
    """Train or load forecasters, forecast, plan, verify, report; print the run folder."""

    def body() -> int:
        ws = use_workspace(workspace)
        import os
        import sys
        import time

        from pipelines.cli_support import check_out_parent
        from pipelines.config import load_settings
        from pipelines.errors import InputError

        stages = STAGES if ws.is_demo else WORKSPACE_STAGES
        out = out_opt if out_opt is not None else (DEFAULT_OUT if ws.is_demo else ws.root / "runs")
        check_out_parent(out)  # only the last level of --out is created (a typo must not build a tree)
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {out} is a file; give a folder for the run folders")
        out_dir = out.resolve()  # environment defaults: applied once for every command in pipelines.cli
        settings = load_settings(runs_dir=out_dir)
        from pipelines.tracking import store as tracking_store

        tracking_store.init_store(settings)  # an unusable MLflow store fails here in one line, before any output
        if not ws.is_demo:  # an operator's exports: checked here, outside Prefect, so bad input is one line
            from pipelines.stages.cluster import check_services_have_traffic
            from pipelines.workspace.ingest import ingest as run_ingest
            from pipelines.workspace.ingest import workspace_data

            report = run_ingest(ws)
            for role, r in report["sources"].items():
                for name in r.get("unreadable_files", []):
                    sys.stderr.write(f"warning: {role} export {name} could not be read; planning from the store "
                                     f"('gpuplan ingest --workspace {ws.root}' shows why)\n")
            data = workspace_data(ws)
            check_services_have_traffic(data.traffic, ws.services(), ws.source("traffic").service_label)
            if data.snapshot_at is not None:
                import pandas as pd

                age_h = (pd.Timestamp.now(tz="UTC") - pd.Timestamp(data.snapshot_at)).total_seconds() / 3600
                if age_h * 60 > ws.config.replan.max_input_age_min:
                    sys.stderr.write(f"note: the newest queue export ({data.snapshot_file}) was taken "
                                     f"{pd.Timestamp(data.snapshot_at):%Y-%m-%dT%H:%MZ}, {age_h:,.1f} h ago: this run "
                                     f"plans as of then (a replan would refuse it)\n")
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        t0 = time.monotonic()
        mode = "server " + os.environ["PREFECT_API_URL"] if os.environ.get("PREFECT_API_URL") else "ephemeral"
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                      console=console, transient=False) as prog:
            overall = prog.add_task("gpuplan run", total=len(stages) + 1)
            boot = prog.add_task(f"Prefect ({mode}) + imports", total=1)
            tasks: dict[str, int] = {}

            def hook(stage: str, event: str) -> None:
                if not prog.tasks[boot].finished:
                    prog.update(boot, completed=1)
                    prog.advance(overall)
                if event == "start":
                    tasks[stage] = prog.add_task(stage, total=1)
                elif stage in tasks:
                    prog.update(tasks[stage], completed=1,
                                description=stage if event == "done" else f"{stage} [red]failed")
                    prog.advance(overall)

            # imported here, not at the top: prefect, mlflow, the optimizer and the forecasters cost
            # ~2.5 s (measured on the 2-core machine against ~0.14 s for the whole CLI).
            from pipelines import flows

            flows.set_progress(hook)
            try:
                res = flows.run_all(out_dir=str(out_dir))
            finally:
                flows.set_progress(None)
            prog.update(overall, completed=len(stages) + 1)
        wall = time.monotonic() - t0
        from pipelines.catalog import RunCatalog  # imported with flows above

        run_dir = Path(res["run_dir"])
        files = RunCatalog(run_dir)
        lines = [
            f"workspace:     {res['workspace']} ({len(res['nodes'])} nodes, {res['n_gpus']} GPUs)",
            f"run folder:    {run_dir}",
            f"latest:        {res['latest']} -> {run_dir.name}" + ("" if res["latest_moved"] else
                                                                   " (NOT moved: a newer slot is published)"),
            f"plan status:   {res['status']}, best plan found by {res.get('source') or 'an unknown step'}"
            + (" (FALLBACK: the MILP gave no plan; the best baseline plan is published)" if res.get("fallback") else "")
            + " (verified)",
            f"risk report:   {files.path('risk_report_page')}",
            f"plan:          {files.path('plan_tables')}",
            f"forecasts:     {files.path('forecasts')}",
            f"MLflow:        {settings.tracking_uri} (run {res['mlflow_run_id']}); browse with",
            f"               {Path(sys.executable).parent / 'mlflow'} ui --host 127.0.0.1 --port 5000 "
            f"--backend-store-uri {settings.tracking_uri} --default-artifact-root {settings.artifact_root}",
            f"wall time:     {wall:.1f} s",
        ]
        sys.stdout.write("\n".join(lines) + "\n")
        return 0

    run_guarded(body)
