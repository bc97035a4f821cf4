"""numba's ``njit`` for the compiled solver, with its on-disk cache kept in step with the source.

Every compiled module of this folder takes ``njit`` from here, so the check below runs before
any of them loads machine code.  numba checks only the file a function is defined in, while a
compiled function carries the code of every function it calls (numba#1833): an edit of one
stage file would leave its callers' cached code stale.  So the cache of this folder is dropped
whenever any of its files, or :mod:`tempo.core.pricing` (compiled by :mod:`.pricing`), changed.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from numba import njit

from ...core import pricing as _pricing
from ...core.jit import announce_compiles

__all__ = ["njit", "forget_stale_machine_code", "sources"]

STAMP = "tempo_fast-{digest}.stamp"

announce_compiles()  # a compile of the solver says so on stderr, once per process


def sources() -> list[Path]:
    """The files whose code the cached machine code holds: every ``.py`` file of this folder and
    ``tempo/core/pricing.py``, in a fixed order."""
    return [*sorted(Path(__file__).parent.glob("*.py")), Path(_pricing.__file__)]


def forget_stale_machine_code(cache: Path, files: list[Path]) -> bool:
    """Drop numba's cached machine code (``*.nbi``, ``*.nbc``) in ``cache`` unless it holds the stamp
    of ``files``' current digest; then write that stamp.  Returns whether anything was dropped."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    stamp = cache / STAMP.format(digest=h.hexdigest()[:16])
    if stamp.exists():
        return False
    cache.mkdir(parents=True, exist_ok=True)
    stale = [*cache.glob("*.nbi"), *cache.glob("*.nbc"), *cache.glob(STAMP.format(digest="*"))]
    for f in stale:
        f.unlink(missing_ok=True)
    stamp.touch()
    return bool(stale)


def _probe():  # pragma: no cover -- never called: only numba's cache locator looks at it
    return 0


def _cache_dir() -> Path:
    """The folder numba caches this folder's machine code in (``__pycache__`` beside the files,
    ``NUMBA_CACHE_DIR``, or the user-wide cache of a read-only install)."""
    try:
        return Path(njit(cache=True)(_probe)._cache._cache_path)
    except Exception:  # noqa: BLE001 -- a numba without this attribute: the in-tree default
        return Path(__file__).parent / "__pycache__"


try:
    forget_stale_machine_code(_cache_dir(), sources())
except OSError:  # a read-only install: nothing to refresh there
    pass
