"""Atomic run folders, UTC slot labels, the ``latest`` pointer and the freshness check.

A run folder (DESIGN §3 outputs) is named ``<slot>_<run_id>`` where ``slot`` is the UTC
planning slot the run belongs to (``20251026T0130Z``: the scheduled time floored to the
planning step). It is built in a hidden temporary folder ``.tmp-<name>`` inside the output
folder and renamed into place in one ``os.rename`` once complete, so a killed run
(``kill -9``) leaves at most a ``.tmp-*`` folder behind, never a half-written run folder.

``latest`` is a relative symlink to the newest run folder by slot. It is replaced
atomically (a new symlink under a temporary name, then ``os.replace``) under an exclusive
``fcntl`` lock, and only when the new run's slot is not older than the one ``latest``
points to: an older catch-up run is kept in its own folder but never overwrites a newer
plan (case C25).

Stale temporary folders (several writers on one runs volume)
-------------------------------------------------------------
Each temporary folder ``.tmp-<slot>_<run_id>-<token>`` (``token`` random, never a PID) has a
sibling writer file ``.lock-<slot>_<run_id>-<token>``. Its writer holds an exclusive
``fcntl.flock`` on that file for the whole life of the run (the kernel drops it when the
process dies, ``kill -9`` included) and touches it every ``HEARTBEAT_S`` seconds from a
daemon thread (the heartbeat is the file's mtime). :func:`clean_stale_temp` (run at every
:meth:`RunFolder.begin`) removes a temporary folder only when BOTH

* it can take that lock itself (no live writer holds it), AND
* the heartbeat (the newer of the writer file's and the folder's mtime) is older than
  ``stale_after_s`` (default ``STALE_AFTER_S`` = 300 s).

A folder with no writer file (e.g. the old ``-pid<N>`` naming) is judged by its own mtime.
Process IDs are never consulted: a PID means nothing in another PID namespace (two workers in
two containers on one volume) or on another host, so the old PID test deleted live runs and
kept crashed ones.

Why both tests and why 300 s: ``flock`` works across PID namespaces and containers on one
host, so there the lock alone protects a live run. On a volume shared between hosts (NFS and
similar) a lock may not be seen by the other host, or may be refused; then the age threshold
on the heartbeat is the only protection, and it holds as long as a live writer touches its
file more often than ``stale_after_s`` (30 s against 300 s leaves room for a paused process,
I/O stalls and some clock skew between hosts and the file server). A crashed run's leftover
only costs disk space until then, so erring long is cheap; deleting a live run is not.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pipelines.io.atomic import fsync_path
from pipelines.io.errors import InputError
from pipelines.io.slots import as_utc, parse_slot, slot_label

LATEST = "latest"
TMP_PREFIX = ".tmp-"
LOCK_PREFIX = ".lock-"
HEARTBEAT_S = 30.0
"""How often a writer touches its writer file (the heartbeat)."""
STALE_AFTER_S = 300.0
"""A temporary folder with no lock holder is removed once its heartbeat is older than this."""


_NAME_RE = re.compile(r"^(\d{8}T\d{4}Z)_([0-9a-zA-Z-]+)$")


class StalePlanError(RuntimeError):
    """The newest plan is older than the freshness limit (case C25): schedules are not running."""


@dataclass(frozen=True)
class RunInfo:
    """A committed run folder: its path, UTC slot label and run id."""

    path: Path
    slot: str
    run_id: str

    @property
    def slot_time(self) -> datetime:
        """The UTC start of the run's slot (aware)."""
        return parse_slot(self.slot)


def parse_run_name(name: str) -> tuple[str, str] | None:
    """``(slot, run_id)`` from a run folder name, or None when it is not one."""
    m = _NAME_RE.match(name)
    return (m.group(1), m.group(2)) if m else None


