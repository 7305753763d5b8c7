"""The planning problem (DESIGN §3.1): validated types and their file form.

- :mod:`optimizer.problem.types`: :class:`Problem` and its parts (:class:`Cluster`,
  :class:`PlanSettings`, :class:`Service`, :class:`Job`, :class:`SizeOption`, :class:`RunningJob`),
  each checked on construction; ``Problem.from_dict``/``to_dict``; :func:`round_up_pow2` (C22).
- :mod:`optimizer.problem.fileform`: the problem file's keys and field rules, knowing no types.

``from optimizer.problem import Problem, PlanSettings, ...`` is the public way in.
"""

from optimizer.problem.types import (
    OBJECTIVE_MAX,
    PRIORITY_RANGE,
    PRIORITY_SPREAD_MAX,
    Cluster,
    Job,
    Node,
    PlanSettings,
    Problem,
    RejectedJob,
    RunningJob,
    Service,
    SizeOption,
    round_up_pow2,
    split_valid_jobs,
)

__all__ = [
    "OBJECTIVE_MAX",
    "PRIORITY_RANGE",
    "PRIORITY_SPREAD_MAX",
    "Cluster",
    "Job",
    "Node",
    "PlanSettings",
    "Problem",
    "RejectedJob",
    "RunningJob",
    "Service",
    "SizeOption",
    "round_up_pow2",
    "split_valid_jobs",
]
