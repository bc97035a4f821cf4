"""Routed-expert shapes of the calibrated models (paper Section 2.2, Table 6): hidden size
``d_model`` and expert intermediate size ``d_ff``.  One expert FFN holds ``3 * d_model * d_ff``
weights (gate, up, down)."""
from __future__ import annotations

from ..core.models import MODELS, ModelShape
from ..core.models import roofline_us as _roofline_us


#: The shape record of :mod:`tempo.core.models` (``ExpertShape`` is its old name here).
ExpertShape = ModelShape

SHAPES = dict(MODELS)  # a view of tempo.core.models, keyed "qwen3-30b", "dsv3", ...


def shape(name: str) -> ExpertShape:
    if name not in SHAPES:
        raise ValueError(f"unknown expert shape {name!r}; known: {', '.join(SHAPES)}")
    return SHAPES[name]


def roofline_us(shape_name: str, hbm_tb_s: float, dtype_bytes: float = 1.0) -> float:
    """Weight-streaming floor of one expert (Section 2.2): its bytes over the HBM bandwidth,
    in microseconds.  DSv3 at fp8 on a 4.8 TB/s H200: 44.0 MB / 4.8 TB/s = 9.2 us."""
    if not hbm_tb_s > 0:
        raise ValueError(f"hbm_tb_s must be positive, got {hbm_tb_s}")
    return _roofline_us(shape(shape_name).name, hbm_tb_s * 1e12, dtype_bytes)


def roofline_table(names=("qwen3-30b", "dsv2-lite", "dsv3", "qwen3-235b"), hbm_tb_s: float = 4.8):
    """The roofline exercise of Section 2.2: per expert shape, its fp8 weight bytes (MB) and the
    time to stream them once at ``hbm_tb_s`` TB/s (us), a lower bound on the floor b."""
    import pandas as pd

    return pd.DataFrame([{"shape": n, "expert MB (fp8)": shape(n).bytes(1.0) / 1e6,
                          f"roofline b at {hbm_tb_s:g} TB/s (us)": roofline_us(n, hbm_tb_s)} for n in names])


def host_copy_bandwidth(nbytes: int = 64 * 2**20, reps: int = 10) -> float:
    """Bytes per second this machine's memory moves in a ``numpy.copyto`` loop over a
    ``nbytes`` buffer (past the caches), counting the read and the write: the CPU analogue of
    the HBM bandwidth in the weight-streaming bound of Section 2.2 (:func:`roofline_us`), so a
    CPU recording's fitted floor can be set beside its own bound.  Measured now, on whatever
    machine calls it."""
    import time

    import numpy as np

    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 8:
        raise ValueError(f"nbytes must be an integer of at least 8, got {nbytes!r}")
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps!r}")
    buf = np.ones(nbytes // 8)
    dst = np.empty_like(buf)
    np.copyto(dst, buf)  # warm: page faults outside the timing
    t0 = time.perf_counter()
    for _ in range(reps):
        np.copyto(dst, buf)
    return 2 * buf.nbytes * reps / (time.perf_counter() - t0)
