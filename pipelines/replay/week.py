"""``gpuplan replay``: run an operator's daily cycle for N days on the shipped real traces.

A clock advances day by day through the replayed openb week (``data/fixtures/openb/replay_week.csv``,
the Alibaba openb pods of 7 days replayed on the 64-GPU slice; ``data/fixtures/README.md``) and the
ServeGen traffic (``data/fixtures/servegen/prometheus.json``). For each day ``d`` at its export time
``T_d`` it

1. writes the day's exports into the workspace's ``exports/`` folder, as the cluster would print
   them at ``T_d`` (:func:`pipelines.replay.day.day_exports`): the ``sacct`` text of the last
   day, the ``squeue --json`` snapshot, the Kueue workload list and the Prometheus ``query_range``
   body, each file's modification time set to ``T_d``;
   The first day's ``sacct`` covers the 7 days before it, so the first retraining has history.
2. runs the nightly retraining at ``T_d`` (:func:`pipelines.flows.retrain.train_forecasters`: ingest, then the
   gated retraining on the store up to ``T_d``);
3. runs the replan at ``T_d`` (:func:`pipelines.flows.plan.plan_flow`: ingest, freshness check, plan,
   verify, publish, commands file).

The workspace is created when it has no ``gpuplan.toml`` (:func:`replay_config_text`: the openb
slice's 8 nodes, Slurm or Kueue sources reading ``exports/``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from pipelines.io import strict_json
from pipelines.io.atomic import atomic_write_text
from pipelines.io.errors import InputError
from pipelines.io.paths import PROJECT_ROOT
from pipelines.workspace.config import CONFIG_FILE

FIXTURES: Path = PROJECT_ROOT / "data" / "fixtures"
REPLAY_JOBS: Path = FIXTURES / "openb" / "replay_week.csv"
PROMETHEUS: Path = FIXTURES / "servegen" / "prometheus.json"
NODES: tuple[str, ...] = ("openb-node-0022", "openb-node-0023", "openb-node-0024", "openb-node-0026",
                          "openb-node-0027", "openb-node-0028", "openb-node-0029", "openb-node-0030")
#: The last replayed day's export time: 19 h 20 min before the end of the shipped traces
#: (2025-03-15T20:40Z, 04:40 on the cluster's clock). The openb pods hardly queue on the 64-GPU slice
#: (at most 1 pending job at any time of day); at this time of day a pending job is in the exports on
#: 2 of the 7 days (the first day of ``--days 5``, job 800287), so a replay shows commands for real jobs.
REPLAY_CLOCK_END = pd.Timestamp("2025-03-15T20:40:00Z")
#: The scheduler's clock of the openb slice (the fixture's sacct prints Asia/Shanghai wall time).
TIMEZONE = "Asia/Shanghai"

Scheduler = Literal["slurm", "kueue"]


def replay_config_text(scheduler: Scheduler) -> str:
    """The ``gpuplan.toml`` of a replay workspace: the openb slice, sources reading ``exports/``."""
    nodes = ", ".join(f"{n} = 8" for n in NODES)
    if scheduler == "slurm":
        jobs = ('[sources.history]\nformat = "slurm-sacct"\npath = "exports/sacct-*.txt"\n\n'
                '[sources.queue]\nformat = "slurm-squeue-json"\npath = "exports/squeue-*.json"\n')
    else:
        jobs = ('[sources.history]\nformat = "kueue-json"\npath = "exports/workloads-*.json"\n\n'
                '[sources.queue]\nformat = "kueue-json"\npath = "exports/workloads-*.json"\n')
    return (f"# gpuplan replay workspace ({scheduler}): written by 'gpuplan replay'; exports/ is refilled each day.\n"
            f'services_file = "{PROJECT_ROOT / "data" / "traffic" / "services.json"}"\n\n'
            f'[cluster]\nnodes = {{ {nodes} }}\ntimezone = "{TIMEZONE}"\n\n{jobs}\n'
            '[sources.traffic]\nformat = "prometheus-json"\npath = "exports/prom-*.json"\n'
            'service_label = "service"\nvalue_units = "rate_per_s"\n\n'
            "[retrain]\nholdout_days = 1\nmin_holdout_runs = 10\n")


def write_day(ws_root: Path, exports: dict[str, Any], scheduler: Scheduler) -> list[Path]:
    """Write one day's export texts into ``<ws_root>/exports`` with mtime ``T``; returns the files."""
    t = pd.Timestamp(exports["T"]).tz_convert("UTC")
    stamp = t.strftime("%Y%m%dT%H%M")
    folder = Path(ws_root) / "exports"
    folder.mkdir(parents=True, exist_ok=True)
    names = {"prometheus": f"prom-{stamp}.json"}
    if scheduler == "slurm":
        names.update(sacct=f"sacct-{stamp}.txt", squeue=f"squeue-{stamp}.json")
    else:
        names.update(kueue=f"workloads-{stamp}.json")
    written = []
    for key, name in names.items():
        path = folder / name
        atomic_write_text(path, exports[key])
        os.utime(path, (t.timestamp(), t.timestamp()))
        written.append(path)
    return written


