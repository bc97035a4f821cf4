"""Stage 3's support polish under Eq. 4: activation patterns re-solved by the restricted token LP."""
from __future__ import annotations

import numpy as np

from .jit import njit
from .layout import pairs_of, scatter
from .maxflow import token_lp
from .pricing import activation_time, features, gpu_times, new_loads, token_time
from .records import EPS, REL


@njit(cache=True)
def _support_lp(counts, pairs, problem, on):
    """The token LP (Lemma 1) restricted to the pairs ``on : bool[P]``: float64[P], empty when the
    iteration failed.
    """
    g = problem.n_gpus
    E, R = counts.size, problem.n_slots
    rep = np.full((E, R), -1, np.int64)
    for q in range(on.size):
        if on[q]:
            rep[pairs.pe[q], pairs.pr[q]] = pairs.pgpu[q]
    sub = pairs_of(counts, rep, g)
    xs = np.zeros(sub.pgpu.size)
    W, k = token_lp(counts, sub, g, xs)
    if W < 0:
        return np.zeros(0)
    S = scatter(xs, sub, E, R)
    out = np.empty(on.size)
    for q in range(on.size):
        out[q] = S[pairs.pe[q], pairs.pr[q]]
    return out


@njit(cache=True)
def _score(p, y, pgpu, g):
    """``(makespan, GPUs within REL of it)`` of shares ``y : float64[P]``."""
    L = new_loads(g)
    features(p, y, pgpu, L)
    t = np.empty(g)
    bottleneck = gpu_times(p, L, t)
    tb = t[bottleneck]
    n = 0
    for h in range(g):
        if t[h] >= tb - REL * max(1.0, tb):
            n += 1
    return tb, n


@njit(cache=True)
def _better(ms, n, bms, bn):
    """Whether ``(ms, n)`` beats ``(bms, bn)``: a makespan lower by more than REL, or the same and
    fewer GPUs at it (the local search's rule).
    """
    if ms < bms - REL * max(1.0, bms):
        return True
    return ms <= bms and n < bn


@njit(cache=True)
def _try_pattern(p, counts, pairs, problem, on, e, bms, bn):
    """The restricted token LP on the pattern ``on : bool[P]``, unless expert ``e`` keeps no pair in
    it or a GPU's activation piece alone exceeds ``bms``: ``(shares, makespan, n)`` when they beat
    ``(bms, bn)``, else empty shares.
    """
    g = problem.n_gpus
    pgpu, ptr = pairs.pgpu, pairs.ptr
    keep = False
    for q in range(ptr[e], ptr[e + 1]):
        keep = keep or on[q]
    if not keep:
        return np.zeros(0), bms, bn
    Gc = np.zeros(g)
    for q in range(on.size):
        if on[q]:
            Gc[pgpu[q]] += 1.0
    for h in range(g):
        if activation_time(p, Gc[h], Gc[h]) > bms:
            return np.zeros(0), bms, bn
    y = _support_lp(counts, pairs, problem, on)
    if y.size:
        ms, n = _score(p, y, pgpu, g)
        if _better(ms, n, bms, bn):
            return y, ms, n
    return np.zeros(0), bms, bn


@njit(cache=True)
def polish(p, counts, pairs, problem, x, L, o):
    """Support polish (stage 3, Eq. 4): re-solve the restricted token LP on the current activation
    pattern (token-bound bottleneck) or on the patterns that close one of the bottleneck's pairs
    (activation-bound); keep the best that beats the current dispatch, at most
    ``min(o.max_iter, 2g)`` times.

    Parameters:
        p: Pricer; counts: int64[E]; pairs: Pairs; problem: Problem; o: Options
        x: float64[P]; L: Loads (both updated in place)

    Returns:
        int, accepted polishes
    """
    # A pattern fixes each GPU's activation piece; for a fixed pattern the token pieces only
    # grow with N, so the best shares are the restricted token LP's.  Closing a pair lets its
    # expert's tokens go to its other replicas (up to o.fanout cheapest GPUs, opened if idle):
    # tokens move along paths of any length, where single moves and 2-step chains stall.
    g, lb, R = problem.n_gpus, problem.lower_bound, problem.n_slots
    pe, pgpu, ptr, gptr, gpairs = pairs.pe, pairs.pgpu, pairs.ptr, pairs.gptr, pairs.gpairs
    P = x.size
    t = np.empty(g)
    done = 0
    cap = 8
    for _ in range(min(o.max_iter, 2 * g)):
        bottleneck = gpu_times(p, L, t)
        tb = t[bottleneck]
        if tb <= lb * (1 + 1e-12):
            break
        on = np.zeros(P, np.bool_)
        for q in range(P):
            on[q] = x[q] > EPS
        bms, bn = _score(p, x, pgpu, g)
        bx = np.zeros(0)
        if token_time(p, L.N[bottleneck]) >= activation_time(p, L.G[bottleneck], L.T[bottleneck]):
            y = _support_lp(counts, pairs, problem, on)
            if y.size:
                ms, n = _score(p, y, pgpu, g)
                if _better(ms, n, bms, bn):
                    bms, bn, bx = ms, n, y
        else:
            # the bottleneck's pairs with somewhere else to go, smallest shares first
            src = np.empty(gptr[bottleneck + 1] - gptr[bottleneck], np.int64)
            sx = np.empty(src.size)
            ns = 0
            for r in range(gptr[bottleneck], gptr[bottleneck + 1]):
                i = gpairs[r]
                if x[i] > EPS and ptr[pe[i] + 1] - ptr[pe[i]] > 1:
                    src[ns] = i
                    sx[ns] = x[i]
                    ns += 1
            order = np.argsort(sx[:ns], kind="mergesort")[:cap]
            dest = np.empty(R, np.int64)
            dkey = np.empty(R)
            nf = o.fanout if o.fanout > 0 else R
            for oi in order:
                i = src[oi]
                e = pe[i]
                nd = 0
                for j in range(ptr[e], ptr[e + 1]):
                    h = pgpu[j]
                    if h != bottleneck:
                        dest[nd] = j
                        dkey[nd] = activation_time(p, L.G[h] + (0.0 if x[j] > EPS else 1.0), L.T[h] + 1.0)
                        nd += 1
                if nd == 0:
                    continue
                od = np.argsort(dkey[:nd], kind="mergesort")
                # the pattern without pair i, its expert's tokens on its other active pairs
                # (dd = -1) or also on one more of its replica GPUs, cheapest first
                for dd in range(-1, min(nd, nf)):
                    j = -1
                    if dd >= 0:
                        j = dest[od[dd]]
                        if on[j]:
                            continue
                    on2 = on.copy()
                    on2[i] = False
                    if j >= 0:
                        on2[j] = True
                    y, ms, n = _try_pattern(p, counts, pairs, problem, on2, e, bms, bn)
                    if y.size:
                        bms, bn, bx = ms, n, y
        if bx.size == 0:
            break
        x[:] = bx
        features(p, x, pgpu, L)
        done += 1
    return done
