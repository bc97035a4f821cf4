"""How a dispatch says it came from a fallback.

Every LP/QP/MILP call in :mod:`tempo.policies` runs under a time limit; when the exact method
does not finish, or declines, the policy still returns a valid dispatch from a bounded method
and marks it: ``dispatch.meta["fallback"] = "<why>"``.  :func:`mark_fallback` sets it (a second
reason is appended, ``"; "``-separated); :func:`fallback_of` reads it.  The studies count the
fallbacks of every experiment into its ``.meta.json`` (:func:`tempo.studies.run`) and the
ledger flags a claim whose inputs had one.
"""
from __future__ import annotations

import threading

#: the ``Dispatch.meta`` key a fallback sets
FALLBACK = "fallback"

#: fallbacks marked in this thread since :func:`reset_count` (the studies count per experiment;
#: per thread, so cells that a threaded Dask worker runs side by side count only their own)
_local = threading.local()


def _get() -> int:
    return getattr(_local, "n", 0)


def mark_fallback(dispatch, why: str):
    """Mark ``dispatch`` (returned) as computed by a fallback, for the reason ``why``."""
    if not isinstance(why, str) or not why:
        raise ValueError(f"why must be a non-empty string, got {why!r}")
    prev = dispatch.meta.get(FALLBACK)
    dispatch.meta[FALLBACK] = f"{prev}; {why}" if prev else why
    _local.n = _get() + 1
    return dispatch


def fallback_of(dispatch) -> str | None:
    """Why ``dispatch`` came from a fallback, or None when its policy's own method produced it."""
    meta = getattr(dispatch, "meta", None) or {}
    return meta.get(FALLBACK) or None


def fallback_count() -> int:
    """How many dispatches :func:`mark_fallback` marked in this thread since :func:`reset_count`
    (plus what :func:`add_count` added in it)."""
    return _get()


def reset_count() -> int:
    """Reset this thread's fallback counter; returns its value before."""
    n, _local.n = _get(), 0
    return n


def add_count(n: int) -> None:
    """Add ``n`` fallbacks marked elsewhere (a worker of a sweep) to this thread's count."""
    _local.n = _get() + int(n)
