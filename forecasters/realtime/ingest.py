"""Ingest hourly traffic: zones, off-grid stamps, duplicates, DST, gaps, outliers (DESIGN §3, §4.4).

Pure: takes a frame, returns a regular UTC hourly series plus a diagnostics record. No file IO.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.realtime.shift import ShiftSettings, detect_level_shift
from forecasters.realtime.zones import (
    NO_ZONE,
    ZoneFinding,
    parse_offsets_s,
    resolve_clock,
    zone_from_dtype,
    zone_from_offsets,
)

#: Off-grid bucketing rules (``offgrid_rule``). ``max`` is the default: capacity planning must not
#: average away peaks (cases C05).
OFFGRID_RULES = ("max", "mean", "last")

_AWARE_RE = r"(?:Z|z|[+-]\d{2}:?\d{2})$"


@dataclass(frozen=True)
class IngestSettings:
    """Documented ingest settings.

    Attributes:
        max_missing_share: fail when more than this share of the hourly grid is missing (C04; 0.10).
        interp_max_gap_h: gaps up to this many hours are imputed by linear interpolation in time; longer
            gaps by the mean of the values 24 h before and 24 h after the hour (the same hour of the
            neighbouring days, whichever exist), repeated outward, then linear interpolation as a last
            resort (default 2 h).
        outlier_z: an hour is an outlier when its deviation from the median of the same hour-of-day over
            the surrounding ±3 days exceeds ``outlier_z`` robust standard deviations (1.4826 × MAD of
            all such deviations) (default 6.0). Outliers are listed and masked out of the profile fit;
            their values are kept in the series. The rule runs on the level-adjusted series: hours from the
            start of a detected level shift on are divided by its factor first, so a new level is followed,
            not flagged hour by hour, and a spike inside it is still flagged.
        level_shift: :class:`forecasters.realtime.shift.ShiftSettings` of the level-shift test (F09), or
            None to skip it.
    """

    max_missing_share: float = 0.10
    interp_max_gap_h: int = 2
    outlier_z: float = 6.0
    level_shift: ShiftSettings | None = ShiftSettings()


def ingest(
    df: pd.DataFrame,
    timezone: str | None,
    offgrid_rule: str = "max",
    settings: IngestSettings | None = None,
) -> tuple[pd.Series, dict]:
    """Turn a traffic frame into a regular hourly UTC series with a diagnostics record.

    Args:
        df: rows with ``ts`` (text, datetime64 or tz-aware datetime; naive stamps need ``timezone``),
            ``value`` (traffic per hour, >= 0, NaN = missing) and optional ``service`` (one service only).
            Extra columns are ignored.
        timezone: IANA zone of naive stamps and the service's local clock (seasonal clock). Precedence:
            a given zone always wins; with ``None``, the zone the stamps carry sets the clock (an IANA zone
            of a tz-aware column, or one inferred from ISO offsets that switch at DST dates,
            :mod:`forecasters.realtime.zones`), else UTC. ``None`` with naive stamps is refused.
        offgrid_rule: how several stamps in one UTC hour combine: ``"max"`` (default), ``"mean"`` or
            ``"last"`` (latest stamp).
        settings: :class:`IngestSettings`; defaults when ``None``.

    Returns:
        ``(series, diagnostics)``. ``series``: float64, index = every UTC hour from the first to the last
        bucket (tz UTC, freq ``h``), missing hours imputed (no NaN). ``diagnostics`` has the keys of the
        ``gpuplan profile`` JSON contract: ``rows_in``, ``hours``, ``missing_hours``, ``longest_gap_h``,
        ``duplicates_dropped``, ``ambiguous_hours`` (rows whose local time occurred twice, resolved by
        file order: first occurrence = earlier UTC instant), ``nonexistent_hours`` (always 0: such rows
        are rejected), ``off_grid_stamps``, ``outliers`` (ISO UTC stamps), ``constant``; plus
        ``missing_share``, ``imputed`` (ISO UTC stamps of imputed hours), ``offgrid_rule``,
        ``imputation``; ``timezone`` (the seasonal clock to use: the given zone, else the file's, else
        ``"UTC"``), ``timezone_given``, ``zone`` (what the stamps carry,
        :meth:`forecasters.realtime.zones.ZoneFinding.to_dict`, plus ``clock``, ``status`` ``ok``/``degraded``
        and ``message`` (None or one sentence)); ``level_shift`` (None or
        :meth:`forecasters.realtime.shift.LevelShift.to_dict` plus ``message``).

    Raises:
        forecasters.errors.InputError: missing column, non-numeric/negative value, naive stamps without a
            zone (asks for it), mixed naive/aware stamps, a non-existent local time (names it), conflicting
            duplicate values (names the UTC hour and both values), several services, empty input, or a
            missing share above ``settings.max_missing_share`` (states the share and the longest gap).
    """
    st = settings or IngestSettings()
    _check_frame(df, offgrid_rule)
    rows_in = int(len(df))
    values = _numeric_values(df["value"])
    ts_utc, ambiguous, found = _to_utc(df["ts"], timezone)
    clock, zone_status, zone_message = resolve_clock(timezone, found)

    frame = pd.DataFrame({"ts": ts_utc, "value": values, "order": np.arange(rows_in)})
    frame, duplicates_dropped = _drop_duplicates(frame)
    off_grid = int((frame["ts"] != frame["ts"].dt.floor("h")).sum())
    frame["hour"] = frame["ts"].dt.floor("h")
    hourly = _hourly_values(frame, offgrid_rule)

    grid = pd.date_range(frame["hour"].min(), frame["hour"].max(), freq="h", tz="UTC")
    series = hourly.reindex(grid).astype("float64")
    series.index.name = "ts"
    missing = series.isna().to_numpy()
    n_missing = int(missing.sum())
    longest = _longest_run(missing)
    share = n_missing / len(grid)
    if n_missing == len(grid):
        raise InputError("traffic: every value is missing")
    if share > st.max_missing_share:
        raise InputError(f"traffic: {n_missing} of {len(grid)} hours missing ({share:.2%}) exceeds the limit "
                         f"{st.max_missing_share:.0%}; longest gap {longest} h")
    imputed_idx = series.index[missing]
    series = _impute(series, st.interp_max_gap_h)
    observed = series[~missing]
    constant = bool(observed.max() == observed.min())
    shift = None if constant or st.level_shift is None else detect_level_shift(series, clock, st.level_shift)
    adjusted = series
    if shift is not None:  # follow the new level: compare hours on the old level's scale
        adjusted = series.where(series.index < shift.since, series / shift.factor)
    outliers = [] if constant else _outliers(adjusted, missing, st.outlier_z)

    diagnostics = {
        "rows_in": rows_in,
        "hours": int(len(grid)),
        "missing_hours": n_missing,
        "longest_gap_h": int(longest),
        "duplicates_dropped": int(duplicates_dropped),
        "ambiguous_hours": int(ambiguous),
        "nonexistent_hours": 0,
        "off_grid_stamps": off_grid,
        "outliers": [_iso(t) for t in outliers],
        "constant": constant,
        "missing_share": share,
        "imputed": [_iso(t) for t in imputed_idx],
        "offgrid_rule": offgrid_rule,
        "imputation": f"linear for gaps <= {st.interp_max_gap_h} h, else mean of the same hour +-24 h",
        "timezone": clock,
        "timezone_given": timezone,
        "zone": {**found.to_dict(), "clock": clock, "status": zone_status, "message": zone_message},
        "level_shift": None if shift is None else {**shift.to_dict(), "message": shift.describe()},
    }
    return series, diagnostics


def _check_frame(df: pd.DataFrame, offgrid_rule: str) -> None:
    """Refuse an unknown off-grid rule, a missing column, several services or no rows (``InputError``)."""
    if offgrid_rule not in OFFGRID_RULES:
        raise InputError(f"offgrid_rule {offgrid_rule!r}: expected one of {OFFGRID_RULES}")
    for col in ("ts", "value"):
        if col not in df.columns:
            raise InputError(f"traffic: missing column {col!r}; expected ts, value[, service]")
    if "service" in df.columns:
        services = pd.unique(df["service"].dropna())
        if len(services) > 1:
            raise InputError(f"traffic: {len(services)} services in one file ({list(services)[:5]}); "
                             "pass one service at a time")
    if len(df) == 0:
        raise InputError("traffic: no rows")


def _drop_duplicates(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The frame without exact duplicates (same instant), and how many were dropped.

    Identical values (or NaN beside a value) are dropped and counted; different values are a conflict we
    refuse to resolve silently (``InputError`` naming the UTC hour).
    """
    frame = frame.sort_values(["ts", "order"], kind="stable")
    dup_mask = frame.duplicated("ts", keep=False)
    duplicates_dropped = 0
    if dup_mask.any():
        keep_rows = []
        for stamp, grp in frame[dup_mask].groupby("ts", sort=True):
            vals = grp["value"].dropna().unique()
            if len(vals) > 1:
                hour = stamp.floor("h").strftime("%Y-%m-%dT%H:%MZ")
                shown = ", ".join(f"{v:g}" for v in vals)
                raise InputError(f"traffic: conflicting duplicate values at {stamp.isoformat()} "
                                 f"(UTC hour {hour}): {shown}; remove one before ingest")
            pick = grp[grp["value"].notna()].index[:1] if len(vals) else grp.index[:1]
            keep_rows.extend(pick)
            duplicates_dropped += len(grp) - 1
        frame = pd.concat([frame[~dup_mask], frame.loc[keep_rows]]).sort_values("ts", kind="stable")
    return frame, duplicates_dropped


