"""JSON read strictly: a key given twice in one object is refused, never last-wins (case F02).

Python's ``json`` keeps the last of two equal keys, so ``"jobs"`` given twice silently drops a
whole job list and ``"n_gpus"`` twice changes the cluster size (awslabs/palace #271 is the same
fault in another project). Every JSON document gpuplan reads goes through :func:`loads`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from domain.errors import InputError


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _second_line(text: str, key: str) -> int | None:
    """Line (1-based) of the second ``"key":`` in ``text``, or None when it cannot be told."""
    hits = [m.start() for m in re.finditer(r'"' + re.escape(json.dumps(key)[1:-1]) + r'"\s*:', text)]
    return text.count("\n", 0, hits[1]) + 1 if len(hits) >= 2 else None


def loads(text: str, source: str) -> Any:
    """Parse JSON ``text`` read from ``source`` (a file name, for messages), refusing repeated keys.

    Raises:
        InputError: not valid JSON (``<source> is not valid JSON: <msg> at line L column C``) or a key
            repeated inside one object (``<source>: key "n_gpus" is given twice in one object (second
            at line 7); each key must appear once``).
    """
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as dup:
        line = _second_line(text, dup.key)
        where = f" (second at line {line})" if line else ""
        raise InputError(f"{source}: key {json.dumps(dup.key)} is given twice in one object{where}; "
                         f"each key must appear once") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
