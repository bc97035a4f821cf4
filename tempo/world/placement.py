"""EPLB placement (DeepSeek EPLB, github deepseek-ai/EPLB ``eplb.py``), re-implemented in numpy.

Equal loads: ``eplb.py`` orders the items it packs with ``torch.sort``, which is not stable (EPLB
issue #8), so items of equal load come out in whatever order the sort returns.  This port orders
them by a seeded random permutation (``ties="unordered"``, the default; the ``eplb_ties`` reading
of ``data/paper/readings.yaml``) so the result is deterministic but, like the unstable sort's,
not index order.  ``ties="index_order"`` (a stable sort) is the alternative: on
uniform loads it puts both replicas of every replicated expert on one GPU (256 experts on 32
GPUs at 1.25x: 64 of 64, where ``eplb.py`` under torch 2.13 puts 1 of 64)."""
from __future__ import annotations

import numpy as np


def replicate_experts(weight: np.ndarray, n_slots: int):
    """Give every expert one replica, then each extra slot to ``argmax(weight / count)``
    (ties to the lowest index).  Returns (phy2log int64[P], rank int64[P], logcnt int64[E])."""
    weight = np.asarray(weight, dtype=np.float64)
    E = weight.size
    if n_slots < E:
        raise ValueError(f"n_slots={n_slots} is fewer than the {E} experts")
    phy2log = np.concatenate([np.arange(E), np.zeros(n_slots - E, np.int64)])
    rank = np.zeros(n_slots, np.int64)
    logcnt = np.ones(E, np.int64)
    for i in range(E, n_slots):
        e = int(np.argmax(weight / logcnt))
        phy2log[i] = e
        rank[i] = logcnt[e]
        logcnt[e] += 1
    return phy2log, rank, logcnt


#: How :func:`balanced_packing` orders items of equal load (the ``eplb_ties`` reading).
TIES = ("unordered", "index_order")


def _check_ties(ties: str) -> None:
    if ties not in TIES:
        raise ValueError(f"ties must be one of {', '.join(TIES)}, got {ties!r}")


def packing_order(weight: np.ndarray, ties: str = "unordered", seed: int = 0) -> np.ndarray:
    """The order EPLB's greedy packing visits items in: heaviest first; items of equal load in
    a random order drawn from ``seed`` (``ties="unordered"``) or in index order
    (``"index_order"``, a stable sort)."""
    _check_ties(ties)
    weight = np.asarray(weight, dtype=np.float64)
    if ties == "index_order":
        return np.argsort(-weight, kind="stable")
    tiebreak = np.random.default_rng(seed).permutation(weight.size)
    return np.lexsort((tiebreak, -weight))


def balanced_packing(weight: np.ndarray, n_packs: int, ties: str = "unordered", seed: int = 0):
    """Pack ``n`` items into ``n_packs`` packs of exactly ``n / n_packs`` items: heaviest
    first (equal loads in :func:`packing_order`'s order), each to the lightest pack with room
    (ties to the lowest pack).  Returns (pack int64[n], rank_in_pack int64[n])."""
    _check_ties(ties)
    weight = np.asarray(weight, dtype=np.float64)
    n = weight.size
    if n % n_packs:
        raise ValueError(f"{n} items do not split evenly into {n_packs} packs")
    per = n // n_packs
    pack = np.full(n, -1, np.int64)
    rank = np.full(n, -1, np.int64)
    if per == 1:
        return np.arange(n, dtype=np.int64), np.zeros(n, np.int64)
    load = [0.0] * n_packs
    cnt = [0] * n_packs
    for i in packing_order(weight, ties, seed).tolist():
        best = min((p for p in range(n_packs) if cnt[p] < per), key=lambda p: (load[p], p))
        pack[i] = best
        rank[i] = cnt[best]
        load[best] += weight[i]
        cnt[best] += 1
    return pack, rank


