"""Shared plumbing for CLI commands: JSON on stdout, one-line errors, exit codes (DESIGN §7.1)."""

from __future__ import annotations

import errno
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import typer
from typer._click import exceptions as click_exc  # typer 0.29 vendors click: its own exception classes
from typer.core import TyperGroup

from pipelines.io.errors import input_error_types

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141


def emit_json(doc: Any) -> None:
    """Print one JSON document on standard output and nothing else there."""
    sys.stdout.write(json.dumps(doc, default=_json_default, allow_nan=False) + "\n")
    sys.stdout.flush()


def _json_default(obj: Any) -> Any:
    import math

    try:
        import numpy as np

        if isinstance(obj, np.integer):
            return int(obj)
        if isinstance(obj, np.floating):
            v = float(obj)
            return None if math.isnan(v) else v
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def run_guarded(fn: Callable[[], int | None]) -> None:
    """Run a command body, mapping failures to exit codes.

    Bad input (any class from :func:`pipelines.io.errors.input_error_types`) prints
    ``error: <message>`` on one line to standard error (and the error's ``hint``, when it has one, on a second
    line: what the operator can do) and exits 2; any other exception
    prints ``internal error: <Type>: <message>`` and exits 1, except an OSError of a full disk, a quota, a
    read-only file system or a refused permission (:func:`environment_error_line`: one line naming the path,
    exit 2); a closed standard output (a pipe
    into ``head``) stops quietly with exit 141. Set ``GPUPLAN_DEBUG=1`` to
    also print the traceback.
    """
    bad_input = input_error_types()
    try:
        code = fn()
    except typer.Exit:
        raise
    except bad_input as exc:
        _debug_trace()
        msg = str(exc) if not isinstance(exc, KeyError) else str(exc.args[0])
        typer.echo(f"error: {_one_line(msg)}", err=True)
        if getattr(exc, "hint", None):  # what the operator can do about it, when the raiser knows (one line)
            typer.echo(_one_line(str(exc.hint)), err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
    except BrokenPipeError:
        # the reader of stdout left (``gpuplan plan ... | head``): stop quietly, as a Unix tool
        # killed by SIGPIPE does (exit 128 + 13); stdout goes to /dev/null so the interpreter's
        # final flush does not raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except OSError as exc:
        line = environment_error_line(exc)
        _debug_trace()
        if line is not None:  # a full disk, a read-only mount: the machine's state, named with its path
            typer.echo(f"error: {_one_line(line)}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        typer.echo(f"internal error: {type(exc).__name__}: {_one_line(str(exc))}", err=True)
        raise typer.Exit(EXIT_INTERNAL) from None
    except Exception as exc:  # noqa: BLE001 - the CLI boundary
        _debug_trace()
        typer.echo(f"internal error: {type(exc).__name__}: {_one_line(str(exc))}", err=True)
        raise typer.Exit(EXIT_INTERNAL) from None
    raise typer.Exit(code or EXIT_OK)


class OneLineErrorGroup(TyperGroup):
    """The ``gpuplan`` command group: usage errors are one line, exit 2 (DESIGN §7.1).

    Click's default (and typer's rich box) prints a usage block, a hint and the error over
    five or more lines. Here a usage error (typer's vendored ``click.UsageError``: a missing or
    unknown option, a bad value for a typed option) prints ``error: <message> (see '<command> --help')`` on one
    line to standard error and exits 2, for every sub-command. Running ``gpuplan`` with no
    arguments still prints the help (exit 2, as click does).
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: D102
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_exc.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click_exc.ClickException as exc:
            sys.exit(usage_error_exit(exc))
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(EXIT_INTERNAL)
        sys.exit(rv if isinstance(rv, int) else EXIT_OK)


def usage_error_exit(exc: click_exc.ClickException) -> int:
    """Print a click error as ``error: <message>`` on one line to standard error; return its exit code.

    Usage errors name the command's help (``(see 'gpuplan plan --help')``) and return 2.
    """
    msg = _one_line(exc.format_message())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click_exc.UsageError) and ctx is not None:
        msg += f" (see '{ctx.command_path} --help')"
    typer.echo(f"error: {msg}", err=True)
    return exc.exit_code


def check_out_parent(path: os.PathLike[str] | str, option: str = "--out") -> None:
    """Refuse an output path whose parent folder is missing, before any work is done.

    Raises :class:`pipelines.io.errors.InputError` (exit 2, one line) naming ``option`` when the
    parent of ``path`` does not exist or is not a folder. Only the last level of ``path`` may
    be created by the command.
    """
    from pathlib import Path

    from pipelines.io.errors import InputError

    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise InputError(f"{option} {path}: parent folder {parent} {what}; create it first")


def check_writable_folder(path: os.PathLike[str] | str, what: str = "runs folder") -> None:
    """Refuse a folder the command will write into but cannot, before any work is done (case 015).

    Creates ``path`` if missing (its parent must exist: :func:`check_out_parent`), then creates and removes a
    probe file in it: a read-only mount, a folder without write permission or a full disk fail here (as root,
    permission bits do not stop writes, a read-only mount does).

    Raises:
        pipelines.io.errors.InputError: one line naming ``what`` and the folder, with the system's reason.
    """
    import tempfile
    from pathlib import Path

    from pipelines.io.errors import InputError

    folder = Path(path).expanduser()
    try:
        folder.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpuplan-write-probe-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"{what} {folder.resolve()} is not writable ({reason}): make it writable, or give "
                         f"another folder (--out)") from None


def remove_if_empty(folder: os.PathLike[str] | str) -> None:
    """Remove ``folder`` when it exists and holds nothing (a command that created it, then failed); never raises."""
    from pathlib import Path

    path = Path(folder)
    try:
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    except OSError:
        pass


def check_prefect_api_url(timeout_s: float = 3.0) -> str | None:
    """Refuse an unreachable ``PREFECT_API_URL`` in one line within ``timeout_s`` seconds (case 018); None when unset.

    Asks the server's ``/health`` (HTTP 200 expected) before any work; without the check Prefect retries for
    about 37 s and the command ended with "internal error: RuntimeError: Failed to reach API".

    Raises:
        pipelines.io.errors.InputError: naming ``PREFECT_API_URL``, its value and why no server answers.
    """
    import urllib.error
    import urllib.request

    from pipelines.io.errors import InputError

    url = os.environ.get("PREFECT_API_URL", "").strip()
    if not url:
        return None
    fix = "start that server (`prefect server start`) or unset PREFECT_API_URL to use a temporary one"
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout_s) as resp:
            status = resp.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(f"PREFECT_API_URL={url}: no Prefect server answers ({reason}); {fix}") from None
    if status != 200:
        raise InputError(f"PREFECT_API_URL={url}: /health answered HTTP {status}, not a healthy Prefect server; {fix}")
    return url


#: ``errno`` values of an OSError that are the machine's state, not a bug: named with their path, exit 2.
_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


def environment_error_line(exc: OSError) -> str | None:
    """The one-line message for a full disk, a quota, a read-only file system or a permission refusal; else None.

    Names the path the system refused (``exc.filename``, and ``exc.filename2`` for a rename) so the operator
    knows which disk or folder to fix.
    """
    if exc.errno not in _ENVIRONMENT_ERRNOS:
        return None
    where = exc.filename if exc.filename is not None else "a file"
    if exc.filename2 is not None:
        where = f"{where} -> {exc.filename2}"
    what = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only"}.get(exc.errno, "permission denied")
    return f"cannot write {where}: {what} ({exc.strerror}); free space or fix the folder, then run again"


def _one_line(msg: str) -> str:
    return " ".join(msg.split())


def _debug_trace() -> None:
    if os.environ.get("GPUPLAN_DEBUG"):
        traceback.print_exc(file=sys.stderr)


#: The ``--workspace DIR`` option every command takes (:mod:`pipelines.workspace`).
WORKSPACE_HELP = ("Workspace folder holding gpuplan.toml (default: $GPUPLAN_WORKSPACE, else the shipped demo "
                  "data/demo; create one with 'gpuplan init DIR').")


def use_workspace(folder: Any) -> Any:
    """Make ``folder`` (a path or None) this process's workspace (``$GPUPLAN_WORKSPACE``) and load it.

    Raises:
        pipelines.io.errors.InputError: no such folder, no ``gpuplan.toml``, or an invalid one.
    """
    from pathlib import Path

    from pipelines.workspace.load import load_workspace

    if folder is not None:
        os.environ["GPUPLAN_WORKSPACE"] = str(Path(folder).expanduser().resolve())
    return load_workspace()
