"""Schedules and the local-day rule of the Prefect deployments (DESIGN §7, case C25).

Clock rules:

- Re-planning is scheduled in **UTC** (:func:`replan_cron`, :func:`replan_schedule`) and each plan
  is labelled by its scheduled UTC slot (:mod:`pipelines.io.run_folder`), so a local day with 25 hours
  (autumn clock change) gets 25 hourly / 50 half-hourly plans and no UTC slot is planned twice.
- Nightly retraining follows the **local** clock (:func:`nightly_schedule`: cron in an IANA zone;
  Prefect 3.9 resolves a repeated wall time to its first occurrence). The flow also claims its
  local day in the marker file (:func:`claim_local_day`) so a second run for the same local day
  is skipped.

Imported by :mod:`pipelines.flows` (the local-day claim) and :mod:`pipelines.flows.deployments` (the
schedules), so neither imports the other for them.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from pipelines.config.settings import Settings, apply_env_defaults

apply_env_defaults()  # before prefect is imported (config.py: its environment is read at import)

from prefect.schedules import Cron  # noqa: E402
from prefect.server.schemas.schedules import CronSchedule  # noqa: E402

from pipelines.io.atomic import atomic_write_text  # noqa: E402
from pipelines.io.errors import InputError  # noqa: E402
from pipelines.io.run_folder import file_lock  # noqa: E402

#: Local days kept in the nightly marker file (older claims are dropped).
MARKER_DAYS_KEPT = 400


def local_day(ts: datetime, timezone: str) -> date:
    """The calendar day of the aware time ``ts`` on the clock of IANA ``timezone``.

    Raises:
        pipelines.io.errors.InputError: naive ``ts``.
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
    marker = Path(marker)
    with file_lock(marker.with_suffix(".lock")):
        days: list[str] = json.loads(marker.read_text()) if marker.exists() else []
        if day.isoformat() in days:
            return False
        atomic_write_text(marker, json.dumps(sorted(set(days) | {day.isoformat()})[-MARKER_DAYS_KEPT:]))
        return True


def nightly_schedule(settings: Settings) -> Cron:
    """Prefect schedule of the nightly retraining: ``nightly_cron`` in ``nightly_timezone``."""
    return Cron(settings.nightly_cron, timezone=settings.nightly_timezone)


def replan_cron(settings: Settings) -> str:
    """Cron string of the re-planning schedule (UTC): every ``replan_every_min`` minutes.

    Raises:
        pipelines.io.errors.InputError: an interval that does not divide the hour or is not a
            whole number of hours dividing the day.
    """
    m = settings.replan_every_min
    if m < 60 and 60 % m == 0:
        return f"*/{m} * * * *"
    if m % 60 == 0 and 24 % (m // 60) == 0:
        return f"0 */{m // 60} * * *"
    raise InputError(f"replan_every_min: expected a divisor of 60 or of 1440 in whole hours, got {m}")


def replan_schedule(settings: Settings) -> Cron:
    """Prefect schedule of re-planning: :func:`replan_cron` on the UTC clock."""
    return Cron(replan_cron(settings), timezone="UTC")


async def schedule_dates(cron: str, timezone: str, start: datetime, end: datetime) -> list[datetime]:
    """Dates the Prefect server's scheduler would create for ``cron`` in ``timezone`` in [start, end)."""
    dates = await CronSchedule(cron=cron, timezone=timezone).get_dates(start=start, end=end)
    return [datetime.fromtimestamp(d.timestamp(), tz=UTC) for d in dates if d < end]
