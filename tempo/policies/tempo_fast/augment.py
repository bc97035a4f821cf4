"""Stage 2 of Section 4.2 beyond 2 steps: augmenting paths of whole-expert moves (Lemma 2)."""
from __future__ import annotations

import numpy as np

from .jit import njit
from .pricing import features, gpu_time, tiles
from .records import EPS


@njit(cache=True)
def _is_ancestor(w, u, bottleneck, par_u):
    """Whether GPU ``w`` lies on the path from the bottleneck to ``u`` (``par_u : int64[g]``: each
    GPU's parent on its path).
    """
    v = u
    while v != bottleneck:
        if v == w:
            return True
        v = par_u[v]
    return False


@njit(cache=True)
def _push(fv, fd, fl, nf, w, d, n_lab):
    """Append (GPU ``w``, depth ``d``, label ``n_lab``) to the frontier ``fv : int64[F]``,
    ``fd : int64[F]``, ``fl : float64[F]`` of which ``nf`` are used, doubling the arrays when full;
    returns ``(fv, fd, fl, nf)``.
    """
    if nf == fv.size:
        fv2 = np.empty(2 * nf, np.int64)
        fd2 = np.empty(2 * nf, np.int64)
        fl2 = np.empty(2 * nf)
        fv2[:nf], fd2[:nf], fl2[:nf] = fv[:nf], fd[:nf], fl[:nf]
        fv, fd, fl = fv2, fd2, fl2
    fv[nf], fd[nf], fl[nf] = w, d, n_lab
    return fv, fd, fl, nf + 1


@njit(cache=True)
def augmenting_path(p, x, pairs, L, bottleneck, thresh, depth):
    """A breadth-first augmenting path of whole-expert moves ``bottleneck -> v1 -> ... -> vk``
    (Lemma 2's semi-matching augmenting path, priced with the full model), applied when every GPU
    on it ends below ``thresh``.

    Parameters:
        p, x, pairs, L: Pricer; shares float64[P]; Pairs; Loads (x and L updated in place)
        bottleneck: int, the GPU of largest time
        thresh: float
        depth: int, the longest path, or UNLIMITED

    Returns:
        (bool, int): whether a path was applied, and the GPUs taken off the frontier
    """
    # Each intermediate GPU receives one expert and sends another; the last absorbs an
    # activation.  Label-correcting: a GPU is re-entered when a path brings it fewer tokens.
    pe, pgpu, ptr, gptr, gpairs = pairs.pe, pairs.pgpu, pairs.ptr, pairs.gptr, pairs.gpairs
    G, N, T = L
    g = G.size
    has = np.zeros(g, np.bool_)
    lab = np.zeros(g)
    par_u = np.full(g, -1, np.int64)
    par_p = np.full(g, -1, np.int64)
    par_q = np.full(g, -1, np.int64)
    has[bottleneck] = True
    lab[bottleneck] = -1.0
    cap_f = 64 + 4 * x.size
    fv = np.empty(cap_f, np.int64)
    fd = np.empty(cap_f, np.int64)
    fl = np.empty(cap_f)
    nf = 0
    # pairs on bottleneck with tokens, by their share (stable)
    na = 0
    for r in range(gptr[bottleneck], gptr[bottleneck + 1]):
        if x[gpairs[r]] > EPS:
            na += 1
    act = np.empty(na, np.int64)
    k = 0
    for r in range(gptr[bottleneck], gptr[bottleneck + 1]):
        q = gpairs[r]
        if x[q] > EPS:
            act[k] = q
            k += 1
    act = act[np.argsort(x[act], kind="mergesort")]
    for pp in act:
        xp = x[pp]
        if gpu_time(p, G[bottleneck] - 1, N[bottleneck] - xp, T[bottleneck] - tiles(p, xp)) >= thresh:
            continue
        e = pe[pp]
        for q in range(ptr[e], ptr[e + 1]):
            w = pgpu[q]
            if w == bottleneck or (has[w] and lab[w] <= xp):
                continue
            # u == bottleneck: no ancestor check
            has[w] = True
            lab[w] = xp
            par_u[w], par_p[w], par_q[w] = bottleneck, pp, q
            fv, fd, fl, nf = _push(fv, fd, fl, nf, w, 1, xp)
    head = 0
    budget = 50 * g + nf
    while head < nf and head < budget:
        v, d, n_lab = fv[head], fd[head], fl[head]
        head += 1
        if not (has[v] and lab[v] == n_lab):  # superseded by a better entry
            continue
        p_in, q_in = par_p[v], par_q[v]
        n_in = x[p_in]
        add = 1.0 if x[q_in] <= EPS else 0.0
        dT = tiles(p, x[q_in] + n_in) - tiles(p, x[q_in])
        if gpu_time(p, G[v] + add, N[v] + n_in, T[v] + dT) < thresh:
            node = v  # apply the path backwards from v
            while node != bottleneck:
                u, pp, q = par_u[node], par_p[node], par_q[node]
                x[q] += x[pp]
                x[pp] = 0.0
                node = u
            features(p, x, pgpu, L)
            return True, head
        if depth >= 0 and d >= depth:
            continue
        e_in = pe[p_in]
        for r in range(gptr[v], gptr[v + 1]):
            pp = gpairs[r]
            if not x[pp] > EPS:
                continue
            e = pe[pp]
            if e == e_in:
                continue
            xp = x[pp]
            if gpu_time(p, G[v] + add - 1, N[v] + n_in - xp, T[v] + dT - tiles(p, xp)) >= thresh:
                continue
            for q in range(ptr[e], ptr[e + 1]):
                w = pgpu[q]
                if w == v:
                    continue
                if w == bottleneck or (has[w] and lab[w] <= xp):
                    continue
                if has[w] and v != bottleneck and _is_ancestor(w, v, bottleneck, par_u):
                    continue
                has[w] = True
                lab[w] = xp
                par_u[w], par_p[w], par_q[w] = v, pp, q
                fv, fd, fl, nf = _push(fv, fd, fl, nf, w, d + 1, xp)
    return False, head
