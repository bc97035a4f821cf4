"""The one writer of ``data/measured/``: a recording appears whole, or not at all.

A recording is a folder ``<root>/<machine>/<name>/`` of data files and a ``manifest.json``
whose ``files`` field gives each data file's sha256 and size.  :func:`write` (and
:class:`Stage`, for a run that writes its files as it goes) builds the folder under a hidden
temporary name beside the target, fsyncs every file, and puts it in place with one rename, so
a killed writer leaves the old recording or the new one, never a mix.  A run's progress file
(:class:`Journal`, the calibration's ``samples.partial.csv``) lives inside the recording's
folder and moves with it: :func:`write` ``keep=`` carries it into the new folder, and leaving
it out removes it in the same rename.

Readers use :mod:`tempo.measured.catalog`; nothing else under ``tempo/`` writes here.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..core import paths
from ..core.io import atomic_write_text, fsync_dir, loads_json, read_regular

#: the recordings root; read at call time (tests point it elsewhere)
ROOT = paths.DATA / "measured"
#: the longest folder name (machine or recording)
MAX_NAME = 100
MANIFEST = "manifest.json"
_NAME = re.compile(r"[\w.+-]+")


def root(root=None) -> Path:
    """``root`` as a Path, or :data:`ROOT`."""
    return Path(root) if root is not None else Path(ROOT)


def slug(text) -> str:
    """``text`` lower-cased, every run of characters other than (Unicode) letters and digits
    made one ``-``, at most 60 characters (``NVIDIA H200`` -> ``nvidia-h200``)."""
    return re.sub(r"[\W_]+", "-", str(text).lower()).strip("-")[:60]


def safe_name(value, what: str) -> str:
    """``value`` when it can be one folder name under the root: a string of (Unicode) letters,
    digits and ``_ . + -``, 1 to :data:`MAX_NAME` characters, not starting with ``.`` or ``-``.
    Raises ``ValueError`` starting with ``what`` otherwise (a separator, ``..``, a NUL ...)."""
    if not isinstance(value, str):
        raise ValueError(f"{what}: must be a string, got {type(value).__name__} {value!r:.60}")
    if not value or len(value) > MAX_NAME:
        raise ValueError(f"{what}: must be 1 to {MAX_NAME} characters, got {len(value)}")
    if not _NAME.fullmatch(value) or value.startswith((".", "-")):
        raise ValueError(f"{what}: must be one folder name (letters, digits, _ . + -; no separator, no leading dot), "
                         f"got {value!r:.80}")
    return value


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files_field(files: dict) -> dict:
    """The manifest's ``files`` field of ``{name: bytes}``: ``{name: {"sha256", "bytes"}}``, sorted."""
    return {n: {"sha256": sha256(d), "bytes": len(d)} for n, d in sorted(files.items())}


@dataclass(frozen=True)
class Written:
    """Where a write left the recording, and whether it wrote one (False: the same content
    was already stored there)."""

    path: Path
    created: bool


# ------------------------------------------------------------------------------ folders
def _parent(base: Path, machine: str) -> Path:
    safe_name(machine, "machine")
    parent = base / machine
    if parent.is_symlink():
        raise ValueError(f"machine: {parent} is a symbolic link; recordings are not stored through links")
    if not parent.resolve().is_relative_to(base.resolve()):
        raise ValueError(f"machine: {parent} would lie outside the recordings root {base}")
    parent.mkdir(parents=True, exist_ok=True)
    return parent


