"""Exact polynomial solvers: the token LP of Lemma 1 (b -> 0) and, by max-flow, the optimal
semi-matching of Lemma 2 (beta -> 0) (the registered ``semi_matching`` policy is tempo_fast's
augmenting-path balancer, :mod:`tempo.policies.tempo_fast.balancer`).  The fixed-charge MILP of Eq. 3 is in :mod:`tempo.policies.milp`.

The token LP and the semi-matching are computed combinatorially with max-flow (scipy), not
with a general LP solve, so they are cheap enough to sit inside tempo_fast's ensemble.
"""
from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

from ..core.instance import Dispatch, Instance
from ._fallback import mark_fallback
from ._util import slot_on_gpu

#: work limits of the even split's bounded steps, counted in iterations so that the same instance
#: gives the same answer on any machine and under any load: L-BFGS-B iterations of the dual ascent,
#: and the HiGHS QP's iterations times its variables (an iteration costs about one pass over
#: them: 3e6 is about 2 s at E = 160, R = 35, g = 48 on one core)
EVEN_DUAL_ITERATIONS = 1000
EVEN_QP_WORK = 3_000_000
#: simplex iterations of the small LP that picks dual multipliers (:func:`_dual_gauge`)
GAUGE_ITERATIONS = 10_000


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
    # one thread everywhere: HiGHS's thread scheduler is process-wide and refuses a thread
    # count different from the one it was first started with
    h.setOptionValue("threads", 1)
    return h


class RowBlocks:
    """A HiGHS model's constraint rows, added a block at a time: :meth:`add` takes a block's
    entries (row numbers counted within the block) and bounds, :meth:`lp` builds the model."""

    def __init__(self):
        self.rows, self.cols, self.vals, self.lo, self.hi = [], [], [], [], []
        self.n = 0

    def add(self, rr, cc, vv, l, u):
        """A block of ``len(l)`` rows: entries ``(rr, cc, vv)``, bounds ``l <= row <= u``."""
        self.rows.append(np.asarray(rr) + self.n)
        self.cols.append(np.asarray(cc))
        self.vals.append(np.asarray(vv, dtype=np.float64))
        self.lo.append(np.asarray(l, dtype=np.float64))
        self.hi.append(np.asarray(u, dtype=np.float64))
        self.n += len(l)

    def lp(self, cost, col_lo, col_hi, integrality):
        """``highspy.HighsLp``: minimise ``cost @ x`` over ``col_lo <= x <= col_hi`` and the rows
        (column-wise), ``integrality`` a list of ``highspy.HighsVarType``."""
        import highspy
        import scipy.sparse as sp

        ncol = len(cost)
        A = sp.csc_matrix((np.concatenate(self.vals), (np.concatenate(self.rows), np.concatenate(self.cols))),
                          shape=(self.n, ncol))
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = ncol, self.n
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, col_lo, col_hi
        lp.row_lower_, lp.row_upper_ = np.concatenate(self.lo), np.concatenate(self.hi)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr
        lp.a_matrix_.index_ = A.indices
        lp.a_matrix_.value_ = A.data
        lp.integrality_ = integrality
        return lp


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


def token_lp_value(inst: Instance) -> float:
    """The optimal min-max tokens per GPU (Lemma 1's objective), exactly."""
    return _token_lp(inst)[0]


def _token_lp(inst: Instance):
    """Exact min-max token split (Lemma 1): Dinkelbach iterations over max-flow cuts on the
    compiled int64 Dinic solver (:func:`tempo.policies.tempo_fast.maxflow.token_lp`); returns
    ``(z*, shares)`` with shares a max-flow vertex.  :func:`_token_lp_scipy` is the same
    iteration on scipy's int32 max-flow, kept as the test oracle."""
    if inst.total_tokens == 0:
        return 0.0, np.zeros(inst.replica_gpu.shape)
    from .tempo_fast.layout import pairs_of
    from .tempo_fast.maxflow import token_lp

    pairs = pairs_of(inst.counts, inst.replica_gpu, inst.n_gpus)
    x = np.zeros(pairs.pe.size)
    W, k = token_lp(inst.counts, pairs, inst.n_gpus, x)
    if W < 0:
        raise RuntimeError("token LP max-flow iteration failed to make progress")
    shares = np.zeros(inst.replica_gpu.shape)
    shares[pairs.pe, pairs.pr] = x
    return W / k, shares


