"""The proxy dispatch policies the paper compares against (Sections 2.3, 5.14; Table 1, 4).

Each balances a proxy of time -- tokens, activated experts, or nothing -- rather than the
modeled time itself.  All return integral token shares except ``token_lp`` (an LP solution).
"""
from __future__ import annotations

import numpy as np

from ..cost import CostModel
from ..instance import Dispatch, Instance
from . import register
from ._util import compact_slots, even_integer_split, scatter_compact, slot_on_gpu


@register("static")
def static(inst: Instance, model: CostModel | None = None) -> Dispatch:
    """EPLB's static map: every expert whole on its home replica, slot 0 (Table 1 "static").

    An expert whose slot 0 is unused goes to its first valid slot.
    """
    comp = compact_slots(inst)
    shares = np.zeros(inst.replica_gpu.shape)
    shares[np.arange(inst.n_experts), comp[:, 0]] = inst.counts
    return Dispatch(shares)


@register("static_sglang")
def static_sglang(inst: Instance, model: CostModel | None = None) -> Dispatch:
    """SGLang's per-source-rank static map (NOTES-baselines, "SGLang's own dispatch").

    Each expert's tokens come evenly from all GPUs as sources (integer split, remainder
    rotated by expert id).  A source rank that holds a replica of the expert uses it; the
    other source ranks are spread evenly over the replicas: the j-th such rank (in rank
    order) uses the ``j mod R_e``-th replica.  (SGLang seeds this spread randomly; we use
    the deterministic round-robin, which has the same per-replica counts up to one rank.)
    """
    E, g = inst.n_experts, inst.n_gpus
    src = even_integer_split(inst.counts, np.full(E, g), np.arange(E) % g, g)  # [E, g]
    local = slot_on_gpu(inst)  # [E, g]
    nonlocal_ = local < 0
    j = np.cumsum(nonlocal_, axis=1) - 1
    comp = compact_slots(inst)
    spread = comp[np.arange(E)[:, None], j % np.maximum(inst.n_replicas, 1)[:, None]]
    slot = np.where(nonlocal_, spread, local)
    shares = np.zeros(inst.replica_gpu.shape)
    np.add.at(shares, (np.repeat(np.arange(E), g), slot.ravel()), src.ravel())
    shares[inst.n_replicas == 0] = 0.0
    return Dispatch(shares)


@register("uniform")
def uniform(inst: Instance, model: CostModel | None = None) -> Dispatch:
    """EPLB's default split (SGLang ``dynamic`` in expectation): each expert's tokens evenly
    over its replicas.

    Tokens are integral, so the split differs by at most one token between replicas and the
    remainder is rotated by expert id; an expert with fewer tokens than replicas activates
    only as many replicas as it has tokens (what a deterministic split does; a random
    per-token choice activates about as many).
    """
    vals = even_integer_split(inst.counts, inst.n_replicas, np.arange(inst.n_experts), inst.n_slots)
    return Dispatch(scatter_compact(inst, vals))


@register("metro")
def metro(inst: Instance, model: CostModel | None = None) -> Dispatch:
    """METRO's deployed greedy (arXiv 2512.09277): experts in id order, each whole to the
    replica GPU with the fewest activated experts so far (ties to the lowest GPU id).
    Token counts are ignored."""
    act = [0] * inst.n_gpus
    shares = np.zeros(inst.replica_gpu.shape)
    rep = inst.replica_gpu.tolist()
    valid = inst.valid.tolist()
    for e in np.flatnonzero(inst.live).tolist():
        best_r, best_key = -1, None
        for r, gpu in enumerate(rep[e]):
            if not valid[e][r]:
                continue
            key = (act[gpu], gpu)
            if best_key is None or key < best_key:
                best_key, best_r = key, r
        shares[e, best_r] = inst.counts[e]
        act[rep[e][best_r]] += 1
    return Dispatch(shares)


