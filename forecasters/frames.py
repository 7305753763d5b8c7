"""Validation and dtype normalisation of job feature frames (cases C09, C12).

Every frame entering a forecaster passes through :func:`normalise_features`, which turns
whatever dtypes arrived (numpy, pandas-3 ``str``, pyarrow-backed ``string[pyarrow]`` /
``int64[pyarrow]`` / ``double[pyarrow]``, object columns parsed from JSON or CSV, pandas
categoricals in any level order) into the canonical form LightGBM is trained on:

* categorical columns: ``pd.CategoricalDtype(levels)`` with the model's fixed level list, so a
  category's code never depends on the input frame;
* every other feature: ``float64`` (booleans as 0.0/1.0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from domain.gpus import canonical_gpu_type
from forecasters.errors import InputError
from forecasters.schema import JOB_ID, KindSpec

_TRUE = {"true", "t", "yes", "y", "1", "1.0"}
_FALSE = {"false", "f", "no", "n", "0", "0.0"}


@dataclass
class CategoryIssues:
    """Rows whose categorical value is missing or not a known level.

    Attributes:
        missing: column -> boolean mask ``(n,)`` of missing values.
        unknown: column -> boolean mask ``(n,)`` of values outside the level list.
        unknown_values: column -> sorted distinct unknown values (as strings).
    """

    missing: dict[str, np.ndarray] = field(default_factory=dict)
    unknown: dict[str, np.ndarray] = field(default_factory=dict)
    unknown_values: dict[str, list[str]] = field(default_factory=dict)

    def any_row(self, n: int) -> np.ndarray:
        """Boolean mask ``(n,)`` of rows with any missing or unknown category."""
        out = np.zeros(n, dtype=bool)
        for m in (*self.missing.values(), *self.unknown.values()):
            out |= m
        return out


def show(value) -> str:
    """``repr`` of a value for messages, numpy scalars as plain Python (``3``, not ``np.int64(3)``)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def row_label(frame: pd.DataFrame, pos: int) -> str:
    """Human name of row ``pos`` (0-based position): ``row 3 (job_id 'x')`` when ids exist."""
    if JOB_ID in frame.columns:
        return f"row {pos} (job_id {frame[JOB_ID].iloc[pos]!r})"
    return f"row {pos}"


def require_columns(frame: pd.DataFrame, columns: tuple[str, ...] | list[str], what: str) -> None:
    """Raise :class:`InputError` naming every column of ``columns`` absent from ``frame``."""
    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"{what}: expected a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{what}: missing column(s) {', '.join(missing)}")


