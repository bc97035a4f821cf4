"""Compiled (numba) hot path of tempo_fast (paper Section 4.2) and of the max-flow token LP.

Everything here works on the flat *pair* layout of :class:`tempo.policies.tempo_fast._State`:
one pair per (live expert, valid replica slot), experts in id order, slots in slot order, so
``ptr[e]:ptr[e+1]`` are expert ``e``'s pairs.  Shares ``x[P]`` are float64 (exact integers up
to 2^53 tokens); counts, capacities and flows are int64 throughout.

The numpy implementation in :mod:`tempo.policies.tempo_fast` (``backend="numpy"``) is kept as
the test oracle: the stages below follow it move for move (same candidate deltas, same
acceptance rule, same tie-breaks for the seed and single moves), so the two agree on most
instances and differ only where ties among chain moves or among optimal token-LP vertices
are broken differently.

numba is imported here, not by ``import tempo``; ``cache=True`` keeps the machine code on disk
(``__pycache__``) so only the first process on a machine pays the compile.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

EPS = 1e-9  # tempo.core.instance.EPS_TOKENS
REL = 1e-9  # tempo_fast._REL

# prm layout: a, b, c, beta, b2, tile, c2, gamma, traffic(0/1)


@njit(cache=True)
def _cost(p, G, N, T):
    t = max(p[0] + p[1] * G + p[4] * (T - G), p[2] + p[3] * N)
    if p[8] > 0:
        t = max(t, p[6] + p[7] * N)
    return t


@njit(cache=True)
def _tl(p, v):
    if v <= EPS:
        return 0.0
    if p[4] == 0:
        return 1.0
    return max(1.0, math.ceil(v / p[5] - 1e-9))


@njit(cache=True)
def pairs_of(counts, replica_gpu, n_gpus):
    """Flat pair layout: (pe, pr, pgpu, ptr, gptr, gpairs, first) where ``first[p]`` marks the
    first pair of its expert on its GPU (the token LP's deduplicated expert-GPU edges)."""
    E, R = replica_gpu.shape
    P = 0
    for e in range(E):
        if counts[e] > 0:
            for r in range(R):
                if replica_gpu[e, r] >= 0:
                    P += 1
    pe = np.empty(P, np.int64)
    pr = np.empty(P, np.int64)
    pgpu = np.empty(P, np.int64)
    ptr = np.zeros(E + 1, np.int64)
    first = np.zeros(P, np.bool_)
    stamp = np.full(n_gpus, -1, np.int64)
    k = 0
    for e in range(E):
        ptr[e] = k
        if counts[e] > 0:
            for r in range(R):
                h = replica_gpu[e, r]
                if h >= 0:
                    pe[k] = e
                    pr[k] = r
                    pgpu[k] = h
                    if stamp[h] != e:
                        stamp[h] = e
                        first[k] = True
                    k += 1
    ptr[E] = k
    gptr = np.zeros(n_gpus + 1, np.int64)
    for q in range(P):
        gptr[pgpu[q] + 1] += 1
    for h in range(n_gpus):
        gptr[h + 1] += gptr[h]
    fill = gptr[:-1].copy()
    gpairs = np.empty(P, np.int64)
    for q in range(P):  # pair order within a GPU (stable, as numpy's argsort)
        gpairs[fill[pgpu[q]]] = q
        fill[pgpu[q]] += 1
    return pe, pr, pgpu, ptr, gptr, gpairs, first


@njit(cache=True)
def features(p, x, pgpu, g, G, N, T):
    for h in range(g):
        G[h] = 0.0
        N[h] = 0.0
        T[h] = 0.0
    for q in range(x.size):
        v = x[q]
        if v > EPS:
            h = pgpu[q]
            G[h] += 1.0
            N[h] += v
            T[h] += _tl(p, v)


@njit(cache=True)
def makespan(p, x, pgpu, g):
    G = np.zeros(g)
    N = np.zeros(g)
    T = np.zeros(g)
    features(p, x, pgpu, g, G, N, T)
    best = 0.0
    for h in range(g):
        t = _cost(p, G[h], N[h], T[h])
        if h == 0 or t > best:
            best = t
    return best


@njit(cache=True)
def lower_bound(p, counts, pgpu, ptr, first, g):
    """:meth:`CostModel.lower_bound` without its tile term: ``max(a + b*ceil(L/g), c + beta*z,
    c2 + gamma*z)`` with ``z = max(total/g, max_e n_e/|distinct replica GPUs of e|)``."""
    L = 0
    total = 0.0
    zmax = 0.0
    for e in range(counts.size):
        if counts[e] > 0:
            L += 1
            total += counts[e]
            d = 0
            for q in range(ptr[e], ptr[e + 1]):
                if first[q]:
                    d += 1
            zmax = max(zmax, counts[e] / d)
    if L == 0:
        return max(p[0], p[2])
    z = max(total / g, zmax)
    lb = max(p[0] + p[1] * math.ceil(L / g), p[2] + p[3] * z)
    if p[8] > 0:
        lb = max(lb, p[6] + p[7] * z)
    return lb


# ---------------------------------------------------------------------------- stage 1
@njit(cache=True)
def seed(p, counts, pe, pgpu, ptr, x, G, N, T, g, split):
    """Cost-aware greedy seed (tempo_fast._State.seed): forced experts first, then the others
    by descending tokens, each whole to the replica GPU of least resulting time (ties: smaller
    increase, lower GPU id) or, with ``split``, water-filled over its k least-loaded replica
    GPUs when some k >= 2 beats the whole placement."""
    E = counts.size
    x[:] = 0.0
    nchoice = 0
    forced = np.zeros(E, np.bool_)
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            lo = pgpu[ptr[e]]
            hi = lo
            for q in range(ptr[e], ptr[e + 1]):
                lo = min(lo, pgpu[q])
                hi = max(hi, pgpu[q])
            if lo == hi:
                forced[e] = True
                x[ptr[e]] = counts[e]
            else:
                nchoice += 1
    features(p, x, pgpu, g, G, N, T)
    choice = np.empty(nchoice, np.int64)
    k = 0
    for e in range(E):
        if ptr[e + 1] > ptr[e] and not forced[e]:
            choice[k] = e
            k += 1
    neg = np.empty(nchoice, np.int64)
    for i in range(nchoice):
        neg[i] = -counts[choice[i]]
    choice = choice[np.argsort(neg, kind="mergesort")]
    a, b, c, beta, b2, tile = p[0], p[1], p[2], p[3], p[4], p[5]
    c2, gamma, traffic = p[6], p[7], p[8] > 0
    cand_h = np.empty(g, np.int64)
    cand_p = np.empty(g, np.int64)
    stamp = np.full(g, -1, np.int64)
    for e in choice:
        n = float(counts[e])
        nt = max(1.0, math.ceil(n / tile - 1e-9)) if b2 != 0 else 1.0
        bnew = np.inf
        binc = np.inf
        bh = -1
        bp = -1
        for q in range(ptr[e], ptr[e + 1]):
            h = pgpu[q]
            Gh, Nh, Th = G[h], N[h], T[h]
            old = max(a + b * Gh + b2 * (Th - Gh), c + beta * Nh)
            new = max(a + b * (Gh + 1) + b2 * (Th + nt - Gh - 1), c + beta * (Nh + n))
            if traffic:
                old = max(old, c2 + gamma * Nh)
                new = max(new, c2 + gamma * (Nh + n))
            inc = new - old
            if (new < bnew) or (new == bnew and (inc < binc or (inc == binc and h < bh))):
                bnew, binc, bh, bp = new, inc, h, q
        kbest = 0
        level = 0.0
        m = 0
        if split and ptr[e + 1] - ptr[e] > 1 and n > 1:
            # _waterfill: one pair per distinct GPU, GPUs by (tokens, id)
            for q in range(ptr[e], ptr[e + 1]):
                h = pgpu[q]
                if stamp[h] != e:
                    stamp[h] = e
                    # insertion by (N[h], h)
                    j = m
                    while j > 0 and (N[cand_h[j - 1]] > N[h] or (N[cand_h[j - 1]] == N[h] and cand_h[j - 1] > h)):
                        cand_h[j] = cand_h[j - 1]
                        cand_p[j] = cand_p[j - 1]
                        j -= 1
                    cand_h[j] = h
                    cand_p[j] = q
                    m += 1
            acc = 0.0
            bworst = np.inf
            for kk in range(1, m + 1):
                acc += N[cand_h[kk - 1]]
                if kk == 1:
                    continue
                lev = (acc + n) / kk
                if lev <= N[cand_h[kk - 1]]:
                    break
                worst = 0.0
                for jj in range(kk):
                    h = cand_h[jj]
                    amount = lev - N[h]
                    ntt = max(1.0, math.ceil(amount / tile - 1e-9)) if b2 != 0 else 1.0
                    t = max(a + b * (G[h] + 1) + b2 * (T[h] + ntt - G[h] - 1), c + beta * lev)
                    if traffic:
                        t = max(t, c2 + gamma * lev)
                    worst = max(worst, t)
                if worst < bworst:
                    bworst = worst
                    kbest = kk
                    level = lev
            if kbest > 0 and not (bworst < bnew * (1 - 1e-12)):
                kbest = 0
        if kbest == 0:
            x[bp] = n
            G[bh] += 1.0
            N[bh] += n
            T[bh] += nt
        else:
            # amounts from the levels before any update (plan built first, as in numpy)
            amounts = np.empty(kbest)
            for jj in range(kbest):
                amounts[jj] = level - N[cand_h[jj]]
            for jj in range(kbest):
                h = cand_h[jj]
                amount = amounts[jj]
                x[cand_p[jj]] = amount
                G[h] += 1.0
                N[h] += amount
                T[h] += max(1.0, math.ceil(amount / tile - 1e-9)) if b2 != 0 else 1.0


# ---------------------------------------------------------------------------- moves
@njit(cache=True)
def _eval(p, x, G, N, T, pgpu, gb, i, j, whole_only, i2, j2):
    """Best delta and resulting max time of moving a share of pair i (on gb) to pair j, then
    (i2 >= 0) all of pair i2 (on j's GPU) to pair j2 (tempo_fast._State._evaluate)."""
    a, b, c, beta, b2, tile = p[0], p[1], p[2], p[3], p[4], p[5]
    c2, gamma, traffic = p[6], p[7], p[8] > 0
    if not traffic:
        c2 = 0.0
        gamma = 0.0
    h = pgpu[j]
    x1 = x[i]
    xj = x[j]
    Gg0, Ng0, Tg0 = G[gb], N[gb], T[gb] - _tl(p, x1)
    Gh0, Nh0, Th0 = G[h], N[h], T[h] - _tl(p, xj)
    if xj <= EPS:
        Gh0 += 1.0
    third = 0.0
    if i2 >= 0:
        x2 = x[i2]
        xk = x[j2]
        k = pgpu[j2]
        Gh0 -= 1.0
        Nh0 -= x2
        Th0 -= _tl(p, x2)
        addk = 1.0 if xk <= EPS else 0.0
        dT = _tl(p, xk + x2) - _tl(p, xk)
        if k == gb:
            Gg0 += addk
            Ng0 += x2
            Tg0 += dT
        else:
            third = _cost(p, G[k] + addk, N[k] + x2, T[k] + dT)
    cand = np.empty(40)
    nc = 0
    if whole_only:
        cand[0] = x1
        nc = 1
    else:
        Kflat = max(max(a + b * Gg0 + b2 * (Tg0 + 1 - Gg0), a + b * Gh0 + b2 * (Th0 + 1 - Gh0)), third)
        cand[0] = (Ng0 - Nh0) / 2.0
        cand[1] = x1
        nc = 2
        if beta > 0:
            cand[nc] = (c + beta * Ng0 - Kflat) / beta
            cand[nc + 1] = (Kflat - c - beta * Nh0) / beta
            nc += 2
        if traffic and gamma > 0:
            cand[nc] = (c2 + gamma * Ng0 - Kflat) / gamma
            cand[nc + 1] = (Kflat - c2 - gamma * Nh0) / gamma
            nc += 2
            if beta + gamma > 0:
                cand[nc] = (c + beta * Ng0 - c2 - gamma * Nh0) / (beta + gamma)
                cand[nc + 1] = (c2 + gamma * Ng0 - c - beta * Nh0) / (beta + gamma)
                nc += 2
        for q in range(nc):
            cand[q] = min(max(cand[q], 0.0), x1)
        if b2 > 0:
            base = nc
            for blk in range(4):
                for q in range(base):
                    v = cand[q]
                    if blk == 0:
                        w = x1 - tile * math.floor((x1 - v) / tile)
                    elif blk == 1:
                        w = x1 - tile * math.ceil((x1 - v) / tile)
                    elif blk == 2:
                        w = tile * math.ceil((xj + v) / tile) - xj
                    else:
                        w = tile * math.floor((xj + v) / tile) - xj
                    cand[nc] = w
                    nc += 1
            for q in range(nc):
                cand[q] = min(max(cand[q], 0.0), x1)
    bval = np.inf
    bdel = cand[0]
    tolw = EPS * max(1.0, x1)
    for q in range(nc):
        d = cand[q]
        if not d > EPS:
            continue
        rem = x1 - d
        whole = rem <= tolw
        tg = _cost(p, Gg0 - (1.0 if whole else 0.0), Ng0 - d, Tg0 + _tl(p, 0.0 if whole else rem))
        th = _cost(p, Gh0, Nh0 + d, Th0 + _tl(p, xj + d))
        v = max(max(tg, th), third)
        if v < bval:
            bval = v
            bdel = d
    return bval, bdel


@njit(cache=True)
def _apply(p, x, pgpu, g, G, N, T, i, j, delta, i2, j2):
    if delta >= x[i] - EPS * max(1.0, x[i]):
        delta = x[i]
    x[i] -= delta
    x[j] += delta
    if x[i] < EPS:
        x[i] = 0.0
    if i2 >= 0:
        x[j2] += x[i2]
        x[i2] = 0.0
    features(p, x, pgpu, g, G, N, T)


@njit(cache=True)
def _times(p, G, N, T, t):
    gb = 0
    for h in range(t.size):
        t[h] = _cost(p, G[h], N[h], T[h])
        if t[h] > t[gb]:
            gb = h
    return gb


@njit(cache=True)
def _chain(p, x, pe, pgpu, ptr, G, N, T, g, gb, thresh, t, si, sj, sv, M, whole_only, fanout, cap):
    """2-step chains from the bottleneck (tempo_fast._State._chain): first moves i -> j (GPU
    h), at most ``cap`` by single-move value and ``fanout`` cheapest destinations per i; then
    a whole other expert off h, to gb (a swap) or to its cheapest other replica GPU."""
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
        return False
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
    # second moves: to gb (all), plus per source pair the cheapest other GPU
    n2 = 0
    for b_ in B:
        e = pe[b_]
        for q in range(ptr[e], ptr[e + 1]):
            if pgpu[q] != pgpu[b_]:
                n2 += 1
    if n2 == 0:
        return False
    s_i2 = np.empty(2 * n2, np.int64)
    s_j2 = np.empty(2 * n2, np.int64)
    ns = 0
    for b_ in B:
        e = pe[b_]
        for q in range(ptr[e], ptr[e + 1]):
            if pgpu[q] != pgpu[b_] and pgpu[q] == gb:
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
    for q in range(m):
        i = fi[q]
        j = fj[q]
        h = pgpu[j]
        for r in range(sptr[h], sptr[h + 1]):
            i2 = s_i2[r]
            j2 = s_j2[r]
            if pe[i2] == pe[i] or j2 == i:
                continue
            v, d = _eval(p, x, G, N, T, pgpu, gb, i, j, whole_only, i2, j2)
            if v < bval:
                bval, bdel = v, d
                bI, bJ, bI2, bJ2 = i, j, i2, j2
    if not bval < thresh:
        return False
    _apply(p, x, pgpu, g, G, N, T, bI, bJ, bdel, bI2, bJ2)
    return True


@njit(cache=True)
def _is_ancestor(w, u, gb, par_u):
    v = u
    while v != gb:
        if v == w:
            return True
        v = par_u[v]
    return False


@njit(cache=True)
def _augment(p, x, pe, pgpu, ptr, gptr, gpairs, G, N, T, g, gb, thresh, depth):
    """Breadth-first augmenting path of whole-expert moves (tempo_fast._State._augment):
    label-correcting search, a GPU re-entered when a path brings it fewer tokens."""
    has = np.zeros(g, np.bool_)
    lab = np.zeros(g)
    par_u = np.full(g, -1, np.int64)
    par_p = np.full(g, -1, np.int64)
    par_q = np.full(g, -1, np.int64)
    has[gb] = True
    lab[gb] = -1.0
    cap_f = 64 + 4 * x.size
    fv = np.empty(cap_f, np.int64)
    fd = np.empty(cap_f, np.int64)
    fl = np.empty(cap_f)
    nf = 0
    # pairs on gb with tokens, by their share (stable)
    na = 0
    for r in range(gptr[gb], gptr[gb + 1]):
        if x[gpairs[r]] > EPS:
            na += 1
    act = np.empty(na, np.int64)
    k = 0
    for r in range(gptr[gb], gptr[gb + 1]):
        q = gpairs[r]
        if x[q] > EPS:
            act[k] = q
            k += 1
    act = act[np.argsort(x[act], kind="mergesort")]
    for pp in act:
        xp = x[pp]
        if _cost(p, G[gb] - 1, N[gb] - xp, T[gb] - _tl(p, xp)) >= thresh:
            continue
        e = pe[pp]
        for q in range(ptr[e], ptr[e + 1]):
            w = pgpu[q]
            if w == gb:
                continue
            if w == gb or (has[w] and lab[w] <= xp):
                continue
            # u == gb: no ancestor check
            has[w] = True
            lab[w] = xp
            par_u[w], par_p[w], par_q[w] = gb, pp, q
            if nf == cap_f:
                cap_f *= 2
                fv2 = np.empty(cap_f, np.int64)
                fd2 = np.empty(cap_f, np.int64)
                fl2 = np.empty(cap_f)
                fv2[:nf], fd2[:nf], fl2[:nf] = fv[:nf], fd[:nf], fl[:nf]
                fv, fd, fl = fv2, fd2, fl2
            fv[nf], fd[nf], fl[nf] = w, 1, xp
            nf += 1
    head = 0
    budget = 50 * g + nf
    while head < nf and head < budget:
        v, d, n_lab = fv[head], fd[head], fl[head]
        head += 1
        if not (has[v] and lab[v] == n_lab):
            continue
        p_in, q_in = par_p[v], par_q[v]
        n_in = x[p_in]
        add = 1.0 if x[q_in] <= EPS else 0.0
        dT = _tl(p, x[q_in] + n_in) - _tl(p, x[q_in])
        if _cost(p, G[v] + add, N[v] + n_in, T[v] + dT) < thresh:
            node = v
            while node != gb:
                u, pp, q = par_u[node], par_p[node], par_q[node]
                x[q] += x[pp]
                x[pp] = 0.0
                node = u
            features(p, x, pgpu, g, G, N, T)
            return True
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
            if _cost(p, G[v] + add - 1, N[v] + n_in - xp, T[v] + dT - _tl(p, xp)) >= thresh:
                continue
            for q in range(ptr[e], ptr[e + 1]):
                w = pgpu[q]
                if w == v:
                    continue
                if w == gb or (has[w] and lab[w] <= xp):
                    continue
                if has[w] and v != gb and _is_ancestor(w, v, gb, par_u):
                    continue
                has[w] = True
                lab[w] = xp
                par_u[w], par_p[w], par_q[w] = v, pp, q
                if nf == cap_f:
                    cap_f *= 2
                    fv2 = np.empty(cap_f, np.int64)
                    fd2 = np.empty(cap_f, np.int64)
                    fl2 = np.empty(cap_f)
                    fv2[:nf], fd2[:nf], fl2[:nf] = fv[:nf], fd[:nf], fl[:nf]
                    fv, fd, fl = fv2, fd2, fl2
                fv[nf], fd[nf], fl[nf] = w, d + 1, xp
                nf += 1
    return False


@njit(cache=True)
def improve(p, x, pe, pgpu, ptr, gptr, gpairs, G, N, T, g, lb, whole_only, chains, max_iter, fanout,
            depth, cap):
    """Bottleneck local search (tempo_fast._State.improve); returns the accepted moves."""
    t = np.empty(g)
    P = x.size
    si = np.empty(max(P * 4, 16), np.int64)
    sj = np.empty(max(P * 4, 16), np.int64)
    sv = np.empty(max(P * 4, 16))
    moves = 0
    for _ in range(max_iter):
        gb = _times(p, G, N, T, t)
        tb = t[gb]
        if tb <= lb * (1 + 1e-12):
            break
        thresh = tb - REL * max(1.0, tb)
        M = 0
        bval = np.inf
        bm = -1
        bdel = 0.0
        anyA = False
        for r in range(gptr[gb], gptr[gb + 1]):
            i = gpairs[r]
            if not x[i] > EPS:
                continue
            anyA = True
            e = pe[i]
            for j in range(ptr[e], ptr[e + 1]):
                if pgpu[j] == gb:
                    continue
                v, d = _eval(p, x, G, N, T, pgpu, gb, i, j, whole_only, -1, -1)
                if M == si.size:
                    si2 = np.empty(2 * M, np.int64)
                    sj2 = np.empty(2 * M, np.int64)
                    sv2 = np.empty(2 * M)
                    si2[:M], sj2[:M], sv2[:M] = si[:M], sj[:M], sv[:M]
                    si, sj, sv = si2, sj2, sv2
                si[M], sj[M], sv[M] = i, j, v
                if v < bval:
                    bval, bm, bdel = v, M, d
                M += 1
        if not anyA or M == 0:
            break
        if bval < thresh:
            _apply(p, x, pgpu, g, G, N, T, si[bm], sj[bm], bdel, -1, -1)
            moves += 1
            continue
        if not chains:
            break
        found = _chain(p, x, pe, pgpu, ptr, G, N, T, g, gb, thresh, t, si, sj, sv, M, whole_only, fanout, cap)
        if not found and (depth < 0 or depth > 2):
            found = _augment(p, x, pe, pgpu, ptr, gptr, gpairs, G, N, T, g, gb, thresh, depth)
        if not found:
            break
        moves += 1
    return moves


# ---------------------------------------------------------------------------- max-flow (Dinic)
@njit(cache=True)
def _maxflow(n, head, nxt_start, to, cap, s, t, flow, level, it, stack_v, stack_e):
    """Dinic max-flow on a CSR residual graph (edges paired e, e^1); int64 capacities."""
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
def token_lp(counts, pe, pgpu, ptr, first, g, x):
    """Exact min-max tokens per GPU (Lemma 1) by Dinkelbach iterations over max-flow cuts
    (exact._token_lp): writes an optimal vertex into ``x`` (deduplicated first pairs) and
    returns (W, k) with optimum W/k."""
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


# ---------------------------------------------------------------------------- the whole solver
@njit(cache=True)
def solve(counts, replica_gpu, g, p, seed_mode, chains, local_search, partial, ensemble, tau, max_iter,
          fanout, depth, lp_vertex, lp_even, cap, restarts):
    """tempo_fast end to end.  ``seed_mode`` 0 greedy (water-filling), 1 whole, 2 static.
    Returns (shares[E, R], makespan, chosen, stages[5]) with chosen 0 local search, 1 token-LP
    vertex, 2 token-LP even, 3 round robin, 4 / 5 local search restarted from the wrap-around /
    apportionment seed (full replication, ``restarts``); stages = seed, chains, local search, ensemble
    (NaN when skipped) and a flag (1 shortcut, 2 candidates pruned).  ``lp_even``: 0 no even
    token-LP candidate, 1 or 2 ("auto") the closed-form even split under full replication."""
    E, R = replica_gpu.shape
    pe, pr, pgpu, ptr, gptr, gpairs, first = pairs_of(counts, replica_gpu, g)
    P = pe.size
    x = np.zeros(P)
    G = np.zeros(g)
    N = np.zeros(g)
    T = np.zeros(g)
    stages = np.full(5, np.nan)
    stages[4] = 0.0
    lb = lower_bound(p, counts, pgpu, ptr, first, g)
    if seed_mode == 2:
        for e in range(E):
            if ptr[e + 1] > ptr[e]:
                x[ptr[e]] = counts[e]
        features(p, x, pgpu, g, G, N, T)
    else:
        seed(p, counts, pe, pgpu, ptr, x, G, N, T, g, seed_mode == 0)
    t = np.empty(g)
    gb = _times(p, G, N, T, t)
    stages[0] = t[gb] if P else max(p[0], p[2])
    if P and chains:
        improve(p, x, pe, pgpu, ptr, gptr, gpairs, G, N, T, g, lb, True, True, max_iter, fanout, depth, cap)
        gb = _times(p, G, N, T, t)
        stages[1] = t[gb]
    # full replication: every live expert on every GPU
    full = True
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            d = 0
            for q in range(ptr[e], ptr[e + 1]):
                if first[q]:
                    d += 1
            if d < g:
                full = False
                break
    xv = np.zeros(P)
    have_v = False
    ms_v = np.inf
    if P and local_search and ensemble and lp_vertex:
        gb = _times(p, G, N, T, t)
        flat = p[0] + p[1] * G[gb] + p[4] * (T[gb] - G[gb])
        if p[2] + p[3] * N[gb] >= flat or (p[8] > 0 and p[6] + p[7] * N[gb] >= flat):
            W, k = token_lp(counts, pe, pgpu, ptr, first, g, xv)
            have_v = W >= 0
            if have_v:
                ms_v = makespan(p, xv, pgpu, g)
                if ms_v <= lb * (1 + 1e-9):
                    stages[4] = 1.0
                    return _scatter(xv, pe, pr, E, R), ms_v, 1, stages
    if P and local_search:
        improve(p, x, pe, pgpu, ptr, gptr, gpairs, G, N, T, g, lb, not partial, chains, max_iter, fanout, depth,
                cap)
        gb = _times(p, G, N, T, t)
        stages[2] = t[gb]
    best = makespan(p, x, pgpu, g) if P else max(p[0], p[2])
    chosen = 0
    if P and full and restarts and best > lb * (1 + 1e-12):
        # Full replication: restart the local search from two structured seeds that the
        # greedy cannot reach (few experts over many GPUs: 1.49x the optimum otherwise).
        for kind in range(2):
            if kind == 0:
                xs = _wrap_around(counts, pe, pgpu, ptr, g)
            else:
                xs = _apportion(counts, pe, pgpu, ptr, g)
                if xs.size == 0:
                    continue
            G2 = np.zeros(g)
            N2 = np.zeros(g)
            T2 = np.zeros(g)
            features(p, xs, pgpu, g, G2, N2, T2)
            if local_search:
                improve(p, xs, pe, pgpu, ptr, gptr, gpairs, G2, N2, T2, g, lb, not partial, chains, max_iter, fanout,
                        depth, cap)
            ms = makespan(p, xs, pgpu, g)
            if ms < best * (1 - 1e-12):
                best, chosen = ms, 4 + kind
                x = xs
                G, N, T = G2, N2, T2
    if ensemble and P:
        if lb >= (1 - tau) * best and not have_v:
            stages[4] = 2.0
        else:
            cbest = np.inf
            cwho = 0
            xc = np.zeros(P)
            if lp_vertex:
                if not have_v:
                    W, k = token_lp(counts, pe, pgpu, ptr, first, g, xv)
                    have_v = W >= 0
                    if have_v:
                        ms_v = makespan(p, xv, pgpu, g)
                if have_v and ms_v < cbest:
                    cbest, cwho = ms_v, 1
            if lp_even > 0 and full:
                xe = np.zeros(P)
                for q in range(P):
                    if first[q]:
                        xe[q] = counts[pe[q]] / g
                ms = makespan(p, xe, pgpu, g)
                if ms < cbest:
                    cbest, cwho = ms, 2
                    xc[:] = xe
            if full:
                # round robin A3 (Theorem 2): descending tokens, rank r on GPU r mod g
                xr = _round_robin(counts, pe, pgpu, ptr, first, g)
                ms = makespan(p, xr, pgpu, g)
                if ms < cbest:
                    cbest, cwho = ms, 3
                    xc[:] = xr
            if cwho == 1:
                xc[:] = xv
            if cwho > 0 and cbest < (1 - tau) * best:
                best, chosen = cbest, cwho
                x = xc
        stages[3] = best
    return _scatter(x, pe, pr, E, R), best, chosen, stages


@njit(cache=True)
def _pair_on(pgpu, ptr, e, h):
    for q in range(ptr[e], ptr[e + 1]):
        if pgpu[q] == h:
            return q
    return -1


@njit(cache=True)
def _by_tokens(counts, ptr):
    """Live experts by descending tokens (ties: lower id)."""
    E = counts.size
    nl = 0
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            nl += 1
    live = np.empty(nl, np.int64)
    neg = np.empty(nl, np.int64)
    k = 0
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            live[k] = e
            neg[k] = -counts[e]
            k += 1
    return live[np.argsort(neg, kind="mergesort")]


@njit(cache=True)
def _wrap_around(counts, pe, pgpu, ptr, g):
    """McNaughton's wrap-around rule under full replication: experts by descending tokens laid
    end to end and cut into g segments of total/g tokens.  Token-optimal (every GPU gets
    total/g) with at most one split per GPU boundary, so far fewer activations than the even
    split; a GPU holds 1 + (experts that end inside its segment) experts."""
    order = _by_tokens(counts, ptr)
    total = 0.0
    for e in order:
        total += counts[e]
    xs = np.zeros(pe.size)
    start = 0.0
    for e in order:
        end = start + counts[e]
        h = min(g - 1, int(start * g // total))
        while h < g:
            lo = total * h / g
            hi = total if h == g - 1 else total * (h + 1) / g
            if lo >= end:
                break
            ov = min(end, hi) - max(start, lo)
            if ov > 0:
                xs[_pair_on(pgpu, ptr, e, h)] += ov
            h += 1
        start = end
    return xs


@njit(cache=True)
def _apportion(counts, pe, pgpu, ptr, g):
    """Under full replication with at most g live experts: give each expert k_e GPUs of its
    own (D'Hondt: the next GPU to the largest n_e / k_e), split it evenly over them.  One
    activation per GPU, least largest piece.  Empty when more experts than GPUs."""
    order = _by_tokens(counts, ptr)
    L = order.size
    if L == 0 or L > g:
        return np.zeros(0)
    k = np.ones(L, np.int64)
    for _ in range(g - L):
        bi = 0
        for i in range(1, L):
            if counts[order[i]] * k[bi] > counts[order[bi]] * k[i]:
                bi = i
        k[bi] += 1
    xs = np.zeros(pe.size)
    h = 0
    for i in range(L):
        e = order[i]
        for _ in range(k[i]):
            xs[_pair_on(pgpu, ptr, e, h)] = counts[e] / k[i]
            h += 1
    return xs


@njit(cache=True)
def _round_robin(counts, pe, pgpu, ptr, first, g):
    E = counts.size
    nl = 0
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            nl += 1
    live = np.empty(nl, np.int64)
    neg = np.empty(nl, np.int64)
    k = 0
    for e in range(E):
        if ptr[e + 1] > ptr[e]:
            live[k] = e
            neg[k] = -counts[e]
            k += 1
    order = live[np.argsort(neg, kind="mergesort")]
    xr = np.zeros(pe.size)
    for r in range(nl):
        e = order[r]
        h = r % g
        for q in range(ptr[e], ptr[e + 1]):
            if pgpu[q] == h:
                xr[q] = counts[e]
                break
    return xr


@njit(cache=True)
def _scatter(x, pe, pr, E, R):
    out = np.zeros((E, R))
    for q in range(x.size):
        out[pe[q], pr[q]] = x[q]
    return out


def params(model) -> np.ndarray:
    """The cost model as the float64[9] vector the compiled functions take."""
    traffic = model.c2 is not None
    return np.array([model.a, model.b, model.c, model.beta, model.b2, float(model.tile),
                     model.c2 if traffic else 0.0, model.gamma if traffic else 0.0, 1.0 if traffic else 0.0])
