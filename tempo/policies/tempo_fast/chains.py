"""Stage 2 of Section 4.2: 2-step chains off the bottleneck, and the whole-then-partial chain (Eq. 4)."""
from __future__ import annotations

import numpy as np

from .jit import njit
from .moves import apply_move, evaluate_move, level_crossings, token_crossings
from .pricing import activation_time, gpu_time, tiles
from .records import EPS


@njit(cache=True)
def two_step_chain(p, x, pairs, L, bottleneck, thresh, t, si, sj, sv, M, whole_only, o):
    """The best 2-step chain off the bottleneck (Section 4.2, stage 2), applied when every GPU it
    touches ends below ``thresh``.  First moves ``i -> j`` (GPU h): the single moves just
    evaluated, at most ``o.chain_cap`` by value and ``o.fanout`` cheapest destinations per ``i``;
    second moves: a whole other expert off h, to the bottleneck or its cheapest other replica GPU.

    Parameters:
        p, x, pairs, L: Pricer; shares float64[P]; Pairs; Loads (x and L updated in place)
        bottleneck: int; thresh: float; t: float64[g], each GPU's current time
        si, sj: int64[>= M]; sv: float64[>= M]: the M single moves just evaluated, pair si[m] to
            pair sj[m] for a largest touched-GPU time sv[m] (arrays, not a record: this is the hot path)
        whole_only: bool; o: Options

    Returns:
        (bool, int): whether a chain was applied, and the moves evaluated
    """
    pe, pgpu, ptr = pairs.pe, pairs.pgpu, pairs.ptr
    fanout, cap = o.fanout, o.chain_cap
    g = t.size
    if M > cap:
        keep = np.argsort(sv[:M], kind="mergesort")[:cap]
        fi = si[keep]
        fj = sj[keep]
    else:
        fi = si[:M].copy()
        fj = sj[:M].copy()
    m = fi.size
    if fanout > 0 and m > fanout:
        # order by (i, t[h]) stably; keep the first `fanout` per i
        key_t = np.empty(m)
        for q in range(m):
            key_t[q] = t[pgpu[fj[q]]]
        o1 = np.argsort(key_t, kind="mergesort")
        fi, fj = fi[o1], fj[o1]
        o2 = np.argsort(fi, kind="mergesort")
        fi, fj = fi[o2], fj[o2]
        keepm = np.zeros(m, np.bool_)
        run = 0
        for q in range(m):
            if q > 0 and fi[q] == fi[q - 1]:
                run += 1
            else:
                run = 0
            keepm[q] = run < fanout
        fi, fj = fi[keepm], fj[keepm]
        m = fi.size
    inh = np.zeros(g, np.bool_)
    nh = 0
    for q in range(m):
        h = pgpu[fj[q]]
        if not inh[h]:
            inh[h] = True
            nh += 1
    nb = 0
    for q in range(x.size):
        if inh[pgpu[q]] and x[q] > EPS:
            nb += 1
    if nb == 0:
        return False, 0
    B = np.empty(nb, np.int64)
    k = 0
    for q in range(x.size):
        if inh[pgpu[q]] and x[q] > EPS:
            B[k] = q
            k += 1
    if nb > cap * nh:  # per GPU the `cap` smallest active shares
        xb = x[B]
        o1 = np.argsort(xb, kind="mergesort")
        B = B[o1]
        gbk = pgpu[B]
        o2 = np.argsort(gbk, kind="mergesort")
        B = B[o2]
        keepb = np.zeros(B.size, np.bool_)
        run = 0
        for q in range(B.size):
            if q > 0 and pgpu[B[q]] == pgpu[B[q - 1]]:
                run += 1
            else:
                run = 0
            keepb[q] = run < cap
        B = B[keepb]
    # second moves: to bottleneck (all), plus per source pair the cheapest other GPU
    n2 = 0
    for b_ in B:
        e = pe[b_]
        for q in range(ptr[e], ptr[e + 1]):
            if pgpu[q] != pgpu[b_]:
                n2 += 1
    if n2 == 0:
        return False, 0
    s_i2 = np.empty(2 * n2, np.int64)
    s_j2 = np.empty(2 * n2, np.int64)
    ns = 0
    for b_ in B:
        e = pe[b_]
        for q in range(ptr[e], ptr[e + 1]):
            if pgpu[q] != pgpu[b_] and pgpu[q] == bottleneck:
                s_i2[ns] = b_
                s_j2[ns] = q
                ns += 1
    Bs = np.sort(B)
    for b_ in Bs:
        e = pe[b_]
        bq = -1
        for q in range(ptr[e], ptr[e + 1]):
            if pgpu[q] != pgpu[b_]:
                if bq < 0 or t[pgpu[q]] < t[pgpu[bq]]:
                    bq = q
        if bq >= 0:
            s_i2[ns] = b_
            s_j2[ns] = bq
            ns += 1
    s_i2 = s_i2[:ns]
    s_j2 = s_j2[:ns]
    src = pgpu[s_i2]
    o = np.argsort(src, kind="mergesort")
    s_i2, s_j2, src = s_i2[o], s_j2[o], src[o]
    sptr = np.zeros(g + 1, np.int64)
    for q in range(ns):
        sptr[src[q] + 1] += 1
    for h in range(g):
        sptr[h + 1] += sptr[h]
    bval = np.inf
    bI, bJ, bI2, bJ2 = -1, -1, -1, -1
    bdel = 0.0
    evals = 0
    for q in range(m):
        i = fi[q]
        j = fj[q]
        h = pgpu[j]
        for r in range(sptr[h], sptr[h + 1]):
            i2 = s_i2[r]
            j2 = s_j2[r]
            if pe[i2] == pe[i] or j2 == i:
                continue
            v, d = evaluate_move(p, x, L, pgpu, bottleneck, i, j, whole_only, i2, j2)
            evals += 1
            if v < bval:
                bval, bdel = v, d
                bI, bJ, bI2, bJ2 = i, j, i2, j2
    if not bval < thresh:
        return False, evals
    apply_move(p, x, pgpu, L, bI, bJ, bdel, bI2, bJ2)
    return True, evals


