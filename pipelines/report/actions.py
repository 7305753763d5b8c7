"""What to do first about each job at risk (issue 27): its options, computed from the plan and the problem.

For every job of the ``job_at_risk`` rows (:func:`pipelines.report.risks.jobs_outlook`: it misses its
deadline at P90, is not started in the horizon, or never fits), :func:`at_risk_actions` gives:

- **a smaller size that fits**: the largest power of two below the job's smallest allowed size whose
  run fits into the published plan as it is (no other job moved): an aligned block of that many GPUs
  free of batch work, with that many GPUs idle (not planned for real-time), at every step of its run,
  starting before the plan starts the job (or at all, when it does not start). The run's length at a
  size the job does not list is its smallest size's duration times ``smallest / size`` (the same
  GPU-hours: linear scaling, said in the text); P90 likewise from the forecast row.
- **the real-time minimum that blocks it**: ``X`` = the fewest GPUs the services need at any step
  (:func:`optimizer.capacity.service_need`, as :func:`pipelines.report.waits.cannot_fit`); the job can
  never fit while its smallest size is more than ``GPUs up − X``.
- **the what-if lines to try** (flags of ``gpuplan whatif``): ``--add-gpus K`` with ``K`` whole nodes
  (``gpus_per_node``) so that ``GPUs up + K − X`` reaches the smallest size and, when the plan has batch work
  in every aligned block of that size, an aligned block of added GPUs exists (:func:`gpus_to_add`; a job that
  never fits);
  ``--priority JOB=P`` with ``P`` above every queued job's priority (a job that fits but starts too
  late); ``--cancel JOB --add-job FILE`` for the smaller size, FILE being the job at that size under the
  id ``JOB-<gpus>gpus`` (problem-file form, :func:`resize_job_entry`, written next to the report).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.report.basics import ReportInputs, clock, hours_text, instant, plural, step_ts
from pipelines.report.planview import PlanView
from pipelines.report.waits import block_text, cannot_fit, free_blocks, holder_text, names_text, own_gpus


@dataclass(frozen=True)
class SmallerSize:
    """A smaller power-of-two size that fits the published plan (module docstring).

    Attributes:
        gpus: the size; ``start_step``: the first step it fits; ``offset``: its aligned block's first GPU;
        duration_steps: its run (steps); ``p50_h`` / ``p90_h``: its duration forecast (hours, scaled);
        p90_end: its P90 finish (UTC); ``scaled``: True when the size is not one the job lists.
    """

    gpus: int
    start_step: int
    offset: int
    duration_steps: int
    p50_h: float
    p90_h: float
    p90_end: pd.Timestamp
    scaled: bool


@dataclass(frozen=True)
class JobAction:
    """The options of one job at risk (module docstring).

    Attributes:
        job_id, kind, priority: the job; ``gpus``: its smallest allowed size; ``problem``: what is wrong
            (one short sentence); ``deadline``: its real deadline or None.
        never_fits: True when no plan could start it (real-time minimum, GPUs up).
        rt_min_gpus: the real-time minimum X; ``max_batch_gpus``: ``GPUs up − X``.
        smaller: a smaller size that fits, or None; ``commands``: (what it tries, ``gpuplan whatif ...``).
        in_the_way: batch jobs holding part of an aligned block of its smallest size at every step, when the
            plan leaves no such block free of batch work for its run (:func:`in_the_way`).
    """

    job_id: str
    kind: str
    priority: float
    gpus: int
    problem: str
    deadline: pd.Timestamp | None
    never_fits: bool
    rt_min_gpus: int
    max_batch_gpus: int
    smaller: SmallerSize | None = None
    commands: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    in_the_way: tuple[str, ...] = ()


def resize_file_name(job_id: str, gpus: int) -> str:
    """``"whatif-<job>-<gpus>gpus.json"``: the ``--add-job`` file of the smaller-size option."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id)
    return f"whatif-{safe}-{gpus}gpus.json"


def resize_job_entry(inp: ReportInputs, job: Any, small: SmallerSize) -> dict[str, Any]:
    """The job at the smaller size as a ``--add-job`` entry (problem-file form, DESIGN §3.1).

    Its id is ``<job>-<gpus>gpus`` (the what-if refuses an id already in the run; the command cancels the
    original).
    """
    entry: dict[str, Any] = {"job_id": f"{job.job_id}-{small.gpus}gpus", "kind": job.kind, "priority": float(job.priority),
                             "release_step": int(job.release_step), "gpus": int(small.gpus),
                             "duration_steps": int(small.duration_steps)}
    if job.deadline_step is not None:
        entry["deadline_step"] = int(job.deadline_step)
    return entry


def _fits_from(inp: ReportInputs, view: PlanView, jid: str, s: int, d: int, t0: int, t_end: int) -> tuple[int, int] | None:
    """(step, block offset) of the first start in ``[t0, t_end)`` where ``s`` GPUs run ``d`` steps in the plan."""
    for t in range(t0, min(t_end, view.H)):
        t1 = min(view.H, t + d)
        if all(int(view.idle[u]) + own_gpus(view, jid, u) >= s for u in range(t, t1)):
            blocks = free_blocks(view, t, t1, s, jid)
            if blocks:
                return t, blocks[0]
    return None


