"""Atomic file writes and bounded reads, for every layer that writes or opens a file.

A write goes to a temporary file in the target's folder, is flushed and fsynced, then
``os.replace``\\ d over the target: an interrupted build leaves either the old file or the new
one, never half of one.

Every file the library opens is read as untrusted input through one of the readers below:
regular files only (a FIFO or a device is refused without blocking), sizes capped before the
read, JSON and YAML depth and YAML aliases bounded before parsing, ``.npz`` members' declared
shapes and inflated sizes checked before anything is allocated.  A refusal is a
:class:`BadInput` (a ``ValueError``) naming the file; the command line reports it as a usage
error (exit status 2).  Imports nothing of tempo.
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
#: how deep a JSON or YAML document may nest (the library's own files nest at most 6 levels)
MAX_DEPTH = 64
#: the most nodes a YAML document may hold once its aliases are expanded
MAX_YAML_NODES = 1_000_000


class BadInput(ValueError):
    """An input file the library refuses: unreadable, not a regular file, over a size, depth or
    shape bound, or not the structure it should hold.  The message names the file."""


class UnsafeFile(BadInput):
    """A file that is not read: a link, a FIFO, a device, a folder, or over its size cap."""


def _kind(mode: int) -> str:
    import stat

    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device node" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def open_regular(path, limit: int, what: str | None = None, follow: bool = False):
    """``path`` opened for binary reading when it is a regular file of at most ``limit`` bytes.

    Never blocks on a FIFO (``O_NONBLOCK``, then ``fstat`` on the open descriptor: a FIFO, a
    device node, a socket or a folder is refused before anything is read).  ``follow=False``
    refuses a symbolic link (``O_NOFOLLOW``); ``follow=True`` (a path the user named) opens
    what the link points to, under the same checks.  Raises :class:`UnsafeFile` (a
    ``ValueError``) naming the file, ``FileNotFoundError`` when absent."""
    import stat

    path = Path(path)
    what = what or str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} does not exist") from None
    except OSError as exc:
        if not follow and path.is_symlink():
            raise UnsafeFile(f"{what} is a symbolic link; links are not followed") from None
        raise UnsafeFile(f"cannot open {what}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{what} is {_kind(st.st_mode)}, expected a regular file")
        if st.st_size > limit:
            raise UnsafeFile(f"{what} is {st.st_size} bytes, over the {limit}-byte limit")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, limit: int, what: str | None = None, follow: bool = False) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes
    (:func:`open_regular`: no FIFO, device or folder read; a link refused unless ``follow``).

    Reads at most ``limit + 1`` bytes, so a file that grows while it is read cannot exhaust
    memory.  Raises :class:`UnsafeFile` naming the file, ``FileNotFoundError`` when absent."""
    path = Path(path)
    what = what or path.name
    with open_regular(path, limit, what, follow) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{what} is over the {limit}-byte limit")
    return data


def gunzip_limited(data: bytes, limit: int, what: str = "the file") -> bytes:
    """``gzip.decompress(data)`` that stops at ``limit`` output bytes (a gzip bomb raises
    :class:`UnsafeFile`; a damaged stream raises :class:`BadInput`)."""
    import gzip
    import io
    import zlib

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise BadInput(f"{what} is not a readable gzip file ({exc})") from None
    if len(out) > limit:
        raise UnsafeFile(f"{what} inflates past the {limit}-byte limit")
    return out


def read_maybe_gz(path, limit: int, what: str | None = None, follow: bool = False) -> bytes:
    """The bytes of ``path`` (:func:`read_regular`), inflated (at most ``limit`` bytes) when its
    name ends in ``.gz``."""
    path = Path(path)
    what = what or str(path)
    data = read_regular(path, limit, what, follow)
    return gunzip_limited(data, limit, what) if path.name.endswith(".gz") else data


def read_csv(path, limit: int, what: str | None = None, follow: bool = True, **options):
    """``pandas.read_csv`` of a regular file of at most ``limit`` bytes (``.gz``: inflated to at
    most ``limit``; :func:`read_maybe_gz`); a table pandas cannot parse is :class:`BadInput`."""
    import io

    import pandas as pd

    what = what or str(path)
    data = read_maybe_gz(path, limit, what, follow)
    try:
        return pd.read_csv(io.BytesIO(data), **options)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise BadInput(f"{what} is not a readable CSV ({type(exc).__name__}: {str(exc)[:160]})") from None


