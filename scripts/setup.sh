#!/usr/bin/env bash
# Install uv (if missing) and the locked environment into .venv, with compiled bytecode
# (this machine sets PYTHONDONTWRITEBYTECODE=1; without .pyc files imports take ~2x longer).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v uv >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check uv
fi
if [ ! -x .venv/bin/gpuplan ]; then  # the first time only: a minute or less of silence otherwise
  echo "setup: installing the locked environment into .venv (uv sync; about 20-60 s the first time) ..." >&2
fi
uv sync --locked --compile-bytecode --quiet
# the home of the documented `prefect server` (docs/operations.md): SQLite creates its file, not the folder
mkdir -p .prefect/server