def _category_values(s: pd.Series) -> np.ndarray:
    """Object array of python ``str`` or ``None`` from any string-like/categorical dtype."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    vals = s.astype(object).to_numpy()
    out = np.empty(len(vals), dtype=object)
    for i, v in enumerate(vals):
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
            out[i] = None
        elif isinstance(v, (bool, np.bool_)):
            out[i] = str(v)
        else:
            out[i] = str(v)
    return out


def _numeric_values(frame: pd.DataFrame, col: str, boolean: bool) -> np.ndarray:
    """float64 array of a numeric or boolean column; raises naming row and column on junk."""
    s = frame[col]
    dtype = s.dtype
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
        try:
            return s.astype("float64").to_numpy(dtype=float, na_value=np.nan)
        except (TypeError, ValueError) as exc:  # pragma: no cover - exotic extension dtypes
            raise InputError(f"column {col!r} (dtype {dtype}) cannot be converted to float64: {exc}") from None
    vals = s.astype(object).to_numpy()
    out = np.empty(len(vals), dtype=float)
    for i, v in enumerate(vals):
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
            out[i] = np.nan
            continue
        if isinstance(v, (bool, np.bool_)):
            out[i] = float(v)
            continue
        if isinstance(v, (int, float, np.integer, np.floating)):
            out[i] = float(v)
            continue
        text = str(v).strip()
        if boolean and text.lower() in _TRUE:
            out[i] = 1.0
            continue
        if boolean and text.lower() in _FALSE:
            out[i] = 0.0
            continue
        try:
            out[i] = float(text)
        except ValueError:
            expected = "a boolean" if boolean else "a number"
            raise InputError(
                f"{row_label(frame, i)}, column {col!r}: value {show(v)} is not {expected}"
            ) from None
    return out


def normalise_features(
    frame: pd.DataFrame,
    spec: KindSpec,
    levels: dict[str, tuple[str, ...]] | None = None,
) -> tuple[pd.DataFrame, CategoryIssues]:
    """Validate ``frame`` and return its canonical feature frame plus category issues.

    Args:
        frame: ``(n, >= len(spec.features))`` any dtypes; extra columns are ignored.
        spec: the job kind's feature contract.
        levels: level lists to use (a fitted model's stored lists); default ``spec.categorical``.

    Returns:
        ``(features, issues)``: ``features`` is ``(n, len(spec.features))`` in contract order,
        categoricals as ``CategoricalDtype(levels)`` (missing and unknown values become NaN, and
        are reported in ``issues`` so the caller can refuse or flag them), numerics ``float64``.
        ``gpu_type`` values are first read as the scheduler names they may be
        (:func:`domain.gpus.canonical_gpu_type`: ``B200`` → ``b200_180gb``), as the scheduler-history
        forecaster reads them.

    Raises:
        InputError: a missing feature column (named); a non-numeric value (row and column named);
            a missing numeric value; a negative or non-whole value in an integer column; a
            boolean column holding something other than true/false/0/1.
    """
    require_columns(frame, spec.features, f"{spec.kind} features")
    levels = levels or spec.categorical
    n = len(frame)
    out: dict[str, object] = {}
    issues = CategoryIssues()
    for col in spec.features:
        if col in spec.categorical:
            lv = tuple(levels[col])
            vals = _category_values(frame[col])
            if col == "gpu_type":  # the names schedulers and device plugins print (B200, NVIDIA-A100-SXM4-80GB)
                vals = np.array([v if v is None else (canonical_gpu_type(v) or v) for v in vals], dtype=object)
            missing = np.array([v is None for v in vals], dtype=bool)
            known = set(lv)
            unknown = np.array([(v is not None) and (v not in known) for v in vals], dtype=bool)
            if missing.any():
                issues.missing[col] = missing
            if unknown.any():
                issues.unknown[col] = unknown
                issues.unknown_values[col] = sorted({str(v) for v in vals[unknown]})
            clean = vals.copy()
            clean[missing | unknown] = None
            out[col] = pd.Categorical(clean, categories=list(lv))
            continue
        vals = _numeric_values(frame, col, boolean=col in spec.boolean)
        bad = np.flatnonzero(~np.isfinite(vals))
        if bad.size:
            raise InputError(f"{row_label(frame, int(bad[0]))}, column {col!r}: missing or non-finite value")
        if col in spec.boolean:
            wrong = np.flatnonzero((vals != 0.0) & (vals != 1.0))
            if wrong.size:
                i = int(wrong[0])
                raise InputError(f"{row_label(frame, i)}, column {col!r}: value {show(vals[i])} is not a boolean")
        if col in spec.integer:
            wrong = np.flatnonzero((vals < 0) | (vals != np.round(vals)))
            if wrong.size:
                i = int(wrong[0])
                raise InputError(
                    f"{row_label(frame, i)}, column {col!r}: value {show(vals[i])} is not a non-negative whole number"
                )
        out[col] = vals.astype("float64")
    features = pd.DataFrame(out, index=pd.RangeIndex(n))
    return features, issues


def describe_unknown(issues: CategoryIssues, frame: pd.DataFrame, levels: dict[str, tuple[str, ...]]) -> str:
    """One-line message naming the first bad category: column, value (or missing), row, known levels."""
    for col, mask in issues.unknown.items():
        i = int(np.flatnonzero(mask)[0])
        value = _category_values(frame[col].iloc[[i]])[0]
        return (
            f"unknown {col} {value!r} at {row_label(frame, i)}; known: {', '.join(levels[col])}"
        )
    for col, mask in issues.missing.items():
        i = int(np.flatnonzero(mask)[0])
        return f"{col} is missing at {row_label(frame, i)}; known: {', '.join(levels[col])}"
    return ""
