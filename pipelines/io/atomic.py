"""Atomic outputs: every file gpuplan writes goes through this module.

A reader of ``path`` sees either the previous complete file or the new complete file, never a
partial one, and a failed or killed writer never damages the previous file:

1. the content is written to a fresh hidden temporary file **in the target's folder**
   (``.<stem>.<hex>.tmp<suffix>``; same file system, so the rename below is atomic; the target's
   suffix is kept for writers that pick a format from it, e.g. matplotlib's ``savefig``);
2. the temporary file is flushed to disk (``os.fsync``);
3. ``os.replace`` renames it onto ``path`` (atomic on POSIX; replaces an existing file).

On any exception (including ``KeyboardInterrupt``) in step 1-3 the temporary file is removed and
the exception re-raised; ``path`` is untouched. A ``kill -9`` can leave only a hidden ``.*.tmp*``
file behind. The folder entry itself is not fsynced: after a power loss the previous version may
come back, never a partial file.

* :func:`atomic_path` -- context manager yielding the temporary path, for writers that take a
  path (``DataFrame.to_parquet``, ``pyarrow.parquet.write_table``, ``Figure.savefig``).
* :func:`atomic_write_bytes`, :func:`atomic_write_text` -- for content already in memory.
* :func:`atomic_dir` -- the same for a folder (a saved model): built under a temporary name, an
  existing folder moved aside, the new one renamed into place, the old one deleted.

Special cases that are not a temporary file (the ``latest`` symlink swap and the run-folder
rename) stay in :mod:`pipelines.io.run_folder`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path


def temp_sibling(path: Path, tag: str = "tmp") -> Path:
    """A fresh hidden name beside ``path``: ``.<stem>.<12 hex>.<tag><suffix>`` (suffix kept)."""
    path = Path(path)
    return path.with_name(f".{path.stem}.{uuid.uuid4().hex[:12]}.{tag}{path.suffix}")


def fsync_path(path: Path) -> None:
    """Flush a file's data, or a folder's entries, to disk (``os.fsync`` on a read-only descriptor)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, make_parents: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``, replaced onto ``path`` atomically.

    On a normal exit fsync it and ``os.replace`` it onto
    ``path``; on any exception remove it and re-raise (``path`` unchanged).

    The temporary file already exists (empty, created exclusively with mode ``0o666`` less the
    umask, like ``open(path, "w")``); the writer may overwrite or truncate it.

    Args:
        path: the target file.
        make_parents: create missing parent folders first.

    Raises:
        FileNotFoundError: the target's folder does not exist (and ``make_parents`` is False), or
            the writer removed the temporary file.
        Any exception raised inside the ``with`` block, after the cleanup.
    """
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes, *, make_parents: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`); returns ``path``."""
    path = Path(path)
    with atomic_path(path, make_parents=make_parents) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
    return path


def atomic_write_text(path: str | Path, text: str, *, make_parents: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_path`); returns ``path``."""
    return atomic_write_bytes(path, text.encode("utf-8"), make_parents=make_parents)


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a new empty temporary folder beside ``path``; on a normal exit it replaces ``path``.

    An existing folder at ``path`` is renamed aside (``.<name>.<hex>.old``), the temporary folder
    renamed onto ``path``, then the old one deleted; if that rename fails the old folder is moved
    back. On any exception in the block the temporary folder is deleted and ``path`` is unchanged.
    Parent folders are created. Files inside are not fsynced (a model can be rebuilt).
    Not atomic for readers: between the two renames ``path`` is briefly missing (a concurrent
    load then fails and can retry), and a kill exactly there leaves only the ``.old`` folder;
    ``load_model`` names the missing folder and the next training rebuilds it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    tmp.mkdir()
    try:
        yield tmp
        old = None
        if path.exists():
            old = temp_sibling(path, "old")
            os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            if old is not None:
                os.replace(old, path)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
