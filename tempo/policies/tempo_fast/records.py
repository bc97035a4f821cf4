"""The compiled solver's records and codes: numba namedtuples passed by value, shapes in the
field lists.
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
# the candidate a solve returns (solve's ``chosen``), named by CHOSEN
LOCAL_SEARCH, TOKEN_LP_VERTEX, TOKEN_LP_EVEN, ROUND_ROBIN, RESTART_WRAP_AROUND, RESTART_APPORTION, EXCHANGE, \
    PAPER_PRESET = range(8)
CHOSEN = ("local_search", "token_lp_vertex", "token_lp_even", "round_robin", "restart_wrap_around",
          "restart_apportion", "exchange", "paper_preset")


class Pairs(NamedTuple):
    """The flat pair layout of an instance (:func:`pairs_of`); ``P`` pairs, ``E`` experts, ``g`` GPUs.

    Fields
    ------
    pe, pr, pgpu : int64[P]
        Each pair's expert, replica slot and GPU.
    ptr : int64[E + 1]
        ``ptr[e]:ptr[e+1]`` are expert ``e``'s pairs (empty for an idle expert).
    gptr : int64[g + 1], gpairs : int64[P]
        ``gpairs[gptr[h]:gptr[h+1]]`` are GPU ``h``'s pairs, in pair order.
    first : bool[P]
        The first pair of its expert on its GPU (the token LP's deduplicated expert-GPU edges).
    """

    pe: np.ndarray
    pr: np.ndarray
    pgpu: np.ndarray
    ptr: np.ndarray
    gptr: np.ndarray
    gpairs: np.ndarray
    first: np.ndarray


class Loads(NamedTuple):
    """Per-GPU features of a dispatch (:func:`features`): ``G``, ``N``, ``T`` each float64[g]
    (activated pairs, tokens, M-tiles), updated in place."""

    G: np.ndarray
    N: np.ndarray
    T: np.ndarray


class Options(NamedTuple):
    """The solver's switches (built from :class:`~tempo.policies.tempo_fast.TempoOptions`).

    Fields
    ------
    seed : int
        ``SEED_GREEDY`` (whole experts, water-filled over replica GPUs when that is cheaper),
        ``SEED_WHOLE`` (whole experts, the paper's greedy) or ``SEED_STATIC`` (first replica).
    chains : bool
        Stage 2 and the chain moves of stage 3.
    chain_depth : int
        Longest augmenting path after the 2-step chains, or ``UNLIMITED``.
    local_search, partial, ensemble : bool
        Stage 3, its partial moves, stage 4.
    tau : float
        The ensemble's switching tolerance (Proposition 1).
    max_iter : int
        Accepted moves per stage, at most.
    fanout : int
        2-step chains: cheapest destination GPUs kept per first move (0: all).
    lp_vertex : bool
        Score the max-flow token-LP vertex (and allow the compute-regime shortcut).
    lp_even : bool
        Under full replication, score the even token-LP split (total/g per GPU).
    restarts : bool
        Under full replication, restart the local search from the wrap-around and
        apportionment seeds.
    chain_cap : int
        Bound on the 2-step chain search: first moves kept, and second moves per GPU.
    paper_pool : bool
        Stage 4: the paper preset's complete output joins the heuristic pool (:func:`solve`).
    compound : bool
        Stage 3 with partial moves: when nothing else improves, try the whole-then-partial
        2-step chain (:func:`whole_partial_chain`).
    """

    seed: int
    chains: bool
    chain_depth: int
    local_search: bool
    partial: bool
    ensemble: bool
    tau: float
    max_iter: int
    fanout: int
    lp_vertex: bool
    lp_even: bool
    restarts: bool
    chain_cap: int
    paper_pool: bool
    compound: bool


class Stages(NamedTuple):
    """What a solve did: the makespan after each stage (NaN where the stage did not run) and
    which exact shortcut it took."""

    seed: float
    chains: float
    local_search: float
    ensemble: float
    shortcut: bool  # the token-LP vertex attained the lower bound after stage 2: returned at once
    pruned: bool    # the lower bound ruled out a switch: the ensemble's candidates were not built


class Problem(NamedTuple):
    """One instance as the solver's stages see it, built once per solve (:func:`.solver.solve`).

    Fields
    ------
    counts : int64[E]
    pairs : Pairs
    n_gpus : int
    n_slots : int
        ``R``, replica slots per expert.
    lower_bound : float
        No dispatch is below it (:func:`.bounds.lower_bound`); a stage stops there.
    full : bool
        Every live expert has a replica on every GPU.
    """

    counts: np.ndarray
    pairs: Pairs
    n_gpus: int
    n_slots: int
    lower_bound: float
    full: bool


class EvenSplit(NamedTuple):
    """The even token-LP split a caller computed (restricted replication: a QP), on the pairs.

    Fields
    ------
    shares : float64[P]
        Zeros when none was given.
    given : bool
    """

    shares: np.ndarray
    given: bool


class VertexCache(NamedTuple):
    """The token-LP vertex of one solve, built on first use (:func:`.ensemble.build_vertex`) and
    shared by the presets the solve runs (it depends on the instance only); updated in place.

    Fields
    ------
    shares : float64[P]
    ready : bool[1]
        ``ready[0]``: ``shares`` holds the vertex.
    makespan : float64[1]
        Its makespan (Eq. 3) once ready.
    """

    shares: np.ndarray
    ready: np.ndarray
    makespan: np.ndarray


class Candidate(NamedTuple):
    """A dispatch the ensemble compares: ``shares : float64[P]``, its ``makespan`` (Eq. 3) and
    ``chosen``, the index in :data:`CHOSEN` of the stage or candidate that produced it."""

    shares: np.ndarray
    makespan: float
    chosen: int


class Heuristic(NamedTuple):
    """One preset's output before the ensemble (:func:`.heuristic.heuristic`).

    Fields
    ------
    best : Candidate
        The heuristic output A_H of Proposition 1; with ``stages.shortcut``, the token-LP
        candidate that attained the lower bound after stage 2.
    stages : Stages
        ``ensemble`` NaN, ``pruned`` False.
    checked : bool
        The compute-regime check built a token-LP candidate: the ensemble then scores the
        candidates whatever the lower bound.
    """

    best: Candidate
    stages: Stages
    checked: bool


class SingleMoves(NamedTuple):
    """The single moves off the bottleneck the local search just evaluated (``M`` of them): move
    pair ``src[m]`` to pair ``dst[m]`` for a largest touched-GPU time of ``value[m]``.

    Fields
    ------
    src, dst : int64[M]
    value : float64[M]
    """

    src: np.ndarray
    dst: np.ndarray
    value: np.ndarray
