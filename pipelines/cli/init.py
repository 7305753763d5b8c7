"""Write a commented gpuplan.toml into a new workspace folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli.support import run_guarded


def init(
    folder: Annotated[Path, typer.Argument(help="Workspace folder (created if missing; its parent must exist).")],
    demo: Annotated[bool, typer.Option("--demo", help="Point the workspace at the shipped demo data.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing gpuplan.toml.")] = False,
) -> None:
    """Create a workspace: DIR/gpuplan.toml, commented; edit [cluster] and [sources], then run 'gpuplan ingest'."""

    def body() -> int:
        from pipelines.cli.support import check_out_parent
        from pipelines.io.atomic import atomic_write_text
        from pipelines.io.errors import InputError
        from pipelines.workspace.config import CONFIG_FILE
        from pipelines.workspace.load import init_text

        check_out_parent(folder, "DIR")
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{folder} is a file; give a folder for the workspace")
        path = folder / CONFIG_FILE
        if path.exists() and not force:
            raise InputError(f"{path} exists; edit it, or pass --force to overwrite it")
        folder.mkdir(exist_ok=True)
        atomic_write_text(path, init_text(demo=demo))
        first = "ready (the shipped demo data); next:" if demo else "next: edit [cluster] and [sources], then"
        typer.echo(f"wrote {path}\n{first}\n  gpuplan ingest --workspace {folder}\n  gpuplan run --workspace {folder}")
        return 0

    run_guarded(body)
