"""tempo_fast: the makespan-aware dispatcher of paper Section 4.2.

Four stages, each switchable for the ablations of Tables 2 and 8:

1. **Cost-aware greedy seeding.**  Experts whole, in descending token order, each on the
   replica GPU whose time after receiving it is lowest (ties: smaller increase, then lower
   GPU id).  Experts with a single replica GPU have no choice and are placed first, so the
   choices see every forced load (our refinement; the order among choices is the paper's).
2. **Augmenting chains** (the flat-regime move).  Whole-expert moves off the bottleneck GPU,
   1-step (g -> h) and 2-step (g -> h, then another expert h -> k, so h's activation count
   stays put): the truncation of the semi-matching augmenting path of Lemma 2.  When both
   fail we go further than the paper and search a breadth-first augmenting path of any
   length (``chain_depth=None``; set 2 for the paper's truncation): it is cheap, and it
   makes the solver exact in the beta -> 0 limit.
3. **Bottleneck local search with partial migrations** (the linear-regime move).  Move token
   mass off the bottleneck: whole experts, or a partial share ``delta`` chosen by an exact
   line search.  For fixed activation changes the objective restricted to ``delta`` is a
   maximum of affine functions (convex, piecewise-linear), so its minimum lies at one of a
   handful of crossing points; we evaluate all of them, which finds the same optimum as the
   paper's ternary search in one vectorised step.  With ``b2 > 0`` every candidate is also
   snapped to the neighbouring 128-token tile boundaries.  A partial move may be followed by
   a whole move out of its destination (a 2-step chain with a partial first step); without
   it a seed like Fig. 1b's "hot + 2 cold | 4 cold" is a local optimum.  At most
   ``max_iter`` (300) accepted moves.
4. **Ensemble with switching tolerance** (Proposition 1).  Token-LP (both the vertex and the
   even variant) and, under full replication, the round-robin A3 of Theorem 2 are scored
   under the model; the solver switches to the best only if it is more than ``tau`` (1%)
   better than the local-search result.  Two exact shortcuts save time without changing
   the guarantee: candidates are not built when the lower bound already rules out a
   switch, and when the bottleneck is token-bound after stage 2 and the token-LP candidate
   attains the lower bound, it is returned at once (it is optimal).

A move is accepted only when every GPU it touches ends strictly below the bottleneck's
current time, so each accepted move lowers the makespan or the number of GPUs attaining it.

Under full replication the default also restarts the local search from two structured
seeds the greedy cannot reach -- McNaughton's wrap-around split (token-optimal, one split per
GPU boundary) and, with at most g live experts, a D'Hondt apportionment of whole GPUs to
experts -- and keeps the best (few experts over many GPUs: 1.49x the MILP optimum without).

Options come as :class:`TempoOptions` with presets ``"default"`` and ``"paper"`` (Section 4.2
as written: whole-expert seed, depth-2 chains, no restarts); the stage switches remain as
field overrides for the ablations.  Every stage runs compiled (:mod:`tempo.policies._compiled`,
numba, int64 counts and flows); ``backend="numpy"`` runs the vectorised reference kept as the
test oracle.  :func:`solve_layers` solves a whole model's layers in one call.

Known gap: on one bench batch (EP8, 256 experts, 512 tokens/GPU, EPLB 1.25x) tempo stays at
33 activations on a GPU where the MILP proves 32 fit (3.1% above the optimum, as at 8cd688e):
relieving the token-bound hot expert needs a split that costs an activation elsewhere, a
compound move the local search does not make.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ..core.cost import CostModel
from ..core.instance import EPS_TOKENS, Dispatch, Instance
from . import _options as check
from .registry import register
from .exact import token_lp_even, token_lp_highs, token_lp_vertex
from .proxies import round_robin, static

_REL = 1e-9


class _State:
    """Flat per-(live expert, valid slot) pair arrays plus per-GPU (G, N, T)."""

    def __init__(self, inst: Instance, model: CostModel):
        self.inst, self.model = inst, model
        e_idx, r_idx = np.nonzero(inst.valid & inst.live[:, None])
        self.pe, self.pr = e_idx, r_idx
        self.pgpu = inst.replica_gpu[e_idx, r_idx]
        self.P = e_idx.size
        E = inst.n_experts
        self.ptr = np.searchsorted(e_idx, np.arange(E + 1))
        self.x = np.zeros(self.P)
        g = inst.n_gpus
        self.g = g
        order = np.argsort(self.pgpu, kind="stable")
        bounds = np.searchsorted(self.pgpu[order], np.arange(g + 1))
        self.gpu_pairs = [order[bounds[h]:bounds[h + 1]] for h in range(g)]
        self.a, self.b, self.c, self.beta = model.a, model.b, model.c, model.beta
        self.b2, self.tile = model.b2, float(model.tile)
        self.traffic = model.c2 is not None
        self.c2 = model.c2 if self.traffic else 0.0
        self.gamma = model.gamma if self.traffic else 0.0
        self.split_seed = True
        self.chain_depth = None
        self.lb = 0.0

    # ---------------------------------------------------------------- pricing helpers
    def tl(self, x):
        if self.b2 == 0:
            return np.where(x > EPS_TOKENS, 1.0, 0.0)
        return np.where(x > EPS_TOKENS, np.maximum(1.0, np.ceil(x / self.tile - 1e-9)), 0.0)

    def cost(self, G, N, T):
        t = np.maximum(self.a + self.b * G + self.b2 * (T - G), self.c + self.beta * N)
        if self.traffic:
            t = np.maximum(t, self.c2 + self.gamma * N)
        return t

    def features(self):
        act = self.x > EPS_TOKENS
        gp = self.pgpu[act]
        xs = self.x[act]
        G = np.bincount(gp, minlength=self.g).astype(np.float64)
        N = np.bincount(gp, weights=xs, minlength=self.g)
        T = np.bincount(gp, weights=self.tl(xs), minlength=self.g)
        return G, N, T

    def load(self, shares: np.ndarray):
        self.x = shares[self.pe, self.pr].astype(np.float64).copy()
        self.G, self.N, self.T = self.features()

    def shares(self) -> np.ndarray:
        out = np.zeros(self.inst.replica_gpu.shape)
        out[self.pe, self.pr] = self.x
        return out

    def times(self):
        return self.cost(self.G, self.N, self.T)

    # ---------------------------------------------------------------- stage 1
    def seed(self):
        inst = self.inst
        counts = inst.counts
        pe, pgpu = self.pe, self.pgpu
        # experts whose replicas all sit on one GPU: forced, placed at once
        gmin = np.full(inst.n_experts, np.iinfo(np.int64).max)
        gmax = np.full(inst.n_experts, -1)
        np.minimum.at(gmin, pe, pgpu)
        np.maximum.at(gmax, pe, pgpu)
        live = inst.live
        forced = live & (gmin == gmax)
        first = self.ptr[:-1]
        self.x[:] = 0.0
        fe = np.flatnonzero(forced)
        self.x[first[fe]] = counts[fe]
        G, N, T = self.features()
        Gl, Nl, Tl = G.tolist(), N.tolist(), T.tolist()
        a, b, c, beta, b2, tile = self.a, self.b, self.c, self.beta, self.b2, self.tile
        c2, gamma, traffic = self.c2, self.gamma, self.traffic
        choice = np.flatnonzero(live & ~forced)
        choice = choice[np.argsort(-counts[choice], kind="stable")]
        ptr = self.ptr.tolist()
        pg = pgpu.tolist()
        x = self.x
        split = self.split_seed
        for e in choice.tolist():
            n = float(counts[e])
            nt = max(1.0, float(np.ceil(n / tile - 1e-9))) if b2 else 1.0
            best = None
            for p in range(ptr[e], ptr[e + 1]):
                h = pg[p]
                Gh, Nh, Th = Gl[h], Nl[h], Tl[h]
                old = max(a + b * Gh + b2 * (Th - Gh), c + beta * Nh)
                new = max(a + b * (Gh + 1) + b2 * (Th + nt - Gh - 1), c + beta * (Nh + n))
                if traffic:
                    old = max(old, c2 + gamma * Nh)
                    new = max(new, c2 + gamma * (Nh + n))
                key = (new, new - old, h)
                if best is None or key < best[0]:
                    best = (key, p, h)
            plan = None
            if split and ptr[e + 1] - ptr[e] > 1 and n > 1:
                plan = self._waterfill(e, n, Gl, Nl, Tl, ptr, pg, best[0][0])
            if plan is None:
                _, p, h = best
                x[p] = n
                Gl[h] += 1.0
                Nl[h] += n
                Tl[h] += nt
            else:
                for p, amount in plan:
                    h = pg[p]
                    x[p] = amount
                    Gl[h] += 1.0
                    Nl[h] += amount
                    Tl[h] += max(1.0, float(np.ceil(amount / tile - 1e-9))) if b2 else 1.0
        self.G, self.N, self.T = np.array(Gl), np.array(Nl), np.array(Tl)

    def _waterfill(self, e, n, Gl, Nl, Tl, ptr, pg, whole_cost):
        """Split expert e over its k least-loaded replica GPUs (k >= 2), levelling their
        token counts; return [(pair, tokens)] if some k beats ``whole_cost``, else None."""
        a, b, c, beta, b2, tile = self.a, self.b, self.c, self.beta, self.b2, self.tile
        c2, gamma, traffic = self.c2, self.gamma, self.traffic
        seen = {}
        for p in range(ptr[e], ptr[e + 1]):
            seen.setdefault(pg[p], p)  # one pair per distinct GPU
        cands = sorted(seen.items(), key=lambda kv: (Nl[kv[0]], kv[0]))
        best = None
        acc = 0.0
        for k in range(1, len(cands) + 1):
            acc += Nl[cands[k - 1][0]]
            if k == 1:
                continue
            level = (acc + n) / k
            if level <= Nl[cands[k - 1][0]]:  # the k-th GPU would receive nothing
                break
            worst = 0.0
            plan = []
            for h, p in cands[:k]:
                amount = level - Nl[h]
                nt = max(1.0, float(np.ceil(amount / tile - 1e-9))) if b2 else 1.0
                t = max(a + b * (Gl[h] + 1) + b2 * (Tl[h] + nt - Gl[h] - 1), c + beta * level)
                if traffic:
                    t = max(t, c2 + gamma * level)
                worst = max(worst, t)
                plan.append((p, amount))
            if best is None or worst < best[0]:
                best = (worst, plan)
        if best is not None and best[0] < whole_cost * (1 - 1e-12):
            return best[1]
        return None

    # ---------------------------------------------------------------- moves
    def _siblings(self, src: np.ndarray, exclude_gpu: np.ndarray):
        """All (i, j) with j a pair of i's expert on a GPU other than ``exclude_gpu[i]``."""
        e = self.pe[src]
        starts = self.ptr[e]
        lens = self.ptr[e + 1] - starts
        tot = int(lens.sum())
        if tot == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        rep_i = np.repeat(src, lens)
        offs = np.arange(tot) - np.repeat(np.cumsum(lens) - lens, lens)
        j = np.repeat(starts, lens) + offs
        keep = self.pgpu[j] != np.repeat(exclude_gpu, lens)
        return rep_i[keep], j[keep]

    def _evaluate(self, gb, i, j, whole_only, i2=None, j2=None):
        """Best delta and resulting max time for moves: share of pair i (on gb) to pair j
        (GPU h), then optionally all of pair i2 (on h) to pair j2 (GPU k).
        Returns (value[M], delta[M])."""
        x = self.x
        G, N, T = self.G, self.N, self.T
        h = self.pgpu[j]
        x1, xj = x[i], x[j]
        M = i.size
        chain = i2 is not None
        Gg0, Ng0, Tg0 = np.full(M, G[gb]), np.full(M, N[gb]), np.full(M, T[gb])
        Gh0, Nh0, Th0 = G[h].copy(), N[h].copy(), T[h].copy()
        Tg0 = Tg0 - self.tl(x1)  # tiles of the pair being moved are re-added below
        Th0 = Th0 - self.tl(xj)
        Gh0 = Gh0 + (xj <= EPS_TOKENS)
        third = np.zeros(M)
        if chain:
            x2, xk = x[i2], x[j2]
            k = self.pgpu[j2]
            Gh0 = Gh0 - 1.0
            Nh0 = Nh0 - x2
            Th0 = Th0 - self.tl(x2)
            on_g = k == gb
            addk = (xk <= EPS_TOKENS).astype(np.float64)
            dT = self.tl(xk + x2) - self.tl(xk)
            Gg0 = Gg0 + on_g * addk
            Ng0 = Ng0 + on_g * x2
            Tg0 = Tg0 + on_g * dT
            third = np.where(on_g, 0.0, self.cost(G[k] + addk, N[k] + x2, T[k] + dT))
        # candidate deltas [M, C]
        if whole_only:
            cand = x1[:, None]
        else:
            c, beta, c2, gamma = self.c, self.beta, self.c2, self.gamma
            Kflat = np.maximum(np.maximum(self.a + self.b * Gg0 + self.b2 * (Tg0 + 1 - Gg0),
                                          self.a + self.b * Gh0 + self.b2 * (Th0 + 1 - Gh0)), third)
            cols = [(Ng0 - Nh0) / 2.0, x1]
            if beta > 0:
                cols += [(c + beta * Ng0 - Kflat) / beta, (Kflat - c - beta * Nh0) / beta]
            if self.traffic and gamma > 0:
                cols += [(c2 + gamma * Ng0 - Kflat) / gamma, (Kflat - c2 - gamma * Nh0) / gamma]
                if beta + gamma > 0:
                    cols += [(c + beta * Ng0 - c2 - gamma * Nh0) / (beta + gamma),
                             (c2 + gamma * Ng0 - c - beta * Nh0) / (beta + gamma)]
            cand = np.clip(np.stack(cols, axis=1), 0.0, x1[:, None])
            if self.b2 > 0:
                tile = self.tile
                rem = x1[:, None] - cand
                to = xj[:, None] + cand
                cand = np.concatenate([cand,
                                       x1[:, None] - tile * np.floor(rem / tile),
                                       x1[:, None] - tile * np.ceil(rem / tile),
                                       tile * np.ceil(to / tile) - xj[:, None],
                                       tile * np.floor(to / tile) - xj[:, None]], axis=1)
            cand = np.clip(cand, 0.0, x1[:, None])
        rem = x1[:, None] - cand
        whole = rem <= EPS_TOKENS * np.maximum(1.0, x1[:, None])
        tg = self.cost(Gg0[:, None] - whole, Ng0[:, None] - cand, Tg0[:, None] + self.tl(np.where(whole, 0.0, rem)))
        th = self.cost(Gh0[:, None], Nh0[:, None] + cand, Th0[:, None] + self.tl(xj[:, None] + cand))
        val = np.maximum(np.maximum(tg, th), third[:, None])
        val = np.where(cand > EPS_TOKENS, val, np.inf)
        best = np.argmin(val, axis=1)
        rows = np.arange(M)
        return val[rows, best], cand[rows, best]

    def _apply(self, i, j, delta, i2=-1, j2=-1):
        x = self.x
        if delta >= x[i] - EPS_TOKENS * max(1.0, x[i]):
            delta = x[i]
        x[i] -= delta
        x[j] += delta
        if x[i] < EPS_TOKENS:
            x[i] = 0.0
        if i2 >= 0:
            x[j2] += x[i2]
            x[i2] = 0.0
        self.G, self.N, self.T = self.features()

    def improve(self, whole_only: bool, chains: bool, max_iter: int, fanout: int = 4):
        """Bottleneck local search; returns the number of accepted moves."""
        moves = 0
        for _ in range(max_iter):
            t = self.times()
            gb = int(np.argmax(t))
            tb = t[gb]
            if tb <= self.lb * (1 + 1e-12):  # provably optimal: nothing to gain
                break
            thresh = tb - _REL * max(1.0, tb)
            gp = self.gpu_pairs[gb]
            A = gp[self.x[gp] > EPS_TOKENS]
            if A.size == 0:
                break
            i, j = self._siblings(A, np.full(A.size, gb))
            if i.size == 0:
                break
            val, dl = self._evaluate(gb, i, j, whole_only)
            m = int(np.argmin(val))
            if val[m] < thresh:
                self._apply(int(i[m]), int(j[m]), float(dl[m]))
                moves += 1
                continue
            if not chains:
                break
            found = self._chain(gb, thresh, t, i, j, whole_only, fanout, val)
            if not found and (self.chain_depth is None or self.chain_depth > 2):
                found = self._augment(gb, thresh, self.chain_depth)
            if not found:
                break
            moves += 1
        return moves

    def _augment(self, gb, thresh, depth):
        """Breadth-first augmenting path of whole-expert moves gb -> v1 -> ... -> vk: each
        intermediate GPU receives one expert and sends another (its activation count is
        unchanged), the last one absorbs an activation.  This is the semi-matching
        augmenting path of Lemma 2, priced with the full model at every GPU it touches."""
        x = self.x
        Gl, Nl, Tl = self.G.tolist(), self.N.tolist(), self.T.tolist()
        a, b, c, beta, b2, tile = self.a, self.b, self.c, self.beta, self.b2, self.tile
        c2, gamma, traffic = self.c2, self.gamma, self.traffic

        def cost(G, N, T):
            v = max(a + b * G + b2 * (T - G), c + beta * N)
            return max(v, c2 + gamma * N) if traffic else v

        def tl(v):
            if v <= EPS_TOKENS:
                return 0.0
            return max(1.0, float(np.ceil(v / tile - 1e-9))) if b2 else 1.0

        pe, pgpu, ptr = self.pe, self.pgpu, self.ptr
        act = x > EPS_TOKENS
        active = {}
        for p in np.flatnonzero(act).tolist():
            active.setdefault(int(pgpu[p]), []).append(p)
        xs = x.tolist()
        pel = pe.tolist()
        pgl = pgpu.tolist()
        ptrl = ptr.tolist()
        # label-correcting search: a GPU is re-entered when a path brings it fewer tokens
        label = {gb: -1.0}
        parent = {}
        frontier = []

        def ancestors(v):
            seen = set()
            while v != gb:
                seen.add(v)
                v = parent[v][0]
            return seen

        def push(u, p, q, d):
            w = pgl[q]
            n_in = xs[p]
            if w == gb or (w in label and label[w] <= n_in):
                return
            if w in label and u != gb and w in ancestors(u):
                return
            label[w] = n_in
            parent[w] = (u, p, q)
            frontier.append((w, d, n_in))

        for p in sorted(active.get(gb, []), key=lambda p: xs[p]):
            xp = xs[p]
            if cost(Gl[gb] - 1, Nl[gb] - xp, Tl[gb] - tl(xp)) >= thresh:
                continue
            e = pel[p]
            for q in range(ptrl[e], ptrl[e + 1]):
                if pgl[q] != gb:
                    push(gb, p, q, 1)
        head = 0
        budget = 50 * self.g + len(frontier)
        while head < len(frontier) and head < budget:
            v, d, n_lab = frontier[head]
            head += 1
            if label.get(v) != n_lab:  # superseded by a better entry
                continue
            _, p_in, q_in = parent[v]
            n_in = xs[p_in]
            add = 1.0 if xs[q_in] <= EPS_TOKENS else 0.0
            dT = tl(xs[q_in] + n_in) - tl(xs[q_in])
            if cost(Gl[v] + add, Nl[v] + n_in, Tl[v] + dT) < thresh:
                # apply the path backwards from v
                node = v
                while node != gb:
                    u, p, q = parent[node]
                    x[q] += x[p]
                    x[p] = 0.0
                    node = u
                self.G, self.N, self.T = self.features()
                return True
            if depth is not None and d >= depth:
                continue
            e_in = pel[p_in]
            for p in active.get(v, []):
                e = pel[p]
                if e == e_in:
                    continue
                xp = xs[p]
                if cost(Gl[v] + add - 1, Nl[v] + n_in - xp, Tl[v] + dT - tl(xp)) >= thresh:
                    continue
                for q in range(ptrl[e], ptrl[e + 1]):
                    if pgl[q] != v:
                        push(v, p, q, d + 1)
        return False

    def _chain(self, gb, thresh, t, i, j, whole_only, fanout, single_val=None, cap=64):
        """2-step chains from the bottleneck gb: pair i -> pair j (GPU h), then a whole
        other expert off h to gb (a swap) or to its cheapest other replica GPU.

        To bound the work on large instances, at most ``cap`` first moves (those whose
        single-move value came closest to improving) and, per GPU h, the ``cap`` smallest
        active shares as second moves are combined."""
        if single_val is not None and i.size > cap:
            keep = np.argsort(single_val, kind="stable")[:cap]
            i, j = i[keep], j[keep]
        h = self.pgpu[j]
        if fanout and i.size > fanout:
            order = np.lexsort((t[h], i))
            i, j, h = i[order], j[order], h[order]
            first = np.r_[0, np.flatnonzero(np.diff(i)) + 1]
            rank = np.arange(i.size) - np.repeat(first, np.diff(np.r_[first, i.size]))
            keep = rank < fanout
            i, j, h = i[keep], j[keep], h[keep]
        hs = np.unique(h)
        onh = np.isin(self.pgpu, hs) & (self.x > EPS_TOKENS)
        B = np.flatnonzero(onh)
        if B.size == 0:
            return False
        if B.size > cap * hs.size:  # per GPU, the `cap` smallest active shares
            order = np.lexsort((self.x[B], self.pgpu[B]))
            B = B[order]
            gp = self.pgpu[B]
            first = np.r_[0, np.flatnonzero(np.diff(gp)) + 1]
            rank = np.arange(B.size) - np.repeat(first, np.diff(np.r_[first, B.size]))
            B = B[rank < cap]
        i2, j2 = self._siblings(B, self.pgpu[B])
        if i2.size == 0:
            return False
        k = self.pgpu[j2]
        onb = k == gb
        order = np.lexsort((t[k], i2))
        i2s, j2s = i2[order], j2[order]
        firsts = np.r_[True, i2s[1:] != i2s[:-1]]
        sel_i2 = np.concatenate([i2[onb], i2s[firsts]])
        sel_j2 = np.concatenate([j2[onb], j2s[firsts]])
        # group second moves by their source GPU, then join with first moves on h
        sec_gpu = self.pgpu[sel_i2]
        order = np.argsort(sec_gpu, kind="stable")
        sel_i2, sel_j2, sec_gpu = sel_i2[order], sel_j2[order], sec_gpu[order]
        ptr = np.searchsorted(sec_gpu, np.arange(self.g + 1))
        lens = ptr[h + 1] - ptr[h]
        tot = int(lens.sum())
        if tot == 0:
            return False
        I = np.repeat(i, lens)
        J = np.repeat(j, lens)
        idx = np.repeat(ptr[h], lens) + np.arange(tot) - np.repeat(np.cumsum(lens) - lens, lens)
        I2, J2 = sel_i2[idx], sel_j2[idx]
        ok = (self.pe[I2] != self.pe[I]) & (J2 != I)
        if not ok.any():
            return False
        I, J, I2, J2 = I[ok], J[ok], I2[ok], J2[ok]
        val, dl = self._evaluate(gb, I, J, whole_only, I2, J2)
        m = int(np.argmin(val))
        if not val[m] < thresh:
            return False
        self._apply(int(I[m]), int(J[m]), float(dl[m]), int(I2[m]), int(J2[m]))
        return True


