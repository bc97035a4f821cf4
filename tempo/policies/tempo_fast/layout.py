"""The flat pair layout of an instance: one pair per (live expert, valid replica slot)."""
from __future__ import annotations

import numpy as np

from .jit import njit
from .records import Pairs


@njit(cache=True)
def pairs_of(counts, replica_gpu, n_gpus):
    """The pair layout of an instance.

    Parameters
    ----------
    counts : int64[E]
    replica_gpu : int64[E, R]
        GPU of each replica slot, -1 for an unused slot.
    n_gpus : int

    Returns
    -------
    Pairs
        One pair per (expert with tokens, valid slot).
    """
    E, R = replica_gpu.shape
    P = 0
    for e in range(E):
        if counts[e] > 0:
            for r in range(R):
                if replica_gpu[e, r] >= 0:
                    P += 1
    pe = np.empty(P, np.int64)
    pr = np.empty(P, np.int64)
    pgpu = np.empty(P, np.int64)
    ptr = np.zeros(E + 1, np.int64)
    first = np.zeros(P, np.bool_)
    stamp = np.full(n_gpus, -1, np.int64)
    k = 0
    for e in range(E):
        ptr[e] = k
        if counts[e] > 0:
            for r in range(R):
                h = replica_gpu[e, r]
                if h >= 0:
                    pe[k] = e
                    pr[k] = r
                    pgpu[k] = h
                    if stamp[h] != e:
                        stamp[h] = e
                        first[k] = True
                    k += 1
    ptr[E] = k
    gptr = np.zeros(n_gpus + 1, np.int64)
    for q in range(P):
        gptr[pgpu[q] + 1] += 1
    for h in range(n_gpus):
        gptr[h + 1] += gptr[h]
    fill = gptr[:-1].copy()
    gpairs = np.empty(P, np.int64)
    for q in range(P):  # pair order within a GPU (stable, as numpy's argsort)
        gpairs[fill[pgpu[q]]] = q
        fill[pgpu[q]] += 1
    return Pairs(pe, pr, pgpu, ptr, gptr, gpairs, first)


@njit(cache=True)
def scatter(x, pairs, E, R):
    """Pair shares as slot shares: ``x : float64[P]`` -> float64[E, R] (a dispatch of Eq. 3)."""
    out = np.zeros((E, R))
    for q in range(x.size):
        out[pairs.pe[q], pairs.pr[q]] = x[q]
    return out


@njit(cache=True)
def is_full_replication(pairs, E, g):
    """Whether every live expert has a replica on every one of the ``g`` GPUs."""
    ptr, first = pairs.ptr, pairs.first
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            d = 0
            for q in range(ptr[e], ptr[e + 1]):
                if first[q]:
                    d += 1
            if d < g:
                return False
    return True
