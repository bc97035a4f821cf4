"""The tile re-cut pass after the compiled solve (Eq. 2 with duplicate slots): the bottleneck and
one or two GPUs it shares experts with re-solved exactly, a small fixed-charge MILP (HiGHS)."""
from __future__ import annotations

import numpy as np

from ...core.cost import CostModel
from ...core.instance import EPS_TOKENS, Instance

#: branch-and-bound nodes per re-cut MILP (a work bound: the same answer on every machine)
NODE_LIMIT = 500
#: the largest instance the pass runs on, in (live expert, slot) pairs
MAX_PAIRS = 256


def wants_recut(inst: Instance, model: CostModel) -> bool:
    """Whether :func:`recut_pass` applies: a tile model (Eq. 2) on a layout where some expert holds
    two slots on one GPU, at most :data:`MAX_PAIRS` pairs."""
    if not model.has_tiles:
        return False
    rep = inst.replica_gpu[inst.live]
    if rep.size == 0 or int((rep >= 0).sum()) > MAX_PAIRS:
        return False
    s = np.sort(rep, axis=1)
    return bool(((s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)).any())


def recut_pass(inst: Instance, model: CostModel, shares: np.ndarray, max_solves: int | None = None):
    """Re-cut the tokens of the experts the bottleneck GPU shares with other GPUs: the bottleneck
    and one GPU h it shares an expert with (h by rising time), then two such GPUs, then one and
    any other GPU, re-solved exactly (the fixed-charge MILP of Eq. 3 on their pairs, each expert's tokens on them kept,
    everything else fixed; :data:`NODE_LIMIT` nodes); the first that lowers the makespan (or
    the number of GPUs at it) is taken, and the search starts again from the new bottleneck, at
    most ``max_solves`` MILPs in all (default ``4 g``).

    Parameters:
        inst: Instance; model: CostModel (with tiles: :func:`wants_recut`)
        shares: float64[E, R]

    Returns:
        (float64[E, R], float): the shares and their makespan (Eq. 3), never worse than the input's
    """
    # A single move re-cuts one expert; where the optimum cuts several experts at tile
    # boundaries on two GPUs at once (a tile costs more than an activation: b2 > b, and a
    # duplicate slot is a cheap extra piece), the local search stalls; an exact re-cut of two or
    # three GPUs at a time reaches it.
    x = np.array(shares, dtype=np.float64, copy=True)
    t = model.gpu_times(inst, x)
    if not t.size:
        return x, 0.0
    g = inst.n_gpus
    limit = 4 * g if max_solves is None else int(max_solves)
    lb = model.lower_bound(inst)
    valid = inst.valid & inst.live[:, None]
    pe, pr = np.nonzero(valid)
    pg = inst.replica_gpu[pe, pr]
    solves = 0
    while solves < limit:
        b = int(np.argmax(t))
        tb = float(t[b])
        if tb <= lb * (1 + 1e-12):
            break
        on_b = np.zeros(inst.n_experts, bool)
        on_b[pe[(pg == b) & (x[pe, pr] > EPS_TOKENS)]] = True
        near = np.unique(pg[on_b[pe] & (pg != b)])
        near = near[np.lexsort((near, t[near]))]
        moved = False
        # pairs, then triples: two GPUs the bottleneck shares experts with, then one of them
        # and a third GPU (tokens may pass through h on to it)
        rest = np.array([k for k in np.argsort(t, kind="stable") if k != b and k not in near], np.int64)
        sets = ([(b, int(h)) for h in near] + [(b, int(h), int(k)) for i, h in enumerate(near) for k in near[i + 1:]]
                + [(b, int(h), int(k)) for h in near for k in rest])
        for S in sets:
            if solves >= limit:
                break
            solves += 1
            y = _recut(inst, model, x, np.array(S), pe, pr, pg, tb)
            if y is None:
                continue
            ty = model.gpu_times(inst, y)
            top = ty.max()
            at = tb * (1 - 1e-12)
            if top < tb * (1 - 1e-9) or (top <= tb and (ty >= at).sum() < (t >= at).sum()):
                x, t, moved = y, ty, True
                break
        if not moved:
            break
    return x, float(t.max())


