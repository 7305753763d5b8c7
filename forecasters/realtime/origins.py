"""The candidates fitted at one origin of the real-time combination, memoized by history content (DESIGN §4.4).

The profile is fitted on the clean hours; the other candidates (:data:`~forecasters.realtime.candidates.CANDIDATES`)
on the readable hours, the rest re-imputed by ingest's method, and after a level shift at the new level.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.realtime.candidates import CANDIDATES, CandidateInput, Path
from forecasters.realtime.ingest import impute_hours
from forecasters.realtime.model import CombineSettings, OriginFit
from forecasters.realtime.profile import Profile, recalibrate
from forecasters.realtime.profile_fit import fit_profile


def _key(series: pd.Series, masks: tuple[np.ndarray, ...], o: int, tag: str) -> str:
    """Content key of a fit at position ``o``: the history values, the masks, the first stamp and ``tag``."""
    h = hashlib.blake2b(digest_size=16)
    h.update(series.to_numpy()[:o].tobytes())
    for m in masks:
        h.update(m[:o].tobytes())
    h.update(f"{series.index[0]}|{o}|{tag}".encode())
    return h.hexdigest()


def _profile_at(series: pd.Series, fit_use: np.ndarray, o: int, timezone: str, s: CombineSettings,
                memo: dict | None) -> Profile:
    """The weekly profile fitted on ``series[:o]`` without the hours where ``fit_use`` is False (memoized)."""
    key = _key(series, (fit_use,), o, f"profile|{timezone}|{s.profile!r}") if memo is not None else None
    if memo is not None and key in memo:
        return memo[key]
    hist = series.iloc[:o]
    prof = fit_profile(hist, timezone, exclude=list(hist.index[~fit_use[:o]]), settings=s.profile)
    if memo is not None:
        memo[key] = prof
    return prof


def candidate_paths(x: CandidateInput, s: CombineSettings) -> tuple[dict[str, Path], dict[str, str]]:
    """Every candidate of ``s.candidates`` (and always ``profile``) by its kernel; failures named, never fatal."""
    paths: dict[str, Path] = {"profile": CANDIDATES["profile"](x)}
    failed = {}
    for name in s.candidates:
        if name == "profile":
            continue
        kernel = CANDIDATES.get(name)
        if kernel is None:
            raise InputError(f"unknown candidate {name!r}; expected one of {tuple(CANDIDATES)}")
        try:
            paths[name] = kernel(x)
        except Exception as exc:  # noqa: BLE001 - a failing candidate is left out and named, never fatal
            failed[name] = f"{type(exc).__name__}: {exc}"
    return paths, failed


def fit_origin(series: pd.Series, fit_use: np.ndarray, use: np.ndarray, o: int, timezone: str,
                s: CombineSettings, memo: dict | None) -> OriginFit:
    """All candidates at position ``o`` (history ``series[:o]``), cached in ``memo`` by content; :class:`OriginFit`.

    ``fit_use``: hours the profile is fitted on (neither imputed nor flagged); ``use``: hours the other
    candidates and the level correction read as they are (the rest re-imputed). After a level shift the
    profile detected, the hours before it are scaled by its factor for the other candidates too.
    """
    key = _key(series, (fit_use, use), o, f"origin|{timezone}|{s!r}") if memo is not None else None
    if memo is not None and key in memo:
        return memo[key]
    hist = series.iloc[:o]
    prof = _profile_at(series, fit_use, o, timezone, s, memo)
    shape = dataclasses.replace(prof, level_factor=1.0, anchor_=None)
    rec = recalibrate(prof, hist[use[:o]])
    y = impute_hours(hist, list(hist.index[~use[:o]])).to_numpy()
    shift = prof.shift
    since = shift.since if shift is not None else None
    if shift is not None:
        y = np.where(hist.index < shift.since, y * shift.factor, y)
    origin = series.index[o - 1] + pd.Timedelta(hours=1)
    x = CandidateInput(y=y, profile=rec, origin=origin, mean_days=s.mean_days, ets_window_h=s.ets_window_h,
                       mstl_window_h=s.mstl_window_h)
    paths, failed = candidate_paths(x, s)
    out = OriginFit(origin=origin, profile=rec, shape=shape, paths=paths, failed=failed, shift_since=since)
    if memo is not None:
        memo[key] = out
    return out
