"""On-disk cache of experiment results, keyed by (experiment, config, tempo version).

Writes are atomic (:mod:`tempo.core.io`: temporary file, then ``os.replace``), so an
interrupted build never leaves a half-written entry: the next run simply recomputes it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import pandas as pd

from ..core import paths
from ..core.io import atomic_write_bytes, read_regular


def cache_dir() -> Path:
    d = paths.BUILD / "cache"
    d.mkdir(parents=True, exist_ok=True)
    return d


def code_version() -> str:
    """tempo's version plus a hash of its source files: results computed by older code are
    never served from the cache, even when the version number was not bumped."""
    from ..core.version import __version__

    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent  # all of tempo/, not only studies/
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return f"{__version__}+{h.hexdigest()[:12]}"


def canonical(value, where: str = "config"):
    """A JSON-able canonical form of a config value, for hashing.

    Arrays are identified by dtype, shape and a SHA-256 of their bytes (never by ``str()``,
    which elides long arrays); numpy scalars equal Python ones (``np.int64(3)`` keys like
    ``3``); floats keep their type (``3.0`` is not ``3``) and NaN/inf are spelled out;
    dataclasses (e.g. a ``CostModel``) by class and fields.  Anything else -- a function, an
    arbitrary object -- raises ``TypeError`` naming where it sits, since two of them could
    print alike and share an entry."""
    import dataclasses
    import math

    import numpy as np

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        return canonical(value.item(), where)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return {"__float__": repr(value)} if not math.isfinite(value) else value
    if isinstance(value, (list, tuple)):
        return [canonical(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, (str, int, float, bool)) or isinstance(k, np.generic):
                raise TypeError(f"{where}: key {k!r} must be a str, int, float or bool")
            ks = k if isinstance(k, str) else f"{type(k).__name__}:{k!r}"
            if ks in out:
                raise TypeError(f"{where}: keys {k!r} and another spell the same")
            out[ks] = canonical(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return {"__object_array__": list(value.shape), "items": canonical(value.ravel().tolist(), where)}
        arr = np.ascontiguousarray(value)
        return {"__ndarray__": arr.dtype.str, "shape": list(arr.shape),
                "sha256": hashlib.sha256(arr.tobytes()).hexdigest()}
    if isinstance(value, (set, frozenset)):
        items = [canonical(v, where) for v in value]
        return {"__set__": sorted(items, key=lambda x: json.dumps(x, sort_keys=True))}
    if isinstance(value, Path):
        return {"__path__": str(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__dataclass__": f"{type(value).__module__}.{type(value).__qualname__}",
                "fields": {f.name: canonical(getattr(value, f.name), f"{where}.{f.name}")
                           for f in dataclasses.fields(value)}}
    raise TypeError(f"{where} holds a {type(value).__name__} ({value!r:.60}); a cache key needs plain data "
                    "(numbers, strings, lists, dicts, numpy arrays, dataclasses)")


def key(experiment: str, config: dict, version: str | None = None) -> str:
    """Stable hash of the experiment name, its canonical config (:func:`canonical`) and tempo's
    version (:func:`code_version` by default)."""
    if not isinstance(experiment, str) or not experiment:
        raise ValueError(f"experiment must be a non-empty name, got {experiment!r}")
    if version is None:
        version = code_version()
    blob = json.dumps({"experiment": experiment, "config": canonical(config), "version": version},
                      sort_keys=True, allow_nan=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


#: Marks a cache entry as one :func:`cached` wrote (with its key), so nothing else is served.
_MARK = "tempo-cache-entry/3"
#: an entry's file name ends so: an ``.npz`` read with ``allow_pickle=False`` (entries are never
#: pickled: a planted file under build/cache cannot run code)
SUFFIX = ".npz"
#: the most bytes an entry may hold on disk, and once inflated
MAX_ENTRY_BYTES = 2**31
#: the most rows an entry may declare (the largest experiment here writes about 10^5)
MAX_ROWS = 10**8
#: an entry's header (checked after its checksum)
HEADER_SCHEMA = {
    "type": "object", "required": ["mark", "key", "experiment", "rows", "columns"],
    "properties": {"mark": {"const": _MARK}, "key": {"type": "string"}, "experiment": {"type": "string"},
                   "rows": {"type": "integer", "minimum": 0, "maximum": MAX_ROWS},
                   "columns": {"type": "array", "items": {
                       "type": "object", "required": ["name", "dtype", "as"],
                       "properties": {"name": {"type": "string"}, "dtype": {"type": "string"},
                                      "as": {"enum": ["npy", "json"]}}}},
                   "fallbacks": {"type": "integer", "minimum": 0}}}
#: the secret an entry's checksum is keyed with: {cache folder: 32 bytes}
_SECRETS: dict = {}


def _secret() -> bytes:
    """The 32-byte secret of this cache folder (``.key``, created on first use, mode 0600).

    An entry's content checksum is an HMAC under this secret: a checksum anyone can recompute
    would not tell a planted entry (right key, right mark, its own values) from one this
    library wrote.  A key file that is a link, is not owned by this user or is readable by
    others is replaced, which invalidates every entry signed with it (they are recomputed)."""
    import secrets
    import stat
    import tempfile

    folder = cache_dir()
    if folder in _SECRETS:
        return _SECRETS[folder]
    path = folder / ".key"
    for _ in range(3):
        try:
            st = os.lstat(path)
            ok = (stat.S_ISREG(st.st_mode) and st.st_size == 32 and not st.st_mode & 0o077
                  and getattr(os, "getuid", lambda: st.st_uid)() == st.st_uid)
            if ok:
                key = read_regular(path, 32, ".key")
                if len(key) == 32:
                    _SECRETS[folder] = key
                    return key
            os.unlink(path)
        except FileNotFoundError:
            pass
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".key.", suffix=".tmp")  # created with mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
            os.link(tmp, path)  # appears whole or not at all; a concurrent writer's key wins
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    raise OSError(f"cannot keep a key file in {folder}")


def _mac(arrays: dict) -> str:
    """The keyed checksum of an entry's arrays (names, dtypes, shapes and bytes, in name order)."""
    import hmac

    h = hmac.new(_secret(), digestmod="sha256")
    for name in sorted(arrays):
        if name == "mac":
            continue
        a = arrays[name]
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0{a.nbytes}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _remove(path: Path) -> None:
    """Delete whatever sits at ``path`` (file, link or directory)."""
    import shutil

    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink(missing_ok=True)