def _recut(inst, model, x, S, pe, pr, pg, scale):
    """The GPUs ``S : int64[s]`` re-solved exactly (the MILP of :func:`tempo.policies.milp.milp` on
    their pairs, each expert's tokens there fixed, the present split as HiGHS's start): the new
    shares float64[E, R], or None when HiGHS returns no usable point.  ``scale``: the bottleneck's
    time (the MILP's time unit is a hundredth of it)."""
    import highspy

    from ..exact import RowBlocks, new_highs

    where = np.full(inst.n_gpus, -1, np.int64)
    where[S] = np.arange(S.size)
    sel = np.flatnonzero(where[pg] >= 0)
    xe = x[pe[sel], pr[sel]]
    experts, inv = np.unique(pe[sel], return_inverse=True)
    d = np.bincount(inv, weights=xe, minlength=experts.size)
    keep = d[inv] > 0
    sel, inv, xe = sel[keep], inv[keep], xe[keep]
    if not sel.size:
        return None
    Q = sel.size
    dq = d[inv]
    gq = where[pg[sel]]  # each pair's GPU's place in S
    tile = float(model.tile)
    St = scale / 100.0
    # columns: x [Q], z [Q], k [Q], M
    ox, oz, ok, oM = 0, Q, 2 * Q, 3 * Q
    ncol = 3 * Q + 1
    q = np.arange(Q)
    rows = RowBlocks()
    add = rows.add
    inf = highspy.kHighsInf
    add(inv, ox + q, np.ones(Q), d, d)                                              # tokens kept
    add(np.r_[q, q], np.r_[ox + q, oz + q], np.r_[np.ones(Q), -dq], np.full(Q, -inf), np.zeros(Q))     # x <= d z
    add(np.r_[q, q], np.r_[ox + q, ok + q], np.r_[np.ones(Q), np.full(Q, -tile)], np.full(Q, -inf), np.zeros(Q))
    add(np.r_[q, q], np.r_[oz + q, ok + q], np.r_[np.ones(Q), -np.ones(Q)], np.full(Q, -inf), np.zeros(Q))
    s = np.arange(S.size)
    mcol, one = np.full(S.size, oM), -np.ones(S.size)
    add(np.r_[gq, gq, s], np.r_[oz + q, ok + q, mcol],
        np.r_[np.full(Q, (model.b - model.b2) / St), np.full(Q, model.b2 / St), one],
        np.full(S.size, -inf), np.full(S.size, -model.a / St))
    pieces = [(model.c, model.beta)] + ([(model.c2, model.gamma)] if model.has_traffic else [])
    for c0, slope in pieces:
        add(np.r_[gq, s], np.r_[ox + q, mcol], np.r_[np.full(Q, slope / St), one], np.full(S.size, -inf),
            np.full(S.size, -c0 / St))
    cost = np.zeros(ncol)
    cost[oM] = 1.0
    col_hi = np.r_[dq, np.ones(Q), np.ceil(dq / tile - 1e-9) + 1, inf]
    lp = rows.lp(cost, np.zeros(ncol), col_hi, [highspy.HighsVarType.kContinuous] * Q
                 + [highspy.HighsVarType.kInteger] * (2 * Q) + [highspy.HighsVarType.kContinuous])
    hs = new_highs()
    hs.setOptionValue("mip_max_nodes", NODE_LIMIT)
    hs.setOptionValue("random_seed", 0)
    hs.passModel(lp)
    # the present split as the start: HiGHS never returns worse
    start = np.zeros(ncol)
    start[ox:ox + Q] = xe
    start[oz:oz + Q] = xe > EPS_TOKENS
    start[ok:ok + Q] = np.where(xe > EPS_TOKENS, np.maximum(1.0, np.ceil(xe / tile - 1e-9)), 0.0)
    start[oM] = scale / St
    sol = highspy.HighsSolution()
    sol.col_value = start
    sol.value_valid = True
    hs.setSolution(sol)
    hs.run()
    if hs.getInfo().primal_solution_status != highspy.kSolutionStatusFeasible:
        return None
    col = np.asarray(hs.getSolution().col_value)
    z = col[oz:oz + Q] > 0.5
    k = np.round(col[ok:ok + Q])
    v = np.where(z, np.clip(col[ox:ox + Q], 0.0, k * tile), 0.0)
    # keep each expert's tokens exactly: the difference on its open piece with the most room
    for i in range(experts.size):
        m = np.flatnonzero(inv == i)
        diff = d[i] - v[m].sum()
        if diff != 0.0:
            room = np.where(z[m], k[m] * tile - v[m], -np.inf)
            j = m[int(np.argmax(room))]
            v[j] += diff
            if v[j] < 0 or abs(v[m].sum() - d[i]) > 1e-9 * max(1.0, d[i]):
                return None  # HiGHS's point is off by more than its tolerances: not used
    y = x.copy()
    y[pe[sel], pr[sel]] = v
    return y
