"""Layering check (issue 10): the import rules of DESIGN's layout, read from the source with ``ast``.

Rules, each its own test so a failure names the rule:

1. ``forecasters`` and ``optimizer`` do not import each other (they share only ``domain``).
2. ``domain`` imports none of ``forecasters``, ``optimizer``, ``pipelines``.
3. The pure packages (``domain``, ``forecasters``, ``optimizer``) import neither ``pipelines``,
   ``prefect`` nor ``mlflow``, and do no file IO (``open()``, ``Path.read_text``, pandas
   ``read_*``/``to_parquet``, ``json.load``, ``np.save``, ``shutil``, ``os.remove`` ...).
4. No import circle between project modules (the issue asks for none in ``pipelines`` and none
   anywhere). The graph has an edge ``a -> b`` for every import of project module ``b`` in ``a``;
   ``from pkg import mod`` counts as importing ``pkg.mod`` when ``mod`` is a submodule.
5. No module imports or uses another module's private name (``from m import _x``, ``m._x(...)``,
   ``SomeClass._x`` for a class imported from a project module).
6. Inside ``pipelines`` an import never runs back up the shell's order (DESIGN §2,
   :data:`SHELL_ORDER`): a module of one folder imports only folders of its own rank or lower
   (same-rank folders may import each other; rule 4 still forbids circles).

Imports are read everywhere in a module (top level, inside functions, under ``if``), relative
imports are resolved, and modules are discovered from the file tree, so new packages
(``pipelines/stages/``, ``optimizer/scenarios/`` ...) are covered as soon as they exist.
The last tests run the checker on synthetic sources, so the check itself is tested.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("domain", "forecasters", "optimizer", "pipelines")
PURE = ("domain", "forecasters", "optimizer")
#: Third-party packages only the shell (``pipelines``) may import.
SHELL_ONLY = ("prefect", "mlflow")
#: The shell's folders (``pipelines/<folder>/``, ``pipelines/catalog/``) by rank, lowest first (DESIGN §2):
#: io (files, formats, errors) -> report (renders frames) -> workspace (gpuplan.toml, store, ingest, parsers)
#: -> config (Settings from the workspace and the environment) -> catalog -> stages (in-memory steps)
#: -> models, tracking -> bench -> flows (Prefect) -> replay -> cli.
SHELL_ORDER: dict[str, int] = {
    "io": 0, "report": 1, "workspace": 2, "config": 3, "catalog": 4, "stages": 5,
    "models": 6, "tracking": 6, "bench": 7, "flows": 8, "replay": 9, "cli": 10,
}
#: Modules whose import alone means file IO.
IO_MODULES = ("shutil", "glob", "tempfile")
#: Fully qualified callables that touch the file system.
IO_FUNCTIONS = frozenset({
    "open", "io.open", "gzip.open", "bz2.open", "lzma.open", "codecs.open",
    "json.load", "json.dump", "pickle.load", "pickle.dump", "joblib.load", "joblib.dump",
    "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt",
    "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile",
    "os.open", "os.remove", "os.unlink", "os.rename", "os.replace", "os.mkdir", "os.makedirs",
    "os.rmdir", "os.removedirs", "os.listdir", "os.scandir", "os.walk", "os.fdopen",
    "os.path.exists", "os.path.isfile", "os.path.isdir", "os.path.getsize", "os.path.getmtime",
})
#: Method names that mean file IO whatever the receiver (``Path``, ``DataFrame``, figures ...).
IO_METHODS = frozenset({
    "open", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "unlink", "touch",
    "rmdir", "iterdir", "rglob", "to_parquet", "to_pickle", "to_feather", "to_excel", "to_hdf",
    "to_sql", "to_orc", "tofile", "savefig", "save_model", "glob", "exists", "is_file", "is_dir",
})
#: Methods that return a string when called without a target and write a file with one.
IO_METHODS_WITH_TARGET = frozenset({"to_csv", "to_json"})
#: ``pandas.read_csv``, ``pl.read_parquet`` ...: reader functions whatever the module.
IO_READER = re.compile(r"read_(csv|parquet|json|pickle|excel|feather|table|sql|hdf|fwf|orc|xml|html|stata|sas|spss)$")
#: Underscore names that are public API (namedtuple and enum protocol), not private.
PUBLIC_UNDERSCORE = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})


@dataclass(frozen=True)
class Source:
    """One module's text: dotted name, path shown in messages, and whether it is a package."""

    name: str
    path: str
    text: str
    is_package: bool = False


