"""Exact solvers: the fixed-charge makespan MILP of Eq. 3 (the oracle), the token LP of
Lemma 1 (b -> 0) and the optimal semi-matching of Lemma 2 (beta -> 0).

The token LP and the semi-matching are computed combinatorially with max-flow (scipy), not
with a general LP solve, so they are cheap enough to sit inside tempo_fast's ensemble.
"""
from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

from ..cost import CostModel
from ..instance import Dispatch, Instance
from . import register
from ._util import slot_on_gpu


_HIGHS_READY = False


def new_highs():
    """A silent ``highspy.Highs``.  HiGHS prints a banner to the C-level stdout when the
    first instance is created, before any option can be set; we create that one with file
    descriptor 1 pointed at /dev/null."""
    global _HIGHS_READY
    import highspy

    if not _HIGHS_READY:
        import os
        import sys

        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
        _HIGHS_READY = True
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


# ---------------------------------------------------------------------------- max-flow core
class _Bipartite:
    """source -> live experts -> GPUs (their replica GPUs) -> sink, as a reusable graph."""

    def __init__(self, inst: Instance):
        self.inst = inst
        live = np.flatnonzero(inst.live)
        self.live = live
        L, g = live.size, inst.n_gpus
        self.L, self.g = L, g
        has = np.zeros((L, g), dtype=bool)
        e, r = np.nonzero(inst.valid[live])
        has[e, inst.replica_gpu[live][e, r]] = True
        self.pe, self.pg = np.nonzero(has)  # expert-GPU edges, deduplicated
        self.s, self.t = 0, 1 + L + g
        n = L + g + 2
        self.n = n
        src = np.concatenate([np.zeros(L, np.int64), 1 + self.pe, 1 + L + np.arange(g)])
        dst = np.concatenate([1 + np.arange(L), 1 + L + self.pg, np.full(g, self.t)])
        self.src, self.dst = src, dst
        self.n_pair = self.pe.size

    def flow(self, exp_cap, pair_cap, gpu_cap):
        """Max-flow with the given capacities; returns (value, caps[edges], flow[edges])."""
        caps = np.concatenate([exp_cap, pair_cap, gpu_cap]).astype(np.int64)
        if caps.max(initial=0) >= 2**31:
            raise OverflowError("capacities exceed int32; instance too large for the flow solver")
        if not hasattr(self, "_C"):
            # edges are already sorted by source node, and by target within a source
            indptr = np.r_[0, np.cumsum(np.bincount(self.src, minlength=self.n))].astype(np.int32)
            self._C = sp.csr_matrix((caps.astype(np.int32), self.dst.astype(np.int32), indptr), shape=(self.n, self.n))
        else:
            self._C.data = caps.astype(np.int32)
        res = maximum_flow(self._C, self.s, self.t, method="dinic")
        Fd = res.flow.toarray()
        return res.flow_value, caps, Fd[self.src, self.dst]

    def pair_flow(self, edge_flow):
        return edge_flow[self.L:self.L + self.n_pair]

    def source_side(self, caps, edge_flow):
        """bool[n]: nodes reachable from the source in the residual graph (min-cut side),
        by frontier expansion over the residual edge list (no sparse matrices needed)."""
        fwd = caps - edge_flow > 0
        back = edge_flow > 0
        rs = np.concatenate([self.src[fwd], self.dst[back]])
        rd = np.concatenate([self.dst[fwd], self.src[back]])
        side = np.zeros(self.n, dtype=bool)
        side[self.s] = True
        while True:
            new = rd[side[rs] & ~side[rd]]
            if new.size == 0:
                return side
            side[new] = True

    def to_shares(self, pair_values) -> np.ndarray:
        """Expert-GPU amounts -> shares on the first slot of each expert on that GPU."""
        inst = self.inst
        slot = slot_on_gpu(inst)
        e = self.live[self.pe]
        shares = np.zeros(inst.replica_gpu.shape)
        np.add.at(shares, (e, slot[e, self.pg]), pair_values)
        return shares


