"""Job forecasters (training, quantization, batch inference): one interface, LightGBM models.

Public API (pure: no files, MLflow or Prefect):

* :func:`fit` ``(kind, history) -> JobModel``
* :func:`predict` ``(model, jobs) -> DataFrame[job_id, duration_p10_h, duration_p50_h, duration_p90_h,
  gpus_pred, flags]`` (hours; ``gpus_pred`` a power of two; ``flags`` a list of strings)
* :func:`predict_for_sizes` ``(model, jobs, sizes)``: the same per allowed GPU count (for the MILP)
* :func:`evaluate` ``(model, holdout) -> dict`` in the JSON shape of ``gpuplan train --json``
* :func:`time_split`, :func:`duration_steps`, :func:`clip_to_step`
* feature lists :data:`FEATURES` (per kind) and fixed, versioned level lists stored in the model.

Modules (everything public is re-exported here, so ``from forecasters import jobs as J; J.fit(...)``):

* :mod:`~forecasters.jobs.features`: contract and derived features, the design matrix;
* :mod:`~forecasters.jobs.priors`: the physics priors (GPU count, analytic duration) and the
  stacked prior features;
* :mod:`~forecasters.jobs.model`: :class:`JobModel`, :func:`predict`, :func:`predict_for_sizes`;
* :mod:`~forecasters.jobs.fitting`: :func:`fit` and the LightGBM boosters (:func:`train_booster`,
  :func:`lightgbm_module`, shared with :mod:`forecasters.scheduler`);
* :mod:`~forecasters.jobs.steps`: hours -> planning steps, one-step minimum, power-of-two requests;
* :mod:`~forecasters.jobs.baselines` and :mod:`~forecasters.jobs.evaluation`: :func:`time_split`,
  the baselines, :func:`evaluate`.

Model. Both targets are physics-informed residual models: LightGBM learns, from the history, the
correction to a noise-free physics prior computed from the job's own features, and the raw
boosters return only that correction (add the prior, a column of the design matrix).
GPU count: the prior is the kind's memory model, ``log2(gpus_used)`` of :mod:`forecasters.workloads`
(``max(gpus_requested, memory-driven minimum)``, column :data:`GPU_PRIOR`); LightGBM regression
learns ``log2(gpus_used) - prior``; the sum is rounded to a power of two (and never below
``gpus_requested`` when no job in the history ran on fewer GPUs than it requested).
Duration: physics-informed residual boosting. The prior is the kind's noise-free analytic
duration (DESIGN §4.1-4.3: ``analytic_duration_h`` of :mod:`forecasters.workloads`, public constants
cited there) at the predicted GPU count; LightGBM (L2) learns the correction
``log(duration_h) - log(prior)`` from the history (equivalent to boosting with the prior as
``init_score``; fitted on the residual label so the boosting also starts from its mean). On the
generated histories the prior is unbiased and the correction stays small; on an operator's real
history the prior is biased (other MFU, overheads, interconnect, software) and the boosting
corrects it where the history shows it. Inputs of the correction: the kind's contract features
(categoricals native, with the fixed level lists of :mod:`forecasters.schema`), scale features
derived from them (:data:`DERIVED_FEATURES`: public rules of thumb such as ~6 N D FLOPs for a full
update and ~4 N D for adapters over the GPU type's datasheet peak, ~16 bytes of state per trained
parameter), and the GPU model's prediction (out-of-fold at fit time) with the prior itself
(:data:`STACKED_FEATURES`). The raw duration booster returns the correction only; add
:func:`offset_log_h` of its design matrix. Quantiles: a calibrated
residual model, i.e. the 10th/50th/90th percentiles of out-of-fold log residuals (K-fold on the
training rows) added to the point forecast, so P10 <= P50 <= P90 always. The same out-of-fold
errors choose the number of boosting rounds of the duration correction (at most ``num_rounds``):
on a history that the prior already explains (the generated ones) that is a round or a few, and
the model is the prior plus a constant; where the history disagrees with the prior, more rounds.
A training row with a missing category gets, as its priors, the median over the known levels.

Training rows with ``duration_h <= 0`` (failed at launch) or missing are excluded and counted in
``model.info["n_excluded_nonpositive"]`` (case C21). Missing categorical values in history (legacy
rows, case C11) are kept as LightGBM's missing branch and counted; unknown levels are refused.
At predict time a missing or unknown category is refused with a message naming the column, value,
row and known levels (case C09), unless ``on_unseen="fallback"``: then the job is predicted under
every known level of the offending column(s), P10 = min, P50 = median, P90 = max, GPUs = max, and
flagged ``unseen_category``.
"""


from forecasters.jobs.baselines import baseline_group_median, baseline_stats, baseline_throughput
from forecasters.jobs.evaluation import analytic_baseline_h, evaluate, time_split
from forecasters.jobs.features import DERIVED, DERIVED_FEATURES, FEATURES, design_frame
from forecasters.jobs.fitting import (
    DEFAULT_PARAMS,
    DEFAULT_ROUNDS,
    GPU_ROUNDS,
    OOF_FOLDS,
    clean_history,
    fit,
    lightgbm_module,
    train_booster,
)
from forecasters.jobs.model import (
    FLAG_GPU_OUTSIDE_HISTORY,
    FLAG_UNSEEN,
    PREDICTION_COLUMNS,
    JobModel,
    gpus_log2_from,
    predict,
    predict_for_sizes,
)
from forecasters.jobs.priors import (
    ANALYTIC_CLIP_H,
    GPU_PRIOR,
    STACKED_FEATURES,
    log2_gpus_physics,
    log_analytic_h,
    offset_log_h,
    plain_features,
    stack,
)
from forecasters.jobs.steps import (
    FLAG_CLIPPED,
    FLAG_REQUEST_ROUNDED,
    clip_to_step,
    duration_steps,
    round_requests_pow2,
)

__all__ = [
    "ANALYTIC_CLIP_H",
    "DEFAULT_PARAMS",
    "DEFAULT_ROUNDS",
    "DERIVED",
    "DERIVED_FEATURES",
    "FEATURES",
    "FLAG_CLIPPED",
    "FLAG_REQUEST_ROUNDED",
    "FLAG_GPU_OUTSIDE_HISTORY",
    "FLAG_UNSEEN",
    "GPU_PRIOR",
    "GPU_ROUNDS",
    "OOF_FOLDS",
    "PREDICTION_COLUMNS",
    "STACKED_FEATURES",
    "JobModel",
    "baseline_group_median",
    "baseline_stats",
    "baseline_throughput",
    "clean_history",
    "clip_to_step",
    "design_frame",
    "duration_steps",
    "evaluate",
    "analytic_baseline_h",
    "fit",
    "gpus_log2_from",
    "lightgbm_module",
    "log2_gpus_physics",
    "log_analytic_h",
    "offset_log_h",
    "plain_features",
    "predict",
    "predict_for_sizes",
    "round_requests_pow2",
    "stack",
    "time_split",
    "train_booster",
]
