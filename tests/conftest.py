"""Session-wide isolation: no test writes into the clone's ``mlruns/`` (the operator's MLflow store and models).

Every test session points ``GPUPLAN_TRACKING_URI`` (and with it the MLflow artifacts, which go beside the
SQLite file, :func:`pipelines.config.settings.load_settings`) and ``GPUPLAN_MODELS_DIR`` at a temporary folder, so
a test that forgets its own store logs there, not into ``mlruns/``. A test's own fixture (``iso_env``,
``monkeypatch.setenv``) still wins for that test. At the end of the session the entries of ``mlruns/``
are compared with those at its start: anything new fails the session, naming what appeared.

Parallel runs (pytest-xdist, ``scripts/test.sh`` runs ``-n 2 --dist loadgroup``): a test that uses one of the
session daemons in :data:`DAEMON_GROUPS` (fixed ports, or a server whose start is too dear to pay once per worker)
gets ``@pytest.mark.xdist_group(<group>)``, so all its users run in one worker and the daemon starts once; a test
that uses a module-scoped fixture (a replay, a trained model) is grouped with the module's other users
(``module:<path>``), so the fixture is built once; tests marked ``heavy`` are handed out first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

#: Every Hypothesis test runs without a per-example deadline (Hypothesis' default 200 ms races real time at load
#: 4-8: "Unreliable test timings"), on fixed seeded examples (derandomize: a failure reproduces), and without the
#: example database (no ``.hypothesis/`` written into the clone by parallel workers). A test's own ``@settings``
#: still wins for what it sets.
settings.register_profile("gpuplan", deadline=None, derandomize=True, database=None)
settings.load_profile("gpuplan")

MLRUNS = Path(__file__).resolve().parents[1] / "mlruns"

#: Session fixture -> xdist group of every test that uses it (directly or through another fixture). The Slurm lab
#: (tests/pipelines/lab/conftest.py) and the lab Prometheus (test_prometheus_lab.py) listen on fixed ports of
#: 16800-16899 (scripts/slurm-lab.sh, scripts/prometheus-lab.sh); the PostgreSQL server (tests/pipelines/prod) takes
#: a free port, but its start and MLflow's schema migration cost ~30 s, paid once in one worker.
DAEMON_GROUPS = {"slurm_lab": "slurm-lab", "prom_lab": "prometheus-lab", "postgres": "postgres"}

#: The marker (pyproject.toml) of a test that takes about half a minute or more alone (measured with
#: ``--durations``): under xdist it is handed out first, so that no long test starts when the other worker has
#: nothing left to run.
HEAVY_MARK = "heavy"


_PREFECT_HOME: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Give this test process (each xdist worker: its own) a temporary ``PREFECT_HOME``, before any test module
    imports ``pipelines.flows`` (whose ``apply_env_defaults`` would default it to the clone's ``.prefect/``, where two
    workers' temporary Prefect servers would share one SQLite file ``gpuplan-ephemeral.db``)."""
    home = tempfile.mkdtemp(prefix="gpuplan-test-prefect-home-")
    _PREFECT_HOME.append(home)
    os.environ["PREFECT_HOME"] = home


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the temporary ``PREFECT_HOME`` of :func:`pytest_configure`."""
    while _PREFECT_HOME:
        shutil.rmtree(_PREFECT_HOME.pop(), ignore_errors=True)



def _group_of(item: pytest.Item) -> str | None:
    """The xdist group of ``item``: the :data:`DAEMON_GROUPS` group of a session daemon it uses, else
    ``module:<path>`` when it uses a module-scoped fixture (built once, in one worker, for all of the module's
    users: a 2-min replay or a trained model is not paid twice), else None (any worker)."""
    used = set(getattr(item, "fixturenames", ()))
    for fixture, group in DAEMON_GROUPS.items():
        if fixture in used:
            return group
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        if defs and defs[-1].scope == "module":
            return f"module:{item.nodeid.split('::', 1)[0]}"
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the xdist group of :func:`_group_of`, move :data:`HEAVY_MARK` tests first (stable: the
    rest keep their order), and under ``--dist loadgroup`` give every test with an ``xdist_group`` mark the
    ``<nodeid>@<group>`` id the xdist scheduler groups by.

    pytest-xdist 3.8 sets that suffix through ``item._nodeid``, which pytest 9.2 no longer reads (a node's id is
    ``item._id``, a ``NodeId``): its own suffix is lost and grouped tests were spread over both workers (two Slurm
    labs on the same ports). Here the id is set through pytest's own ``coerce_node_id``, once (an id already ending
    in ``@<group>`` is kept). xdist hands out groups with more tests first (``--loadscope-reorder``, its default),
    then single tests in collection order."""
    for item in items:
        group = _group_of(item)
        if group is not None and not any(True for _ in item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda it: it.get_closest_marker(HEAVY_MARK) is None)
    if not getattr(config.option, "loadgroup", False):  # set in xdist's workers only
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        nodeid = item.nodeid
        if not names or nodeid.rfind("@") > nodeid.rfind("]"):
            continue
        grouped = f"{nodeid}@{'_'.join(names)}"
        if hasattr(item, "_id"):
            item._id = coerce_node_id(grouped)
        else:  # pytest < 9.2
            item._nodeid = grouped
        assert item.nodeid == grouped, (item.nodeid, grouped)


def mlruns_entries(root: Path = MLRUNS) -> set[str]:
    """Relative paths of every file and folder under ``root`` down to run folders (3 levels), e.g.
    ``artifacts/gpuplan-plans/<run id>``; empty when ``root`` does not exist."""
    if not root.is_dir():
        return set()
    out = set()
    for depth in ("*", "*/*", "*/*/*"):
        out.update(str(p.relative_to(root)) for p in root.glob(depth))
    return out


@pytest.fixture(autouse=True)
def workspace_choice_restored():
    """Put ``$GPUPLAN_WORKSPACE`` back after each test.

    A command run in-process (typer's ``CliRunner``) with ``--workspace DIR`` sets it for its process
    (``pipelines.cli.support.use_workspace``), as the real command does; in the suite's one process it then leaked
    into later tests (``gpuplan train`` without ``--workspace`` trained on an ingest test's workspace).
    """
    before = os.environ.get("GPUPLAN_WORKSPACE")
    yield
    if before is None:
        os.environ.pop("GPUPLAN_WORKSPACE", None)
    else:
        os.environ["GPUPLAN_WORKSPACE"] = before


@pytest.fixture(scope="session", autouse=True)
def mlflow_outside_the_clone(tmp_path_factory):
    """Point the MLflow store and the model store of the whole session at a temporary folder; check ``mlruns/``."""
    before = mlruns_entries()
    root = tmp_path_factory.mktemp("session_mlflow")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUPLAN_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        mp.setenv("GPUPLAN_MODELS_DIR", str(root / "models"))
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.delenv("GPUPLAN_ARTIFACT_ROOT", raising=False)
        yield root
    new = sorted(mlruns_entries() - before)
    assert not new, (f"{len(new)} new entries in {MLRUNS} while the tests ran: a test that logged there (use a "
                     f"temporary store: the iso_env fixture or GPUPLAN_TRACKING_URI), or a gpuplan command run in "
                     f"this clone at the same time (run it elsewhere, or the suite again alone): {new[:10]}")
