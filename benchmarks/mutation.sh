#!/usr/bin/env bash
# Mutation testing of gpuplan's core with mutmut (issue 18).
#
# Mutates the modules listed under [tool.gpuplan-mutation.tests] in pyproject.toml (verifier, objective,
# metrics, baselines, forecaster metrics, real-time ingest), one mutmut run per module, each against
# the tests listed there for it (benchmarks/mutation_run.py does the runs). Not part of CI (it takes
# minutes); run it by hand:
#
#   bash benchmarks/mutation.sh [OUT_DIR [MUTANT_GLOB ...]]   # default OUT_DIR: bench_out/mutation
#
# MUTANT_GLOBs (mutmut names, e.g. 'optimizer.verify.*' 'optimizer.metrics.*') run only those mutants
# and only the modules they name.
#
# mutmut is installed into a private folder (MUTMUT_TOOLS, default ~/.cache/gpuplan-mutmut) with
# `uv pip install --target` (or pip --target): never into the project venv. The run happens in a
# scratch copy of the working tree (MUTMUT_WORK, default a new /tmp folder), so the tree is untouched.
# Environment: PYTHON (the project's interpreter; default .venv/bin/python), MUTMUT_MAX_CHILDREN
# (parallel mutants, default 2), MUTMUT_TIMEOUT (wall seconds for the whole run, default 1800),
# GPUPLAN_PROPERTY_MAX_EXAMPLES (hypothesis examples per property test per mutant, default 40 of the
# suite's 150-450: tests/optimizer/test_properties.py takes ~2 s instead of ~35 s, once per mutant).
#
# Writes OUT_DIR/run.log, results.txt (every mutant and its status), survivors.md (the diff of every
# surviving mutant) and summary.md (score, wall and CPU seconds per module), and prints the summary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
MUTMUT_VERSION=3.8.1
TOOLS=${MUTMUT_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuplan-mutmut}
if [ -n "${MUTMUT_WORK:-}" ]; then
    WORK=$MUTMUT_WORK
else
    WORK=$(mktemp -d /tmp/gpuplan-mutation.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT  # our own scratch copy: removed at the end (survivor diffs are written by then)
fi
OUT=${1:-$ROOT/bench_out/mutation}
shift $(( $# > 0 ? 1 : 0 ))
export GPUPLAN_PROPERTY_MAX_EXAMPLES=${GPUPLAN_PROPERTY_MAX_EXAMPLES:-40}
MAX_CHILDREN=${MUTMUT_MAX_CHILDREN:-2}
LIMIT=${MUTMUT_TIMEOUT:-1800}
mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)


if ! PYTHONPATH="$TOOLS" "$PY" -c "import mutmut" 2>/dev/null; then
    echo "installing mutmut==$MUTMUT_VERSION into $TOOLS (not into the project venv)" >&2
    if command -v uv >/dev/null; then
        uv pip install --quiet --target "$TOOLS" --python "$PY" "mutmut==$MUTMUT_VERSION"
    else
        "$PY" -m pip install --quiet --target "$TOOLS" "mutmut==$MUTMUT_VERSION"
    fi
fi

# scratch copy of the working tree (tracked and untracked-but-not-ignored files)
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$WORK" 2>/dev/null || true)
rm -rf "$WORK/mutants"
echo "mutation run in $WORK (max children $MAX_CHILDREN, limit ${LIMIT}s)" >&2

rc=0
"$PY" "$ROOT/benchmarks/mutation_run.py" "$WORK" "$OUT" "$TOOLS" "$LIMIT" "$MAX_CHILDREN" "$@" || rc=$?
[ $rc -eq 124 ] && echo "warning: the run hit the ${LIMIT}s limit; results are partial" >&2
exit $rc
