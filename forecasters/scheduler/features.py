"""Features of the scheduler runtime forecaster, read from canonical job records.

Input columns (:data:`domain.records.JOB_RECORD`, table in ``pipelines.workspace.sources.records``):
``job_id``, ``submitted_at``, ``user``, ``account``, ``partition``, ``qos``, ``gpu_type``, ``kind``,
``job_name``, ``gpus``, ``time_limit_s`` and ``annotations`` (:data:`FEATURE_INPUTS`).

Design matrix (:meth:`FeatureSpec.design`), one row per job:

* categoricals (pandas ``CategoricalDtype`` with the fixed level list stored in the model; a value
  outside the list, i.e. unseen or rarer than :data:`MIN_LEVEL_COUNT` training rows, is missing,
  LightGBM's missing branch): ``user``, ``account``, ``partition``, ``qos``, ``gpu_type``, ``kind``,
  ``name_token`` (:func:`name_token`), ``gpu_types`` (the requested type set, :func:`requested_types`;
  only when the fit saw requests, :attr:`FeatureSpec.requested`) and ``ann_<key>`` for the text
  annotation keys chosen at fit;
* numbers (float, NaN when unknown): ``log2_gpus`` (``log2(gpus)``, ``-1`` for a job without
  GPUs), ``log_time_limit_h`` (natural log of the limit in hours; NaN when unlimited), then the
  optional groups the fit chose (:attr:`FeatureSpec.groups`, in this order):

  - ``hardware``: ``gpu_log_peak_tflops`` and ``gpu_memory_gb`` of the job's GPU type
    (:func:`domain.gpus.canonical_gpu_type`, :data:`domain.gpus.GPU_TABLE`; NaN when the type is
    unknown), so that a GPU type new to the history is priced by its datasheet, not only missing;
  - ``prior``: ``prior_log_h``, the physics formula (:func:`physics_prior_log_h`) from the LLM
    annotations when they are present (NaN when not): a feature the boosters may use, never the answer;
  - ``calendar``: ``submit_hour`` (0-23) and ``submit_weekday`` (Monday 0) in the cluster's time zone;
  - ``recent``: for each of :data:`RECENT_KEYS` (the same user's, account's and job-name token's
    runs), ``recent_<key>_last2_log_h``, ``recent_<key>_p50_log_h``, ``recent_<key>_spread_log_h``
    and ``recent_<key>_n_log`` (:class:`RecentRuns`), over the runs of that key that **ended
    before the job was submitted** (leakage-free: a run still going at the submit time is not used,
    neither is the job itself): the mean log hours of the last two (Tsafrir, Etsion and Feitelson
    2007 predict a job by its user's last two runtimes), the median and P90 - P10 of the log hours
    of the last :data:`RECENT_RUNS`, and ``log(1 + count)`` of all of them;

  and ``ann_<key>`` for the numeric annotation keys chosen at fit (``params_b``, ``tokens_b``,
  ``cpu_milli`` ...). A model pickled before the groups existed reads ``("calendar",)``, its layout.

Annotation keys (:func:`choose_annotation_keys`): the ``annotations`` column holds a JSON object of
text values (the job's ``gpuplan.*`` fields). A key present in at least
:data:`ANNOTATION_MIN_SHARE` of the training rows becomes a feature: numeric when at least
:data:`NUMERIC_ANNOTATION_SHARE` of its values parse as finite numbers, else categorical. The keys
``kind`` (the ``kind`` column already carries it) and ``gpu_types`` (the ``gpu_types`` feature) are skipped.

Requested GPU types (:func:`requested_types`): the annotation ``gpu_types``, ``|``-separated
alternatives as the sources write them (sacct/squeue typed GRES, a Kueue product selector, a CSV
``gpu_types`` column such as openb's ``gpu_spec``), read as one set: each name through
:func:`domain.gpus.canonical_gpu_type` (else lower-cased), duplicates dropped, sorted, ``|``-joined
(``V100M32|V100M16|V100M32`` -> ``v100_16gb|v100_32gb``). Where a job ran (``gpu_type``) and what it
asked for are different facts: openb records only the request.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from domain.gpus import GPU_TABLE, canonical_gpu_type
from forecasters.errors import InputError
from forecasters.frames import require_columns, row_label, show

#: Categorical scheduler fields used as features, as named in :data:`domain.records.JOB_RECORD`.
BASE_CATEGORICALS: tuple[str, ...] = ("user", "account", "partition", "qos", "gpu_type", "kind")
#: Categorical feature of the job name (:func:`name_token`).
NAME_TOKEN = "name_token"
#: Numeric features every history gives.
CORE_NUMERICS: tuple[str, ...] = ("log2_gpus", "log_time_limit_h")
#: Keys whose recent finished runs are features (the same user's, account's, job-name token's).
RECENT_KEYS: tuple[str, ...] = ("user", "account", NAME_TOKEN)
#: Statistics of a key's recent runs (feature ``recent_<key>_<stat>``).
RECENT_STATS: tuple[str, ...] = ("last2_log_h", "p50_log_h", "spread_log_h", "n_log")
#: Optional numeric groups, in design-matrix order, and their features (module docstring).
GROUP_FEATURES: dict[str, tuple[str, ...]] = {
    "hardware": ("gpu_log_peak_tflops", "gpu_memory_gb"),
    "prior": ("prior_log_h",),
    "calendar": ("submit_hour", "submit_weekday"),
    "recent": tuple(f"recent_{k}_{s}" for k in RECENT_KEYS for s in RECENT_STATS),
}
#: Numeric features of a model fitted before the optional groups: core + calendar.
BASE_NUMERICS: tuple[str, ...] = (*CORE_NUMERICS, *GROUP_FEATURES["calendar"])
#: The last runs of a key summarised by the ``recent`` features.
RECENT_RUNS = 10
#: Record columns the design matrix is built from.
FEATURE_INPUTS: tuple[str, ...] = (
    "job_id", "submitted_at", *BASE_CATEGORICALS, "job_name", "gpus", "time_limit_s", "annotations",
)
#: Categorical feature of the requested GPU type set (:func:`requested_types`; annotation ``gpu_types``).
REQUESTED_TYPES = "gpu_types"
#: Annotation keys never turned into ``ann_<key>`` features (another feature carries them).
SKIPPED_ANNOTATIONS = frozenset({"kind", REQUESTED_TYPES})
#: Prefix of the features taken from annotation keys (``ann_params_b``).
ANNOTATION_FEATURE_PREFIX = "ann_"
#: A categorical level seen in fewer training rows than this is treated as missing ("a few times").
MIN_LEVEL_COUNT = 5
#: An annotation key becomes a feature when present in at least this share of the training rows.
ANNOTATION_MIN_SHARE = 0.05
#: ... and is numeric when at least this share of its present values are finite numbers.
NUMERIC_ANNOTATION_SHARE = 0.9
#: ``log2_gpus`` of a job without GPUs (``gpus == 0``): one below a single GPU.
LOG2_GPUS_NONE = -1.0

_NON_LETTERS = re.compile(r"[^a-z]+")


def name_token(name: object) -> str | None:
    """First word of a job name: lower-cased, split on every non-letter; None when it has no letters.

    ``"train-llama3_70b.sh"`` -> ``"train"``; ``"123"`` -> None. Job names are free text; their first
    word is often the workflow (``train``, ``eval``, ``quant``, ``bash``, ``jupyter``) and a useful
    runtime predictor, and this is the simplest rule that keeps the level count small.
    """
    if not isinstance(name, str):
        return None
    for token in _NON_LETTERS.split(name.lower()):
        if token:
            return token
    return None


def text_values(s: pd.Series) -> np.ndarray:
    """Object array ``(n,)`` of ``str`` or None (None, NaN, NA and ``""`` are None) from any string-like column."""
    vals = s.astype(object).to_numpy()
    out = np.empty(len(vals), dtype=object)
    for i, v in enumerate(vals):
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) or v == "":
            out[i] = None
        else:
            out[i] = str(v)
    return out


def numeric_column(frame: pd.DataFrame, col: str) -> np.ndarray:
    """float64 ``(n,)`` of a non-negative numeric record column (missing -> NaN).

    Raises:
        InputError: a value that is not a number, or a negative one (row, column and value named).
    """
    raw = frame[col]
    vals = pd.to_numeric(raw.astype(object), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    junk = np.flatnonzero(np.isnan(vals) & raw.notna().to_numpy())
    if junk.size:
        i = int(junk[0])
        raise InputError(f"{row_label(frame, i)}, column {col!r}: value {show(raw.iloc[i])} is not a number")
    bad = np.flatnonzero(vals < 0)
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{row_label(frame, i)}, column {col!r}: value {show(vals[i])} must be >= 0")
    return vals


def limit_hours(frame: pd.DataFrame) -> np.ndarray:
    """Requested time limit of each job ``(n,)`` in hours; NaN when unlimited or unknown.

    ``time_limit_s`` NaN (the records' "unlimited or unknown") or 0 (``sbatch --time=0``: "a time
    limit of zero requests that no time limit be imposed", ``sbatch(1)``) is NaN. Raises what
    :func:`numeric_column` raises.
    """
    limit = numeric_column(frame, "time_limit_s")
    return np.where(limit > 0, limit, np.nan) / 3600.0


def submit_times(frame: pd.DataFrame) -> pd.Series:
    """``submitted_at`` as ``datetime64[UTC]`` (naive values read as UTC).

    Raises:
        InputError: a missing or unparsable submit time (row named).
    """
    try:
        ts = pd.to_datetime(frame["submitted_at"], utc=True)
    except (TypeError, ValueError) as exc:
        raise InputError(f"column 'submitted_at': not a timestamp ({exc})") from None
    if ts.isna().any():
        i = int(np.flatnonzero(ts.isna().to_numpy())[0])
        raise InputError(f"{row_label(frame, i)}, column 'submitted_at': missing timestamp")
    return ts.reset_index(drop=True)


def check_timezone(timezone: str) -> str:
    """``timezone`` if it is an IANA zone pandas knows (``Europe/Paris``, ``UTC``).

    Raises:
        InputError: an unknown zone.
    """
    try:
        pd.Timestamp(0, tz="UTC").tz_convert(timezone)
    except Exception:  # noqa: BLE001 - pytz, zoneinfo and dateutil raise different types
        raise InputError(f"timezone {timezone!r} is not an IANA time zone (e.g. 'UTC', 'Europe/Paris')") from None
    return timezone


def parse_annotations(frame: pd.DataFrame) -> list[dict[str, str]]:
    """The ``annotations`` JSON object of each row (values as text); ``{}`` when missing or empty.

    Raises:
        InputError: a value that is not a JSON object (row named).
    """
    out: list[dict[str, str]] = []
    for i, text in enumerate(frame["annotations"].astype(object).tolist()):
        if text is None or (isinstance(text, float) and np.isnan(text)) or text == "":
            out.append({})
            continue
        if isinstance(text, dict):
            obj: object = text
        else:
            try:
                obj = json.loads(str(text))
            except ValueError:
                obj = None
        if not isinstance(obj, dict):
            raise InputError(f"{row_label(frame, i)}, column 'annotations': value {show(text)} is not a JSON object")
        out.append({str(k): str(v) for k, v in obj.items() if v is not None})
    return out


def as_number(text: str | None) -> float:
    """``float(text)`` when finite, else NaN."""
    if text is None:
        return np.nan
    try:
        v = float(text)
    except ValueError:
        return np.nan
    return v if np.isfinite(v) else np.nan


def choose_annotation_keys(annotations: Sequence[dict[str, str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(numeric keys, categorical keys)``, each sorted, chosen from the training rows' annotations.

    A key (other than ``kind``) present in at least :data:`ANNOTATION_MIN_SHARE` of the rows is kept;
    it is numeric when at least :data:`NUMERIC_ANNOTATION_SHARE` of its values are finite numbers.
    Keys of :data:`SKIPPED_ANNOTATIONS` are never chosen.
    """
    n = max(len(annotations), 1)
    present = Counter(k for a in annotations for k in a)
    numeric: list[str] = []
    categorical: list[str] = []
    for key, count in sorted(present.items()):
        if key in SKIPPED_ANNOTATIONS or count < ANNOTATION_MIN_SHARE * n:
            continue
        parsed = sum(np.isfinite(as_number(a[key])) for a in annotations if key in a)
        (numeric if parsed >= NUMERIC_ANNOTATION_SHARE * count else categorical).append(key)
    return tuple(numeric), tuple(categorical)


def gpu_type_key(name: object) -> str | None:
    """One spelling of a GPU type name: :func:`domain.gpus.canonical_gpu_type`, else the name lower-cased; None when empty.

    ``"V100M32"`` -> ``"v100_32gb"``; ``"G2"`` (an operator's own code) -> ``"g2"``.
    """
    if not isinstance(name, str) or not name.strip():
        return None
    return canonical_gpu_type(name) or name.strip().lower()


def requested_types(ann: dict[str, str]) -> str | None:
    """The requested GPU type set of one job's annotations (module docstring), or None when it names none.

    ``{"gpu_types": "V100M32|V100M16|V100M32"}`` -> ``"v100_16gb|v100_32gb"``; ``{}`` -> None.
    """
    keys = sorted({k for k in (gpu_type_key(t) for t in str(ann.get(REQUESTED_TYPES) or "").split("|")) if k})
    return "|".join(keys) if keys else None


def choose_levels(values: np.ndarray) -> tuple[str, ...]:
    """Sorted levels seen at least :data:`MIN_LEVEL_COUNT` times in ``values`` (``(n,)`` str or None)."""
    counts = Counter(v for v in values.tolist() if v is not None)
    return tuple(sorted(k for k, c in counts.items() if c >= MIN_LEVEL_COUNT))


#: Annotation keys of the model size (billions of parameters), first found wins.
PARAMS_KEYS: tuple[str, ...] = ("model_params_b", "params_b")
#: Training variants that update only adapters (~4 N D FLOPs instead of ~6 N D; DESIGN §4.1).
ADAPTER_VARIANTS = frozenset({"lora", "qlora", "dora", "ia3", "prefix_tuning", "adapter"})
#: Kinds whose work is forward passes only (~2 N FLOPs per token).
FORWARD_KINDS = frozenset({"batch_inference", "quantization"})
#: GPU the prior assumes when the job's type is unknown (the physics models' reference GPU).
PRIOR_REFERENCE_GPU = "a100_40gb"


def _first_number(ann: dict[str, str], keys: Sequence[str]) -> float:
    """The first of ``keys`` present in ``ann`` as a finite number, else NaN."""
    for k in keys:
        v = as_number(ann.get(k))
        if np.isfinite(v):
            return v
    return np.nan


def work_tokens(ann: dict[str, str]) -> float:
    """Tokens a job processes, from its annotations (NaN when they do not say).

    First found: ``tokens_b`` (billions); ``dataset_tokens_m`` (millions) x ``epochs`` (default 1);
    ``num_requests`` x (``mean_input_tokens`` + ``mean_output_tokens``); ``calibration_samples`` x
    ``calibration_seq_len`` (the job contracts' names, :mod:`forecasters.schema`).
    """
    t = _first_number(ann, ("tokens_b",))
    if np.isfinite(t):
        return t * 1e9
    t = _first_number(ann, ("dataset_tokens_m",))
    if np.isfinite(t):
        epochs = _first_number(ann, ("epochs",))
        return t * 1e6 * (epochs if np.isfinite(epochs) else 1.0)
    reqs = _first_number(ann, ("num_requests",))
    tin, tout = _first_number(ann, ("mean_input_tokens",)), _first_number(ann, ("mean_output_tokens",))
    if np.isfinite(reqs) and (np.isfinite(tin) or np.isfinite(tout)):
        return reqs * (np.nan_to_num(tin) + np.nan_to_num(tout))
    samples, seq = _first_number(ann, ("calibration_samples",)), _first_number(ann, ("calibration_seq_len",))
    return samples * seq if np.isfinite(samples) and np.isfinite(seq) else np.nan


def physics_prior_log_h(ann: dict[str, str], kind: str | None, gpus: float, gpu_type: str | None) -> float:
    """Compute-bound runtime estimate ``log(hours)`` of one job, NaN when its annotations lack size or work.

    ``hours = c N D / (g x peak x MFU) / 3600`` with ``N`` parameters (:data:`PARAMS_KEYS`, billions),
    ``D`` tokens (:func:`work_tokens`), ``g = max(gpus, 1)``, the GPU type's dense 16-bit peak and
    typical MFU (:data:`domain.gpus.GPU_TABLE`; :data:`PRIOR_REFERENCE_GPU` when the type is
    unknown), and ``c`` FLOPs per parameter and token: 2 for forward-only kinds
    (:data:`FORWARD_KINDS`), 4 for an adapter variant (:data:`ADAPTER_VARIANTS`, annotation
    ``variant`` or ``training_variant``), else 6 (a full update; Kaplan et al. 2020, "Scaling laws
    for neural language models", C ~ 6 N D; DESIGN §4.1).
    """
    n_b = _first_number(ann, PARAMS_KEYS)
    tokens = work_tokens(ann)
    if not (np.isfinite(n_b) and np.isfinite(tokens)) or n_b <= 0 or tokens <= 0:
        return np.nan
    variant = (ann.get("variant") or ann.get("training_variant") or "").lower()
    c = 2.0 if kind in FORWARD_KINDS else (4.0 if variant in ADAPTER_VARIANTS else 6.0)
    spec = GPU_TABLE[canonical_gpu_type(gpu_type) or PRIOR_REFERENCE_GPU]
    g = max(gpus, 1.0) if np.isfinite(gpus) else 1.0
    return float(np.log(c * n_b * 1e9 * tokens / (g * spec.peak_16bit_flops * spec.base_mfu) / 3600.0))


def run_end_ns(frame: pd.DataFrame) -> np.ndarray:
    """End time of each run ``(n,)`` as int64 ns since the epoch (UTC).

    ``ended_at`` when the column exists and is set, else ``started_at + elapsed_s``, else
    ``submitted_at + elapsed_s`` (a run without any of these: ``submitted_at``).
    """
    sub = submit_times(frame)
    elapsed = pd.to_timedelta(np.nan_to_num(numeric_column(frame, "elapsed_s"), nan=0.0), unit="s")
    end = sub + elapsed
    if "started_at" in frame.columns:
        start = pd.to_datetime(frame["started_at"], utc=True).reset_index(drop=True)
        end = end.where(start.isna(), start + elapsed)
    if "ended_at" in frame.columns:
        ended = pd.to_datetime(frame["ended_at"], utc=True).reset_index(drop=True)
        end = end.where(ended.isna(), ended)
    return epoch_ns(end)


def epoch_ns(ts: pd.Series) -> np.ndarray:
    """int64 ns since the epoch ``(n,)`` of an aware datetime series, whatever its unit (s, ms, us, ns)."""
    return ts.dt.as_unit("ns").astype("int64").to_numpy()


@dataclass(frozen=True)
class RecentRuns:
    """The finished runs of each user, account and job-name token, by end time (the ``recent`` features).

    Attributes:
        runs: key (:data:`RECENT_KEYS`) -> value -> ``(end_ns, log_h)``: end times (int64 ns, sorted)
            and the runs' log hours in that order.
    """

    runs: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)

    @classmethod
    def build(cls, keys: dict[str, np.ndarray], end_ns: np.ndarray, log_h: np.ndarray) -> RecentRuns:
        """From ``(n,)`` runs: ``keys`` maps each of :data:`RECENT_KEYS` to the runs' values (str or None)."""
        runs: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        for key in RECENT_KEYS:
            by: dict[str, tuple[np.ndarray, np.ndarray]] = {}
            vals = pd.Series(keys[key], dtype=object)
            for v, idx in vals.groupby(vals, sort=True).groups.items():
                rows = np.asarray(idx, dtype=int)
                order = np.argsort(end_ns[rows], kind="stable")
                by[str(v)] = (np.asarray(end_ns[rows][order], dtype=np.int64), np.asarray(log_h[rows][order], dtype=float))
            runs[key] = by
        return cls(runs)

    def features(self, keys: dict[str, np.ndarray], submit_ns: np.ndarray) -> dict[str, np.ndarray]:
        """``recent_<key>_<stat>`` ``(n,)`` each, for jobs with ``keys`` values submitted at ``submit_ns``.

        For a job, the runs of its key value with an end time strictly before its submit time (by
        end time): the mean log hours of the last two, the median and P90 - P10 (numpy linear
        interpolation) of the log hours of the last :data:`RECENT_RUNS`, and ``log(1 + count)`` of
        all of them; NaN (spread: with fewer than 3 runs) and count 0 when there is none or the
        value is missing.
        """
        n = len(submit_ns)
        out: dict[str, np.ndarray] = {}
        for key in RECENT_KEYS:
            last2, p50, spread, cnt = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
            table = self.runs.get(key, {})
            for i, v in enumerate(keys[key].tolist()):
                if v is None or v not in table:
                    continue
                ends, logs = table[v]
                j = int(np.searchsorted(ends, submit_ns[i], side="left"))
                if j == 0:
                    continue
                last = logs[max(0, j - RECENT_RUNS):j]
                last2[i] = float(np.mean(last[-2:]))
                p50[i] = float(np.median(last))
                if len(last) >= 3:
                    q = np.quantile(last, (0.1, 0.9))
                    spread[i] = float(q[1] - q[0])
                cnt[i] = np.log1p(j)
            out[f"recent_{key}_last2_log_h"] = last2
            out[f"recent_{key}_p50_log_h"] = p50
            out[f"recent_{key}_spread_log_h"] = spread
            out[f"recent_{key}_n_log"] = cnt
        return out


