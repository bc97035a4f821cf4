"""How a dispatch says it came from a fallback (issue 27).

Every LP/QP/MILP call in :mod:`tempo.policies` runs under a time limit; when the exact method
does not finish, or declines, the policy still returns a valid dispatch from a bounded method
and marks it: ``dispatch.meta["fallback"] = "<why>"``.  :func:`mark_fallback` sets it (a second
reason is appended, ``"; "``-separated); :func:`fallback_of` reads it.  The studies count the
fallbacks of every experiment into its ``.meta.json`` (:func:`tempo.studies.run`) and the
ledger flags a claim whose inputs had one.
"""
from __future__ import annotations

#: the ``Dispatch.meta`` key a fallback sets
FALLBACK = "fallback"

#: fallbacks marked in this process since :func:`reset_count` (the studies count per experiment)
_count = [0]


def mark_fallback(dispatch, why: str):
    """Mark ``dispatch`` (returned) as computed by a fallback, for the reason ``why``."""
    if not isinstance(why, str) or not why:
        raise ValueError(f"why must be a non-empty string, got {why!r}")
    prev = dispatch.meta.get(FALLBACK)
    dispatch.meta[FALLBACK] = f"{prev}; {why}" if prev else why
    _count[0] += 1
    return dispatch


def fallback_of(dispatch) -> str | None:
    """Why ``dispatch`` came from a fallback, or None when its policy's own method produced it."""
    meta = getattr(dispatch, "meta", None) or {}
    return meta.get(FALLBACK) or None


def fallback_count() -> int:
    """How many dispatches :func:`mark_fallback` marked in this process since :func:`reset_count`."""
    return _count[0]


def reset_count() -> int:
    """Reset the process-wide fallback counter; returns its value before."""
    n, _count[0] = _count[0], 0
    return n


def add_count(n: int) -> None:
    """Add ``n`` fallbacks marked elsewhere (a worker process of a sweep) to this process's count."""
    _count[0] += int(n)
