"""The exchange pass after the compiled solve (full replication): pairwise swaps on the bottleneck."""
from __future__ import annotations

import numpy as np

from ...core.cost import CostModel
from ...core.instance import Instance


def exchange_pass(inst: Instance, model: CostModel, shares: np.ndarray, max_rounds: int = 32):
    """Swap the whole share of an expert on the bottleneck GPU with the whole share of an expert on
    another GPU while that brings both below the bottleneck's time, at most ``max_rounds`` swaps.

    Parameters:
        inst: Instance, full replication in the canonical layout (column = GPU; else no swap)
        model: CostModel
        shares: float64[E, R]

    Returns:
        (float64[E, R], float): the shares and their makespan (Eq. 3), never worse than the input's
    """
    from ...core.cost import EPS_TOKENS, tiles_of

    # A neighbourhood the local search's single moves and chains do not reach: with two experts
    # per GPU and a floor-bound optimum every single move adds an activation somewhere, while
    # one exchange re-pairs two GPUs.  Vectorised over every (expert on the bottleneck, other
    # GPU, expert there) triple.
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
