"""The zone a traffic file carries: an IANA zone from a tz-aware dtype, or inferred from ISO offsets (DESIGN §4.4).

Pure: works on parsed instants and offsets; the tz database is read through :mod:`zoneinfo`.

Rule (field case F06): stamps that carry a zone set the seasonal clock when none is given.

* A tz-aware column whose zone is an IANA name (``America/New_York``) names the zone: status ``ok``.
* ISO offsets that switch (``-05:00`` then ``-04:00``) are matched against every IANA zone of the
  installed tz database: a zone matches when its UTC offset equals the file's offset at every stamp (so
  its transitions fall where the file's offset changes, and nowhere else inside the file's span). Among
  the matches (New York's 2025 pattern matches ~20 names: ``America/Toronto``, ``US/Eastern``,
  ``EST5EDT`` ...), the clock is

  1. a name in the tz database's canonical ``Area/Location`` form (tz-link.html, "Theory": areas are
     continents and oceans), not a backward-compatible alias such as ``US/Eastern``, ``EST5EDT``, ``CET``;
  2. among those, the CLDR golden zone of a metazone (:data:`GOLDEN_ZONES`, from CLDR
     ``common/supplemental/metaZones.xml``, ``mapZone territory="001"``), in that table's order;
  3. else the first in alphabetical order.

  All matches are listed in the diagnostics. No match: status ``degraded``, clock = the last stamp's
  offset (the offset that runs into the forecast).
* One offset throughout identifies only that offset: ``+00:00``/``Z`` is plain UTC (the default clock,
  status ``ok``: UTC stamps say nothing about a local clock); any other offset gives a fixed-offset clock
  named ``UTC-05:00`` and status ``degraded`` (a zone with DST would be an hour off for part of the
  year; the file may simply not span a clock change).
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache

import numpy as np
import pandas as pd

#: Areas of canonical tz database names (tz-link.html "Theory and pragmatics": continents and oceans).
CANONICAL_AREAS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe",
                   "Indian", "Pacific")

#: CLDR golden zones (``mapZone territory="001"`` in ``common/supplemental/metaZones.xml``) of metazones
#: with daylight saving time, in the order they are preferred when several match one file. CLDR names the
#: "golden zone" as the zone that exemplifies its metazone (e.g. Europe_Central -> Europe/Paris).
GOLDEN_ZONES = (
    "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles", "America/Juneau",
    "America/Halifax", "America/St_Johns", "America/Adak", "America/Godthab", "America/Miquelon",
    "America/Havana", "America/Santiago", "America/Asuncion", "America/Sao_Paulo", "Europe/London",
    "Europe/Dublin", "Europe/Paris", "Europe/Bucharest", "Atlantic/Canary", "Atlantic/Azores",
    "Asia/Jerusalem", "Asia/Tehran", "Australia/Sydney", "Australia/Adelaide", "Australia/Lord_Howe",
    "Pacific/Auckland", "Pacific/Chatham", "Pacific/Easter", "Pacific/Norfolk",
)

#: Names that are never candidates (not real zones).
_NOT_ZONES = frozenset({"localtime", "Factory", "posixrules"})


@dataclass(frozen=True)
class ZoneFinding:
    """What the stamps of a file say about their zone.

    Attributes:
        kind: ``"none"`` (naive stamps), ``"utc"`` (UTC / ``Z`` / ``+00:00`` only), ``"iana"`` (a zone
            identified), ``"fixed_offset"`` (one non-zero offset throughout), ``"unmatched"`` (switching
            offsets that no IANA zone reproduces).
        zone: the clock this finding gives: an IANA name, ``"UTC"``, or a fixed-offset name such as
            ``"UTC-05:00"``; None for ``"none"``.
        source: ``"dtype"`` (a tz-aware column) or ``"offsets"`` (ISO offsets in text) or ``"none"``.
        candidates: every IANA name that matches (``"iana"`` from offsets), sorted.
        offsets: distinct offsets seen, as ``"+HH:MM"`` text, in time order of first use.
        switches: UTC instants (ISO ``Z``) of the first stamp after each change of offset.
    """

    kind: str
    zone: str | None
    source: str
    candidates: tuple[str, ...] = ()
    offsets: tuple[str, ...] = ()
    switches: tuple[str, ...] = field(default_factory=tuple)

    @property
    def identified(self) -> bool:
        """True when the finding names a usable seasonal clock without doubt (IANA zone or plain UTC)."""
        return self.kind in ("iana", "utc")

    def describe(self) -> str:
        """One sentence saying what was found (used in messages and diagnostics)."""
        if self.kind == "none":
            return "the stamps carry no zone"
        if self.kind == "utc":
            return "the stamps are UTC"
        if self.source == "dtype":
            return f"the ts column's zone is {self.zone}"
        sw = ""
        if self.switches:
            shown = ", ".join(self.switches[:4]) + (" ..." if len(self.switches) > 4 else "")
            sw = f" switching at {shown}"
        offs = " -> ".join(self.offsets)
        if self.kind == "iana":
            others = [c for c in self.candidates if c != self.zone]
            more = (f"; {len(others)} other zone(s) match too ({', '.join(others[:5])}"
                    f"{' ...' if len(others) > 5 else ''})") if others else ""
            return f"UTC offsets {offs}{sw} match {self.zone}{more}"
        if self.kind == "fixed_offset":
            return (f"every stamp has offset {self.offsets[0]}: that identifies only the offset {self.zone}, "
                    "not an IANA zone")
        return f"UTC offsets {offs}{sw} match no IANA zone of the installed tz database"

    def to_dict(self) -> dict:
        """JSON-ready record: ``kind, zone, source, candidates, offsets, switches, found`` (the sentence)."""
        return {"kind": self.kind, "zone": self.zone, "source": self.source, "candidates": list(self.candidates),
                "offsets": list(self.offsets), "switches": list(self.switches), "found": self.describe()}


NO_ZONE = ZoneFinding(kind="none", zone=None, source="none")


def offset_name(offset_s: int) -> str:
    """``-18000 -> "UTC-05:00"`` (pandas accepts this name as a fixed-offset zone)."""
    return "UTC" + _hhmm(offset_s)


def _hhmm(offset_s: int) -> str:
    sign = "-" if offset_s < 0 else "+"
    m = abs(int(offset_s)) // 60
    return f"{sign}{m // 60:02d}:{m % 60:02d}"


def _iso(t: pd.Timestamp) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@lru_cache(maxsize=1)
def _zone_names() -> tuple[str, ...]:
    return tuple(sorted(z for z in zoneinfo.available_timezones() if z not in _NOT_ZONES))


def _rank(name: str) -> tuple[int, int, str]:
    canonical = name.split("/", 1)[0] in CANONICAL_AREAS and "/" in name
    golden = GOLDEN_ZONES.index(name) if name in GOLDEN_ZONES else len(GOLDEN_ZONES)
    return (0 if canonical else 1, golden, name)


def preferred_zone(candidates) -> str:
    """The clock among matching zones: canonical ``Area/Location`` first, then CLDR golden, then A-Z."""
    return min(candidates, key=_rank)


def zone_from_offsets(instants_utc: pd.DatetimeIndex, offsets_s: np.ndarray) -> ZoneFinding:
    """Identify the zone of stamps given as UTC instants with their written UTC offsets.

    Args:
        instants_utc: the stamps as UTC instants (tz-aware), shape ``(n,)``, any order.
        offsets_s: the offset written in each stamp, seconds east of UTC, shape ``(n,)``.

    Returns:
        A :class:`ZoneFinding` (module docstring for the rule).
    """
    order = np.argsort(instants_utc.asi8, kind="stable")
    inst = instants_utc[order]
    offs = np.asarray(offsets_s, dtype=np.int64)[order]
    change = np.flatnonzero(offs[1:] != offs[:-1]) + 1
    seen: list[str] = []
    for o in offs[np.r_[0, change]]:
        if _hhmm(o) not in seen:
            seen.append(_hhmm(o))
    switches = tuple(_iso(inst[i]) for i in change)
    if len(change) == 0:
        if offs[0] == 0:
            return ZoneFinding(kind="utc", zone="UTC", source="offsets", offsets=tuple(seen))
        return ZoneFinding(kind="fixed_offset", zone=offset_name(int(offs[0])), source="offsets",
                           offsets=tuple(seen))
    # cheap pre-filter on the stamps around each change (and the ends), then every stamp
    probe = np.unique(np.r_[0, len(offs) - 1, change, change - 1])
    probe_dt = [datetime.fromtimestamp(int(inst[i].timestamp()), tz=UTC) for i in probe]
    probe_off = offs[probe]
    survivors = []
    for name in _zone_names():
        try:
            z = zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):  # pragma: no cover - damaged tz database
            continue
        if all(_off_s(t, z) == o for t, o in zip(probe_dt, probe_off, strict=True)):
            survivors.append(name)
    naive = inst.tz_localize(None)
    matches = []
    for name in survivors:
        local = inst.tz_convert(name).tz_localize(None)
        if np.array_equal(((local - naive) // pd.Timedelta(seconds=1)).to_numpy(np.int64), offs):
            matches.append(name)
    if not matches:
        return ZoneFinding(kind="unmatched", zone=offset_name(int(offs[-1])), source="offsets",
                           offsets=tuple(seen), switches=switches)
    return ZoneFinding(kind="iana", zone=preferred_zone(matches), source="offsets", candidates=tuple(sorted(matches)),
                       offsets=tuple(seen), switches=switches)


def _off_s(t: datetime, z: tzinfo) -> int:
    off = t.astimezone(z).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def zone_from_dtype(tz: tzinfo, instants_utc: pd.DatetimeIndex) -> ZoneFinding:
    """The zone of a tz-aware column (``DatetimeTZDtype.tz``): its IANA name, UTC, or a fixed offset.

    A zone object without an IANA name (``datetime.timezone(timedelta(hours=-5))``, pytz ``FixedOffset``)
    is judged by its offsets at the stamps, like ISO text (:func:`zone_from_offsets`).
    """
    name = getattr(tz, "key", None) or getattr(tz, "zone", None) or str(tz)
    if name in ("UTC", "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Zulu", "Etc/Universal", "Etc/Zulu"):
        return ZoneFinding(kind="utc", zone="UTC", source="dtype", offsets=("+00:00",))
    if name in _zone_names():
        return ZoneFinding(kind="iana", zone=name, source="dtype", candidates=(name,))
    local = instants_utc.tz_convert(tz).tz_localize(None)
    offs = ((local - instants_utc.tz_localize(None)) // pd.Timedelta(seconds=1)).to_numpy(np.int64)
    found = zone_from_offsets(instants_utc, offs)
    return ZoneFinding(kind=found.kind, zone=found.zone, source="dtype", candidates=found.candidates,
                       offsets=found.offsets, switches=found.switches)


def parse_offsets_s(text: pd.Series) -> np.ndarray:
    """Seconds east of UTC written at the end of ISO 8601 stamps (``Z``, ``+01:00``, ``-0500``); shape ``(n,)``.

    Stamps must already be known to carry an offset (ingest checks that); source of the forms: ISO 8601
    / RFC 3339 section 5.6 ``time-offset``.
    """
    m = text.str.extract(r"(?P<z>[Zz])$|(?P<sign>[+-])(?P<h>\d{2}):?(?P<m>\d{2})$")
    sign = np.where(m["sign"].to_numpy() == "-", -1, 1)
    h = pd.to_numeric(m["h"], errors="coerce").fillna(0).to_numpy(np.int64)
    mi = pd.to_numeric(m["m"], errors="coerce").fillna(0).to_numpy(np.int64)
    return sign * (h * 3600 + mi * 60)


def zone_offset_at(zone: str, when: pd.Timestamp) -> str:
    """``"+HH:MM"`` offset of ``zone`` at the instant ``when`` (for messages)."""
    off = pd.Timestamp(when).tz_convert(zone).utcoffset() or timedelta(0)
    return _hhmm(int(off.total_seconds()))


def resolve_clock(given: str | None, found: ZoneFinding) -> tuple[str, str, str | None]:
    """The seasonal clock from a given zone and what the stamps carry: ``(clock, status, message)``.

    Precedence: a given zone (``--timezone``, a service's configured ``timezone``) always wins; the message
    then notes a file zone that disagrees. Without one: the zone the file carries (:class:`ZoneFinding`);
    ``status`` is ``"degraded"`` when that is only an offset (``fixed_offset``) or matches no zone
    (``unmatched``); plain UTC stamps (or none at all) give the default clock ``"UTC"``.
    ``status`` is ``"ok"`` or ``"degraded"``; ``message`` is None when there is nothing to say.
    """
    if given is not None:
        if found.kind in ("none", "utc"):
            return given, "ok", None
        agrees = given in found.candidates or given == found.zone
        if agrees:
            return given, "ok", None
        return given, "ok", (f"timezone {given} (given) is the seasonal clock; {found.describe()}, "
                             "which the given zone overrides")
    if found.kind in ("none", "utc"):
        return "UTC", "ok", None
    if found.kind == "iana":
        return found.zone or "UTC", "ok", f"seasonal clock {found.zone} from the file: {found.describe()}"
    return found.zone or "UTC", "degraded", (
        f"seasonal clock is the fixed offset {found.zone}: {found.describe()}; a zone with daylight saving "
        "time would put the daily peak an hour off for part of the year; declare the IANA zone "
        "(--timezone, or the service's timezone)")