def _hourly_values(frame: pd.DataFrame, offgrid_rule: str) -> pd.Series:
    """One value per UTC hour from the valued rows: their max, mean or last (``offgrid_rule``)."""
    valued = frame.dropna(subset=["value"])
    if offgrid_rule == "max":
        return valued.groupby("hour")["value"].max()
    if offgrid_rule == "mean":
        return valued.groupby("hour")["value"].mean()
    return valued.sort_values("ts").groupby("hour")["value"].last()


def impute_hours(series: pd.Series, hours, settings: IngestSettings | None = None) -> pd.Series:
    """A copy of an ingested series with ``hours`` re-imputed by ingest's method (``IngestSettings``).

    For forecasters that read recent values directly (naive, same-hour means, exponential smoothing):
    an outlier hour (e.g. an outage's zero) or an imputed hour is replaced as if it were missing, so no
    such value reaches a forecast. Hours absent from the index are ignored; a series whose every hour is
    listed is returned unchanged (nothing to impute from).

    Args:
        series: hourly UTC series from :func:`ingest` (no NaN).
        hours: UTC stamps (ISO text or Timestamps) to replace.
        settings: :class:`IngestSettings` (``interp_max_gap_h``).

    Returns:
        A new float64 series on the same index, no NaN.
    """
    st = settings or IngestSettings()
    hours = list(hours)
    if not hours:
        return series.astype("float64").copy()
    mask = series.index.isin(pd.DatetimeIndex(pd.to_datetime(hours, utc=True)))
    if not mask.any() or mask.all():
        return series.astype("float64").copy()
    return _impute(series.astype("float64").where(~mask), st.interp_max_gap_h)


