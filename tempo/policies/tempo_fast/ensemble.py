"""Stage 4 of Section 4.2: the ensemble with switching tolerance (Proposition 1)."""
from __future__ import annotations

import numpy as np

from .jit import njit
from .maxflow import token_lp
from .pricing import makespan
from .records import LOCAL_SEARCH, ROUND_ROBIN, TOKEN_LP_EVEN, TOKEN_LP_HIGHS, TOKEN_LP_VERTEX, UNIFORM, Candidate
from .slots import regrouped
from .structured import round_robin


@njit(cache=True, inline="always")
def build_vertex(p, counts, pairs, problem, vertex):
    """Build the token-LP vertex (Lemma 1, :func:`.maxflow.token_lp`) into ``vertex : VertexCache``
    unless it holds it already; returns whether it does (False: the max-flow iteration failed).
    """
    # inlined where it is called: a ready cache costs no call (a call counts a reference per
    # array of its records)
    return vertex.ready[0] or _build_vertex(p, counts, pairs, problem, vertex)


@njit(cache=True)
def _build_vertex(p, counts, pairs, problem, vertex):
    """:func:`build_vertex` when the cache is not ready: the max-flow token LP into ``vertex``."""
    W, _k = token_lp(counts, pairs, problem.n_gpus, vertex.shares)
    if W >= 0:
        vertex.ready[0] = True
        vertex.makespan[0] = makespan(p, vertex.shares, pairs.pgpu, problem.n_gpus)
    return vertex.ready[0]


@njit(cache=True)
def ensemble(p, counts, pairs, problem, o, heuristic, even, highs, uniform, vertex, checked):
    """Stage 4 (Proposition 1): score the token-LP candidates of ``o`` (the vertex, the even split),
    the HiGHS vertex when the caller gave one and, under full replication, round robin A3; switch
    to the best only when it is more than ``o.tau`` better than ``heuristic``.

    Parameters:
        p: Pricer; counts: int64[E]; pairs: Pairs; problem: Problem; o: Options
        heuristic: Candidate, the heuristic output A_H
        even, highs, uniform: GivenSplit (uniform: each expert evenly over its slots, given under
            the tile model); vertex: VertexCache (built here when needed)
        checked: bool, a token-LP candidate was built already: score even where the bound rules out a switch

    Returns:
        (Candidate, pruned: bool); pruned: the lower bound ruled out a switch and nothing was built
    """
    g = problem.n_gpus
    pgpu, first = pairs.pgpu, pairs.first
    P = pgpu.size
    best = heuristic.makespan
    if problem.lower_bound >= (1 - o.tau) * best and not checked:
        return heuristic, True
    cbest = np.inf
    cwho = LOCAL_SEARCH
    xc = np.zeros(P)
    # with o.slot_split each candidate is scored in its cheapest duplicate-slot split (.slots)
    split = o.slot_split and problem.dup
    if o.lp_vertex:
        if build_vertex(p, counts, pairs, problem, vertex):
            xv = regrouped(p, vertex.shares, pairs) if split else vertex.shares
            ms = makespan(p, xv, pgpu, g) if split else vertex.makespan[0]
            if ms < cbest:
                cbest, cwho = ms, TOKEN_LP_VERTEX
                xc[:] = xv
    if (o.lp_even and problem.full) or even.given:
        xe = even.shares
        if not even.given:  # the closed form under full replication: total/g per GPU
            xe = np.zeros(P)
            for q in range(P):
                if first[q]:
                    xe[q] = counts[pairs.pe[q]] / g
        if split:
            xe = regrouped(p, xe, pairs)
        ms = makespan(p, xe, pgpu, g)
        if ms < cbest:
            cbest, cwho = ms, TOKEN_LP_EVEN
            xc[:] = xe
    if problem.full:
        xr = round_robin(counts, pairs, g)
        if split:
            xr = regrouped(p, xr, pairs)
        ms = makespan(p, xr, pgpu, g)
        if ms < cbest:
            cbest, cwho = ms, ROUND_ROBIN
            xc[:] = xr
    if highs.given:
        xh = regrouped(p, highs.shares, pairs) if split else highs.shares
        ms = makespan(p, xh, pgpu, g)
        if ms < cbest:
            cbest, cwho = ms, TOKEN_LP_HIGHS
            xc[:] = xh
    if uniform.given:
        xu = regrouped(p, uniform.shares, pairs) if split else uniform.shares
        ms = makespan(p, xu, pgpu, g)
        if ms < cbest:
            cbest, cwho = ms, UNIFORM
            xc[:] = xu
    if cwho != LOCAL_SEARCH and cbest < (1 - o.tau) * best:
        return Candidate(xc, cbest, cwho), False
    return heuristic, False
