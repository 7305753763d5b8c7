"""Ruff on the whole project and mypy on the pure packages, run by the test command (issue 10).

Both use the executables of the environment running the tests (next to ``sys.executable``), with
the configuration in ``pyproject.toml``. Mypy takes ~15-20 s (no incremental cache is kept).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: The packages mypy checks: the pure ones (``pipelines`` is the shell and is not type-checked yet).
PURE = ("domain", "forecasters", "optimizer")


def _run(tool: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    exe = BIN / tool
    if not exe.exists():
        pytest.fail(f"{exe} not found: install the dev dependency group (uv sync --group dev)", pytrace=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(exe), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_ruff_is_clean() -> None:
    res = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".", timeout=300)
    if res.returncode != 0:
        pytest.fail(f"ruff check . exited {res.returncode}:\n{res.stdout}{res.stderr}", pytrace=False)


@pytest.mark.heavy
def test_mypy_is_clean_on_the_pure_packages() -> None:
    res = _run("mypy", "--no-incremental", "--cache-dir", os.devnull, *PURE, timeout=600)
    if res.returncode != 0:
        pytest.fail(f"mypy {' '.join(PURE)} exited {res.returncode}:\n{res.stdout}{res.stderr}", pytrace=False)
