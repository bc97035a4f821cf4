"""tempo_fast's options: :class:`TempoOptions`, its presets, and the compiled solver's records built
from them."""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import _options as check
from .records import SEEDS, UNLIMITED, Options


#: move evaluations per preset by default: about 0.5 s of search on one core, far above what
#: the serving sizes spend (an EP8 batch: under 1e4); E = 512 on 64 GPUs with one-token tiles
#: reaches it
WORK = 2_000_000


@dataclass(frozen=True)
class TempoOptions:
    """tempo_fast's options: a preset (:meth:`preset`) with field overrides (:meth:`resolve`).

    ``"default"`` is the library's solver; ``"paper"`` is Section 4.2 as written.  Raises
    ``TypeError`` / ``ValueError`` naming a bad field.

    Fields
    ------
    seed : stage 1: "greedy" (water-filling), "whole" (the paper's greedy) or "static" (first replica)
    chains : bool: stage 2 (augmenting-path chains); False also drops chain moves from stage 3
    chain_depth : int >= 2 or None: longest augmenting path (None: unlimited, Lemma 2; 2: the paper)
    local_search : bool: stage 3
    partial : bool: stage 3 may split experts (False: Table 2's "no partial moves")
    ensemble : bool: stage 4, token-LP candidates and round robin, taken when > ``tau`` better (Prop. 1)
    tau : float in [0, 1): the switching tolerance
    max_iter : int >= 0: accepted moves per stage, at most
    fanout : int >= 0: 2-step chains, destination GPUs per first move (0: no limit)
    lp_variants : "auto" or a tuple of "vertex", "even", "highs": stage 4's token-LP candidates
    restarts : bool: full replication, local search from wrap-around and apportionment seeds, exchanges
    paper_candidate : bool: the "paper" preset's output joins the pool (:func:`paper_twin`): never worse
    compound : bool: stage 3 under Eq. 4, the whole-then-partial chain and the support polish
    balancer : bool: local search from the exact activation balancer (semi-matching, Lemma 2) too
    uniform : bool: under the tile model (Eq. 2), stage 4 also scores each expert split evenly
    work : int >= 0: move evaluations per preset (0: no limit); reaching it returns the best so far
        with ``meta["fallback"]`` (a count, not a clock: the same answer on any machine)
    slot_split : bool: tokens of an expert with several slots on one GPU split as Eq. 2 prices least
        (:mod:`.slots`)
    recut : bool: under the tile model (Eq. 2) with duplicate slots, the bottleneck and one or two
        GPUs it shares experts with re-solved exactly after the search (:mod:`.recut`)
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
    balancer: bool = True
    uniform: bool = True
    work: int = WORK
    slot_split: bool = True
    recut: bool = True

    def __post_init__(self):
        """Check every field (``TypeError`` / ``ValueError`` naming it): :func:`tempo.solve`
        and :meth:`resolve` build this, so the checks hold for every way in."""
        check.choice("tempo", "seed", self.seed, ("greedy", "whole", "static"))
        for name in ("chains", "local_search", "partial", "ensemble", "restarts", "paper_candidate", "compound",
                     "balancer", "uniform", "slot_split", "recut"):
            check.flag("tempo", name, getattr(self, name))
        # the 1- and 2-step chains always run (with chains): a depth below 2 would mean 2
        check.integer("tempo", "chain_depth", self.chain_depth, lambda v: v >= 2, ">= 2", optional=True)
        check.number("tempo", "tau", self.tau, lambda v: 0 <= v < 1, "in [0, 1)")
        check.integer("tempo", "max_iter", self.max_iter, lambda v: v >= 0, ">= 0")
        check.integer("tempo", "work", self.work, lambda v: v >= 0, ">= 0 (0: no limit)")
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
        """The options of preset ``name`` (:data:`PRESETS`)."""
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
                                  compound=False, balancer=False, uniform=False, slot_split=False,
                                  recut=False)}


def lp_candidates(lp_variants) -> tuple[bool, bool]:
    """Whether stage 4 scores the token-LP vertex and the even split: ``(vertex, even)``
    (``"auto"``: both; the compiled solver then scores the even split under full replication only)."""
    if lp_variants == "auto":
        return True, True
    bad = set(lp_variants) - {"vertex", "even", "highs"}
    if bad:
        raise ValueError(f"lp_variants must hold 'vertex', 'even' and/or 'highs', got {sorted(bad)}")
    return "vertex" in lp_variants, "even" in lp_variants


def solver_options(o: TempoOptions, vertex: bool, even: bool) -> Options:
    """The compiled solver's :class:`~.records.Options` for ``o``, scoring the token-LP vertex and
    the even split as ``vertex`` and ``even`` say."""
    return Options(seed=SEEDS[o.seed], chains=bool(o.chains),
                   chain_depth=UNLIMITED if o.chain_depth is None else int(o.chain_depth),
                   local_search=bool(o.local_search), partial=bool(o.partial), ensemble=bool(o.ensemble),
                   tau=float(o.tau), max_iter=int(o.max_iter), fanout=int(o.fanout or 0), lp_vertex=bool(vertex),
                   lp_even=bool(even), restarts=bool(o.restarts), chain_cap=64,
                   paper_pool=bool(o.paper_candidate), compound=bool(o.compound), balancer=bool(o.balancer),
                   work=int(o.work), slot_split=bool(o.slot_split))


def paper_twin(o: TempoOptions, overrides: dict | None = None) -> TempoOptions:
    """The ``"paper"`` preset under ``o``'s overrides: every field where ``o`` differs from the
    default preset, and every field named in ``overrides`` (the keyword overrides ``o`` was
    resolved with), takes ``o``'s value; ``paper_candidate`` stays off.  ``o``'s heuristic pool
    holds this preset's output, so ``tempo_fast(inst, model, **kw)`` is never worse than
    ``tempo_fast(inst, model, options="paper", **kw)`` under the model."""
    named = tuple(sorted(f for f in (overrides or ()) if f != "paper_candidate"))
    try:
        key = (o, named)
        twin = _TWINS.get(key)
    except TypeError:  # a field holding a list: not hashable, not cached
        key, twin = None, None
    if twin is None:
        base, paper = PRESETS["default"], PRESETS["paper"]
        changed = {f: getattr(o, f) for f in TempoOptions.__dataclass_fields__
                   if f != "paper_candidate" and (f in named or getattr(o, f) != getattr(base, f))}
        twin = replace(paper, **changed)
        if key is not None and len(_TWINS) < 256:
            _TWINS[key] = twin
    return twin


_TWINS: dict = {}


def paper_solver_options(o: TempoOptions, overrides: dict | None = None) -> Options:
    """The compiled :class:`~.records.Options` of :func:`paper_twin` ``(o, overrides)``: the
    heuristic pool's paper candidate, scoring the token-LP candidates ``o`` names."""
    twin = paper_twin(o, overrides)
    try:
        rec = _RECORDS.get(twin)
    except TypeError:
        return solver_options(twin, *lp_candidates(twin.lp_variants))
    if rec is None:
        rec = solver_options(twin, *lp_candidates(twin.lp_variants))
        if len(_RECORDS) < 256:
            _RECORDS[twin] = rec
    return rec


_RECORDS: dict = {}
