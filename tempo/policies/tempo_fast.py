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
   ``max_iter`` (300) accepted moves.  Under the three-term model (Eq. 4) the default adds
   two moves for the mixed regime, where the activation floor ``a + b*G`` and the traffic
   piece ``c2 + gamma*N`` cross near the optimum and every single move off an
   activation-bound bottleneck lifts some GPU's token piece above it: a whole expert off the
   bottleneck followed by a partial share back out of its destination, and the support
   polish (close one of the bottleneck's pairs, re-solve the token LP restricted to the
   remaining activation pattern: tokens move along paths of any length) (``compound``).
4. **Ensemble with switching tolerance** (Proposition 1).  Token-LP (both the vertex and the
   even variant) and, under full replication, the round-robin A3 of Theorem 2 are scored
   under the model; the solver switches to the best only if it is more than ``tau`` (1%)
   better than the heuristic result.  The default's heuristic pool holds its local-search
   (and restart) results and the ``"paper"`` preset's complete output, compared by strict
   minimum, so the default is never worse than the paper's algorithm under the model
   (the argument: :func:`tempo.policies._compiled.solve`).  Two exact shortcuts save time without changing
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
numba, int64 counts and flows; the one implementation, checked against the numpy oracle in
``tests/oracle_tempo.py`` and the MILP); the exchange pass after it is vectorised numpy.
:func:`solve_layers` solves a whole model's layers in one call.

Known gaps: under the three-term model, batches of the held-out shape (256 experts, 16 GPUs,
48 tokens/GPU, Zipf 1.3, 1.25x) can still end one activation above the MILP's pattern (1.3%
above it; ``make bench``'s preset grid); on one bench batch (EP8, 256 experts, 512 tokens/GPU, EPLB 1.25x) tempo stays at
33 activations on a GPU where the MILP proves 32 fit (3.1% above the optimum, as at 8cd688e):
relieving the token-bound hot expert needs a split that costs an activation elsewhere, a
compound move the local search does not make.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ..core.cost import CostModel
from ..core.instance import Dispatch, Instance
from ..core.pricing import Pricer
from . import _options as check
from .registry import register
from .exact import token_lp_even, token_lp_highs, token_lp_vertex
from .proxies import round_robin


