"""Stage 1 of Section 4.2: the cost-aware greedy seed."""
from __future__ import annotations

import numpy as np

from .jit import njit
from .pricing import features, gpu_time, piece_tiles


@njit(cache=True)
def seed(p, counts, pairs, x, L, split):
    """Cost-aware greedy seeding (Section 4.2, stage 1): experts with one replica GPU first, then the
    others by descending tokens, each whole on the replica GPU of least resulting time (ties:
    smaller increase, then lower GPU id) or, with ``split``, water-filled over its k least-loaded
    replica GPUs when that is cheaper.

    Parameters:
        p: Pricer; counts: int64[E]; pairs: Pairs
        x: float64[P]; L: Loads (outputs)
        split: bool, allow the water-filling (the paper's seed places whole experts)
    """
    pgpu, ptr = pairs.pgpu, pairs.ptr
    G, N, T = L
    g = G.size
    E = counts.size
    x[:] = 0.0
    nchoice = 0
    forced = np.zeros(E, np.bool_)
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            lo = pgpu[ptr[e]]
            hi = lo
            for q in range(ptr[e], ptr[e + 1]):
                lo = min(lo, pgpu[q])
                hi = max(hi, pgpu[q])
            if lo == hi:
                forced[e] = True
                x[ptr[e]] = counts[e]
            else:
                nchoice += 1
    features(p, x, pgpu, L)
    choice = np.empty(nchoice, np.int64)
    k = 0
    for e in range(E):
        if ptr[e + 1] > ptr[e] and not forced[e]:
            choice[k] = e
            k += 1
    neg = np.empty(nchoice, np.int64)
    for i in range(nchoice):
        neg[i] = -counts[choice[i]]
    choice = choice[np.argsort(neg, kind="mergesort")]
    cand_h = np.empty(g, np.int64)
    cand_p = np.empty(g, np.int64)
    stamp = np.full(g, -1, np.int64)
    for e in choice:
        n = float(counts[e])
        nt = piece_tiles(p, n)
        bnew = np.inf
        binc = np.inf
        bh = -1
        bp = -1
        for q in range(ptr[e], ptr[e + 1]):
            h = pgpu[q]
            old = gpu_time(p, G[h], N[h], T[h])
            new = gpu_time(p, G[h] + 1, N[h] + n, T[h] + nt)
            inc = new - old
            if (new < bnew) or (new == bnew and (inc < binc or (inc == binc and h < bh))):
                bnew, binc, bh, bp = new, inc, h, q
        kbest = 0
        level = 0.0
        m = 0
        if split and ptr[e + 1] - ptr[e] > 1 and n > 1:
            # water-filling: one pair per distinct GPU, GPUs by (tokens, id)
            for q in range(ptr[e], ptr[e + 1]):
                h = pgpu[q]
                if stamp[h] != e:
                    stamp[h] = e
                    j = m  # insertion by (N[h], h)
                    while j > 0 and (N[cand_h[j - 1]] > N[h] or (N[cand_h[j - 1]] == N[h] and cand_h[j - 1] > h)):
                        cand_h[j] = cand_h[j - 1]
                        cand_p[j] = cand_p[j - 1]
                        j -= 1
                    cand_h[j] = h
                    cand_p[j] = q
                    m += 1
            acc = 0.0
            bworst = np.inf
            for kk in range(1, m + 1):
                acc += N[cand_h[kk - 1]]
                if kk == 1:
                    continue
                lev = (acc + n) / kk
                if lev <= N[cand_h[kk - 1]]:  # the kk-th GPU would receive nothing
                    break
                worst = 0.0
                for jj in range(kk):
                    h = cand_h[jj]
                    worst = max(worst, gpu_time(p, G[h] + 1, lev, T[h] + piece_tiles(p, lev - N[h])))
                if worst < bworst:
                    bworst = worst
                    kbest = kk
                    level = lev
            if kbest > 0 and not (bworst < bnew * (1 - 1e-12)):
                kbest = 0
        if kbest == 0:
            x[bp] = n
            G[bh] += 1.0
            N[bh] += n
            T[bh] += nt
        else:
            # amounts from the levels before any update (the plan is built first)
            amounts = np.empty(kbest)
            rest = n
            for jj in range(kbest - 1):
                amounts[jj] = level - N[cand_h[jj]]
                rest -= amounts[jj]
            amounts[kbest - 1] = rest  # the row sums to n exactly, whatever the rounding of the levels
            for jj in range(kbest):
                h = cand_h[jj]
                amount = amounts[jj]
                x[cand_p[jj]] = amount
                G[h] += 1.0
                N[h] += amount
                T[h] += piece_tiles(p, amount)
