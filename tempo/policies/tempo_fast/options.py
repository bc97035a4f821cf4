"""tempo_fast's options: :class:`TempoOptions` and its presets."""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import _options as check


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
        (:func:`tempo.policies.tempo_fast.chains.whole_partial_chain`); then the support polish
        (activation patterns re-solved by the restricted token LP,
        :func:`tempo.policies.tempo_fast.polish.polish`).
        Where the activation floor and the ``c2 + gamma*N`` piece cross near the optimum, the
        single moves and whole-expert chains stall.
    paper_candidate : bool
        Stage 4 (with ``ensemble``): solve the ``"paper"`` preset too and put its complete
        output in the heuristic pool the tolerance rule compares against, so that the result
        is never worse than ``options="paper"``'s under the model
        (:func:`tempo.policies.tempo_fast.solver.solve` states the argument).
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
