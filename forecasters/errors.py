"""Errors raised by the forecasters package."""

from __future__ import annotations


class InputError(ValueError):
    """Bad forecaster input; the message names the column, row or timestamp and what was expected."""
