"""The cost model compiled: Eq. 1/2/4 as :mod:`tempo.core.pricing` writes it (the one definition,
bit-identical here and in numpy), the M-tiles of a share, and a dispatch's per-GPU features and
times.
"""
from __future__ import annotations

import math
import types

import numpy as np

from ...core import pricing as _pricing
from .jit import njit
from .records import EPS, Loads


def _compile_pricing():
    """:mod:`tempo.core.pricing`'s ``activation_time``, ``token_time`` and ``gpu_time`` as numba
    functions: each re-created over a copy of that module's namespace in which its callees are
    their compiled versions.
    """
    ns = dict(vars(_pricing))
    for name in ("activation_time", "token_time", "gpu_time"):  # callees first
        fn = getattr(_pricing, name)
        ns[name] = njit(cache=True)(types.FunctionType(fn.__code__, ns, name, fn.__defaults__))
    return ns["activation_time"], ns["token_time"], ns["gpu_time"]


activation_time, token_time, gpu_time = _compile_pricing()


@njit(cache=True)
def piece_tiles(p, v):
    """M-tiles of a non-empty share of ``v`` tokens (Eq. 2): ``max(1, ceil(v / tile))``; 1 without a tile term."""
    return max(1.0, math.ceil(v / p.tile - 1e-9)) if p.b2 != 0 else 1.0


@njit(cache=True)
def tiles(p, v):
    """M-tiles of a share of ``v`` tokens (Eq. 2): 0 when empty, else :func:`piece_tiles`."""
    if v <= EPS:
        return 0.0
    return piece_tiles(p, v)


@njit(cache=True)
def new_loads(g):
    """Zeroed :class:`Loads` for ``g`` GPUs."""
    return Loads(np.zeros(g), np.zeros(g), np.zeros(g))


@njit(cache=True)
def features(p, x, pgpu, L):
    """Per-GPU features (Eq. 1/2's G, N, T) of shares ``x : float64[P]`` on GPUs
    ``pgpu : int64[P]``, written into ``L : Loads``.
    """
    G, N, T = L
    for h in range(G.size):
        G[h] = 0.0
        N[h] = 0.0
        T[h] = 0.0
    for q in range(x.size):
        v = x[q]
        if v > EPS:
            h = pgpu[q]
            G[h] += 1.0
            N[h] += v
            T[h] += tiles(p, v)


@njit(cache=True)
def gpu_times(p, L, t):
    """Each GPU's time (Eq. 1/2/4) of ``L : Loads`` into ``t : float64[g]``; returns the bottleneck,
    the first GPU of largest time (Eq. 3).
    """
    bottleneck = 0
    for h in range(t.size):
        t[h] = gpu_time(p, L.G[h], L.N[h], L.T[h])
        if t[h] > t[bottleneck]:
            bottleneck = h
    return bottleneck


@njit(cache=True)
def makespan(p, x, pgpu, g):
    """The largest GPU time (Eq. 3) of shares ``x : float64[P]`` on GPUs ``pgpu : int64[P]``, ``g`` GPUs."""
    L = new_loads(g)
    features(p, x, pgpu, L)
    best = 0.0
    for h in range(g):
        t = gpu_time(p, L.G[h], L.N[h], L.T[h])
        if h == 0 or t > best:
            best = t
    return best