def _encode(df: pd.DataFrame, k: str, experiment: str) -> bytes | None:
    """An entry's bytes: an ``.npz`` of one array per column (numbers, bools and datetimes as
    numpy arrays; anything else as a JSON list) plus a JSON header with the mark, the key and
    the dtypes.  None when the frame would not come back identical (then it is not cached)."""
    import io

    import numpy as np

    if not isinstance(df.index, pd.RangeIndex) or df.index.start != 0 or df.index.step != 1:
        return None
    if not all(isinstance(c, str) for c in df.columns) or df.columns.has_duplicates:
        return None
    arrays, cols = {}, []
    for i, c in enumerate(df.columns):
        col = df[c]
        if isinstance(col.dtype, np.dtype) and col.dtype.kind in "biufcMm":
            arrays[f"c{i}"] = col.to_numpy()
            cols.append({"name": c, "dtype": col.dtype.str, "as": "npy"})
        else:
            vals = [None if (v is None or (isinstance(v, float) and v != v)) else
                    (v.item() if isinstance(v, np.generic) else v) for v in col.tolist()]
            try:
                text = json.dumps(vals, allow_nan=True)
            except (TypeError, ValueError):
                return None
            arrays[f"c{i}"] = np.frombuffer(text.encode(), dtype=np.uint8)
            cols.append({"name": c, "dtype": str(col.dtype), "as": "json"})
    header = {"mark": _MARK, "key": k, "experiment": experiment, "rows": int(len(df)), "columns": cols,
              "fallbacks": int(df.attrs.get("fallbacks", 0))}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    arrays = {n: np.ascontiguousarray(a) for n, a in arrays.items()}
    arrays["mac"] = np.frombuffer(_mac(arrays).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    try:
        back = _decode(data, k)
        pd.testing.assert_frame_equal(back, df, check_exact=True)
    except Exception:  # noqa: BLE001 -- a frame this format cannot hold exactly is recomputed, not cached
        return None
    return data


def _decode(data: bytes, k: str) -> pd.DataFrame | None:
    """The DataFrame of an entry's bytes when its keyed checksum matches (:func:`_mac`) and its
    header carries the mark and key ``k``; else None.  Read as untrusted input
    (:func:`tempo.core.io.read_npz`: declared shapes and inflated size checked before anything
    is allocated, ``allow_pickle`` never); nothing is decoded before the checksum matches."""
    import hmac

    import numpy as np

    from ..core.io import check_schema, loads_json, read_npz

    z = read_npz(data, "cache entry", MAX_ENTRY_BYTES, MAX_ENTRY_BYTES)
    mac = z.get("mac")
    if mac is None or mac.dtype != np.uint8 or "header" not in z:
        return None
    if not hmac.compare_digest(mac.tobytes(), _mac(z).encode()):
        return None  # not written by this library with this folder's key: recomputed
    header = check_schema(loads_json(z["header"].tobytes(), "cache entry header"), HEADER_SCHEMA,
                          "cache entry header")
    if header["key"] != k:
        return None
    rows = header["rows"]
    out = {}
    for i, c in enumerate(header["columns"]):
        arr = z.get(f"c{i}")
        if arr is None:
            return None
        if c["as"] == "npy":
            if arr.dtype.str != c["dtype"] or arr.shape != (rows,):
                return None
            out[c["name"]] = arr
        else:
            vals = loads_json(arr.tobytes(), f"cache entry column {c['name']!r}")
            if not isinstance(vals, list) or len(vals) != rows:
                return None
            out[c["name"]] = pd.Series(vals, dtype=None if c["dtype"] == "object" else c["dtype"])
            if c["dtype"] == "object":
                out[c["name"]] = out[c["name"]].astype(object)
    df = pd.DataFrame(out, index=pd.RangeIndex(rows))
    df.attrs["fallbacks"] = int(header.get("fallbacks", 0))
    return df


def _load(path: Path, k: str):
    """The DataFrame of a well-formed entry for key ``k``, else None (never unpickles: an entry
    is an ``.npz`` read with ``allow_pickle=False``, a regular file of bounded size)."""
    try:
        return _decode(read_regular(path, MAX_ENTRY_BYTES), k)
    except Exception:  # noqa: BLE001 -- truncated, garbage, unreadable, a link, a FIFO, ...: recomputed
        return None


def _sweep_temp(path: Path, older_than_s: float = 600.0) -> None:
    """Remove temporary files an interrupted write of this entry left behind."""
    import time

    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            if time.time() - tmp.stat().st_mtime > older_than_s:
                tmp.unlink()
        except OSError:
            pass


def entry_path(experiment: str, config: dict) -> Path:
    """Where the entry of (experiment, config) at this code version lives."""
    return cache_dir() / f"{experiment}-{key(experiment, config)}{SUFFIX}"


def cached(experiment: str, config: dict, fn: Callable[[dict], pd.DataFrame], refresh: bool = False) -> pd.DataFrame:
    """Return ``fn(config)``, from the cache when an entry for (experiment, config, version)
    exists; otherwise compute it and store it atomically.  Only entries this function wrote
    (an ``.npz`` whose header has the mark and the same key) are served; anything else at the
    entry's path -- garbage, a pickle, a directory, a link -- is removed and recomputed.  A
    frame the format cannot hold exactly (an index other than 0..n-1, objects that are not
    JSON) is returned uncached.  ``df.attrs["fallbacks"]``: how many dispatches computing it came
    from a solver's fallback (:func:`tempo.policies.fallback_of`), stored with the entry."""
    k = key(experiment, config)
    path = cache_dir() / f"{experiment}-{k}{SUFFIX}"
    if not refresh:
        df = _load(path, k)
        if df is not None:
            return df
    if path.exists() or path.is_symlink():
        _remove(path)
    from ..policies._fallback import fallback_count

    before = fallback_count()
    df = fn(config)
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"experiment {experiment!r} must return a pandas DataFrame, got {type(df).__name__}")
    df.attrs["fallbacks"] = fallback_count() - before  # dispatches a solver's fallback produced (kept in the entry)
    data = _encode(df, k, experiment)
    if data is not None:
        atomic_write_bytes(path, data)
        _sweep_temp(path)
    return df