@njit(cache=True)
def whole_partial_chain(p, x, pairs, L, bottleneck, thresh, t):
    """A 2-step chain for the mixed regime of Eq. 4: all of a pair's share on the bottleneck to its
    expert's replica on GPU h, then a share ``delta`` of another expert on h to that expert's
    pair on GPU k (the bottleneck when it holds tokens of it, else its least-loaded other replica
    GPU); applied when every GPU it touches ends below ``thresh``.

    Parameters:
        p, x, pairs, L: Pricer; shares float64[P]; Pairs; Loads (x and L updated in place)
        bottleneck: int; thresh: float; t: float64[g], each GPU's current time

    Returns:
        (bool, int): whether a chain was applied, and the split sizes evaluated
    """
    # Where the activation floor and the token pieces (c + beta*N, c2 + gamma*N) cross near the
    # optimum, every single move and whole-expert chain off an activation-bound bottleneck lifts
    # some GPU's token piece above it: here the bottleneck sheds an activation and h gives the
    # tokens it took back.  The objective is a max of affine functions of delta, so delta is
    # chosen exactly among the crossings of the token pieces with each other and the flat level.
    pe, pgpu, ptr, gptr, gpairs = pairs.pe, pairs.pgpu, pairs.ptr, pairs.gptr, pairs.gpairs
    G, N, T = L
    bval = np.inf
    bI, bJ, bI2, bJ2 = -1, -1, -1, -1
    bdel = 0.0
    evals = 0
    cand = np.empty(24)
    for r in range(gptr[bottleneck], gptr[bottleneck + 1]):
        i = gpairs[r]
        xi = x[i]
        if not xi > EPS:
            continue
        e = pe[i]
        # bottleneck after losing all of pair i
        Gg = G[bottleneck] - 1.0
        Ng = N[bottleneck] - xi
        Tg = T[bottleneck] - tiles(p, xi)
        for j in range(ptr[e], ptr[e + 1]):
            h = pgpu[j]
            if h == bottleneck:
                continue
            xj = x[j]
            Gh = G[h] + (1.0 if xj <= EPS else 0.0)
            Nh = N[h] + xi
            Th = T[h] - tiles(p, xj) + tiles(p, xj + xi)
            if activation_time(p, Gh, Th) >= thresh:
                continue  # h would be activation-bound above the bottleneck whatever it gives back
            for r2 in range(gptr[h], gptr[h + 1]):
                i2 = gpairs[r2]
                x2 = x[i2]
                f = pe[i2]
                if f == e or not x2 > EPS:
                    continue
                # destinations: f's pair on bottleneck (when it holds tokens there), and its pair on the
                # least-loaded other GPU
                jg = -1
                jk = -1
                for q in range(ptr[f], ptr[f + 1]):
                    k = pgpu[q]
                    if k == h:
                        continue
                    if k == bottleneck:
                        if x[q] > EPS:
                            jg = q
                    elif jk < 0 or t[k] < t[pgpu[jk]]:
                        jk = q
                for side in range(2):
                    j2 = jg if side == 0 else jk
                    if j2 < 0:
                        continue
                    k = pgpu[j2]
                    xk = x[j2]
                    if k == bottleneck:
                        Gk0, Nk0, Tk0 = Gg, Ng, Tg
                    else:
                        Gk0, Nk0, Tk0 = G[k], N[k], T[k]
                    addk = 1.0 if xk <= EPS else 0.0
                    Kflat = max(activation_time(p, Gh, Th), activation_time(p, Gk0 + addk, Tk0 + 1.0))
                    if k != bottleneck:
                        Kflat = max(Kflat, gpu_time(p, Gg, Ng, Tg))
                    cand[0] = x2
                    nc = 1
                    nc = token_crossings(p, Nh, Nk0, cand, nc)
                    nc = level_crossings(p, Nh, Nk0, Kflat, cand, nc)
                    evals += nc
                    for q in range(nc):
                        d = min(max(cand[q], 0.0), x2)
                        if not d > EPS:
                            continue
                        whole = x2 - d <= EPS * max(1.0, x2)
                        th = gpu_time(p, Gh - (1.0 if whole else 0.0), Nh - d,
                                      Th - tiles(p, x2) + tiles(p, 0.0 if whole else x2 - d))
                        tk = gpu_time(p, Gk0 + addk, Nk0 + d, Tk0 - tiles(p, xk) + tiles(p, xk + d))
                        v = max(th, tk)
                        if k != bottleneck:
                            v = max(v, gpu_time(p, Gg, Ng, Tg))
                        if v < bval:
                            bval, bdel = v, d
                            bI, bJ, bI2, bJ2 = i, j, i2, j2
    if not bval < thresh:
        return False, evals
    apply_move(p, x, pgpu, L, bI, bJ, x[bI], -1, -1)
    apply_move(p, x, pgpu, L, bI2, bJ2, bdel, -1, -1)
    return True, evals
