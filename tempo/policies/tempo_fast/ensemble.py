"""Stage 4 of Section 4.2: the ensemble with switching tolerance (Proposition 1).
"""
from __future__ import annotations

import numpy as np

from .jit import njit
from .maxflow import token_lp
from .pricing import makespan
from .records import LOCAL_SEARCH, ROUND_ROBIN, TOKEN_LP_EVEN, TOKEN_LP_VERTEX
from .structured import round_robin


@njit(cache=True)
def vertex_candidate(counts, pairs, g, p, xv, have_v, ms_v):
    """The token-LP vertex in the cache ``xv`` (built once per solve): ``(have_v, ms_v)``."""
    if not have_v:
        W, k = token_lp(counts, pairs, g, xv)
        have_v = W >= 0
        if have_v:
            ms_v = makespan(p, xv, pairs.pgpu, g)
    return have_v, ms_v


@njit(cache=True)
def ensemble(counts, pairs, g, p, o, lb, full, x, best, chosen, xg, given_even, xv, have_v, ms_v, checked):
    """Stage 4 (Proposition 1): score the token-LP candidates (and round robin under full
    replication) and switch to the best only if it is more than ``o.tau`` better than the
    heuristic output ``best``.  Not built when the lower bound rules out a switch (unless the
    compute-regime check already built one, ``checked``).

    Returns ``(x, best, chosen, pruned, have_v, ms_v)``."""
    pgpu, first = pairs.pgpu, pairs.first
    P = pgpu.size
    if lb >= (1 - o.tau) * best and not checked:
        return x, best, chosen, True, have_v, ms_v
    cbest = np.inf
    cwho = LOCAL_SEARCH
    xc = np.zeros(P)
    if o.lp_vertex:
        have_v, ms_v = vertex_candidate(counts, pairs, g, p, xv, have_v, ms_v)
        if have_v and ms_v < cbest:
            cbest, cwho = ms_v, TOKEN_LP_VERTEX
    if (o.lp_even and full) or given_even:
        xe = xg
        if not given_even:  # the closed form under full replication: total/g per GPU
            xe = np.zeros(P)
            for q in range(P):
                if first[q]:
                    xe[q] = counts[pairs.pe[q]] / g
        ms = makespan(p, xe, pgpu, g)
        if ms < cbest:
            cbest, cwho = ms, TOKEN_LP_EVEN
            xc[:] = xe
    if full:
        xr = round_robin(counts, pairs, g)
        ms = makespan(p, xr, pgpu, g)
        if ms < cbest:
            cbest, cwho = ms, ROUND_ROBIN
            xc[:] = xr
    if cwho == TOKEN_LP_VERTEX:
        xc[:] = xv
    if cwho != LOCAL_SEARCH and cbest < (1 - o.tau) * best:
        return xc, cbest, cwho, False, have_v, ms_v
    return x, best, chosen, False, have_v, ms_v
