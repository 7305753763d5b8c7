"""The what-if's edits as the command line gives them: GPU ranges, ``NAME=VALUE`` assignments, job entries.

``gpuplan whatif`` passes option texts; :func:`pipelines.stages.whatif.build_whatif` turns them into an
:class:`optimizer.whatif.WhatIf` with these parsers; ``--add-job FILE`` is read by :func:`read_job_file`.
Every refusal is one :class:`~pipelines.io.errors.InputError` line naming the option.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from domain.units import hours_to_steps
from pipelines.io.errors import InputError

#: Largest GPU index a range may name, plus one (a typo such as 8-150000000 is refused before expanding it).
MAX_GPU_INDEX = 1 << 20

_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")





_ADD_GPUS = re.compile(r"^\s*(?:([A-Za-z0-9_.\-]+)\s*:\s*)?(\d+)\s*$")


def parse_add_gpus(text: str | int) -> tuple[str | None, int]:
    """``--add-gpus N`` or ``--add-gpus TYPE:N`` as ``(TYPE or None, N)``.

    Raises:
        InputError: neither form (e.g. ``V100M32:x``, ``:8``, ``-4``), named with the option and the text.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise InputError(f"--add-gpus {text}: expected a whole number of GPUs >= 0")
        return None, text
    m = _ADD_GPUS.match(str(text))
    if not m:
        raise InputError(f"--add-gpus {text!r}: expected N (whole GPUs) or TYPE:N (N GPUs of a GPU type of the "
                         "run's cluster, e.g. V100M32:8)")
    return m.group(1), int(m.group(2))


def parse_gpu_ranges(text: str, option: str = "--fail-gpus") -> tuple[int, ...]:
    """GPU indices from ``8-15``, ``3`` or ``8-11,20-23`` (inclusive ranges, as Slurm and cpusets write them).

    Raises:
        InputError: empty, malformed, or a range whose end is below its start (named with ``option``).
    """
    out: list[int] = []
    for part in str(text).split(","):
        m = _RANGE.match(part)
        if not m:
            raise InputError(f"{option} {text!r}: expected GPU indices such as 8-15, 3 or 8-11,20-23 "
                             f"(inclusive ranges); {part.strip()!r} is not one")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        if b < a:
            raise InputError(f"{option} {text!r}: range {a}-{b} ends before it starts")
        if b >= MAX_GPU_INDEX:
            raise InputError(f"{option} {text!r}: GPU {b} is beyond any cluster (indices below {MAX_GPU_INDEX})")
        out.extend(range(a, b + 1))
    return tuple(dict.fromkeys(out))


def parse_assignment(text: str, option: str, what: str) -> tuple[str, float]:
    """``NAME=NUMBER`` (``--priority JOB=P``, ``--demand-scale SERVICE=F``) as ``(name, number)``.

    Raises:
        InputError: no ``=``, an empty name, or a value that is not a finite number.
    """
    name, sep, value = str(text).partition("=")
    name = name.strip()
    if not sep or not name:
        raise InputError(f"{option} {text!r}: expected {what}=NUMBER")
    try:
        x = float(value)
    except ValueError:
        raise InputError(f"{option} {text!r}: {value.strip()!r} is not a number") from None
    if not math.isfinite(x):
        raise InputError(f"{option} {text!r}: {value.strip()!r} is not a finite number")
    return name, x


def job_entry(entry: Any, step_minutes: int, where: str) -> dict[str, Any]:
    """A job to add, as a problem-file job entry (DESIGN §3.1).

    Besides the problem file's keys, ``duration_h`` may replace ``duration_steps`` (also inside
    ``sizes``): hours become whole steps by :func:`domain.units.hours_to_steps` (rounded up, at least
    one). The entry is checked when the edited problem is built (job, field named).

    Raises:
        InputError: not a JSON object, or a ``duration_h`` that is not a positive number.
    """
    if not isinstance(entry, Mapping):
        raise InputError(f"{where}: a job must be a JSON object with job_id, kind, priority, gpus and "
                         f"duration_steps (or duration_h); got {type(entry).__name__}")
    e = dict(entry)

    def steps(d: dict[str, Any], label: str) -> None:
        if "duration_h" in d:
            h = d.pop("duration_h")
            if isinstance(h, bool) or not isinstance(h, (int, float)) or not math.isfinite(h) or h <= 0:
                raise InputError(f"{where}: job {e.get('job_id')!r}: {label}duration_h = {h!r} must be a number > 0")
            d["duration_steps"] = hours_to_steps(float(h), step_minutes)

    steps(e, "")
    if isinstance(e.get("sizes"), list):
        e["sizes"] = [dict(s) if isinstance(s, Mapping) else s for s in e["sizes"]]
        for k, s in enumerate(e["sizes"]):
            if isinstance(s, dict):
                steps(s, f"sizes[{k}].")
    return e


def read_job_file(path: Path, step_minutes: int) -> list[dict[str, Any]]:
    """Jobs to add from a JSON file: one job entry, a list of them, or ``{"jobs": [...]}`` (:func:`job_entry`).

    Raises:
        InputError: missing or unreadable file, invalid JSON, or no job in it.
    """
    from pipelines.io import strict_json

    path = Path(path)
    if not path.is_file():
        raise InputError(f"--add-job {path}: no such file")
    doc = strict_json.loads(path.read_text(encoding="utf-8"), f"--add-job {path}")
    if isinstance(doc, Mapping) and "jobs" in doc:
        doc = doc["jobs"]
    items = doc if isinstance(doc, list) else [doc]
    if not items:
        raise InputError(f"--add-job {path}: no job in the file")
    return [job_entry(x, step_minutes, f"--add-job {path}") for x in items]
