"""The one error base of gpuplan.

Every package raises :class:`InputError` (or a subclass) for bad input; the command line maps
it to exit code 2 and prints its message as one line (DESIGN §7.1). ``forecasters.errors``,
``optimizer.errors`` and ``pipelines.io.errors`` re-export this class: there is one ``InputError``.
"""

from __future__ import annotations


class GpuplanError(Exception):
    """Base class of every error gpuplan raises on purpose."""


class InputError(GpuplanError, ValueError):
    """Bad input: the message names the field, row, job, service or timestamp and what was expected."""
