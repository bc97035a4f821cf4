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
    why = is_writable_target(path)
    if why and why != "is a symbolic link":  # a link is replaced by the file, never written through
        raise UnsafeFile(f"{path} {why}: not replaced")
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


# ---------------------------------------------------------------------------- untrusted reads
class UnsafeFile(ValueError):
    """A file that is not read: a link, a FIFO, a device, a folder, or over its size cap."""


def read_regular(path, limit: int, what: str | None = None) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes.

    Never follows a symbolic link (``O_NOFOLLOW``), never blocks on a FIFO (``O_NONBLOCK``,
    then ``fstat`` on the open descriptor: a FIFO, a device node or a socket is refused
    before anything is read), and reads at most ``limit + 1`` bytes, so a file that grows
    while it is read, or a link to ``/dev/zero``, cannot exhaust memory.  Raises
    :class:`UnsafeFile` (a ``ValueError``) naming the file, ``FileNotFoundError`` when absent.
    """
    import stat

    path = Path(path)
    what = what or path.name
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if path.is_symlink():
            raise UnsafeFile(f"{what} is a symbolic link; links are not followed") from None
        raise UnsafeFile(f"cannot open {what}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device node" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
            raise UnsafeFile(f"{what} is {kind}, expected a regular file")
        if st.st_size > limit:
            raise UnsafeFile(f"{what} is {st.st_size} bytes, over the {limit}-byte limit")
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnsafeFile(f"{what} is over the {limit}-byte limit")
    return data


def gunzip_limited(data: bytes, limit: int, what: str = "the file") -> bytes:
    """``gzip.decompress(data)`` that stops at ``limit`` output bytes (a gzip bomb raises
    :class:`UnsafeFile`; a damaged stream raises ``ValueError``)."""
    import gzip
    import io
    import zlib

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{what} is not a readable gzip file ({exc})") from None
    if len(out) > limit:
        raise UnsafeFile(f"{what} inflates past the {limit}-byte limit")
    return out


def is_writable_target(path) -> str | None:
    """None when ``path`` may be replaced by an output file (absent, or a regular file that is
    no link); else why not (a device node, a FIFO, a link, a folder ...)."""
    import stat

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot inspect it ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder"
    if not stat.S_ISREG(st.st_mode):
        return "exists and is not a regular file (a device node, a FIFO or a socket)"
    return None