@dataclass(frozen=True)
class TempoOptions:
    """tempo_fast's knobs, with named presets (:meth:`preset`) instead of stage switches.

    Presets
    -------
    ``"default"``
        Our solver: the greedy seed may water-fill an expert over its least-loaded replica
        GPUs, augmenting paths of any length after the 1- and 2-step chains, partial moves
        with 2-step follow-ups, the token-LP / round-robin ensemble with tolerance ``tau``, and
        (full replication) local-search restarts from the wrap-around and apportionment seeds.
    ``"paper"``
        Section 4.2 as written: whole-expert seed, chains truncated at depth 2, the four
        stages, no restarts.

    Fields
    ------
    seed : {"greedy", "whole", "static"}
        Stage 1 (greedy with water-filling, the paper's whole-expert greedy, or the static map
        for ablations).
    chains : bool
        Stage 2: whole-expert 1- and 2-step chains and longer augmenting paths; False also
        removes chain moves from stage 3.
    chain_depth : int >= 2 or None
        Longest augmenting path after the 2-step chains (None: unlimited, exact semi-matching
        in the beta -> 0 limit, Lemma 2; 2: the paper's truncation, no path beyond the 2-step
        chains).  The 1- and 2-step chains always run (with ``chains``), so a depth below 2
        would mean the same as 2 and is refused.
    local_search, partial : bool
        Stage 3, and whether it may split experts (``partial=False``: Table 2's "no partial
        moves").
    ensemble : bool
        Stage 4: score the token-LP candidates (``lp_variants``) and round robin (full
        replication) and switch when more than ``tau`` better (Proposition 1).
    tau : float
        Switching tolerance in [0, 1).
    max_iter : int
        Accepted moves per stage, at most (>= 0).
    fanout : int
        2-step chains: destination GPUs per first move (>= 0; 0: no limit).
    lp_variants : "auto" or tuple of {"vertex", "even", "highs"}
        "auto": the max-flow vertex, and the even split under full replication; "highs": the
        vertex HiGHS's simplex returns (:func:`tempo.policies.exact.token_lp_highs`, the
        ``ensemble_lp`` reading of the paper).
    restarts : bool
        Full replication: rerun the local search from the wrap-around and apportionment seeds
        (compiled backend only; the numpy reference has none).
    """

    seed: str = "greedy"
    chains: bool = True
    chain_depth: int | None = None
    local_search: bool = True
    partial: bool = True
    ensemble: bool = True
    tau: float = 0.01
    max_iter: int = 300
    fanout: int = 4
    lp_variants: object = "auto"
    restarts: bool = True

    def __post_init__(self):
        """Check every field (``TypeError`` / ``ValueError`` naming it): :func:`tempo.solve`
        and :meth:`resolve` build this, so the checks hold for every way in."""
        check.choice("tempo", "seed", self.seed, ("greedy", "whole", "static"))
        for name in ("chains", "local_search", "partial", "ensemble", "restarts"):
            check.flag("tempo", name, getattr(self, name))
        check.integer("tempo", "chain_depth", self.chain_depth, lambda v: v >= 2, ">= 2", optional=True)
        check.number("tempo", "tau", self.tau, lambda v: 0 <= v < 1, "in [0, 1)")
        check.integer("tempo", "max_iter", self.max_iter, lambda v: v >= 0, ">= 0")
        check.integer("tempo", "fanout", self.fanout, lambda v: v >= 0, ">= 0 (0: no limit)")
        v = self.lp_variants
        if not (isinstance(v, str) and v == "auto"):
            if isinstance(v, str) or not hasattr(v, "__iter__"):
                raise TypeError(f"tempo option lp_variants must be 'auto' or a tuple of ('vertex', 'even', 'highs'), "
                                f"got {v!r}")
            t = tuple(v)
            if not t or any(not isinstance(x, str) or x not in ("vertex", "even", "highs") for x in t):
                raise ValueError(f"tempo option lp_variants must be 'auto' or a non-empty tuple of ('vertex', 'even', 'highs'), "
                                 f"got {v!r}")

    @classmethod
    def preset(cls, name: str) -> "TempoOptions":
        if name not in PRESETS:
            raise ValueError(f"unknown tempo preset {name!r}; available: {', '.join(PRESETS)}")
        return PRESETS[name]

    @classmethod
    def resolve(cls, options=None, overrides=None) -> "TempoOptions":
        """Options from a preset name, a TempoOptions or None (default), with field overrides."""
        if options is None:
            base = PRESETS["default"]
        elif isinstance(options, str):
            base = cls.preset(options)
        elif isinstance(options, TempoOptions):
            base = options
        else:
            raise ValueError(f"options must be a preset name or a TempoOptions, got {type(options).__name__}")
        if overrides:
            bad = set(overrides) - set(cls.__dataclass_fields__)
            if bad:
                raise ValueError(f"unknown tempo option(s) {sorted(bad)}; fields: {', '.join(cls.__dataclass_fields__)}")
            base = replace(base, **overrides)
        return base