def _densest_set(graph: "_Bipartite", n: np.ndarray) -> tuple[int, int]:
    """Hall density over all GPU sets at once (g <= 16): tokens of experts whose replicas all
    lie in S, by a subset-sum (zeta) transform over the 2^g sets; returns (W, |S|) of the
    densest set, whose ratio is the optimal min-max tokens per GPU."""
    mask = np.zeros(graph.L, np.int64)
    np.add.at(mask, graph.pe, np.left_shift(1, graph.pg))  # pairs are deduplicated: sum == OR
    tok = np.bincount(mask, weights=n, minlength=1 << graph.g)
    for i in range(graph.g):
        v = tok.reshape(-1, 2, 1 << i)
        v[:, 1, :] += v[:, 0, :]
    size = np.bitwise_count(np.arange(1 << graph.g, dtype=np.uint32)).astype(np.float64)
    size[0] = np.inf
    best = int(np.argmax(tok / size))
    return int(round(tok[best])), int(size[best])


def min_max_tokens(inst: Instance) -> float | None:
    """The least possible largest per-GPU token load over all dispatches (the token LP's
    value, Hall's condition), by the subset transform when ``n_gpus <= 16``; None above
    (use :func:`token_lp_value`).  A lower bound for every dispatch's ``N`` on its busiest GPU."""
    if inst.n_gpus > 16:
        return None
    if inst.total_tokens == 0:
        return 0.0
    graph = _Bipartite(inst)
    W, k = _densest_set(graph, inst.counts[graph.live].astype(np.float64))
    return W / k


def token_lp_value(inst: Instance) -> float:
    """The optimal min-max tokens per GPU (Lemma 1's objective), exactly."""
    return _token_lp(inst)[0]


def _token_lp(inst: Instance):
    """Exact min-max token split by Dinkelbach iterations over max-flow cuts.

    The optimum is ``max over GPU sets S of (tokens of experts whose replicas all lie in S)
    / |S|`` (Hall's condition).  Start from z = total/g; if the flow with GPU capacity z does
    not route every token, the min cut names a denser set; repeat with its density.  With
    z = W/k every capacity is scaled by k to stay integral.
    """
    if inst.total_tokens == 0:
        return 0.0, np.zeros(inst.replica_gpu.shape)
    graph = _Bipartite(inst)
    n = inst.counts[graph.live].astype(np.int64)
    W, k = int(n.sum()), inst.n_gpus
    if graph.g <= 12:
        # the densest GPU set is the optimum, so the first max-flow below already saturates
        # (2^g subsets: worth it against extra max-flow calls only for small EP groups)
        W, k = _densest_set(graph, n)
    else:
        # start from the larger of two valid lower bounds: total/g and each expert over its GPUs
        deg = np.bincount(graph.pe, minlength=graph.L)
        e = int(np.argmax(n / deg))
        if n[e] * k > W * deg[e]:
            W, k = int(n[e]), int(deg[e])
    for _ in range(inst.n_gpus + 2):
        val, C, F = graph.flow(n * k, n[graph.pe] * k, np.full(graph.g, W))
        if val >= n.sum() * k:
            return W / k, graph.to_shares(graph.pair_flow(F) / k)
        side = graph.source_side(C, F)
        exp_in = side[1 : 1 + graph.L]
        gpu_in = side[1 + graph.L : 1 + graph.L + graph.g]
        W_new, k_new = int(n[exp_in].sum()), int(gpu_in.sum())
        if k_new == 0 or W_new * k <= W * k_new:  # no progress: numerical guard
            raise RuntimeError("token LP max-flow iteration failed to make progress")
        W, k = W_new, k_new
    raise RuntimeError("token LP max-flow did not converge")


def token_lp_vertex(inst: Instance) -> Dispatch:
    """A sparse (basic) optimal token-LP solution: min-max tokens per GPU from max-flow."""
    t0 = time.perf_counter()
    z, shares = _token_lp(inst)
    return Dispatch(shares, {"policy": "token_lp", "variant": "vertex", "max_tokens": z,
                             "solve_s": time.perf_counter() - t0})


def token_lp_even(inst: Instance) -> Dispatch:
    """The optimal token-LP solution nearest (Euclidean) to the even split over replicas.

    Under full replication the even split itself is optimal (every GPU gets total/g).
    Otherwise: compute the optimum z* by max-flow, then project the even split onto
    ``{rows conserve tokens, per-GPU tokens <= z*}`` with HiGHS's QP solver.
    """
    t0 = time.perf_counter()
    live = inst.live
    if inst.is_full_replication():
        shares = np.zeros(inst.replica_gpu.shape)
        slot = slot_on_gpu(inst)
        e = np.flatnonzero(live)
        for gpu in range(inst.n_gpus):
            shares[e, slot[e, gpu]] += inst.counts[e] / inst.n_gpus
        return Dispatch(shares, {"policy": "token_lp", "variant": "even",
                                 "max_tokens": inst.total_tokens / inst.n_gpus,
                                 "solve_s": time.perf_counter() - t0})
    z, vertex_shares = _token_lp(inst)
    shares = _project_even(inst, z, vertex_shares)
    return Dispatch(shares, {"policy": "token_lp", "variant": "even", "max_tokens": z,
                             "solve_s": time.perf_counter() - t0})


