"""The what-if document as text: the terminal table, the Markdown artifact, the JSON text.

Reads the document of :func:`pipelines.stages.whatif.run_whatif` (``base``, ``whatif``, ``delta``,
``jobs``); no computation beyond formatting.
"""

from __future__ import annotations

import json
from typing import Any


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


#: Rows of the comparison table: (label, key, number format).
TABLE_ROWS = (("plan value (priority x GPU-h)", "planned_value", ",.1f"),
              ("utilisation % (planned)", "planned_utilization_pct", ".1f"),
              ("real-time P90 demand covered %", "rt_covered_p90_pct", ".1f"),
              ("real-time P50 demand covered %", "rt_covered_p50_pct", ".1f"),
              ("jobs started / waiting", None, ""),
              ("jobs missing their deadline (P90)", "jobs_missing_deadline", "d"),
              ("idle GPU-h", "idle_gpu_h", ",.1f"),
              ("GPUs up", "gpus_up", "d"))


def _row_values(doc: dict[str, Any], key: str | None, spec: str) -> tuple[str, str, str]:
    b, n, d = doc["base"], doc["whatif"], doc["delta"]
    if key is None:
        return (f"{b['jobs_started']} / {b['jobs_waiting']}", f"{n['jobs_started']} / {n['jobs_waiting']}",
                f"{d['jobs_started']:+d} / {d['jobs_waiting']:+d}")
    return _fmt(b[key], spec), _fmt(n[key], spec), _fmt(d.get(key), "+" + spec.lstrip("+"))


def _when(ts: str | None, stopped: bool = False) -> str:
    if stopped:  # a running job the plan stops at step 0 (issue 30): not a job that never started
        return "stopped at step 0 (requeued)"
    return "not started" if ts is None else f"{ts[5:10]} {ts[11:16]}Z"


def _was(j: dict[str, Any]) -> str:
    """A job's base start for display: ``running`` (requeued), ``new`` (added), a stop at step 0, or the clock time."""
    return ({"requeued": "running", "added": "new"}.get(j["change"])
            or _when(j["start_ts_base"], bool(j.get("stopped_base"))))


def _now(j: dict[str, Any]) -> str:
    """A job's what-if start for display (:func:`_when`); a base stop the what-if does not make: ``keeps running``."""
    if j["change"] == "unstopped":
        return "keeps running"
    return _when(j["start_ts_whatif"], bool(j.get("stopped_whatif")))


#: Each kind of job change (:class:`optimizer.whatif.JobChange` ``kind``) as the count line names it, in order.
CHANGE_LABELS = (("earlier", "earlier"), ("later", "later"), ("moved", "re-packed at the same start"),
                 ("added", "added"), ("requeued", "requeued"), ("stopped", "stopped at step 0 (requeued)"),
                 ("unstopped", "no longer stopped (keeps running)"),
                 ("still_stopped", "still stopped at step 0 in both"),
                 ("cancelled", "cancelled"),
                 ("unchanged", "with a new priority, start unchanged"))


def change_counts_text(jobs: list[dict[str, Any]]) -> str:
    """``"36 earlier, 11 later, 3 re-packed at the same start"``: every kind of change with a count, so they add up.

    ``jobs``: the document's job rows (``change`` = the kind); a kind outside :data:`CHANGE_LABELS` is
    counted under its own name. ``"none"`` for no rows.
    """
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j["change"]] = counts.get(j["change"], 0) + 1
    label = dict(CHANGE_LABELS)
    order = [k for k, _ in CHANGE_LABELS if k in counts] + sorted(k for k in counts if k not in label)
    return ", ".join(f"{counts[k]} {label.get(k, k)}" for k in order) or "none"


