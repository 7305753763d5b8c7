"""What a scheduler history says about GPU types: :class:`TypeHistory` and the measured duration ratios.

Read by :mod:`forecasters.scheduler.by_type` (its module docstring gives the rules); built at fit by
:func:`type_history` from the target runs. Type names as :func:`forecasters.scheduler.features.gpu_type_key`
spells them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecasters.scheduler.features import gpu_type_key, name_token, numeric_column, text_values

#: A (kind, type) cell enters the measured ratios with at least this many finished runs.
MIN_CELL_RUNS = 2
#: A type's measured ratio is used when it is on at least this many kinds that ran on several types.
MIN_RATIO_KINDS = 3
#: Alternating-means iterations of :func:`measure_type_effects` (stops earlier below 1e-10 change).
MAX_ITERATIONS = 1000
#: A job kind: (user, job-name token, GPUs), :func:`job_kind`.
Kind = tuple[str, str, int]


@dataclass(frozen=True)
class TypeHistory:
    """What a fitted history says about GPU types (type names as :func:`gpu_type_key` spells them).

    Attributes:
        runs: type -> finished (target) runs on it.
        spelling: type -> the history's most frequent spelling of it (the model's ``gpu_type`` level).
        kinds: job kind (:func:`job_kind`) -> type -> its finished runs on that type.
        log_effect: type -> measured log duration factor ``b_t``, 0 at its component's reference
            (only types on multi-type kinds).
        component: type -> component number (types joined through kinds that ran on both).
        support: type -> multi-type kinds it is on.
    """

    runs: dict[str, int] = field(default_factory=dict)
    spelling: dict[str, str] = field(default_factory=dict)
    kinds: dict[Kind, dict[str, int]] = field(default_factory=dict)
    log_effect: dict[str, float] = field(default_factory=dict)
    component: dict[str, int] = field(default_factory=dict)
    support: dict[str, int] = field(default_factory=dict)

    def measured_ratio(self, gpu_type: str, anchor: str) -> float | None:
        """Duration on ``gpu_type`` over that on ``anchor`` (module docstring), or None when not measured."""
        if gpu_type == anchor:
            return 1.0
        c = self.component
        if gpu_type not in c or anchor not in c or c[gpu_type] != c[anchor]:
            return None
        if min(self.support.get(gpu_type, 0), self.support.get(anchor, 0)) < MIN_RATIO_KINDS:
            return None
        return float(np.exp(self.log_effect[gpu_type] - self.log_effect[anchor]))

    def speed_ratios(self) -> dict[str, float]:
        """Type -> measured speed relative to its component's reference (``exp(-b_t)``; 2.0 = twice as fast)."""
        return {t: float(np.exp(-b)) for t, b in sorted(self.log_effect.items())}


def job_kind(user: object, job_name: object, gpus: float) -> Kind | None:
    """``(user, job-name token, GPUs)`` of a job (``""`` for a missing part); None when user and token are both missing."""
    u = user if isinstance(user, str) and user else None
    tok = name_token(job_name)
    if u is None and tok is None:
        return None
    return (u or "", tok or "", int(gpus) if np.isfinite(gpus) else 0)


def job_kinds(frame: pd.DataFrame) -> list[Kind | None]:
    """:func:`job_kind` of each row ``(n,)``."""
    gpus = numeric_column(frame, "gpus")
    return [job_kind(u, nm, g) for u, nm, g in
            zip(text_values(frame["user"]).tolist(), frame["job_name"].astype(object).tolist(), gpus.tolist())]


