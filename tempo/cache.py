"""On-disk cache of experiment results, keyed by (experiment, config, tempo version).

Writes are atomic (temporary file, then ``os.replace``), so an interrupted build never leaves
a half-written entry: the next run simply recomputes it.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable

import pandas as pd

from . import paths


def cache_dir() -> Path:
    d = paths.BUILD / "cache"
    d.mkdir(parents=True, exist_ok=True)
    return d


def code_version() -> str:
    """tempo's version plus a hash of its source files: results computed by older code are
    never served from the cache, even when the version number was not bumped."""
    from . import __version__

    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return f"{__version__}+{h.hexdigest()[:12]}"


def key(experiment: str, config: dict, version: str | None = None) -> str:
    """Stable hash of the experiment name, its config (JSON, sorted keys) and tempo's
    version (:func:`code_version` by default)."""
    if version is None:
        version = code_version()
    blob = json.dumps({"experiment": experiment, "config": config, "version": version},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def atomic_write_bytes(path: Path, data: bytes) -> None:
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
    atomic_write_bytes(path, text.encode())


def atomic_write_csv(df: pd.DataFrame, path: Path) -> None:
    atomic_write_text(path, df.to_csv(index=False))


def cached(experiment: str, config: dict, fn: Callable[[dict], pd.DataFrame], refresh: bool = False) -> pd.DataFrame:
    """Return ``fn(config)``, from the cache when an entry for (experiment, config, version)
    exists; otherwise compute it and store it atomically."""
    path = cache_dir() / f"{experiment}-{key(experiment, config)}.pkl"
    if path.exists() and not refresh:
        try:
            return pd.read_pickle(path)
        except Exception:  # a corrupt entry (should not happen with atomic writes): recompute
            path.unlink(missing_ok=True)
    df = fn(config)
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"experiment {experiment!r} must return a pandas DataFrame, got {type(df).__name__}")
    import io
    import pickle

    buf = io.BytesIO()
    pickle.dump(df, buf, protocol=pickle.HIGHEST_PROTOCOL)
    atomic_write_bytes(path, buf.getvalue())
    return df