def changed_header(jobs: list[dict[str, Any]]) -> str:
    """``"1 (1 later; also listed: 1 still stopped at step 0 in both plans; start times UTC)"``: the changed-jobs count.

    A stop in both plans (``still_stopped``, issue 30) is listed with the jobs but is not a change of the plan, so
    it is counted apart (the count once said "changed: 5" beside "nothing: the plan is the base's").
    """
    moved = [j for j in jobs if j["change"] != "still_stopped"]
    both = len(jobs) - len(moved)
    also = f"; also listed: {both} still stopped at step 0 in both plans" if both else ""
    return f"{len(moved)} ({change_counts_text(moved)}{also}; start times UTC)"


def render_text(doc: dict[str, Any]) -> str:
    """The command's human output: the comparison table, then one line per job that changed."""
    L = list(doc.get("summary", []))
    budget = f", {doc['time_limit_s']:g} s budget" if doc["planner"] == "milp" else ""  # only the MILP spends one
    L += [f"what-if on run {doc['run']} (plan from {doc['plan_start']}, planner {doc['planner']}{budget}): "
          f"{', '.join(doc['changes']) or 'no change'}"]
    L.append(f"  {'':34s}{'base':>16s}{'what-if':>16s}{'change':>14s}")
    for label, key, spec in TABLE_ROWS:
        bv, nv, dv = _row_values(doc, key, spec)
        L.append(f"  {label:34s}{bv:>16s}{nv:>16s}{dv:>14s}")
    b, n = doc["base"], doc["whatif"]
    L.append(f"  {'plan status':34s}{b['status']:>16s}{n['status']:>16s}{'both verified':>14s}")
    jobs = doc["jobs"]
    L.append(f"jobs whose plan changed: {changed_header(jobs)}:")
    for j in jobs:
        dh = "" if j["delta_h"] is None else f" ({j['delta_h']:+.1f} h)"
        was = _was(j)
        size = ("" if j["gpus_base"] == j["gpus_whatif"] or j["gpus_base"] is None or j["gpus_whatif"] is None
                else f" [{j['gpus_base']} -> {j['gpus_whatif']} GPUs]")
        late = ""
        if j.get("misses_deadline_whatif"):
            fin = j.get("p90_finish_whatif")
            late = (f" MISSES DEADLINE {j['deadline_at']}" + (f" (P90 finish {fin})" if fin else " (not started)"))
        L.append(f"  {j['job_id']:<14s}{was:>13s} -> {_now(j):<13s}{dh:<10s}"
                 f" {j['reason']}{size}{late}")
    for note in doc["notes"]:
        L.append(f"note: {note}")
    return "\n".join(L)


def render_markdown(doc: dict[str, Any]) -> str:
    """The flow's markdown artifact: the same comparison and job list as tables."""
    L = [f"# What-if on run `{doc['run']}`", "",
         f"Changes: **{', '.join(doc['changes']) or 'none'}**. Re-planned with planner `{doc['planner']}`"
         + (f" and the run's budget of {doc['time_limit_s']:g} s" if doc["planner"] == "milp" else "")
         + f" from {doc['plan_start']}; both plans passed the independent verifier.", "",
         "| | base | what-if | change |", "|---|---:|---:|---:|"]
    for label, key, spec in TABLE_ROWS:
        bv, nv, dv = _row_values(doc, key, spec)
        L.append(f"| {label} | {bv} | {nv} | {dv} |")
    L.append(f"| plan status | {doc['base']['status']} (verified) | {doc['whatif']['status']} (verified) | |")
    L += ["", f"## Jobs whose plan changed ({changed_header(doc['jobs'])})", "",
          "| job | base start | what-if start | change (h) | reason |", "|---|---|---|---:|---|"]
    for j in doc["jobs"]:
        was = _was(j)
        L.append(f"| {j['job_id']} | {was} | {_now(j)} | "
                 f"{_fmt(j['delta_h'], '+.1f')} | {j['reason'].replace('|', '/')} |")
    if doc["notes"]:
        L += ["", *[f"- {x}" for x in doc["notes"]]]
    L += ["", f"Run folder: `{doc['run_folder']}`"]
    return "\n".join(L) + "\n"


def to_json_text(doc: dict[str, Any]) -> str:
    """``doc`` as JSON text (strict: no NaN)."""
    return json.dumps(doc, allow_nan=False)