def _token_lp_scipy(inst: Instance):
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


#: Seconds HiGHS may spend on :func:`token_lp_highs` before it falls back to the max-flow vertex.
HIGHS_TIME_LIMIT = 5.0


def token_lp_highs(inst: Instance, time_limit: float = HIGHS_TIME_LIMIT) -> Dispatch:
    """The token LP of Lemma 1 solved by HiGHS's simplex: the optimal vertex HiGHS returns
    (Section 5.14: "Token-LP is the exact HiGHS min-max token count"; the ``token_lp_face``
    reading ``highs_vertex`` of ``data/paper/readings.yaml``).

    Formulation (one column per valid replica slot ``r`` of each live expert ``e``, plus ``t``)::

        min  t
        s.t. sum_r x[e, r]            =  n_e     for every live expert e
             sum_{(e, r) on GPU h} x[e, r] - t <= 0   for every GPU h
             x >= 0,  t >= 0

    Solver: highspy (HiGHS 1.16.0 in this project's lock files; ``meta["solver"]`` says which
    ran), options ``solver="simplex"`` (HiGHS's default simplex strategy, dual),
    ``presolve`` at its default ("choose"), ``threads=1``, ``output_flag=False`` and
    ``time_limit`` (default :data:`HIGHS_TIME_LIMIT`); everything else at HiGHS's defaults.  The
    LP's optimum is a face; the simplex (after postsolve) returns one basic optimal solution,
    a vertex, which in general differs from the max-flow vertex of :func:`token_lp_vertex` and
    from the even spread of :func:`token_lp_even`.  Basic values below ``1e-9 n_e`` are
    cleaned to zero (a simplex rounding residue is not an activation) and the expert's row is
    rescaled to ``n_e``.

    When HiGHS stops without an optimal answer (its time limit, or any other status) the
    max-flow vertex is returned instead, ``meta["fallback"]`` saying why (the same optimum,
    another vertex).  ``meta``: ``max_tokens``, ``solver`` (HiGHS version), ``status``,
    ``simplex_iterations``, ``solve_s``."""
    import highspy

    t0 = time.perf_counter()
    if not (isinstance(time_limit, (int, float)) and not isinstance(time_limit, bool)
            and math.isfinite(time_limit) and time_limit > 0):
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if inst.total_tokens == 0:
        return Dispatch(np.zeros(inst.replica_gpu.shape), {"policy": "token_lp", "variant": "highs_vertex",
                                                          "max_tokens": 0.0, "solve_s": time.perf_counter() - t0})
    live = inst.live
    mask = inst.valid & live[:, None]
    e_idx, r_idx = np.nonzero(mask)
    P = e_idx.size
    g = inst.n_gpus
    n = np.where(live, inst.counts, 0).astype(np.float64)
    liv = np.flatnonzero(live)
    row_of = np.full(inst.n_experts, -1)
    row_of[liv] = np.arange(liv.size)
    gpu = inst.replica_gpu[e_idx, r_idx]
    L = liv.size
    # columns 0..P-1: x; column P: t.  Rows 0..L-1: experts; rows L..L+g-1: GPUs.
    rows = np.r_[row_of[e_idx], L + gpu, L + np.arange(g)]
    cols = np.r_[np.arange(P), np.arange(P), np.full(g, P)]
    vals = np.r_[np.ones(2 * P), -np.ones(g)]
    A = sp.csc_matrix((vals, (rows, cols)), shape=(L + g, P + 1))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = P + 1, L + g
    lp.col_cost_ = np.r_[np.zeros(P), 1.0]
    lp.col_lower_ = np.zeros(P + 1)
    lp.col_upper_ = np.r_[n[e_idx], highspy.kHighsInf]
    lp.row_lower_ = np.r_[n[liv], np.full(g, -highspy.kHighsInf)]
    lp.row_upper_ = np.r_[n[liv], np.zeros(g)]
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    h = new_highs()
    h.setOptionValue("solver", "simplex")
    h.setOptionValue("time_limit", float(time_limit))
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    meta = {"policy": "token_lp", "variant": "highs_vertex", "solver": f"HiGHS {h.version()}",
            "status": h.modelStatusToString(status), "simplex_iterations": int(h.getInfo().simplex_iteration_count)}
    if status != highspy.HighsModelStatus.kOptimal:
        z, shares = _token_lp(inst)
        meta.update({"max_tokens": z, "solve_s": time.perf_counter() - t0})
        return mark_fallback(Dispatch(shares, meta), f"max-flow vertex (HiGHS stopped: {meta['status']})")
    xp = np.clip(np.asarray(h.getSolution().col_value)[:P], 0.0, None)
    x = np.zeros(inst.replica_gpu.shape)
    x[e_idx, r_idx] = xp
    x[x < 1e-9 * np.maximum(n, 1.0)[:, None]] = 0.0
    rs = x.sum(axis=1)
    x = x * np.divide(n, rs, out=np.zeros_like(n), where=rs > 0)[:, None]
    meta.update({"max_tokens": float(np.bincount(gpu, weights=x[e_idx, r_idx], minlength=g).max()),
                 "solve_s": time.perf_counter() - t0})
    return Dispatch(x, meta)


