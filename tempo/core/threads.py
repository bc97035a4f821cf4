"""The BLAS thread pools loaded into this process, and a limit on them for worker processes.

numpy and scipy each load their own OpenBLAS (``numpy.libs/libscipy_openblas64_*``,
``scipy.libs/libscipy_openblas*``), and each starts as many threads as the machine has cores.
When :func:`tempo.studies.sweep.run_grid` forks one worker per core, every worker inherits
those pools: on 2 cores, 2 workers x 2 spinning BLAS threads.  The calls are tiny (L-BFGS-B on
8 prices, an 8 x 8 solve), so the threads only wait on each other: measured on the 2-core
machine, the phase diagram under the ``even_spread`` token-LP face took 137 s with the
inherited pools and 22 s with one BLAS thread per worker.  :func:`limit_blas_threads` sets the
pools of this process, as ``threadpoolctl`` does, without the dependency.

Linux only (the loaded libraries are read from ``/proc/self/maps``); elsewhere it finds no
library and changes nothing.  Imports nothing of tempo.
"""
from __future__ import annotations

import ctypes
import os
import re

#: the setter and getter each BLAS build exports (OpenBLAS as built by scipy-openblas with
#: 64-bit and 32-bit integers, a plain OpenBLAS, Intel MKL's runtime)
_SYMBOLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
            ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
            ("openblas_set_num_threads", "openblas_get_num_threads"),
            ("MKL_Set_Num_Threads", "MKL_Get_Max_Threads"))
_BLAS_FILE = re.compile(r"(openblas|mkl_rt)[^/]*\.so", re.IGNORECASE)


def blas_libraries() -> list[str]:
    """Paths of the BLAS libraries loaded into this process (OpenBLAS or MKL), in load order;
    empty where ``/proc/self/maps`` does not exist."""
    try:
        with open("/proc/self/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out: list[str] = []
    for line in lines:
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if path.startswith("/") and _BLAS_FILE.search(os.path.basename(path)) and path not in out:
            out.append(path)
    return out


def _functions(path: str):
    """``(set, get)`` ctypes functions of the library at ``path`` (already loaded: dlopen
    returns the same handle), or None when it exports none of :data:`_SYMBOLS`."""
    try:
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0))
    except OSError:
        return None
    for set_name, get_name in _SYMBOLS:
        setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
        if setter is not None and getter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], None
            getter.argtypes, getter.restype = [], ctypes.c_int
            return setter, getter
    return None


def blas_threads() -> dict[str, int]:
    """``{library path: its thread count}`` for every BLAS library loaded into this process."""
    out = {}
    for path in blas_libraries():
        fns = _functions(path)
        if fns is not None:
            out[path] = int(fns[1]())
    return out


def limit_blas_threads(n: int) -> dict[str, int]:
    """Set every loaded BLAS library of this process to ``n`` threads (``n >= 1``).  Returns
    ``{library path: its thread count before}``; empty when none is loaded or the platform has
    no ``/proc/self/maps``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    before = {}
    for path in blas_libraries():
        fns = _functions(path)
        if fns is not None:
            before[path] = int(fns[1]())
            fns[0](n)
    return before
