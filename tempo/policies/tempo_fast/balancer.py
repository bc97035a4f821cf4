"""An exact activation balancer (Lemma 2): the optimal semi-matching of whole experts to GPUs, a
restart seed of the local search."""
from __future__ import annotations

import numpy as np

from .jit import njit
from .layout import pairs_of, scatter
from .pricing import new_loads
from .records import EPS
from .seed import seed


@njit(cache=True)
def semi_matching(counts, pairs, g, x):
    """Turn the whole-expert dispatch ``x : float64[P]`` (updated in place) into one whose largest
    number of experts on a GPU is the least any whole-expert dispatch attains, by augmenting paths
    (Harvey et al. 2006; Lemma 2's exact limit).  Returns that number.

    Each round searches breadth first from every GPU holding the most experts, K, along "expert on
    u has a replica on w" edges, for a GPU holding at most K - 2, and moves every expert on the path
    one step (the first GPU loses one, the last gains one).  When no such path exists the GPUs the
    search reached hold at least K - 1 each, one holds K, and every expert on them has all its
    replicas among them: no dispatch puts fewer than K on all of them, so K is optimal.  Each
    round costs O(P) and removes one expert from a GPU at K, so at most O(E) rounds.
    """
    pe, pgpu, ptr, gptr, gpairs = pairs.pe, pairs.pgpu, pairs.ptr, pairs.gptr, pairs.gpairs
    cnt = np.zeros(g, np.int64)
    for q in range(x.size):
        if x[q] > EPS:
            cnt[pgpu[q]] += 1
    seen = np.full(g, -1, np.int64)   # the round that reached each GPU
    par_from = np.empty(g, np.int64)  # the pair the expert leaves (on the parent GPU)
    par_to = np.empty(g, np.int64)    # the pair it arrives on (on this GPU)
    queue = np.empty(g, np.int64)
    K = 0
    for rnd in range(counts.size * g + 1):
        K = 0
        for h in range(g):
            K = max(K, cnt[h])
        nq = 0
        for h in range(g):
            if cnt[h] == K:
                seen[h] = rnd
                par_from[h] = -1
                queue[nq] = h
                nq += 1
        head = 0
        end = -1
        while head < nq and end < 0:
            u = queue[head]
            head += 1
            for r in range(gptr[u], gptr[u + 1]):
                q = gpairs[r]
                if not x[q] > EPS:
                    continue
                e = pe[q]
                for q2 in range(ptr[e], ptr[e + 1]):
                    w = pgpu[q2]
                    if seen[w] == rnd:
                        continue
                    seen[w] = rnd
                    par_from[w], par_to[w] = q, q2
                    if cnt[w] <= K - 2:
                        end = w
                        break
                    queue[nq] = w
                    nq += 1
                if end >= 0:
                    break
        if end < 0:
            return K
        w = end
        cnt[w] += 1
        while par_from[w] >= 0:
            q, q2 = par_from[w], par_to[w]
            x[q2] = x[q]
            x[q] = 0.0
            w = pgpu[q]
        cnt[w] -= 1
    return K


@njit(cache=True)
def balanced(counts, replica_gpu, n_gpus, p):
    """The exact activation balancer's dispatch: the cost-aware whole-expert seed (Section 4.2
    stage 1 under Pricer ``p``) turned into an optimal semi-matching (:func:`semi_matching`); the
    start of tempo_fast's balancer restart.

    Parameters:
        counts: int64[E]; replica_gpu: int64[E, R]; n_gpus: int; p: Pricer

    Returns:
        (float64[E, R] shares, int: the largest number of experts on a GPU)
    """
    E, R = replica_gpu.shape
    pairs = pairs_of(counts, replica_gpu, n_gpus)
    x = np.zeros(pairs.pgpu.size)
    if x.size == 0:
        return np.zeros((E, R)), 0
    seed(p, counts, pairs, x, new_loads(n_gpus), False)
    k = semi_matching(counts, pairs, n_gpus, x)
    return scatter(x, pairs, E, R), k
