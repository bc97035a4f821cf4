"""On-disk cache of experiment results, keyed by (experiment, config, tempo version).

Writes are atomic (:mod:`tempo.core.io`: temporary file, then ``os.replace``), so an
interrupted build never leaves a half-written entry: the next run simply recomputes it.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import pandas as pd

from ..core import paths
from ..core.io import atomic_write_bytes


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
_MARK = "tempo-cache-entry/2"
#: an entry's file name ends so: an ``.npz`` read with ``allow_pickle=False`` (entries are never
#: pickled: a planted file under build/cache cannot run code, re-audit D12)
SUFFIX = ".npz"
#: the most bytes an entry may hold on disk, and once inflated
MAX_ENTRY_BYTES = 2**31


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
    """The DataFrame of an entry's bytes when its header carries the mark and key ``k``; else None.
    Read with ``allow_pickle=False``; the header is checked before any column is loaded."""
    import io
    import zipfile

    import numpy as np

    zf = zipfile.ZipFile(io.BytesIO(data))
    if sum(i.file_size for i in zf.infolist()) > MAX_ENTRY_BYTES:
        return None
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        if "header" not in z.files:
            return None
        header = json.loads(z["header"].tobytes().decode())
        if not (isinstance(header, dict) and header.get("mark") == _MARK and header.get("key") == k
                and isinstance(header.get("columns"), list)):
            return None
        out = {}
        for i, c in enumerate(header["columns"]):
            arr = z[f"c{i}"]
            if c["as"] == "npy":
                if arr.dtype.str != c["dtype"] or arr.shape != (header["rows"],):
                    return None
                out[c["name"]] = arr
            else:
                vals = json.loads(arr.tobytes().decode())
                if not isinstance(vals, list) or len(vals) != header["rows"]:
                    return None
                out[c["name"]] = pd.Series(vals, dtype=None if c["dtype"] == "object" else c["dtype"])
                if c["dtype"] == "object":
                    out[c["name"]] = out[c["name"]].astype(object)
    df = pd.DataFrame(out, index=pd.RangeIndex(header["rows"]))
    df.attrs["fallbacks"] = int(header.get("fallbacks", 0))
    return df


def _load(path: Path, k: str):
    """The DataFrame of a well-formed entry for key ``k``, else None (never unpickles: an entry
    is an ``.npz`` read with ``allow_pickle=False``, a regular file of bounded size)."""
    from ..core.io import read_regular

    try:
        return _decode(read_regular(path, MAX_ENTRY_BYTES), k)
    except Exception:  # truncated, garbage, unreadable, a link, a FIFO, ...
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