def _iso(t: pd.Timestamp) -> str:
    return t.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def _numeric_values(col: pd.Series) -> np.ndarray:
    vals = pd.to_numeric(col, errors="coerce").astype("float64")
    bad = vals.isna() & col.notna() & (col.astype("str").str.strip() != "")
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"traffic row {i}: value {col.iloc[i]!r} is not a number")
    arr = vals.to_numpy()
    if np.isinf(arr).any():
        i = int(np.flatnonzero(np.isinf(arr))[0])
        raise InputError(f"traffic row {i}: value is infinite")
    if (arr < 0).any():
        i = int(np.flatnonzero(arr < 0)[0])
        raise InputError(f"traffic row {i}: value {arr[i]:g} is negative; traffic must be >= 0")
    return arr


def _to_utc(col: pd.Series, timezone: str | None) -> tuple[pd.Series, int, ZoneFinding]:
    """Parse ``ts`` to UTC.

    Returns (UTC timestamps, number of rows with an ambiguous local time, the zone the stamps carry).
    """
    if col.isna().any():
        i = int(np.flatnonzero(col.isna().to_numpy())[0])
        raise InputError(f"traffic row {i}: ts is missing")
    if isinstance(col.dtype, pd.DatetimeTZDtype):
        utc = col.dt.tz_convert("UTC").reset_index(drop=True)
        return utc, 0, zone_from_dtype(col.dtype.tz, pd.DatetimeIndex(utc))
    if pd.api.types.is_datetime64_dtype(col.dtype):
        naive = pd.Series(col.to_numpy(), dtype=col.dtype)
    else:
        text = col.astype("str").str.strip()
        aware = text.str.contains(_AWARE_RE, regex=True)
        if aware.all():
            try:
                utc = pd.Series(pd.to_datetime(text, utc=True, format="ISO8601")).reset_index(drop=True)
            except (ValueError, TypeError) as exc:
                raise InputError(f"traffic: ts not ISO 8601 ({exc})") from exc
            return utc, 0, zone_from_offsets(pd.DatetimeIndex(utc), parse_offsets_s(text.reset_index(drop=True)))
        if aware.any():
            i = int(np.flatnonzero(~aware.to_numpy())[0])
            raise InputError(f"traffic row {i}: ts {text.iloc[i]!r} has no zone while other rows do; "
                             "use one convention")
        try:
            naive = pd.Series(pd.to_datetime(text, format="ISO8601")).reset_index(drop=True)
        except (ValueError, TypeError) as exc:
            raise InputError(f"traffic: ts not ISO 8601 ({exc})") from exc
    if timezone is None:
        raise InputError("traffic: timestamps have no time zone; declare the source time zone "
                         "(--timezone, an IANA name such as Europe/Berlin) or give UTC offsets")
    try:
        first = naive.dt.tz_localize(timezone, ambiguous=True, nonexistent="NaT")
        second = naive.dt.tz_localize(timezone, ambiguous=False, nonexistent="NaT")
    except Exception as exc:  # noqa: BLE001 - unknown zone names
        raise InputError(f"timezone {timezone!r}: not a known IANA zone ({exc})") from exc
    nonexist = first.isna()
    if nonexist.any():
        i = int(np.flatnonzero(nonexist.to_numpy())[0])
        raise InputError(f"traffic row {i}: local time {naive.iloc[i]:%Y-%m-%d %H:%M} does not exist in "
                         f"{timezone} (clocks skip it at the DST change); {int(nonexist.sum())} such row(s)")
    amb = (first != second).to_numpy()
    out = first.copy()
    if amb.any():
        # The same local wall time occurs twice: by file order, the first row of each stamp is the
        # earlier (summer-time) instant, the second the later one.
        occ = naive[amb].groupby(naive[amb]).cumcount().to_numpy()
        amb_idx = np.flatnonzero(amb)
        later = amb_idx[occ >= 1]
        out.iloc[later] = second.iloc[later]
    return out.dt.tz_convert("UTC").reset_index(drop=True), int(amb.sum()), NO_ZONE