# The standard json module has no depth limit (a deep document raises RecursionError, or
# passes and breaks the recursive code that walks it), and no library in the environment
# bounds it, so the depth is counted here: strings blanked by one regular expression, then
# brackets counted with numpy, in blocks.
_JSON_STRING = _BRACKETS = None


def json_depth(data: bytes | str, stop: int | None = None) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not
    count); with ``stop``, counting ends once the depth passes it."""
    import re

    import numpy as np

    global _JSON_STRING, _BRACKETS
    if _JSON_STRING is None:
        _JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
        _BRACKETS = np.zeros(256, np.int32)
        _BRACKETS[[0x5B, 0x7B]], _BRACKETS[[0x5D, 0x7D]] = 1, -1
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    blank = _JSON_STRING.sub(b'""', bytes(data))
    a = np.frombuffer(blank, np.uint8)
    level = depth = 0
    for i in range(0, a.size, 1 << 22):
        run = np.cumsum(_BRACKETS[a[i:i + (1 << 22)]], dtype=np.int32)
        if run.size:
            depth = max(depth, level + int(run.max()))
            level += int(run[-1])
        if stop is not None and depth > stop:
            break
    return depth


def loads_json(data: bytes | str, what: str, max_depth: int = MAX_DEPTH):
    """``json.loads`` of untrusted text: :class:`BadInput` naming ``what`` when it nests deeper
    than ``max_depth`` (checked before parsing) or is not JSON."""
    import json

    if json_depth(data, max_depth) > max_depth:
        raise BadInput(f"{what} nests deeper than {max_depth} levels")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"{what} is not JSON ({type(exc).__name__}: {str(exc)[:120]})") from None


def read_json(path, limit: int, what: str | None = None, follow: bool = False, max_depth: int = MAX_DEPTH):
    """:func:`loads_json` of a regular file of at most ``limit`` bytes (``.gz``: inflated to at
    most ``limit``; :func:`read_maybe_gz`)."""
    what = what or str(path)
    return loads_json(read_maybe_gz(path, limit, what, follow), what, max_depth)


def _yaml_shape(text: str, what: str, loader, max_depth: int, max_nodes: int) -> None:
    """Walk a YAML text's events (the parsers stream them without recursion) and raise
    :class:`BadInput` when it nests deeper than ``max_depth``, holds more than ``max_nodes``
    nodes with its aliases expanded (a "billion laughs" alias bomb), or has a recursive alias.
    Nothing is composed or constructed before this passes: PyYAML's C composer recurses per
    level (a 10^5-deep document crashes the interpreter) and its constructor shares aliased
    nodes, so an alias bomb costs nothing until something walks it."""
    import yaml

    ld = loader(text)
    try:
        stack: list = []   # open collections: [nodes so far, anchor]
        sizes: dict = {}   # anchor -> expanded nodes of the node it names (None: still open)
        total = 0
        while ld.check_event():
            ev = ld.get_event()
            n = None
            if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(stack) >= max_depth:
                    raise BadInput(f"{what} nests deeper than {max_depth} levels")
                if ev.anchor is not None:
                    sizes[ev.anchor] = None
                stack.append([1, ev.anchor])
            elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                n, anchor = stack.pop()
                if anchor is not None:
                    sizes[anchor] = n
            elif isinstance(ev, yaml.ScalarEvent):
                n = 1
                if ev.anchor is not None:
                    sizes[ev.anchor] = 1
            elif isinstance(ev, yaml.AliasEvent):
                n = sizes.get(ev.anchor)
                if n is None:
                    raise BadInput(f"{what}: alias *{ev.anchor} names "
                                   + ("a node that contains it" if ev.anchor in sizes else "no anchor"))
            if n is not None:
                if stack:
                    stack[-1][0] += n
                    if stack[-1][0] > max_nodes:
                        raise BadInput(f"{what} expands to more than {max_nodes} nodes (aliases expanded)")
                else:
                    total += n
                    if total > max_nodes:
                        raise BadInput(f"{what} expands to more than {max_nodes} nodes (aliases expanded)")
    except yaml.YAMLError as exc:
        raise BadInput(f"{what} is not YAML ({str(exc)[:200]})") from None
    finally:
        ld.dispose()


def loads_yaml(text: str | bytes, what: str, base: bool = False, max_depth: int = MAX_DEPTH,
               max_nodes: int = MAX_YAML_NODES):
    """The YAML document ``text`` with PyYAML's safe loader (``base=True``: the base loader,
    every scalar a string), once its depth and alias-expanded size are within bounds
    (:func:`_yaml_shape`).  :class:`BadInput` naming ``what`` otherwise."""
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - pyyaml ships with the book and dev extras
        raise ImportError(f"reading {what} needs PyYAML (pip install pyyaml)") from exc
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(f"{what} is not UTF-8 text ({exc})") from None
    if base:
        loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
    else:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    _yaml_shape(text, what, loader, max_depth, max_nodes)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        raise BadInput(f"{what} is not YAML ({str(exc)[:200]})") from None


def read_yaml(path, limit: int, what: str | None = None, base: bool = False, follow: bool = True):
    """:func:`loads_yaml` of a regular file of at most ``limit`` bytes."""
    what = what or str(path)
    return loads_yaml(read_regular(path, limit, what, follow), what, base=base)


def check_schema(doc, schema: dict, what: str):
    """``doc`` when it matches the JSON Schema ``schema`` (``jsonschema``); else
    :class:`BadInput` naming ``what``, the place in the document and what is wrong."""
    import jsonschema

    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    if err is not None:
        where = "".join(f"[{p!r}]" for p in err.absolute_path) or " (the whole document)"
        raise BadInput(f"{what}{where}: {err.message[:300]}")
    return doc


#: the most members an ``.npz`` may hold
MAX_NPZ_MEMBERS = 4096


def read_npz(source, what: str, limit: int, max_inflated: int, follow: bool = True) -> dict:
    """The arrays of an ``.npz`` (a path, bytes or a binary file object): ``{name: ndarray}``.

    Read as untrusted: a path is opened with :func:`open_regular` (regular file, at most
    ``limit`` bytes); the members' declared sizes must sum to at most ``max_inflated`` bytes;
    each member's ``.npy`` header (format 1.0 or 2.0) must declare a non-object dtype and a
    shape whose bytes equal the member's size, all before its data is allocated; data are read
    into exactly that many bytes (never past the declared size), never unpickled.  Raises
    :class:`BadInput` naming ``what``; ``FileNotFoundError`` when a path is absent."""
    import io
    import math
    import zipfile

    import numpy as np
    from numpy.lib import format as npf

    own = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        if len(source) > limit:
            raise UnsafeFile(f"{what} is {len(source)} bytes, over the {limit}-byte limit")
        f = io.BytesIO(bytes(source))
    elif hasattr(source, "read"):
        f = source
    else:
        f = own = open_regular(source, limit, what, follow)
    try:
        try:
            zf = zipfile.ZipFile(f)
            infos = zf.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise BadInput(f"{what} is not an .npz archive ({exc})") from None
        if len(infos) > MAX_NPZ_MEMBERS:
            raise BadInput(f"{what} holds {len(infos)} members, over the limit of {MAX_NPZ_MEMBERS}")
        names = [i.filename for i in infos]
        if len(set(names)) != len(names) or not all(n.endswith(".npy") for n in names):
            raise BadInput(f"{what}: an .npz holds distinct .npy members only, found {names[:8]}")
        inflated = sum(i.file_size for i in infos)
        if inflated > max_inflated:
            raise UnsafeFile(f"{what} inflates to {inflated} bytes, over the {max_inflated}-byte limit")
        out = {}
        for info in infos:
            name = info.filename[:-4]
            try:
                with zf.open(info) as m:
                    version = npf.read_magic(m)
                    if version == (1, 0):
                        shape, fortran, dtype = npf.read_array_header_1_0(m)
                    elif version == (2, 0):
                        shape, fortran, dtype = npf.read_array_header_2_0(m)
                    else:
                        raise BadInput(f"{what}: member {name!r} is .npy format {version}, expected 1.0 or 2.0")
                    if dtype.hasobject:
                        raise BadInput(f"{what}: member {name!r} holds Python objects (refused: loading them "
                                       "would unpickle)")
                    nbytes = math.prod(shape) * dtype.itemsize
                    if nbytes != info.file_size - m.tell():
                        raise BadInput(f"{what}: member {name!r} declares shape {shape} of {dtype} ({nbytes} "
                                       f"bytes) but holds {info.file_size - m.tell()}")
                    buf = bytearray(nbytes)
                    if m.readinto(memoryview(buf)) != nbytes:
                        raise BadInput(f"{what}: member {name!r} is cut short")
            except BadInput:
                raise
            except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError, NotImplementedError) as exc:
                raise BadInput(f"{what}: member {name!r} is not a readable .npy array "
                               f"({type(exc).__name__}: {str(exc)[:160]})") from None
            arr = np.frombuffer(buf, dtype=dtype)
            out[name] = arr.reshape(shape, order="F" if fortran else "C")
        return out
    finally:
        if own is not None:
            own.close()


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
