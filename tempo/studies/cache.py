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
_MARK = "tempo-cache-entry/1"


def _remove(path: Path) -> None:
    """Delete whatever sits at ``path`` (file, link or directory)."""
    import shutil

    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink(missing_ok=True)


def _load(path: Path, k: str):
    """The DataFrame of a well-formed entry for key ``k``, else None."""
    import pickle

    try:
        if not path.is_file():
            return None
        with open(path, "rb") as f:
            obj = pickle.load(f)
    except Exception:  # truncated, garbage, unreadable, a class that no longer exists, ...
        return None
    if not (isinstance(obj, dict) and obj.get("mark") == _MARK and obj.get("key") == k
            and isinstance(obj.get("df"), pd.DataFrame)):
        return None
    return obj["df"]


def _sweep_temp(path: Path, older_than_s: float = 600.0) -> None:
    """Remove temporary files an interrupted write of this entry left behind."""
    import time

    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            if time.time() - tmp.stat().st_mtime > older_than_s:
                tmp.unlink()
        except OSError:
            pass


def cached(experiment: str, config: dict, fn: Callable[[dict], pd.DataFrame], refresh: bool = False) -> pd.DataFrame:
    """Return ``fn(config)``, from the cache when an entry for (experiment, config, version)
    exists; otherwise compute it and store it atomically.  Only entries this function wrote
    (a marked record holding a DataFrame under the same key) are served; anything else at the
    entry's path -- garbage, another object, a directory -- is removed and recomputed."""
    import io
    import pickle

    k = key(experiment, config)
    path = cache_dir() / f"{experiment}-{k}.pkl"
    if not refresh:
        df = _load(path, k)
        if df is not None:
            return df
    if path.exists() or path.is_symlink():
        _remove(path)
    df = fn(config)
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"experiment {experiment!r} must return a pandas DataFrame, got {type(df).__name__}")
    buf = io.BytesIO()
    pickle.dump({"mark": _MARK, "key": k, "experiment": experiment, "df": df}, buf, protocol=pickle.HIGHEST_PROTOCOL)
    atomic_write_bytes(path, buf.getvalue())
    _sweep_temp(path)
    return df
