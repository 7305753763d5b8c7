"""Pulling a source instead of reading drop-in files (issue 28): a command's output, or Prometheus' HTTP API.

A ``[sources.<role>]`` with ``command = "sacct ..."`` runs that command (``sh -c``, with a timeout) and parses its
standard output as the source's ``format``; ``format = "prometheus-http"`` with ``url``, ``query`` and ``step``
asks ``GET <url>/api/v1/query_range`` for the last ``lookback_h`` hours. Either way the text pulled is first
written into the store's raw folder (``<store>/raw/<role>-<UTC time>.<ext>``, :func:`raw_path`), so what was
ingested can be replayed; then it is parsed like any export file.

Prometheus rules (Prometheus 2.42, ``docs/querying/api.md`` "Range queries"; ``web/api/v1/api.go``):

* one range query may return at most 11,000 points per series ("exceeded maximum resolution of 11,000 points per
  timeseries"); :func:`chunks` splits ``[start, end]`` into windows of at most :data:`MAX_POINTS` points, each
  starting one step after the previous one's end, so no sample is asked twice; the series are joined again by
  their label sets (:func:`fetch_query_range`'s body reads as one response);
* a body with ``"status": "error"`` (HTTP 400 ``bad_data``, 422 ``execution``, 503 ``unavailable``...) is an
  error named by its ``errorType`` and ``error``; connection failures and HTTP 5xx are retried
  (:data:`RETRIES` attempts in all, ``backoff_s`` doubling), a 4xx answer is not.

Every failure is one :class:`~pipelines.io.errors.InputError` line naming the source and what failed; it is raised
before anything is written to the store (the raw file of a failed pull is not kept).
"""

from __future__ import annotations

import json
import math
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.io.errors import InputError

#: Points per series per range query: under Prometheus' hard limit of 11,000 (``api.go``: ``11000``).
MAX_POINTS = 10_000
#: Attempts per HTTP request (first try + retries) on connection errors and HTTP 5xx.
RETRIES = 3
#: Default seconds a ``command`` source may run.
COMMAND_TIMEOUT_S = 120.0
#: Extension of the raw file of each format.
RAW_EXT = {"slurm-sacct": "txt", "slurm-squeue-json": "json", "kueue-json": "json", "prometheus-json": "json",
           "prometheus-http": "json", "csv": "csv", "slurm-sinfo-json": "json", "kubernetes-nodes-json": "json"}


def raw_path(raw_dir: Path, role: str, fmt: str, at: pd.Timestamp) -> Path:
    """``<raw_dir>/<role>-<YYYYmmddTHHMMSSZ>.<ext>`` (a second suffix ``-2``, ``-3`` ... if that name exists)."""
    stamp = pd.Timestamp(at).tz_convert("UTC").strftime("%Y%m%dT%H%M%SZ")
    ext = RAW_EXT.get(fmt, "txt")
    path, n = raw_dir / f"{role}-{stamp}.{ext}", 1
    while path.exists():
        n += 1
        path = raw_dir / f"{role}-{stamp}-{n}.{ext}"
    return path


