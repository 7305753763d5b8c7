"""Features of the scheduler runtime forecaster, read from canonical job records.

Input columns (:data:`domain.records.JOB_RECORD`, table in ``pipelines.sources.records``):
``job_id``, ``submitted_at``, ``user``, ``account``, ``partition``, ``qos``, ``gpu_type``, ``kind``,
``job_name``, ``gpus``, ``time_limit_s`` and ``annotations`` (:data:`FEATURE_INPUTS`).

Design matrix (:meth:`FeatureSpec.design`), one row per job:

* categoricals (pandas ``CategoricalDtype`` with the fixed level list stored in the model; a value
  outside the list, i.e. unseen or rarer than :data:`MIN_LEVEL_COUNT` training rows, is missing,
  LightGBM's missing branch): ``user``, ``account``, ``partition``, ``qos``, ``gpu_type``, ``kind``,
  ``name_token`` (:func:`name_token`) and ``ann_<key>`` for the text annotation keys chosen at fit;
* numbers (float, NaN when unknown): ``log2_gpus`` (``log2(gpus)``, ``-1`` for a job without
  GPUs), ``log_time_limit_h`` (natural log of the limit in hours; NaN when unlimited),
  ``submit_hour`` (0-23) and ``submit_weekday`` (Monday 0) in the cluster's time zone, and
  ``ann_<key>`` for the numeric annotation keys chosen at fit (``params_b``, ``tokens_b`` ...).

Annotation keys (:func:`choose_annotation_keys`): the ``annotations`` column holds a JSON object of
text values (the job's ``gpuplan.*`` fields). A key present in at least
:data:`ANNOTATION_MIN_SHARE` of the training rows becomes a feature: numeric when at least
:data:`NUMERIC_ANNOTATION_SHARE` of its values parse as finite numbers, else categorical. The key
``kind`` is skipped (the ``kind`` column already carries it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecasters.errors import InputError
from forecasters.frames import require_columns, row_label, show

#: Categorical scheduler fields used as features, as named in :data:`domain.records.JOB_RECORD`.
BASE_CATEGORICALS: tuple[str, ...] = ("user", "account", "partition", "qos", "gpu_type", "kind")
#: Categorical feature of the job name (:func:`name_token`).
NAME_TOKEN = "name_token"
#: Numeric features every history gives.
BASE_NUMERICS: tuple[str, ...] = ("log2_gpus", "log_time_limit_h", "submit_hour", "submit_weekday")
#: Record columns the design matrix is built from.
FEATURE_INPUTS: tuple[str, ...] = (
    "job_id", "submitted_at", *BASE_CATEGORICALS, "job_name", "gpus", "time_limit_s", "annotations",
)
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


def _as_number(text: str | None) -> float:
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
    """
    n = max(len(annotations), 1)
    present = Counter(k for a in annotations for k in a)
    numeric: list[str] = []
    categorical: list[str] = []
    for key, count in sorted(present.items()):
        if key == "kind" or count < ANNOTATION_MIN_SHARE * n:
            continue
        parsed = sum(np.isfinite(_as_number(a[key])) for a in annotations if key in a)
        (numeric if parsed >= NUMERIC_ANNOTATION_SHARE * count else categorical).append(key)
    return tuple(numeric), tuple(categorical)


def choose_levels(values: np.ndarray) -> tuple[str, ...]:
    """Sorted levels seen at least :data:`MIN_LEVEL_COUNT` times in ``values`` (``(n,)`` str or None)."""
    counts = Counter(v for v in values.tolist() if v is not None)
    return tuple(sorted(k for k, c in counts.items() if c >= MIN_LEVEL_COUNT))


@dataclass(frozen=True)
class FeatureSpec:
    """What a fitted model turns a record frame into (stored in the model).

    Attributes:
        timezone: IANA zone of the cluster's clock (submit hour and weekday).
        levels: categorical feature -> its fixed level list.
        numeric_annotations: annotation keys read as numbers (features ``ann_<key>``).
        categorical_annotations: annotation keys read as categories (features ``ann_<key>``).
    """

    timezone: str
    levels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    numeric_annotations: tuple[str, ...] = ()
    categorical_annotations: tuple[str, ...] = ()

    @property
    def categoricals(self) -> tuple[str, ...]:
        """Categorical feature names, in design-matrix order."""
        return (*BASE_CATEGORICALS, NAME_TOKEN,
                *(ANNOTATION_FEATURE_PREFIX + k for k in self.categorical_annotations))

    @property
    def numerics(self) -> tuple[str, ...]:
        """Numeric feature names, in design-matrix order."""
        return (*BASE_NUMERICS, *(ANNOTATION_FEATURE_PREFIX + k for k in self.numeric_annotations))

    @property
    def features(self) -> tuple[str, ...]:
        """Columns of the design matrix: categoricals then numerics."""
        return (*self.categoricals, *self.numerics)

    def raw(self, jobs: pd.DataFrame) -> dict[str, np.ndarray]:
        """Feature name -> raw values ``(n,)``: object arrays (str or None) for categoricals, float64 for numbers.

        Raises:
            InputError: a missing input column, an unparsable value (row named), a negative GPU
                count, a annotations that are not a JSON object.
        """
        require_columns(jobs, FEATURE_INPUTS, "job records")
        ann = parse_annotations(jobs)
        out: dict[str, np.ndarray] = {c: text_values(jobs[c]) for c in BASE_CATEGORICALS}
        out[NAME_TOKEN] = np.array([name_token(v) for v in jobs["job_name"].astype(object).tolist()], dtype=object)
        for key in self.categorical_annotations:
            out[ANNOTATION_FEATURE_PREFIX + key] = np.array([a.get(key) or None for a in ann], dtype=object)
        gpus = numeric_column(jobs, "gpus")
        out["log2_gpus"] = np.where(gpus > 0, np.log2(np.maximum(gpus, 1.0)), LOG2_GPUS_NONE)
        out["log2_gpus"][np.isnan(gpus)] = np.nan
        out["log_time_limit_h"] = np.log(limit_hours(jobs))
        local = submit_times(jobs).dt.tz_convert(self.timezone)
        out["submit_hour"] = local.dt.hour.to_numpy(dtype=float)
        out["submit_weekday"] = local.dt.day_of_week.to_numpy(dtype=float)
        for key in self.numeric_annotations:
            out[ANNOTATION_FEATURE_PREFIX + key] = np.array([_as_number(a.get(key)) for a in ann], dtype=float)
        return out

    def design(self, jobs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
        """``(design matrix (n, len(features)), unseen)`` of a record frame.

        ``unseen`` maps a categorical feature to the boolean mask ``(n,)`` of rows whose value is
        present but not one of the model's levels (new, or too rare at fit); those values are
        missing in the matrix. Raises what :meth:`raw` raises.
        """
        raw = self.raw(jobs)
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
            cols[c] = raw[c].astype(float)
        return pd.DataFrame(cols, index=pd.RangeIndex(len(jobs))), unseen