@contextlib.contextmanager
def _lock(base: Path):
    """An exclusive ``flock`` on the root folder itself: one writer at a time per root, so a
    duplicate check and the rename after it are one step."""
    import fcntl

    base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where
    the platform or the file system cannot."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _replace(tmp: Path, target: Path) -> None:
    """Put folder ``tmp`` at ``target``, replacing what is there.  With an exchange the old
    folder lands at ``tmp`` in the same step and is removed after; without one (another
    platform) the old folder is first renamed aside to ``.<name>.<pid>.old``, which
    :func:`_recover` puts back if the process dies before the second rename."""
    try:
        os.rename(tmp, target)  # target absent (or an empty folder)
        return
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
    if _exchange(tmp, target):
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = target.with_name(f".{target.name}.{os.getpid()}.old")
    os.rename(target, old)
    os.rename(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _recover(parent: Path, name: str, temps: bool = True) -> None:
    """Tidy what a killed writer of ``parent/name`` left: an old folder renamed aside goes back
    when ``name`` is missing (else it is removed); with ``temps``, a dead process's temporary
    folder is removed (a replaced recording's old copy, or a write its journal can redo)."""
    for p in parent.glob(f".{glob_escape(name)}.*"):
        m = re.fullmatch(re.escape(f".{name}.") + r"(\d+)\.(?:\d+\.)?(old|tmp)", p.name)
        if not m or _alive(int(m.group(1))) or (m.group(2) == "tmp" and not temps):
            continue
        if m.group(2) == "old" and not (parent / name).exists():
            os.rename(p, parent / name)
        else:
            shutil.rmtree(p, ignore_errors=True)


def recover(machine: str, name: str, root_=None) -> None:
    """Tidy what a killed writer of ``<root>/<machine>/<name>`` left beside it (a temporary
    folder; an old recording renamed aside, put back when the name is missing)."""
    base = root(root_)
    parent = base / safe_name(machine, "machine")
    if parent.is_dir():
        with _lock(base):
            _recover(parent, safe_name(name, "name"))


def glob_escape(text: str) -> str:
    return re.sub(r"([\[\]*?])", r"[\1]", text)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _same(folder: Path, key: dict) -> bool:
    """Whether the recording in ``folder`` has every field of ``key`` in its manifest, equal."""
    try:
        man = loads_json(read_regular(folder / MANIFEST, 64 * 2**20), str(folder / MANIFEST))
    except (OSError, ValueError):
        return False
    return isinstance(man, dict) and all(man.get(k) == v for k, v in key.items())


def _find_same(base: Path, key: dict) -> Path | None:
    for m in sorted(base.glob(f"*/*/{MANIFEST}")):
        if not m.parent.name.startswith(".") and _same(m.parent, key):
            return m.parent
    return None


def _free_name(parent: Path, name: str) -> Path:
    for i in range(1, 1000):
        cand = parent / (name if i == 1 else f"{name}-{i}")
        if not cand.exists():
            return cand
    raise RuntimeError(f"no free folder name for {name} under {parent}")


# ------------------------------------------------------------------------------ writing
class Stage:
    """A recording being written: files go into :attr:`path` (a hidden temporary folder beside
    the target) as the run produces them; :meth:`commit` adds the manifest and puts the folder
    in place.  Leaving the ``with`` block without a commit keeps the temporary folder (an
    interrupted run's output is not lost) and names it in the exception's notes.

    ``exists``: ``"suffix"`` stores a second recording of the same name as ``<name>-2``,
    ``-3`` ...; ``"replace"`` replaces the recording at that name."""

    def __init__(self, machine: str, name: str, root_=None, exists: str = "suffix"):
        if exists not in ("suffix", "replace"):
            raise ValueError(f"exists must be 'suffix' or 'replace', got {exists!r}")
        self.base = root(root_)
        self.name = safe_name(name, "name")
        self.parent = _parent(self.base, machine)
        self.exists = exists
        self.path = self.parent / f".{name}.{os.getpid()}.{id(self)}.tmp"
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir()
        self.committed: Written | None = None

    def __enter__(self) -> Stage:
        return self

    def __exit__(self, typ, exc, tb):
        if self.committed is None and exc is not None and self.path.exists():
            if hasattr(exc, "add_note"):
                exc.add_note(f"unfinished output kept in {self.path}")
        elif self.committed is None:
            self.discard()
        return False

    def write_bytes(self, name: str, data: bytes) -> Path:
        safe_name(name, "file name")
        p = self.path / name
        p.write_bytes(data)
        return p

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, text.encode())

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def commit(self, manifest: dict, same=("files",), keep=()) -> Written:
        """Write ``manifest`` (with its ``files`` field computed here) and put the folder in
        place.  ``same``: the names of the manifest fields that identify the content; a
        recording with all of them equal (the target folder for ``"replace"``, any under the
        root for ``"suffix"``) means nothing is written and that recording is returned.  The
        default, ``files``, is every data file identical.  ``keep``: files of the recording being replaced to carry
        into the new one (hard links: a run's progress file).  Returns :class:`Written`."""
        if self.committed is not None:
            raise RuntimeError(f"{self.path} was committed already")
        data = {p.name: p.read_bytes() for p in sorted(self.path.iterdir()) if p.is_file() and p.name != MANIFEST}
        man = {**manifest, "files": files_field(data)}
        key = {k: man.get(k) for k in same}
        target = self.parent / self.name
        with _lock(self.base):
            _recover(self.parent, self.name, temps=self.exists == "replace")
            if self.exists == "replace":
                # the same recording, and the same progress file kept or gone
                after = set(data) | {MANIFEST} | {k for k in keep if (target / k).is_file()}
                dup = target if target.is_dir() and _same(target, key) and set(os.listdir(target)) == after else None
            else:
                dup = _find_same(self.base, key)
            if dup is not None:
                self.discard()
                self.committed = Written(dup, False)
                return self.committed
            for k in keep:
                src = target / k
                if src.is_file() and not src.is_symlink():
                    try:
                        os.link(src, self.path / k)
                    except OSError:
                        shutil.copy2(src, self.path / k)
            (self.path / MANIFEST).write_text(json.dumps(man, indent=1, default=str))
            for p in self.path.iterdir():
                _fsync_file(p)
            fsync_dir(self.path)
            if self.exists == "replace":
                _replace(self.path, target)
            else:
                target = _free_name(self.parent, self.name)
                os.rename(self.path, target)
            fsync_dir(self.parent)
        self.committed = Written(target, True)
        return self.committed