def smaller_size(inp: ReportInputs, view: PlanView, job: Any, start_step: int | None,
                 info: pd.Series | None) -> SmallerSize | None:
    """The largest power of two below the job's smallest size that fits the plan earlier (module docstring)."""
    base = min(job.sizes, key=lambda z: z.gpus)
    s_min, d_min = int(base.gpus), int(base.duration_steps)
    p50 = float(info["duration_p50_h"]) if info is not None and pd.notna(info.get("duration_p50_h")) else d_min * inp.step_h
    p90 = float(info["duration_p90_h"]) if info is not None and pd.notna(info.get("duration_p90_h")) else p50
    listed = {int(z.gpus): int(z.duration_steps) for z in job.sizes}
    s = 1 << max(0, (s_min - 1).bit_length() - 1) if s_min > 1 else 0
    t_end = view.H if start_step is None else int(start_step)
    while s >= 1:
        d = listed.get(s, math.ceil(d_min * s_min / s))
        found = _fits_from(inp, view, job.job_id, s, d, max(0, int(job.release_step)), t_end)
        if found is not None:
            t, o = found
            ratio = s_min / s
            return SmallerSize(gpus=s, start_step=t, offset=o, duration_steps=d, p50_h=p50 * ratio,
                               p90_h=p90 * ratio, p90_end=step_ts(inp, t) + pd.Timedelta(hours=p90 * ratio),
                               scaled=s not in listed)
        s //= 2
    return None


def _blocks_busy(view: PlanView, job: Any) -> bool:
    """True when the plan leaves no aligned block of the job's smallest size free of batch work for its run."""
    base = min(job.sizes, key=lambda z: z.gpus)
    s, d = int(base.gpus), int(base.duration_steps)
    return s <= view.N and not any(free_blocks(view, t, min(view.H, t + d), s, job.job_id) for t in range(view.H))


def gpus_to_add(view: PlanView, job: Any) -> int:
    """GPUs to add (whole nodes of ``gpus_per_node``) so that a job that never fits has room (module docstring).

    ``K`` makes ``GPUs up + K − X`` reach the smallest size ``s``; and when the plan leaves no aligned
    ``s``-block of today's GPUs free of batch work for the job's run (:func:`_blocks_busy`), ``K`` also reaches
    the first aligned block made only of added GPUs (added nodes take the indices after the last GPU):
    ``K >= ceil(N / s) * s + s − N``, so the re-plan need not move those jobs.
    """
    base = min(job.sizes, key=lambda z: z.gpus)
    s = int(base.gpus)
    rt_min = int(view.need.sum(axis=0).min()) if view.need.size else 0
    k = max(0, s - (view.n_up - rt_min))
    if _blocks_busy(view, job):
        k = max(k, math.ceil(view.N / s) * s + s - view.N)
    return view.gpn * math.ceil(k / view.gpn)


def in_the_way(view: PlanView, job: Any) -> tuple[str, ...]:
    """Batch jobs in an aligned block of the job's smallest size at every step (:attr:`JobAction.in_the_way`).

    Only when the plan leaves no such block free (:func:`_blocks_busy`); latest end first.
    """
    if not _blocks_busy(view, job):
        return ()
    s = min(int(z.gpus) for z in job.sizes)
    found: set[str] = set()
    for o in range(0, view.N - s + 1, s):
        per_step = [set(view.occupancy.holders(range(t, t + 1), o, s, exclude=job.job_id)) for t in range(view.H)]
        found |= set.intersection(*per_step) if per_step else set()
    return tuple(sorted(found, key=lambda j: (-view.end[j], j)))


def _whatif(run_folder: str, *args: str) -> str:
    return shlex.join(["gpuplan", "whatif", run_folder, *args])


