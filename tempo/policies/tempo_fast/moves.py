"""The moves of stages 2 and 3 (Section 4.2): the exact line search of a move, and its application."""
from __future__ import annotations

import math

import numpy as np

from .jit import njit
from .pricing import activation_time, features, gpu_time, tiles
from .records import EPS


@njit(cache=True)
def evaluate_move(p, x, L, pgpu, bottleneck, i, j, whole_only, i2, j2):
    """The best share ``delta`` of pair ``i`` (on the bottleneck) to move to pair ``j`` (GPU h), then,
    with ``i2 >= 0``, all of pair ``i2`` (on h) to pair ``j2`` (GPU k): a 2-step chain.

    Parameters:
        p: Pricer; x: float64[P]; L: Loads; pgpu: int64[P]
        bottleneck, i, j, i2, j2: int
        whole_only: bool, try the whole share only

    Returns:
        (value, delta): the largest time among the GPUs the move touches, and the share moved
    """
    G, N, T = L
    h = pgpu[j]
    x1 = x[i]
    xj = x[j]
    Gg0, Ng0, Tg0 = G[bottleneck], N[bottleneck], T[bottleneck] - tiles(p, x1)
    Gh0, Nh0, Th0 = G[h], N[h], T[h] - tiles(p, xj)
    if xj <= EPS:
        Gh0 += 1.0
    third = 0.0
    if i2 >= 0:
        x2 = x[i2]
        xk = x[j2]
        k = pgpu[j2]
        Gh0 -= 1.0
        Nh0 -= x2
        Th0 -= tiles(p, x2)
        addk = 1.0 if xk <= EPS else 0.0
        dT = tiles(p, xk + x2) - tiles(p, xk)
        if k == bottleneck:
            Gg0 += addk
            Ng0 += x2
            Tg0 += dT
        else:
            third = gpu_time(p, G[k] + addk, N[k] + x2, T[k] + dT)
    cand = np.empty(40)
    nc = line_candidates(p, x1, xj, Gg0, Ng0, Tg0, Gh0, Nh0, Th0, third, whole_only, cand)
    bval = np.inf
    bdel = cand[0]
    tolw = EPS * max(1.0, x1)
    for q in range(nc):
        d = cand[q]
        if not d > EPS:
            continue
        rem = x1 - d
        whole = rem <= tolw
        tg = gpu_time(p, Gg0 - (1.0 if whole else 0.0), Ng0 - d, Tg0 + tiles(p, 0.0 if whole else rem))
        th = gpu_time(p, Gh0, Nh0 + d, Th0 + tiles(p, xj + d))
        v = max(max(tg, th), third)
        if v < bval:
            bval = v
            bdel = d
    return bval, bdel


@njit(cache=True)
def line_candidates(p, x1, xj, Gg0, Ng0, Tg0, Gh0, Nh0, Th0, third, whole_only, cand):
    """The shares ``delta`` in (0, x1] worth pricing when ``x1`` tokens on the bottleneck
    (features ``Gg0, Ng0, Tg0`` without them but for one activation) may move to a GPU holding
    ``xj`` of them (``Gh0, Nh0, Th0`` likewise, its activation counted), a third GPU at time
    ``third``; written into ``cand : float64[>= 40]``, their count returned.
    """
    c, beta, b2, tile = p.c, p.beta, p.b2, p.tile
    c2, gamma, traffic = p.c2, p.gamma, p.has_traffic
    # The objective restricted to delta is a max of affine pieces of Eq. 1/4, so its minimum
    # lies where two pieces cross: every crossing is a candidate (with a tile term each is also
    # snapped to the neighbouring tile boundaries, Eq. 2), plus half the token gap and the
    # whole share.  This finds the optimum the paper's ternary search looks for in one step.
    nc = 0
    if whole_only:
        cand[0] = x1
        nc = 1
    else:
        # the flat level both GPUs keep (one tile each for the moved expert), and the token
        # pieces' crossings with it and with each other
        Kflat = max(max(activation_time(p, Gg0, Tg0 + 1), activation_time(p, Gh0, Th0 + 1)), third)
        cand[0] = (Ng0 - Nh0) / 2.0
        cand[1] = x1
        nc = 2
        if beta > 0:
            cand[nc] = (c + beta * Ng0 - Kflat) / beta
            cand[nc + 1] = (Kflat - c - beta * Nh0) / beta
            nc += 2
        if traffic and gamma > 0:
            cand[nc] = (c2 + gamma * Ng0 - Kflat) / gamma
            cand[nc + 1] = (Kflat - c2 - gamma * Nh0) / gamma
            nc += 2
            if beta + gamma > 0:
                cand[nc] = (c + beta * Ng0 - c2 - gamma * Nh0) / (beta + gamma)
                cand[nc + 1] = (c2 + gamma * Ng0 - c - beta * Nh0) / (beta + gamma)
                nc += 2
        for q in range(nc):
            cand[q] = min(max(cand[q], 0.0), x1)
        if b2 > 0:
            base = nc
            for blk in range(4):
                for q in range(base):
                    v = cand[q]
                    if blk == 0:
                        w = x1 - tile * math.floor((x1 - v) / tile)
                    elif blk == 1:
                        w = x1 - tile * math.ceil((x1 - v) / tile)
                    elif blk == 2:
                        w = tile * math.ceil((xj + v) / tile) - xj
                    else:
                        w = tile * math.floor((xj + v) / tile) - xj
                    cand[nc] = w
                    nc += 1
            for q in range(nc):
                cand[q] = min(max(cand[q], 0.0), x1)
    return nc


@njit(cache=True)
def apply_move(p, x, pgpu, L, i, j, delta, i2, j2):
    """Move ``delta`` of pair ``i`` to pair ``j`` (the whole share when within EPS of it), then, with
    ``i2 >= 0``, all of pair ``i2`` to pair ``j2``; ``x : float64[P]`` and ``L`` updated in place.
    """
    if delta >= x[i] - EPS * max(1.0, x[i]):
        delta = x[i]
    x[i] -= delta
    x[j] += delta
    if x[i] < EPS:
        x[i] = 0.0
    if i2 >= 0:
        x[j2] += x[i2]
        x[i2] = 0.0
    features(p, x, pgpu, L)


@njit(cache=True)
def token_crossings(p, Nh, Nk, cand, nc):
    """Append to ``cand`` the shares ``delta`` at which a token piece of the GPU losing ``delta``
    (``Nh`` tokens) meets one of the GPU gaining it (``Nk``), each pairing of ``c + beta*N`` and
    ``c2 + gamma*N`` (Eq. 1/4); returns the new count ``nc``.
    """
    for u in range(2 if p.has_traffic else 1):
        ch, sh = (p.c, p.beta) if u == 0 else (p.c2, p.gamma)
        for w in range(2 if p.has_traffic else 1):
            ck, sk = (p.c, p.beta) if w == 0 else (p.c2, p.gamma)
            if sh + sk > 0:
                cand[nc] = (ch + sh * Nh - ck - sk * Nk) / (sh + sk)
                nc += 1
    return nc


@njit(cache=True)
def level_crossings(p, Nh, Nk, K, cand, nc):
    """Append to ``cand`` the shares at which the losing GPU's token pieces fall to the level ``K``
    and the gaining GPU's rise to it; returns the new count ``nc``.
    """
    for u in range(2 if p.has_traffic else 1):
        cu, su = (p.c, p.beta) if u == 0 else (p.c2, p.gamma)
        if su > 0:
            cand[nc] = (cu + su * Nh - K) / su
            cand[nc + 1] = (K - cu - su * Nk) / su
            nc += 2
    return nc
