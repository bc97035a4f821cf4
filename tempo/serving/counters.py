"""Count collection (paper Section 4.4).

The dispatch kernel increments a persistent cumulative counter per (layer, logical expert)
and never zeroes it (no zeroing or copy kernel in the captured graph).  The refresher takes
snapshots and recovers each window's counts by differencing consecutive snapshots modulo
2^bits, which stays right when the counter wraps (int32 or int64), as long as fewer than
2^(bits-1) tokens arrive within one window; a larger difference means the counter went
backwards (a reset) and raises ``ValueError`` instead of reporting ~4.29e9 tokens.
"""
from __future__ import annotations

import numpy as np


def window_counts(new, old) -> np.ndarray:
    """int64 window counts ``new - old`` modulo 2^bits of the counters' integer type.

    ``new`` and ``old`` are snapshots of the same cumulative counter (same shape and
    integer dtype, e.g. int32 or int64); the counter may have wrapped in between.
    """
    new, old = np.asarray(new), np.asarray(old)
    if new.shape != old.shape:
        raise ValueError(f"snapshots differ in shape: {new.shape} vs {old.shape}")
    if new.dtype != old.dtype or not np.issubdtype(new.dtype, np.signedinteger):
        raise ValueError(f"snapshots must share one signed integer dtype, got {new.dtype} and {old.dtype}")
    bits = new.dtype.itemsize * 8
    udt = np.dtype(f"uint{bits}")
    diff = new.astype(udt) - old.astype(udt)  # wraps modulo 2^bits
    if np.any(diff >= udt.type(1) << udt.type(bits - 1)):
        raise ValueError(f"window count of at least 2^{bits - 1} on {int((diff >= udt.type(1) << udt.type(bits - 1)).sum())} "
                         f"entries: the counter went backwards (reset?) or the snapshots are out of order")
    return diff.astype(np.int64)


class CumulativeCounts:
    """Host-side view of a cumulative counter with wrap-safe windows.

    ``snapshot_fn`` returns the counter's current value (a numpy array, or a torch tensor
    copied to host); :meth:`window` returns the counts since the previous call.
    """

    def __init__(self, snapshot_fn):
        self._snap = snapshot_fn
        self._last = np.array(self._read(), copy=True)

    def _read(self) -> np.ndarray:
        x = self._snap()
        if hasattr(x, "detach"):
            x = x.detach().cpu().numpy()
        return np.asarray(x)

    def window(self) -> np.ndarray:
        """Counts since the previous call.  The baseline always moves to the new snapshot, so
        after a counter reset one window is rejected and the next is right again."""
        now = np.array(self._read(), copy=True)
        try:
            return window_counts(now, self._last)
        finally:
            self._last = now
