"""Run a grid of independent cells: local processes by default, or a Dask cluster.

Each cell is a dict; ``fn(cell)`` returns a pandas DataFrame (or a list of row dicts).  The
results come back in cell order, concatenated, with the cell's keys prepended, so the same
grid gives the same table whether it ran here or on a cluster.  Seeds belong in the cells.
"""
from __future__ import annotations

import functools
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterable

import pandas as pd

from ..policies._fallback import add_count


def _as_frame(result, cell: dict) -> pd.DataFrame:
    df = result if isinstance(result, pd.DataFrame) else pd.DataFrame(list(result))
    keys = {k: v for k, v in cell.items() if k not in df.columns and not isinstance(v, (list, dict, tuple))}
    for i, (k, v) in enumerate(keys.items()):
        df.insert(i, k, v)
    return df


def _counted(fn, cell):
    """``(fn(cell), fallbacks marked while it ran)``: a worker's fallbacks travel back to the
    parent's count (:func:`tempo.policies._fallback.add_count`), so a study counts them all."""
    from ..policies._fallback import fallback_count

    before = fallback_count()
    out = fn(cell)
    return out, fallback_count() - before


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _worker_init(blas_threads: int) -> None:
    """A local worker's start: its share of the cores for BLAS (:mod:`tempo.core.threads`).
    The pools the worker inherited from its parent are set now; a BLAS library it loads later
    reads the environment variables set here."""
    from ..core.threads import limit_blas_threads

    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(blas_threads)
    limit_blas_threads(blas_threads)


def _bar(total: int, desc: str, progress: bool):
    if not progress:
        return None
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="cell", file=sys.stderr, disable=None)
    except ImportError:
        return None


def run_grid(fn: Callable[[dict], pd.DataFrame], cells: Iterable[dict], workers: int | None = None,
             scheduler=None, progress: bool = True, desc: str = "sweep") -> pd.DataFrame:
    """Evaluate ``fn`` on every cell and return one tidy DataFrame, in cell order.

    Parameters
    ----------
    fn : callable
        A picklable (module-level) function of one cell.
    cells : iterable of dict
    workers : int, optional
        Local processes (default: this machine's cores; 1 runs in this process).
    scheduler : str or dask.distributed.Client, optional
        A Dask scheduler address (``"tcp://host:8786"``) or a Client: run the grid there.
    """
    cells = list(cells)
    if not cells:
        return pd.DataFrame()
    if not callable(fn):
        raise TypeError("fn must be callable")
    bar = _bar(len(cells), desc, progress)
    results: list = [None] * len(cells)
    try:
        if scheduler is not None:
            from dask.distributed import Client, as_completed as dask_completed

            client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
            futures = client.map(functools.partial(_counted, fn), cells, pure=False)
            index = {f.key: i for i, f in enumerate(futures)}
            for fut in dask_completed(futures):
                results[index[fut.key]], n_fallback = fut.result()
                add_count(n_fallback)
                if bar:
                    bar.update(1)
            if client is not scheduler:
                client.close()
        else:
            workers = workers or os.cpu_count() or 1
            if workers == 1:
                for i, cell in enumerate(cells):
                    results[i] = fn(cell)
                    if bar:
                        bar.update(1)
            else:
                # each worker gets its share of the cores for BLAS: the pools it would inherit
                # spin against the other workers' (:mod:`tempo.core.threads`)
                share = max(1, _cores() // workers)
                with ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, initargs=(share,)) as pool:
                    futs = {pool.submit(_counted, fn, cell): i for i, cell in enumerate(cells)}
                    for fut in as_completed(futs):
                        results[futs[fut]], n_fallback = fut.result()
                        add_count(n_fallback)
                        if bar:
                            bar.update(1)
    finally:
        if bar:
            bar.close()
    return pd.concat([_as_frame(r, c) for r, c in zip(results, cells)], ignore_index=True)
