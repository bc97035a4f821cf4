"""Stage 2 of Section 4.2 beyond 2 steps: augmenting paths of whole-expert moves (Lemma 2), and
the alternating cycles through the bottleneck where no path can end."""
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


#: GPUs per GPU of the instance the alternating-cycle searches of one call may take off their
#: frontiers, all roots together (an augmenting path search takes 50): the search runs each time
#: the local search stalls, on the serving path too
CYCLE_BUDGET = 10


@njit(cache=True)
def _active_on(x, pairs, h):
    """GPU ``h``'s pairs holding tokens, in pair order: int64[k]."""
    gptr, gpairs = pairs.gptr, pairs.gpairs
    na = 0
    for r in range(gptr[h], gptr[h + 1]):
        if x[gpairs[r]] > EPS:
            na += 1
    act = np.empty(na, np.int64)
    k = 0
    for r in range(gptr[h], gptr[h + 1]):
        q = gpairs[r]
        if x[q] > EPS:
            act[k] = q
            k += 1
    return act


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
    act = _active_on(x, pairs, bottleneck)
    act = act[np.argsort(x[act], kind="mergesort")]  # the smallest share first (stable)
    return _search(p, x, pairs, L, bottleneck, thresh, depth, act, False, _work_arrays(L.G.size, x.size),
                   50 * L.G.size)


@njit(cache=True)
def exchange_cycle(p, x, pairs, L, bottleneck, thresh, depth):
    """An alternating cycle of whole-expert moves ``bottleneck -> v1 -> ... -> vk -> bottleneck``:
    the bottleneck sends an expert (the root) and receives another back from vk, every GPU on the
    cycle keeps its activation count but for the tokens and tiles it trades; applied when every
    GPU on it ends below ``thresh``.  Only roots whose bottleneck would end below ``thresh``
    with a new activation and tile in their place are searched (the expert brought back may be
    one the bottleneck holds already, but such cycles are not sought).  Searched from each
    root in turn, the largest share first, as :func:`augmenting_path` searches, taking at most
    ``CYCLE_BUDGET * g`` GPUs off their frontiers in all.

    Parameters:
        p, x, pairs, L: Pricer; shares float64[P]; Pairs; Loads (x and L updated in place)
        bottleneck: int; thresh: float
        depth: int, the most moves before the one back to the bottleneck, or UNLIMITED

    Returns:
        (bool, int): whether a cycle was applied, and the GPUs taken off the frontiers
    """
    # Where every GPU sits at its activation floor no augmenting path can end (each end adds
    # an activation), yet trading a heavy expert off the bottleneck for a light one around a
    # ring of GPUs lowers the makespan: Lemma 2's alternating cycles, priced with the model.
    # One search per root: the labels of a search from every root at once would keep the
    # lightest root's paths, while a cycle needs the bottleneck to lose more than it gets back.
    G, N, T = L
    gptr, gpairs = pairs.gptr, pairs.gpairs
    # the roots worth a search (checked again in _search), before anything is allocated: on the
    # serving path the bottleneck is mostly activation-bound and none is
    na = 0
    for r in range(gptr[bottleneck], gptr[bottleneck + 1]):
        q = gpairs[r]
        if x[q] > EPS and _cycle_root(p, G[bottleneck], N[bottleneck], T[bottleneck], x[q], thresh):
            na += 1
    if na == 0:
        return False, 0
    act = np.empty(na, np.int64)
    k = 0
    for r in range(gptr[bottleneck], gptr[bottleneck + 1]):
        q = gpairs[r]
        if x[q] > EPS and _cycle_root(p, G[bottleneck], N[bottleneck], T[bottleneck], x[q], thresh):
            act[k] = q
            k += 1
    act = act[np.argsort(-x[act], kind="mergesort")]  # the largest share first (stable)
    tree = _work_arrays(G.size, x.size)
    spent = 0
    left = CYCLE_BUDGET * G.size  # the roots' searches share it
    for k in range(act.size):
        if left <= 0:
            break
        found, n = _search(p, x, pairs, L, bottleneck, thresh, depth, act[k:k + 1], True, tree, left)
        spent += n
        left -= n
        if found:
            return True, spent
    return False, spent


@njit(cache=True)
def _cycle_root(p, Gb, Nb, Tb, xr, thresh):
    """Whether a share of ``xr`` tokens may root a cycle off a bottleneck of features ``Gb, Nb,
    Tb``: it ends below ``thresh`` without them and with a new activation and tile in their place
    (what a cycle brings back costs that at least; an activation-bound bottleneck never gains)."""
    Tr = tiles(p, xr)
    return gpu_time(p, Gb - 1, Nb - xr, Tb - Tr) < thresh and gpu_time(p, Gb, Nb - xr, Tb - Tr + 1) < thresh


@njit(cache=True)
def _work_arrays(g, P):
    """The label search's work arrays for ``g`` GPUs and ``P`` pairs: ``(has, lab, par_u, par_p,
    par_q, fv, fd, fl)``: whether each GPU is labelled, its label (the tokens its path brings),
    its parent GPU, the pair it receives from and the pair it arrives on; the frontier."""
    cap_f = 64 + 4 * P
    return (np.zeros(g, np.bool_), np.zeros(g), np.full(g, -1, np.int64), np.full(g, -1, np.int64),
            np.full(g, -1, np.int64), np.empty(cap_f, np.int64), np.empty(cap_f, np.int64), np.empty(cap_f))