def load_inputs() -> tuple[pd.DataFrame, Any]:
    """The replayed week and the Prometheus body.

    Raises:
        InputError: a shipped fixture is missing.
    """
    from pipelines.replay.jobs import replay_jobs

    for p in (REPLAY_JOBS, PROMETHEUS):
        if not p.is_file():
            raise InputError(f"replay input {p} is missing (see data/fixtures/README.md)")
    frame = pd.read_csv(REPLAY_JOBS, dtype=str, keep_default_na=False)
    return replay_jobs(frame), strict_json.loads(PROMETHEUS.read_text(), str(PROMETHEUS))


def replay_days(jobs: pd.DataFrame) -> int:
    """Whole days the replayed table covers before :data:`REPLAY_CLOCK_END` (6 for the shipped week)."""
    first = pd.to_datetime(jobs["submitted_at"], utc=True).min()
    return max(1, int((REPLAY_CLOCK_END - first) // pd.Timedelta(days=1)))


def replay(ws_root: Path, days: int, scheduler: Scheduler = "slurm",
           notify: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run ``days`` days of export -> ingest -> nightly retrain -> replan (module docstring).

    Returns ``{"workspace", "days": [{"day", "T", "history_rows", "champion_version", "version",
    "promoted", "reason", "plan_start_ts", "plan_status", "verified", "run_dir"}]}``.

    Raises:
        InputError: ``days`` outside 1..the replayed days, or an existing workspace config that is invalid.
    """
    from pipelines.catalog import RunCatalog
    from pipelines.flows.plan import plan_flow
    from pipelines.flows.retrain import train_forecasters
    from pipelines.replay.day import day_exports
    from pipelines.stages.solve import check_plan

    jobs, body = load_inputs()
    n_days = replay_days(jobs)
    if not 1 <= days <= n_days:
        raise InputError(f"--days {days}: the replayed week has {n_days} days (expected 1..{n_days})")
    ws_root = Path(ws_root).expanduser().resolve()
    ws_root.mkdir(parents=True, exist_ok=True)
    if not (ws_root / CONFIG_FILE).exists():
        atomic_write_text(ws_root / CONFIG_FILE, replay_config_text(scheduler))
    from pipelines.config.settings import load_settings
    from pipelines.tracking import store as tracking_store

    tracking_store.init_store(load_settings(workspace=ws_root))  # an unusable MLflow store: one line, before day 0
    out = []
    for d in range(days):  # the last `days` days of the week; the first one's sacct covers the week before it
        day_ex = day_exports(jobs, d, days, body, TIMEZONE, end=REPLAY_CLOCK_END)
        when = pd.Timestamp(day_ex["T"]).tz_convert("UTC").to_pydatetime().astimezone(UTC)
        write_day(ws_root, day_ex, scheduler)
        if notify:
            notify(f"day {d}: exports at {when:%Y-%m-%dT%H:%MZ}; ingest, nightly retraining, replan")
        # the scheduler forecaster only: the nightly real-time backtest (~10 s of CPU per night) is left out here
        night = train_forecasters(scheduled_at=when, workspace=str(ws_root), force=True, kinds=["scheduler"])
        plan = plan_flow(scheduled_at=when, workspace=str(ws_root))
        folder = RunCatalog(Path(plan["run_dir"]))
        summary = folder.load("summary")
        try:  # the published plan, re-read and checked by the independent verifier
            check_plan(folder.load_problem(), folder.load_plan())
            verified = True
        except RuntimeError:
            verified = False
        out.append({"day": d, "T": when.isoformat(), "history_rows": night.get("history_rows"),
                    "champion_version": night.get("champion_version"), "version": night.get("version"),
                    "promoted": night.get("promoted"), "reason": night.get("reason"),
                    "plan_start_ts": summary.get("plan_start"), "plan_status": plan["status"],
                    "verified": verified, "run_dir": plan["run_dir"], "latest_moved": plan["latest_moved"]})
    return {"workspace": str(ws_root), "scheduler": scheduler, "days": out}

