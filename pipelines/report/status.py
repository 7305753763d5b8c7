"""The page's words for a status: the solve status with its gap, the real-time forecast's status, a model's line.

Used by the risk page's headline (:mod:`pipelines.report.page`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def status_text(plan: Any, mip_rel_gap: float | None) -> str:
    """The solve status in words, with the gap in percent.

    ``optimal`` with a positive gap reads ``optimal within the 0.1 % gap tolerance (gap 0.07 %)``:
    HiGHS stops when the relative gap (bound − objective) / objective is below ``mip_rel_gap``,
    so "optimal" means "within that tolerance", not "no better plan exists".
    """
    gap = None if plan.gap is None else float(plan.gap)
    gap_txt = "n/a" if gap is None else f"{pct_text(gap)} %"
    if plan.status == "optimal":
        if gap is None or gap <= 1e-9:
            return "**optimal** (gap 0 %)" if gap is not None else "**optimal**"
        tol = f"the {pct_text(mip_rel_gap)} % gap tolerance" if mip_rel_gap else "the solver's gap tolerance"
        return f"**optimal** within {tol} (gap {gap_txt})"
    return f"**{plan.status}** (gap {gap_txt})"


def not_proven_text(plan: Any, time_limit_s: float | None, gap: str) -> str:
    """The note under a plan that is not proven optimal: why the planner stopped, in its own words.

    ``deadline``: the wall-clock safety stop cut the work budget short (DESIGN §5), so the plan depends on
    machine load. ``time_limit``: the planner's own message (e.g. the work budget of ``time_limit_s`` that
    does not cover branch-and-bound) when it gave one, else the solver's time limit.
    """
    lim = f" ({time_limit_s:g} s)" if time_limit_s else ""
    if plan.status == "deadline":
        return (f"**Stopped by the wall-clock deadline**: time_limit_s{lim} ran out before the planner's work budget "
                f"was done, so this plan (gap {gap}) depends on how loaded the machine was and may not reproduce.")
    if getattr(plan, "message", None):
        return f"**Not proven optimal** (gap {gap}): {plan.message}."
    after = f" after {time_limit_s:g} s" if time_limit_s else ""
    return f"**Not proven optimal**: the solver stopped on its time limit{after} with this incumbent (gap {gap})."


def pct_text(frac: float) -> str:
    """A fraction as a short percentage number.

    2 decimals, trailing zeros cut; 1 significant digit below 0.01 %: 0.0007 -> ``"0.07"``,
    0.001 -> ``"0.1"``, 0.0125 -> ``"1.25"``, 1e-5 -> ``"0.001"``.
    """
    v = frac * 100
    if 0 < abs(v) < 0.01:
        return f"{v:.1g}"
    return f"{v:.2f}".rstrip("0").rstrip(".")


#: Plain-words explanation of a degraded real-time profile, keyed by the start of the message that
#: :func:`forecasters.realtime.fit_profile` gives (C03 history rule).
_SHORT_WEEKLY = "weekly seasonality needs more than"
#: Start of the message of a level shift (:meth:`forecasters.realtime.shift.LevelShift.describe`, F09).
_LEVEL_SHIFT = "level shift x"


def explain_rt_status(status: str, message: str) -> str | None:
    """What a real-time profile status means for the operator, in plain words (``None`` when ok).

    A ``"degraded"`` profile from a history of 168..336 hourly points (the shipped ServeGen series
    are exactly 336 h) has its weekly shape fitted without a second week to confirm it; below 168
    points there is no weekly shape at all. Other degraded causes get a generic explanation.
    ``"level_shift"`` (F09): traffic moved to a new level at the end of the history and the forecast
    follows it; the explanation gives the factor and the start (from the profile's message) and what to
    check; a degraded profile whose message also reports a level shift gets both explanations.
    """
    if status == "ok":
        return None
    if status == "given":
        return None
    shift = _explain_level_shift(message)
    if status == "level_shift":
        return shift
    why = _explain_degraded(message)
    return f"{shift} {why}" if shift else why


def _explain_level_shift(message: str) -> str | None:
    """The level-shift part of the explanation (F09), or None when the message has none."""
    m = re.search(r"level shift x([0-9.]+) since (\S+) \((\d+) h", message)
    if not m:
        return None
    factor, since, hours = float(m.group(1)), m.group(2), int(m.group(3))
    way = "fell" if factor < 1 else "rose"
    followed = "NOT modelled" not in message
    return (f"Traffic {way} to {factor:.2f}× its usual level for each hour of the week from {since} on "
            f"({hours} h so far), and stayed there: this is a new level, not a run of outliers. "
            + ("The forecast (and the GPUs planned for this service) follows the new level. " if followed else
               "The forecast could NOT be moved to the new level (too few hours on one side of the change); "
               "it may still be at the old level. ")
            + ("If the change is temporary (an outage upstream, a holiday, a routing change being rolled "
               "back), demand will come back to the old level: keep extra real-time headroom (a higher "
               "`min_gpus`) until you know." if factor < 1 else
               "Check that the new demand is real (a launch, a new client) and that the service's "
               "`max_gpus` allows it."))


def _explain_degraded(message: str) -> str:
    """The explanation of a degraded profile (short history, or a generic one)."""
    if _SHORT_WEEKLY in message:
        got = re.search(r"got (\d+)", message)
        n_txt = f"{got.group(1)} hourly points" if got else "too few hourly points"
        if "NOT estimated" in message:
            return (f"The traffic history has {n_txt}, less than one full week, so the forecast knows only "
                    "the daily pattern: weekday/weekend differences are missing and the P90 may be too low "
                    "on busy weekdays. Keep extra real-time headroom (a higher `min_gpus`) for this service "
                    "and give at least three weeks of hourly traffic.")
        return (f"The traffic history has {n_txt} (two weeks or less), so the weekly pattern (each hour of "
                "the week) is in effect fitted from one week only, with no second week to confirm it. Anything "
                "unusual in that week (a holiday, an outage, a launch) is repeated in the forecast for the same "
                "hour of the week, and the P90 band does not allow for it. For the operator: check the demand "
                "plot against what you expect for these weekdays, keep extra real-time headroom (a higher "
                "`min_gpus`) if that week was not typical, and give more than 336 hourly points (three weeks "
                "or more) to clear this status.")
    return ("The forecast for this service is less reliable than usual (see the message); keep extra "
            "real-time headroom for it and check the forecast-against-actual plot.")




def status_flag(status: str) -> str:
    """How a real-time forecast status is shown on the page (never the same word twice).

    ``ok``/``given`` as is, ``degraded`` → ``**DEGRADED**``, ``level_shift`` → ``**LEVEL SHIFT**``, any
    other status → ``**DEGRADED** (<status>)``.
    """
    if status in ("ok", "given"):
        return status
    return {"degraded": "**DEGRADED**", "level_shift": "**LEVEL SHIFT**"}.get(status, f"**DEGRADED** ({status})")


def model_text(kind: str, m: Mapping[str, Any]) -> str:
    """A job forecaster as the headline names it: ``"training v3 (champion)"``.

    A model without a registered version says what it is instead of "vNone"
    (``"scheduler: no champion yet (no nightly retraining): fitted at plan time"``).
    """
    if m.get("version") is None:
        return f"{kind}: {m.get('note') or 'not registered'}"
    return f"{kind} v{m['version']}{' (' + m['alias'] + ')' if m.get('alias') else ''}"
