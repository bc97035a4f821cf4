"""Duplicate replica slots under Eq. 2: an expert's tokens on one GPU, split over its slots there.

Eq. 1/2 price each activated (expert, slot) pair: ``b`` per pair and ``b2`` per M-tile beyond a
pair's first.  An expert with ``k >= 2`` slots on GPU h and ``v`` tokens there costs that GPU's
flat piece ``b*m + b2*(T - m)`` over ``m`` non-empty pieces of ``T`` tiles in all, and nothing
else on h depends on how ``v`` is split (its tokens ``N`` do not change).  With
``t = ceil(v / tile)`` the least ``T`` is ``max(m, t)``, so the split that costs least is
``m = min(k, t)`` pieces of whole tiles when a tile costs more than an activation (``b2 > b``),
else one piece (``m = 1``, the pieces merged).  :func:`regroup` puts every such group of a
dispatch in that form when it costs less than the group's present split.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import njit
from .moves import line_candidates
from .pricing import features, gpu_time, tiles
from .records import EPS


@njit(cache=True)
def has_duplicate_slots(pairs):
    """Whether some live expert has two slots on one GPU (a pair that is not the first of its
    expert on its GPU)."""
    for q in range(pairs.first.size):
        if not pairs.first[q]:
            return True
    return False


@njit(cache=True)
def _piece(v, t, m, i, packed, tile):
    """Tokens of piece ``i`` of ``m`` when ``v`` tokens of ``t`` tiles are cut at whole tiles,
    piece i holding ``t // m`` tiles (one more for the first ``t % m``): in proportion to its
    tiles, whole tokens (the last piece takes the rest), or (``packed``) full tiles but the last."""
    base, extra = t // m, t % m
    lo = i * base + min(i, extra)           # tiles before piece i
    hi = lo + base + (1 if i < extra else 0)
    if packed:
        end = v if i == m - 1 else hi * tile
        return end - lo * tile
    end = v if i == m - 1 else math.floor(v * hi / t)
    return end - math.floor(v * lo / t)


@njit(cache=True)
def regroup(p, x, pairs):
    """Every (expert, GPU) group of two or more slots with tokens put in its cheapest split (the
    module's rule), where that costs the GPU's flat piece less than the group's present split;
    ``x : float64[P]`` updated in place (the caller recomputes the loads).

    Returns:
        bool: whether some group changed
    """
    changed = False
    for e in range(pairs.ptr.size - 1):
        if pairs.ptr[e + 1] - pairs.ptr[e] > 1:
            changed = regroup_expert(p, x, pairs, e) or changed
    return changed


@njit(cache=True)
def regroup_expert(p, x, pairs, e):
    """:func:`regroup` on expert ``e``'s groups only; returns whether one changed."""
    pgpu, first = pairs.pgpu, pairs.first
    lo, hi = pairs.ptr[e], pairs.ptr[e + 1]
    changed = False
    for q in range(lo, hi):
        if not first[q]:
            continue
        h = pgpu[q]
        k = 0
        v = 0.0
        g0 = 0.0
        t0 = 0.0
        for r in range(q, hi):
            if pgpu[r] == h:
                k += 1
                v += x[r]
                if x[r] > EPS:
                    g0 += 1.0
                    t0 += tiles(p, x[r])
        if k < 2 or v <= EPS:
            continue
        t = int(tiles(p, v))
        m = min(k, t) if p.b2 > p.b else 1
        old = p.b * g0 + p.b2 * (t0 - g0)
        for packed in (False, True):
            g1 = 0.0
            t1 = 0.0
            ok = True
            for i in range(m):
                w = _piece(v, t, m, i, packed, p.tile) if m > 1 else v
                if not w > EPS:
                    ok = False
                    break
                g1 += 1.0
                t1 += tiles(p, w)
            if ok and p.b * g1 + p.b2 * (t1 - g1) < old:
                i = 0
                for r in range(q, hi):
                    if pgpu[r] == h:
                        x[r] = (_piece(v, t, m, i, packed, p.tile) if m > 1 else v) if i < m else 0.0
                        i += 1
                changed = True
                break
    return changed


@njit(cache=True)
def regrouped(p, shares, pairs):
    """A copy of ``shares : float64[P]`` with :func:`regroup` applied."""
    out = shares.copy()
    regroup(p, out, pairs)
    return out


@njit(cache=True)
def split_cost(p, v, k):
    """``(activations, tiles)`` of ``v`` tokens of one expert over its ``k`` slots on a GPU in
    the cheapest split (the module's rule); ``(0, 0)`` when empty."""
    if v <= EPS:
        return 0.0, 0.0
    t = tiles(p, v)
    m = min(float(k), t) if p.b2 > p.b else 1.0
    return m, max(m, t)


@njit(cache=True)
def group_of(x, pairs, e, h):
    """Expert ``e``'s pairs on GPU ``h``: ``(first pair, slots, tokens, activations, tiles)``
    of their present split (first pair -1 when it has none there)."""
    first, k, v, ga = -1, 0, 0.0, 0.0
    for q in range(pairs.ptr[e], pairs.ptr[e + 1]):
        if pairs.pgpu[q] == h:
            if first < 0:
                first = q
            k += 1
            v += x[q]
            if x[q] > EPS:
                ga += 1.0
    return first, k, v, ga


@njit(cache=True)
def group_tiles(p, x, pairs, e, h):
    """M-tiles of expert ``e``'s present pieces on GPU ``h``."""
    t = 0.0
    for q in range(pairs.ptr[e], pairs.ptr[e + 1]):
        if pairs.pgpu[q] == h:
            t += tiles(p, x[q])
    return t


@njit(cache=True)
def evaluate_group_move(p, x, L, pairs, bottleneck, i, j, whole_only):
    """The best share ``delta`` of pair ``i``'s expert's tokens on the bottleneck to move to GPU h of
    pair ``j``, each GPU's group of that expert priced in its cheapest split (:func:`split_cost`):
    the single move of stage 3 where a group holds two or more slots.

    Returns:
        (value, delta): the larger time of the two GPUs, and the tokens moved
    """
    G, N, T = L
    e, h = pairs.pe[i], pairs.pgpu[j]
    _, ks, vs, gs = group_of(x, pairs, e, bottleneck)
    _, kd, vd, gd = group_of(x, pairs, e, h)
    # the features without the expert's pieces, plus one activation each (line_candidates' convention)
    Gg0, Ng0, Tg0 = G[bottleneck] - gs + 1.0, N[bottleneck], T[bottleneck] - group_tiles(p, x, pairs, e, bottleneck)
    Gh0, Nh0, Th0 = G[h] - gd + 1.0, N[h], T[h] - group_tiles(p, x, pairs, e, h)
    cand = np.empty(40)
    nc = line_candidates(p, vs, vd, Gg0, Ng0, Tg0, Gh0, Nh0, Th0, 0.0, whole_only, cand)
    bval = np.inf
    bdel = cand[0]
    tolw = EPS * max(1.0, vs)
    for q in range(nc):
        d = cand[q]
        if not d > EPS:
            continue
        rem = vs - d
        ms, ts = split_cost(p, 0.0 if rem <= tolw else rem, ks)
        md, td = split_cost(p, vd + d, kd)
        tg = gpu_time(p, Gg0 - 1.0 + ms, Ng0 - d, Tg0 + ts)
        th = gpu_time(p, Gh0 - 1.0 + md, Nh0 + d, Th0 + td)
        v = max(tg, th)
        if v < bval:
            bval = v
            bdel = d
    return bval, bdel


@njit(cache=True)
def apply_group_move(p, x, pairs, L, i, j, delta):
    """Move ``delta`` of pair ``i``'s expert's tokens on its GPU to GPU h of pair ``j`` (all of them
    when within EPS), each group then in its cheapest split (:func:`regroup_expert`); ``x`` and
    ``L`` updated in place."""
    e, g0, h = pairs.pe[i], pairs.pgpu[i], pairs.pgpu[j]
    qs, _, vs, _ = group_of(x, pairs, e, g0)
    qd, _, vd, _ = group_of(x, pairs, e, h)
    if delta >= vs - EPS * max(1.0, vs):
        delta = vs
    for q in range(pairs.ptr[e], pairs.ptr[e + 1]):
        if pairs.pgpu[q] == g0 or pairs.pgpu[q] == h:
            x[q] = 0.0
    rest = vs - delta
    x[qs] = rest if rest >= EPS else 0.0
    x[qd] = vd + delta
    regroup_expert(p, x, pairs, e)
    features(p, x, pairs.pgpu, L)