def token_lp_even(inst: Instance) -> Dispatch:
    """The optimal token-LP solution nearest (Euclidean) to the even split over replicas.

    Under full replication the even split itself is optimal (every GPU gets total/g).
    Otherwise: compute the optimum z* by max-flow, then project the even split onto
    ``{rows conserve tokens, per-GPU tokens <= z*}`` (:func:`_project_even`): the dual
    projection with an exact KKT finish (``meta["method"] = "dual_kkt"``; time grows with
    E x R, not out of control as HiGHS's QP did: minutes at E = 160, g = 48), then HiGHS's QP
    under a time limit (``"highs_qp"``), then a blend toward the max-flow vertex that is still
    on the optimal face (``"vertex_blend"``, marked ``meta["fallback"]``).
    """
    t0 = time.perf_counter()
    live = inst.live
    if inst.is_full_replication():
        shares = np.zeros(inst.replica_gpu.shape)
        slot = slot_on_gpu(inst)
        e = np.flatnonzero(live)
        for gpu in range(inst.n_gpus):
            shares[e, slot[e, gpu]] += inst.counts[e] / inst.n_gpus
        return Dispatch(shares, {"policy": "token_lp", "variant": "even", "method": "full_replication",
                                 "max_tokens": inst.total_tokens / inst.n_gpus,
                                 "solve_s": time.perf_counter() - t0})
    z, vertex_shares = _token_lp(inst)
    shares, method, why = _project_even(inst, z, vertex_shares)
    d = Dispatch(shares, {"policy": "token_lp", "variant": "even", "method": method, "max_tokens": z,
                          "solve_s": time.perf_counter() - t0})
    return mark_fallback(d, why) if why else d


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


