"""Replay studies of the simulator chapter: the faster-EPLB control (Table 10), the MoonEP
replay (Appendix H), tile-aware prefill search (Section 2.2), the B*_a2a regime table
(Section 5.13, Table 3) and replay of a recorded routing trace (Section 5.4)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.cost import CostModel
from ..policies import check_names, solve
from ..core.instance import Instance
from ..world.placement import drift_corrupt, eplb_placement
from ..policies.moonep import moonep
from ..world.workloads import expected_loads, route_counts, sample_counts, zipf_popularity
from . import readings
from .registry import FIRST_REPLICA, STATIC, experiment
from .scenarios import TraceRouting, drift_batches, drift_timeline, proxy_skew_of, zipf_batches

# ------------------------------------------------------------------ Table 10
#: (dispatch policy, placement refresh scheme) rows of Table 10.
T10_ROWS = [("static", "never"), ("uniform", "never"), ("uniform", "cum16"), ("static", "cum16"),
            ("tempo", "never"), ("tempo", "cum16"), ("tempo", "W4")]
check_names([p for p, _ in T10_ROWS], "replay.T10_ROWS (Table 10's dispatch policies)")


def _refreshed(initial: np.ndarray, counts: np.ndarray, scheme: str, n_gpus: int, replication: float) -> list:
    """Placement in force at each window under a refresh scheme: ``never``; ``cumN``
    rebuilt every N windows from all counts observed so far; ``WN`` rebuilt every N windows
    from the trailing N windows."""
    out, current = [], initial
    for t in range(len(counts)):
        if scheme != "never":
            every = int(scheme[3:] if scheme.startswith("cum") else scheme[1:])
            if t > 0 and t % every == 0:
                hist = counts[:t] if scheme.startswith("cum") else counts[t - every:t]
                current = eplb_placement(hist.sum(axis=0) + 1e-9, n_gpus, replication)
        out.append(current)
    return out


@experiment("faster_eplb", readings=("proxy_skew",))
def faster_eplb(config: dict) -> pd.DataFrame:
    """Table 10: replay a drift-16 timeline with the EPLB placement rebuilt every W windows
    from observed counts, under each dispatch; ratio to the never-refreshed static map on the
    same window.  Our timeline: consecutive windows of a drifting timeline around one
    Zipf popularity at the ``proxy_skew`` reading's skew (column ``skew``) (:func:`tempo.world.workloads.popularity_timeline`, documented defaults;
    per-window Dirichlet kappa = 2000; top-8 routing to distinct experts), the initial
    placement built from the drift-16-corrupted statistics, ``B`` token-expert pairs per GPU
    (as in :func:`drift_batches`).

    On a trace (``config["trace"]``): the windows are consecutive steps of one layer at a time
    (:meth:`TraceRouting.windows`, ``order="time"``), ``B // top_k`` tokens per GPU routed with
    each step's shares; each layer starts from its drift-16-corrupted history placement and
    refreshes from the counts of its own windows."""
    model = CostModel.named(config.get("params", "proxy-serving"))
    E, g, K, R = 256, 8, 8, config.get("redundant", 64)
    seed = config.get("seed", 0)
    rep = (E + R) / E
    tr = TraceRouting.of(config)
    skew = float("nan") if tr else proxy_skew_of(config)
    pop = zipf_popularity(E, 1.0 if tr else skew, seed=seed)
    stale = None if tr else drift_corrupt(expected_loads(pop, K), config.get("drift", 16), seed=seed + 7)
    initial = None if tr else eplb_placement(stale, g, rep)
    rows = []
    for B in config["pairs"]:
        if tr:
            k = tr.top_k(K)
            wins = tr.windows(config["windows"], "time", k)
            counts = tr.route(wins, B // k, g, k, seed=seed + 1)
            layers = np.array([w[0] for w in wins])
            cuts = [0] + [i for i in range(1, len(wins)) if layers[i] != layers[i - 1]] + [len(wins)]
            segments = [(lo, hi, tr.placement(int(layers[lo]), g, rep, config.get("drift", 16), seed + 7))
                        for lo, hi in zip(cuts[:-1], cuts[1:])]
        else:
            weights = drift_timeline(pop, config["windows"], seed, tau=config.get("tau", 300.0), sigma=config.get("sigma"))
            counts = sample_counts(weights, B // K, K, g, seed=seed + 1)
            segments = [(0, len(counts), initial)]
        for lo, hi, start in segments:
            seg = counts[lo:hi]
            plans = {s: _refreshed(start, seg, s, g, rep) for s in {s for _, s in T10_ROWS}}
            for t, c in enumerate(seg):
                base_inst = Instance.from_placement(c, plans["never"][t], g)
                base = model.makespan(base_inst, solve(base_inst, model, STATIC))
                for pol, scheme in T10_ROWS:
                    inst = Instance.from_placement(c, plans[scheme][t], g)
                    rows.append({"B": B, "window": lo + t, "policy": pol, "refresh": scheme, "skew": skew,
                                 "ratio": model.makespan(inst, solve(inst, model, STATIC if pol == "static" else pol)) / base})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ Appendix H
@experiment("moonep_replay", readings=("moonep_home",))
def moonep_replay(config: dict) -> pd.DataFrame:
    """Appendix H: MoonEP's weight-moving balance (free and charged prefetch), TEMPO and
    token-LP relative to the static map, Qwen3-235B shape (128 experts, top-8, EP8, EPLB
    1.25x) under the tile-aware Testbed B model, on synthetic Zipf batches, or on batches drawn
    from a trace when ``config["trace"]`` names one (:class:`TraceRouting`: layers cycled,
    placement from the trace's history, as the paper's "recorded Qwen3-235B distributions").
    MoonEP starts from the reading's homes (``moonep_home``: MoonEP's own layout, or the EPLB
    placement's first replicas, :func:`tempo.studies.readings.moonep_home`); the fixed policies
    and TEMPO run on the EPLB placement.  ``fetched``: experts copied in the batch,
    ``fetched_max``: on the busiest receiver; ``copy_us``: the charge of one copy."""
    model = CostModel.named(config.get("params", "qwen3-235b-testbedb-tile"))
    ratio = config.get("ratio", 4.0)
    reading = readings.of(config)
    tr = TraceRouting.of(config)
    rows = []
    for B in config["tokens"]:
        insts = zipf_batches(128, 8, B, config.get("skew", 1.0), config.get("replication", 1.25),
                             config["batches"], seed=config.get("seed", 0), top_k=8, trace=tr)
        for b, inst in enumerate(insts):
            res = moonep(readings.moonep_home(inst, reading))
            ms = {"moonep_free": res.makespan(model, "free"), "moonep_charged": res.makespan(model, "charged", ratio)}
            for p in ("first_replica", "static", "tempo", "token_lp"):
                ms[p] = model.makespan(inst, solve(inst, model, {"first_replica": FIRST_REPLICA, "static": STATIC}.get(p, p)))
            for base in ("static", "first_replica"):
                for p, v in ms.items():
                    rows.append({"tokens_per_gpu": B, "batch": b, "baseline": base, "policy": p, "makespan_us": v,
                                 "change_pct": 100 * (v / ms[base] - 1), "fetched": int(res.fetched.sum()),
                                 "fetched_max": int(res.fetched.max()), "copy_us": ratio * model.b})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ Section 2.2
@experiment("tile_prefill")
def tile_prefill(config: dict) -> pd.DataFrame:
    """Section 2.2: at prefill scale, does tile-aware search change the tile-blind solution,
    and by how much does it cut modeled block time?  TEMPO is solved once with the Eq. 2
    model and once with ``b2 = 0``; both are scored with Eq. 2.  The Testbed B expert models
    are used without the traffic piece (the study is about the expert kernel's staircase;
    with gamma = 0.10 the traffic piece dominates every prefill batch and hides it).  Also
    the extra padded tiles of EPLB's uniform split over the tile-aware solution.

    On a trace (``config["trace"]``) the synthetic rows are followed by the same on
    ``pairs // top_k`` tokens per GPU routed with the recorded steps' shares
    (:class:`TraceRouting`, layers cycled), the trace's own experts, priced with each requested
    shape's tile model (the ``shape`` column names the model); a ``routing`` column says which
    rows are which."""
    tr = TraceRouting.of(config)
    rows = []
    for routing, shape, (E, params) in [(r, sh, v) for r in (("synthetic", "trace") if tr else ("synthetic",))
                                        for sh, v in {"DSv3": (256, "dsv3-testbedb-tile"),
                                                      "Qwen3-235B": (128, "qwen3-235b-testbedb-tile")}.items()]:
        if shape not in config.get("shapes", ["DSv3", "Qwen3-235B"]):
            continue
        src = tr if routing == "trace" else None
        aware = CostModel.named(params).without("traffic")
        blind = aware.without("tiles")
        for pairs in config["pairs"]:
            insts = zipf_batches(E, 8, pairs // (src.top_k(8) if src else 8), config.get("skew", 1.0),
                                 config.get("replication", 1.25), config["batches"], seed=config.get("seed", 0), top_k=8,
                                 trace=src)
            for b, inst in enumerate(insts):
                da, db, du = (solve(inst, aware, "tempo"), solve(inst, blind, "tempo"), solve(inst, aware, "uniform"))
                tiles = {k: aware.gpu_features(inst, d)[2].sum() for k, d in (("aware", da), ("blind", db), ("uniform", du))}
                ms_a, ms_b = aware.makespan(inst, da), aware.makespan(inst, db)
                # "changed" counts a different makespan, not a tie-break between equal-cost splits
                rows.append({"shape": shape, "pairs_per_gpu": pairs, "batch": b,
                             "changed": bool(abs(ms_a - ms_b) > 1e-9 * ms_b),
                             "shares_differ": bool(np.abs(da.shares - db.shares).max() > 0.5),
                             "cut_pct": 100 * (1 - ms_a / ms_b),
                             "uniform_extra_tiles_pct": 100 * (tiles["uniform"] / tiles["aware"] - 1),
                             "blind_extra_tiles_pct": 100 * (tiles["blind"] / tiles["aware"] - 1),
                             **({"routing": routing} if tr else {})})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ Section 5.13
def dominant_term(model: CostModel, inst: Instance, d) -> str:
    """Which piece of the max sets the bottleneck GPU's time: floor, compute or traffic."""
    G, N, T = model.gpu_features(inst, d)
    k = int(np.argmax(model.time(G, N, T)))
    pieces = {"floor": model.a + model.b * G[k] + (model.b2 * (T[k] - G[k]) if model.b2 else 0.0),
              "compute": model.c + model.beta * N[k]}
    if model.c2 is not None:
        pieces["traffic"] = model.c2 + model.gamma * N[k]
    return max(pieces, key=pieces.get)