@dataclass(frozen=True)
class FeatureSpec:
    """What a fitted model turns a record frame into (stored in the model).

    Attributes:
        timezone: IANA zone of the cluster's clock (submit hour and weekday).
        levels: categorical feature -> its fixed level list.
        numeric_annotations: annotation keys read as numbers (features ``ann_<key>``).
        categorical_annotations: annotation keys read as categories (features ``ann_<key>``).
        groups: the optional numeric groups used (:data:`GROUP_FEATURES` keys, module docstring).
        recent: the finished runs the ``recent`` features are read from (None: that group unused).
        requested: the ``gpu_types`` feature (requested type set) is used; False for a history
            without requests and for a model pickled before it existed.
    """

    timezone: str
    levels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    numeric_annotations: tuple[str, ...] = ()
    categorical_annotations: tuple[str, ...] = ()
    groups: tuple[str, ...] = ("calendar",)
    recent: RecentRuns | None = None
    requested: bool = False

    @property
    def categoricals(self) -> tuple[str, ...]:
        """Categorical feature names, in design-matrix order."""
        req = (REQUESTED_TYPES,) if getattr(self, "requested", False) else ()
        return (*BASE_CATEGORICALS, NAME_TOKEN, *req,
                *(ANNOTATION_FEATURE_PREFIX + k for k in self.categorical_annotations))

    @property
    def numerics(self) -> tuple[str, ...]:
        """Numeric feature names, in design-matrix order."""
        grouped = tuple(f for g in GROUP_FEATURES if g in self.groups for f in GROUP_FEATURES[g])
        return (*CORE_NUMERICS, *grouped, *(ANNOTATION_FEATURE_PREFIX + k for k in self.numeric_annotations))

    @property
    def features(self) -> tuple[str, ...]:
        """Columns of the design matrix: categoricals then numerics."""
        return (*self.categoricals, *self.numerics)

    def raw(self, jobs: pd.DataFrame) -> dict[str, np.ndarray]:
        """Feature name -> raw values ``(n,)``: object arrays (str or None) for categoricals, float64 for numbers.

        Every group's features are computed (``recent`` only with :attr:`recent` set), used or not.

        Raises:
            InputError: a missing input column, an unparsable value (row named), a negative GPU
                count or time limit, annotations that are not a JSON object, a negative numeric
                annotation (sizes and counts: ``params_b``, ``tokens_b``, ``num_requests`` ...).
        """
        require_columns(jobs, FEATURE_INPUTS, "job records")
        ann = parse_annotations(jobs)
        out: dict[str, np.ndarray] = {c: text_values(jobs[c]) for c in BASE_CATEGORICALS}
        out[NAME_TOKEN] = np.array([name_token(v) for v in jobs["job_name"].astype(object).tolist()], dtype=object)
        out[REQUESTED_TYPES] = np.array([requested_types(a) for a in ann], dtype=object)
        for key in self.categorical_annotations:
            out[ANNOTATION_FEATURE_PREFIX + key] = np.array([a.get(key) or None for a in ann], dtype=object)
        gpus = numeric_column(jobs, "gpus")
        out["log2_gpus"] = np.where(gpus > 0, np.log2(np.maximum(gpus, 1.0)), LOG2_GPUS_NONE)
        out["log2_gpus"][np.isnan(gpus)] = np.nan
        out["log_time_limit_h"] = np.log(limit_hours(jobs))
        canon = [canonical_gpu_type(g) for g in out["gpu_type"].tolist()]
        out["gpu_log_peak_tflops"] = np.array([np.log(GPU_TABLE[c].peak_16bit_flops / 1e12) if c else np.nan
                                               for c in canon], dtype=float)
        out["gpu_memory_gb"] = np.array([GPU_TABLE[c].memory_gb if c else np.nan for c in canon], dtype=float)
        out["prior_log_h"] = np.array([physics_prior_log_h(a, k, g, t) for a, k, g, t in
                                       zip(ann, out["kind"].tolist(), gpus.tolist(), out["gpu_type"].tolist())],
                                      dtype=float)
        local = submit_times(jobs).dt.tz_convert(self.timezone)
        out["submit_hour"] = local.dt.hour.to_numpy(dtype=float)
        out["submit_weekday"] = local.dt.day_of_week.to_numpy(dtype=float)
        if self.recent is not None:
            keys = {k: out[k] for k in RECENT_KEYS}
            out.update(self.recent.features(keys, epoch_ns(submit_times(jobs))))
        for key in self.numeric_annotations:
            vals = np.array([as_number(a.get(key)) for a in ann], dtype=float)
            bad = np.flatnonzero(vals < 0)
            if bad.size:
                i = int(bad[0])
                raise InputError(f"{row_label(jobs, i)}, annotation {key!r}: value {show(vals[i])} must be >= 0 "
                                 "(a size or count)")
            out[ANNOTATION_FEATURE_PREFIX + key] = vals
        return out

    def design(self, jobs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
        """``(design matrix (n, len(features)), unseen)`` of a record frame.

        ``unseen`` maps a categorical feature to the boolean mask ``(n,)`` of rows whose value is
        present but not one of the model's levels (new, or too rare at fit); those values are
        missing in the matrix. Raises what :meth:`raw` raises.
        """
        return self.design_from_raw(self.raw(jobs), len(jobs))

    def design_from_raw(self, raw: dict[str, np.ndarray], n: int) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
        """:meth:`design` from the ``raw`` values of ``n`` jobs (:meth:`raw`; e.g. computed once for several specs)."""
        cols: dict[str, object] = {}
        unseen: dict[str, np.ndarray] = {}
        for c in self.categoricals:
            lv = self.levels.get(c, ())
            known = set(lv)
            vals = raw[c]
            bad = np.array([v is not None and v not in known for v in vals.tolist()], dtype=bool)
            if bad.any():
                unseen[c] = bad
            clean = vals.copy()
            clean[bad] = None
            cols[c] = pd.Categorical(clean, categories=list(lv))
        for c in self.numerics:
            cols[c] = raw[c].astype(float) if c in raw else np.full(n, np.nan)
        return pd.DataFrame(cols, index=pd.RangeIndex(n)), unseen
