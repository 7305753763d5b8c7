"""Errors raised by the forecasters package: the shared :class:`domain.errors.InputError`."""

from __future__ import annotations

from domain.errors import InputError

__all__ = ["InputError"]
