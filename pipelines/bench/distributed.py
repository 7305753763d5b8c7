"""The benchmark's simulations on Dask, through Prefect's ``DaskTaskRunner`` (issue 17).

:func:`run_items` runs ``work(item, *args)`` for every item (the bench passes
:func:`pipelines.bench.run.run_item` and its :class:`~pipelines.bench.run.BenchItem` list) as one Prefect task of one flow
run (``bench-simulations``) whose task runner is ``prefect_dask.DaskTaskRunner``: on an existing
Dask scheduler (``tcp://HOST:PORT``; start one with ``dask scheduler`` and workers with
``dask worker tcp://HOST:PORT``), or on a local cluster it starts and stops (``local`` or
``local:N``: N worker processes, one thread each; default 2). Results come back in the items' order,
so ``bench.csv`` is the same as in-process: each simulation is deterministic (the MILP stops on its
work limit, DESIGN §6) and does not depend on the process that ran it.

Workers must import this project (same code, ``PYTHONPATH``) and, to report task runs, reach the
same Prefect API: against a real server (``PREFECT_API_URL``) that is cheap; in Prefect's ephemeral
mode every worker starts its own temporary server (43 s for a 3-s job measured, ../shared/STACK.md).
In a worker process started by a Dask nanny (daemonic) HiGHS runs inside the worker, under its own
time limit only (:func:`optimizer.solver.isolation_available`); the bench's work limit makes that
immaterial to the results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pipelines.io.errors import InputError
from pipelines.workspace.config import parse_dask


def task_runner(value: str):
    """The ``DaskTaskRunner`` for a ``--dask`` value (:func:`parse_dask`)."""
    from prefect_dask import DaskTaskRunner

    address, n = parse_dask(value)
    if address is not None:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": n, "threads_per_worker": 1, "processes": True,
                                          "dashboard_address": None})


#: Seconds to wait for a Dask scheduler's TCP port before ``--dask tcp://…`` is refused.
CONNECT_TIMEOUT_S = 5.0


def check_scheduler_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse a ``tcp://HOST:PORT`` no Dask scheduler listens on, in one line, before any flow starts.

    Raises:
        InputError: the host does not resolve or nothing accepts a TCP connection on the port within
            ``timeout_s`` (without this, distributed retries for 30 s and ends in a traceback).
    """
    import socket
    from urllib.parse import urlsplit

    u = urlsplit(address)
    try:
        with socket.create_connection((u.hostname or "", int(u.port or 0)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        raise InputError(f"--dask {address}: no Dask scheduler answers there ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split()) or 'no detail'}); start one with `dask scheduler` or use "
                         "--dask local[:N]") from None


def run_items(items: Sequence[Any], dask: str, work: Callable[..., Any], *args: Any) -> list[Any]:
    """``[work(item, *args) for item in items]``, each call one task of one Prefect flow run on Dask (``dask``: :func:`parse_dask`); results in the items' order.

    ``work`` must be a module-level function (it is pickled by reference to the workers). Raises
    :class:`InputError` for a bad ``dask`` value; a task's exception is re-raised here.
    """
    address, _ = parse_dask(dask)  # a bad value fails before Prefect is imported
    if address is not None:
        check_scheduler_reachable(address)
    from prefect import flow, task
    from prefect.cache_policies import NONE

    sim_task = task(work, name="bench-simulation", cache_policy=NONE, persist_result=False, retries=0)

    @flow(name="bench-simulations", task_runner=task_runner(dask), persist_result=False, log_prints=False)
    def simulations() -> list[Any]:
        futures = [sim_task.submit(item, *args) for item in items]
        return [f.result() for f in futures]

    return simulations()