@register("llep")
def llep(inst: Instance, model: CostModel | None = None, alpha: float = 1.1, min_chunk: int = 32,
         trigger: float = 1.3) -> Dispatch:
    """LLEP-R: LLEP's least-loaded greedy spill (arXiv 2601.17111), restricted to existing
    replicas (Section 5.14).

    Capacity per GPU is ``floor(alpha * total / n_gpus)`` (alpha = 1.1 as in LLEP's code).
    Experts largest first: the home replica (slot 0) keeps what fits under the capacity; the
    rest spills to the expert's other replica GPUs in ascending order of load, each taking
    what fits; a chunk smaller than ``min_chunk`` tokens is skipped unless it is the whole
    remainder; what is left with no room goes to the least-loaded replica GPU.  LLEP runs
    only when the static max/mean GPU load is at least ``trigger`` (1.3); below, the static
    map is returned.

    ``min_chunk`` is our choice: LLEP's minimum GEMM size targets training-sized batches and
    would forbid every spill at decode, so we scale it to a quarter of a 128-token M-tile.
    """
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    if min_chunk < 0:
        raise ValueError(f"min_chunk must be non-negative, got {min_chunk}")
    home = static(inst)
    total = inst.total_tokens
    g = inst.n_gpus
    if total == 0:
        return home
    native = np.bincount(inst.replica_gpu[inst.valid], weights=home.shares[inst.valid], minlength=g)
    if native.max() / (total / g) < trigger:
        return home
    cap = np.floor(alpha * total / g)
    load = [0.0] * g
    shares = np.zeros(inst.replica_gpu.shape)
    comp = compact_slots(inst)
    order = np.argsort(-inst.counts, kind="stable")
    for e in order.tolist():
        rem = float(inst.counts[e])
        if rem <= 0:
            continue
        slots = comp[e, : inst.n_replicas[e]].tolist()
        gpus = [int(inst.replica_gpu[e, r]) for r in slots]
        # home replica first
        take = min(rem, max(0.0, cap - load[gpus[0]]))
        if take > 0 and (take >= min_chunk or take == rem):
            shares[e, slots[0]] += take
            load[gpus[0]] += take
            rem -= take
        helpers = sorted(range(1, len(slots)), key=lambda i: (load[gpus[i]], gpus[i]))
        for i in helpers:
            if rem <= 0:
                break
            take = min(rem, max(0.0, cap - load[gpus[i]]))
            if take <= 0 or (take < min_chunk and take != rem):
                continue
            shares[e, slots[i]] += take
            load[gpus[i]] += take
            rem -= take
        if rem > 0:
            i = min(range(len(slots)), key=lambda i: (load[gpus[i]], gpus[i]))
            shares[e, slots[i]] += rem
            load[gpus[i]] += rem
    return Dispatch(shares)


@register("round_robin")
def round_robin(inst: Instance, model: CostModel | None = None) -> Dispatch:
    """Theorem 2's descending-token round-robin ``A3``: live experts sorted by tokens
    (descending, ties by id); GPU i takes ranks i, i+g, i+2g, ...  Needs full replication."""
    if not inst.is_full_replication():
        raise ValueError("round_robin needs full replication (every live expert on every GPU); "
                         "this instance has restricted replica sets")
    live = np.flatnonzero(inst.live)
    order = live[np.argsort(-inst.counts[live], kind="stable")]
    gpu = np.arange(order.size) % inst.n_gpus
    slot = slot_on_gpu(inst)[order, gpu]
    shares = np.zeros(inst.replica_gpu.shape)
    shares[order, slot] = inst.counts[order]
    return Dispatch(shares)


@register("token_lp")
def token_lp(inst: Instance, model: CostModel | None = None, vertex: bool = False) -> Dispatch:
    """Token-LP (LPLB / UltraEP objective, Lemma 1): minimise the largest per-GPU token count
    over the replica sets, exactly.

    The optimum is a face, not a point.  ``vertex=False`` (default) returns the min-max
    solution nearest (Euclidean) to the even split over replicas -- the interior, everything
    split, as LPLB's interior-point solve produces (Fig. 1b: 7 floors per GPU).  Under full
    replication that is exactly the even split.  ``vertex=True`` returns a sparse basic
    optimal solution from a max-flow (few experts split).  See :mod:`tempo.policies.exact`.
    """
    from .exact import token_lp_even, token_lp_vertex

    return token_lp_vertex(inst) if vertex else token_lp_even(inst)
