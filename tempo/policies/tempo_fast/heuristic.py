"""Stages 1-3 of Section 4.2 for one preset, and the full-replication restarts."""
from __future__ import annotations

import numpy as np

from .balancer import semi_matching
from .ensemble import build_vertex
from .jit import njit
from .local_search import improve
from .polish import polish
from .pricing import activation_time, features, gpu_times, makespan, new_loads, token_time
from .records import (LOCAL_SEARCH, RESTART_WRAP_AROUND, SEED_GREEDY, SEED_STATIC, SEMI_MATCHING, TOKEN_LP_EVEN,
                      TOKEN_LP_VERTEX, Candidate, Heuristic, Stages)
from .seed import seed
from .structured import apportion, wrap_around


@njit(cache=True)
def heuristic(p, counts, pairs, problem, o, even, vertex):
    """Seed, chains and local search of preset ``o``, then (full replication, ``o.restarts``) the
    local search again from the wrap-around and apportionment seeds, and (``o.balancer``) from an
    optimal semi-matching when the best so far holds more experts on a GPU than that one: the
    heuristic output A_H of Proposition 1.

    Parameters:
        p: Pricer; counts: int64[E]; pairs: Pairs; problem: Problem; o: Options
        even: GivenSplit
        vertex: VertexCache, built here when the compute-regime check needs it

    Returns:
        Heuristic; with stages.shortcut its best is the token-LP candidate that attained the lower
        bound after stage 2 (optimal: the solve returns it at once)
    """
    g, lb = problem.n_gpus, problem.lower_bound
    pgpu = pairs.pgpu
    P = pgpu.size
    E = counts.size
    nan = np.nan
    x = np.zeros(P)
    L = new_loads(g)
    # the move evaluations this preset may spend (the same on every machine: a work bound, not a clock)
    budget = np.full(1, o.work if o.work > 0 else 1 << 62, np.int64)
    split = o.slot_split and problem.dup
    # Step 1: the seed
    if o.seed == SEED_STATIC:  # every expert on its first replica slot
        ptr = pairs.ptr
        for e in range(E):
            if ptr[e + 1] > ptr[e]:
                x[ptr[e]] = counts[e]
        features(p, x, pgpu, L)
    else:
        seed(p, counts, pairs, x, L, o.seed == SEED_GREEDY)
    t = np.empty(g)
    bottleneck = gpu_times(p, L, t)
    s_seed, s_chains, s_local = t[bottleneck], nan, nan
    # Step 2: whole-expert chains and augmenting paths
    if o.chains:
        improve(p, x, pairs, L, lb, True, True, o, budget, split)
        bottleneck = gpu_times(p, L, t)
        s_chains = t[bottleneck]
    # the compute-regime shortcut: a token-bound bottleneck, and the first token-LP candidate
    # (the vertex, else the given even split) attains the lower bound
    checked = False
    if o.local_search and o.ensemble and (o.lp_vertex or even.given):
        bottleneck = gpu_times(p, L, t)
        if token_time(p, L.N[bottleneck]) >= activation_time(p, L.G[bottleneck], L.T[bottleneck]):
            checked = True
            shortcut = Stages(s_seed, s_chains, s_local, nan, True, False, budget[0] <= 0)
            if o.lp_vertex:
                if build_vertex(p, counts, pairs, problem, vertex) and vertex.makespan[0] <= lb * (1 + 1e-9):
                    return Heuristic(Candidate(vertex.shares.copy(), vertex.makespan[0], TOKEN_LP_VERTEX), shortcut,
                                     checked)
            else:
                ms = makespan(p, even.shares, pgpu, g)
                if ms <= lb * (1 + 1e-9):
                    return Heuristic(Candidate(even.shares.copy(), ms, TOKEN_LP_EVEN), shortcut, checked)
    # Step 3: the local search with partial moves, and the support polish (mixed regime)
    if o.local_search:
        improve(p, x, pairs, L, lb, not o.partial, o.chains, o, budget, split)
        if o.compound and p.has_traffic and o.partial and polish(p, counts, pairs, problem, x, L, o):
            improve(p, x, pairs, L, lb, False, o.chains, o, budget, split)
        bottleneck = gpu_times(p, L, t)
        s_local = t[bottleneck]
    best = makespan(p, x, pgpu, g)
    chosen = LOCAL_SEARCH
    if problem.full and o.restarts and best > lb * (1 + 1e-12) and budget[0] > 0:
        # restarts from two structured seeds the greedy cannot reach (few experts over many
        # GPUs: 1.49x the optimum otherwise)
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
                improve(p, xs, pairs, L2, lb, not o.partial, o.chains, o, budget, split)
            ms = makespan(p, xs, pgpu, g)
            if ms < best * (1 - 1e-12):
                best, chosen = ms, RESTART_WRAP_AROUND + kind
                x = xs
    if o.balancer and o.local_search and best > lb * (1 + 1e-12) and budget[0] > 0:
        # the exact activation balancer's dispatch (the registered "semi_matching" policy's,
        # .balancer.balanced), then the local search from it when it beats the best so far or
        # holds fewer experts on its busiest GPU: never worse than that policy, never a whole
        # activation step behind it (the chains and augmenting paths are priced with tokens
        # too, and may stop one step short where tokens decide)
        xs = np.zeros(P)
        L2 = new_loads(g)
        seed(p, counts, pairs, xs, L2, False)
        k_opt = semi_matching(counts, pairs, g, xs)
        ms = makespan(p, xs, pgpu, g)
        features(p, x, pgpu, L2)
        most = 0.0
        for h in range(g):
            most = max(most, L2.G[h])
        if ms < best or most > k_opt:
            features(p, xs, pgpu, L2)
            improve(p, xs, pairs, L2, lb, not o.partial, o.chains, o, budget, split)
            ms = makespan(p, xs, pgpu, g)
            if ms < best * (1 - 1e-12):
                best, chosen = ms, SEMI_MATCHING
                x = xs
    return Heuristic(Candidate(x, best, chosen), Stages(s_seed, s_chains, s_local, nan, False, False, budget[0] <= 0),
                     checked)
