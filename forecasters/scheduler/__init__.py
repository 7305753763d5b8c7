"""Runtime forecaster over real scheduler histories (Slurm ``sacct``, Kueue) in canonical job records.

Pure (no files, MLflow or Prefect); reads frames of :data:`domain.records.JOB_RECORD` columns.

Public API:

* :func:`fit_scheduler_model` ``(history, timezone="UTC", seed=0) -> SchedulerModel``
* :func:`predict_runtime` ``(model, jobs, now=None) -> DataFrame[job_id, duration_p10_h,
  duration_p50_h, duration_p90_h, gpus_pred, capped_at_limit, elapsed_h, remaining_p10_h,
  remaining_p50_h, remaining_p90_h, flags]``
* :func:`predict_runtime_by_type` ``(model, jobs, types, now=None) -> DataFrame[job_id, gpu_type,
  duration_p10_h, duration_p50_h, duration_p90_h, remaining_*_h, source, anchor_type, duration_ratio,
  flags]``: one row per (job, type) (:mod:`forecasters.scheduler.by_type`).
* :func:`evaluate_scheduler_model` ``(model, holdout) -> dict``; :func:`time_split` (by submit time).

Targets. Runs that ended in :data:`domain.records.UNCENSORED_END_STATES` (completed, failed,
timeout, out_of_memory) with ``elapsed_s > 0``; the target is ``log`` of
``min(elapsed_s, time_limit_s)`` in hours (a TIMEOUT run counts at its limit; the seconds of grace
after it are not plannable time). Censored runs (cancelled after start, preempted, node failure;
:func:`domain.records.is_censored`) only give a lower bound of their runtime: they are *not*
targets (an uncensored fit on them would bias every quantile down), they are counted in the fit
report (``info["n_censored"]``, by state), and they check the P90 (below). Pending, running and
never-started jobs are counted and ignored.

Features (:mod:`forecasters.scheduler.features`): what every scheduler history has, i.e. user,
account, partition, qos, GPU type (where it ran), kind, the job name's first word, the requested
GPU type set (annotation ``gpu_types``, when the history has requests; categoricals with levels seen
at least 5 times, rarer ones missing), ``log2`` of the GPUs, ``log`` of the requested time limit
in hours (NaN when unlimited: ``time_limit_s`` NaN or 0, as ``sbatch --time=0``), submit hour and
weekday in the cluster's time zone, and the ``gpuplan.*`` annotations present in at least 5 % of
the runs (numeric ones such as ``params_b``, ``tokens_b`` as numbers; text ones such as
``variant`` as categoricals); LightGBM routes missing values (NaN) down its learned missing branch.

Quantiles. Three LightGBM quantile boosters (objective ``quantile``, alpha 0.1/0.5/0.9; 200
rounds, 15 leaves, at least 10 rows a leaf, one thread) on log hours, then split-conformal
calibration of P10 and P90 on a time-ordered slice (conformalized quantile regression, Romano,
Patterson and Candès 2019): the boosters are first fitted on the earliest 80 % of the targets by
submit time, the latest 20 % (when at least 50 runs) give one-sided conformal shifts of the log P10
and P90 (:func:`forecasters.scheduler.fitting.conformal_shift`), and the boosters are refitted on
all targets with those shifts added. Why: quantile boosters alone fit the conditional spread
(users differ a lot in how predictable they are) but are over-confident out of sample (the
in-sample quantile of a leaf is exact), and scheduler workloads drift over time, so the
calibration is measured on the latest runs, as the model will be used. The refit on all data uses
the newest runs too (the guarantee of split conformal is for the early model; the shift is an
estimate for the refitted one). P50 is not shifted. The three are sorted per row, so
P10 <= P50 <= P90 (rearrangement: Chernozhukov, Fernández-Val and Galichon 2010).

Censored runs and the P90. For each user with at least 5 runs (targets + censored) and at least
one censored run whose elapsed already exceeds its predicted P90, the P90 of that user is raised
by the least factor after which at most 10 % of the user's runs are known to exceed it
(:func:`forecasters.scheduler.fitting.censored_p90_raise`); the count is a lower bound of the true
exceedance (a censored run would have run at least that long), so the raise is never more than
the history proves. ``info["p90_raised_users"]`` counts the users raised.

Time limit. Every quantile is capped at the job's requested limit: Slurm ends a job at its limit
(``sbatch --time``). Users' limits are poor point estimates (most jobs use a small fraction of
them) but an upper bound the scheduler enforces; Tsafrir, Etsion and Feitelson 2007 ("Backfilling
using system-generated predictions rather than user runtime estimates", IEEE TPDS 18(6)) predict
from the user's recent runtimes and cap the prediction at the user's estimate, which beats the
estimates themselves (see also Mu'alem and Feitelson 2001, IEEE TPDS 12(6)). Here the limit is
both a feature (the model learns each user's typical fraction of it) and the cap.
``capped_at_limit`` tells where the cap bit.

Running jobs. With ``now`` and ``e`` = hours since ``started_at``, each quantile ``q`` becomes
``min(max(q, e + 1 min), L)`` and the remaining time is that minus ``e`` (never below 0): the
simplest conditioning that keeps the order of the quantiles and never goes past the limit (a job
already past a quantile is expected to run at least another minute).

Small histories. Below 30 target runs the model is a fallback (``mode == "median_fallback"``,
``info["fallback_reason"]``, flag ``median_fallback`` on every prediction): P10/P50/P90 are the
user's 10th/50th/90th percentiles of its training runtimes (numpy linear interpolation; P50 the
median) when the user has any, else those of every run; capped at the limit as above. No target
at all raises :class:`InputError`.

Flags. ``flags`` is text: comma-separated ``unseen_<feature>`` for each categorical value the
model does not know (new, or rarer than 5 rows at fit; predicted down the missing branch, still
finite), plus ``median_fallback``.

Evaluation (:func:`evaluate_scheduler_model`): MAE and median absolute error of the P50 (hours),
pinball losses at P50 and P90 (hours), P90 coverage, count of runs; against the requested time
limit, the per-user median and the global median runtime of the training history.
"""