def measure_type_effects(cells: pd.DataFrame) -> tuple[dict[str, float], dict[str, int], dict[str, int]]:
    """``(log_effect, component, support)`` of the two-way fixed-effects fit (module docstring).

    Args:
        cells: one row per (kind, type) cell: columns ``kind`` (hashable), ``gpu_type`` (str),
            ``log_h`` (the cell's median log hours) and ``runs`` (its run count, for the reference type).

    Only kinds with cells on two types or more are used; an empty result when there is none.
    """
    multi = cells.groupby("kind")["gpu_type"].transform("nunique") >= 2
    c = cells.loc[multi].reset_index(drop=True)
    if c.empty:
        return {}, {}, {}
    k_codes, _ = pd.factorize(c["kind"])
    t_codes, t_names = pd.factorize(c["gpu_type"])
    m = c["log_h"].to_numpy(dtype=float)
    n_k, n_t = int(k_codes.max()) + 1, len(t_names)
    b = np.zeros(n_t)
    a = np.zeros(n_k)
    k_n = np.bincount(k_codes, minlength=n_k)
    t_n = np.bincount(t_codes, minlength=n_t)
    for _ in range(MAX_ITERATIONS):
        a = np.bincount(k_codes, weights=m - b[t_codes], minlength=n_k) / k_n
        new_b = np.bincount(t_codes, weights=m - a[k_codes], minlength=n_t) / t_n
        done = np.max(np.abs(new_b - b)) < 1e-10
        b = new_b
        if done:
            break
    # components: types joined by a kind (union-find over the kinds' type lists)
    parent = list(range(n_t))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for _, ts in pd.Series(t_codes).groupby(k_codes):
        first = find(int(ts.iloc[0]))
        for t in ts.iloc[1:]:
            parent[find(int(t))] = first
    roots = [find(i) for i in range(n_t)]
    runs = c.groupby("gpu_type")["runs"].sum()
    comp_ids = {r: j for j, r in enumerate(dict.fromkeys(sorted(set(roots), key=lambda r: str(t_names[r]))))}
    effect: dict[str, float] = {}
    for r in set(roots):
        members = [i for i in range(n_t) if roots[i] == r]
        ref = max(members, key=lambda i: (int(runs[t_names[i]]), -i))
        for i in members:
            effect[str(t_names[i])] = float(b[i] - b[ref])
    component = {str(t_names[i]): comp_ids[roots[i]] for i in range(n_t)}
    support = {str(t_names[i]): int(t_n[i]) for i in range(n_t)}
    return effect, component, support


def type_history(targets: pd.DataFrame, y_log: np.ndarray) -> TypeHistory:
    """The :class:`TypeHistory` of the fit's target runs ``(n, ...)`` and their log hours ``y_log`` ``(n,)``."""
    raw_types = text_values(targets["gpu_type"]).tolist()
    keys = [gpu_type_key(t) for t in raw_types]
    spelled: dict[str, Counter[str]] = defaultdict(Counter)
    for k, t in zip(keys, raw_types):
        if k is not None:
            spelled[k][t] += 1
    spelling = {k: min(c, key=lambda s: (-c[s], s)) for k, c in sorted(spelled.items())}
    runs = {k: int(sum(spelled[k].values())) for k in spelling}
    kinds = job_kinds(targets)
    per_kind: dict[Kind, dict[str, int]] = defaultdict(dict)
    rows = []
    for kind, t, y in zip(kinds, keys, np.asarray(y_log, dtype=float).tolist()):
        if kind is None or t is None:
            continue
        per_kind[kind][t] = per_kind[kind].get(t, 0) + 1
        rows.append((kind, t, y))
    if rows:
        f = pd.DataFrame(rows, columns=["kind", "gpu_type", "log_h"])
        cells = f.groupby(["kind", "gpu_type"], sort=True)["log_h"].agg(["median", "size"]).reset_index()
        cells = cells.rename(columns={"median": "log_h", "size": "runs"})
        cells = cells[cells["runs"] >= MIN_CELL_RUNS]
        effect, component, support = measure_type_effects(cells)
    else:
        effect, component, support = {}, {}, {}
    return TypeHistory(runs=runs, spelling=spelling, kinds=dict(per_kind), log_effect=effect,
                       component=component, support=support)
