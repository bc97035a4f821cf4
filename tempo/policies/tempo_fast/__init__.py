"""tempo_fast: the makespan-aware dispatcher of paper Section 4.2, compiled with numba.

:func:`tempo_fast` (registered as ``"tempo"``) solves one layer, :func:`solve_layers` every layer
of a model; :class:`TempoOptions` and :data:`PRESETS` are its options.  One file per stage, run
in this order by :func:`.solver.solve`:

* ``seed.py``: stage 1, the cost-aware greedy seed;
* ``local_search.py``: stages 2 and 3, the bottleneck local search over ``moves.py`` (single
  moves, exact line search), ``chains.py`` (2-step chains), ``augment.py`` (augmenting paths,
  Lemma 2) and ``polish.py`` (the support polish under Eq. 4);
* ``structured.py``: the restart seeds and round robin A3;
* ``balancer.py``: the exact activation balancer (the optimal semi-matching of Lemma 2), a restart seed;
* ``slots.py``: duplicate replica slots under Eq. 2, an expert's tokens on a GPU split over its
  slots there as the tile term prices least, and the local search's moves of such a group;
* ``heuristic.py``: stages 1-3 and the restarts of one preset;
* ``ensemble.py``: stage 4 (Proposition 1), with ``maxflow.py``'s token LP (Lemma 1);
* ``solver.py``: the whole, with the paper preset's output (under the caller's overrides) in the
  heuristic pool;
* after it (numpy): ``exchange.py``'s pairwise swaps (full replication) and ``recut.py``'s exact
  re-cut of the bottleneck with one or two other GPUs (tile models with duplicate slots, HiGHS).

Beside them: ``records.py`` (typed records), ``pricing.py`` (Eq. 1/2/4 compiled),
``layout.py`` (the pair layout), ``bounds.py`` (the lower bound), ``jit.py`` (numba and its
cache) and ``options.py``.
The numpy reference the stages are checked against is ``tests/oracle_tempo.py``.
"""
from __future__ import annotations

import time
import numpy as np

from ...core.cost import CostModel
from ...core.instance import MAX_TOTAL_TOKENS, Dispatch, Instance
from ...core.pricing import Pricer
from .. import proxies
from ..exact import token_lp_even, token_lp_highs
from .._fallback import mark_fallback
from ..registry import register
from .exchange import exchange_pass
from .options import PRESETS, TempoOptions, lp_candidates, paper_solver_options, solver_options
from .recut import recut_pass, wants_recut
from .records import CHOSEN, EXCHANGE, RECUT

__all__ = ["PRESETS", "TempoOptions", "exchange_pass", "semi_matching", "solve_layers", "tempo_fast"]


@register("tempo", needs_model=True, options=TempoOptions, family="tempo", servable=True, color="#54a24b",
          label="TEMPO: tempo_fast, the makespan-aware dispatcher (Section 4.2)", order=90,
          variants={"tempo_paper": {"options": "paper"}})
def tempo_fast(inst: Instance, model: CostModel, options: TempoOptions | str | None = None,
               **overrides) -> Dispatch:
    """tempo_fast (Section 4.2): minimise the modeled makespan of Eq. 3 (with the tile and traffic
    terms when ``model`` has them).

    Parameters:
        inst: Instance
        model: CostModel
        options: TempoOptions, a preset name ("default", "paper") or None (default); keyword
            overrides of its fields (``seed=``, ``chains=``, ``tau=``, ...) apply on top

    Returns:
        Dispatch; ``meta``: ``makespan`` (Eq. 3), ``chosen`` (a name of ``records.CHOSEN`` or
        ``token_lp_highs``), ``stages`` (the makespan after each stage that ran; ``shortcut`` or
        ``ensemble_pruned`` when an exact shortcut was taken), ``solve_s``
    """
    from .solver import solve

    o = TempoOptions.resolve(options, overrides)
    t0 = time.perf_counter()
    full = inst.is_full_replication()
    vertex, even = lp_candidates(o.lp_variants)
    paper = paper_solver_options(o, overrides)
    even_shares = highs_shares = _NO_SHARES
    if o.lp_variants != "auto" and inst.total_tokens and (o.ensemble or (o.paper_candidate and paper.ensemble)):
        # the token-LP candidates the options name that the compiled solver cannot build: the
        # even split on restricted replica sets (a QP) and the HiGHS vertex (a simplex call);
        # both presets' ensembles score them
        if even and not full:
            even_shares = np.ascontiguousarray(token_lp_even(inst).shares, dtype=np.float64)
        if "highs" in o.lp_variants:
            highs_shares = np.ascontiguousarray(token_lp_highs(inst).shares, dtype=np.float64)
    uniform_shares = _NO_SHARES
    if o.uniform and o.ensemble and model.has_tiles and inst.total_tokens:
        uniform_shares = np.ascontiguousarray(proxies.uniform(inst).shares, dtype=np.float64)
    shares, ms, chosen, st = solve(inst.counts, inst.replica_gpu, inst.n_gpus, Pricer.of(model),
                                   solver_options(o, vertex, even), paper, even_shares, highs_shares, uniform_shares)
    chosen = CHOSEN[chosen]
    if o.restarts and o.local_search and full and inst.n_experts * inst.n_gpus <= 4096:
        x, ms2 = exchange_pass(inst, model, shares)
        if ms2 < ms * (1 - 1e-12):
            shares, ms, chosen, st = x, ms2, CHOSEN[EXCHANGE], st._replace(ensemble=ms2)
    if o.recut and o.local_search and wants_recut(inst, model):
        x, ms2 = recut_pass(inst, model, shares)
        if ms2 < ms * (1 - 1e-12):
            shares, ms, chosen, st = x, ms2, CHOSEN[RECUT], st._replace(ensemble=ms2)
    d = Dispatch(shares, {"policy": "tempo", "makespan": float(ms), "chosen": chosen,
                          "stages": _stage_times(st, ms), "solve_s": time.perf_counter() - t0})
    if st.capped:
        mark_fallback(d, f"tempo: the search stopped at its work bound ({o.work} move evaluations); "
                         "the best dispatch found by then")
    return d


