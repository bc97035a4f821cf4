"""The BLAS thread pools loaded into this process, and a limit on them for worker processes.

numpy and scipy each load their own OpenBLAS (``numpy.libs/libscipy_openblas64_*``,
``scipy.libs/libscipy_openblas*``), and each starts as many threads as the machine has cores.
When :func:`tempo.studies.sweep.run_grid` forks one worker per core, every worker inherits
those pools: on 2 cores, 2 workers x 2 spinning BLAS threads.  The calls are tiny (L-BFGS-B on
8 prices, an 8 x 8 solve), so the threads only wait on each other: measured on the 2-core
machine, the phase diagram under the ``even_spread`` token-LP face took 137 s with the
inherited pools and 22 s with one BLAS thread per worker.  The pools are found and set with
``threadpoolctl`` (OpenBLAS, MKL and BLIS, on every platform it supports).  Imports nothing of
tempo.
"""
from __future__ import annotations

from threadpoolctl import threadpool_info, threadpool_limits


def _blas() -> list[dict]:
    return [p for p in threadpool_info() if p.get("user_api") == "blas"]


def blas_libraries() -> list[str]:
    """Paths of the BLAS libraries loaded into this process, in load order."""
    return [p["filepath"] for p in _blas()]


def blas_threads() -> dict[str, int]:
    """``{library path: its thread count}`` for every BLAS library loaded into this process."""
    return {p["filepath"]: int(p["num_threads"]) for p in _blas()}


def limit_blas_threads(n: int) -> dict[str, int]:
    """Set every loaded BLAS library of this process to ``n`` threads (``n >= 1``), for good
    (not only inside a block).  Returns ``{library path: its thread count before}``; empty when
    none is loaded."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    before = blas_threads()
    if before:
        threadpool_limits(limits=n, user_api="blas")
    return before
