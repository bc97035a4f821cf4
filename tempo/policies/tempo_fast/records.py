"""The compiled solver's records and codes.

Every record is a namedtuple that numba passes by value; the arrays inside are shared, and the
functions that say so update them in place.  Sizes: ``E`` experts, ``R`` replica slots per
expert, ``g`` GPUs, ``P`` pairs (:class:`Pairs`).  Shares are float64 (exact integers up to 2^53
tokens); counts, capacities and flows are int64.  This module does not import numba.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

EPS = 1e-9  # tempo.core.instance.EPS_TOKENS: a share at or below it is empty
REL = 1e-9  # a move must beat the bottleneck by this relative margin

# Stage 1 seeds (Options.seed)
SEED_GREEDY, SEED_WHOLE, SEED_STATIC = 0, 1, 2
SEEDS = {"greedy": SEED_GREEDY, "whole": SEED_WHOLE, "static": SEED_STATIC}
# Options.chain_depth: no limit on the augmenting path's length
UNLIMITED = -1
# the candidate a solve returns (Candidate.chosen, solve's ``chosen``), named by CHOSEN
LOCAL_SEARCH, TOKEN_LP_VERTEX, TOKEN_LP_EVEN, ROUND_ROBIN, RESTART_WRAP_AROUND, RESTART_APPORTION, EXCHANGE, \
    PAPER_PRESET, TOKEN_LP_HIGHS, SEMI_MATCHING, UNIFORM, RECUT = range(12)
CHOSEN = ("local_search", "token_lp_vertex", "token_lp_even", "round_robin", "restart_wrap_around",
          "restart_apportion", "exchange", "paper_preset", "token_lp_highs", "semi_matching", "uniform", "recut")


# ---- the instance ----
class Pairs(NamedTuple):
    """The flat pair layout of an instance (:func:`.layout.pairs_of`): one pair per (live expert,
    valid replica slot), experts in id order, slots in slot order."""

    pe: np.ndarray      # int64[P]: each pair's expert
    pr: np.ndarray      # int64[P]: its replica slot
    pgpu: np.ndarray    # int64[P]: its GPU
    ptr: np.ndarray     # int64[E + 1]: ptr[e]:ptr[e+1] are expert e's pairs (none for an idle expert)
    gptr: np.ndarray    # int64[g + 1]: gpairs[gptr[h]:gptr[h+1]] are GPU h's pairs, in pair order
    gpairs: np.ndarray  # int64[P]
    first: np.ndarray   # bool[P]: the first pair of its expert on its GPU (the token LP's edges)


class Problem(NamedTuple):
    """The scalars of the instance a solve works on, built once (:func:`.solver.solve`).  Its
    arrays, ``counts`` and ``pairs``, travel as arguments beside it, as every kernel takes them:
    numba counts a reference per array of a record at each call, on the hot path."""

    n_gpus: int          # g
    n_slots: int         # R
    lower_bound: float   # no dispatch is below it (.bounds.lower_bound): a stage stops there
    full: bool           # every live expert has a replica on every GPU
    dup: bool            # some live expert has two slots on one GPU (.slots)


class Loads(NamedTuple):
    """Per-GPU features of a dispatch (Eq. 1/2, :func:`.pricing.features`), updated in place."""

    G: np.ndarray  # float64[g]: activated pairs
    N: np.ndarray  # float64[g]: tokens
    T: np.ndarray  # float64[g]: M-tiles


# ---- the options ----
class Options(NamedTuple):
    """The solver's switches, built from :class:`~tempo.policies.tempo_fast.TempoOptions`."""

    seed: int            # SEED_GREEDY (water-filled when cheaper), SEED_WHOLE (the paper's) or SEED_STATIC
    chains: bool         # stage 2, and the chain moves of stage 3
    chain_depth: int     # longest augmenting path after the 2-step chains, or UNLIMITED
    local_search: bool   # stage 3
    partial: bool        # stage 3 may split experts
    ensemble: bool       # stage 4
    tau: float           # the ensemble's switching tolerance (Proposition 1)
    max_iter: int        # accepted moves per stage, at most
    fanout: int          # 2-step chains: cheapest destination GPUs kept per first move (0: all)
    lp_vertex: bool      # score the max-flow token-LP vertex (and allow the compute-regime shortcut)
    lp_even: bool        # full replication: score the even token-LP split (total/g per GPU)
    restarts: bool       # full replication: rerun the local search from the structured seeds
    chain_cap: int       # 2-step chains: first moves kept, and second moves per GPU
    paper_pool: bool     # the paper preset's complete output joins the heuristic pool
    compound: bool       # stage 3 under Eq. 4: the whole-then-partial chain and the support polish
    balancer: bool       # the local search again from an optimal semi-matching (Lemma 2), into the pool
    work: int            # move evaluations a preset's stages 1-3 and restarts may spend (a deterministic bound)
    slot_split: bool     # duplicate slots: each expert's tokens on a GPU split over its slots there as Eq. 2 prices least


# ---- the stages' state and results ----
class GivenSplit(NamedTuple):
    """A dispatch the caller computed for stage 4 to score: a token-LP optimum (the even split
    under restricted replication, a QP; the HiGHS vertex, a simplex call) or the uniform split."""

    shares: np.ndarray  # float64[P]: zeros when none was given
    given: bool


class VertexCache(NamedTuple):
    """The token-LP vertex of one solve, built on first use (:func:`.ensemble.build_vertex`) and
    shared by the presets the solve runs (it depends on the instance only); updated in place."""

    shares: np.ndarray    # float64[P]
    ready: np.ndarray     # bool[1]: shares holds the vertex
    makespan: np.ndarray  # float64[1]: its makespan (Eq. 3), once ready


class Candidate(NamedTuple):
    """A dispatch the ensemble compares."""

    shares: np.ndarray  # float64[P]
    makespan: float     # Eq. 3
    chosen: int         # the stage or candidate that produced it, an index of CHOSEN


class Stages(NamedTuple):
    """What a solve did: the makespan after each stage (NaN where it did not run) and which exact
    shortcut it took."""

    seed: float
    chains: float
    local_search: float
    ensemble: float
    shortcut: bool  # a token-LP candidate attained the lower bound after stage 2: returned at once
    pruned: bool    # the lower bound ruled out a switch: the ensemble built no candidate
    capped: bool    # a search stopped at Options.work: the best dispatch found by then


class Heuristic(NamedTuple):
    """One preset's output before the ensemble (:func:`.heuristic.heuristic`)."""

    best: Candidate  # A_H of Proposition 1; with stages.shortcut, the token-LP candidate at the bound
    stages: Stages   # ensemble NaN, pruned False
    checked: bool    # the compute-regime check built a token-LP candidate: the ensemble scores it
