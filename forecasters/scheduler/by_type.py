"""Durations per GPU type: :func:`predict_runtime_by_type` ``(model, jobs, types) -> one row per (job, type)``.

A job that may run on several types (a typed request ``a100|h100``, or any type of a mixed cluster)
needs a P10/P50/P90 on each. The history says where jobs *ran* (the records' ``gpu_type``); for each
type asked about, the first rule that applies gives the quantiles (column ``source``):

1. ``history``: the job's kind (:func:`forecasters.scheduler.type_history.job_kind`: same user,
   job-name token and GPU count) has finished runs on that type: the model's forecast with the job's ``gpu_type`` set to it (the
   boosters read the type, its datasheet figures and the user's runs).
2. ``model``: the job's *anchor* type (below) when its kind has no run on it: the same
   forecast on the anchor.
3. ``measured``: the anchor's forecast times the type's measured duration ratio to the anchor
   (:class:`forecasters.scheduler.type_history.TypeHistory`: from the kinds that ran on several types).
4. ``datasheet``: the anchor's forecast times the datasheet ratio, anchor's dense 16-bit peak over
   the type's (:data:`domain.gpus.GPU_TABLE`): compute-bound scaling, an assumption; flagged
   :data:`FLAG_DATASHEET`.
5. ``unpriced``: the type or the anchor has no datasheet entry (an operator's own code such as
   openb's ``G2``), or the history names no type at all: the anchor's forecast unchanged; flagged
   :data:`FLAG_UNPRICED`.

Anchor (the type a job's forecast is read on before scaling): the type its kind ran on most; else
the job's own ``gpu_type`` (a running job's, or a request naming one type); else, of the types asked
about, the one with most runs in the history; else the history's most-run type; none when the
history names no type (then every type is ``unpriced`` at the job's forecast as given).

Measured ratios (:func:`forecasters.scheduler.type_history.measure_type_effects`): each (kind,
type) cell with at least :data:`forecasters.scheduler.type_history.MIN_CELL_RUNS` runs gives the median log hours ``m[k, t]``; over the kinds with cells on two
types or more, ``m[k, t] = a_k + b_t + e`` is fitted by least squares (alternating means, a two-way
fixed-effects model: each kind its own size, each type its own log duration factor; the kinds'
sizes cancel, so a type used by long jobs is not taken for a slow one). Types joined through shared
kinds form a component; ``b`` is 0 at the component's most-run type. The ratio of type ``t`` to ``a``
is ``exp(b_t - b_a)`` when both are in one component and each is on at least
:data:`forecasters.scheduler.type_history.MIN_RATIO_KINDS` multi-type kinds.

A fallback model (fewer than 30 target runs) does not read the type: its ``history`` and ``model``
rows are the user's quantiles on every type; only the ratios tell the types apart.

Every quantile is then capped at the job's time limit (it holds on every type); a running job's at
least its elapsed time plus a minute (:func:`forecasters.scheduler.model.capped_at_limit`).
Type names are compared by :func:`forecasters.scheduler.features.gpu_type_key` (``V100M32`` and
``v100_32gb`` are one type).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import pandas as pd

from domain.gpus import GPU_TABLE, canonical_gpu_type
from forecasters.errors import InputError
from forecasters.scheduler.features import gpu_type_key, limit_hours, text_values
from forecasters.scheduler.model import (
    FLAG_FALLBACK,
    MODE_FALLBACK,
    SchedulerModel,
    capped_at_limit,
    uncapped_quantiles_h,
)
from forecasters.scheduler.type_history import Kind, TypeHistory, job_kinds

#: Flag of a type priced by the datasheet ratio.
FLAG_DATASHEET = "datasheet_speed"
#: Flag of a type no ratio prices (the anchor's forecast unchanged).
FLAG_UNPRICED = "speed_unknown"
#: ``source`` values, in rule order (module docstring).
SOURCES: tuple[str, ...] = ("history", "model", "measured", "datasheet", "unpriced")
#: Columns of :func:`predict_runtime_by_type`'s frame.
BY_TYPE_COLUMNS: tuple[str, ...] = (
    "job_id", "gpu_type", "duration_p10_h", "duration_p50_h", "duration_p90_h", "remaining_p10_h",
    "remaining_p50_h", "remaining_p90_h", "source", "anchor_type", "duration_ratio", "flags",
)

def datasheet_ratio(gpu_type: str, anchor: str) -> float | None:
    """Duration on ``gpu_type`` over that on ``anchor`` by the datasheets: anchor's dense 16-bit peak / the type's.

    None when either is not in :data:`domain.gpus.GPU_TABLE` (:func:`domain.gpus.canonical_gpu_type`).
    """
    a, t = canonical_gpu_type(anchor), canonical_gpu_type(gpu_type)
    if a is None or t is None:
        return None
    return GPU_TABLE[a].peak_16bit_flops / GPU_TABLE[t].peak_16bit_flops


def _anchor(hist: TypeHistory, kind: Kind | None, own: str | None, asked: Sequence[str]) -> str | None:
    """The job's anchor type (module docstring)."""
    mine = hist.kinds.get(kind, {}) if kind is not None else {}
    if mine:
        return min(mine, key=lambda t: (-mine[t], t))
    if own is not None:
        return own
    seen = [t for t in asked if t in hist.runs]
    if seen:
        return min(seen, key=lambda t: (-hist.runs[t], t))
    if hist.runs:
        return min(hist.runs, key=lambda t: (-hist.runs[t], t))
    return None


