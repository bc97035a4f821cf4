"""BLAS thread pools: tempo.core.threads reads and sets them; run_grid's local workers get their
share of the cores (forked workers otherwise inherit one pool per core each and spin)."""
import sys

import numpy as np
import pytest
import scipy.linalg  # noqa: F401  (loads scipy's own OpenBLAS beside numpy's)

from tempo.core.threads import blas_libraries, blas_threads, limit_blas_threads
from tempo.studies import sweep
from tempo.studies.sweep import run_grid

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="local workers fork on Linux only")


def test_finds_numpy_and_scipy_blas_and_sets_them():
    libs = blas_libraries()
    assert any("numpy" in p for p in libs) and any("scipy" in p for p in libs), libs
    before = blas_threads()
    assert set(before) == set(libs) and all(n >= 1 for n in before.values())
    try:
        assert limit_blas_threads(1) == before
        assert set(blas_threads().values()) == {1}
        a = np.random.default_rng(0).normal(size=(64, 64))
        assert np.allclose(a @ np.linalg.inv(a), np.eye(64))  # BLAS still computes with one thread
    finally:
        limit_blas_threads(max(before.values()))
    assert set(blas_threads().values()) == {max(before.values())}


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_bad_thread_count_names_the_argument(bad):
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        limit_blas_threads(bad)


def seen_threads(cell):
    import os

    return [{"x": cell["x"], "blas": sorted(set(blas_threads().values())), "env": os.environ.get("OPENBLAS_NUM_THREADS")}]


@linux
def test_local_workers_get_their_share_of_the_cores(monkeypatch):
    parent = blas_threads()
    inherited = max(parent.values())
    share = inherited + 1  # a count the workers cannot have inherited
    monkeypatch.setattr(sweep, "_cores", lambda: 2 * share)
    df = run_grid(seen_threads, [{"x": i} for i in range(4)], workers=2, progress=False)
    assert df.x.tolist() == [0, 1, 2, 3]
    assert all(b == [share] for b in df.blas) and set(df.env) == {str(share)}
    monkeypatch.setattr(sweep, "_cores", lambda: 2)
    df = run_grid(seen_threads, [{"x": i} for i in range(4)], workers=2, progress=False)
    assert all(b == [1] for b in df.blas) and set(df.env) == {"1"}
    assert blas_threads() == parent  # the limits were set in the workers, not here
