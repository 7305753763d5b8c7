#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite, in 2 worker processes (pytest-xdist; GPUPLAN_TEST_WORKERS
# overrides, 0 = in this process): `--dist loadgroup` keeps the tests of one session daemon (the Slurm lab, the lab
# Prometheus, PostgreSQL: tests/conftest.py DAEMON_GROUPS) in one worker. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DO_NOT_TRACK=1 MLFLOW_DISABLE_TELEMETRY=true PREFECT_SERVER_ANALYTICS_ENABLED=false
exec .venv/bin/python -m pytest -q -n "${GPUPLAN_TEST_WORKERS:-2}" --dist loadgroup "$@"