def list_runs(out_dir: Path) -> list[RunInfo]:
    """Committed run folders under ``out_dir``, oldest slot first."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    runs = []
    for p in out_dir.iterdir():
        parsed = parse_run_name(p.name)
        if parsed and p.is_dir() and not p.is_symlink():
            runs.append(RunInfo(p, *parsed))
    return sorted(runs, key=lambda r: (r.slot, r.path.stat().st_mtime_ns))


def latest_run(out_dir: Path) -> RunInfo | None:
    """The run folder ``latest`` points to, or None when there is no valid pointer."""
    link = Path(out_dir) / LATEST
    if not link.is_symlink():
        return None
    target = Path(out_dir) / os.readlink(link)
    parsed = parse_run_name(target.name)
    if parsed is None or not target.is_dir():
        return None
    return RunInfo(target, *parsed)



@contextlib.contextmanager
def file_lock(lock_path: Path) -> Iterator[None]:
    """Exclusive inter-process lock on ``lock_path`` (``fcntl.flock``; the file is created)."""
    Path(lock_path).parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


#: Prefix of the per-slot claim files of re-plans (:func:`claim_slot`).
SLOT_CLAIM_PREFIX = ".replan-"


@contextlib.contextmanager
def claim_slot(out_dir: Path, slot: str) -> Iterator[str | None]:
    """At most one re-plan per slot among processes sharing ``out_dir`` (two ``gpuplan serve`` workers, issue 32).

    Takes an exclusive, non-blocking ``flock`` on ``out_dir/.replan-<slot>.lock`` for the body's life. Yields
    None when this process holds the claim and no run folder of ``slot`` is published yet, else the reason to
    skip: ``"running in another process"`` (the lock is held: the kernel drops it when its holder exits,
    ``kill -9`` included, so a killed worker never blocks the slot) or ``"already published as NAME"``.
    The mechanism is this lock in the runs folder, not a Prefect concurrency limit: it holds for any number of
    servers, Prefect API outages and manual ``gpuplan`` runs on the same folder.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / f"{SLOT_CLAIM_PREFIX}{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if _try_lock(fd) is False:
            yield "running in another process"
            return
        done = next((r for r in list_runs(out_dir) if r.slot == slot), None)
        yield None if done is None else f"already published as {done.path.name}"
    finally:
        os.close(fd)  # releases the lock, if taken


def _point_latest(out_dir: Path, run: RunInfo) -> bool:
    """Point ``latest`` at ``run`` unless it already points at a newer slot. Returns True if moved."""
    with file_lock(out_dir / ".latest.lock"):
        current = latest_run(out_dir)
        if current is not None and current.slot > run.slot:
            return False
        tmp = out_dir / f".latest-{uuid.uuid4().hex}"
        os.symlink(run.path.name, tmp)
        os.replace(tmp, out_dir / LATEST)
        return True


