"""Stages 2 and 3 of Section 4.2: the bottleneck local search."""
from __future__ import annotations

import numpy as np

from .augment import augmenting_path, exchange_cycle
from .chains import two_step_chain, whole_partial_chain
from .jit import njit
from .moves import apply_move, evaluate_move
from .pricing import features, gpu_times
from .records import EPS, REL, UNLIMITED
from .slots import apply_group_move, evaluate_group_move, regroup, regroup_expert


@njit(cache=True)
def improve(p, x, pairs, L, lb, whole_only, chains, o, budget, split):
    """Bottleneck local search (Section 4.2, stages 2 and 3): the best single move off the
    bottleneck (with ``split``, an expert's tokens on a GPU where it holds two or more slots move
    as one group, each group priced in its cheapest split, Eq. 2); when none improves, a 2-step
    chain, an augmenting path or an alternating cycle through the bottleneck (``o.chain_depth``
    unlimited or > 2), then (``o.compound``, Eq. 4,
    partial moves) the whole-then-partial chain.

    Parameters:
        p, x, pairs, L: Pricer; shares float64[P]; Pairs; Loads (x and L updated in place)
        lb: float, the lower bound: the search stops there
        whole_only: bool, whole-expert moves only (stage 2, and stage 3 without partial moves)
        chains: bool; o: Options
        budget: int64[1], the move evaluations left (updated; the search stops when it is spent)
        split: bool, put the duplicate-slot groups in their cheapest split (:func:`.slots.regroup`)
            first and after every accepted move

    Returns:
        int, accepted moves (at most o.max_iter)
    """
    pe, pgpu, ptr, gptr, gpairs = pairs.pe, pairs.pgpu, pairs.ptr, pairs.gptr, pairs.gpairs
    depth = o.chain_depth
    t = np.empty(L.G.size)
    P = x.size
    si = np.empty(max(P * 4, 16), np.int64)
    sj = np.empty(max(P * 4, 16), np.int64)
    sv = np.empty(max(P * 4, 16))
    moves = 0
    if split and regroup(p, x, pairs):
        features(p, x, pgpu, L)
    for _ in range(o.max_iter):
        if budget[0] <= 0:
            break
        bottleneck = gpu_times(p, L, t)
        tb = t[bottleneck]
        if tb <= lb * (1 + 1e-12):  # provably optimal: nothing to gain
            break
        # accept a move only when every GPU it touches ends below the bottleneck's time: each
        # accepted move lowers the makespan or the number of GPUs attaining it
        thresh = tb - REL * max(1.0, tb)
        M = 0
        bval = np.inf
        bm = -1
        bdel = 0.0
        anyA = False
        bgrp = False
        for r in range(gptr[bottleneck], gptr[bottleneck + 1]):
            i = gpairs[r]
            if not x[i] > EPS:
                continue
            anyA = True
            e = pe[i]
            ks = 1
            if split:  # duplicate slots: one move per (expert, GPU) group, priced as a group
                ks = _slots_on(pairs, e, bottleneck)
                if ks > 1 and _first_active(x, pairs, e, bottleneck) != i:
                    continue
            for j in range(ptr[e], ptr[e + 1]):
                if pgpu[j] == bottleneck:
                    continue
                grp = split and (ks > 1 or _slots_on(pairs, e, pgpu[j]) > 1)
                if grp:
                    if not pairs.first[j]:
                        continue
                    v, d = evaluate_group_move(p, x, L, pairs, bottleneck, i, j, whole_only)
                else:
                    v, d = evaluate_move(p, x, L, pgpu, bottleneck, i, j, whole_only, -1, -1)
                if M == si.size:
                    si2 = np.empty(2 * M, np.int64)
                    sj2 = np.empty(2 * M, np.int64)
                    sv2 = np.empty(2 * M)
                    si2[:M], sj2[:M], sv2[:M] = si[:M], sj[:M], sv[:M]
                    si, sj, sv = si2, sj2, sv2
                si[M], sj[M], sv[M] = i, j, v
                if v < bval:
                    bval, bm, bdel, bgrp = v, M, d, grp
                M += 1
        budget[0] -= M
        if not anyA or M == 0:
            break
        if bval < thresh:
            if bgrp:
                apply_group_move(p, x, pairs, L, si[bm], sj[bm], bdel)
            else:
                apply_move(p, x, pgpu, L, si[bm], sj[bm], bdel, -1, -1)
                # the move changed its expert's groups only: the others are in their split already
                if split and regroup_expert(p, x, pairs, pe[si[bm]]):
                    features(p, x, pgpu, L)
            moves += 1
            continue
        if not chains:
            break
        found, spent = two_step_chain(p, x, pairs, L, bottleneck, thresh, t, si, sj, sv, M, whole_only, o)
        budget[0] -= spent
        if not found and (depth == UNLIMITED or depth > 2):
            found, spent = augmenting_path(p, x, pairs, L, bottleneck, thresh, depth)
            budget[0] -= spent
            if not found:
                found, spent = exchange_cycle(p, x, pairs, L, bottleneck, thresh, depth)
                budget[0] -= spent
        if not found and o.compound and p.has_traffic and not whole_only:
            found, spent = whole_partial_chain(p, x, pairs, L, bottleneck, thresh, t)
            budget[0] -= spent
        if not found:
            break
        if split and regroup(p, x, pairs):
            features(p, x, pgpu, L)
        moves += 1
    return moves


@njit(cache=True)
def _slots_on(pairs, e, h):
    """Expert ``e``'s slots on GPU ``h``."""
    k = 0
    for q in range(pairs.ptr[e], pairs.ptr[e + 1]):
        if pairs.pgpu[q] == h:
            k += 1
    return k


@njit(cache=True)
def _first_active(x, pairs, e, h):
    """Expert ``e``'s first pair on GPU ``h`` holding tokens (-1: none)."""
    for q in range(pairs.ptr[e], pairs.ptr[e + 1]):
        if pairs.pgpu[q] == h and x[q] > EPS:
            return q
    return -1
