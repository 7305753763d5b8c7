"""Run the daily cycle (exports -> ingest -> nightly retrain -> replan) for N days on the shipped real traces."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli.support import emit_json, run_guarded


def replay(
    workspace: Annotated[Path, typer.Option("--workspace", help="Workspace folder (created with a replay "
                                            "gpuplan.toml when it has none).")],
    days: Annotated[int, typer.Option("--days", help="Days to replay (the last N of the replayed openb week).")] = 5,
    scheduler: Annotated[str, typer.Option("--scheduler", help="Exports to write: slurm (sacct + squeue) or kueue.")]
    = "slurm",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document {\"days\": [...]}.")] = False,
) -> None:
    """Replay N days: each day's exports, ingest, gated nightly retraining and a replan (docs/operations.md)."""

    def body() -> int:
        from pipelines.cli.support import check_out_parent
        from pipelines.io.errors import InputError

        if scheduler not in ("slurm", "kueue"):
            raise InputError(f"--scheduler {scheduler!r}: expected slurm or kueue")
        check_out_parent(workspace, "--workspace")
        refuse_shipped_side(workspace)
        import os

        os.environ["GPUPLAN_WORKSPACE"] = str(workspace.expanduser().resolve())
        from pipelines.replay.week import replay as run_replay

        doc = run_replay(workspace, days, scheduler, notify=None if as_json else lambda m: typer.echo(m, err=True))
        if as_json:
            emit_json(doc)
            return 0
        for d in doc["days"]:
            typer.echo(f"day {d['day']}  {d['T'][:16]}Z  history {d['history_rows']:>5}  version {d['version']:>3}  "
                       f"champion {d['champion_version']:>3}  {'promoted' if d['promoted'] else 'kept    '}  "
                       f"plan {d['plan_status']} from {d['plan_start_ts']}  ({d['reason']})")
        return 0

    run_guarded(body)


def refuse_shipped_side(workspace: Path) -> None:
    """Refuse a replay into a workspace whose queue and history are the shipped files (``gpuplan init WS --demo``).

    A replay writes scheduler exports and retrains the scheduler-history forecaster from them; a workspace
    reading ``[sources.queue] format = "demo"`` would ignore them (every day ``null``).

    Raises:
        pipelines.io.errors.InputError: one line naming the folder and what to do.
    """
    from pipelines.config.settings import job_side
    from pipelines.io.errors import InputError
    from pipelines.workspace.config import CONFIG_FILE
    from pipelines.workspace.load import load_workspace

    if (workspace.expanduser() / CONFIG_FILE).is_file() and job_side(load_workspace(workspace)) == "shipped":
        raise InputError(f"--workspace {workspace}: its queue and history are the shipped demo's (format \"demo\"), "
                         f"which a replay cannot write; give a new folder (replay creates its gpuplan.toml)")
