"""The main job end to end on a workspace (default: the shipped demo, real ServeGen traffic and generated job histories) (DESIGN §7.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from pipelines.cli.support import WORKSPACE_HELP, run_guarded

#: Default folder of the run folders (relative to the working directory).
DEFAULT_OUT = Path("runs")

def run(
    out_opt: Annotated[Path | None, typer.Option("--out", help="Folder that holds run folders and 'latest' "
                                             "(created if missing; its parent folder must exist; default: ./runs "
                                             "for the shipped demo data/demo, <workspace>/runs for any other workspace).")] = None,
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
) -> None:
    """Train or load forecasters, forecast, plan, verify, report; print the run folder."""

    def body() -> int:
        import time

        t0 = time.monotonic()  # the printed wall time counts the start-up (Prefect, MLflow, ingest) too
        from pipelines.cli.support import check_out_parent, check_writable_folder, remove_if_empty
        from pipelines.config.settings import job_side, open_workspace, shipped_workspace
        from pipelines.flows.progress import PLAN_STAGES
        from pipelines.io.errors import InputError

        ws = open_workspace(workspace)  # gpuplan.toml parsed once per process (the flow run reuses it)
        ws.check_source_files()  # a source path matching no file: one line now, before ~26 s of start-up
        stages = PLAN_STAGES[job_side(ws)]
        out = out_opt if out_opt is not None else (DEFAULT_OUT if shipped_workspace(ws) else ws.root / "runs")
        check_out_parent(out)  # only the last level of --out is created (a typo must not build a tree)
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {out} is a file; give a folder for the run folders")
        created = not out.exists()
        check_writable_folder(out)  # a read-only runs folder: refused now, not after the whole job (case 015)
        try:
            return run_into(ws, stages, out.resolve(), t0)
        except BaseException:
            if created:  # a run that failed before writing anything leaves no empty runs folder behind
                remove_if_empty(out)
            raise

    def run_into(ws: Any, stages: tuple[str, ...], out_dir: Path, t0: float) -> int:
        import sys
        import time

        from pipelines.cli.support import check_prefect_api_url
        from pipelines.config.settings import load_settings
        from pipelines.flows import early_server
        from pipelines.flows.preflight import ingest_and_check

        check_prefect_api_url()  # a PREFECT_API_URL nobody answers: one line in ~3 s, not 37 s of retries (018)
        # no server configured: the temporary Prefect server starts now, beside the MLflow check, the ingest
        # checks and the heavy imports below, not when the flow is called (issue 29; pipelines.flows.early_server)
        # it is stopped by its id at exit (atexit), after Prefect's log and event workers drained into it
        server = early_server.start_if_wanted()
        # environment defaults: applied once for every command in pipelines.cli.app
        settings = load_settings(ws, runs_dir=out_dir)
        from pipelines.tracking import store as tracking_store

        tracking_store.init_store(settings)  # an unusable MLflow store fails here in one line, before any output
        for line in ingest_and_check(ws):  # an operator's exports: checked outside Prefect, bad input is one line
            sys.stderr.write(line + "\n")
        res = run_with_progress(stages, out_dir, ws.root, server)
        sys.stdout.write("\n".join(result_lines(res, settings, time.monotonic() - t0)) + "\n")
        return 0

    run_guarded(body)


def run_with_progress(stages: tuple[str, ...], out_dir: Path, workspace: Path, server: Any = None) -> dict[str, Any]:
    """Run the flow :func:`pipelines.flows.plan.run_all` with a progress bar per stage on standard error.

    ``server``: the :class:`pipelines.flows.early_server.EarlyServer` started by ``gpuplan run`` (waited for
    just before the flow is called), or None (a configured server, or Prefect's own temporary one).
    Returns the flow's result document.
    """
    import os

    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    mode = ("ephemeral" if server is not None or not os.environ.get("PREFECT_API_URL")
            else "server " + os.environ["PREFECT_API_URL"])
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as prog:
        overall = prog.add_task("gpuplan run", total=len(stages) + 1)
        boot = prog.add_task(f"Prefect ({mode}) + imports", total=1)
        tasks: dict[str, Any] = {}

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
        from pipelines.flows.plan import run_all
        from pipelines.flows.progress import set_progress

        if server is not None:
            server.wait_ready()  # started before the imports; usually healthy by now
        set_progress(hook)
        try:
            res = run_all(out_dir=str(out_dir), workspace=str(workspace), ingested=True)
        finally:
            set_progress(None)
        prog.update(overall, completed=len(stages) + 1)
    return res


def result_lines(res: dict[str, Any], settings: Any, wall_s: float) -> list[str]:
    """What ``gpuplan run`` prints: workspace, run folder, ``latest``, status, stops, files, MLflow, wall time (s).

    The files include the commands file when the run wrote one (a workspace run).
    """
    from pipelines.catalog import RunCatalog  # imported with the flows

    run_dir = Path(res["run_dir"])
    files = RunCatalog(run_dir)
    return [
        f"workspace:     {res['workspace']} ({len(res['nodes'])} nodes, {res['n_gpus']} GPUs)",
        f"run folder:    {run_dir}",
        f"latest:        {res['latest']} -> {run_dir.name}" + ("" if res["latest_moved"] else
                                                               " (NOT moved: a newer slot is published)"),
        f"plan status:   {res['status']}, "
        + (f"fast mode: best candidate {res.get('source')}" if res.get("planner") == "fast" else
           f"best plan found by {res.get('source') or 'an unknown step'}")
        + (" (FALLBACK: the MILP gave no plan; the best baseline plan is published)" if res.get("fallback") else "")
        + " (verified)",
        *stop_now_lines(files),
        *_file_lines(res, settings, files, wall_s),
    ]


def stop_now_lines(files: Any) -> list[str]:
    """One line per running job the published plan stops at step 0 (issue 30), from the risk report's table.

    ``files``: the run folder's :class:`pipelines.catalog.RunCatalog`. The wording is the risk report's
    Preemption section (:func:`pipelines.report.stops.stop_rows`): the job, its GPUs, why (the real-time
    shortfall at step 0) and the work it loses. Without a stop: ``stop now:      no job stopped (...)`` when
    preemption is on (a job of the run's ``problem.json`` is marked preemptible), else no line.
    """
    if not files.exists("risk_report_table"):
        return []
    t = files.load("risk_report_table")
    lines = ([] if "section" not in t.columns else
             [f"stop now:      {r.job_id} ({int(r.gpus)} GPU{'' if int(r.gpus) == 1 else 's'}): {r.reason}"
              for r in t[t["section"] == "stop_now"].itertuples()])
    if lines or not files.exists("problem"):
        return lines
    doc = files.load("problem")
    running = sum(bool(r.get("preemptible")) for r in doc.get("running", []))
    queued = sum(bool(j.get("preemptible")) for j in doc.get("jobs", []))
    if running:
        return [f"stop now:      no job stopped ({running} preemptible running; real-time demand fits at step 0)"]
    if queued:
        return [f"stop now:      no job stopped (no running job is preemptible; {queued} queued)"]
    return []


def _file_lines(res: dict[str, Any], settings: Any, files: Any, wall_s: float) -> list[str]:
    import sys

    return [
        f"risk report:   {files.path('risk_report_page')}",
        f"plan:          {files.path('plan_tables')}",
        f"forecasts:     {files.path('forecasts')}",
        *([f"commands:      {files.path('commands')} (review, then apply by hand)"] if files.exists("commands") else []),
        f"MLflow:        {settings.tracking_uri} (run {res['mlflow_run_id']}); browse with",
        f"               {Path(sys.executable).parent / 'mlflow'} ui --host 127.0.0.1 --port 5000 "
        f"--backend-store-uri {settings.tracking_uri} --default-artifact-root {settings.artifact_root}",
        f"wall time:     {wall_s:.1f} s (this command, from its start; the stage bars overlap)",
    ]
