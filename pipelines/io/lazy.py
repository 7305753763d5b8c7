"""A module-level ``__getattr__`` that builds one class on first use (PEP 562).

The MLflow pyfunc wrappers subclass ``mlflow.pyfunc.PythonModel``; importing mlflow costs about a
second, so their modules build the class only when it is first asked for, once, and keep it so it
pickles by reference (``module.Name``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def lazy_class(name: str, build: Callable[[], type]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that returns ``build()`` (built once) for ``name`` and raises AttributeError otherwise."""
    built: list[type] = []

    def __getattr__(attr: str) -> Any:
        if attr != name:
            raise AttributeError(attr)
        if not built:
            built.append(build())
        return built[0]

    return __getattr__