def _longest_run(mask: np.ndarray) -> int:
    best = run = 0
    for m in mask:
        run = run + 1 if m else 0
        best = max(best, run)
    return best


def _impute(series: pd.Series, interp_max_gap_h: int) -> pd.Series:
    """Fill NaN hours: short gaps linearly, long gaps from the same hour ±24 h (see IngestSettings)."""
    s = series.copy()
    miss = s.isna().to_numpy()
    if not miss.any():
        return s
    run_len = np.zeros(len(s), dtype=int)
    i = 0
    while i < len(s):
        if miss[i]:
            j = i
            while j < len(s) and miss[j]:
                j += 1
            run_len[i:j] = j - i
            i = j
        else:
            i += 1
    long_gap = run_len > interp_max_gap_h
    if long_gap.any():
        filled = s.copy()
        for _ in range(len(s) // 24 + 1):
            prev = filled.shift(24)
            nxt = filled.shift(-24)
            cand = pd.concat([prev, nxt], axis=1).mean(axis=1)
            todo = filled.isna().to_numpy() & long_gap & cand.notna().to_numpy()
            if not todo.any():
                break
            filled[todo] = cand[todo]
        s = filled
    s = s.interpolate(method="time", limit_direction="both")
    return s


def _outliers(series: pd.Series, missing: np.ndarray, z: float) -> list[pd.Timestamp]:
    """Hours far from the median of the same hour-of-day over the surrounding ±3 days (robust z).

    The scale is 1.4826 × the median absolute deviation of those deviations from their median; when that
    is 0 (more than half the hours repeat their reference exactly, e.g. a noise-free pattern), 1.253314 ×
    their mean absolute deviation (Iglewicz and Hoaglin 1993, the modified z-score's rule for MAD = 0), so
    a spike or an outage beside a noise-free series is still flagged; 0 again (nothing deviates): none.
    """
    x = series.to_numpy()
    n = len(x)
    ref = np.full(n, np.nan)
    for i in range(n):
        lags = [i + 24 * k for k in range(-3, 4) if k != 0 and 0 <= i + 24 * k < n and not missing[i + 24 * k]]
        if len(lags) >= 2:
            ref[i] = np.median(x[lags])
    dev = x - ref
    ok = ~np.isnan(dev) & ~missing
    if ok.sum() < 24:
        return []
    med = np.median(dev[ok])
    mad = 1.4826 * np.median(np.abs(dev[ok] - med))
    if mad <= 0:  # Iglewicz and Hoaglin (1993): the mean absolute deviation when the MAD is 0
        mad = 1.253314 * np.mean(np.abs(dev[ok] - med))
    if mad <= 0:
        return []
    flag = ok & (np.abs(dev - med) > z * mad)
    return list(series.index[flag])


def daily_totals(series: pd.Series, timezone: str) -> pd.DataFrame:
    """Totals per LOCAL calendar day of an hourly UTC series (for the risk report).

    Groups by the local date of each UTC hour, so DST days have 23 or 25 hours and a day whose local
    midnight does not exist (America/Sao_Paulo 2018-11-04) is still one bucket (C01.3). No resampling on
    local labels, hence no non-existent-time error.

    Returns:
        Frame ``date`` (``datetime.date``), ``total`` (sum of the day's hours, series units), ``hours``
        (number of hourly values in that local day), one row per local day, in order.
    """
    local_date = series.index.tz_convert(timezone).date
    g = series.groupby(local_date)
    return pd.DataFrame({"date": list(g.groups.keys()), "total": g.sum().to_numpy(),
                         "hours": g.size().to_numpy()})
