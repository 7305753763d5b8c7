"""Shared plumbing for CLI commands: JSON on stdout, one-line errors, exit codes (DESIGN §7.1)."""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import typer

from pipelines.errors import input_error_types

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2


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

    Bad input (any class from :func:`pipelines.errors.input_error_types`) prints
    ``error: <message>`` on one line to standard error and exits 2; any other exception
    prints ``internal error: <Type>: <message>`` and exits 1. Set ``GPUPLAN_DEBUG=1`` to
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
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:  # noqa: BLE001 - the CLI boundary
        _debug_trace()
        typer.echo(f"internal error: {type(exc).__name__}: {_one_line(str(exc))}", err=True)
        raise typer.Exit(EXIT_INTERNAL) from None
    raise typer.Exit(code or EXIT_OK)


def _one_line(msg: str) -> str:
    return " ".join(msg.split())


def _debug_trace() -> None:
    if os.environ.get("GPUPLAN_DEBUG"):
        traceback.print_exc(file=sys.stderr)
