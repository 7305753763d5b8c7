"""The risk report's preemption rows (issue 30, DESIGN §6.4): the jobs the plan stops now, and those a later replan could.

The jobs the plan stops now and why, and the preemptible running jobs the stop rule would pick at a later replan if
real-time demand reached its P90 (the page's section: :func:`pipelines.report.page.stop_lines`).

Rows (:data:`pipelines.report.basics.REPORT_COLUMNS`): section ``stop_now`` (``Plan.stops``: ``step`` 0,
``count`` = lost steps, ``value`` = GPU-h lost, ``shortfall_gpus`` = real-time GPUs short at step 0) and
``stop_later`` (:func:`optimizer.preemption.stop_outlook` on the report's P90 demand, rounded up: ``step`` = the
first step it would be picked, ``count`` / ``value`` what a stop there loses, ``shortfall_gpus`` there). The
victim order is the planner's (:func:`optimizer.preemption.bench_order`).
"""

from __future__ import annotations

import math

import pandas as pd

from optimizer.preemption import bench_order, rt_shortfall, step0_wants, stop_details, stop_outlook
from pipelines.report.basics import ReportInputs, clock, frame, plural, step_ts


def gpu_h_lost(gpu_h: float) -> str:
    """``"2 GPU-h lost"``: the one name and unit of a stop's cost in every output (issue 30; ``lost_gpu_h`` in JSON)."""
    return f"{gpu_h:g} GPU-h lost"


def loss_text(d, step_minutes: float) -> str:
    """``"loses 2 steps (1 since the last checkpoint or start + 1 restart) on 2 GPUs: 2 GPU-h lost"`` of a stop.

    ``d``: a :class:`optimizer.preemption.StopDetail`. The one wording of a stop's lost work: the risk report's
    rows (so ``gpuplan run``'s ``stop now:`` lines and the Prefect artifacts) and ``gpuplan plan``'s stop lines.
    """
    return (f"loses {plural(d.lost_steps, 'step')} ({d.steps_since_checkpoint} since the last checkpoint or start + "
            f"{d.restart_steps} restart) on {plural(d.gpus, 'GPU')}: {gpu_h_lost(d.lost_gpu_h(step_minutes))}")


def stop_records(inp: ReportInputs, table: pd.DataFrame | None = None) -> list[dict]:
    """The plan's stops at step 0 as ``summary.json``'s ``stops`` list (issue 30); ``[]`` without a stop.

    Each ``{job_id, kind, priority, gpus, steps_since_checkpoint, restart_steps, lost_steps, lost_gpu_h,
    shortfall_gpus, reason}``: ``lost_gpu_h`` = lost steps x GPUs x step hours (the GPU-h lost), ``reason`` the
    risk report's stop row (``table``'s ``stop_now`` row; built from ``inp`` when None), the console's line.
    """
    p, plan = inp.problem, inp.plan
    if not plan.stops:
        return []
    rows = stop_rows(inp) if table is None else table
    why = {r.job_id: r.reason for r in rows[rows["section"] == "stop_now"].itertuples()} if len(rows) else {}
    kinds = _kinds(inp)
    return [{"job_id": d.job_id, "kind": kinds.get(d.job_id, ""), "priority": float(d.priority), "gpus": d.gpus,
             "steps_since_checkpoint": d.steps_since_checkpoint, "restart_steps": d.restart_steps,
             "lost_steps": d.lost_steps, "lost_gpu_h": d.lost_gpu_h(p.cluster.step_minutes),
             "shortfall_gpus": d.shortfall_gpus, "reason": why.get(d.job_id, "")} for d in stop_details(plan, p)]


def _kinds(inp: ReportInputs) -> dict[str, str]:
    p = inp.problem
    return {j.job_id: j.kind for j in p.jobs} | {r.job_id: r.kind for r in p.running}


def p90_want(inp: ReportInputs) -> dict[str, tuple[int, ...]]:
    """Service -> P90 demand in GPUs per step (rounded up; a step missing from ``inp.demand``: the problem's)."""
    p = inp.problem
    d = inp.demand.set_index(["service", "step"])["demand_gpus_p90"] if len(inp.demand) else pd.Series(dtype=float)
    out = {}
    for s in p.services:
        out[s.service] = tuple(int(math.ceil(float(d[(s.service, t)]) - 1e-9)) if (s.service, t) in d.index
                               else int(s.demand_gpus[t]) for t in range(p.cluster.horizon_steps))
    return out


def stop_rows(inp: ReportInputs) -> pd.DataFrame:
    """The ``stop_now`` and ``stop_later`` rows (module docstring); empty without a preemptible running job or stop."""
    p, plan = inp.problem, inp.plan
    if not plan.stops and not any(r.preemptible for r in p.running):
        return frame([])
    kinds, h = _kinds(inp), inp.step_h
    rows = []
    wants = step0_wants(p)
    want = sum(wants.values())
    each = ", ".join(f"{s.service} {wants[s.service]}" for s in p.services)
    # the step-0 rule (optimizer.preemption.rt_shortfall): shortfall = want - GPUs up free of running jobs
    free = want - rt_shortfall(p)
    why0 = (f"the services take {plural(want, 'GPU')} at step 0 ({each}: demand within band and swap cap), "
            f"{plural(free, 'GPU')} up {'is' if free == 1 else 'are'} free of running jobs")
    got = sum(int(g[0]) for g in plan.service_gpus.values() if len(g))  # real-time GPUs the plan gives at step 0
    left = max(0, want - got)
    after = (f"after the stops real-time has all {plural(want, 'GPU')} it takes at step 0" if not left else
             f"after the stops real-time has {got} of the {plural(want, 'GPU')} it takes at step 0: still short of "
             f"{plural(left, 'GPU')}")
    for d in stop_details(plan, p):
        rows.append({"section": "stop_now", "job_id": d.job_id, "kind": kinds.get(d.job_id, ""), "step": 0,
                     "start_ts": step_ts(inp, 0), "gpus": d.gpus, "count": d.lost_steps,
                     "value": d.lost_gpu_h(p.cluster.step_minutes), "shortfall_gpus": d.shortfall_gpus,
                     "reason": f"real-time short of {plural(d.shortfall_gpus, 'GPU')} at step 0 ({why0}); {after}; "
                               f"{loss_text(d, p.cluster.step_minutes)}"})
    for x in stop_outlook(plan, p, p90_want(inp), bench_order(plan.planner)):
        rows.append({"section": "stop_later", "job_id": x.job_id, "kind": kinds.get(x.job_id, ""), "step": x.step,
                     "start_ts": step_ts(inp, x.step), "gpus": x.gpus, "count": x.lost_steps,
                     "value": x.lost_steps * x.gpus * h, "shortfall_gpus": x.shortfall_gpus,
                     "reason": f"if real-time demand reaches its P90 at step {x.step} ({clock(step_ts(inp, x.step))}): "
                               f"short of {plural(x.shortfall_gpus, 'GPU')}; a stop then loses "
                               f"{plural(x.lost_steps, 'step')} on {plural(x.gpus, 'GPU')}: "
                               f"{gpu_h_lost(x.lost_steps * x.gpus * h)}"})
    return frame(rows)