PRESETS = {"default": TempoOptions(),
           "paper": TempoOptions(seed="whole", chain_depth=2, restarts=False)}


@register("tempo", needs_model=True, options=TempoOptions, family="tempo", servable=True, color="#54a24b",
          label="TEMPO: tempo_fast, the makespan-aware dispatcher (Section 4.2)", order=90,
          variants={"tempo_paper": {"options": "paper"}})
def tempo_fast(inst: Instance, model: CostModel, options: TempoOptions | str | None = None, *,
               backend: str = "compiled", **overrides) -> Dispatch:
    """tempo_fast (Section 4.2): minimise the modeled makespan of Eq. 3 (with the tile and
    traffic terms when ``model`` has them).

    Parameters
    ----------
    options : TempoOptions, preset name ("default", "paper") or None (default)
        See :class:`TempoOptions`; keyword overrides of its fields (``seed=``, ``chains=``,
        ``tau=``, ...) apply on top, as the ablations of Tables 2 and 8 do.
    backend : {"compiled", "numpy"}
        "compiled" (default) runs every stage in machine code (:mod:`tempo.policies._compiled`,
        numba); "numpy" is the vectorised reference implementation, kept as the test oracle.
    """
    o = TempoOptions.resolve(options, overrides)
    if backend not in ("compiled", "numpy"):
        raise ValueError(f"backend must be 'compiled' or 'numpy', got {backend!r}")
    if backend == "compiled":
        return _tempo_compiled(inst, model, o)
    seed, chains, local_search, partial, ensemble = o.seed, o.chains, o.local_search, o.partial, o.ensemble
    tau, max_iter, fanout, chain_depth, lp_variants = o.tau, o.max_iter, o.fanout, o.chain_depth, o.lp_variants
    t0 = time.perf_counter()
    st = _State(inst, model)
    st.lb = model.lower_bound(inst)
    st.chain_depth = chain_depth
    if seed in ("greedy", "whole"):
        st.split_seed = seed == "greedy"
        st.seed()
    else:
        st.load(static(inst).shares)
    stages = {"seed": float(st.times().max(initial=0.0))}
    if st.P and chains:
        st.improve(whole_only=True, chains=True, max_iter=max_iter, fanout=fanout)
        stages["chains"] = float(st.times().max())
    full = inst.is_full_replication()
    if lp_variants == "auto":
        lp_variants = ("vertex", "even") if full else ("vertex",)
    cache = {}

    def candidate(name):
        if name not in cache:
            make = {"token_lp_vertex": token_lp_vertex, "token_lp_even": token_lp_even,
                    "token_lp_highs": token_lp_highs, "round_robin": round_robin}[name]
            sh = make(inst).shares
            cache[name] = (model.makespan(inst, sh), sh)
        return cache[name]

    names = [f"token_lp_{v}" for v in lp_variants] + (["round_robin"] if full else [])
    if st.P and local_search and ensemble:
        # Compute regime shortcut: if the bottleneck is token-bound and a token-LP candidate
        # attains the lower bound, it is optimal and local search cannot improve on it.
        G, N, T = st.G, st.N, st.T
        gb = int(np.argmax(st.times()))
        flat = st.a + st.b * G[gb] + st.b2 * (T[gb] - G[gb])
        if st.c + st.beta * N[gb] >= flat or (st.traffic and st.c2 + st.gamma * N[gb] >= flat):
            for name in names[:1]:
                ms, sh = candidate(name)
                if ms <= st.lb * (1 + 1e-9):
                    return Dispatch(sh.copy(), {"policy": "tempo", "makespan": ms, "chosen": name,
                                                "stages": {**stages, "shortcut": ms},
                                                "solve_s": time.perf_counter() - t0})
    if st.P and local_search:
        st.improve(whole_only=not partial, chains=chains, max_iter=max_iter, fanout=fanout)
        stages["local_search"] = float(st.times().max())
    shares = st.shares()
    best_ms = float(st.times().max(initial=0.0))
    chosen = "local_search"
    if ensemble and st.P:
        # Every candidate costs at least the lower bound; when that bound already rules out
        # a switch, skip building the candidates (same output, less time).
        if st.lb >= (1 - tau) * best_ms and not cache:
            names = []
            stages["ensemble_pruned"] = True
        cand_best = None
        for name in names:
            ms, sh = candidate(name)
            if cand_best is None or ms < cand_best[0]:
                cand_best = (ms, name, sh)
        if cand_best is not None and cand_best[0] < (1 - tau) * best_ms:
            best_ms, chosen, shares = cand_best[0], cand_best[1], cand_best[2].copy()
        stages["ensemble"] = best_ms
    return Dispatch(shares, {"policy": "tempo", "makespan": best_ms, "chosen": chosen,
                             "stages": stages, "solve_s": time.perf_counter() - t0})


