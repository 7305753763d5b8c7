"""Prefect deployments served by ``gpuplan serve`` (DESIGN §7, case C25).

| deployment | flow | schedule |
|---|---|---|
| ``nightly-retrain`` | ``train_forecasters`` | cron ``Settings.nightly_cron`` (02:00) in ``Settings.nightly_timezone`` (IANA) |
| ``replan`` | ``plan`` | every ``Settings.replan_every_min`` (30) min, on the UTC clock |
| ``benchmark`` | ``benchmark`` | none: on demand (UI "Run" or ``prefect deployment run 'benchmark/benchmark'``) |
| ``whatif`` | ``whatif`` | none: on demand (UI "Run" > "Custom run" with the changes as parameters) |

Clock rules (case C25):

- Re-planning is scheduled in **UTC** and each plan is labelled by its scheduled UTC slot, so a
  local day with 25 hours (autumn clock change) gets 25 hourly / 50 half-hourly plans and no
  UTC slot is planned twice. (An hourly cron on a DST clock would fire on "every new schedule
  hour", leaving a two-hour pause when clocks go back.)
- Nightly retraining follows the **local** clock (cron in the IANA zone; Prefect 3.9 resolves a
  repeated wall time to its first occurrence). The flow also claims its local day in the
  catalog's nightly marker (:func:`pipelines.flows.schedules.claim_local_day`) so a second run for the
  same local day, however it arises (DST, manual re-run, a restarted server re-creating runs), is
  skipped.
- The schedules and the local-day helpers live in :mod:`pipelines.flows.schedules`.
- Schedules need a scheduler: the temporary server Prefect starts in ephemeral mode has none
  (scheduled runs would never start). :func:`require_persistent_server` refuses to serve unless
  ``PREFECT_API_URL`` points at a reachable, persistent ``prefect server``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import urllib.error
import urllib.request
from typing import Any

from pipelines.config.settings import Settings, apply_env_defaults

apply_env_defaults()  # before prefect is imported (config.py)

from prefect.deployments.runner import EntrypointType  # noqa: E402
from prefect.runner import Runner  # noqa: E402
from prefect.settings import PREFECT_API_URL  # noqa: E402

from pipelines.flows.bench import benchmark  # noqa: E402
from pipelines.flows.plan import plan_flow  # noqa: E402
from pipelines.flows.retrain import train_forecasters  # noqa: E402
from pipelines.flows.schedules import nightly_schedule, replan_schedule  # noqa: E402
from pipelines.flows.whatif import whatif_flow  # noqa: E402
from pipelines.io.errors import InputError  # noqa: E402
from pipelines.tracking import store as tracking_store  # noqa: E402

SERVE_HINT = (
    "start one with `prefect server start --host 127.0.0.1 --port 4200` and set "
    "PREFECT_API_URL=http://127.0.0.1:4200/api (see docs/operations.md)"
)


def require_persistent_server(api_url: str | None = None, timeout_s: float = 5.0) -> str:
    """Return the Prefect API URL if it is a reachable persistent server; refuse otherwise.

    Raises:
        pipelines.io.errors.InputError: ``PREFECT_API_URL`` is unset (Prefect would start a
            temporary server with no scheduler, so scheduled runs would never start), or the
            server does not answer ``/health``.
    """
    url = api_url if api_url is not None else os.environ.get("PREFECT_API_URL", "")
    if not url:
        url = PREFECT_API_URL.value() or ""
    if not url:
        raise InputError("PREFECT_API_URL is not set: a temporary Prefect server has no scheduler, so the "
                         f"nightly and 30-min schedules would never run; {SERVE_HINT}")
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout_s) as resp:
            if resp.status != 200:
                raise InputError(f"Prefect server at {url} answered /health with {resp.status}; {SERVE_HINT}")
    except (urllib.error.URLError, OSError) as exc:
        raise InputError(f"Prefect server at {url} is not reachable ({exc}); {SERVE_HINT}") from exc
    return url


#: The deployments ``gpuplan serve`` serves: deployment's old (plain) name -> its flow's name.
DEPLOYMENT_FLOWS = {"nightly-retrain": "train_forecasters", "replan": "plan", "benchmark": "benchmark",
                    "whatif": "whatif"}


def deployment_name(base: str, settings: Settings) -> str:
    """The Prefect deployment name of ``base`` (a key of :data:`DEPLOYMENT_FLOWS`) for ``settings.workspace_dir``.

    ``<base>-<workspace key>`` (:func:`pipelines.tracking.store.workspace_key`: folder name and the first 12
    hex digits of the workspace id), e.g. ``replan-gpuplan-1a2b3c4d5e6f``: two workspaces served on one Prefect
    server keep their own deployments (a deployment is upserted by ``flow/name``: one shared name would make
    the last ``gpuplan serve`` overwrite the other's workspace parameter and schedules). Every worker of one
    workspace gets the same name (Prefect gives each run to one of them). The shipped demo keeps ``base``.
    """
    key = tracking_store.workspace_key(settings.workspace_dir)
    return base if key is None else f"{base}-{key}"


async def _pause_deployments(names: list[str], workspace: str | None = None) -> list[str]:
    """Pause the deployments ``names`` (``flow/name``) that exist and run; returns the ones paused now.

    With ``workspace``, only a deployment whose ``workspace`` parameter is that folder is paused.
    Idempotent: an absent or already paused deployment is skipped.
    """
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    paused: list[str] = []
    async with get_client() as client:
        for name in names:
            try:
                dep = await client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            if dep.paused or (workspace is not None and (dep.parameters or {}).get("workspace") != workspace):
                continue
            await client.pause_deployment(dep.id)
            paused.append(name)
    return paused


def _served_names(settings: Settings) -> list[str]:
    """``flow/name`` of every deployment ``gpuplan serve`` serves for ``settings.workspace_dir``."""
    return [f"{flow}/{deployment_name(base, settings)}" for base, flow in DEPLOYMENT_FLOWS.items()]


async def _pause_old_deployments(settings: Settings) -> list[str]:
    """Pause this workspace's deployments still registered under their old plain names; returns ``flow/name`` of each.

    An old deployment is this workspace's when its ``workspace`` parameter is the workspace's folder (the
    nightly-retrain and replan deployments carry it); its schedules would otherwise keep creating runs that
    no worker of this version polls. Paused, not deleted: its run history stays in the UI.
    """
    old = [f"{flow}/{base}" for base, flow in DEPLOYMENT_FLOWS.items() if deployment_name(base, settings) != base]
    return await _pause_deployments(old, workspace=str(settings.workspace_dir))


def build_deployments(settings: Settings, with_schedules: bool = True) -> list[Any]:
    """The runner deployments (nightly-retrain, replan, benchmark, whatif), module entrypoints.

    Named by :func:`deployment_name` (keyed by the workspace id; the plain names for the shipped demo).

    The scheduled ones carry their schedule's zone as a tag (``tz:Europe/London``, ``tz:UTC``): the
    Prefect 3.9 UI prints a cron as "At 02:00 AM every day" without its zone, and shows "Scheduled for"
    in the browser's zone. The nightly and replan deployments take the workspace as a parameter (default
    ``settings.workspace_dir``: ``gpuplan serve --workspace DIR``); a run triggered from the UI may
    name another.
    """
    ep = EntrypointType.MODULE_PATH
    nightly = train_forecasters.to_deployment(
        name=deployment_name("nightly-retrain", settings), schedules=[nightly_schedule(settings)] if with_schedules else None,
        description=f"Refit the job forecasters nightly at {settings.nightly_cron} "
                    f"({settings.nightly_timezone}); one run per local day.",
        tags=["gpuplan", "training", f"tz:{settings.nightly_timezone}"], entrypoint_type=ep,
        parameters={"workspace": str(settings.workspace_dir)})
    replan = plan_flow.to_deployment(
        name=deployment_name("replan", settings), schedules=[replan_schedule(settings)] if with_schedules else None,
        description=f"Re-plan the 24 h horizon every {settings.replan_every_min} min (UTC slots).",
        tags=["gpuplan", "plan", "tz:UTC"], entrypoint_type=ep, parameters={"workspace": str(settings.workspace_dir)})
    bench = benchmark.to_deployment(
        name=deployment_name("benchmark", settings), description="Rolling-horizon benchmark of the planners (on demand).",
        tags=["gpuplan", "benchmark"], entrypoint_type=ep)
    whatif = whatif_flow.to_deployment(
        name=deployment_name("whatif", settings), description="What-if on a published plan: re-plan it with more GPUs, a drained node, "
        "failed GPUs, added or cancelled jobs, new priorities or scaled demand (Custom run), and see which jobs "
        "move and why (artifacts 'whatif' and 'whatif-jobs').",
        tags=["gpuplan", "whatif"], entrypoint_type=ep)
    return [nightly, replan, bench, whatif]


#: The line ``gpuplan serve`` prints on standard error once the runner polls for runs (its
#: SIGTERM handler is installed by then): tests and supervisors wait for it, never for a time.
READY_LINE = "gpuplan serve: ready, polling for runs (SIGTERM or Ctrl-C pauses the schedules and stops)"


class _ServeRunner(Runner):
    """Prefect's :class:`~prefect.runner.Runner` that says when it is ready and stops promptly on SIGTERM.

    Prefect 3.9's own SIGTERM handler (``Runner.handle_sigterm``) schedules ``astop`` on the runner's
    loop, which waits for the polling loops to notice; an operator's ``kill PID`` took 20 s and
    then a SIGKILL (issue 33). Here SIGTERM takes the Ctrl-C path: ``KeyboardInterrupt`` in the
    main thread unwinds ``Runner.start``, whose ``__aexit__`` pauses the schedules
    (``pause_on_shutdown``), as the docs promise for Ctrl-C.
    """

    async def __aenter__(self) -> _ServeRunner:
        await super().__aenter__()
        print(READY_LINE, file=sys.stderr, flush=True)
        return self

    def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
        """SIGTERM: raise ``KeyboardInterrupt`` in the main thread (the Ctrl-C shutdown)."""
        print("gpuplan serve: SIGTERM received, pausing the schedules and stopping", file=sys.stderr, flush=True)
        raise KeyboardInterrupt


def serve(settings: Settings, limit: int | None = 2) -> None:
    """Serve the deployments against a persistent Prefect server (blocks until SIGTERM or Ctrl-C).

    Prints :data:`READY_LINE` once polling; on SIGTERM or Ctrl-C the schedules are paused and the call
    returns, the served deployments paused by name after the runner stops (``tests/pipelines/flows/
    test_serve_sigterm.py``).

    Raises:
        pipelines.io.errors.InputError: no persistent server (see :func:`require_persistent_server`).
    """
    require_persistent_server()
    tracking_store.init_store(settings)  # once, before any run can fan out
    for old in asyncio.run(_pause_old_deployments(settings)):  # paused once: said once
        print(f"gpuplan serve: Prefect deployment {old} (its name before workspace ids) of {settings.workspace_dir} "
              f"paused; served now as {old.split('/')[0]}/{deployment_name(old.split('/')[1], settings)}",
              file=sys.stderr, flush=True)
    runner = _ServeRunner(pause_on_shutdown=True, limit=limit)
    for deployment in build_deployments(settings, with_schedules=settings.serve_schedules):
        runner.add_deployment(deployment)
    try:
        asyncio.run(runner.start())
    except KeyboardInterrupt:
        # Runner.__aexit__ pauses the schedules only when the interrupt lands in the main task; raised
        # inside another task, asyncio.run cancels the main task and the pause can be skipped (CI, stop 42).
        # Pausing here, on a fresh loop and client, does not depend on where the interrupt landed.
        asyncio.run(_pause_deployments(_served_names(settings)))
        print("gpuplan serve: stopped", file=sys.stderr, flush=True)