def predict_runtime_by_type(model: SchedulerModel, jobs: pd.DataFrame, types: Sequence[Sequence[str]],
                            now: datetime | None = None) -> pd.DataFrame:
    """P10/P50/P90 of each job on each of its types (rules in the module docstring).

    Args:
        model: a fitted :class:`forecasters.scheduler.SchedulerModel` (``model.types``: its
            :class:`TypeHistory`; a model without one prices every type ``unpriced``).
        jobs: ``(n, ...)`` job records, as :func:`forecasters.scheduler.predict_runtime` reads them.
        types: ``(n,)``: per job the GPU type names to price (its eligible types, e.g. the
            cluster's types for a job that may run on any), as the caller names them.
        now: aware datetime, needed when a job is running.

    Returns:
        One row per (job, type), in job order then ``types`` order (:data:`BY_TYPE_COLUMNS`):
        ``job_id``; ``gpu_type`` (as given); ``duration_p10_h`` / ``p50`` / ``p90`` (hours,
        non-decreasing, at most the limit); ``remaining_*_h`` (minus the elapsed time of a running
        job); ``source`` (:data:`SOURCES`); ``anchor_type`` (the type the forecast was read on,
        :func:`gpu_type_key` spelling; ``""`` when none); ``duration_ratio`` (the scale applied
        to the anchor's forecast; 1 for ``history``/``model``/``unpriced``); ``flags``
        (comma-separated: the job's :func:`forecasters.scheduler.predict_runtime` flags on that
        row, plus :data:`FLAG_DATASHEET` or :data:`FLAG_UNPRICED`).

    Raises:
        InputError: ``types`` not one entry per job, an empty type name, or what
            :func:`forecasters.scheduler.predict_runtime` raises.
    """
    if len(types) != len(jobs):
        raise InputError(f"types: {len(types)} entries for {len(jobs)} jobs; give one list of type names per job")
    hist: TypeHistory = getattr(model, "types", None) or TypeHistory()
    j = jobs.reset_index(drop=True)
    kinds = job_kinds(j)
    own = [gpu_type_key(t) for t in text_values(j["gpu_type"]).tolist()]
    plan: list[tuple[int, str, str, str | None]] = []  # (job row, name given, type key, anchor)
    for i, names in enumerate(types):
        keys = []
        for nm in names:
            k = gpu_type_key(nm)
            if k is None:
                raise InputError(f"job {j['job_id'].iloc[i]}: empty GPU type name in types {list(names)!r}")
            keys.append(k)
        anchor = _anchor(hist, kinds[i], own[i], keys)
        plan.extend((i, str(nm), k, anchor) for nm, k in zip(names, keys))
    # the forecasts needed: (job row, type read on); None = the job's record as given
    needed: dict[tuple[int, str | None], int] = {}
    rule: list[tuple[str, str | None, float]] = []
    for i, _nm, k, anchor in plan:
        kind = kinds[i]
        mine = hist.kinds.get(kind, {}) if kind is not None else {}
        if k in mine:
            src, on, ratio = "history", k, 1.0
        elif anchor is None:
            src, on, ratio = "unpriced", None, 1.0
        elif k == anchor:
            src, on, ratio = "model", k, 1.0
        else:
            on = anchor
            r = hist.measured_ratio(k, anchor)
            src = "measured"
            if r is None:
                r, src = datasheet_ratio(k, anchor), "datasheet"
            if r is None:
                r, src = 1.0, "unpriced"
            ratio = float(r)
        needed.setdefault((i, on), len(needed))
        rule.append((src, on, ratio))
    rows = [i for i, _ in needed]
    expanded = j.iloc[rows].reset_index(drop=True).copy()
    expanded["gpu_type"] = [j["gpu_type"].iloc[i] if on is None else hist.spelling.get(on, on) for i, on in needed]
    q, unseen, running, elapsed = uncapped_quantiles_h(model, expanded, now)
    names_unseen = [f"unseen_{c}" for c in unseen]
    masks = list(unseen.values())
    limit = limit_hours(expanded)
    out_q = np.zeros((len(plan), 3))
    out_rows = np.zeros(len(plan), dtype=int)
    for p, ((i, _nm, _k, _a), (_src, on, ratio)) in enumerate(zip(plan, rule)):
        r = needed[(i, on)]
        out_rows[p] = r
        out_q[p] = q[r] * ratio
    capped_q, _, remaining = capped_at_limit(out_q, limit[out_rows], running[out_rows], elapsed[out_rows])
    flags = []
    for p, (src, _on, _ratio) in enumerate(rule):
        r = out_rows[p]
        f = [nm for nm, m in zip(names_unseen, masks) if m[r]]
        if model.mode == MODE_FALLBACK:
            f.append(FLAG_FALLBACK)
        if src == "datasheet":
            f.append(FLAG_DATASHEET)
        elif src == "unpriced":
            f.append(FLAG_UNPRICED)
        flags.append(",".join(f))
    return pd.DataFrame({
        "job_id": [str(j["job_id"].iloc[i]) for i, *_ in plan],
        "gpu_type": [nm for _, nm, _, _ in plan],
        "duration_p10_h": capped_q[:, 0],
        "duration_p50_h": capped_q[:, 1],
        "duration_p90_h": capped_q[:, 2],
        "remaining_p10_h": remaining[:, 0],
        "remaining_p50_h": remaining[:, 1],
        "remaining_p90_h": remaining[:, 2],
        "source": [s for s, _, _ in rule],
        "anchor_type": [on or "" for _, on, _ in rule],
        "duration_ratio": [x for _, _, x in rule],
        "flags": flags,
    }, columns=list(BY_TYPE_COLUMNS))
