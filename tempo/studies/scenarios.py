"""Instance generators shared by the solver and simulator studies: synthetic routing
(:func:`zipf_batches`, :func:`drift_batches`) or, when the build is given a recorded routing
trace, the same scenarios drawn from it (:class:`TraceRouting`)."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..core.instance import Instance
from ..world.placement import TIES, drift_corrupt, eplb_placement
from ..world.workloads import (expected_loads, pair_shares, popularity_timeline, route_counts, sample_counts,
                               zipf_popularity)


def zipf_batches(n_experts: int, n_gpus: int, tokens_per_gpu: int, skew: float, replication: float,
                 n_batches: int, seed: int, top_k: int = 8, kappa: float = 2000.0,
                 trace: "TraceRouting | None" = None, router: str = "distinct_topk",
                 placement_from: str = "long_run_pair_loads", eplb_ties: str = "unordered") -> list[Instance]:
    """Decode batches under Zipf(skew) routing with a fresh EPLB placement built from the
    long-run per-expert loads (Section 3.2, "EPLB-style placement from long-run averages"):
    each batch's router weights are Dirichlet(kappa p) around the long-run popularity (the
    phase diagram's batch fluctuation), its pairs drawn by ``router``
    (:func:`tempo.world.workloads.sample_counts`: ``"distinct_topk"``, each token to
    ``top_k`` distinct experts, or ``"independent"``, ``B K g`` independent draws, the
    paper's synthetic grids; the ``synthetic_router`` reading).

    ``placement_from`` (the ``placement_loads`` reading): ``"long_run_pair_loads"`` builds EPLB
    from the expected pair shares of the same router
    (:func:`tempo.world.workloads.pair_shares`: ``p`` itself under independent draws, the
    inclusion probabilities :func:`tempo.world.workloads.expected_loads` under distinct top-K);
    ``"router_weights"`` from ``p``.  ``eplb_ties`` (the ``eplb_ties`` reading): how EPLB's
    packing orders equal loads (:func:`tempo.world.placement.packing_order`).

    With ``trace`` (a :class:`TraceRouting`) the batches come from the recorded routing
    instead: ``tokens_per_gpu`` tokens per GPU routed with each recorded step's shares, the
    fresh placement built from the trace's history window (``n_experts``, ``skew`` and
    ``kappa`` are then unused; the trace's own experts and top-k apply)."""
    if trace is not None:
        return trace.batches(tokens_per_gpu, n_batches, n_gpus, replication, seed=seed, top_k=trace.top_k(top_k))
    pop = zipf_popularity(n_experts, skew, seed=seed)
    placement = zipf_placement(n_experts, skew, seed, top_k, n_gpus, replication, router, placement_from, eplb_ties)
    counts = sample_counts(pop, tokens_per_gpu, top_k, n_gpus, n_batches=n_batches, kappa=kappa, seed=seed + 1,
                           router=router)
    return [Instance.from_placement(c, placement, n_gpus) for c in counts]


#: The ``placement_loads`` reading's choices (what a synthetic EPLB placement is built from).
PLACEMENT_FROM = ("long_run_pair_loads", "router_weights")


def placement_weights(pop, top_k: int, router: str = "distinct_topk",
                      placement_from: str = "long_run_pair_loads") -> np.ndarray:
    """The per-expert loads a synthetic EPLB placement is built from (:func:`zipf_batches`)."""
    if placement_from not in PLACEMENT_FROM:
        raise ValueError(f"placement_from must be one of {', '.join(PLACEMENT_FROM)}, got {placement_from!r}")
    if placement_from == "router_weights":
        p = np.asarray(pop, dtype=np.float64)
        return p / p.sum()
    return pair_shares(pop, top_k, router)


@lru_cache(maxsize=256)
def _zipf_placement(n_experts: int, skew: float, seed: int, top_k: int, n_gpus: int, replication: float,
                    router: str, placement_from: str, eplb_ties: str) -> np.ndarray:
    pop = zipf_popularity(n_experts, skew, seed=seed)
    placement = eplb_placement(placement_weights(pop, top_k, router, placement_from), n_gpus, replication, eplb_ties)
    placement.setflags(write=False)
    return placement


def zipf_placement(n_experts: int, skew: float, seed: int, top_k: int, n_gpus: int, replication: float,
                   router: str = "distinct_topk", placement_from: str = "long_run_pair_loads",
                   eplb_ties: str = "unordered") -> np.ndarray:
    """int64[P]: the fresh EPLB placement of :func:`zipf_batches` (built from
    :func:`placement_weights`: by default the long-run pair loads of Zipf(``skew``) routing under
    ``router``), computed once per argument set (a grid's batch sizes share it); a fresh copy."""
    if placement_from not in PLACEMENT_FROM:
        raise ValueError(f"placement_from must be one of {', '.join(PLACEMENT_FROM)}, got {placement_from!r}")
    if eplb_ties not in TIES:
        raise ValueError(f"eplb_ties must be one of {', '.join(TIES)}, got {eplb_ties!r}")
    return _zipf_placement(int(n_experts), float(skew), int(seed), int(top_k), int(n_gpus), float(replication),
                           str(router), str(placement_from), str(eplb_ties)).copy()


def drift_timeline(pop, n_batches: int, seed: int, tau: float = 300.0, sigma: float | None = None,
                   swap_rate: float = 0.0):
    """Router weights of a drifting timeline around ``pop`` (:func:`tempo.world.workloads.popularity_timeline`
    with its documented defaults; seeded from ``seed + 2``)."""
    return popularity_timeline(pop, n_batches, tau=tau, sigma=sigma, swap_rate=swap_rate, seed=seed + 2)


def drift_batches(pairs_per_gpu: int, n_batches: int, seed: int = 0, drift: int = 16, n_experts: int = 256,
                  n_gpus: int = 8, redundant: int = 64, skew: float = 1.0, top_k: int = 8, tau: float = 300.0,
                  sigma: float | None = None, trace: "TraceRouting | None" = None,
                  order: str = "layers") -> list[Instance]:
    """The drift-K scenario (Sections 4.2, 5.12): ``n_batches`` Instances of a DSv3-shape proxy
    (256 experts, top-8, EP8, 64 redundant slots) whose EPLB placement is built from a corrupted
    history (the ``drift`` hottest experts' long-run loads,
    :func:`tempo.world.workloads.expected_loads`, swapped with random cold ones) while the
    batches follow the true Zipf(``skew``) routing: consecutive windows of
    :func:`tempo.world.workloads.popularity_timeline` (correlation time ``tau``, plus the
    per-batch Dirichlet), routed top-``top_k`` to distinct experts, ``pairs_per_gpu / top_k``
    tokens per GPU.  With ``trace`` (:class:`TraceRouting`): the same on recorded routing, the
    replication ``(n_experts + redundant) / n_experts`` kept as a factor of the trace's experts.
    """
    # B (pairs_per_gpu) is the serving concurrency: at EP8 with top-8 about B pairs reach each GPU
    # (Section 5.13).  The paper does not print the proxy router's skew ("Zipf-skewed router",
    # Section 5.11): 1.0 here; the studies run at the proxy_skew reading's (proxy_skew_of).
    if trace is not None:
        k = trace.top_k(top_k)
        return trace.batches(max(1, pairs_per_gpu // k), n_batches, n_gpus, (n_experts + redundant) / n_experts,
                             drift=drift, seed=seed, top_k=k, order=order)
    if pairs_per_gpu % top_k:
        raise ValueError(f"pairs_per_gpu={pairs_per_gpu} must be a multiple of top_k={top_k}")
    tokens_per_gpu = pairs_per_gpu // top_k
    pop = zipf_popularity(n_experts, skew, seed=seed)
    stale = drift_corrupt(expected_loads(pop, top_k), drift, seed=seed + 7)
    replication = (n_experts + redundant) / n_experts
    placement = eplb_placement(stale, n_gpus, replication)
    weights = drift_timeline(pop, n_batches, seed, tau=tau, sigma=sigma)
    counts = sample_counts(weights, tokens_per_gpu, top_k, n_gpus, seed=seed + 1)
    return [Instance.from_placement(c, placement, n_gpus) for c in counts]


# ------------------------------------------------------------------ the proxy router's skew (Sections 5.11, 5.13)
#: Section 5.13's printed statistic of the DSv3-shape proxy's Zipf-skewed router: TEMPO's
#: activated experts on the busiest GPU, about 13, near B*_a2a = 303 pairs per GPU (drift-16, R = 64)
PROXY_TARGET_G = 13.0
#: the B the statistic is read at: the multiple of top-8 nearest Section 5.13's N* = 303
PROXY_CALIBRATION_B = 304
#: the ``proxy_skew`` reading's fixed skews (its ``calibrated`` choice is :func:`calibrate_proxy_skew`)
PROXY_SKEWS = {"zipf_1": 1.0, "zipf_1_5": 1.5, "zipf_2_5": 2.5}


def drift_g(skew: float, pairs_per_gpu: int = PROXY_CALIBRATION_B, n_batches: int = 16, seed: int = 0,
            which: str = "busiest", params: str = "proxy-serving") -> np.ndarray:
    """float64[n_batches]: per drift-16 batch (:func:`drift_batches`, R = 64, Zipf(``skew``)),
    the activated experts G of TEMPO's dispatch under the ``params`` model on the busiest GPU
    (``which="busiest"``, the most activated experts) or averaged over the GPUs (``"mean"``)."""
    from ..core.cost import CostModel
    from ..policies import solve

    if which not in ("busiest", "mean"):
        raise ValueError(f"which must be 'busiest' or 'mean', got {which!r}")
    model = CostModel.named(params)
    out = []
    for inst in drift_batches(pairs_per_gpu, n_batches, seed=seed, skew=float(skew)):
        G, _, _ = model.gpu_features(inst, solve(inst, model, "tempo"))
        out.append(float(G.max() if which == "busiest" else G.mean()))
    return np.asarray(out)


@lru_cache(maxsize=8)
def calibrate_proxy_skew(target: float = PROXY_TARGET_G, pairs_per_gpu: int = PROXY_CALIBRATION_B,
                         n_batches: int = 16, seed: int = 0, which: str = "busiest", lo: float = 0.5,
                         hi: float = 4.0, tol: float = 0.01) -> float:
    """The Zipf skew of the drift-16 proxy (:func:`drift_batches`) at which the mean over
    ``n_batches`` batches of :func:`drift_g` equals ``target`` (the ``proxy_skew`` reading's
    ``calibrated`` choice, Section 5.13's G about 13 at B = 304): bisection on ``[lo, hi]`` to
    ``tol``.  G falls as the skew rises (hot experts take more of each GPU's pairs); a
    ``ValueError`` when ``target`` is not bracketed.  Deterministic (fixed seeds)."""
    def g(s):
        return float(drift_g(s, pairs_per_gpu, n_batches, seed, which).mean())

    g_lo, g_hi = g(lo), g(hi)
    if not g_hi <= target <= g_lo:
        raise ValueError(f"target G={target} is not between G({hi})={g_hi:.2f} and G({lo})={g_lo:.2f}")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if g(mid) > target else (lo, mid)
    return round(0.5 * (lo + hi), 3)


def proxy_skew(choice: str) -> float:
    """The Zipf skew of a ``proxy_skew`` reading choice: ``"calibrated"``
    (:func:`calibrate_proxy_skew`) or one of :data:`PROXY_SKEWS`."""
    if choice == "calibrated":
        return calibrate_proxy_skew()
    if choice not in PROXY_SKEWS:
        raise ValueError(f"proxy_skew must be 'calibrated' or one of {', '.join(PROXY_SKEWS)}, got {choice!r}")
    return PROXY_SKEWS[choice]


def proxy_skew_of(config: dict) -> float:
    """The Zipf skew a drift-16 proxy study runs at: ``config["skew"]`` when it names one, else
    its reading's ``proxy_skew`` (:func:`proxy_skew`)."""
    if config.get("skew") is not None:
        return float(config["skew"])
    from ..paper.readings import Reading

    return proxy_skew(Reading.of(config)["proxy_skew"])


# ------------------------------------------------------------------ recorded routing
#: the shipped public trace (``data/traces/``) the book's studies of real-model routing read
#: when the build is given no ``TRACE``: ESFT-vanilla-lite, the DeepSeek-V2-Lite architecture
PUBLIC_TRACE = "esft-dsv2lite-t1024.npz"
#: the paper's offline model shapes (Table 6) a trace's experts and top-k are matched against
TRACE_SHAPES = ("DSv3", "Qwen3-30B", "DSv2-Lite")


def trace_shape(n_experts: int, top_k: int, default: str = "DSv3") -> str:
    """The Table 6 shape label (:data:`TRACE_SHAPES`) with ``n_experts`` routed experts and
    top-``top_k``, or ``default`` when none has them: the shape whose ``n*`` and cost model a
    study prices a trace's batches with."""
    from ..core.models import model_shape

    for label in TRACE_SHAPES:
        m = model_shape(label)
        if (m.n_experts, m.top_k) == (int(n_experts), int(top_k)):
            return label
    return default


class TraceRouting:
    """The scenarios above on a recorded routing trace (``counts`` int[steps, layers, experts]
    and metadata, :func:`tempo.world.traces.read_trace`), for a build given ``TRACE=trace.npz``.

    * placement: per layer, built from the first ``history`` share of the steps (half by
      default), corrupted first for a drift-K scenario (:func:`tempo.world.placement.drift_corrupt`;
      ``drift = 0``: fresh); batches come only from the later steps;
    * batch size: a step's per-expert pair shares become router weights and ``B * g`` tokens
      are routed top-``k`` (:func:`tempo.world.workloads.route_counts`), no Dirichlet noise;
      ``k`` is the trace's ``top_k`` metadata, else 8;
    * steps (:meth:`windows`): ``order="layers"`` cycles layers for independent batches,
      ``order="time"`` takes consecutive steps of one layer for timelines.  A timeline longer
      than the usable windows raises; independent batches past them reuse windows with a
      :class:`tempo.world.traces.TraceWarning`; a step with fewer than ``k`` experts is skipped.

    Seeded: the same trace, sizes and seed give the same batches.
    """
    # History before batches, as the Section 5.4 replay and the paper's serving runs do: no batch
    # is priced on a placement built from itself.  The recorded step's own fluctuation is the
    # batch-to-batch fluctuation (hence no Dirichlet); an expert the step never routed to gets no
    # tokens at any B, and a hot one saturates below k times its weight, so a trace should be
    # recorded near the B a claim needs (rescale_effect warns when a step keeps empty experts).

    def __init__(self, path, history: float = 0.5):
        from ..world.traces import read_trace

        if not 0 < history < 1:
            raise ValueError(f"history must be a share of the steps in (0, 1), got {history}")
        self.path = str(path)
        self.counts, self.meta = read_trace(path)
        S, self.n_layers, self.n_experts = self.counts.shape
        self.split = max(1, int(round(history * S)))
        if self.split >= S:
            raise ValueError(f"trace {path} has {S} steps; it needs more than the {self.split} history steps "
                             f"(history={history}) to leave any to replay")
        self._placements: dict = {}

    @classmethod
    def of(cls, config: dict) -> "TraceRouting | None":
        """The trace an experiment's ``config`` names (``config["trace"]``, see
        :func:`tempo.world.traces.with_trace`), or None on the synthetic path."""
        path = config.get("trace")
        return cls(path, config.get("trace_history", 0.5)) if path else None

    def top_k(self, default: int = 8) -> int:
        k = self.meta.get("top_k")
        return int(k) if k else int(default)

    def shape(self, default: str = "DSv3") -> str:
        """The Table 6 shape of the trace's experts and top-k (:func:`trace_shape`)."""
        return trace_shape(self.n_experts, self.top_k(), default)

    def history(self, layer: int) -> np.ndarray:
        """float64[E]: the layer's pair counts over the history window (plus 1e-9, so every
        expert gets a replica)."""
        return self.counts[:self.split, layer].sum(axis=0).astype(np.float64) + 1e-9

    def placement(self, layer: int, n_gpus: int, replication: float, drift: int = 0, seed: int = 0) -> np.ndarray:
        """The layer's EPLB placement from its history window, drift-``drift`` corrupted."""
        key = (layer, n_gpus, float(replication), int(drift), int(seed))
        if key not in self._placements:
            w = self.history(layer)
            if drift:
                w = drift_corrupt(w, int(drift), seed=seed)
            self._placements[key] = eplb_placement(w, n_gpus, replication)
        return self._placements[key]

    def windows(self, n_batches: int, order: str = "layers", top_k: int = 8) -> list[tuple[int, int]]:
        """(layer, step) of each of ``n_batches`` batches (class docstring)."""
        if order not in ("layers", "time"):
            raise ValueError(f"order must be 'layers' or 'time', got {order!r}")
        usable = np.count_nonzero(self.counts[self.split:], axis=2) >= top_k  # [steps after history, L]
        steps = range(self.split, self.counts.shape[0])
        if order == "layers":
            seq = [(layer, s) for s in steps for layer in range(self.n_layers) if usable[s - self.split, layer]]
        else:
            seq = [(layer, s) for layer in range(self.n_layers) for s in steps if usable[s - self.split, layer]]
        if not seq:
            raise ValueError(f"trace {self.path}: no step after the history window routes to {top_k} or more experts")
        if n_batches > len(seq):
            held = f"{len(seq)} usable (layer, step) windows after its {self.split} history steps"
            if order == "time":
                raise ValueError(f"trace {self.path} holds {held}; the study's timeline needs {n_batches}: record a "
                                 "longer trace or shorten the timeline")
            import warnings

            from ..world.traces import TraceWarning

            warnings.warn(f"trace {self.path} holds {held}; {n_batches - len(seq)} of the {n_batches} batches reuse a "
                          "window (a new routing draw of the same step)", TraceWarning, stacklevel=2)
        return [seq[i % len(seq)] for i in range(n_batches)]

    def route(self, windows, tokens_per_gpu: int, n_gpus: int, top_k: int, seed: int = 0) -> np.ndarray:
        """int64[len(windows), E]: ``tokens_per_gpu * n_gpus`` tokens routed top-``top_k`` with each
        window's recorded shares as router weights."""
        from ..world.traces import rescale_effect, warn_rescale

        rng = np.random.default_rng(seed)
        out = np.zeros((len(windows), self.n_experts), np.int64)
        for i, (layer, s) in enumerate(windows):
            c = self.counts[s, layer]
            out[i] = route_counts(c / c.sum(), tokens_per_gpu * n_gpus, top_k, rng)
        if windows:
            lay = [w[0] for w in windows]
            steps = np.stack([self.counts[s, layer] for layer, s in windows])
            warn_rescale(rescale_effect(steps, out, top_k, self.counts.sum(axis=0)[lay]), tokens_per_gpu * n_gpus,
                         f"trace {self.path}")
        return out

    def batches(self, tokens_per_gpu: int, n_batches: int, n_gpus: int, replication: float, drift: int = 0,
                seed: int = 0, top_k: int | None = None, order: str = "layers") -> list[Instance]:
        """``n_batches`` instances at ``tokens_per_gpu`` tokens per GPU, each on its layer's
        placement (:meth:`placement`, corrupted by ``drift``, seeded ``seed + 7`` as the
        synthetic drift-K scenario)."""
        k = self.top_k(8) if top_k is None else int(top_k)
        wins = self.windows(n_batches, order, k)
        counts = self.route(wins, tokens_per_gpu, n_gpus, k, seed=seed + 1)
        return [Instance.from_placement(c, self.placement(layer, n_gpus, replication, drift, seed + 7), n_gpus)
                for c, (layer, _) in zip(counts, wins)]