def ba2a(model: CostModel, G: float) -> float:
    """Section 5.13: tokens per GPU where the traffic piece overtakes the activation floor,
    ``N* = (a + b*G - c2) / gamma``."""
    if model.c2 is None or not model.gamma:
        raise ValueError("B*_a2a needs a model with the traffic piece (c2, gamma)")
    return (model.a + model.b * G - model.c2) / model.gamma


@experiment("ba2a_regimes", readings=("proxy_skew",))
def ba2a_regimes(config: dict) -> pd.DataFrame:
    """Table 3's model columns: on the drift-16 scenario (R = 64, the ``proxy_skew`` reading's
    skew, column ``skew``), per concurrency B, the
    dominant term of TEMPO's bottleneck GPU, TEMPO's block ratio to static, and the
    activated experts per GPU the solver sees (the G of the B*_a2a formula: ``mean_G`` over the
    GPUs, ``max_G`` on the busiest); on a trace when ``config["trace"]`` names one
    (:func:`drift_batches`)."""
    model = CostModel.named(config.get("params", "proxy-serving"))
    tr = TraceRouting.of(config)
    skew = float("nan") if tr else proxy_skew_of(config)
    rows = []
    for B in config["pairs"]:
        for b, inst in enumerate(drift_batches(B, config["batches"], seed=config.get("seed", 0), trace=tr,
                                               skew=1.0 if tr else skew)):
            d = solve(inst, model, "tempo")
            G, _, _ = model.gpu_features(inst, d)
            rows.append({"B": B, "batch": b, "regime": dominant_term(model, inst, d),
                         "static_regime": dominant_term(model, inst, solve(inst, model, STATIC)),
                         "ratio_to_static": model.makespan(inst, d) / model.makespan(inst, solve(inst, model, STATIC)),
                         "mean_G": float(G.mean()), "max_G": float(G.max()), "skew": skew})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ Section 5.4