@njit(cache=True)
def _search(p, x, pairs, L, bottleneck, thresh, depth, roots, cycle, tree, limit):
    """The label-correcting breadth-first search of :func:`augmenting_path` (``cycle`` False: a
    path ends on a GPU that absorbs the expert it receives) and :func:`exchange_cycle` (True: a
    path ends by sending an expert back to the bottleneck), from the bottleneck's pairs ``roots``
    (int64[k], in that order), taking at most ``limit`` GPUs off the frontier beyond those the
    roots put on it.  Applies what it finds; returns ``(found, GPUs taken off the frontier)``.
    """
    pe, pgpu, ptr, gptr, gpairs = pairs.pe, pairs.pgpu, pairs.ptr, pairs.gptr, pairs.gpairs
    G, N, T = L
    has, lab, par_u, par_p, par_q, fv, fd, fl = tree
    has[:] = False
    has[bottleneck] = True
    lab[bottleneck] = -1.0
    nf = 0
    for pp in roots:
        xp = x[pp]
        if gpu_time(p, G[bottleneck] - 1, N[bottleneck] - xp, T[bottleneck] - tiles(p, xp)) >= thresh:
            continue
        if cycle and not _cycle_root(p, G[bottleneck], N[bottleneck], T[bottleneck], xp, thresh):
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
    er = pe[roots[0]] if cycle else -1  # the expert a cycle takes off the bottleneck
    head = 0
    budget = limit + nf
    while head < nf and head < budget:
        v, d, n_lab = fv[head], fd[head], fl[head]
        head += 1
        if not (has[v] and lab[v] == n_lab):  # superseded by a better entry
            continue
        p_in, q_in = par_p[v], par_q[v]
        n_in = x[p_in]
        add = 1.0 if x[q_in] <= EPS else 0.0
        dT = tiles(p, x[q_in] + n_in) - tiles(p, x[q_in])
        if not cycle and gpu_time(p, G[v] + add, N[v] + n_in, T[v] + dT) < thresh:
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
            if e == e_in or e == er:
                continue
            xp = x[pp]
            if gpu_time(p, G[v] + add - 1, N[v] + n_in - xp, T[v] + dT - tiles(p, xp)) >= thresh:
                continue
            for q in range(ptr[e], ptr[e + 1]):
                w = pgpu[q]
                if w == v:
                    continue
                if w == bottleneck:
                    if cycle and _close_cycle(p, x, pairs, L, bottleneck, thresh, v, pp, q, roots[0], par_u, par_p,
                                              par_q):
                        return True, head
                    continue
                if has[w] and lab[w] <= xp:
                    continue
                if has[w] and v != bottleneck and _is_ancestor(w, v, bottleneck, par_u):
                    continue
                has[w] = True
                lab[w] = xp
                par_u[w], par_p[w], par_q[w] = v, pp, q
                fv, fd, fl, nf = _push(fv, fd, fl, nf, w, d + 1, xp)
    return False, head


@njit(cache=True)
def _close_cycle(p, x, pairs, L, bottleneck, thresh, v, pp, q, root, par_u, par_p, par_q):
    """Close the path from the bottleneck to GPU ``v`` (``par_u, par_p, par_q``: each GPU's parent,
    the pair it receives from and the pair it arrives on; ``root``: the pair it takes off the
    bottleneck) by moving pair ``pp`` (on v) to pair ``q`` (on the bottleneck).  Applied, and True
    returned, when the bottleneck and every GPU on the path then end below ``thresh`` (re-priced:
    a label corrected after its GPU's children were checked may have changed what it receives).
    """
    G, N, T = L
    xr, xp, xq = x[root], x[pp], x[q]
    add = 1.0 if xq <= EPS else 0.0
    tb = gpu_time(p, G[bottleneck] - 1.0 + add, N[bottleneck] - xr + xp,
                  T[bottleneck] - tiles(p, xr) - tiles(p, xq) + tiles(p, xq + xp))
    if not tb < thresh:
        return False
    # apply, keeping the old shares of the pairs it touches, then re-price the cycle's GPUs
    n = 1
    node = v
    while node != bottleneck:
        n += 1
        node = par_u[node]
    touched = np.empty(2 * n, np.int64)
    old = np.empty(2 * n)
    k = 0
    node = v
    while node != bottleneck:
        a, b = par_p[node], par_q[node]
        touched[k], old[k], touched[k + 1], old[k + 1] = a, x[a], b, x[b]
        k += 2
        node = par_u[node]
    touched[k], old[k], touched[k + 1], old[k + 1] = pp, x[pp], q, x[q]
    node = v
    while node != bottleneck:
        a, b = par_p[node], par_q[node]
        x[b] += x[a]
        x[a] = 0.0
        node = par_u[node]
    x[q] += x[pp]
    x[pp] = 0.0
    features(p, x, pairs.pgpu, L)
    ok = gpu_time(p, G[bottleneck], N[bottleneck], T[bottleneck]) < thresh
    node = v
    while ok and node != bottleneck:
        ok = gpu_time(p, G[node], N[node], T[node]) < thresh
        node = par_u[node]
    if not ok:
        for i in range(2 * n - 1, -1, -1):
            x[touched[i]] = old[i]
        features(p, x, pairs.pgpu, L)
    return ok
