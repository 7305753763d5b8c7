#!/usr/bin/env bash
# Mutation testing of gpuplan's core with mutmut (issue 18).
#
# Mutates the modules listed under [tool.mutmut] only_mutate in pyproject.toml (verifier, objective,
# metrics, baselines, forecaster metrics, real-time ingest) and runs the tests listed there against
# each mutant. Not part of CI (it takes minutes); run it by hand:
#
#   bash benchmarks/mutation.sh [OUT_DIR [MUTANT_GLOB ...]]   # default OUT_DIR: bench_out/mutation
#
# MUTANT_GLOBs (mutmut names, e.g. 'optimizer.verify.*' 'optimizer.metrics.*') run only those mutants;
# the other modules' mutants are then listed as not checked (column other).
#
# mutmut is installed into a private folder (MUTMUT_TOOLS, default ~/.cache/gpuplan-mutmut) with
# `uv pip install --target` (or pip --target): never into the project venv. The run happens in a
# scratch copy of the working tree (MUTMUT_WORK, default a new /tmp folder), so the tree is untouched.
# Environment: PYTHON (the project's interpreter; default .venv/bin/python), MUTMUT_MAX_CHILDREN
# (parallel mutants, default 2), MUTMUT_TIMEOUT (seconds for the whole run, default 1800),
# GPUPLAN_PROPERTY_MAX_EXAMPLES (hypothesis examples per property test per mutant, default 40 of the
# suite's 150-450: tests/optimizer/test_properties.py takes ~2 s instead of ~35 s, once per mutant).
#
# Writes OUT_DIR/run.log, results.txt (every mutant and its status), survivors.md (the diff of every
# surviving mutant) and summary.md (score per module), and prints the summary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
MUTMUT_VERSION=3.8.1
TOOLS=${MUTMUT_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuplan-mutmut}
WORK=${MUTMUT_WORK:-$(mktemp -d /tmp/gpuplan-mutation.XXXXXX)}
OUT=${1:-$ROOT/bench_out/mutation}
shift $(( $# > 0 ? 1 : 0 ))
export GPUPLAN_PROPERTY_MAX_EXAMPLES=${GPUPLAN_PROPERTY_MAX_EXAMPLES:-40}
MAX_CHILDREN=${MUTMUT_MAX_CHILDREN:-2}
LIMIT=${MUTMUT_TIMEOUT:-1800}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

mut() { PYTHONPATH="$TOOLS" "$PY" -m mutmut "$@"; }

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

start=$(date +%s)
set +e
(cd "$WORK" && timeout "$LIMIT" env PYTHONPATH="$TOOLS" "$PY" -m mutmut run --max-children "$MAX_CHILDREN" "$@") \
    > "$OUT/run.log" 2>&1
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
[ $rc -eq 124 ] && echo "warning: the run hit the ${LIMIT}s limit; results are partial" >&2
[ $rc -ne 0 ] && [ $rc -ne 124 ] && { echo "mutmut run failed (exit $rc); see $OUT/run.log" >&2; tail -20 "$OUT/run.log" >&2; exit $rc; }

(cd "$WORK" && mut results --all true) > "$OUT/results.txt"
: > "$OUT/survivors.md"
grep -E ': survived$' "$OUT/results.txt" | sed -E 's/^ *//; s/: survived$//' | while read -r name; do
    { echo "## $name"; echo '```diff'; (cd "$WORK" && mut show "$name" | grep -E '^[-+@]' ); echo '```'; echo; } \
        >> "$OUT/survivors.md"
done

"$PY" - "$OUT" "$elapsed" <<'PY'
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

out, elapsed = Path(sys.argv[1]), int(sys.argv[2])
by_mod: dict[str, Counter] = defaultdict(Counter)
for line in (out / "results.txt").read_text().splitlines():
    m = re.match(r"\s*(\S+?)\.x[_ǁ]\S*__mutmut_\d+: (.+)$", line)
    if m:
        by_mod[m.group(1)][m.group(2).strip()] += 1
rows = ["| module | mutants | killed | survived | timeout | no tests | other | score |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
tot = Counter()
for mod in sorted(by_mod):
    c = by_mod[mod]
    tot.update(c)
    n = sum(c.values())
    other = n - c["killed"] - c["survived"] - c["timeout"] - c["no tests"]
    checked = c["killed"] + c["survived"] + c["timeout"]
    score = 100.0 * (c["killed"] + c["timeout"]) / checked if checked else float("nan")
    rows.append(f"| {mod} | {n} | {c['killed']} | {c['survived']} | {c['timeout']} | {c['no tests']} | {other} | {score:.1f} % |")
checked = tot["killed"] + tot["survived"] + tot["timeout"]
score = 100.0 * (tot["killed"] + tot["timeout"]) / checked if checked else float("nan")
text = "\n".join([f"# Mutation testing (mutmut), {elapsed} s", "",
                  "score = (killed + timeout) / (killed + survived + timeout)", "", *rows, "",
                  f"total: {sum(tot.values())} mutants, score {score:.1f} %; survivors in survivors.md", ""])
(out / "summary.md").write_text(text)
print(text)
PY