def _project_rows(v: np.ndarray, mask: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Row-wise Euclidean projection of ``v`` onto ``{x >= 0, x = 0 off mask, sum x = n}``
    (water-filling: ``x = max(0, v - t)`` with the row's threshold ``t``)."""
    big = np.where(mask, v, -np.inf)
    s = -np.sort(-big, axis=1)
    k = np.arange(1, v.shape[1] + 1)[None, :]
    cnt = mask.sum(axis=1, keepdims=True)
    cs = np.cumsum(np.where(np.isfinite(s), s, 0.0), axis=1)
    t = (cs - n[:, None]) / k
    ok = (k <= cnt) & (np.where(np.isfinite(s), s, -np.inf) - t > 0)
    rho = np.where(ok.any(axis=1), (ok * k).max(axis=1), 1) - 1
    thr = t[np.arange(v.shape[0]), rho]
    return np.where(mask, np.maximum(0.0, v - thr[:, None]), 0.0)


def _project_even(inst: Instance, z: float, vertex: np.ndarray) -> np.ndarray:
    """Nearest point to the even split on the token-LP optimal face, by its dual.

    Minimise ``||x - u||^2`` subject to row sums ``n_e`` and per-GPU tokens ``<= z``.  For
    GPU prices ``mu >= 0`` the inner minimiser is a row-wise water-filling of ``u - mu``;
    the concave dual is maximised with L-BFGS-B (one variable per GPU).  A residual overload
    (solver tolerance) is removed by blending toward the max-flow vertex, which keeps the
    result exactly min-max optimal.
    """
    from scipy.optimize import minimize

    live = inst.live
    mask = inst.valid & live[:, None]
    n = np.where(live, inst.counts, 0).astype(np.float64)
    u = np.where(mask, n[:, None] / np.maximum(inst.n_replicas, 1)[:, None], 0.0)
    gid = np.where(mask, inst.replica_gpu, 0)
    g = inst.n_gpus
    scale = max(z, 1.0)

    def loads(x):
        return np.bincount(gid[mask], weights=x[mask], minlength=g)

    def neg_dual(mu):
        x = _project_rows(u - mu[gid] * scale / 2.0, mask, n)
        L = loads(x)
        val = ((x - u) ** 2).sum() + scale * mu @ (L - z)
        return -val / scale**2, -(L - z) / scale

    res = minimize(neg_dual, np.zeros(g), jac=True, method="L-BFGS-B", bounds=[(0, None)] * g,
                   options={"maxiter": 500, "gtol": 1e-12, "ftol": 1e-15})
    x = _project_rows(u - res.x[gid] * scale / 2.0, mask, n)
    L, Lv = loads(x), loads(vertex)
    over = L > z * (1 + 1e-12)
    if over.any():
        theta = np.max((L[over] - z) / np.maximum(L[over] - Lv[over], 1e-300))
        x = (1 - min(1.0, theta)) * x + min(1.0, theta) * vertex
    x[x < 1e-9 * np.maximum(n, 1.0)[:, None]] = 0.0
    rows = x.sum(axis=1)
    return x * np.divide(n, rows, out=np.zeros_like(n), where=rows > 0)[:, None]


# ---------------------------------------------------------------------------- semi-matching
@register("semi_matching")
def semi_matching(inst: Instance, model: CostModel | None = None) -> Dispatch:
    """Exact minimum of the largest activated-expert count per GPU (Lemma 2, beta -> 0).

    Each live expert goes whole to one replica (splitting only adds activations).  The
    optimal cap is found by binary search with a bipartite b-matching (max-flow) test; the
    result is an optimal semi-matching's bottleneck [Harvey et al. 2006].
    """
    t0 = time.perf_counter()
    if not inst.live.any():
        return Dispatch(np.zeros(inst.replica_gpu.shape), {"policy": "semi_matching", "max_experts": 0})
    graph = _Bipartite(inst)
    L = graph.L
    ones = np.ones(L, np.int64)
    lo, hi = math.ceil(L / inst.n_gpus), L
    best = None
    first = True
    while lo <= hi:
        mid = lo if first else (lo + hi) // 2  # the bound ceil(L/g) is usually optimal: try it first
        first = False
        val, C, F = graph.flow(ones, np.ones(graph.n_pair, np.int64), np.full(graph.g, mid))
        if val >= L:
            best, hi = (mid, graph.pair_flow(F)), mid - 1
        else:
            lo = mid + 1
    cap, pf = best
    pf = np.rint(pf)
    shares = graph.to_shares(pf * inst.counts[graph.live][graph.pe])
    return Dispatch(shares, {"policy": "semi_matching", "max_experts": cap,
                             "solve_s": time.perf_counter() - t0})


# ---------------------------------------------------------------------------- MILP oracle
@register("milp")
def milp(inst: Instance, model: CostModel, time_limit: float = 10.0, warm_start: bool = True,
         mip_rel_gap: float = 1e-6, threads: int = 1) -> Dispatch:
    """The exact fixed-charge makespan MILP of Eq. 3, solved by HiGHS.

    Variables per live (expert, replica slot): share ``x >= 0``, activation ``z`` binary with
    ``x <= n_e z``; with ``b2 > 0`` an integer tile count ``k`` with ``x <= tile*k`` and
    ``k >= z`` (Eq. 2); and the makespan ``M``.  Per GPU: ``a + b*sum z + b2*sum(k - z) <= M``,
    ``c + beta*sum x <= M`` and, with the traffic piece, ``c2 + gamma*sum x <= M`` (Eq. 4).

    Returns the incumbent; ``meta`` holds ``objective``, ``lower_bound`` (HiGHS's proven dual
    bound), ``gap`` and ``optimal``.  With ``warm_start`` the tempo_fast solution seeds the
    search, so the incumbent is never worse than tempo's.
    """
    import highspy

    if time_limit <= 0:
        raise ValueError(f"time_limit must be positive, got {time_limit}")
    t0 = time.perf_counter()
    e_idx, r_idx = np.nonzero(inst.valid & inst.live[:, None])
    if e_idx.size == 0:
        d = Dispatch(np.zeros(inst.replica_gpu.shape))
        ms = model.makespan(inst, d)
        d.meta.update(policy="milp", objective=ms, lower_bound=ms, gap=0.0, optimal=True, status="trivial")
        return d
    P = e_idx.size
    n = inst.counts.astype(np.float64)
    gpu = inst.replica_gpu[e_idx, r_idx]
    g = inst.n_gpus
    tiles = model.has_tiles
    # column blocks: x [P], z [P], k [P] (tiles only), M [1]
    nx = P
    ox, oz, ok = 0, P, 2 * P
    oM = 3 * P if tiles else 2 * P
    ncol = oM + 1
    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0
    inf = highspy.kHighsInf

    def add_rows(rr, cc, vv, l, u):
        nonlocal r
        rows.append(np.asarray(rr) + r)
        cols.append(np.asarray(cc))
        vals.append(np.asarray(vv, dtype=np.float64))
        lo.append(np.asarray(l, dtype=np.float64))
        hi.append(np.asarray(u, dtype=np.float64))
        r += len(l)

    live = np.flatnonzero(inst.live)
    row_of = np.full(inst.n_experts, -1)
    row_of[live] = np.arange(live.size)
    # conservation: sum_r x = n_e ; at least one activation per live expert
    add_rows(row_of[e_idx], ox + np.arange(P), np.ones(P), n[live], n[live])
    add_rows(row_of[e_idx], oz + np.arange(P), np.ones(P), np.ones(live.size), np.full(live.size, inf))
    # x - n z <= 0
    ar = np.arange(P)
    add_rows(np.r_[ar, ar], np.r_[ox + ar, oz + ar], np.r_[np.ones(P), -n[e_idx]], np.full(P, -inf), np.zeros(P))
    if tiles:
        add_rows(np.r_[ar, ar], np.r_[ox + ar, ok + ar], np.r_[np.ones(P), -float(model.tile) * np.ones(P)],
                 np.full(P, -inf), np.zeros(P))
        add_rows(np.r_[ar, ar], np.r_[oz + ar, ok + ar], np.r_[np.ones(P), -np.ones(P)], np.full(P, -inf), np.zeros(P))
    # per-GPU pieces
    gg = np.arange(g)
    if tiles:
        add_rows(np.r_[gpu, gpu, gg], np.r_[oz + ar, ok + ar, np.full(g, oM)],
                 np.r_[np.full(P, model.b - model.b2), np.full(P, model.b2), -np.ones(g)],
                 np.full(g, -inf), np.full(g, -model.a))
    else:
        add_rows(np.r_[gpu, gg], np.r_[oz + ar, np.full(g, oM)], np.r_[np.full(P, model.b), -np.ones(g)],
                 np.full(g, -inf), np.full(g, -model.a))
    add_rows(np.r_[gpu, gg], np.r_[ox + ar, np.full(g, oM)], np.r_[np.full(P, model.beta), -np.ones(g)],
             np.full(g, -inf), np.full(g, -model.c))
    if model.has_traffic:
        add_rows(np.r_[gpu, gg], np.r_[ox + ar, np.full(g, oM)], np.r_[np.full(P, model.gamma), -np.ones(g)],
                 np.full(g, -inf), np.full(g, -model.c2))
    A = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, ncol))
    col_lo = np.zeros(ncol)
    col_hi = np.full(ncol, inf)
    col_hi[ox:ox + P] = n[e_idx]
    col_hi[oz:oz + P] = 1.0
    if tiles:
        col_hi[ok:ok + P] = np.ceil(n[e_idx] / model.tile)
    col_lo[oM] = max(model.a, model.c)
    cost = np.zeros(ncol)
    cost[oM] = 1.0
    integrality = [highspy.HighsVarType.kContinuous] * ncol
    for j in range(oz, oz + P):
        integrality[j] = highspy.HighsVarType.kInteger
    if tiles:
        for j in range(ok, ok + P):
            integrality[j] = highspy.HighsVarType.kInteger

    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = ncol, r
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, col_lo, col_hi
    lp.row_lower_, lp.row_upper_ = np.concatenate(lo), np.concatenate(hi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr
    lp.a_matrix_.index_ = A.indices
    lp.a_matrix_.value_ = A.data
    lp.integrality_ = integrality
    h = new_highs()
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    h.setOptionValue("threads", int(threads))
    h.setOptionValue("random_seed", 0)
    h.passModel(lp)

    warm = None
    if warm_start:
        from .tempo_fast import tempo_fast

        warm = tempo_fast(inst, model)
        xs = warm.shares[e_idx, r_idx]
        z = (xs > 1e-9).astype(np.float64)
        col = np.zeros(ncol)
        col[ox:ox + P] = xs
        col[oz:oz + P] = z
        if tiles:
            col[ok:ok + P] = np.ceil(xs / model.tile - 1e-9)
        col[oM] = model.makespan(inst, warm)
        sol = highspy.HighsSolution()
        sol.col_value = col
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    info = h.getInfo()
    status = h.modelStatusToString(h.getModelStatus())
    has_sol = info.primal_solution_status == highspy.kSolutionStatusFeasible
    if has_sol:
        x = np.clip(np.asarray(h.getSolution().col_value)[ox:ox + nx], 0.0, None)
        x[x < 1e-9] = 0.0  # solver noise is not an activation
        shares = np.zeros(inst.replica_gpu.shape)
        shares[e_idx, r_idx] = x
        rows_sum = shares.sum(axis=1)
        scale = np.divide(n, rows_sum, out=np.zeros_like(n), where=rows_sum > 0)
        shares *= scale[:, None]
    elif warm is not None:
        shares = warm.shares
    else:
        raise RuntimeError(f"MILP found no feasible solution within {time_limit}s (status {status})")
    d = Dispatch(shares)
    obj = model.makespan(inst, d)
    if warm is not None:
        wobj = model.makespan(inst, warm)
        if wobj < obj:  # numerical cleanup of the MILP point can cost a hair; keep the better
            d, obj = Dispatch(warm.shares.copy()), wobj
    lb = float(info.mip_dual_bound) if has_sol else float("nan")
    lb = min(lb, obj) if math.isfinite(lb) else lb
    gap = (obj - lb) / obj if obj > 0 and math.isfinite(lb) else 0.0
    d.meta.update(policy="milp", objective=obj, lower_bound=lb, gap=gap,
                  optimal=status == "Optimal" or gap <= max(mip_rel_gap, 1e-6) * 10,
                  status=status, solve_s=time.perf_counter() - t0)
    return d
