"""The nightly retraining's metric rows and markdown (pure builders, shown as Prefect artifacts by :mod:`pipelines.flows.retrain`).

Rows :data:`RETRAIN_COLUMNS`: each forecaster's holdout or backtest metrics beside its baselines, with the
registered version and alias: :func:`job_model_rows`, :func:`scheduler_rows`, :func:`realtime_rows`; the
markdown of the champions: :func:`retrain_markdown`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.flows.observe import fmt_value


def _num(v: Any) -> float | None:
    """A table number: 6 significant digits (readable in the UI table), None when missing or not finite."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return float(f"{f:.6g}") if math.isfinite(f) else None


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Flat ``a.b.c`` keys (an MLflow run's metrics, :func:`pipelines.tracking.runs.flatten`) back to nested dicts.

    A key that is both a value and a prefix (``a`` and ``a.b``) keeps the nested dict.
    """
    out: dict[str, Any] = {}
    for key in sorted(flat, key=lambda k: k.count(".")):
        *path, leaf = key.split(".")
        node = out
        for part in path:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        if not isinstance(node.get(leaf), dict):
            node[leaf] = flat[key]
    return out


#: Columns of the retraining table artifact (one row per forecaster and model/baseline).
RETRAIN_COLUMNS = ("forecaster", "model", "version", "alias", "mae", "mae_units", "mape_frac", "pinball_p90_h",
                   "coverage_frac", "coverage_of", "mae_ratio_vs_snaive168", "mae_ratio_vs_naive24", "n_scored")


def _row(**kw: Any) -> dict[str, Any]:
    return {c: kw.get(c) for c in RETRAIN_COLUMNS}


def job_model_rows(kind: str, doc: Mapping[str, Any], version: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Rows of one LightGBM job forecaster's held-out evaluation against its baselines (:data:`RETRAIN_COLUMNS`).

    ``doc``: :func:`forecasters.jobs.evaluate`'s document (``metrics``: ``mae_h``, ``mape`` (fraction),
    ``pinball_p90``, ``coverage_p10_p90``; ``baselines``: name -> ``mae_h``, ``mape``; ``n_test``);
    ``version``: the registered version the model is (``version``, ``alias``).
    """
    m, n = doc.get("metrics") or {}, doc.get("n_test")
    n = None if n is None else int(n)
    v = version or {}
    rows = [_row(forecaster=kind, model="LightGBM", version=v.get("version"), alias=v.get("alias"),
                 mae=_num(m.get("mae_h")), mae_units="h", mape_frac=_num(m.get("mape")),
                 pinball_p90_h=_num(m.get("pinball_p90")), coverage_frac=_num(m.get("coverage_p10_p90")),
                 coverage_of="P10-P90", n_scored=n)]
    for name, b in (doc.get("baselines") or {}).items():
        rows.append(_row(forecaster=kind, model=f"baseline: {name}", mae=_num(b.get("mae_h")), mae_units="h",
                         mape_frac=_num(b.get("mape")), n_scored=n))
    return rows


def scheduler_rows(doc: Mapping[str, Any], version: str | None) -> list[dict[str, Any]]:
    """Rows of a workspace's nightly retraining: the new version, the champion and the baselines on one holdout.

    ``doc``: :func:`pipelines.models.scheduler.nightly_fit`'s document (``candidate`` / ``champion``: an
    evaluation with ``metrics`` ``mae_h``, ``pinball_p90_h``, ``coverage_p90``, ``n`` and the candidate's
    ``baselines``; ``promoted``; ``champion_version_before``); ``version``: the version just registered.
    """
    rows = []
    promoted = bool(doc.get("promoted"))

    def ev_row(model: str, ver: Any, alias: str | None, m: Mapping[str, Any]) -> dict[str, Any]:
        return _row(forecaster="scheduler", model=model, version=ver, alias=alias, mae=_num(m.get("mae_h")),
                    mae_units="h", pinball_p90_h=_num(m.get("pinball_p90_h")), coverage_frac=_num(m.get("coverage_p90")),
                    coverage_of="<= P90", n_scored=m.get("n"))

    cand = doc.get("candidate") or {}
    if cand:
        rows.append(ev_row("new version", version, "champion" if promoted else "challenger", cand.get("metrics") or {}))
    champ = doc.get("champion") or {}
    if champ:
        rows.append(ev_row("previous champion", doc.get("champion_version_before"),
                           "replaced" if promoted else "champion", champ.get("metrics") or {}))
    for name, b in (cand.get("baselines") or {}).items():
        if b and "mae_h" in b:
            rows.append(ev_row(f"baseline: {name}", None, None, b))
    return rows


def realtime_rows(doc: Mapping[str, Any], version: str | None = None) -> list[dict[str, Any]]:
    """Rows of the real-time rolling-origin backtest (:func:`pipelines.stages.realtime.backtest_report`).

    Per service: the day-ahead combination, the hourly mode, and the baselines seasonal naive 168 h,
    naive 24 h and persistence (MAE in the service's units per hour, MASE against both seasonal
    baselines, P90 coverage); ``version``: the tracking run that logged it (no registry for these).
    """
    rows = []
    for svc, s in (doc.get("services") or {}).items():
        units = s.get("units")
        for label, m in (("combination, day ahead", s.get("metrics") or {}),
                         ("combination, 1 h ahead", s.get("hourly_recal") or {})):
            rows.append(_row(forecaster=f"realtime {svc}", model=label, version=version, mae=_num(m.get("mae")),
                             mae_units=units, mape_frac=_num(m.get("mape")), coverage_frac=_num(m.get("p90_coverage")),
                             coverage_of="<= P90 (backtest)", mae_ratio_vs_snaive168=_num(m.get("mase_snaive168")),
                             mae_ratio_vs_naive24=_num(m.get("mase_naive24")), n_scored=s.get("n_hours")))
        for name, b in (s.get("baselines") or {}).items():
            rows.append(_row(forecaster=f"realtime {svc}", model=f"baseline: {name}", mae=_num(b.get("mae")),
                             mae_units=units, n_scored=s.get("n_hours")))
    return rows


def retrain_markdown(local_day: str, rows: Sequence[Mapping[str, Any]], notes: Sequence[str]) -> str:
    """Short markdown of a retraining run: which version of each forecaster is champion, and notes."""
    lines = [f"# Retraining {local_day}", ""]
    champs = [r for r in rows if r.get("alias") == "champion"]
    if champs:
        lines += ["Champion after this run:", ""]
        lines += [f"- {r['forecaster']}: version **{r['version']}** (MAE {fmt_value(r['mae'])} {r['mae_units']})"
                  for r in champs]
    lines += [f"- {n}" for n in notes]
    lines += ["", "The table artifact of this run has every metric beside its baselines."]
    return "\n".join(lines) + "\n"