def _project_even(inst: Instance, z: float, vertex: np.ndarray):
    """The nearest point (Euclidean) to the even split on the token-LP optimal face.

    Minimise ``||x - u||^2`` (``u``: each expert's tokens evenly over its replica slots)
    subject to row sums ``n_e``, ``x >= 0`` and per-GPU tokens ``<= z*``.  Returns
    ``(x, method, fallback reason or None)``.

    1. ``dual_kkt``: the dual.  For GPU prices ``mu >= 0`` the minimiser is a row-wise
       water-filling of ``u - mu/2``; the concave, smooth dual (one variable per GPU) is
       maximised with L-BFGS-B (at most :data:`EVEN_DUAL_ITERATIONS` iterations of O(E R log R)
       each).  The dual point names the support of x and the priced (tight)
       GPUs; the KKT conditions restricted to them are a linear system in the row thresholds
       and the GPU prices, solved directly.  The solution is accepted only if it passes every
       KKT condition (x >= 0, prices >= 0, loads <= z*, no profitable pair off the support),
       in which case it is the projection up to rounding: the same optimum as the QP.
    2. ``highs_qp``: when the finish declines (a degenerate face), HiGHS's QP solver on the QP
       itself, under an iteration limit (:func:`qp_iteration_limit`).
    3. ``vertex_blend`` (a fallback, with its reason): the dual point's residual overload
       removed by blending toward the max-flow vertex on the GPUs where that lowers the load;
       still optimal for the token LP (max tokens z*), not the nearest such point.
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
                   options={"maxiter": EVEN_DUAL_ITERATIONS, "gtol": 1e-13, "ftol": 1e-16})
    mu = res.x * scale
    x = _project_rows(u - mu[gid] / 2.0, mask, n)
    L = loads(x)
    tight_by_price = mu > 1e-9 * scale
    tight_by_load = L >= z * (1 - 1e-7)
    for tight in (tight_by_price, tight_by_load, tight_by_price | tight_by_load):
        fin = _kkt_finish(u, mask, gid, n, z, x > 1e-9 * np.maximum(n, 1.0)[:, None], tight, live)
        if fin is not None:
            return fin, "dual_kkt", None
    limit = qp_iteration_limit(inst)
    qp = _project_even_qp(inst, z, iteration_limit=limit)
    if qp is not None:
        return qp, "highs_qp", None
    Lv = loads(vertex)
    over = (L > z * (1 + 1e-12)) & (L - Lv > 1e-9 * max(z, 1.0))
    if over.any():
        theta = min(1.0, float(np.max((L[over] - z) / (L[over] - Lv[over]))))
        x = (1 - theta) * x + theta * vertex
    x[x < 1e-9 * np.maximum(n, 1.0)[:, None]] = 0.0
    rows = x.sum(axis=1)
    x = x * np.divide(n, rows, out=np.zeros_like(n), where=rows > 0)[:, None]
    return x, "vertex_blend", (f"token_lp even split: the dual's KKT finish declined and HiGHS's QP did not "
                               f"finish within {limit} iterations; blended toward the max-flow vertex")


def qp_iteration_limit(inst: Instance) -> int:
    """HiGHS QP iterations allowed for the even split of ``inst``: :data:`EVEN_QP_WORK` over the
    number of (live expert, valid slot) variables, at least 100."""
    P = int((inst.valid & inst.live[:, None]).sum())
    return max(100, EVEN_QP_WORK // max(P, 1))


def _project_even_qp(inst: Instance, z: float, iteration_limit: int | None = None):
    """The projection QP solved by HiGHS's QP solver in token units, under ``iteration_limit``
    QP iterations (None: no limit, the tests' oracle); None when HiGHS does not report it optimal
    (a "Solve error" on degenerate faces, or the iteration limit)."""
    import highspy

    live = inst.live
    mask = inst.valid & live[:, None]
    e_idx, r_idx = np.nonzero(mask)
    P = e_idx.size
    n = np.where(live, inst.counts, 0).astype(np.float64)
    u_full = np.where(mask, n[:, None] / np.maximum(inst.n_replicas, 1)[:, None], 0.0)
    u = u_full[e_idx, r_idx]
    gpu = inst.replica_gpu[e_idx, r_idx]
    g = inst.n_gpus
    scale = 1.0  # token units: HiGHS's absolute tolerances fit integer token counts
    liv = np.flatnonzero(live)
    row_of = np.full(inst.n_experts, -1)
    row_of[liv] = np.arange(liv.size)
    rows = np.r_[row_of[e_idx], liv.size + gpu]
    A = sp.csc_matrix((np.ones(2 * P), (rows, np.r_[np.arange(P), np.arange(P)])), shape=(liv.size + g, P))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = P, liv.size + g
    lp.col_cost_ = -2.0 * u / scale
    lp.col_lower_, lp.col_upper_ = np.zeros(P), n[e_idx] / scale
    lp.row_lower_ = np.r_[n[liv] / scale, np.full(g, -highspy.kHighsInf)]
    lp.row_upper_ = np.r_[n[liv] / scale, np.full(g, z / scale)]
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    model = highspy.HighsModel()
    model.lp_ = lp
    model.hessian_.dim_ = P
    model.hessian_.format_ = highspy.HessianFormat.kTriangular
    model.hessian_.start_ = np.arange(P + 1)
    model.hessian_.index_ = np.arange(P)
    model.hessian_.value_ = np.full(P, 2.0)
    h = new_highs()
    h.setOptionValue("primal_feasibility_tolerance", 1e-10)
    h.setOptionValue("dual_feasibility_tolerance", 1e-10)
    if iteration_limit is not None:
        h.setOptionValue("qp_iteration_limit", int(iteration_limit))
    h.passModel(model)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    xp = np.clip(np.asarray(h.getSolution().col_value), 0.0, None) * scale
    x = np.zeros(inst.replica_gpu.shape)
    x[e_idx, r_idx] = xp
    x[x < 1e-9 * np.maximum(n, 1.0)[:, None]] = 0.0
    rs = x.sum(axis=1)
    x = x * np.divide(n, rs, out=np.zeros_like(n), where=rs > 0)[:, None]
    L = np.bincount(gpu, weights=x[e_idx, r_idx], minlength=g)
    return x if np.all(L <= z * (1 + 1e-9)) else None


def _kkt_finish(u, mask, gid, n, z, support, tight, live):
    """Solve the projection's KKT system on a guessed support and tight GPU set; None unless
    the result satisfies every KKT condition.

    On the support ``x = u - lam_e - nu_h`` (``nu = mu/2``, zero on GPUs that are not tight);
    row sums ``n_e`` give ``lam = D^-1 (U - n - C nu)`` (``C[e, h]``: support slots of e on h,
    ``D``: support slots per row), and the tight GPUs' loads ``z`` leave a T x T system in
    ``nu`` (the Schur complement ``diag(C^T 1) - C^T D^-1 C``), solved directly: the cost is
    O(E R + E T^2 + T^3), never a dense (E + T)-square system."""
    g = tight.size
    rows = np.flatnonzero(live)
    T = np.flatnonzero(tight)
    sup = support & mask
    e_idx, r_idx = np.nonzero(sup)
    h_idx = gid[e_idx, r_idx]
    deg = np.bincount(e_idx, minlength=n.size).astype(np.float64)
    if (deg[rows] == 0).any():
        return None  # a live row with no support cannot carry its tokens
    uv = u[e_idx, r_idx]
    U_row = np.bincount(e_idx, weights=uv, minlength=n.size)
    col = np.full(g, -1)
    col[T] = np.arange(T.size)
    t = col[h_idx] >= 0
    C = np.zeros((n.size, T.size))
    np.add.at(C, (e_idx[t], col[h_idx[t]]), 1.0)
    U_gpu = np.bincount(col[h_idx[t]], weights=uv[t], minlength=T.size)
    dinv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    a = (U_row - n) * dinv  # lam when nu = 0
    M = np.diag(C.sum(axis=0)) - C.T @ (C * dinv[:, None])
    rhs = U_gpu - z - C.T @ a
    nu = np.linalg.lstsq(M, rhs, rcond=None)[0] if T.size else np.zeros(0)
    if T.size and not np.allclose(M @ nu, rhs, rtol=1e-9, atol=1e-9 * max(1.0, z)):
        return None
    nu_full = np.zeros(g)
    nu_full[T] = nu
    lam = a - dinv * (C @ nu)
    val = np.where(mask, u - lam[:, None] - nu_full[gid], 0.0)
    x = np.where(sup, val, 0.0)
    tol = 1e-9 * max(1.0, z)
    if (x < -tol).any():
        return None
    if (nu_full < -tol).any() or (np.where(mask & ~support, val, 0.0) > tol).any():
        # x is unique, the multipliers are not: M's null space (nu down and lam up on a
        # component of tight GPUs, e.g. when every GPU is tight) leaves x unchanged.  Look for
        # multipliers in the solution plus that null space that are dual feasible (a tiny LP).
        lam, nu_full = _dual_gauge(M, lam, nu_full, T, C, dinv, u, mask, gid, support, tol)
        if lam is None:
            return None
    x = np.clip(x, 0.0, None)
    L = np.bincount(gid[mask], weights=x[mask], minlength=g)
    if (L > z * (1 + 1e-9) + tol).any():
        return None
    rs = x.sum(axis=1)
    if not np.allclose(rs[rows], n[rows], rtol=1e-9, atol=tol):
        return None
    return x * np.divide(n, rs, out=np.zeros_like(n), where=rs > 0)[:, None]


def _dual_gauge(M, lam0, nu0, T, C, dinv, u, mask, gid, support, tol):
    """Multipliers ``(lam, nu)`` equal to ``(lam0, nu0)`` plus a null-space move of ``M`` (nu by
    ``N c`` on the tight GPUs, lam by ``-D^-1 C N c``) with ``nu >= 0`` and ``u - lam - nu <= 0``
    off the support, or ``(None, None)``."""
    from scipy.optimize import linprog

    w, V = np.linalg.eigh(M)
    N = V[:, np.abs(w) <= 1e-9 * max(np.abs(w).max(initial=0.0), 1.0)]  # T x k
    if N.shape[1] == 0:
        return None, None
    k, g = N.shape[1], nu0.size
    Nn = np.zeros((g, k))
    Nn[T] = N
    Nl = -(dinv[:, None] * (C @ N))  # E x k
    e_off, r_off = np.nonzero(mask & ~support)
    h_off = gid[e_off, r_off]
    val0 = u[e_off, r_off] - lam0[e_off] - nu0[h_off]
    # val0 - (Nl[e] + Nn[h]) c <= tol  and  -(nu0[T] + Nn[T] c) <= tol
    A_ub = np.vstack([-(Nl[e_off] + Nn[h_off]), -Nn[T]])
    b_ub = np.r_[tol - val0, nu0[T] + tol]
    lp = linprog(np.zeros(k), A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * k, method="highs",
                 options={"maxiter": GAUGE_ITERATIONS})
    if lp.status != 0:
        return None, None
    return lam0 + Nl @ lp.x, nu0 + Nn @ lp.x


# ---------------------------------------------------------------------------- semi-matching
def semi_matching_maxflow(inst: Instance) -> Dispatch:
    """Exact minimum of the largest activated-expert count per GPU (Lemma 2, beta -> 0), by
    max-flow: the check of the registered ``semi_matching`` policy
    (:func:`tempo.policies.tempo_fast.semi_matching`, augmenting paths), which must reach the
    same count.

    Each live expert goes whole to one replica (splitting only adds activations).  The
    optimal cap is found by binary search with a bipartite b-matching (max-flow) test; the
    result is an optimal semi-matching's bottleneck [Harvey et al. 2006].
    """
    t0 = time.perf_counter()
    if not inst.live.any():
        return Dispatch(np.zeros(inst.replica_gpu.shape), {"policy": "semi_matching_maxflow", "max_experts": 0})
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
    return Dispatch(shares, {"policy": "semi_matching_maxflow", "max_experts": cap,
                             "solve_s": time.perf_counter() - t0})
