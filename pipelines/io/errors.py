"""Error types the command line maps to exit codes (DESIGN §7.1).

Bad input exits with code 2 and one line naming what is wrong; an internal failure exits 1.
There is one :class:`domain.errors.InputError` (re-exported here and by the pure packages).
"""

from __future__ import annotations

from domain.errors import InputError

__all__ = ["InputError", "input_error_types"]


def input_error_types() -> tuple[type[BaseException], ...]:
    """Every exception class that means "bad input" (exit code 2)."""
    return (InputError, FileNotFoundError, IsADirectoryError)
