"""Simulator studies (paper Sections 2.3, 2.4, 3.2): mixed regimes (Fig. 5), proxy
mispricing (Table 1) and the phase diagram (Fig. 6)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.cost import CostModel
from ..core.instance import Dispatch, Instance
from ..core.models import model_shape
from ..paper.readings import Reading
from ..policies import check_names, solve
from ..policies.exact import token_lp_highs, token_lp_vertex
from ..policies.proxies import TOKEN_LP_FACES
from ..theory.bounds import flip_boundary
from ..world.placement import drift_corrupt, eplb_placement
from ..world.workloads import expected_loads, pair_shares, routing_stats, sample_counts, zipf_popularity
from . import readings
from .registry import FIRST_REPLICA, STATIC, experiment, result_of
from .scenarios import (PROXY_CALIBRATION_B, PROXY_TARGET_G, TraceRouting, calibrate_proxy_skew, drift_batches, drift_g,
                        placement_weights, proxy_skew_of, zipf_placement)
from .sweep import map_cells, run_grid

#: Routed-expert shapes (experts, top-k) and their Table 6 parameter sets.
SHAPES = {m.label: (m.n_experts, m.top_k, m.params)
          for m in map(model_shape, ("DSv3", "Qwen3-30B", "DSv2-Lite"))}  # a view of tempo.core.models
#: The paper's comparison sets (study design, not "every policy with a property"): each is the
#: ordered list of dispatches a table or figure compares, and the order decides ties (``min``
#: over it) and row order.  Their names are checked against the policy registry at import.
#: Phase diagram (Fig. 6 / 12): the three fixed policies and their one-letter winner codes.
FIXED = {"metro": "M", "token_lp": "L", "uniform": "E"}
check_names(FIXED, "simulator.FIXED (the phase diagram's fixed policies)")
#: Table 1: the proxies priced against TEMPO (``static`` runs as the study's STATIC map).
TABLE1_PROXIES = check_names(("static", "uniform", "token_lp", "metro"), "simulator.TABLE1_PROXIES (Table 1)")


@experiment("mixed_regime", readings=("synthetic_router",))
def mixed_regime(config: dict) -> pd.DataFrame:
    """Fig. 5: per batch, the share of activated experts in the flat region (n_e < n*) and
    of tokens in the linear region (n_e >= n*); a batch is mixed when both are >= 20%.

    The synthetic batches (Fig. 5b) draw their pairs with the reading's ``synthetic_router``
    (the paper's: ``T = B K g`` independent draws, Section 3.2).

    With a trace (``config["trace"]``) the synthetic Zipf rows (Fig. 5b) are followed by the
    same statistics on batches drawn from the trace (Fig. 5a, :class:`TraceRouting`, layers
    cycled), and a ``routing`` column says which is which; the trace rows take ``n*`` of the
    Table 6 shape with the trace's experts and top-k (:meth:`TraceRouting.shape`; the
    ``shape``'s when none matches)."""
    E, K, params = SHAPES[config.get("shape", "DSv3")]
    pop = zipf_popularity(E, config["skew"], seed=config.get("seed", 0))
    tr = TraceRouting.of(config)
    router = readings.of(config)["synthetic_router"]
    g = config.get("n_gpus", 8)
    rows = []
    for routing in ("synthetic", "trace") if tr else ("synthetic",):
        shape = tr.shape(config.get("shape", "DSv3")) if routing == "trace" else config.get("shape", "DSv3")
        n_star = CostModel.named(SHAPES[shape][2]).n_star
        for B in config["tokens"]:
            if routing == "synthetic":
                counts = sample_counts(pop, B, K, g, n_batches=config["batches"], seed=B, router=router)
            else:
                k = tr.top_k(K)
                counts = tr.route(tr.windows(config["batches"], "layers", k), B, g, k, seed=B)
            for b, c in enumerate(counts):
                act = c > 0
                flat = act & (c < n_star)
                flat_share = flat.sum() / max(act.sum(), 1)
                lin_tokens = c[c >= n_star].sum() / max(c.sum(), 1)
                rows.append({"tokens_per_gpu": B, "batch": b, "flat_expert_share": flat_share,
                             "linear_token_share": lin_tokens, "mixed": bool(flat_share >= 0.2 and lin_tokens >= 0.2),
                             **({"routing": routing} if tr else {})})
    return pd.DataFrame(rows)


@experiment("proxy_mispricing", readings=("proxy_skew", "token_lp_face"))
def proxy_mispricing(config: dict) -> pd.DataFrame:
    """Table 1: each proxy's modeled block time over TEMPO's on the same batch (DSv3-shape
    proxy, EP8, R redundant slots, fresh EPLB placement, three-term serving model), routing
    Zipf(the ``proxy_skew`` reading's skew, :func:`proxy_skew_of`; column ``skew``), token-LP
    on the ``token_lp_face`` reading's face.  With a
    trace (``config["trace"]``): batches of ``B // top_k`` tokens per GPU from the trace,
    layers cycled, each layer's fresh placement built from the trace's history window with
    the same replication factor (:class:`TraceRouting`)."""
    model = CostModel.named(config.get("params", "proxy-serving"))
    E, K, g, R = 256, 8, 8, config.get("redundant", 64)
    tr = TraceRouting.of(config)
    skew = float("nan") if tr else proxy_skew_of(config)
    face = readings.of(config)["token_lp_face"]
    pop = zipf_popularity(E, 1.0 if tr else skew, seed=config.get("seed", 0))
    placement = eplb_placement(expected_loads(pop, K), g, (E + R) / E)

    rows = []
    for B in config["concurrency"]:
        if tr:
            insts = tr.batches(B // tr.top_k(K), config["batches"], g, (E + R) / E, seed=B, top_k=tr.top_k(K))
        else:
            counts = sample_counts(pop, B // K, K, g, n_batches=config["batches"], seed=B + 1)
            insts = [Instance.from_placement(c, placement, g) for c in counts]
        for b, inst in enumerate(insts):
            t = model.makespan(inst, solve(inst, model, "tempo"))
            ms = {p: model.makespan(inst, solve(inst, model, STATIC if p == "static" else p,
                                                **({"face": face} if p == "token_lp" else {})))
                  for p in TABLE1_PROXIES}
            row = {"B": B, "batch": b, "skew": skew, **{p: v / t for p, v in ms.items()}}
            row["spread"] = max(ms.values()) / min(ms.values())
            row["first_replica"] = model.makespan(inst, solve(inst, model, FIRST_REPLICA)) / t
            rows.append(row)
    return pd.DataFrame(rows)


#: Two fixed policies whose cell means lie within this relative distance tie (the ``ties``
#: reading): no policy wins the cell.
TIE_REL = 1e-9
#: The readings a phase-diagram cell depends on.
PHASE_READINGS = ("synthetic_router", "placement_loads", "eplb_ties", "token_lp_face", "ensemble_lp",
                  "tempo_preset", "chain_depth", "metro_order", "ties")


def winner_label(ms: dict, ties: str = "tie") -> tuple[str, bool]:
    """The winner code of a cell from the fixed policies' makespans ``ms`` (:data:`FIXED`),
    and whether it is a tie.  ``ties`` (the reading): ``"tie"``: the letters of every fixed
    policy within :data:`TIE_REL` (relative) of the best, joined by "+" in :data:`FIXED`'s
    order (``"M+L"``, ``"M+L+E"``), a single letter when one policy is best alone;
    ``"first_listed"``: the first best policy in :data:`FIXED`'s order, never a tie."""
    if ties not in ("tie", "first_listed"):
        raise ValueError(f"ties must be 'tie' or 'first_listed', got {ties!r}")
    best = min(FIXED, key=lambda p: ms[p])
    if ties == "first_listed":
        return FIXED[best], False
    m = ms[best]
    tied = [p for p in FIXED if ms[p] <= m + TIE_REL * abs(m)]
    return "+".join(FIXED[p] for p in tied), len(tied) > 1


def tempo_gain(ms: dict, against=FIXED, policy: str = "tempo") -> tuple[str, float]:
    """How a phase cell is scored: ``(best, gain_pct)``, the policy of ``against`` with the
    lowest makespan in ``ms`` (policy -> mean makespan; the first listed wins a tie) and
    ``policy``'s gain over it in %, ``100 (1 - ms[policy] / ms[best])``."""
    best = min(against, key=lambda p: ms[p])
    return best, 100 * (1 - ms[policy] / ms[best])


def phase_cell(cell: dict) -> pd.DataFrame:
    """One phase-diagram cell: mean makespan of each fixed policy and TEMPO over batches.

    Under the cell's reading (``cell["reading"]``, :class:`tempo.paper.readings.Reading`): the
    batches' router and placement, token-LP's face, METRO's order, which TEMPO (preset and
    ensemble candidates) and how ties are labelled (:func:`winner_label`; ``tie`` column).

    With ``comm_kr > 0`` (us per received token, Fig. 12's communication-aware variant) each
    dispatch is also scored with an additive all-to-all term ``kr * N_g`` on every GPU; the
    policies still solve the compute model (Eq. 1 cannot carry an additive term), so this
    asks whether pricing communication changes the conclusions, as the paper does."""
    E, K, params = SHAPES[cell["shape"]]
    model = CostModel.named(params)
    reading = readings.of(cell)
    kr = float(cell.get("comm_kr", 0.0))
    insts = readings.batches(reading, E, cell["ep"], cell["B"], cell["skew"], cell["replication"], cell["batches"],
                       seed=cell["seed"], top_k=K)
    ms, msc = {}, {}
    for p in list(FIXED) + ["tempo"]:
        per, perc = [], []
        for i in insts:
            t, N = readings.dispatch_times(i, model, p, reading)
            per.append(t.max())
            perc.append((t + kr * N).max())
        ms[p], msc[p] = float(np.mean(per)), float(np.mean(perc))
    winner, tie = winner_label(ms, reading["ties"])
    row = {**{f"ms_{p}": v for p, v in ms.items()}, "winner": winner, "tie": tie, "gain_pct": tempo_gain(ms)[1]}
    if kr:
        winc, tiec = winner_label(msc, reading["ties"])
        row.update({"winner_comm": winc, "tie_comm": tiec, "gain_comm_pct": tempo_gain(msc)[1]})
    return pd.DataFrame([row])


def _seeds(config: dict) -> list:
    """A grid's seeds: ``config["seeds"]`` (a list; e.g. :meth:`Reading.seeds`) or the one
    ``config["seed"]`` (default 0)."""
    seeds = config.get("seeds")
    if seeds is None:
        return [config.get("seed", 0)]
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__") or not list(seeds):
        raise ValueError(f"seeds must be a non-empty list of integers, got {seeds!r}")
    return list(seeds)


@experiment("phase_diagram", readings=PHASE_READINGS)
def phase_diagram(config: dict) -> pd.DataFrame:
    """Fig. 6 / Fig. 12: winning fixed policy and TEMPO's gain over it on a grid of batch
    size, skew, replication, EP size and expert shape (Section 3.2), under the config's
    reading (:func:`phase_cell`).  ``seeds`` (a list) runs the grid once per seed, a ``seed``
    column telling them apart; otherwise the one ``seed`` (default 0)."""
    reading = readings.of(config).select(PHASE_READINGS)
    cells = [{"shape": sh, "ep": ep, "skew": s, "replication": r, "B": B, "batches": config["batches"],
              "seed": seed, "comm_kr": config.get("comm_kr", 0.0), "reading": reading}
             for seed in _seeds(config)
             for sh in config["shapes"] for ep in config["eps"] for s in config["skews"]
             for r in config["replications"] for B in config["tokens"]]
    return run_grid(phase_cell, cells, workers=config.get("workers"), progress=config.get("progress", True),
                    desc="phase diagram")


#: The readings a phase cell's batches and dispatches depend on (those of the phase diagram but
#: its tie labels).
DISPATCH_READINGS = tuple(r for r in PHASE_READINGS if r != "ties")
#: The exact fewest-activations dispatch (Lemma 2): what METRO's greedy approximates.
EXACT_BALANCER = "semi_matching"


def activation_balancer_cell(cell: dict) -> pd.DataFrame:
    """One phase-diagram cell (shape, replication, skew, B at ``ep``, the cell's batches and
    seed, as :func:`phase_cell` draws them under ``cell["reading"]``) with the exact activation
    balancer beside the fixed policies: each policy's mean makespan, TEMPO's gain over the best
    fixed policy (``gain_pct``) and over the best of those and :data:`EXACT_BALANCER`
    (``gain_vs_exact_pct``)."""
    E, K, params = SHAPES[cell["shape"]]
    model = CostModel.named(params)
    reading = readings.of(cell)
    insts = readings.batches(reading, E, cell["ep"], cell["B"], cell["skew"], cell["replication"], cell["batches"],
                       seed=cell["seed"], top_k=K)
    ms = {p: float(np.mean([readings.dispatch_times(i, model, p, reading)[0].max() for i in insts]))
          for p in list(FIXED) + [EXACT_BALANCER, "tempo"]}
    return pd.DataFrame([{**{f"ms_{p}": v for p, v in ms.items()}, "gain_pct": tempo_gain(ms)[1],
                          "gain_vs_exact_pct": tempo_gain(ms, list(FIXED) + [EXACT_BALANCER])[1]}])


@experiment("activation_balancer", readings=DISPATCH_READINGS)
def activation_balancer(config: dict) -> pd.DataFrame:
    """Section 3.2's "TEMPO min gain >= -0.3%" against a stronger activation balancer: the phase
    grid of ``config`` (``shapes``, ``replications``, ``skews``, ``tokens``, ``batches``, one
    ``seed``; EP8, or ``ep``) with :data:`EXACT_BALANCER` added, one row per cell
    (:func:`activation_balancer_cell`).  Its batches and fixed dispatches are the phase
    diagram's: a run after it reuses them through the grid memo."""
    reading = readings.of(config).select(DISPATCH_READINGS)
    cells = [{"shape": sh, "replication": r, "skew": s, "B": B, "ep": config.get("ep", 8), "batches": config["batches"],
              "seed": config.get("seed", 0), "reading": reading}
             for sh in config["shapes"] for r in config["replications"] for s in config["skews"] for B in config["tokens"]]
    return run_grid(activation_balancer_cell, cells, workers=config.get("workers"),
                    progress=config.get("progress", True), desc="activation balancer")


def boundary_table(df: pd.DataFrame, shape: str = "DSv3", ep: int = 8, reading=None) -> pd.DataFrame:
    """Per (skew, replication) column: the observed flip band (last B where METRO-like wins,
    first B where token-LP wins) and the analytic B* of Section 3.2; ``hit`` when B* falls
    inside the band (inclusive, on the log-spaced ladder).  A tied cell (``"M+L"``, the
    ``ties`` reading) is won by neither policy: it neither ends nor starts the band.

    ``reading`` (default the paper's) must be the one the phase diagram ran under: it names the
    router and the placement (``synthetic_router``, ``placement_loads``, rebuilt here to get the
    replica counts) and the ``p`` of ``E_eff`` and ``p_1`` (``hot_share``: the experts' shares
    of the pairs under the router, or the router weights).  ``df`` must hold one seed."""
    reading = Reading.of(reading) if reading is not None else Reading.paper()
    E, K, params = SHAPES[shape]
    n_star = CostModel.named(params).n_star
    rows = []
    sub = df[(df["shape"] == shape) & (df.ep == ep)]
    seeds = sub["seed"].unique() if "seed" in sub else [0]
    if len(seeds) > 1:
        raise ValueError(f"boundary_table needs the rows of one seed; df has seeds {sorted(seeds)}")
    seed = int(seeds[0]) if len(seeds) else 0
    router = reading["synthetic_router"]
    for (s, r), grp in sub.groupby(["skew", "replication"]):
        grp = grp.sort_values("B")
        Bs, win = grp.B.to_numpy(), grp.winner.to_numpy()
        m_idx = np.flatnonzero(win == "M")
        l_idx = np.flatnonzero(win == "L")
        lo = Bs[m_idx.max()] if m_idx.size else Bs.min()
        after = l_idx[l_idx > (m_idx.max() if m_idx.size else -1)]
        hi = Bs[after.min()] if after.size else Bs.max()
        pop = zipf_popularity(E, s, seed=seed)
        placement = zipf_placement(E, s, seed, K, ep, r, router, reading["placement_loads"], reading["eplb_ties"])
        reps = np.bincount(placement, minlength=E)
        p = pair_shares(pop, K, router) if reading["hot_share"] == "pair_share" else pop
        bstar, bavg, bhot = flip_boundary(p, reps, n_star, K, ep)
        rows.append({"skew": s, "replication": r, "band_lo": lo, "band_hi": hi, "B_star": bstar,
                     "B_star_avg": bavg, "B_star_hot": bhot, "mechanism": "hot" if bhot < bavg else "avg",
                     "hit": bool(lo <= bstar <= hi)})
    return pd.DataFrame(rows, columns=["skew", "replication", "band_lo", "band_hi", "B_star", "B_star_avg",
                                       "B_star_hot", "mechanism", "hit"])


def boundary_hits(phase: pd.DataFrame, shape: str = "DSv3", ep: int = 8, reading=None) -> pd.DataFrame:
    """:func:`boundary_table` of one seed's grid with ``flips``: whether the winner flips from M
    to L on the ladder, i.e. a cell token-LP wins alone lies above the last cell METRO wins
    alone.  A tied cell ("M+L", the ``ties`` reading) is won by neither policy, so it neither
    ends nor starts the band; a column whose top cells tie and where token-LP never wins alone
    does not flip, has no band and counts as a miss (``hit`` is False; Section 3.2 reads the
    band from the winning policy's letter)."""
    bt = boundary_table(phase, shape, ep, reading=reading)
    sub = phase[(phase["shape"] == shape) & (phase.ep == ep)]
    flips = []
    for r in bt.itertuples():
        w = sub[(sub["skew"] == r.skew) & (sub.replication == r.replication)].sort_values("B").winner.to_numpy()
        m = np.flatnonzero(w == "M")
        flips.append(bool(m.size and (np.flatnonzero(w == "L") > m.max()).any()))
    bt["flips"] = flips
    bt["hit"] = bt.hit & bt.flips
    return bt


#: The columns Section 3.2 counts the boundary's hits over (12 of 12): the DSv3 grid at EP8.
BOUNDARY_SHAPE, BOUNDARY_EP = "DSv3", 8


@experiment("phase_boundary", readings=PHASE_READINGS + ("hot_share",))
def phase_boundary(config: dict) -> pd.DataFrame:
    """Section 3.2's flip boundary on the phase diagram of the same config (``phase_diagram``,
    from the cache when a run computed it, :func:`tempo.studies.registry.result_of`): per seed
    and (skew, replication) column of the :data:`BOUNDARY_SHAPE` grid at :data:`BOUNDARY_EP`,
    :func:`boundary_hits` under the config's reading (the router and placement the grid ran
    with, ``hot_share``'s p_1).  Columns ``seed``, ``shape``, ``ep``, then those of
    :func:`boundary_hits`."""
    reading = readings.of(config)
    phase = result_of("phase_diagram", config)
    seeds = sorted(phase["seed"].unique()) if "seed" in phase else [0]
    out = []
    for seed in seeds:
        bt = boundary_hits(phase[phase.seed == seed] if "seed" in phase else phase, BOUNDARY_SHAPE, BOUNDARY_EP,
                           reading=reading)
        for i, (k, v) in enumerate({"seed": int(seed), "shape": BOUNDARY_SHAPE, "ep": BOUNDARY_EP}.items()):
            bt.insert(i, k, v)
        out.append(bt)
    return pd.concat(out, ignore_index=True)


@experiment("token_lp_faces", readings=("synthetic_router", "placement_loads", "eplb_ties"))
def token_lp_faces(config: dict) -> pd.DataFrame:
    """The three optimal token-LP dispatches of :data:`tempo.policies.proxies.TOKEN_LP_FACES`
    (the ``token_lp_face`` reading) on phase-grid batches (Section 3.2; Section 5.14's "exact
    HiGHS min-max token count"): per (cell, batch, face) the modelled makespan, the largest
    activated-slot count ``G`` and token count ``N`` on one GPU, the activated slots in all,
    the busiest GPU's tokens over the LP optimum, and ``same_as_highs`` (the makespan equals
    the HiGHS vertex's within 1e-9, relative) -- whether the HiGHS vertex and the max-flow
    vertex ever differ in makespan, and how far the spread is from both."""

    reading = readings.of(config)
    cells = [{"shape": sh, "seed": seed, "ep": ep, "skew": s, "config": config, "reading": reading}
             for sh in config["shapes"] for seed in _seeds(config) for ep in config["eps"] for s in config["skews"]]
    rows = map_cells(_faces_cell, cells, workers=config.get("workers"), progress=config.get("progress", True),
                     desc="token-LP faces")
    return pd.DataFrame([r for cell_rows in rows for r in cell_rows])


def _faces_cell(cell: dict) -> list[dict]:
    """The rows of :func:`token_lp_faces` of one shape, seed, EP size and skew, in the study's order."""
    config, reading, sh, seed, ep, s = (cell[k] for k in ("config", "reading", "shape", "seed", "ep", "skew"))
    E, K, params = SHAPES[sh]
    model = CostModel.named(params)
    rows = []
    for r in config["replications"]:
        for B in config["tokens"]:
            insts = readings.batches(reading, E, ep, B, s, r, config["batches"], seed=seed, top_k=K)
            for b, inst in enumerate(insts):
                out = {}
                for face in TOKEN_LP_FACES:
                    d = solve(inst, model, "token_lp", face=face)
                    G, N, T = model.gpu_features(inst, d)
                    out[face] = {"makespan_us": float(model.time(G, N, T).max()),
                                 "max_G": float(G.max()), "max_N": float(N.max()),
                                 "active_slots": int((d.shares > 0).sum()),
                                 "fallback": d.meta.get("fallback", "")}
                ref = out["highs_vertex"]["makespan_us"]
                for face, v in out.items():
                    rows.append({"shape": sh, "seed": seed, "ep": ep, "skew": s, "replication": r,
                                 "B": B, "batch": b, "face": face, **v,
                                 "same_as_highs": bool(abs(v["makespan_us"] - ref) <= 1e-9 * ref)})
    return rows


#: Table 4's dispatch kernels, in the paper's row order (study design, see :data:`FIXED`).
LANDSCAPE = list(check_names(["uniform", "token_lp", "metro", "llep", "tempo"], "simulator.LANDSCAPE (Table 4)"))


@experiment("policy_landscape", readings=("proxy_skew", "token_lp_face"))
def policy_landscape(config: dict) -> pd.DataFrame:
    """Table 4: block makespan of each dispatch kernel relative to static on the drift-K
    scenario at the ``proxy_skew`` reading's skew (column ``skew``), at several batch scales,
    for each redundancy R and drift K (on a trace when ``config["trace"]`` names one,
    :func:`drift_batches`); token-LP on the ``token_lp_face`` reading's face."""

    model = CostModel.named(config.get("params", "proxy-serving"))
    tr = TraceRouting.of(config)
    skew = float("nan") if tr else proxy_skew_of(config)
    face = readings.of(config)["token_lp_face"]
    rows = []
    for R in config["redundant"]:
        for K in config["drift"]:
            for label, B in config["scales"].items():
                for b, inst in enumerate(drift_batches(B, config["batches"], seed=config.get("seed", 0), drift=K, redundant=R,
                                                       skew=1.0 if tr else skew, trace=tr)):
                    static = model.makespan(inst, solve(inst, model, STATIC))
                    for p in LANDSCAPE:
                        d = solve(inst, model, p, **({"face": face} if p == "token_lp" else {}))
                        rows.append({"redundant": R, "drift": K, "scale": label, "B": B, "batch": b, "policy": p,
                                     "skew": skew, "ratio_to_static": model.makespan(inst, d) / static})
    return pd.DataFrame(rows)


@experiment("staleness", readings=("proxy_skew",))
def staleness(config: dict) -> pd.DataFrame:
    """Section 5.5 (drift-16 at the ``proxy_skew`` reading's skew, column ``skew``): the same
    solver under four information regimes, scored on the true
    current batch: exact (solve the current counts), stale-1 (apply the routing table solved
    on the previous batch), frozen (the table of the first batch, never refreshed) and
    uniform (no solve: even split over replicas).

    On a trace (``config["trace"]``) the batches are consecutive steps of one layer at a time
    (:meth:`TraceRouting.windows`, ``order="time"``); "previous" and "first" are taken within
    the layer, and the first step of each layer is not scored (it has no previous table)."""

    model = CostModel.named(config.get("params", "proxy-serving"))
    tr = TraceRouting.of(config)
    skew = float("nan") if tr else proxy_skew_of(config)
    rows = []
    for scale, B in config["scales"].items():
        n = config["batches"] + 1
        insts = drift_batches(B, n, seed=config.get("seed", 0), redundant=config.get("redundant", 64), trace=tr,
                              skew=1.0 if tr else skew, order="time")
        tables = [solve(i, model, "tempo").probabilities(i) for i in insts]
        uniform = Dispatch(np.zeros_like(tables[0])).probabilities(insts[0])
        layer = [w[0] for w in tr.windows(n, "time", tr.top_k(8))] if tr else [0] * n
        first = {}
        for t, lay in enumerate(layer):
            first.setdefault(lay, t)
        for t in range(1, len(insts)):
            inst = insts[t]
            if layer[t] != layer[t - 1]:
                continue
            if tr:
                uniform = Dispatch(np.zeros_like(tables[t])).probabilities(inst)
            static = model.makespan(inst, solve(inst, model, STATIC))
            regimes = {"exact": tables[t], "stale-1": tables[t - 1], "frozen": tables[first[layer[t]]], "uniform": uniform}
            for name, prob in regimes.items():
                shares = inst.counts[:, None] * prob  # the table applied to the true counts
                rows.append({"scale": scale, "B": B, "batch": t, "regime": name, "skew": skew,
                             "ratio_to_static": model.makespan(inst, shares) / static})
    return pd.DataFrame(rows)


@experiment("routing_stats", readings=("proxy_skew",))
def routing_statistics(config: dict) -> pd.DataFrame:
    """The routing behind the studies, measured (:func:`tempo.world.workloads.routing_stats`): one
    column per workload, one row per statistic (``stat``).  DSv3 shape (256 experts, top-8,
    EP8), regimes classified by the DSv3 fp8 ``n*``:

    * ``zipf1.0_iid``: Zipf(1.0) router weights, per-batch Dirichlet noise, fresh EPLB placement
      with 64 redundant slots, ``pairs`` pairs per GPU;
    * ``proxy_iid``: the same at the proxy router's skew (the ``proxy_skew`` reading,
      :func:`proxy_skew_of`; Table 1);
    * ``drift16_timeline``: the drift-16 timeline of :func:`drift_batches` at the proxy skew and
      ``pairs`` pairs per GPU, GPU loads on its stale placement (Sections 5.5, 5.12; Tables 4, 8-10);
    * ``zipf1.2_fig5``: the Fig. 5 workload, Zipf(1.2) at ``fig5_tokens`` tokens per GPU;
    * ``trace``, when ``config["trace"]`` names one: the trace's counts as recorded (every
      step and layer, at the recording's batch size; no placement), regimes by ``n*`` of the
      trace's Table 6 shape (:meth:`TraceRouting.shape`).
    """

    E, K, params = SHAPES["DSv3"]
    n_star = CostModel.named(params).n_star
    g, n, seed = 8, config["batches"], config.get("seed", 0)
    pairs = config.get("pairs", 512)
    pop = zipf_popularity(E, 1.0, seed=seed)
    out = {}
    iid = sample_counts(pop, pairs // K, K, g, n_batches=n, seed=seed + 1)
    fresh = eplb_placement(expected_loads(pop, K), g, (E + 64) / E)
    out["zipf1.0_iid"] = routing_stats(iid, K, n_star, placement=fresh, n_gpus=g)
    s_proxy = proxy_skew_of({k: v for k, v in config.items() if k != "skew"})
    pop_p = zipf_popularity(E, s_proxy, seed=seed)
    iid_p = sample_counts(pop_p, pairs // K, K, g, n_batches=n, seed=seed + 1)
    out["proxy_iid"] = routing_stats(iid_p, K, n_star, placement=eplb_placement(expected_loads(pop_p, K), g, (E + 64) / E),
                                     n_gpus=g)
    drift = np.stack([i.counts for i in drift_batches(pairs, n, seed=seed, skew=s_proxy)])
    stale = eplb_placement(drift_corrupt(expected_loads(pop_p, K), 16, seed=seed + 7), g, (E + 64) / E)
    out["drift16_timeline"] = routing_stats(drift, K, n_star, placement=stale, n_gpus=g)
    pop12 = zipf_popularity(E, 1.2, seed=seed)
    fig5 = sample_counts(pop12, config.get("fig5_tokens", 512), K, g, n_batches=n, seed=seed + 1)
    out["zipf1.2_fig5"] = routing_stats(fig5, K, n_star, placement=eplb_placement(expected_loads(pop12, K), g, 1.25),
                                         n_gpus=g)
    tr = TraceRouting.of(config)
    if tr:
        out["trace"] = routing_stats(tr.counts, tr.top_k(K), CostModel.named(SHAPES[tr.shape()][2]).n_star)
    df = pd.DataFrame(out)
    df.index.name = "stat"
    return df.reset_index()


#: Dispatches compared in :func:`phase_anatomy`: the phase diagram's three fixed policies (as
#: the reading has them), the two vertices of the same token LP, and TEMPO under the reading
#: and as Section 4.2 writes it (the ``"paper"`` preset: no restarts, chains of depth 2).
ANATOMY = check_names(("metro", "token_lp", "token_lp_vertex", "token_lp_highs", "uniform", "tempo", "tempo_paper"),
                      "simulator.ANATOMY (the phase anatomy's dispatches)")
#: What :func:`phase_anatomy` builds the EPLB placement from: the phase diagram's long-run pair
#: loads (first) and the router-weight ablation.
ANATOMY_PLACEMENTS = ("long-run loads", "router weights")


def _anatomy_dispatch(name, inst, model, reading):
    if name == "token_lp_vertex":
        return token_lp_vertex(inst)
    if name == "token_lp_highs":
        return token_lp_highs(inst)
    if name == "tempo_paper":
        return solve(inst, model, "tempo", options="paper", lp_variants=readings.tempo_options(reading)["lp_variants"],
                     chain_depth=readings.CHAIN_DEPTHS[reading["chain_depth"]])
    return readings.dispatch(inst, model, name, reading)


@experiment("phase_anatomy", readings=("synthetic_router", "eplb_ties", "token_lp_face", "ensemble_lp", "tempo_preset",
                                       "chain_depth", "metro_order"))
def phase_anatomy(config: dict) -> pd.DataFrame:
    """Why TEMPO gains what it gains in chosen phase-diagram cells (Fig. 6): per cell
    (``config["cells"]``: dicts with shape, skew, replication, B; EP8, the cell's own batches
    and seed as in :func:`phase_cell`) and per dispatch of :data:`ANATOMY`, the mean makespan,
    the largest per-GPU activated-replica count G and token count N, and the cell's mean lower
    bound (:meth:`CostModel.lower_bound`).  The hottest expert's router weight, its share of
    the pairs and its replica count describe the placement.  ``metro``, ``token_lp`` and
    ``tempo`` run as the config's reading has them (as in :func:`phase_cell`), and so do the
    batches (``synthetic_router``).

    ``placement`` says what the EPLB placement is built from (:data:`ANATOMY_PLACEMENTS`):
    ``"long-run loads"``, the phase diagram's own: the long-run per-expert pair shares of the
    reading's router (:func:`tempo.world.workloads.pair_shares`; the paper's "EPLB-style
    placement from long-run averages", Section 3.2; SGLang's EPLB places from recorded pair
    counts), and the ablation ``"router weights"``, the placement built from the popularity
    ``p`` itself (under independent draws the two coincide; under distinct top-K routing the
    second over-replicates hot experts, since a token takes an expert at most once).  One row
    per (cell, placement, dispatch)."""

    reading = readings.of(config)
    router = reading["synthetic_router"]
    rows = []
    for cell in config["cells"]:
        E, K, params = SHAPES[cell["shape"]]
        model = CostModel.named(params)
        ep, seed, nb = cell.get("ep", 8), cell.get("seed", 0), config.get("batches", 3)
        pop = zipf_popularity(E, cell["skew"], seed=seed)
        counts = sample_counts(pop, cell["B"], K, ep, n_batches=nb, kappa=2000.0, seed=seed + 1, router=router)
        hot = int(np.argmax(pop))
        for src, weight in zip(ANATOMY_PLACEMENTS, (placement_weights(pop, K, router), pop)):
            placement = eplb_placement(weight, ep, cell["replication"], reading["eplb_ties"])
            insts = [Instance.from_placement(c, placement, ep) for c in counts]
            lb = float(np.mean([model.lower_bound(i) for i in insts]))
            for name in ANATOMY:
                feats = [model.gpu_features(i, _anatomy_dispatch(name, i, model, reading).shares) for i in insts]
                ms = [float(model.time(G, N, T).max()) for G, N, T in feats]
                rows.append({**{k: cell[k] for k in ("shape", "skew", "replication", "B")}, "placement": src,
                             "policy": name, "makespan_us": float(np.mean(ms)), "lower_bound_us": lb,
                             "max_G": float(np.mean([f[0].max() for f in feats])),
                             "max_N": float(np.mean([f[1].max() for f in feats])),
                             "hot_router_weight": float(pop[hot]),
                             "hot_pair_share": float(counts[:, hot].sum() / counts.sum()),
                             "hot_replicas": int((placement == hot).sum()), "slots_per_gpu": placement.size // ep})
    return pd.DataFrame(rows)


@experiment("proxy_calibration")
def proxy_calibration(config: dict) -> pd.DataFrame:
    """The proxy router's skew against Section 5.13's printed statistic (the ``proxy_skew``
    reading): per Zipf skew of ``config["skews"]``, TEMPO's activated experts G on the busiest
    GPU (mean, min, max over ``batches`` drift-16 batches at B = 304, R = 64) and the mean over
    GPUs; then the two calibrated skews (:func:`tempo.studies.scenarios.calibrate_proxy_skew`:
    busiest-GPU G = 13, the reading; mean G = 13, the alternative the text leaves open), ``kind``
    saying which row is which."""

    n = int(config.get("batches", 16))
    cal = {"calibrated: busiest GPU": calibrate_proxy_skew(n_batches=n),
           "calibrated: mean over GPUs": calibrate_proxy_skew(n_batches=n, which="mean")}
    rows = []
    for kind, s in [("grid", float(x)) for x in config["skews"]] + list(cal.items()):
        busy, mean = drift_g(s, n_batches=n), drift_g(s, n_batches=n, which="mean")
        rows.append({"kind": kind, "skew": s, "B": PROXY_CALIBRATION_B, "target_G": PROXY_TARGET_G,
                     "busiest_G": float(busy.mean()), "busiest_G_min": float(busy.min()),
                     "busiest_G_max": float(busy.max()), "mean_G": float(mean.mean())})
    return pd.DataFrame(rows)
