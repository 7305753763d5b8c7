#!/usr/bin/env bash
# Install uv (if missing) and the locked environment into .venv, with compiled bytecode
# (this machine sets PYTHONDONTWRITEBYTECODE=1; without .pyc files imports take ~2x longer).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v uv >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check uv
fi
uv sync --locked --compile-bytecode --quiet
# the home of the documented `prefect server` (docs/operations.md): SQLite creates its file, not the folder
mkdir -p .prefect/server