_CHOSEN = ("local_search", "token_lp_vertex", "token_lp_even", "round_robin", "restart_wrap_around",
           "restart_apportion", "exchange", "token_lp_highs")


def exchange_pass(inst: Instance, model: CostModel, shares: np.ndarray, max_rounds: int = 32):
    """Pairwise exchanges on the bottleneck GPU (full replication only): swap the whole share
    of one of its experts with the whole share of an expert on another GPU when that lowers the
    larger of the two GPUs' times below the bottleneck's.  A neighbourhood the single moves and
    chains of the local search do not reach: with two experts per GPU and a floor-bound
    optimum, every single move adds an activation somewhere, while one exchange re-pairs two
    GPUs (e.g. 252+73 and 81+52 tokens -> 252+52 and 81+73 under DSv3's n* = 156 per
    activation).  Returns ``(shares, makespan)``; never worse than the input.  Vectorised over
    every (expert on the bottleneck, other GPU, expert there) triple."""
    from ..core.cost import EPS_TOKENS, tiles_of

    x = np.array(shares, dtype=np.float64, copy=True)
    t = model.gpu_times(inst, x)
    rep = inst.replica_gpu
    if rep.shape[1] != inst.n_gpus or not np.array_equal(rep, np.broadcast_to(np.arange(inst.n_gpus), rep.shape)):
        return x, float(t.max(initial=0.0))  # only the canonical full-replication layout: column = GPU
    G, N, T = model.gpu_features(inst, x)
    tile = model.tile
    for _ in range(max_rounds):
        g = int(np.argmax(t))
        P = np.flatnonzero(x[:, g] > EPS_TOKENS)
        if not P.size:
            break
        a = x[P, g]                                   # [p] tokens leaving g
        b = x                                         # [E, H] tokens of f on h (f leaves h)
        on = b > EPS_TOKENS
        on[:, g] = False
        if not on.any():
            break
        # candidates: e in P (axis 0), f (axis 1), h (axis 2)
        aa = a[:, None, None]
        bb = b[None, :, :]
        xfg = x[None, :, g][:, :, None]               # f's tokens already on g
        xeh = x[P][:, None, :]                        # [p, 1, H] e's tokens already on h
        same = P[:, None, None] == np.arange(x.shape[0])[None, :, None]
        # GPU g: loses a (expert e), gains b (expert f merges with f's share on g)
        Gg = G[g] - 1 + (xfg <= EPS_TOKENS)
        Ng = N[g] - aa + bb
        Tg = T[g] - tiles_of(aa, tile) - tiles_of(xfg, tile) + tiles_of(xfg + bb, tile)
        # GPU h: loses b (expert f), gains a (expert e merges with e's share on h)
        Gh = G[None, None, :] - 1 + (xeh <= EPS_TOKENS)
        Nh = N[None, None, :] - bb + aa
        Th = T[None, None, :] - tiles_of(bb, tile) - tiles_of(xeh, tile) + tiles_of(xeh + aa, tile)
        new = np.maximum(model.time(Gg, Ng, Tg), model.time(Gh, Nh, Th))
        new = np.where(on[None, :, :] & ~same, new, np.inf)
        k = np.unravel_index(int(np.argmin(new)), new.shape)
        if not new[k] < t[g] * (1 - 1e-12):
            break
        e, f, h = int(P[k[0]]), int(k[1]), int(k[2])
        ae, bf = x[e, g], x[f, h]
        y = x.copy()
        y[e, g] = 0.0
        y[f, g] += bf
        y[f, h] = 0.0
        y[e, h] += ae
        ty = model.gpu_times(inst, y)
        if not ty.max() < t.max() * (1 - 1e-12) and not (ty.max() <= t.max() and ty[g] < t[g]):
            break  # the exact price disagrees with the estimate: keep what we have
        x, t = y, ty
        G, N, T = model.gpu_features(inst, x)
    return x, float(t.max(initial=0.0))
