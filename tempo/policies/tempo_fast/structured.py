"""Structured dispatches under full replication: the restart seeds of the local search and the
round-robin candidate A3 of Theorem 2.
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
    """Live experts by descending tokens (ties: lower id), int64[live experts]."""
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
    """Restart seed of Section 4.2's local search (our addition, not in the paper).

    McNaughton's wrap-around rule under full replication: experts by descending tokens laid
    end to end and cut into g segments of total/g tokens.  Token-optimal (every GPU gets
    total/g) with at most one split per GPU boundary, so far fewer activations than the even
    split; a GPU holds 1 + (experts that end inside its segment) experts.  Returns float64[P]."""
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
    """Restart seed of Section 4.2's local search (our addition, not in the paper).

    Under full replication with at most g live experts: give each expert k_e GPUs of its
    own (D'Hondt: the next GPU to the largest n_e / k_e), split it evenly over them.  One
    activation per GPU, least largest piece.  Returns float64[P], empty when more experts
    than GPUs."""
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
    """The round-robin placement A3 of Theorem 2 under full replication: experts by descending
    tokens, the r-th whole on GPU r mod g.  Returns float64[P]."""
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