@register("semi_matching", needs_model=False, options=None, family="proxy", servable=False, color="#ff9da6",
          label="semi-matching: fewest activated experts, exact (Lemma 2)", order=60)
def semi_matching(inst: Instance, model: CostModel | None = None) -> Dispatch:
    """The exact activation balancer (Lemma 2, beta -> 0): every live expert whole on one replica,
    the largest number of experts on a GPU the least possible (an optimal semi-matching, by
    augmenting paths [Harvey et al. 2006]).  Among the optimal ones: the cost-aware whole-expert
    seed of Section 4.2 under ``model`` (by tokens when None) moved along augmenting paths, the
    dispatch tempo_fast's balancer restart starts from.

    Returns:
        Dispatch; ``meta["max_experts"]``: the largest number of experts on a GPU
    """
    from .balancer import balanced

    t0 = time.perf_counter()
    shares, k = balanced(inst.counts, inst.replica_gpu, inst.n_gpus, Pricer.of(model or _BY_TOKENS))
    return Dispatch(shares, {"policy": "semi_matching", "max_experts": int(k), "solve_s": time.perf_counter() - t0})


#: the semi-matching's seed without a model: whole experts by tokens
_BY_TOKENS = CostModel(a=0.0, b=0.0, c=0.0, beta=1.0)


#: no token-LP split computed by the caller (:func:`.solver.solve`'s ``even_shares``, ``highs_shares``)
_NO_SHARES = np.zeros((0, 0))


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
    """tempo_fast (``options`` as for :func:`tempo_fast`) for every layer of a model in one call,
    without an Instance or a Dispatch per layer (the whole-model refresh of Section 4.4).

    Parameters:
        counts: int64[L, E], tokens per layer and logical expert
        replica_gpu: int64[L, E, R], each layer's replica layout (-1 for an unused slot)
        n_gpus: int
        model: CostModel

    Returns:
        float64[L, E, R]: layer l's shares as ``tempo_fast(Instance(counts[l], replica_gpu[l],
        n_gpus), model).shares``
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
    with np.errstate(over="ignore"):
        big = counts.size and (counts.max(initial=0) > MAX_TOTAL_TOKENS
                               or (counts.sum(axis=1, dtype=np.float64) > MAX_TOTAL_TOKENS).any())
    if big:
        l = int(np.argmax(counts.sum(axis=1, dtype=np.float64)))
        raise ValueError(f"counts of layer {l} sum past 2^53 = {MAX_TOTAL_TOKENS}: shares and loads are float64, "
                         "exact only up to 2^53 tokens")
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
    pricer, opts, paper = Pricer.of(model), solver_options(o, vertex=True, even=True), paper_solver_options(o, overrides)
    out = np.empty(rep.shape)
    tiled = o.uniform and o.ensemble and model.has_tiles
    recut = o.recut and o.local_search and model.has_tiles
    for layer in range(counts.shape[0]):
        uni = _NO_SHARES
        if tiled and counts[layer].any():
            uni = np.ascontiguousarray(proxies.uniform(Instance(counts[layer], rep[layer], int(n_gpus))).shares,
                                       dtype=np.float64)
        out[layer] = solve(counts[layer], rep[layer], int(n_gpus), pricer, opts, paper, _NO_SHARES, _NO_SHARES,
                           uni)[0]
        if recut and counts[layer].any():
            inst = Instance(counts[layer], rep[layer], int(n_gpus))
            if wants_recut(inst, model):
                out[layer] = recut_pass(inst, model, out[layer])[0]
    return out
