"""Plan slots: the planning step a time falls in, its label in run folder names, and the slots a re-plan covers.

A slot is a step-aligned UTC instant (``slot_start``), written ``20250316T1600Z`` (``slot_label``);
:mod:`pipelines.io.run_folder` names run folders ``<slot>_<run id>``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipelines.io.errors import InputError

_SLOT_FMT = "%Y%m%dT%H%MZ"


def as_utc(ts: datetime) -> datetime:
    """``ts`` in UTC.

    Raises:
        InputError: ``ts`` has no time zone.
    """
    if ts.tzinfo is None:
        raise InputError(f"timestamp {ts.isoformat()} has no time zone; expected an aware UTC time")
    return ts.astimezone(UTC)


def slot_start(ts: datetime, step_minutes: int = 30) -> datetime:
    """Floor an aware timestamp to its UTC planning slot (``step_minutes`` grid from midnight UTC).

    Raises:
        pipelines.io.errors.InputError: naive timestamp, or ``step_minutes`` not dividing a day.
    """
    if step_minutes <= 0 or (24 * 60) % step_minutes:
        raise InputError(f"step_minutes: expected a divisor of 1440, got {step_minutes}")
    ts = as_utc(ts)
    day = ts.replace(hour=0, minute=0, second=0, microsecond=0)
    minutes = (ts - day) // timedelta(minutes=1)
    return day + timedelta(minutes=minutes - minutes % step_minutes)


def slot_label(ts: datetime, step_minutes: int = 30) -> str:
    """UTC slot label of a timestamp, e.g. ``20251026T0130Z`` (sorts chronologically)."""
    return slot_start(ts, step_minutes).strftime(_SLOT_FMT)


def parse_slot(label: str) -> datetime:
    """Inverse of :func:`slot_label` (aware UTC datetime).

    Raises:
        pipelines.io.errors.InputError: not a slot label.
    """
    try:
        return datetime.strptime(label, _SLOT_FMT).replace(tzinfo=UTC)
    except ValueError as exc:
        raise InputError(f"slot label {label!r}: expected YYYYMMDDTHHMMZ") from exc


def replan_slots(start: datetime, end: datetime, step_minutes: int = 30) -> list[str]:
    """Labels of every UTC slot with start in ``[start, end)`` on the ``step_minutes`` grid.

    This is the set of plans a re-planning schedule in UTC must produce: one per slot,
    whatever the local clock does (a 25-hour autumn day in Europe/London has 25 hourly slots).
    """
    first = slot_start(start, step_minutes)
    if first < as_utc(start):
        first += timedelta(minutes=step_minutes)
    out: list[str] = []
    t = first
    while t < as_utc(end):
        out.append(t.strftime(_SLOT_FMT))
        t += timedelta(minutes=step_minutes)
    return out
