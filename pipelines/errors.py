"""Error types the command line maps to exit codes (DESIGN §7.1).

Bad input exits with code 2 and one line naming what is wrong; an internal failure exits 1.
The pure packages (``forecasters``, ``optimizer``) define their own ``InputError`` classes
(subclasses of :class:`ValueError`); :data:`INPUT_ERRORS` collects every class the CLI
treats as bad input.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input detected by the pipelines shell (missing file, bad format, bad option)."""


def input_error_types() -> tuple[type[BaseException], ...]:
    """Return every exception class that means "bad input" (exit code 2).

    Imports the pure packages' error modules lazily so that ``gpuplan --help`` stays fast.
    """
    types: list[type[BaseException]] = [InputError, FileNotFoundError, IsADirectoryError]
    for mod_name in ("optimizer.errors", "forecasters.errors"):
        try:
            mod = __import__(mod_name, fromlist=["InputError"])
        except ImportError:  # pragma: no cover - package not built yet
            continue
        err = getattr(mod, "InputError", None)
        if err is not None:
            types.append(err)
    return tuple(types)