_SEEDS = {"greedy": 0, "whole": 1, "static": 2}


def _compiled_args(model, o: TempoOptions, vertex, even):
    from . import _compiled as C

    return (C.params(model), _SEEDS[o.seed], bool(o.chains), bool(o.local_search), bool(o.partial),
            bool(o.ensemble), float(o.tau), int(o.max_iter), int(o.fanout or 0),
            -1 if o.chain_depth is None else int(o.chain_depth), bool(vertex), int(even), 64, bool(o.restarts))


def _tempo_compiled(inst: Instance, model: CostModel, o: TempoOptions) -> Dispatch:
    """tempo_fast on the compiled path (same stages and options as the numpy reference)."""
    from . import _compiled as C

    t0 = time.perf_counter()
    lp_variants = o.lp_variants
    if lp_variants == "auto":
        even = 2
        lp_variants = ("vertex",)
    elif "highs" not in lp_variants:
        bad = set(lp_variants) - {"vertex", "even"}
        if bad:
            raise ValueError(f"lp_variants must hold 'vertex', 'even' and/or 'highs', got {sorted(bad)}")
        even = 1 if "even" in lp_variants and inst.is_full_replication() else 0
        if "even" in lp_variants and not even:
            # the restricted even split is a QP: run the reference path, which builds it
            return tempo_fast(inst, model, o, backend="numpy")
    if "highs" in lp_variants:
        shares, ms, chosen, st = _solve_highs_ensemble(inst, model, o, tuple(lp_variants))
    else:
        shares, ms, chosen, st = C.solve(inst.counts, inst.replica_gpu, inst.n_gpus,
                                         *_compiled_args(model, o, "vertex" in lp_variants, even))
    if o.restarts and o.local_search and inst.is_full_replication() and inst.n_experts * inst.n_gpus <= 4096:
        x, ms2 = exchange_pass(inst, model, shares)
        if ms2 < ms * (1 - 1e-12):
            shares, ms, st = x, ms2, st.copy()
            st[3] = ms2
            chosen = _CHOSEN.index("exchange")
    stages = {"seed": float(st[0])}
    for k, name in ((1, "chains"), (2, "local_search"), (3, "ensemble")):
        if st[k] == st[k]:
            stages[name] = float(st[k])
    if st[4] == 1.0:
        stages["shortcut"] = float(ms)
    elif st[4] == 2.0:
        stages["ensemble_pruned"] = True
    return Dispatch(shares, {"policy": "tempo", "makespan": float(ms), "chosen": _CHOSEN[chosen],
                             "stages": stages, "solve_s": time.perf_counter() - t0})


