#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the shipped data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DO_NOT_TRACK=1 MLFLOW_DISABLE_TELEMETRY=true PREFECT_SERVER_ANALYTICS_ENABLED=false
exec .venv/bin/gpuplan run "$@"
