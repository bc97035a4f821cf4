"""Structured dispatches under full replication: the local search's restart seeds and round robin
(A3 of Theorem 2).
"""
from __future__ import annotations

import numpy as np

from .jit import njit


@njit(cache=True)
def _pair_on(pgpu, ptr, e, h):
    """Expert ``e``'s first pair on GPU ``h`` (``pgpu : int64[P]``, ``ptr : int64[E + 1]``), or -1."""
    for q in range(ptr[e], ptr[e + 1]):
        if pgpu[q] == h:
            return q
    return -1


@njit(cache=True)
def _by_tokens(counts, ptr):
    """Live experts by descending tokens (ties: lower id): int64[live experts]."""
    E = counts.size
    nl = 0
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            nl += 1
    live = np.empty(nl, np.int64)
    neg = np.empty(nl, np.int64)
    k = 0
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            live[k] = e
            neg[k] = -counts[e]
            k += 1
    return live[np.argsort(neg, kind="mergesort")]


@njit(cache=True)
def wrap_around(counts, pairs, g):
    """McNaughton's wrap-around split: experts by descending tokens laid end to end and cut into
    ``g`` segments of total/g tokens.  A restart seed (not in the paper): token-optimal with at most
    one split per GPU boundary.  Returns float64[P].
    """
    pgpu, ptr = pairs.pgpu, pairs.ptr
    order = _by_tokens(counts, ptr)
    total = 0.0
    for e in order:
        total += counts[e]
    xs = np.zeros(pgpu.size)
    start = 0.0
    for e in order:
        end = start + counts[e]
        h = min(g - 1, int(start * g // total))
        while h < g:
            lo = total * h / g
            hi = total if h == g - 1 else total * (h + 1) / g
            if lo >= end:
                break
            ov = min(end, hi) - max(start, lo)
            if ov > 0:
                xs[_pair_on(pgpu, ptr, e, h)] += ov
            h += 1
        start = end
    return xs


@njit(cache=True)
def apportion(counts, pairs, g):
    """With at most ``g`` live experts: expert ``e`` gets ``k_e`` GPUs of its own by D'Hondt (the next
    GPU to the largest ``n_e / k_e``), split evenly over them.  A restart seed (not in the paper):
    one activation per GPU.  Returns float64[P], empty when there are more experts than GPUs.
    """
    pgpu, ptr = pairs.pgpu, pairs.ptr
    order = _by_tokens(counts, ptr)
    L = order.size
    if L == 0 or L > g:
        return np.zeros(0)
    k = np.ones(L, np.int64)
    for _ in range(g - L):
        bi = 0
        for i in range(1, L):
            if counts[order[i]] * k[bi] > counts[order[bi]] * k[i]:
                bi = i
        k[bi] += 1
    xs = np.zeros(pgpu.size)
    h = 0
    for i in range(L):
        e = order[i]
        for _ in range(k[i]):
            xs[_pair_on(pgpu, ptr, e, h)] = counts[e] / k[i]
            h += 1
    return xs


@njit(cache=True)
def round_robin(counts, pairs, g):
    """Round robin A3 (Theorem 2): experts by descending tokens, the r-th whole on GPU ``r mod g``.
    Returns float64[P].
    """
    pgpu, ptr = pairs.pgpu, pairs.ptr
    order = _by_tokens(counts, ptr)
    xr = np.zeros(pgpu.size)
    for r in range(order.size):
        e = order[r]
        h = r % g
        for q in range(ptr[e], ptr[e + 1]):
            if pgpu[q] == h:
                xr[q] = counts[e]
                break
    return xr