def _keep(text: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def run_command(command: str, timeout_s: float, where: str) -> str:
    """Run ``command`` with ``sh -c``; its standard output.

    Raises:
        InputError: the command is not found, exits non-zero (with the last line of its standard error), prints
            nothing, or runs longer than ``timeout_s`` seconds. ``where`` names the source in the message.
    """
    try:
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise InputError(f"{where}: command {command!r} did not finish within {timeout_s:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1][:200]
        raise InputError(f"{where}: command {command!r} exited {done.returncode}: {last}")
    if not done.stdout.strip():
        raise InputError(f"{where}: command {command!r} printed nothing")
    return done.stdout


def parse_step_s(step: int | float | str) -> int:
    """A step in seconds: ``600``, ``"600"``, ``"600s"``, ``"10m"``, ``"1h"``. Raises ValueError otherwise."""
    bad = f"step {step!r}: expected a whole number of seconds >= 1 (600, '600s', '10m', '1h')"
    try:
        if isinstance(step, int | float):
            value = float(step)
        else:
            s = step.strip()
            unit = {"s": 1, "m": 60, "h": 3600}.get(s[-1:], 0)
            value = float(s[:-1]) * unit if unit else float(s)
    except ValueError:
        raise ValueError(bad) from None
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise ValueError(bad)
    return int(value)


def chunks(start_s: int, end_s: int, step_s: int, max_points: int = MAX_POINTS) -> list[tuple[int, int]]:
    """``[start_s, end_s]`` (epoch seconds) as query windows of at most ``max_points`` evaluation points each.

    A window ``(a, b)`` is evaluated at ``a, a + step, ..., b``; the next one starts at ``b + step``.
    """
    if end_s < start_s:
        return []
    span = (max_points - 1) * step_s
    out, a = [], start_s
    while a <= end_s:
        b = min(a + span, end_s)
        out.append((a, b))
        a = b + step_s
    return out


def _get(url: str, params: dict[str, str], where: str, timeout_s: float, retries: int, backoff_s: float) -> Any:
    full = f"{url.rstrip('/')}/api/v1/query_range?{urllib.parse.urlencode(params)}"
    last = ""
    for attempt in range(retries):
        if attempt:
            time.sleep(backoff_s * 2 ** (attempt - 1))
        try:
            with urllib.request.urlopen(full, timeout=timeout_s) as resp:  # noqa: S310 (operator's URL)
                body = resp.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", errors="replace")
            msg = _error_of(body) or f"HTTP {exc.code} {exc.reason}"
            if exc.code < 500:
                raise InputError(f"{where}: {url}: {msg}") from None
            last = msg
            continue
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            last = f"cannot connect ({reason})"
            continue
        try:
            doc = json.loads(body)
        except json.JSONDecodeError:
            raise InputError(f"{where}: {url}: the answer is not JSON ({body[:80]!r})") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            raise InputError(f"{where}: {url}: {_error_of(body) or 'status is not success'}")
        return doc
    raise InputError(f"{where}: {url}: {last} (after {retries} attempts)")


def _error_of(body: str) -> str:
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        return ""
    if isinstance(doc, dict) and doc.get("status") == "error":
        return f"{doc.get('errorType', 'error')}: {' '.join(str(doc.get('error', '')).split())[:200]}"
    return ""


def fetch_query_range(url: str, query: str, start_s: int, end_s: int, step_s: int, *, where: str = "prometheus",
                      max_points: int = MAX_POINTS, retries: int = RETRIES, timeout_s: float = 30.0,
                      backoff_s: float = 1.0) -> str:
    """``query`` over ``[start_s, end_s]`` every ``step_s`` seconds, in :func:`chunks`; one query_range JSON body.

    Returns:
        ``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric", "values"}, ...]}}`` with
        each label set's samples of every chunk in time order (the form
        :func:`pipelines.workspace.sources.prometheus.parse_query_range` reads).

    Raises:
        InputError: the server is unreachable after ``retries`` attempts, answers an error body or an HTTP
            error, or answers something that is not a matrix (one line naming ``where`` and ``url``).
    """
    series: dict[str, dict[str, Any]] = {}
    for a, b in chunks(start_s, end_s, step_s, max_points):
        doc = _get(url, {"query": query, "start": str(a), "end": str(b), "step": str(step_s)}, where, timeout_s,
                   retries, backoff_s)
        data = doc.get("data") or {}
        if data.get("resultType") != "matrix":
            raise InputError(f"{where}: {url}: resultType {data.get('resultType')!r}, expected 'matrix' "
                             f"(a range query of an instant-vector expression)")
        for s in data.get("result") or []:
            key = json.dumps(s.get("metric", {}), sort_keys=True)
            series.setdefault(key, {"metric": s.get("metric", {}), "values": []})["values"].extend(
                s.get("values") or [])
    body = {"status": "success", "data": {"resultType": "matrix", "result": list(series.values())}}
    return json.dumps(body)


def pull(src: Any, role: str, raw_dir: Path, now: pd.Timestamp | None = None) -> Path:
    """Pull ``[sources.<role>]`` (its ``command``, or its Prometheus ``url``) into the raw folder; the file kept.

    ``src`` is the source's :class:`pipelines.workspace.config.SourceConfig`. For Prometheus the window ends at
    ``now`` floored to the step and starts ``lookback_h`` hours earlier.

    Raises:
        InputError: the pull failed (:func:`run_command`, :func:`fetch_query_range`); nothing is kept then.
    """
    at = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now).tz_convert("UTC")
    where = f"sources.{role}"
    if src.format == "prometheus-http":
        step_s = parse_step_s(src.step)
        end_s = int(at.timestamp()) // step_s * step_s
        start_s = end_s - int(src.lookback_h * 3600) // step_s * step_s
        text = fetch_query_range(src.url, src.query, start_s, end_s, step_s, where=where,
                                 timeout_s=src.timeout_s or 30.0)
    else:
        text = run_command(src.command, src.timeout_s or COMMAND_TIMEOUT_S, where)
    return _keep(text, raw_path(raw_dir, role, src.format, at))