def _solve_highs_ensemble(inst: Instance, model: CostModel, o: TempoOptions, lp_variants: tuple):
    """Stages 1-3 compiled, stage 4 (Section 4.2) here, for ``lp_variants`` holding ``"highs"``
    (the HiGHS vertex is a highspy call, not compiled code): score each token-LP candidate of
    ``lp_variants`` and, under full replication, round robin A3; switch when the best is more
    than ``tau`` better (Proposition 1).  The candidates are skipped when the lower bound
    already rules out a switch (exact, as on the compiled path).  No compute-regime shortcut:
    Section 4.2 has none.  Returns what ``_compiled.solve`` returns."""
    from . import _compiled as C

    shares, ms, chosen, st = C.solve(inst.counts, inst.replica_gpu, inst.n_gpus,
                                     *_compiled_args(model, replace(o, ensemble=False), False, 0))
    if o.ensemble and inst.live.any():
        if model.lower_bound(inst) >= (1 - o.tau) * ms:
            st[4] = 2.0
        else:
            make = {"vertex": token_lp_vertex, "even": token_lp_even, "highs": token_lp_highs}
            names = [f"token_lp_{v}" for v in lp_variants] + (["round_robin"] if inst.is_full_replication() else [])
            best = None
            for name in names:
                sh = (round_robin(inst) if name == "round_robin" else make[name[len("token_lp_"):]](inst)).shares
                m = model.makespan(inst, sh)
                if best is None or m < best[0]:
                    best = (m, name, sh)
            if best[0] < (1 - o.tau) * ms:
                ms, chosen, shares = best[0], _CHOSEN.index(best[1]), best[2].copy()
        st[3] = ms
    return shares, ms, chosen, st