from forecasters.scheduler.by_type import (
    BY_TYPE_COLUMNS,
    FLAG_DATASHEET,
    FLAG_UNPRICED,
    predict_runtime_by_type,
)
from forecasters.scheduler.evaluation import (
    evaluate_scheduler_model,
    forecast_metrics,
    history_as_of,
    time_split,
    time_split_as_of,
)
from forecasters.scheduler.features import FEATURE_INPUTS, MIN_LEVEL_COUNT, FeatureSpec, name_token
from forecasters.scheduler.fitting import (
    FIT_INPUTS,
    MIN_TARGETS,
    PARAMS,
    ROUNDS,
    censored_p90_raise,
    conformal_shift,
    fit_scheduler_model,
    refresh_recent,
    run_buckets,
    target_hours,
)
from forecasters.scheduler.model import (
    FLAG_FALLBACK,
    FLAG_UNSEEN_PREFIX,
    MODE_FALLBACK,
    MODE_LIGHTGBM,
    RUNTIME_COLUMNS,
    SchedulerModel,
    predict_runtime,
)
from forecasters.scheduler.type_history import TypeHistory

__all__ = [
    "BY_TYPE_COLUMNS",
    "FLAG_DATASHEET",
    "FLAG_UNPRICED",
    "TypeHistory",
    "predict_runtime_by_type",
    "FEATURE_INPUTS",
    "FIT_INPUTS",
    "FLAG_FALLBACK",
    "FLAG_UNSEEN_PREFIX",
    "MIN_LEVEL_COUNT",
    "MIN_TARGETS",
    "MODE_FALLBACK",
    "MODE_LIGHTGBM",
    "PARAMS",
    "ROUNDS",
    "RUNTIME_COLUMNS",
    "FeatureSpec",
    "SchedulerModel",
    "censored_p90_raise",
    "conformal_shift",
    "evaluate_scheduler_model",
    "fit_scheduler_model",
    "forecast_metrics",
    "history_as_of",
    "name_token",
    "predict_runtime",
    "refresh_recent",
    "run_buckets",
    "target_hours",
    "time_split",
    "time_split_as_of",
]