#: Section 5.4's fixed policies, the oracle's candidates: the paper's comparison set (study
#: design, not "every proxy"); the order decides the oracle's ties (``idxmin``) and the rows'
#: order.  Checked against the policy registry at import.
REPLAY_FIXED = check_names(("static", "uniform", "token_lp", "metro"), "replay.REPLAY_FIXED (Section 5.4)")


def replay_trace(counts: np.ndarray, model: CostModel, n_gpus: int = 8, replication: float = 1.25,
                 tokens_per_gpu=None, top_k: int = 8, seed: int = 0, warmup: float = 0.5) -> pd.DataFrame:
    """Replay a routing trace (``counts`` [steps, layers, experts]) through every fixed
    policy and TEMPO (Section 5.4).

    Per layer, the EPLB placement is built from the first ``warmup`` share of the steps and
    the rest are replayed on it.  ``tokens_per_gpu`` (a list) rescales each recorded step to
    that batch size by re-routing tokens with its routing distribution; ``None`` replays
    the recorded counts.  Rescaling routes ``B * n_gpus`` tokens to ``top_k`` distinct
    experts (:func:`tempo.world.workloads.route_counts`) with the step's pair shares as router
    weights; for a hot expert this slightly understates its share (the router's inclusion
    probability saturates below ``top_k`` times its weight).  One row per (step, layer,
    batch size, policy) with the makespan.
    """
    counts = np.asarray(counts)
    if counts.ndim != 3:
        raise ValueError(f"counts must be [steps, layers, experts], got shape {counts.shape}")
    S, L, E = counts.shape
    split = max(1, int(round(warmup * S)))
    if split >= S:
        raise ValueError(f"trace has {S} steps; need more than the {split} warm-up steps")
    rng = np.random.default_rng(seed)
    rows = []
    for layer in range(L):
        placement = eplb_placement(counts[:split, layer].sum(axis=0) + 1e-9, n_gpus, replication)
        for step in range(split, S):
            c = counts[step, layer]
            if c.sum() == 0:
                continue
            for B in (tokens_per_gpu or [None]):
                cc = c if B is None else route_counts(c / c.sum(), B * n_gpus, top_k, rng)
                inst = Instance.from_placement(cc, placement, n_gpus)
                for p in REPLAY_FIXED + ("tempo",):
                    rows.append({"step": step, "layer": layer, "B": B if B is not None else int(c.sum() // (top_k * n_gpus)),
                                 "policy": p, "makespan": model.makespan(inst, solve(inst, model, STATIC if p == "static" else p))})
    return pd.DataFrame(rows)


def oracle_gap(df: pd.DataFrame, cell: tuple = ("layer", "B")) -> pd.DataFrame:
    """Section 5.4: per cell, TEMPO's mean makespan against a fixed-policy oracle that picks,
    in hindsight, the best fixed policy of that cell (unrealizable in deployment); the gap
    is ``1 - tempo / oracle`` in percent."""
    mean = df.groupby(list(cell) + ["policy"]).makespan.mean().unstack("policy")
    fixed = [p for p in REPLAY_FIXED if p in mean]
    out = pd.DataFrame({"oracle_policy": mean[fixed].idxmin(axis=1), "oracle": mean[fixed].min(axis=1),
                        "tempo": mean["tempo"]})
    out["gap_pct"] = 100 * (1 - out.tempo / out.oracle)
    return out.reset_index()


@experiment("trace_replay")
def trace_replay(config: dict) -> pd.DataFrame:
    """Section 5.4 on a trace file (``config["trace"]``, npz; its first ``max_layers`` layers
    when the config names it) or, when none is given, on a synthetic trace (labelled so):
    Zipf(skew) popularity per layer, drifting slowly.  Priced with the Table 6 model of the
    trace's shape (its experts and ``top_k``), unless ``params`` names one."""
    from ..world.traces import read_trace
    from ..world.workloads import synthetic_trace

    if config.get("trace"):
        counts, meta = read_trace(config["trace"])
        if config.get("max_layers"):  # the first layers only (the book's default public trace: a time budget)
            counts = counts[:, :int(config["max_layers"])]
    else:
        counts, meta = synthetic_trace(config.get("steps", 16), config.get("layers", 4), config.get("experts", 128),
                                       config.get("tokens", 64), top_k=8, n_gpus=8, seed=config.get("seed", 0))
    from ..core.models import model_shape
    from .scenarios import trace_shape

    k = int(meta.get("top_k") or 8)
    # priced with the Table 6 model of the trace's shape (Qwen3-30B for the synthetic 128-expert trace)
    params = config.get("params") or model_shape(trace_shape(counts.shape[2], k, "Qwen3-30B")).params
    df = replay_trace(counts, CostModel.named(params), tokens_per_gpu=config.get("rescale"), top_k=k,
                      seed=config.get("seed", 0))
    df["source"] = meta.get("source", "unknown")
    return df
