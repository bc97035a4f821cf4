"""The per-GPU time of paper Eq. 1, 2 and 4, written once.

With ``G`` activated (expert, replica) pairs, ``N`` tokens and ``T`` grouped-GEMM M-tiles on a
GPU::

    t = max(a + b*G + b2*(T - G),  c + beta*N,  c2 + gamma*N)

* Eq. 1 (two regimes): ``b2 = 0`` and no traffic piece;
* Eq. 2 (tile-aware): each tile beyond an expert's first costs ``b2``;
* Eq. 4 (communication-aware): the third piece, present when ``has_traffic``.

Every price in the library comes from these three functions: :class:`tempo.core.cost.CostModel`
calls them on numpy arrays (``p`` is the CostModel itself), and the compiled solver
(:mod:`tempo.policies.tempo_fast.pricing`) compiles them with numba and calls them on scalars (``p`` is a
:class:`Pricer` record).  They use only ``+``, ``*`` and ``np.maximum`` in a fixed order, so a
price is the same float64, bit for bit, on both paths.  This module does not import numba.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Pricer", "activation_time", "token_time", "gpu_time"]


class Pricer(NamedTuple):
    """The cost model's coefficients as a flat record of scalars (numba passes it by value).

    Fields
    ------
    a, b : float
        Flat piece: constant and cost per activated pair (Eq. 1).
    c, beta : float
        Linear piece: constant and cost per token (Eq. 1).
    b2 : float
        Cost per extra M-tile (Eq. 2); 0 without the tile term.
    tile : float
        M-tile size in tokens (Eq. 2).
    c2, gamma : float
        Traffic piece (Eq. 4); 0 when ``has_traffic`` is False.
    has_traffic : bool
        Whether the traffic piece is part of the max.
    """

    a: float
    b: float
    c: float
    beta: float
    b2: float
    tile: float
    c2: float
    gamma: float
    has_traffic: bool

    @classmethod
    def of(cls, model) -> "Pricer":
        """The record of a :class:`~tempo.core.cost.CostModel`."""
        traffic = model.c2 is not None
        return cls(float(model.a), float(model.b), float(model.c), float(model.beta), float(model.b2),
                   float(model.tile), float(model.c2) if traffic else 0.0, float(model.gamma) if traffic else 0.0,
                   bool(traffic))


def activation_time(p, G, T):
    """The flat (activation) piece of Eq. 1/2: ``a + b*G + b2*(T - G)`` (the tile term only when
    ``b2 != 0``: adding ``0 * (T - G)`` would change no value, but costs two array operations).

    Parameters
    ----------
    p : Pricer or CostModel
    G, T : float or float64[...]
        Activated pairs and M-tiles on the GPU (``T = G`` when every pair fits one tile).
    """
    t = p.a + p.b * G
    if p.b2 != 0:
        t = t + p.b2 * (T - G)
    return t


def token_time(p, N):
    """The token pieces of Eq. 1/4: ``max(c + beta*N, c2 + gamma*N)`` (the second only when
    ``p.has_traffic``).

    Parameters
    ----------
    p : Pricer or CostModel
    N : float or float64[...]
        Tokens on the GPU.
    """
    t = p.c + p.beta * N
    if p.has_traffic:
        t = np.maximum(t, p.c2 + p.gamma * N)
    return t


def gpu_time(p, G, N, T):
    """Per-GPU time of Eq. 1/2/4: ``max(activation_time(p, G, T), token_time(p, N))``.

    Parameters
    ----------
    p : Pricer or CostModel
    G, N, T : float or float64[...]
        Activated pairs, tokens and M-tiles on each GPU (broadcast together).

    Returns
    -------
    float or float64[...]
        Microseconds.
    """
    return np.maximum(activation_time(p, G, T), token_time(p, N))
