"""Run a grid of independent cells: local processes by default, or a Dask cluster.

Each cell is a dict; ``fn(cell)`` returns a pandas DataFrame (or a list of row dicts).  The
results come back in cell order, concatenated, with the cell's keys prepended, so the same
grid gives the same table whether it ran here or on a cluster.  Seeds belong in the cells.

A cell may also reuse what an earlier cell (of this grid or of an earlier grid run by this
process) computed, through :func:`memo_get` / :func:`memo_put`: entries a worker makes travel
back with its cell's result into this process's memo, so the next grid's workers (forked from
it) start with them.  Only for deterministic computations keyed by everything they depend on
(:func:`tempo.studies.readings.dispatch_times`: the phase diagram's alternative readings re-run
the same batches and reuse every policy the alternative does not change).
"""
from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from ..policies._fallback import add_count


#: the memo's entries in this process (:func:`memo_get`); cleared when it reaches :data:`MEMO_MAX`
_MEMO: dict = {}
#: entries made while a worker runs one cell, shipped back with its result (``new`` is None
#: outside a cell; per thread: a Dask worker may run cells in threads of one process)
_LOCAL = threading.local()
MEMO_MAX = 400_000


def memo_get(key):
    """The value :func:`memo_put` stored under ``key`` in this process (or in a worker of an
    earlier grid it ran), or None."""
    return _MEMO.get(key)


def memo_put(key, value) -> None:
    """Store ``value`` (picklable) under ``key`` (hashable): a deterministic result that a later
    cell with the same inputs may reuse."""
    if len(_MEMO) >= MEMO_MAX:
        _MEMO.clear()
    _MEMO[key] = value
    new = getattr(_LOCAL, "new", None)
    if new is not None:
        new[key] = value


def memo_clear() -> int:
    """Forget every memo entry of this process; returns how many there were."""
    n = len(_MEMO)
    _MEMO.clear()
    return n


def _merge(new: dict) -> None:
    for key, value in new.items():
        memo_put(key, value)


def _cell_keys(df: pd.DataFrame, cell: dict) -> dict:
    """The keys of ``cell`` that go in front of its rows: scalars its rows do not hold."""
    return {k: v for k, v in cell.items() if k not in df.columns and not isinstance(v, (list, dict, tuple))}


def _as_frame(result, cell: dict) -> pd.DataFrame:
    df = result if isinstance(result, pd.DataFrame) else pd.DataFrame(list(result))
    for i, (k, v) in enumerate(_cell_keys(df, cell).items()):
        df.insert(i, k, v)
    return df


#: the column dtype a cell key of each Python type gets when inserted (``DataFrame.insert``)
_KEY_DTYPES = {int: np.int64, float: np.float64, bool: np.bool_, str: object}


def _table(results: list, cells: list) -> pd.DataFrame:
    """The cells' results concatenated in cell order, each cell's keys (:func:`_cell_keys`)
    prepended: ``pd.concat([_as_frame(r, c) ...], ignore_index=True)``.  When every cell has
    rows, the same columns and the same keys, each key's values of one Python type (int, float,
    bool or str), the results are concatenated once and each key inserted once as a column
    (the same table: same values, dtypes and column order), instead of a column per key and
    cell (seconds on a grid of thousands of cells)."""
    frames = [r if isinstance(r, pd.DataFrame) else pd.DataFrame(list(r)) for r in results]
    keys = [_cell_keys(df, c) for df, c in zip(frames, cells)]
    names, cols = list(keys[0]), list(frames[0].columns)
    types = {k: type(v) for k, v in keys[0].items()}
    fast = all(len(df) and list(df.columns) == cols and list(kv) == names
               and all(type(v) is types[k] for k, v in kv.items()) for df, kv in zip(frames, keys))
    if not fast or not all(t in _KEY_DTYPES for t in types.values()):
        return pd.concat([_as_frame(r, c) for r, c in zip(frames, cells)], ignore_index=True)
    out = pd.concat(frames, ignore_index=True)
    lengths = [len(df) for df in frames]
    for i, k in enumerate(names):
        out.insert(i, k, np.repeat(np.array([kv[k] for kv in keys], dtype=_KEY_DTYPES[types[k]]), lengths))
    return out


