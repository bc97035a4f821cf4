"""Stages 1-3 of Section 4.2 and the full-replication restarts for one preset.
"""
from __future__ import annotations

import numpy as np

from .ensemble import vertex_candidate
from .jit import njit
from .local_search import improve
from .polish import polish
from .pricing import activation_time, features, gpu_times, makespan, new_loads, token_time
from .records import LOCAL_SEARCH, RESTART_WRAP_AROUND, SEED_GREEDY, SEED_STATIC, TOKEN_LP_EVEN, TOKEN_LP_VERTEX
from .seed import seed
from .structured import apportion, wrap_around


@njit(cache=True)
def heuristic(counts, pairs, g, p, o, lb, full, xg, given_even, xv, have_v, ms_v, R):
    """Stages 1-3 and the full-replication restarts of one preset ``o``: the heuristic output
    A_H of Proposition 1, before the ensemble.

    ``xv`` caches the token-LP vertex (``have_v``: it holds it; ``ms_v``: its makespan), shared
    between the presets of one solve (the vertex depends on the instance only).

    Returns
    -------
    (x, best, chosen, s_seed, s_chains, s_local, shortcut, have_v, ms_v, checked)
        ``shortcut``: 0, or ``TOKEN_LP_VERTEX`` / ``TOKEN_LP_EVEN`` when that candidate attained
        the lower bound after stage 2 (then ``x`` is it); ``checked``: the compute-regime check
        built a token-LP candidate (the ensemble then scores the candidates whatever the bound).
    """
    pgpu = pairs.pgpu
    P = pgpu.size
    E = counts.size
    nan = np.nan
    x = np.zeros(P)
    L = new_loads(g)
    if o.seed == SEED_STATIC:  # every expert on its first replica slot
        ptr = pairs.ptr
        for e in range(E):
            if ptr[e + 1] > ptr[e]:
                x[ptr[e]] = counts[e]
        features(p, x, pgpu, L)
    else:
        seed(p, counts, pairs, x, L, o.seed == SEED_GREEDY)
    t = np.empty(g)
    gb = gpu_times(p, L, t)
    s_seed, s_chains, s_local = t[gb], nan, nan
    if o.chains:
        improve(p, x, pairs, L, lb, True, True, o)
        gb = gpu_times(p, L, t)
        s_chains = t[gb]
    checked = False
    if o.local_search and o.ensemble and (o.lp_vertex or given_even):
        # the compute-regime shortcut: a token-bound bottleneck, and the first token-LP
        # candidate (the vertex, else the given even split) attains the lower bound
        gb = gpu_times(p, L, t)
        if token_time(p, L.N[gb]) >= activation_time(p, L.G[gb], L.T[gb]):
            checked = True
            if o.lp_vertex:
                have_v, ms_v = vertex_candidate(counts, pairs, g, p, xv, have_v, ms_v)
                if have_v and ms_v <= lb * (1 + 1e-9):
                    return (xv.copy(), ms_v, LOCAL_SEARCH, s_seed, s_chains, s_local, TOKEN_LP_VERTEX, have_v, ms_v,
                            checked)
            else:
                ms = makespan(p, xg, pgpu, g)
                if ms <= lb * (1 + 1e-9):
                    return (xg.copy(), ms, LOCAL_SEARCH, s_seed, s_chains, s_local, TOKEN_LP_EVEN, have_v, ms_v,
                            checked)
    if o.local_search:
        improve(p, x, pairs, L, lb, not o.partial, o.chains, o)
        if o.compound and p.has_traffic and o.partial and polish(p, counts, pairs, g, x, L, lb, o, E, R):
            improve(p, x, pairs, L, lb, False, o.chains, o)
        gb = gpu_times(p, L, t)
        s_local = t[gb]
    best = makespan(p, x, pgpu, g)
    chosen = LOCAL_SEARCH
    if full and o.restarts and best > lb * (1 + 1e-12):
        # Full replication: restart the local search from two structured seeds that the
        # greedy cannot reach (few experts over many GPUs: 1.49x the optimum otherwise).
        for kind in range(2):
            if kind == 0:
                xs = wrap_around(counts, pairs, g)
            else:
                xs = apportion(counts, pairs, g)
                if xs.size == 0:
                    continue
            L2 = new_loads(g)
            features(p, xs, pgpu, L2)
            if o.local_search:
                improve(p, xs, pairs, L2, lb, not o.partial, o.chains, o)
            ms = makespan(p, xs, pgpu, g)
            if ms < best * (1 - 1e-12):
                best, chosen = ms, RESTART_WRAP_AROUND + kind
                x = xs
    return x, best, chosen, s_seed, s_chains, s_local, 0, have_v, ms_v, checked
