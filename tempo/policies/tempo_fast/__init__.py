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
   (the argument: :func:`tempo.policies.tempo_fast.solver.solve`).  Two exact shortcuts save time without changing
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
field overrides for the ablations.  Every stage runs compiled (:mod:`tempo.policies.tempo_fast`,
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
from dataclasses import replace

import numpy as np

from ...core.cost import CostModel
from ...core.instance import Dispatch, Instance
from ...core.pricing import Pricer
from ..exact import token_lp_even, token_lp_highs, token_lp_vertex
from ..proxies import round_robin
from ..registry import register
from .exchange import exchange_pass
from .options import PRESETS, TempoOptions
from .records import CHOSEN, EXCHANGE, SEEDS, UNLIMITED, Options

__all__ = ["PRESETS", "TempoOptions", "exchange_pass", "solve_layers", "tempo_fast"]


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
        :data:`tempo.policies.tempo_fast.records.CHOSEN`, or ``token_lp_highs``), ``stages`` (the makespan after each stage that
        ran; ``shortcut`` or ``ensemble_pruned`` when an exact shortcut was taken), ``solve_s``.
    """
    from .solver import solve

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
        shares, ms, chosen, st = solve(inst.counts, inst.replica_gpu, inst.n_gpus, Pricer.of(model),
                                         _options(o, vertex, even), _paper_options(), even_shares)
        chosen = CHOSEN[chosen]
    if o.restarts and o.local_search and full and inst.n_experts * inst.n_gpus <= 4096:
        x, ms2 = exchange_pass(inst, model, shares)
        if ms2 < ms * (1 - 1e-12):
            shares, ms, chosen, st = x, ms2, CHOSEN[EXCHANGE], st._replace(ensemble=ms2)
    return Dispatch(shares, {"policy": "tempo", "makespan": float(ms), "chosen": chosen,
                             "stages": _stage_times(st, ms), "solve_s": time.perf_counter() - t0})


#: no precomputed even candidate (:func:`tempo.policies.tempo_fast.solver.solve`'s ``even_shares``)
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
    from .solver import solve

    shares, ms, chosen, st = solve(inst.counts, inst.replica_gpu, inst.n_gpus, Pricer.of(model),
                                     _options(replace(o, ensemble=False), False, False), _paper_options(), _NO_SHARES)
    chosen = CHOSEN[chosen]
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
    """The compiled solver's :class:`~tempo.policies.tempo_fast.records.Options` record."""
    return Options(seed=SEEDS[o.seed], chains=bool(o.chains),
                     chain_depth=UNLIMITED if o.chain_depth is None else int(o.chain_depth),
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
    from .solver import solve

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
        out[layer] = solve(counts[layer], rep[layer], int(n_gpus), p, opts, po, _NO_SHARES)[0]
    return out