def solve_layers(counts, replica_gpu, n_gpus: int, model: CostModel, options: TempoOptions | str | None = None,
                 **overrides) -> np.ndarray:
    """tempo_fast (compiled; ``options`` as for :func:`tempo_fast`) for every layer of a model at once.

    Parameters
    ----------
    counts : int64[L, E]
        Tokens per layer and logical expert.
    replica_gpu : int64[L, E, R]
        Each layer's replica layout (:attr:`Instance.replica_gpu`, ``-1`` for unused slots).
    n_gpus : int
    model : CostModel

    Returns
    -------
    float64[L, E, R]: each layer's shares, as ``tempo_fast(Instance(counts[l], replica_gpu[l],
    n_gpus), model).shares``, without building an Instance or a Dispatch per layer (the
    whole-model refresh of Section 4.4).
    """
    from . import _compiled as C

    counts = np.asarray(counts)
    rep = np.asarray(replica_gpu)
    if counts.ndim != 2 or rep.ndim != 3 or rep.shape[:2] != counts.shape:
        raise ValueError(f"counts must be [L, E] and replica_gpu [L, E, R] with the same L, E; got "
                         f"{counts.shape} and {rep.shape}")
    if not isinstance(n_gpus, (int, np.integer)) or n_gpus < 1:
        raise ValueError(f"n_gpus must be a positive integer, got {n_gpus!r}")
    if not np.issubdtype(counts.dtype, np.integer) or (counts.size and counts.min() < 0):
        raise ValueError("counts must be non-negative integers")
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    rep = np.ascontiguousarray(rep, dtype=np.int64)
    if rep.size and (rep.min() < -1 or rep.max() >= n_gpus):
        raise ValueError(f"replica_gpu entries must lie in [-1, n_gpus={n_gpus})")
    orphan = (counts > 0) & ~(rep >= 0).any(axis=2)
    if orphan.any():
        l, e = np.argwhere(orphan)[0]
        raise ValueError(f"replica_gpu: layer {l} expert {e} has tokens but no replica")
    o = TempoOptions.resolve(options, overrides)
    if o.lp_variants != "auto":
        raise ValueError("solve_layers scores the token-LP candidates of lp_variants='auto' only")
    args = _compiled_args(model, o, True, 2)
    out = np.empty(rep.shape)
    for layer in range(counts.shape[0]):
        out[layer] = C.solve(counts[layer], rep[layer], int(n_gpus), *args)[0]
    return out