def rebalance_experts(weight: np.ndarray, n_slots: int, n_groups: int = 1, n_nodes: int = 1,
                      n_gpus: int = 1, ties: str = "unordered", seed: int = 0):
    """EPLB's ``rebalance_experts_hierarchical`` for one or more layers.

    Parameters
    ----------
    weight : float[L, E] or float[E]
        Expected load of each logical expert.
    n_slots : int
        Physical expert slots in total (P), a multiple of ``n_gpus``.
    n_groups, n_nodes, n_gpus : int
        Expert groups, nodes and GPUs; hierarchical when ``n_groups % n_nodes == 0``,
        else the global policy (one group, one node).
    ties, seed : str, int
        How the packings order equal loads (:func:`packing_order`; the ``eplb_ties`` reading).

    Returns
    -------
    phy2log : int64[L, P]   logical expert of every physical slot (GPU-major)
    log2phy : int64[L, E, maxcount]   physical slots of every expert, -1 padded
    logcnt : int64[L, E]    replica counts
    """
    w = np.atleast_2d(np.asarray(weight, dtype=np.float64))
    L, E = w.shape
    if n_slots % n_gpus:
        raise ValueError(f"n_slots={n_slots} must be a multiple of n_gpus={n_gpus}")
    if n_gpus % n_nodes:
        raise ValueError(f"n_gpus={n_gpus} must be a multiple of n_nodes={n_nodes}")
    if n_groups % n_nodes or E % n_groups:
        n_groups, n_nodes = 1, 1
    group_size = E // n_groups
    groups_per_node = n_groups // n_nodes
    slots_per_node = n_slots // n_nodes
    gpus_per_node = n_gpus // n_nodes
    if slots_per_node < group_size * groups_per_node:
        raise ValueError("fewer physical slots per node than logical experts per node")
    out = np.zeros((L, n_slots), np.int64)
    for layer in range(L):
        wl = w[layer]
        # 1) groups onto nodes
        gw = wl.reshape(n_groups, group_size).sum(axis=1)
        gpack, grank = balanced_packing(gw, n_nodes, ties, seed)
        log_of_mlog = np.zeros(E, np.int64)  # node-major logical order -> logical id
        for grp in range(n_groups):
            base = (gpack[grp] * groups_per_node + grank[grp]) * group_size
            log_of_mlog[base:base + group_size] = grp * group_size + np.arange(group_size)
        per_node_log = E // n_nodes
        for node in range(n_nodes):
            mlog = log_of_mlog[node * per_node_log:(node + 1) * per_node_log]
            # 2) replicate within the node
            p2l, _, cnt = replicate_experts(wl[mlog], slots_per_node)
            # 3) pack replicas onto the node's GPUs
            tok = wl[mlog][p2l] / cnt[p2l]
            pack, prank = balanced_packing(tok, gpus_per_node, ties, seed)
            per_gpu = slots_per_node // gpus_per_node
            phy = pack * per_gpu + prank
            node_slots = np.empty(slots_per_node, np.int64)
            node_slots[phy] = mlog[p2l]
            out[layer, node * slots_per_node:(node + 1) * slots_per_node] = node_slots
    log2phy, logcnt = logical_to_physical(out, E)
    return out, log2phy, logcnt


def logical_to_physical(phy2log: np.ndarray, n_logical: int):
    """Invert a physical-slot map: ``phy2log int[L, P]`` -> (``log2phy int64[L, E, R]``, the
    physical slots of every logical expert in ascending order, -1 padded; ``logcnt
    int64[L, E]``, replicas per expert)."""
    phy2log = np.atleast_2d(phy2log)
    L, P = phy2log.shape
    logcnt = np.stack([np.bincount(phy2log[l], minlength=n_logical) for l in range(L)])
    log2phy = np.full((L, n_logical, max(1, int(logcnt.max(initial=0)))), -1, np.int64)
    for l in range(L):
        order = np.argsort(phy2log[l], kind="stable")
        rank = np.arange(P) - np.repeat(np.cumsum(logcnt[l]) - logcnt[l], logcnt[l])
        log2phy[l, phy2log[l][order], rank] = order
    return log2phy, logcnt


def eplb_placement(weight: np.ndarray, n_gpus: int, replication: float = 1.25, ties: str = "unordered",
                   seed: int = 0) -> np.ndarray:
    """int64[P]: a one-layer EPLB placement (global policy) with about ``replication * E``
    slots, rounded up to a whole number of slots per GPU; ``ties``/``seed``: how equal loads are
    ordered (:func:`packing_order`)."""
    weight = np.asarray(weight, dtype=np.float64)
    E = weight.size
    per_gpu = int(np.ceil(replication * E / n_gpus - 1e-9))
    phy2log, _, _ = rebalance_experts(weight, per_gpu * n_gpus, 1, 1, n_gpus, ties, seed)
    return phy2log[0]


def drift_corrupt(weight: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Drift-K corruption (paper Section 5.12): the statistics of the ``k`` hottest experts
    are swapped with those of ``k`` random cold experts (drawn from the rest).  A placement
    built from the result is stale for the true traffic.  Works per layer for 2-d input."""
    w = np.array(weight, dtype=np.float64, copy=True)
    rng = np.random.default_rng(seed)
    rows = w.reshape(-1, w.shape[-1])
    E = rows.shape[1]
    if not 0 <= k <= E // 2:
        raise ValueError(f"k must lie in [0, E/2 = {E // 2}], got {k}")
    for row in rows:
        hot = np.argsort(-row, kind="stable")[:k]
        rest = np.setdiff1d(np.arange(E), hot)
        cold = rng.choice(rest, size=k, replace=False)
        row[hot], row[cold] = row[cold].copy(), row[hot].copy()
    return rows.reshape(w.shape)
