"""Errors raised by the optimizer package."""

from __future__ import annotations


class InputError(ValueError):
    """A problem, job or service is invalid; the message names the job/service and field."""
