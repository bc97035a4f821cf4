"""tempo_fast end to end (Section 4.2), compiled: the heuristic, the paper preset's output in its
pool, and the ensemble."""
from __future__ import annotations

import numpy as np

from .bounds import lower_bound
from .ensemble import ensemble
from .heuristic import heuristic
from .jit import njit
from .layout import is_full_replication, pairs_of, scatter
from .pricing import makespan
from .records import LOCAL_SEARCH, PAPER_PRESET, Candidate, GivenSplit, Problem, Stages, VertexCache
from .slots import has_duplicate_slots, regrouped


_NONE = np.zeros((0, 0))


@njit(cache=True)
def _given(shares, pairs):
    """A caller's token-LP split ``shares : float64[E, R]`` (or float64[0, 0]: none) on the pairs."""
    P = pairs.pgpu.size
    out = GivenSplit(np.zeros(P), shares.shape[0] > 0)
    if out.given:
        for q in range(P):
            out.shares[q] = shares[pairs.pe[q], pairs.pr[q]]
    return out


@njit(cache=True)
def solve(counts, replica_gpu, n_gpus, p, options, paper_options, even_shares, highs_shares, uniform_shares):
    """tempo_fast (Section 4.2): seed, chains and augmenting paths, local search, restarts, and the
    ensemble with switching tolerance ``options.tau`` (Proposition 1).

    Parameters:
        counts: int64[E]
        replica_gpu: int64[E, R], GPU of each replica slot, -1 for an unused slot
        n_gpus: int; p: Pricer; options: Options
        paper_options: Options, the "paper" preset under the caller's overrides, solved into the
            heuristic pool when options.paper_pool
        even_shares, highs_shares, uniform_shares: float64[E, R], the even token-LP split, the HiGHS
            vertex and the uniform split the caller computed (stage 4 scores them), or float64[0, 0]

    Returns:
        (shares float64[E, R], makespan, chosen, Stages); chosen indexes records.CHOSEN
    """
    E, R = replica_gpu.shape
    pairs = pairs_of(counts, replica_gpu, n_gpus)
    P = pairs.pgpu.size
    nan = np.nan
    lb = lower_bound(p, counts, pairs, n_gpus)
    if P == 0:  # no tokens: nothing to place (lb = every GPU's idle time, max(a, c, c2))
        return np.zeros((E, R)), lb, LOCAL_SEARCH, Stages(lb, nan, nan, nan, False, False, False)
    problem = Problem(n_gpus, R, lb, is_full_replication(pairs, E, n_gpus), has_duplicate_slots(pairs))
    even = _given(even_shares, pairs)
    highs = _given(highs_shares, pairs)
    uniform = _given(uniform_shares, pairs)
    vertex = VertexCache(np.zeros(P), np.zeros(1, np.bool_), np.full(1, np.inf))
    h = heuristic(p, counts, pairs, problem, options, even, vertex)
    stages = h.stages
    if stages.shortcut:
        return scatter(h.best.shares, pairs, E, R), h.best.makespan, h.best.chosen, stages
    best = h.best
    capped = stages.capped
    # The heuristic pool holds the paper preset's complete output under the same overrides (its
    # own ensemble over the same token-LP candidates included), compared by strict minimum:
    # A_H = min(this preset's heuristic, the paper preset's output), and the tolerance rule
    # compares the other candidates with A_H, so the result is never worse than the paper
    # preset's under the model, with or without stage 4.  The other ways out keep that: the
    # shortcut above returns a candidate at the lower bound, the paper preset is skipped when
    # A_H attains the bound, and the exchange pass only improves.
    if options.paper_pool and best.makespan > lb:
        paper = heuristic(p, counts, pairs, problem, paper_options, even, vertex)
        out = paper.best
        capped = capped or paper.stages.capped
        if not paper.stages.shortcut and paper_options.ensemble:
            out, _pruned = ensemble(p, counts, pairs, problem, paper_options, out, even, highs,
                                    _given(_NONE, pairs), vertex, paper.checked)
        if out.makespan < best.makespan:
            best = Candidate(out.shares, out.makespan, PAPER_PRESET)
    pruned = False
    s_ensemble = nan
    if options.ensemble:
        best, pruned = ensemble(p, counts, pairs, problem, options, best, even, highs, uniform, vertex, h.checked)
        s_ensemble = best.makespan
    if options.slot_split and problem.dup:
        # the result in its cheapest duplicate-slot split (the paper preset's output included):
        # no GPU's time rises
        x = regrouped(p, best.shares, pairs)
        ms = makespan(p, x, pairs.pgpu, n_gpus)
        if ms < best.makespan:
            best = Candidate(x, ms, best.chosen)
            if options.ensemble:
                s_ensemble = ms
    return (scatter(best.shares, pairs, E, R), best.makespan, best.chosen,
            Stages(stages.seed, stages.chains, stages.local_search, s_ensemble, False, pruned, capped))