def _counted(fn, cell):
    """``(fn(cell), fallbacks marked while it ran, memo entries it made)``: a worker's fallbacks
    travel back to the parent's count (:func:`tempo.policies._fallback.add_count`), so a study
    counts them all, and its memo entries to the parent's memo (:func:`memo_put`)."""
    from ..policies._fallback import fallback_count

    before = fallback_count()
    _LOCAL.new = new = {}
    try:
        out = fn(cell)
        return out, fallback_count() - before, new
    finally:
        _LOCAL.new = None


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _context():
    """Local workers fork on Linux (Python 3.14 would default to forkserver): a forked worker
    starts with this process's imports, compiled code and memo."""
    return multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None


def _worker_init(blas_threads: int) -> None:
    """A local worker's start: its share of the cores for BLAS (:mod:`tempo.core.threads`).
    The pools the worker inherited from its parent are set now; a BLAS library it loads later
    reads the environment variables set here."""
    from ..core.threads import limit_blas_threads

    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(blas_threads)
    limit_blas_threads(blas_threads)


def _bar(total: int, desc: str, progress: bool):
    """A progress bar on stderr (cells done, rate, time left) that shows once the grid has run
    :data:`BAR_DELAY_S` seconds, so short grids stay quiet; in a notebook kernel or a log file
    (not a terminal) it redraws at most every 2 s."""
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    if _labels:  # the study (and its reading); the grid's own name when it says more
        same = desc.replace(" ", "_") in _labels[-1]
        desc = _labels[-1] if same else f"{_labels[-1]}: {desc}"
    return tqdm(total=total, desc=desc, unit="cell", file=sys.stderr, disable=False, delay=BAR_DELAY_S,
                mininterval=0.1 if tty else 2.0, dynamic_ncols=tty)


#: seconds a grid runs before its progress bar appears
BAR_DELAY_S = 3.0
_labels: list[str] = []


@contextlib.contextmanager
def labelled(text: str):
    """Within the block, grids' progress bars start with ``text`` (the study and its reading)."""
    _labels.append(str(text))
    try:
        yield
    finally:
        _labels.pop()


def map_cells(fn: Callable, cells: Iterable, workers: int | None = None, scheduler=None, progress: bool = True,
              desc: str = "sweep") -> list:
    """``[fn(cell) for cell in cells]``, in cell order, each cell in a local worker process (or
    on a Dask cluster): what :func:`run_grid` runs, without making a table of the results, so a
    study that builds its rows serially builds the same table from them.  ``fn`` and the
    cells must pickle; the memo entries and fallbacks of each cell travel back to this process.

    Parameters
    ----------
    fn : callable
        A picklable (module-level) function of one cell.
    cells : iterable
    workers : int, optional
        Local processes (default: this machine's cores; 1 runs in this process).
    scheduler : str or dask.distributed.Client, optional
        A Dask scheduler address (``"tcp://host:8786"``) or a Client: run the cells there.
    """
    cells = list(cells)
    if not callable(fn):
        raise TypeError("fn must be callable")
    if not cells:
        return []
    bar = _bar(len(cells), desc, progress)
    results: list = [None] * len(cells)
    try:
        if scheduler is not None:
            from dask.distributed import Client, as_completed as dask_completed

            client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
            futures = client.map(functools.partial(_counted, fn), cells, pure=False)
            index = {f.key: i for i, f in enumerate(futures)}
            for fut in dask_completed(futures):
                results[index[fut.key]], n_fallback, new = fut.result()
                add_count(n_fallback)
                _merge(new)
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
                with ProcessPoolExecutor(max_workers=workers, mp_context=_context(), initializer=_worker_init,
                                         initargs=(share,)) as pool:
                    futs = {pool.submit(_counted, fn, cell): i for i, cell in enumerate(cells)}
                    for fut in as_completed(futs):
                        results[futs[fut]], n_fallback, new = fut.result()
                        add_count(n_fallback)
                        _merge(new)
                        if bar:
                            bar.update(1)
    finally:
        if bar:
            bar.close()
    return results


def run_grid(fn: Callable[[dict], pd.DataFrame], cells: Iterable[dict], workers: int | None = None,
             scheduler=None, progress: bool = True, desc: str = "sweep") -> pd.DataFrame:
    """Evaluate ``fn`` on every cell (:func:`map_cells`) and return one tidy DataFrame, in cell
    order, each cell's scalar keys prepended as columns.

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
    return _table(map_cells(fn, cells, workers=workers, scheduler=scheduler, progress=progress, desc=desc), cells)
