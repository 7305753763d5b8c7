"""Prefect deployments served by ``gpuplan serve`` (DESIGN §7, case C25).

| deployment | flow | schedule |
|---|---|---|
| ``nightly-retrain`` | ``train_forecasters`` | cron ``Settings.nightly_cron`` (02:00) in ``Settings.nightly_timezone`` (IANA) |
| ``replan`` | ``plan`` | every ``Settings.replan_every_min`` (30) min, on the UTC clock |
| ``benchmark`` | ``benchmark`` | none: on demand (UI "Run" or ``prefect deployment run 'benchmark/benchmark'``) |

Clock rules (case C25):

- Re-planning is scheduled in **UTC** and each plan is labelled by its scheduled UTC slot, so a
  local day with 25 hours (autumn clock change) gets 25 hourly / 50 half-hourly plans and no
  UTC slot is planned twice. (An hourly cron on a DST clock would fire on "every new schedule
  hour", leaving a two-hour pause when clocks go back.)
- Nightly retraining follows the **local** clock (cron in the IANA zone; Prefect 3.9 resolves a
  repeated wall time to its first occurrence). The flow also claims its local day in
  ``models/nightly_days.json`` (:func:`claim_local_day`) so a second run for the same local day,
  however it arises (DST, manual re-run, a restarted server re-creating runs), is skipped.
- Schedules need a scheduler: the temporary server Prefect starts in ephemeral mode has none
  (scheduled runs would never start). :func:`require_persistent_server` refuses to serve unless
  ``PREFECT_API_URL`` points at a reachable, persistent ``prefect server``.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pipelines.config import Settings
from pipelines.errors import InputError

SERVE_HINT = (
    "start one with `prefect server start --host 127.0.0.1 --port 4200` and set "
    "PREFECT_API_URL=http://127.0.0.1:4200/api (see docs/operations.md)"
)


def local_day(ts: datetime, timezone: str) -> date:
    """The calendar day of the aware time ``ts`` on the clock of IANA ``timezone``.

    Raises:
        pipelines.errors.InputError: naive ``ts``.
    """
    if ts.tzinfo is None:
        raise InputError(f"timestamp {ts.isoformat()} has no time zone")
    return ts.astimezone(ZoneInfo(timezone)).date()


def runs_per_local_day(times: list[datetime], timezone: str) -> list[datetime]:
    """Keep the first scheduled time of each local day (the nightly-retrain rule), in order."""
    seen: set[date] = set()
    out = []
    for t in sorted(times):
        d = local_day(t, timezone)
        if d not in seen:
            seen.add(d)
            out.append(t)
    return out


def claim_local_day(marker: Path, day: date) -> bool:
    """Record ``day`` in the JSON marker file; False when it was already claimed.

    Atomic across processes (exclusive ``fcntl`` lock, temp file + ``os.replace``).
    """
    from pipelines.atomic import atomic_write_text
    from pipelines.run_folder import file_lock

    marker = Path(marker)
    with file_lock(marker.with_suffix(".lock")):
        days: list[str] = json.loads(marker.read_text()) if marker.exists() else []
        if day.isoformat() in days:
            return False
        atomic_write_text(marker, json.dumps(sorted(set(days) | {day.isoformat()})[-400:]))
        return True


def nightly_schedule(settings: Settings) -> Any:
    """Prefect schedule of the nightly retraining: ``nightly_cron`` in ``nightly_timezone``."""
    from prefect.schedules import Cron

    return Cron(settings.nightly_cron, timezone=settings.nightly_timezone)


def replan_cron(settings: Settings) -> str:
    """Cron string of the re-planning schedule (UTC): every ``replan_every_min`` minutes.

    Raises:
        pipelines.errors.InputError: an interval that does not divide the hour or is not a
            whole number of hours dividing the day.
    """
    m = settings.replan_every_min
    if m < 60 and 60 % m == 0:
        return f"*/{m} * * * *"
    if m % 60 == 0 and 24 % (m // 60) == 0:
        return f"0 */{m // 60} * * *"
    raise InputError(f"replan_every_min: expected a divisor of 60 or of 1440 in whole hours, got {m}")


def replan_schedule(settings: Settings) -> Any:
    """Prefect schedule of re-planning: :func:`replan_cron` on the UTC clock."""
    from prefect.schedules import Cron

    return Cron(replan_cron(settings), timezone="UTC")


async def schedule_dates(cron: str, timezone: str, start: datetime, end: datetime) -> list[datetime]:
    """Dates the Prefect server's scheduler would create for ``cron`` in ``timezone`` in [start, end)."""
    from prefect.server.schemas.schedules import CronSchedule

    dates = await CronSchedule(cron=cron, timezone=timezone).get_dates(start=start, end=end)
    return [datetime.fromtimestamp(d.timestamp(), tz=UTC) for d in dates if d < end]


def require_persistent_server(api_url: str | None = None, timeout_s: float = 5.0) -> str:
    """Return the Prefect API URL if it is a reachable persistent server; refuse otherwise.

    Raises:
        pipelines.errors.InputError: ``PREFECT_API_URL`` is unset (Prefect would start a
            temporary server with no scheduler, so scheduled runs would never start), or the
            server does not answer ``/health``.
    """
    import urllib.error
    import urllib.request

    url = api_url if api_url is not None else os.environ.get("PREFECT_API_URL", "")
    if not url:
        from prefect.settings import PREFECT_API_URL

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


def build_deployments(settings: Settings, with_schedules: bool = True) -> list[Any]:
    """The three runner deployments (nightly-retrain, replan, benchmark), module entrypoints."""
    from prefect.deployments.runner import EntrypointType

    from pipelines.flows import benchmark, plan_flow, train_forecasters

    ep = EntrypointType.MODULE_PATH
    nightly = train_forecasters.to_deployment(
        name="nightly-retrain", schedules=[nightly_schedule(settings)] if with_schedules else None,
        description=f"Refit the job forecasters nightly at {settings.nightly_cron} "
                    f"({settings.nightly_timezone}); one run per local day.",
        tags=["gpuplan", "training"], entrypoint_type=ep)
    replan = plan_flow.to_deployment(
        name="replan", schedules=[replan_schedule(settings)] if with_schedules else None,
        description=f"Re-plan the 24 h horizon every {settings.replan_every_min} min (UTC slots).",
        tags=["gpuplan", "plan"], entrypoint_type=ep)
    bench = benchmark.to_deployment(
        name="benchmark", description="Rolling-horizon benchmark of the planners (on demand).",
        tags=["gpuplan", "benchmark"], entrypoint_type=ep)
    return [nightly, replan, bench]


def serve(settings: Settings, limit: int | None = 2) -> None:
    """Serve the deployments against a persistent Prefect server (blocks until interrupted).

    Raises:
        pipelines.errors.InputError: no persistent server (see :func:`require_persistent_server`).
    """
    require_persistent_server()
    from prefect import serve as prefect_serve

    from pipelines import tracking

    tracking.init_store(settings)  # once, before any run can fan out
    prefect_serve(*build_deployments(settings, with_schedules=settings.serve_schedules), limit=limit)

