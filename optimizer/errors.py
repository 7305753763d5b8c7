"""Errors raised by the optimizer package: the shared :class:`domain.errors.InputError`."""

from __future__ import annotations

from domain.errors import InputError

__all__ = ["InputError"]