@dataclass(frozen=True)
class TempoOptions:
    """tempo_fast's knobs, with named presets (:meth:`preset`) instead of stage switches.

    Presets
    -------
    ``"default"``
        Our solver: the greedy seed may water-fill an expert over its least-loaded replica
        GPUs, augmenting paths of any length after the 1- and 2-step chains, partial moves
        with 2-step follow-ups, the token-LP / round-robin ensemble with tolerance ``tau``
        whose heuristic pool holds the paper preset's output (never worse than ``"paper"``),
        and (full replication) local-search restarts from the wrap-around and apportionment
        seeds.
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
        ``ensemble_lp`` reading of the paper; stage 4 then runs in Python,
        :func:`_solve_highs_ensemble`).
    restarts : bool
        Full replication: rerun the local search from the wrap-around and apportionment seeds,
        then try pairwise exchanges on the bottleneck (:func:`exchange_pass`).
    compound : bool
        Stage 3 (with ``partial``), under the three-term model (Eq. 4) only: when no single
        move, chain or augmenting path improves, try a whole expert off the bottleneck followed
        by a partial share back out of its destination
        (:func:`tempo.policies._compiled._chain_whole_partial`); then the support polish
        (activation patterns re-solved by the restricted token LP,
        :func:`tempo.policies._compiled._polish`).
        Where the activation floor and the ``c2 + gamma*N`` piece cross near the optimum, the
        single moves and whole-expert chains stall.
    paper_candidate : bool
        Stage 4 (with ``ensemble``): solve the ``"paper"`` preset too and put its complete
        output in the heuristic pool the tolerance rule compares against, so that the result
        is never worse than ``options="paper"``'s under the model
        (:func:`tempo.policies._compiled.solve` states the argument).
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
    paper_candidate: bool = True
    compound: bool = True

    def __post_init__(self):
        """Check every field (``TypeError`` / ``ValueError`` naming it): :func:`tempo.solve`
        and :meth:`resolve` build this, so the checks hold for every way in."""
        check.choice("tempo", "seed", self.seed, ("greedy", "whole", "static"))
        for name in ("chains", "local_search", "partial", "ensemble", "restarts", "paper_candidate", "compound"):
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
                raise ValueError(f"tempo option lp_variants must be 'auto' or a non-empty tuple of "
                                 f"('vertex', 'even', 'highs'), "
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
           "paper": TempoOptions(seed="whole", chain_depth=2, restarts=False, paper_candidate=False,
                                  compound=False)}


@register("tempo", needs_model=True, options=TempoOptions, family="tempo", servable=True, color="#54a24b",
          label="TEMPO: tempo_fast, the makespan-aware dispatcher (Section 4.2)", order=90,
          variants={"tempo_paper": {"options": "paper"}})
def tempo_fast(inst: Instance, model: CostModel, options: TempoOptions | str | None = None,
               **overrides) -> Dispatch:
    """tempo_fast (Section 4.2): minimise the modeled makespan of Eq. 3 (with the tile and
    traffic terms when ``model`` has them).

    Parameters
    ----------
    inst : Instance
    model : CostModel
    options : TempoOptions, preset name ("default", "paper") or None (default)
        See :class:`TempoOptions`; keyword overrides of its fields (``seed=``, ``chains=``,
        ``tau=``, ...) apply on top, as the ablations of Tables 2 and 8 do.

    Returns
    -------
    Dispatch
        ``meta``: ``makespan`` (the model's, Eq. 3), ``chosen`` (the candidate returned: one of
        :data:`tempo.policies._compiled.CHOSEN`, or ``token_lp_highs``), ``stages`` (the makespan after each stage that
        ran; ``shortcut`` or ``ensemble_pruned`` when an exact shortcut was taken), ``solve_s``.
    """
    from . import _compiled as C

    o = TempoOptions.resolve(options, overrides)
    t0 = time.perf_counter()
    full = inst.is_full_replication()
    vertex, even = _lp_candidates(o.lp_variants)
    if o.lp_variants != "auto" and "highs" in o.lp_variants:
        shares, ms, chosen, st = _solve_highs_ensemble(inst, model, o, tuple(o.lp_variants))
    else:
        even_shares = _NO_SHARES
        if even and not full and o.lp_variants != "auto" and o.ensemble and inst.total_tokens:
            # asked for on restricted replica sets: the even token-LP split is a QP, solved here
            even_shares = np.ascontiguousarray(token_lp_even(inst).shares, dtype=np.float64)
        shares, ms, chosen, st = C.solve(inst.counts, inst.replica_gpu, inst.n_gpus, Pricer.of(model),
                                         _options(o, vertex, even), _paper_options(), even_shares)
        chosen = C.CHOSEN[chosen]
    if o.restarts and o.local_search and full and inst.n_experts * inst.n_gpus <= 4096:
        x, ms2 = exchange_pass(inst, model, shares)
        if ms2 < ms * (1 - 1e-12):
            shares, ms, chosen, st = x, ms2, C.CHOSEN[C.EXCHANGE], st._replace(ensemble=ms2)
    return Dispatch(shares, {"policy": "tempo", "makespan": float(ms), "chosen": chosen,
                             "stages": _stage_times(st, ms), "solve_s": time.perf_counter() - t0})


#: no precomputed even candidate (:func:`tempo.policies._compiled.solve`'s ``even_shares``)
_NO_SHARES = np.zeros((0, 0))


def _lp_candidates(lp_variants) -> tuple[bool, bool]:
    """Whether the ensemble scores the token-LP vertex and the even split (``"auto"``: both; the
    even split is then the closed form under full replication, and left out otherwise)."""
    if lp_variants == "auto":
        return True, True
    bad = set(lp_variants) - {"vertex", "even", "highs"}
    if bad:
        raise ValueError(f"lp_variants must hold 'vertex', 'even' and/or 'highs', got {sorted(bad)}")
    return "vertex" in lp_variants, "even" in lp_variants


def _solve_highs_ensemble(inst: Instance, model: CostModel, o: TempoOptions, lp_variants: tuple):
    """Stages 1-3 compiled, stage 4 (Section 4.2) here, for ``lp_variants`` holding ``"highs"``
    (the HiGHS vertex is a highspy call, not compiled code): score each token-LP candidate of
    ``lp_variants`` and, under full replication, round robin A3; switch when the best is more
    than ``tau`` better (Proposition 1).  The candidates are skipped when the lower bound
    already rules out a switch (exact, as on the compiled path).  No compute-regime shortcut:
    Section 4.2 has none.  Returns ``(shares, makespan, chosen name, Stages)``."""
    from . import _compiled as C

    shares, ms, chosen, st = C.solve(inst.counts, inst.replica_gpu, inst.n_gpus, Pricer.of(model),
                                     _options(replace(o, ensemble=False), False, False), _paper_options(), _NO_SHARES)
    chosen = C.CHOSEN[chosen]
    if o.ensemble and inst.live.any():
        if model.lower_bound(inst) >= (1 - o.tau) * ms:
            st = st._replace(pruned=True)
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
                ms, chosen, shares = best[0], best[1], np.array(best[2], dtype=np.float64)
        st = st._replace(ensemble=ms)
    return shares, ms, chosen, st


def _options(o: TempoOptions, vertex: bool, even: bool):
    """The compiled solver's :class:`~tempo.policies._compiled.Options` record."""
    from . import _compiled as C

    return C.Options(seed=C.SEEDS[o.seed], chains=bool(o.chains),
                     chain_depth=C.UNLIMITED if o.chain_depth is None else int(o.chain_depth),
                     local_search=bool(o.local_search), partial=bool(o.partial), ensemble=bool(o.ensemble),
                     tau=float(o.tau), max_iter=int(o.max_iter), fanout=int(o.fanout or 0), lp_vertex=bool(vertex),
                     lp_even=bool(even), restarts=bool(o.restarts), chain_cap=64,
                     paper_pool=bool(o.paper_candidate), compound=bool(o.compound))


_PAPER_RECORD = []


def _paper_options():
    """The ``"paper"`` preset's compiled record (the heuristic-pool candidate of stage 4)."""
    if not _PAPER_RECORD:
        _PAPER_RECORD.append(_options(PRESETS["paper"], *_lp_candidates(PRESETS["paper"].lp_variants)))
    return _PAPER_RECORD[0]


def _stage_times(st, ms: float) -> dict:
    """``meta["stages"]``: the makespan after each stage that ran, and the shortcut taken."""
    out = {"seed": float(st.seed)}
    for name in ("chains", "local_search", "ensemble"):
        v = getattr(st, name)
        if v == v:  # NaN: the stage did not run
            out[name] = float(v)
    if st.shortcut:
        out["shortcut"] = float(ms)
    elif st.pruned:
        out["ensemble_pruned"] = True
    return out


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
    p, opts, po = Pricer.of(model), _options(o, vertex=True, even=True), _paper_options()
    out = np.empty(rep.shape)
    for layer in range(counts.shape[0]):
        out[layer] = C.solve(counts[layer], rep[layer], int(n_gpus), p, opts, po, _NO_SHARES)[0]
    return out
