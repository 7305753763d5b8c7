"""Seeded benchmark scenarios for the rolling-horizon simulator (DESIGN §6.5).

- :mod:`optimizer.scenarios.types`: :class:`Scenario` and its parts (:class:`SimJob`,
  :class:`SimService`, :class:`NodeFailure`, :class:`PinnedStart`); the common conventions
  (30-minute steps, 24 h horizon, 48 h window, 8-GPU nodes).
- :mod:`optimizer.scenarios.workload`: drawing jobs and demand curves, load calibration.
- :mod:`optimizer.scenarios.catalogue`: the named generated scenarios (:data:`GENERATED`,
  :data:`SCENARIOS`) and :func:`build`.
- :mod:`optimizer.scenarios.trace`: the real-trace scenario (:class:`RealTraceData`,
  :func:`real_trace`).

``from optimizer.scenarios import X`` is the public way in.
"""

from optimizer.scenarios.catalogue import (
    BIG_GANG_MIX,
    GENERATED,
    HET_TRACES,
    REAL_TRACES,
    SCENARIOS,
    big_gangs,
    build,
    diurnal_peak,
    forecast_error,
    mixed,
    priority_skew,
    scale_64x30,
    uniform_priority,
)
from optimizer.scenarios.trace import RealTraceData, TracePod, ls_demand_curve, real_trace
from optimizer.scenarios.types import (
    GPUS_PER_NODE,
    HORIZON_STEPS,
    STEP_MINUTES,
    WINDOW_STEPS,
    NodeFailure,
    PinnedStart,
    Scenario,
    SimJob,
    SimService,
)
from optimizer.scenarios.workload import (
    DEFAULT_MIX,
    DEFAULT_PRIORITIES,
    MAX_JOB_H,
    TARGET_LOAD,
    JobDraft,
    KindMix,
    calibrate_jobs,
    diurnal_demand,
    draw_jobs,
    offered_load,
    offered_load_total,
)

__all__ = [
    "BIG_GANG_MIX",
    "DEFAULT_MIX",
    "DEFAULT_PRIORITIES",
    "GENERATED",
    "HET_TRACES",
    "REAL_TRACES",
    "GPUS_PER_NODE",
    "HORIZON_STEPS",
    "MAX_JOB_H",
    "SCENARIOS",
    "STEP_MINUTES",
    "TARGET_LOAD",
    "WINDOW_STEPS",
    "JobDraft",
    "KindMix",
    "NodeFailure",
    "PinnedStart",
    "RealTraceData",
    "Scenario",
    "SimJob",
    "SimService",
    "TracePod",
    "big_gangs",
    "build",
    "calibrate_jobs",
    "diurnal_demand",
    "diurnal_peak",
    "draw_jobs",
    "forecast_error",
    "ls_demand_curve",
    "mixed",
    "offered_load",
    "offered_load_total",
    "priority_skew",
    "real_trace",
    "scale_64x30",
    "uniform_priority",
]