def write(machine: str, name: str, files: dict, manifest: dict, root_=None, exists: str = "suffix",
          same=("files",), keep=()) -> Written:
    """Store one recording: ``files`` (``{file name: bytes}``) and ``manifest`` (a JSON object;
    its ``files`` field is added) as ``<root>/<machine>/<name>/`` in one rename.  ``exists``,
    ``same``, ``keep``: as :meth:`Stage.commit`.  Raises ``ValueError`` naming ``machine``,
    ``name`` or a file name that cannot be a folder or file name."""
    st = Stage(machine, name, root_, exists)
    try:
        for n, d in files.items():
            st.write_bytes(n, d)
        return st.commit(manifest, same, keep)
    finally:
        st.discard()


# ------------------------------------------------------------------------------ a run's progress file
class Journal:
    """A run's progress file inside a recording's folder (``<root>/<machine>/<name>/<file>``):
    lines appended one ``write`` each and fsynced, so a crash tears at most the last one.  It
    travels with the recording (:meth:`Stage.commit` ``keep=``) until the run is complete."""

    def __init__(self, machine: str, name: str, file: str, root_=None):
        self.folder = _parent(root(root_), machine) / safe_name(name, "name")
        self.path = self.folder / safe_name(file, "file")
        self._fd = None

    def reset(self, text: str) -> None:
        """Replace the file by ``text`` atomically (its folder is created when missing)."""
        self.folder.mkdir(exist_ok=True)
        atomic_write_text(self.path, text)
        fsync_dir(self.folder)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> Journal:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        return self

    def __exit__(self, *exc):
        os.close(self._fd)
        self._fd = None
        return False

    def append(self, line: str) -> None:
        """One line (with its newline) as one ``write``, then fsync; inside ``with journal:``."""
        data = line.encode("ascii")
        while data:
            data = data[os.write(self._fd, data):]
        os.fsync(self._fd)