@dataclass(frozen=True)
class Finding:
    """One rule broken at ``path:line`` (``rule`` is one of the test names' keys)."""

    rule: str
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class ModuleFacts:
    """What one module imports (project edges with lines) and does, read from its AST."""

    source: Source
    edges: list[tuple[str, int]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def discover(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> list[Source]:
    """Every ``*.py`` under ``packages`` (below ``root``) as a :class:`Source`."""
    out = []
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root)
            is_package = path.name == "__init__.py"
            parts = rel.parent.parts if is_package else rel.with_suffix("").parts
            out.append(Source(".".join(parts), rel.as_posix(), path.read_text(encoding="utf-8"), is_package))
    return out


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _shell_folder(name: str) -> str | None:
    """``pipelines.flows.plan`` -> ``flows``; ``pipelines.catalog`` -> ``catalog``; ``pipelines`` -> None."""
    parts = name.split(".")
    return parts[1] if parts[0] == "pipelines" and len(parts) > 1 else None


def _is_private(name: str) -> bool:
    """``_x`` is private; ``__x__`` (dunder), ``_x_`` (enum sunder) and namedtuple API are not."""
    return (name.startswith("_") and not name.endswith("_") and name not in PUBLIC_UNDERSCORE)


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything that is not a plain name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


class _Reader(ast.NodeVisitor):
    """Collects imports, IO calls and private-name uses of one module."""

    def __init__(self, src: Source, modules: frozenset[str]) -> None:
        self.src = src
        self.modules = modules
        self.facts = ModuleFacts(src)
        self.bound: dict[str, str] = {}  # local name -> fully qualified name it was imported as
        self.pkg = src.name if src.is_package else src.name.rpartition(".")[0]
        self.params: list[dict[str, str]] = []  # per function: parameter -> qualified name of its annotated class

    # ---- helpers
    def _add(self, rule: str, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 0)
        self.facts.findings.append(Finding(rule, self.src.path, line, f"{self.src.name}: {message}"))

    def _project_module(self, qual: str) -> str | None:
        """Longest prefix of ``qual`` that is a project module (None when it is not ours)."""
        parts = qual.split(".")
        for k in range(len(parts), 0, -1):
            cand = ".".join(parts[:k])
            if cand in self.modules:
                return cand
        return None

    def _imported(self, node: ast.AST, qual: str) -> None:
        """Apply the import rules to an import of fully qualified ``qual``."""
        me, top = _top(self.src.name), _top(qual)
        if {me, top} == {"forecasters", "optimizer"}:
            self._add("pure_each_other", node, f"imports {qual} ({me} and {top} must not import each other)")
        if me == "domain" and top in ("forecasters", "optimizer", "pipelines"):
            self._add("domain", node, f"imports {qual} (domain imports no other project package)")
        if me in PURE and top in ("pipelines", *SHELL_ONLY):
            self._add("pure_shell", node, f"imports {qual} (a pure package imports no pipelines/prefect/mlflow)")
        if me in PURE and top in IO_MODULES:
            self._add("pure_io", node, f"imports {qual} (file IO in a pure package)")
        mod = self._project_module(qual)
        if mod is not None and me == top == "pipelines":
            self._shell_order(node, mod)
        if mod is not None and mod != self.src.name:
            self.facts.edges.append((mod, getattr(node, "lineno", 0)))
            rest = qual[len(mod) + 1:].split(".") if qual != mod else []
            if rest and _is_private(rest[0]):
                self._add("private", node, f"imports {qual} (private name of {mod})")
        if mod is not None and self._outside_private_module(mod):
            self._add("private", node, f"imports private module {mod} from outside its package")

    def _shell_order(self, node: ast.AST, mod: str) -> None:
        """Rule 6: ``pipelines.<a>...`` imports ``pipelines.<b>...`` only when rank(b) <= rank(a)."""
        mine, theirs = _shell_folder(self.src.name), _shell_folder(mod)
        if mine is None or theirs is None or mine == theirs:
            return
        if mine not in SHELL_ORDER or theirs not in SHELL_ORDER:
            self._add("shell_order", node, f"imports {mod}: folder {mine if mine not in SHELL_ORDER else theirs!r} "
                      "has no rank in SHELL_ORDER (DESIGN §2)")
        elif SHELL_ORDER[theirs] > SHELL_ORDER[mine]:
            self._add("shell_order", node, f"imports {mod}: {theirs} (rank {SHELL_ORDER[theirs]}) is above {mine} "
                      f"(rank {SHELL_ORDER[mine]}); the shell's order is {' -> '.join(SHELL_ORDER)} (DESIGN §2)")

    def _outside_private_module(self, mod: str) -> bool:
        """True when ``mod`` is a private module (``pkg._m``) and this module is not in ``pkg``."""
        parent, _, last = mod.rpartition(".")
        return _is_private(last) and not self.src.name.startswith(parent + ".")

    # ---- imports
    def bind(self, tree: ast.AST) -> None:
        """First pass: every name an import binds anywhere in the module -> its qualified name."""
        for node in ast.walk(tree):
            for local, qual, _ in self._names(node):
                self.bound[local] = qual

    def _names(self, node: ast.AST) -> list[tuple[str, str, str]]:
        """(local name bound, qualified name, imported name) of an import statement ([] otherwise)."""
        if isinstance(node, ast.Import):
            return [(a.asname, a.name, a.name) if a.asname else (_top(a.name), _top(a.name), a.name)
                    for a in node.names]
        if not isinstance(node, ast.ImportFrom):
            return []
        if node.level:
            base_parts = self.pkg.split(".") if self.pkg else []
            base_parts = base_parts[: len(base_parts) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        return [("*", base, base) if a.name == "*" else (a.asname or a.name, f"{base}.{a.name}", f"{base}.{a.name}")
                for a in node.names]

    def visit_Import(self, node: ast.Import) -> None:
        for _, _, imported in self._names(node):
            self._imported(node, imported)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for _, _, imported in self._names(node):
            self._imported(node, imported)

    # ---- names used
    def _qualify(self, parts: list[str]) -> str | None:
        """Qualified name of a name chain: through an import, or a parameter annotated with an imported class."""
        head = next((scope[parts[0]] for scope in reversed(self.params) if parts[0] in scope), None)
        head = head or self.bound.get(parts[0])
        if head is None:
            return None
        return ".".join([head, *parts[1:]])

    def _annotation(self, ann: ast.expr | None) -> str | None:
        """Qualified class of an annotation ``C``, ``m.C``, ``"C"`` or ``C | None`` (None otherwise)."""
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            sides = [x for x in (ann.left, ann.right) if not (isinstance(x, ast.Constant) and x.value is None)]
            ann = sides[0] if len(sides) == 1 else None
        parts = _dotted(ann) if isinstance(ann, ast.Name | ast.Attribute) else None
        return ".".join([self.bound[parts[0]], *parts[1:]]) if parts and parts[0] in self.bound else None

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        a = node.args
        scope = {}
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
            qual = self._annotation(arg.annotation)
            if qual is not None:
                scope[arg.arg] = qual
        self.params.append(scope)
        self.generic_visit(node)
        self.params.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node: ast.Attribute) -> None:
        parts = _dotted(node)
        if parts is not None and _is_private(node.attr):
            qual = self._qualify(parts)
            mod = self._project_module(qual) if qual else None
            if mod is not None and mod != self.src.name and qual is not None:
                if qual != mod:
                    self._add("private", node, f"uses {'.'.join(parts)} = {qual} (private name of {mod})")
                elif self._outside_private_module(mod):
                    self._add("private", node, f"uses private module {mod} from outside its package")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _top(self.src.name) in PURE:
            what = self._io_call(node)
            if what:
                self._add("pure_io", node, f"calls {what} (file IO in a pure package)")
        self.generic_visit(node)

    def _io_call(self, node: ast.Call) -> str | None:
        """The IO callable ``node`` calls, or None when it is not file IO."""
        if node.args and _dotted(node.args[0]) in (["os", "devnull"],):
            return None  # redirecting a file descriptor to the null device writes no data
        func = node.func
        if isinstance(func, ast.Name):
            qual = self.bound.get(func.id, func.id)
            if qual in IO_FUNCTIONS or _top(qual) in IO_MODULES or IO_READER.search(qual):
                return f"{func.id}()" if qual == func.id else f"{func.id}() = {qual}"
            return None
        if not isinstance(func, ast.Attribute):
            return None
        parts = _dotted(func)
        qual = self._qualify(parts) if parts else None
        label = ".".join(parts) if parts else f"<expr>.{func.attr}"
        if qual is not None:
            if qual in IO_FUNCTIONS or _top(qual) in IO_MODULES:
                return f"{label}()"
            if self._project_module(qual) is not None:
                return None  # a project function that happens to share a name (checked where defined)
        if func.attr in IO_METHODS or IO_READER.match(func.attr):
            return f"{label}()"
        if func.attr in IO_METHODS_WITH_TARGET and (node.args or node.keywords):
            return f"{label}(...)"
        return None


def read_module(src: Source, modules: frozenset[str]) -> ModuleFacts:
    """Parse ``src`` and collect its project import edges and rule findings."""
    reader = _Reader(src, modules)
    tree = ast.parse(src.text, filename=src.path)
    reader.bind(tree)
    reader.visit(tree)
    return reader.facts


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` (node -> successors), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:  # recursion depth is bounded by the module count (~100)
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def a_cycle(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One shortest cycle through ``comp[0]`` inside the component ``comp`` (first node repeated)."""
    members, start = set(comp), comp[0]
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*path[::-1], start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp  # unreachable for a true component of size > 1


def check(sources: Iterable[Source]) -> list[Finding]:
    """All findings for ``sources``: per-module rules, then import circles (rule ``cycle``)."""
    sources = list(sources)
    modules = frozenset(s.name for s in sources)
    facts = [read_module(s, modules) for s in sources]
    findings = [f for m in facts for f in m.findings]
    graph: dict[str, set[str]] = {s.name: set() for s in sources}
    where: dict[tuple[str, str], tuple[str, int]] = {}
    for m in facts:
        for target, line in m.edges:
            graph[m.source.name].add(target)
            where.setdefault((m.source.name, target), (m.source.path, line))
    for comp in strongly_connected(graph):
        if len(comp) < 2:
            continue
        cyc = a_cycle(graph, comp)
        hops = [f"{a} ({where[(a, b)][0]}:{where[(a, b)][1]})" for a, b in zip(cyc, cyc[1:])]
        path, line = where[(cyc[0], cyc[1])]
        findings.append(Finding("cycle", path, line, f"import circle among {len(comp)} modules {comp}: "
                                + " -> ".join([*hops, cyc[0]])))
    return findings


# ---------------------------------------------------------------- the checks on this repository


class Findings(list[Finding]):
    """The findings on this repository (short repr: pytest prints the failing rule's list itself)."""

    def __repr__(self) -> str:
        return f"<{len(self)} findings>"


@pytest.fixture(scope="module")
def findings() -> Findings:
    sources = discover()
    assert {_top(s.name) for s in sources} == set(PACKAGES), "module discovery found no files of a package"
    return Findings(check(sources))


def _fail_on(findings: list[Finding], rule: str, what: str) -> None:
    hits = [f for f in findings if f.rule == rule]
    if hits:
        pytest.fail(f"{what}: {len(hits)} finding(s)\n" + "\n".join(sorted(map(str, hits))), pytrace=False)


def test_forecasters_and_optimizer_do_not_import_each_other(findings: list[Finding]) -> None:
    _fail_on(findings, "pure_each_other", "forecasters <-> optimizer imports")


def test_domain_imports_no_other_project_package(findings: list[Finding]) -> None:
    _fail_on(findings, "domain", "domain imports forecasters/optimizer/pipelines")


def test_pure_packages_import_no_shell(findings: list[Finding]) -> None:
    _fail_on(findings, "pure_shell", "pure package imports pipelines/prefect/mlflow")


def test_pure_packages_do_no_file_io(findings: list[Finding]) -> None:
    _fail_on(findings, "pure_io", "file IO in a pure package")


def test_no_import_circles(findings: list[Finding]) -> None:
    _fail_on(findings, "cycle", "import circles")


def test_no_private_names_of_other_modules(findings: list[Finding]) -> None:
    _fail_on(findings, "private", "private names used across modules")


def test_no_import_runs_back_up_the_shell(findings: list[Finding]) -> None:
    _fail_on(findings, "shell_order", "imports running back up pipelines' order")


def test_every_shell_folder_has_a_rank() -> None:
    folders = {p.name for p in (ROOT / "pipelines").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in (ROOT / "pipelines").glob("*.py") if p.name != "__init__.py"}
    assert folders | modules == set(SHELL_ORDER)


def test_checker_finds_imports_running_back_up_the_shell() -> None:
    found = check(_tree(
        pipelines__init="", pipelines__io__init="", pipelines__flows__init="", pipelines__cli__init="",
        pipelines__tracking__init="", pipelines__models__init="", pipelines__extra__init="",
        pipelines__io__a="def f():\n    from pipelines.flows import b\n    return b\n",   # up: io -> flows
        pipelines__flows__b="from pipelines.io import a\n",                                 # down: fine
        pipelines__cli__c="from ..flows import b\n",                                        # down, relative: fine
        pipelines__tracking__d="from pipelines.models import e\n",                          # same rank: fine
        pipelines__models__e="import pipelines.extra.f\n",                                  # a folder with no rank
        pipelines__extra__f="",
    ))
    assert [r for r in _rules(found) if r[0] == "shell_order"] == [
        ("shell_order", "pipelines/io/a.py", 2), ("shell_order", "pipelines/models/e.py", 1)]


# ---------------------------------------------------------------- the checker on synthetic code


def _src(name: str, text: str, is_package: bool = False) -> Source:
    path = name.replace(".", "/") + ("/__init__.py" if is_package else ".py")
    return Source(name, path, text, is_package)


def _rules(findings: list[Finding]) -> list[tuple[str, str, int]]:
    return sorted((f.rule, f.path, f.line) for f in findings)


def _tree(**mods: str) -> Iterator[Source]:
    """Synthetic modules ``a__b="..."`` -> ``a.b``; names ending in ``__init`` are packages."""
    for key, text in mods.items():
        name = key.replace("__", ".")
        if name.endswith(".init"):
            yield _src(name[: -len(".init")], text, is_package=True)
        else:
            yield _src(name, text)


def test_checker_finds_cross_imports_at_any_depth() -> None:
    found = check(_tree(
        forecasters__init="",
        optimizer__init="",
        domain__init="",
        forecasters__a="def f():\n    from optimizer import b\n    return b\n",
        optimizer__b="import forecasters.a as fa\n",
        domain__c="if True:\n    from ..pipelines import x\n",
        pipelines__init="",
        pipelines__x="",
    ))
    assert ("pure_each_other", "forecasters/a.py", 2) in _rules(found)
    assert ("pure_each_other", "optimizer/b.py", 1) in _rules(found)
    assert ("domain", "domain/c.py", 2) in _rules(found)
    assert ("pure_shell", "domain/c.py", 2) in _rules(found)


def test_checker_finds_shell_imports_and_file_io() -> None:
    text = "\n".join([
        "import json, os",                          # 1
        "import numpy as np",                       # 2
        "from pathlib import Path",                 # 3
        "import pandas as pd",                      # 4
        "from json import dump",                    # 5
        "def f(p: Path, df):",                      # 6
        "    json.loads('1')",                      # 7 pure
        "    json.load(open(p))",                   # 8 two
        "    p.read_text()",                        # 9
        "    pd.read_parquet(p)",                   # 10
        "    df.to_csv()",                          # 11 pure: returns a string
        "    df.to_csv(p)",                         # 12
        "    np.save(p, 1)",                        # 13
        "    os.remove(p)",                         # 14
        "    dump({}, p)",                          # 15
        "    df.rename(columns={})",                # 16 pure
        "    import mlflow",                        # 17
        "    os.open(os.devnull, os.O_WRONLY)",     # 18 not data IO
        "import shutil",                            # 19
    ])
    found = _rules(check([_src("optimizer.m", text), _src("optimizer", "", True)]))
    io_lines = sorted(line for rule, _, line in found if rule == "pure_io")
    assert io_lines == [8, 8, 9, 10, 12, 13, 14, 15, 19]
    assert ("pure_shell", "optimizer/m.py", 17) in found
    # the same code in the shell is allowed
    assert check([_src("pipelines.m", text), _src("pipelines", "", True)]) == []


def test_checker_finds_circles_through_submodules_and_relative_imports() -> None:
    found = check(_tree(
        pipelines__init="",
        pipelines__stages__init="from pipelines.stages.queue import run\n",
        pipelines__stages__queue="def run():\n    from ..flows import go\n",
        pipelines__flows="from pipelines.stages import queue\n",   # `from pkg import mod` -> pkg.mod
        pipelines__a="import pipelines.b\n",
        pipelines__b="from . import c\n",
        pipelines__c="from pipelines.a import x\n",
        pipelines__d="from pipelines import a\n",                  # outside any circle
    ))
    cycles = [f for f in found if f.rule == "cycle"]
    assert len(cycles) == 2, cycles
    text = "\n".join(map(str, cycles))
    assert "['pipelines.flows', 'pipelines.stages.queue']" in text
    assert "pipelines.flows (pipelines/flows.py:1) -> pipelines.stages.queue (pipelines/stages/queue.py:2)" in text
    assert "['pipelines.a', 'pipelines.b', 'pipelines.c']" in text
    assert "pipelines.d" not in text


def test_checker_strongly_connected_components() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"f"}}
    comps = sorted(strongly_connected(graph))
    assert comps == [["a", "b", "c"], ["d", "e"], ["f"]]
    assert a_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_checker_finds_private_names() -> None:
    found = check(_tree(
        pipelines__init="",
        pipelines__risk="def _plt():\n    pass\nclass Page:\n    pass\n",
        pipelines__queue="\n".join([
            "from pipelines import risk",                 # 1
            "from pipelines.risk import _plt, Page",      # 2 private import
            "import pipelines.risk as R",                 # 3
            "def f(obj, row, page: Page, other: 'R.Page | None'):",  # 4
            "    risk._plt()",                            # 5 private call
            "    R._plt",                                 # 6 private use
            "    Page._build()",                          # 7 private method of an imported class
            "    obj._cache",                             # 8 not a module: fine
            "    row._replace(a=1)",                      # 9 namedtuple API: fine
            "    risk.__name__",                          # 10 dunder: fine
            "    page._draw()",                           # 11 private method of an instance of an imported class
            "    other._draw",                            # 12 the same through a string annotation
        ]),
        pipelines___helpers="def h():\n    pass\n",
        optimizer__init="",
        optimizer__m="from pipelines import _helpers\n",   # private module from outside: flagged
    ))
    priv = sorted(line for rule, path, line in _rules(found) if rule == "private" and path == "pipelines/queue.py")
    assert priv == [2, 5, 6, 7, 11, 12]
    assert ("private", "optimizer/m.py", 1) in _rules(found)
