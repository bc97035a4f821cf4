"""Atomic file writes, for every layer that writes a result, a recording or a page asset.

A write goes to a temporary file in the target's folder, is flushed and fsynced, then
``os.replace``\\ d over the target: an interrupted build leaves either the old file or the new
one, never half of one.  Imports nothing of tempo.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (its folder is created when missing).

    Parameters
    ----------
    path : path-like
        The file to write.
    data : bytes
        Its new content.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` encoded as UTF-8."""
    atomic_write_bytes(path, text.encode())


def atomic_write_csv(df, path: Path) -> None:
    """:func:`atomic_write_text` of a pandas DataFrame as CSV, without its index."""
    atomic_write_text(path, df.to_csv(index=False))


def fsync_dir(folder: Path) -> None:
    """fsync a folder, so a rename inside it survives a crash (best effort: a file system that
    cannot open or sync a folder is left alone)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
