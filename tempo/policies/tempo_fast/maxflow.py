"""The token LP (Lemma 1) solved exactly: Dinkelbach iterations over Dinic max-flow cuts, in int64."""
from __future__ import annotations

import numpy as np

from .jit import njit


@njit(cache=True)
def _maxflow(n, head, nxt_start, to, cap, s, t, flow, level, it, stack_v, stack_e):
    """Dinic max-flow from ``s`` to ``t`` on a residual graph of ``n`` nodes; edges are paired
    ``(e, e ^ 1)`` and ``head[nxt_start[v]:nxt_start[v+1]]`` are the edges out of ``v``.

    Parameters:
        to, cap, flow: int64[2m], edge targets, capacities and flows (flow updated in place)
        level, it: int64[n]; stack_v, stack_e: int64[n + 1]: work arrays; after the last, failed
            BFS, level >= 0 marks the source side of a minimum cut

    Returns:
        int, the flow's value
    """
    total = 0
    q = np.empty(n, np.int64)
    while True:
        level[:] = -1
        level[s] = 0
        qh, qt = 0, 1
        q[0] = s
        while qh < qt:
            v = q[qh]
            qh += 1
            for e in range(nxt_start[v], nxt_start[v + 1]):
                ed = head[e]
                w = to[ed]
                if level[w] < 0 and cap[ed] - flow[ed] > 0:
                    level[w] = level[v] + 1
                    q[qt] = w
                    qt += 1
        if level[t] < 0:
            return total
        for v in range(n):
            it[v] = nxt_start[v]
        # repeated DFS with current-arc pointers
        while True:
            depth = 0
            stack_v[0] = s
            found = False
            while True:
                v = stack_v[depth]
                if v == t:
                    found = True
                    break
                advanced = False
                while it[v] < nxt_start[v + 1]:
                    ed = head[it[v]]
                    w = to[ed]
                    if level[w] == level[v] + 1 and cap[ed] - flow[ed] > 0:
                        stack_e[depth] = ed
                        depth += 1
                        stack_v[depth] = w
                        advanced = True
                        break
                    it[v] += 1
                if not advanced:
                    if depth == 0:
                        break
                    level[v] = -1  # dead end
                    depth -= 1
                    it[stack_v[depth]] += 1
            if not found:
                break
            push = cap[stack_e[0]] - flow[stack_e[0]]
            for d in range(1, depth):
                push = min(push, cap[stack_e[d]] - flow[stack_e[d]])
            for d in range(depth):
                ed = stack_e[d]
                flow[ed] += push
                flow[ed ^ 1] -= push
            total += push


@njit(cache=True)
def token_lp(counts, pairs, g, x):
    """Exact min-max tokens per GPU (Lemma 1) and an optimal max-flow vertex.

    Parameters:
        counts: int64[E]; pairs: Pairs; g: int
        x: float64[P], output: the vertex, on the first pair of each expert-GPU edge

    Returns:
        (W, k): the optimum is W / k tokens on the busiest GPU; (-1, 0) when the iteration made
        no progress (a numerical guard)
    """
    # The optimum is the densest GPU set's W/k (Hall's condition): from the larger of total/g
    # and each expert over its distinct GPUs, route every token with GPU capacity W/k
    # (capacities scaled by k); when that fails, the min cut names a denser set.
    pe, pgpu, ptr, first = pairs.pe, pairs.pgpu, pairs.ptr, pairs.first
    E = counts.size
    live = np.full(E, -1, np.int64)
    L = 0
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            live[e] = L
            L += 1
    x[:] = 0.0
    if L == 0:
        return 0, 1
    npair = 0
    for q in range(first.size):
        if first[q]:
            npair += 1
    pq = np.empty(npair, np.int64)
    k_ = 0
    for q in range(first.size):
        if first[q]:
            pq[k_] = q
            k_ += 1
    n = L + g + 2
    s, t = 0, L + g + 1
    m = L + npair + g  # forward edges
    to = np.empty(2 * m, np.int64)
    frm = np.empty(2 * m, np.int64)
    ed = 0
    for e in range(E):
        if live[e] >= 0:
            frm[ed], to[ed] = s, 1 + live[e]
            frm[ed + 1], to[ed + 1] = 1 + live[e], s
            ed += 2
    for r in range(npair):
        q = pq[r]
        frm[ed], to[ed] = 1 + live[pe[q]], 1 + L + pgpu[q]
        frm[ed + 1], to[ed + 1] = 1 + L + pgpu[q], 1 + live[pe[q]]
        ed += 2
    for h in range(g):
        frm[ed], to[ed] = 1 + L + h, t
        frm[ed + 1], to[ed + 1] = t, 1 + L + h
        ed += 2
    # CSR over edge ids by source node
    nxt_start = np.zeros(n + 1, np.int64)
    for e2 in range(2 * m):
        nxt_start[frm[e2] + 1] += 1
    for v in range(n):
        nxt_start[v + 1] += nxt_start[v]
    fill = nxt_start[:-1].copy()
    head = np.empty(2 * m, np.int64)
    for e2 in range(2 * m):
        head[fill[frm[e2]]] = e2
        fill[frm[e2]] += 1
    nl = np.empty(L, np.int64)
    W = 0
    deg = np.zeros(L, np.int64)
    for e in range(E):
        if live[e] >= 0:
            nl[live[e]] = counts[e]
            W += counts[e]
    for r in range(npair):
        deg[live[pe[pq[r]]]] += 1
    total = W
    k = g
    # start from the larger of total/g and each expert over its distinct GPUs
    be = 0
    for l in range(L):
        if nl[l] * deg[be] > nl[be] * deg[l]:
            be = l
    if nl[be] * k > W * deg[be]:
        W, k = nl[be], deg[be]
    cap = np.zeros(2 * m, np.int64)
    flow = np.zeros(2 * m, np.int64)
    level = np.empty(n, np.int64)
    it = np.empty(n, np.int64)
    stack_v = np.empty(n + 1, np.int64)
    stack_e = np.empty(n + 1, np.int64)
    for _ in range(g + 2):
        ed = 0
        for l in range(L):
            cap[ed] = nl[l] * k
            ed += 2
        for r in range(npair):
            cap[ed] = nl[live[pe[pq[r]]]] * k
            ed += 2
        for h in range(g):
            cap[ed] = W
            ed += 2
        flow[:] = 0
        val = _maxflow(n, head, nxt_start, to, cap, s, t, flow, level, it, stack_v, stack_e)
        if val >= total * k:
            for r in range(npair):
                x[pq[r]] = flow[2 * (L + r)] / k
            return W, k
        # min cut: nodes the last BFS reached (level >= 0 after the final failed BFS)
        Wn = 0
        kn = 0
        for l in range(L):
            if level[1 + l] >= 0:
                Wn += nl[l]
        for h in range(g):
            if level[1 + L + h] >= 0:
                kn += 1
        if kn == 0 or Wn * k <= W * kn:
            return -1, 0
        W, k = Wn, kn
    return -1, 0
