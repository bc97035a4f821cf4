"""The proxy dispatch policies the paper compares against (Sections 2.3, 5.14; Table 1, 4).

Each balances a proxy of time -- tokens, activated experts, or nothing -- rather than the
modeled time itself.  All return integral token shares except ``token_lp`` (an LP solution).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.cost import CostModel
from ..core.instance import Dispatch, Instance
from . import _options as check
from .registry import register
from ._util import compact_slots, even_integer_split, scatter_compact, slot_on_gpu
from .exact import token_lp_even, token_lp_highs, token_lp_vertex


@dataclass(frozen=True)
class LlepOptions:
    """:func:`llep`'s options (each checked here, for :func:`tempo.solve` and direct calls).

    alpha : float
        Capacity factor, > 0 (LLEP's code: 1.1).
    min_chunk : int
        Smallest spilled chunk in tokens, >= 1 (a chunk below it is skipped unless it is the
        whole remainder).
    trigger : float
        LLEP runs when the static max/mean GPU load is at least this, >= 0 (1.3).
    """

    alpha: float = 1.1
    min_chunk: int = 32
    trigger: float = 1.3

    def __post_init__(self):
        check.number("llep", "alpha", self.alpha, lambda v: v > 0, "> 0")
        check.integer("llep", "min_chunk", self.min_chunk, lambda v: v >= 1, ">= 1")
        check.number("llep", "trigger", self.trigger, lambda v: v >= 0, ">= 0")


#: The optimal dispatches :func:`token_lp` can return (the ``token_lp_face`` reading of
#: ``data/paper/readings.yaml``; the optimum of the token LP is a face, not a point).
TOKEN_LP_FACES = ("even_spread", "maxflow_vertex", "highs_vertex")


@dataclass(frozen=True)
class TokenLpOptions:
    """:func:`token_lp`'s options.

    vertex : bool
        False: the interior min-max solution (the even split under full replication); True:
        a sparse vertex from a max-flow (the same as ``face="maxflow_vertex"``).
    face : {"even_spread", "maxflow_vertex", "highs_vertex"} or None
        Which optimal dispatch to return (:data:`TOKEN_LP_FACES`); None: ``vertex`` decides.
        Naming a face other than the max-flow vertex together with ``vertex=True`` is refused.
    """

    vertex: bool = False
    face: str | None = None

    def __post_init__(self):
        check.flag("token_lp", "vertex", self.vertex)
        if self.face is not None:
            check.choice("token_lp", "face", self.face, TOKEN_LP_FACES)
            if self.vertex and self.face != "maxflow_vertex":
                raise ValueError(f"token_lp options vertex=True and face={self.face!r} disagree "
                                 "(vertex=True is the max-flow vertex)")


#: The orders :func:`metro` can visit experts in (the ``metro_order`` reading).
METRO_ORDERS = ("expert_id", "descending_tokens", "random_order")


@dataclass(frozen=True)
class MetroOptions:
    """:func:`metro`'s options.

    order : {"expert_id", "descending_tokens", "random_order"}
        The order experts are visited in, and with it the tie rule (:func:`metro`); default
        ``"expert_id"``, METRO's Algorithm 1 (arXiv 2512.09277, Section IV-C).
    seed : int
        ``"random_order"`` only: the seed of the permutation (>= 0).
    """

    order: str = "expert_id"
    seed: int = 0

    def __post_init__(self):
        check.choice("metro", "order", self.order, METRO_ORDERS)
        check.integer("metro", "seed", self.seed, lambda v: v >= 0, ">= 0")


@register("static", needs_model=False, options=None, family="proxy", servable=False, color="#9d755d",
          label="static: EPLB's home map (Table 1)", order=10)
def static(inst: Instance, model: CostModel | None = None) -> Dispatch:
    """EPLB's static map: every expert whole on its home replica, slot 0 (Table 1 "static").

    An expert whose slot 0 is unused goes to its first valid slot.
    """
    comp = compact_slots(inst)
    shares = np.zeros(inst.replica_gpu.shape)
    shares[np.arange(inst.n_experts), comp[:, 0]] = inst.counts
    return Dispatch(shares)


@register("static_sglang", needs_model=False, options=None, family="proxy", servable=False, color="#eeca3b",
          label="static: SGLang's per-source-rank map", order=20)
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


@register("uniform", needs_model=False, options=None, family="proxy", servable=False, color="#b279a2",
          label="uniform: EPLB's even split over replicas", order=30)
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


@register("metro", needs_model=False, options=MetroOptions, family="proxy", servable=False, color="#f58518",
          label="METRO: fewest activated experts, greedy (arXiv 2512.09277)", order=40)
def metro(inst: Instance, model: CostModel | None = None, order: str = "expert_id", seed: int = 0) -> Dispatch:
    """METRO's greedy (arXiv 2512.09277, Section IV-C, Algorithm 1): each expert with tokens
    goes whole to the replica GPU with the fewest activated experts so far.

    ``order`` (the ``metro_order`` reading of ``data/paper/readings.yaml``):

    * ``"expert_id"`` (default): Algorithm 1 read sequentially, experts in id order (the
      paper's loop ``i = 1..N``, run in parallel with per-GPU locks taken in GPU-id order),
      ties to the lowest GPU id; token counts are ignored, as in METRO;
    * ``"descending_tokens"``: experts in descending token count (ties by id), ties between
      GPUs of equal activation count to the one with fewer tokens, then the lower id (a
      token-aware variant, not METRO's text);
    * ``"random_order"``: experts in a permutation seeded by ``seed`` (another serialisation of
      the parallel loop), ties to the lowest GPU id.
    """
    MetroOptions(order, seed)  # checks them (ValueError / TypeError naming the option)
    act = [0] * inst.n_gpus
    tok = [0] * inst.n_gpus
    shares = np.zeros(inst.replica_gpu.shape)
    rep = inst.replica_gpu.tolist()
    valid = inst.valid.tolist()
    live = np.flatnonzero(inst.live)
    if order == "descending_tokens":
        live = live[np.argsort(-inst.counts[live], kind="stable")]
    elif order == "random_order":
        live = np.random.default_rng(seed).permutation(live)
    by_tokens = order == "descending_tokens"
    counts = inst.counts.tolist()
    for e in live.tolist():
        best_r, best_key = -1, None
        for r, gpu in enumerate(rep[e]):
            if not valid[e][r]:
                continue
            key = (act[gpu], tok[gpu], gpu) if by_tokens else (act[gpu], gpu)
            if best_key is None or key < best_key:
                best_key, best_r = key, r
        shares[e, best_r] = counts[e]
        act[rep[e][best_r]] += 1
        tok[rep[e][best_r]] += counts[e]
    return Dispatch(shares)


@register("llep", needs_model=False, options=LlepOptions, family="proxy", servable=False, color="#e45756",
          label="LLEP-R: least-loaded spill over existing replicas (Section 5.14)", order=50)
def llep(inst: Instance, model: CostModel | None = None, alpha: float = 1.1, min_chunk: int = 32,
         trigger: float = 1.3) -> Dispatch:
    """LLEP-R: LLEP's least-loaded spill (arXiv 2601.17111), restricted to existing replicas
    (Section 5.14), following ``compute_llep_lpt_plan`` in LLEP's published code
    (SalesforceAIResearch/LeastLoadedEP, ``llep/gpt_oss_llep.py``).

    * Native GPU of an expert: its home replica (slot 0, or its first valid slot); helpers: the
      expert's other replica GPUs (LLEP's are all other GPUs -- the restriction).
    * Capacity ``int(alpha * (total // n_gpus))``, at least 1 (alpha = 1.1 as in the code).
    * Effective load of a GPU = tokens assigned so far + its *pending native load* (tokens of
      its native experts not processed yet), so a GPU keeps room for its own experts.
    * Experts largest first (stable).  The native GPU takes the whole expert if it fits, else
      what fits (no minimum-chunk rule on the native chunk); the rest goes chunk by chunk to
      the helper of least effective load that has room (ties: lower GPU id), a chunk smaller
      than ``min_chunk`` skipped unless it is the whole remainder; with no helper that takes
      it, the remainder goes to the least effectively loaded helper (never back home).  When
      the native GPU is already full, everything spills that way.  An expert with no helper
      stays home over capacity.
    * LLEP runs only when the static max/mean GPU load is at least ``trigger`` (1.3, LLEP's
      ``MOE_ADAPTIVE_LPT_ROUTING_RATIO`` example); below, the static map is returned.

    Our remaining choice: ``min_chunk`` = 32 tokens instead of LLEP's 1024
    (``min_tokens_per_gemm``, sized for training batches, which would forbid every spill at
    decode): a quarter of a 128-token M-tile.
    """
    LlepOptions(alpha, min_chunk, trigger)  # checks them (ValueError / TypeError naming the option)
    home = static(inst)
    total = int(inst.total_tokens)
    g = inst.n_gpus
    if total == 0:
        return home
    comp = compact_slots(inst)
    counts = inst.counts.tolist()
    native_gpu = [int(inst.replica_gpu[e, comp[e, 0]]) for e in range(inst.n_experts)]
    native = [0] * g
    for e, n in enumerate(counts):
        if n > 0:
            native[native_gpu[e]] += n
    if max(native) / (total / g) < trigger:
        return home
    cap = max(int(alpha * (total // g)), 1)
    pending = list(native)
    assigned = [0] * g
    shares = np.zeros(inst.replica_gpu.shape)
    slot_of = slot_on_gpu(inst)
    rep_gpus = [sorted(set(inst.replica_gpu[e, inst.valid[e]].tolist())) for e in range(inst.n_experts)]

    def eff(h):
        return assigned[h] + pending[h]

    def put(e, h, amount):
        shares[e, slot_of[e, h]] += amount
        assigned[h] += amount

    for e in sorted(range(inst.n_experts), key=lambda e: -counts[e]):
        n = counts[e]
        if n == 0:
            continue
        nat = native_gpu[e]
        pending[nat] -= n
        helpers = [h for h in rep_gpus[e] if h != nat]
        avail = cap - eff(nat)
        if avail >= n:
            put(e, nat, n)
            continue
        remaining = n
        if avail > 0:
            put(e, nat, avail)
            remaining -= avail
            while remaining > 0:
                if not helpers:
                    put(e, nat, remaining)  # no helper: home, over capacity
                    break
                ranked = sorted(helpers, key=eff)  # stable: ties to the lower GPU id
                for h in ranked:
                    room = cap - eff(h)
                    if room <= 0:
                        continue
                    chunk = min(remaining, room)
                    if chunk < min_chunk and remaining > chunk:
                        continue
                    put(e, h, chunk)
                    remaining -= chunk
                    break
                else:
                    put(e, ranked[0], remaining)
                    remaining = 0
        else:
            if not helpers:
                put(e, nat, remaining)
                continue
            ranked = [(h, cap - eff(h)) for h in sorted(helpers, key=eff)]  # one snapshot, as in LLEP
            for h, room in ranked:
                if remaining <= 0:
                    break
                if room <= 0:
                    continue
                chunk = min(remaining, room)
                if chunk < min_chunk and remaining > chunk:
                    continue
                put(e, h, chunk)
                remaining -= chunk
            if remaining > 0:
                put(e, ranked[0][0], remaining)
    return Dispatch(shares)


@register("round_robin", needs_model=False, options=None, family="proxy", servable=False, color="#72b7b2",
          label="round robin A3 (Theorem 2)", full_replication=True, order=80)
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


@register("token_lp", needs_model=False, options=TokenLpOptions, family="proxy", servable=True, color="#4c78a8",
          label="token-LP: LPLB / UltraEP objective (Lemma 1)", order=70,
          variants={"token_lp_vertex": {"vertex": True}, "token_lp_highs": {"face": "highs_vertex"}})
def token_lp(inst: Instance, model: CostModel | None = None, vertex: bool = False, face: str | None = None) -> Dispatch:
    """Token-LP (LPLB / UltraEP objective, Lemma 1): minimise the largest per-GPU token count
    over the replica sets, exactly.

    The optimum is a face, not a point; ``face`` (or ``vertex``) picks the dispatch:

    * ``"even_spread"`` (default, ``vertex=False``): the min-max solution nearest (Euclidean) to
      the even split over replicas -- the interior, everything split, as LPLB's interior-point
      solve produces (Fig. 1b: 7 floors per GPU).  Under full replication that is exactly the
      even split;
    * ``"maxflow_vertex"`` (``vertex=True``): a sparse basic optimal solution from a max-flow
      (few experts split);
    * ``"highs_vertex"``: the basic optimal solution HiGHS's simplex returns (Section 5.14,
      "the exact HiGHS min-max token count"; :func:`tempo.policies.exact.token_lp_highs`).

    See :mod:`tempo.policies.exact`.
    """
    face = TokenLpOptions(vertex, face).face or ("maxflow_vertex" if vertex else "even_spread")
    if face == "highs_vertex":
        return token_lp_highs(inst)
    return token_lp_vertex(inst) if face == "maxflow_vertex" else token_lp_even(inst)