def _try_lock(fd: int) -> bool | None:
    """Take an exclusive flock without waiting: True taken, False held by someone, None unsupported."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        return None  # e.g. ENOLCK / EOPNOTSUPP on some network file systems: the age decides
    return True


def _mtime(p: Path) -> float | None:
    try:
        return p.stat().st_mtime
    except FileNotFoundError:
        return None


def clean_stale_temp(out_dir: Path, stale_after_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove temporary folders whose writer is gone (see the module docstring for the rule).

    A ``.tmp-*`` folder is removed only when no process holds the lock on its writer file AND
    its heartbeat is older than ``stale_after_s`` seconds. Orphan writer files are removed by
    the same rule. Returns the removed temporary folders.
    """
    out_dir = Path(out_dir)
    now = time.time()
    removed: list[Path] = []
    for tmp in sorted(out_dir.glob(TMP_PREFIX + "*")):
        if not tmp.is_dir() or tmp.is_symlink():
            continue
        lock = out_dir / (LOCK_PREFIX + tmp.name[len(TMP_PREFIX):])
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            fd = None
        try:
            if fd is not None and _try_lock(fd) is False:
                continue  # a live writer holds it (any PID namespace on this host)
            beats = [t for t in (_mtime(lock), _mtime(tmp)) if t is not None]
            if not beats or now - max(beats) < stale_after_s:
                continue  # recent heartbeat: maybe a writer whose lock we cannot see
            shutil.rmtree(tmp, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            removed.append(tmp)
        finally:
            if fd is not None:
                os.close(fd)  # releases our lock, if taken
    for lock in out_dir.glob(LOCK_PREFIX + "*"):
        if (out_dir / (TMP_PREFIX + lock.name[len(LOCK_PREFIX):])).exists():
            continue
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            mt = _mtime(lock)
            if _try_lock(fd) is not False and mt is not None and now - mt >= stale_after_s:
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
        finally:
            os.close(fd)
    return removed


class _Writer:
    """The writer file of one temporary folder: flock held for the run's life, mtime heartbeat."""

    def __init__(self, path: Path, heartbeat_s: float):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        _try_lock(self.fd)  # unsupported (None) -> protected by the heartbeat age alone
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(heartbeat_s,), daemon=True,
                                        name=f"heartbeat {path.name}")
        self._thread.start()

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            with contextlib.suppress(OSError):
                os.utime(self.fd)

    def release(self) -> None:
        """Stop the heartbeat, delete the writer file and drop the lock."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self.fd)


class RunFolder:
    """Build a run folder in a temporary directory, then publish it atomically.

    Usage::

        rf = RunFolder.begin(out_dir, scheduled_at, run_id)
        rf.tmp_path / "plan.parquet"   # write files here (each itself written atomically)
        info, moved = rf.commit()      # rename into place; move ``latest`` if not older

    ``abort()`` deletes the temporary folder (the previous run and ``latest`` are untouched).
    """

    def __init__(self, out_dir: Path, slot: str, run_id: str, tmp_path: Path, writer: _Writer | None = None):
        self.out_dir = out_dir
        self.slot = slot
        self.run_id = run_id
        self.tmp_path = tmp_path
        self._writer = writer

    @classmethod
    def begin(cls, out_dir: Path, scheduled_at: datetime, run_id: str | None = None,
              step_minutes: int = 30, stale_after_s: float = STALE_AFTER_S,
              heartbeat_s: float = HEARTBEAT_S) -> RunFolder:
        """Create ``out_dir/.tmp-<slot>_<run_id>-<token>`` (and its locked writer file); return the builder.

        First removes other writers' stale temporary folders (:func:`clean_stale_temp` with
        ``stale_after_s``); a run in progress is never removed.

        Raises:
            pipelines.io.errors.InputError: naive ``scheduled_at`` or a run id with other than
                letters, digits and ``-``.
        """
        out_dir = Path(out_dir).resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        clean_stale_temp(out_dir, stale_after_s)
        run_id = run_id or uuid.uuid4().hex[:12]
        if not re.fullmatch(r"[0-9a-zA-Z-]+", run_id):
            raise InputError(f"run_id {run_id!r}: expected letters, digits and '-'")
        slot = slot_label(scheduled_at, step_minutes)
        key = f"{slot}_{run_id}-{uuid.uuid4().hex[:12]}"
        writer = _Writer(out_dir / (LOCK_PREFIX + key), heartbeat_s)  # locked before the folder exists
        tmp = out_dir / (TMP_PREFIX + key)
        try:
            tmp.mkdir()
        except BaseException:
            writer.release()
            raise
        return cls(out_dir, slot, run_id, tmp, writer)

    def _release(self) -> None:
        if self._writer is not None:
            self._writer.release()

    @property
    def name(self) -> str:
        """The run folder's name, ``<slot>_<run_id>``."""
        return f"{self.slot}_{self.run_id}"

    @property
    def final_path(self) -> Path:
        """Where :meth:`commit` puts the folder."""
        return self.out_dir / self.name

    def commit(self) -> tuple[RunInfo, bool]:
        """Rename the temporary folder to ``<slot>_<run_id>`` and update ``latest``.

        Returns ``(run, latest_moved)``; ``latest_moved`` is False when a newer slot was
        already published (older catch-up).

        Raises:
            FileExistsError: a run folder with the same name exists (same slot and run id).
        """
        final = self.final_path
        if final.exists():
            raise FileExistsError(f"run folder {final} already exists")
        _fsync_dir_tree(self.tmp_path)
        os.rename(self.tmp_path, final)
        self._release()  # the temporary folder is gone: nothing left to protect
        fsync_path(self.out_dir)
        info = RunInfo(final, self.slot, self.run_id)
        moved = _point_latest(self.out_dir, info)
        fsync_path(self.out_dir)
        return info, moved

    def abort(self) -> None:
        """Delete the temporary folder (the previous run and ``latest`` are untouched)."""
        shutil.rmtree(self.tmp_path, ignore_errors=True)
        self._release()


def _fsync_dir_tree(path: Path) -> None:
    for p in sorted(path.rglob("*")):
        if p.is_file():
            fsync_path(p)
    fsync_path(path)


def check_freshness(out_dir: Path, now: datetime, max_age_h: float = 2.0) -> RunInfo:
    """Fail loudly when the newest published plan is older than ``max_age_h`` (case C25).

    Age is measured from the plan's UTC slot to ``now``.

    Raises:
        StalePlanError: no plan at all, or the newest is too old (message gives its slot,
            its age in hours and the limit, and says to check the scheduler/worker).
    """
    run = latest_run(out_dir)
    if run is None:
        raise StalePlanError(f"no plan published under {out_dir}: is the replan deployment being served?")
    age_h = (as_utc(now) - run.slot_time).total_seconds() / 3600.0
    if age_h > max_age_h:
        raise StalePlanError(
            f"newest plan {run.path.name} (slot {run.slot}) is {age_h:.1f} h old, more than the "
            f"{max_age_h:g} h limit: scheduled re-planning is not running (is `gpuplan serve` up "
            f"against a persistent Prefect server?)"
        )
    return run


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.io.run_folder check DIR [--max-age-h H]``: the freshness check.

    Exit 1 (message on stderr)
    when the newest plan under DIR is older than H hours (default 2), else print it and exit 0.
    """
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m pipelines.io.run_folder")
    ap.add_argument("command", choices=["check"])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--max-age-h", type=float, default=2.0)
    a = ap.parse_args(argv)
    try:
        run = check_freshness(a.dir, datetime.now(UTC), a.max_age_h)
    except StalePlanError as exc:
        print(f"STALE: {exc}", file=sys.stderr)
        return 1
    print(f"fresh: {run.path.name} (slot {run.slot})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
