"""Driver of ``benchmarks/mutation.sh``: one mutmut run per module, each with its own tests (issue 18).

Usage (from mutation.sh, which installs mutmut and makes the scratch copy)::

    python benchmarks/mutation_run.py WORK OUT TOOLS LIMIT_S MAX_CHILDREN [MUTANT_GLOB ...]

For every module under ``[tool.gpuplan-mutation.tests]`` in ``WORK/pyproject.toml`` (module path ->
pytest arguments: the test files that exercise that module, ``--deselect`` for slow integration tests
in them), the ``[tool.mutmut]`` table of the scratch copy is rewritten to ``only_mutate = [module]``
and ``pytest_add_cli_args_test_selection = <its tests>``, and ``mutmut run`` is started. mutmut then
collects per-function coverage ("stats") over those tests only and runs, for each mutant, only the
tests that call the mutated function, fastest first, stopping at the first failure (mutmut 3.8.1,
``mutmut/__main__.py`` ``_run`` and ``runners/harness.py``). A narrow selection per module matters
because a surviving mutant runs every test that covers its function: with one shared selection a
baseline survivor ran the hypothesis property tests and the MILP scale tests (about 14 s each under
load), an ingest survivor the whole backtest file.

MUTANT_GLOBs (mutmut names, e.g. ``optimizer.verify.*`` or one mutant) restrict the run to the
modules they name. ``LIMIT_S`` is the wall-time limit of the whole run (seconds); a module still
running at the limit is stopped and the modules after it are not run (their mutants are absent).

Writes ``OUT/results.txt`` (every mutant and its status), ``OUT/survivors.md`` (the diff of every
survivor), ``OUT/summary.md`` (score per module, wall and CPU seconds per module, total) and
``OUT/run.log`` (mutmut's output). Exit status 0, or 124 when the limit was hit.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

STATUS_RE = re.compile(r"^\s*(\S+?)\.x[_ǁ]\S*__mutmut_\d+: (.+)$")


def _dotted(module_path: str) -> str:
    return module_path.removesuffix(".py").replace("/", ".")


def _mutmut_table(base: dict, module_path: str, tests: list[str]) -> str:
    """The ``[tool.mutmut]`` table for one module's run, as TOML text (JSON strings are TOML strings)."""
    table = dict(base, only_mutate=[module_path], pytest_add_cli_args_test_selection=tests)
    lines = ["[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _rewrite_pyproject(work: Path, text: str, table: str) -> None:
    out, skip = [], False
    for line in text.splitlines(keepends=True):
        if line.strip().startswith("["):
            skip = line.strip() == "[tool.mutmut]"
            if skip:
                out.append(table + "\n")
        if not skip:
            out.append(line)
    (work / "pyproject.toml").write_text("".join(out))


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv: list[str]) -> int:
    work, out, tools = Path(argv[0]), Path(argv[1]), argv[2]
    limit_s, max_children, globs = float(argv[3]), int(argv[4]), argv[5:]
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=tools)
    pyproject = (work / "pyproject.toml").read_text()
    conf = tomllib.loads(pyproject)["tool"]
    base = {k: v for k, v in conf["mutmut"].items() if k not in ("only_mutate", "pytest_add_cli_args_test_selection")}
    per_module: dict[str, list[str]] = conf["gpuplan-mutation"]["tests"]

    start = time.monotonic()
    rows, results, survivors, hit_limit = [], [], [], False
    log = (out / "run.log").open("w")
    (out / "survivors.md").write_text("")
    for module_path, tests in per_module.items():
        dotted = _dotted(module_path)
        mine = [g for g in globs if fnmatch.fnmatch(dotted + ".x_f__mutmut_1", g) or g.startswith(dotted + ".")]
        if globs and not mine:
            continue
        left = limit_s - (time.monotonic() - start)
        if left <= 0:
            hit_limit = True
            print(f"not run (limit reached): {module_path}", file=sys.stderr)
            continue
        _rewrite_pyproject(work, pyproject, _mutmut_table(base, module_path, tests))
        shutil.rmtree(work / "mutants", ignore_errors=True)
        t0, c0 = time.monotonic(), _children_cpu_s()
        log.write(f"\n===== {module_path}: {' '.join(tests)}\n")
        log.flush()
        proc = subprocess.Popen([py, "-m", "mutmut", "run", "--max-children", str(max_children), *mine],
                                cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc, hit_limit = 124, True
        wall, cpu = time.monotonic() - t0, _children_cpu_s() - c0
        if rc not in (0, 124):
            print(f"mutmut run failed for {module_path} (exit {rc}); see {out / 'run.log'}", file=sys.stderr)
            return rc
        listing = subprocess.run([py, "-m", "mutmut", "results", "--all", "true"], cwd=work, env=env,
                                 capture_output=True, text=True, check=True).stdout
        counts: Counter = Counter()
        for line in listing.splitlines():
            m = STATUS_RE.match(line)
            if m and m.group(1) == dotted:
                counts[m.group(2).strip()] += 1
                results.append(line.strip())
                if m.group(2).strip() == "survived":
                    survivors.append(line.strip().rsplit(":", 1)[0])
        rows.append((dotted, counts, wall, cpu, rc == 124))
        _write_diffs(work, env, py, [s for s in survivors if s.startswith(dotted + ".")], out)

    (out / "results.txt").write_text("\n".join(results) + "\n")
    (out / "summary.md").write_text(_summary(rows, time.monotonic() - start, hit_limit))
    print((out / "summary.md").read_text())
    return 124 if hit_limit else 0


def _write_diffs(work: Path, env: dict, py: str, names: list[str], out: Path) -> None:
    """Append the diff of each survivor to survivors.md (one Python process for all of them)."""
    if not names:
        return
    code = ("import sys\nfrom mutmut.mutation.diff_apply import get_diff_for_mutant\n"
            "for n in sys.argv[1:]:\n"
            "    print(f'## {n}\\n```diff\\n{get_diff_for_mutant(n)}\\n```\\n')\n")
    text = subprocess.run([py, "-c", code, *names], cwd=work, env=env, capture_output=True, text=True,
                          check=True).stdout
    with (out / "survivors.md").open("a") as f:
        f.write(text)


def _summary(rows: list, elapsed_s: float, hit_limit: bool) -> str:
    head = ["| module | mutants | killed | survived | timeout | no tests | other | score | wall s | CPU s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    tot: Counter = Counter()
    cpu_tot = 0.0
    for dotted, c, wall, cpu, stopped in rows:
        tot.update(c)
        cpu_tot += cpu
        n = sum(c.values())
        checked = c["killed"] + c["survived"] + c["timeout"]
        other = n - checked - c["no tests"]
        score = 100.0 * (c["killed"] + c["timeout"]) / checked if checked else float("nan")
        head.append(f"| {dotted}{' (stopped at the limit)' if stopped else ''} | {n} | {c['killed']} | "
                    f"{c['survived']} | {c['timeout']} | {c['no tests']} | {other} | {score:.1f} % | "
                    f"{wall:.0f} | {cpu:.0f} |")
    checked = tot["killed"] + tot["survived"] + tot["timeout"]
    score = 100.0 * (tot["killed"] + tot["timeout"]) / checked if checked else float("nan")
    return "\n".join([
        f"# Mutation testing (mutmut), {elapsed_s:.0f} s wall, {cpu_tot:.0f} s CPU"
        + (" (stopped at the time limit: partial)" if hit_limit else ""), "",
        "score = (killed + timeout) / (killed + survived + timeout); other = not checked", "", *head, "",
        f"total: {sum(tot.values())} mutants, {tot['killed'] + tot['timeout']} killed, {tot['survived']} survived, "
        f"score {score:.1f} %; survivors in survivors.md", ""])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