def at_risk_actions(inp: ReportInputs, view: PlanView, risk: pd.DataFrame, run_folder: Path | str) -> list[JobAction]:
    """The options of every job at risk, in the order of ``risk`` (its ``job_at_risk`` rows).

    ``run_folder``: the folder the commands name (the run folder the report is written into).
    """
    problem, plan = inp.problem, inp.plan
    folder = str(run_folder)
    rows = {str(r["job_id"]): r for _, r in inp.jobs.iterrows()} if len(inp.jobs) else {}
    rt_min = int(view.need.sum(axis=0).min()) if view.need.size else 0
    max_batch = view.n_up - rt_min
    top = max((float(j.priority) for j in problem.jobs), default=1.0)
    out: list[JobAction] = []
    for jid in risk["job_id"].astype(str).tolist() if len(risk) else []:
        job = problem.job(jid)
        a = plan.job(jid)
        info = rows.get(jid)
        s_min = min(int(z.gpus) for z in job.sizes)
        never = cannot_fit(inp, view, job) is not None
        deadline = None
        r = risk[risk["job_id"] == jid].iloc[0]
        if pd.notna(r.get("deadline_ts")):
            deadline = pd.Timestamp(r["deadline_ts"])
        if never:
            what = (f"never fits: needs {plural(s_min, 'GPU')}, at most {max_batch} of {view.n_up} are ever free "
                    f"for batch work")
        elif a.start_step is None:
            what = f"not started in the {hours_text(problem.horizon_steps * inp.step_h)} horizon"
        else:
            what = (f"P90 finish {instant(r['end_ts'])} after its deadline {instant(deadline)}"
                    if deadline is not None and pd.notna(r.get("end_ts")) else "at risk")
        small = smaller_size(inp, view, job, a.start_step, info)
        cmds: list[tuple[str, str]] = []
        if small is not None:
            cmds.append((f"run it on {plural(small.gpus, 'GPU')}",
                         _whatif(folder, "--cancel", jid, "--add-job",
                                 str(Path(folder) / resize_file_name(jid, small.gpus)))))
        if never:
            k = gpus_to_add(view, job)
            cmds.append((f"add {plural(k, 'GPU')}", _whatif(folder, "--add-gpus", str(k))))
        if not never and float(job.priority) <= top:
            cmds.append(("raise its priority above every queued job",
                         _whatif(folder, "--priority", f"{jid}={top + 1:g}")))
        out.append(JobAction(job_id=jid, kind=str(job.kind), priority=float(job.priority), gpus=s_min, problem=what,
                             deadline=deadline, never_fits=never, rt_min_gpus=rt_min, max_batch_gpus=max_batch,
                             smaller=small, commands=tuple(cmds), in_the_way=in_the_way(view, job)))
    return out


def action_lines(inp: ReportInputs, view: PlanView, actions: list[JobAction]) -> list[str]:
    """The "What to do first" section's Markdown lines (one bullet per job, its options indented).

    First the jobs that were not planned at all (:attr:`ReportInputs.unplannable`), then those at risk.
    """
    out = [f"- **`{jid}`**: not planned: {why}." for jid, why in inp.unplannable]
    if not actions:
        if out:
            return out + ["", "Nothing else at risk: every planned job with a deadline meets it at P90 and fits.", ""]
        return ["Nothing at risk: every queued job with a deadline meets it at P90 and every job fits.", ""]
    for x in actions:
        out.append(f"- **`{x.job_id}`** ({x.kind}, priority {x.priority:g}, {plural(x.gpus, 'GPU')}): {x.problem}.")
        if x.smaller is not None:
            sm = x.smaller
            dl = "" if x.deadline is None else (
                f", {'before' if sm.p90_end <= x.deadline else 'still after'} its deadline {instant(x.deadline)}")
            out.append(f"  - Smaller size: **{plural(sm.gpus, 'GPU')}** fit the plan as it is from "
                       f"{clock(step_ts(inp, sm.start_step))} ({block_text(inp, view, sm.offset, sm.gpus)} free of batch work "
                       f"and {sm.gpus} GPUs idle for its {hours_text(sm.duration_steps * inp.step_h)}"
                       f"{', same GPU-hours (linear scaling)' if sm.scaled else ''}); P90 finish "
                       f"{clock(sm.p90_end)}{dl}.")
        else:
            out.append("  - Smaller size: no smaller power-of-two size fits the plan earlier.")
        blocks = x.gpus > x.max_batch_gpus
        out.append(f"  - Real-time minimum: **{x.rt_min_gpus} GPUs** at every step, leaving at most "
                   f"{x.max_batch_gpus} for batch work" + (f": this is what blocks it (it needs {x.gpus})."
                                                           if blocks else "; not what blocks it."))
        if x.in_the_way:
            out.append(f"  - In the way: the plan has batch work in every aligned {x.gpus}-GPU block at every step; "
                       f"held for the whole horizon by {names_text([holder_text(inp, view, j) for j in x.in_the_way])}.")
        for what, cmd in x.commands:
            out.append(f"  - Try ({what}): `{cmd}`")
    if any(x.commands for x in actions):  # a what-if re-plans everything: its gain can cost other jobs
        out += ["", "Each `gpuplan whatif` re-plans the whole queue: its first lines say what the change costs other "
                "jobs (later starts, deadlines missed) before you act on it." + gpuplan_path_hint()]
    return out + [""]


def gpuplan_path_hint() -> str:
    """`` `gpuplan` is `<venv>/bin/gpuplan` ...`` when ``gpuplan`` is not on ``PATH`` but beside this Python; else "".

    The report's commands are written ``gpuplan whatif ...``; a new user who ran ``bash scripts/run.sh`` has
    not activated the virtual environment, so the sentence names the executable to use instead.
    """
    import shutil
    import sys

    if shutil.which("gpuplan") is not None:
        return ""
    exe = Path(sys.executable).parent / "gpuplan"
    if not exe.exists():
        return ""
    return (f" `gpuplan` is not on your PATH: run these as `{exe} whatif ...`, or after "
            f"`source {exe.parent / 'activate'}`.")
