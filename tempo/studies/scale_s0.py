"""Fig. 12 at s = 0 (Section 3.3): what would have to hold for TEMPO's mean gain over the best
fixed policy on EP32-64 to reach the paper's 6-6.5%.  Each candidate changes one thing of the
scale study's cell (:func:`tempo.studies.simulator.phase_cell`: DSv3, Zipf(0), EPLB at 1.25x from
the long-run pair loads, Dirichlet(2000 p) batches, distinct top-8 routing, TEMPO's default
preset) and is scored as the phase diagram scores a cell."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.cost import CostModel
from ..core.instance import Instance
from ..policies import solve
from ..world.placement import eplb_placement
from ..world.workloads import sample_counts, zipf_popularity
from .registry import experiment
from .scenarios import placement_weights
from .simulator import FIXED, SHAPES, tempo_gain
from .sweep import run_grid

#: The candidates.  ``router``: the synthetic router (:data:`tempo.world.workloads.ROUTERS`);
#: ``kappa``: the batches' Dirichlet concentration; ``replication``: EPLB's factor;
#: ``placement``: what EPLB is built from, one of :data:`PLACEMENTS`; ``preset``: TEMPO's options
#: preset (``"paper"``: Section 4.2's tempo_fast, which the ledger's scale claims run).
S0_CANDIDATES = (
    {"candidate": "as built", "router": "distinct_topk", "kappa": 2000.0, "replication": 1.25,
     "placement": "expected", "preset": "default"},
    {"candidate": "EPLB ties in index order", "router": "distinct_topk", "kappa": 2000.0, "replication": 1.25,
     "placement": "index-order", "preset": "default"},
    {"candidate": "independent draws (Section 3.2)", "router": "independent", "kappa": 2000.0, "replication": 1.25,
     "placement": "expected", "preset": "default"},
    {"candidate": "noisier batches (kappa 200)", "router": "distinct_topk", "kappa": 200.0, "replication": 1.25,
     "placement": "expected", "preset": "default"},
    {"candidate": "replication 1.5x", "router": "distinct_topk", "kappa": 2000.0, "replication": 1.5,
     "placement": "expected", "preset": "default"},
    {"candidate": "EPLB ties broken", "router": "distinct_topk", "kappa": 2000.0, "replication": 1.25,
     "placement": "tie-broken", "preset": "default"},
    {"candidate": "EPLB from 64 measured batches", "router": "distinct_topk", "kappa": 2000.0, "replication": 1.25,
     "placement": "history", "preset": "default"},
    {"candidate": "measured EPLB + independent draws", "router": "independent", "kappa": 2000.0, "replication": 1.25,
     "placement": "history", "preset": "default"},
    {"candidate": "TEMPO's paper preset (Section 4.2)", "router": "distinct_topk", "kappa": 2000.0, "replication": 1.25,
     "placement": "expected", "preset": "paper"},
    {"candidate": "the paper's reading (independent draws, paper preset)", "router": "independent", "kappa": 2000.0,
     "replication": 1.25, "placement": "expected", "preset": "paper"},
)
#: What a candidate's EPLB placement is built from: ``"expected"`` the long-run pair loads of its
#: router with equal loads in an uninformative order (the study's, the ``eplb_ties`` reading),
#: ``"index-order"`` the same with equal loads in index order, ``"tie-broken"`` the loads times
#: 1 + 1e-9 noise, ``"history"`` the pairs counted over 64 batches of 256 tokens per GPU of the
#: same routing, as a deployment measures them.
PLACEMENTS = ("expected", "index-order", "tie-broken", "history")


def s0_placement(pop, top_k: int, n_gpus: int, cand: dict, seed: int) -> np.ndarray:
    """int64[slots]: the EPLB placement of candidate ``cand`` (:data:`PLACEMENTS`) for router
    weights ``pop[E]`` on ``n_gpus`` GPUs."""
    kind = cand["placement"]
    if kind not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {kind!r}")
    if kind == "history":
        w = sample_counts(pop, 256, top_k, n_gpus, n_batches=64, kappa=cand["kappa"], seed=seed + 11,
                          router=cand["router"]).sum(axis=0).astype(float)
    else:
        w = placement_weights(pop, top_k, cand["router"])
    if kind == "tie-broken":
        w = w * (1 + 1e-9 * np.random.default_rng(seed + 7).random(w.size))
    return eplb_placement(w, n_gpus, cand["replication"], "index_order" if kind == "index-order" else "unordered")


def colocated_replicas(placement: np.ndarray, n_gpus: int) -> tuple[int, int]:
    """(replicated experts, those whose every replica sits on one GPU) of a GPU-major slot map:
    a token of such an expert cannot change GPU whatever the dispatch."""
    placement = np.asarray(placement)
    gpu = np.arange(placement.size) // (placement.size // n_gpus)
    reps = np.bincount(placement)
    multi = np.flatnonzero(reps > 1)
    return int(multi.size), int(sum(np.unique(gpu[placement == e]).size == 1 for e in multi))


def s0_cell(cell: dict) -> pd.DataFrame:
    """One candidate (``cell["cand"]``) at one EP size over the batch ladder ``cell["tokens"]``:
    per B, TEMPO's gain over the best fixed policy in % (mean makespans over ``batches``
    batches, :func:`tempo.studies.simulator.tempo_gain`), the winning fixed policy's code and
    the replicated experts with every replica on one GPU."""
    cand, ep, seed = cell["cand"], cell["ep"], cell["seed"]
    E, K, params = SHAPES["DSv3"]
    model = CostModel.named(params)
    pop = zipf_popularity(E, 0.0, seed=seed)
    placement = s0_placement(pop, K, ep, cand, seed)
    n_rep, n_col = colocated_replicas(placement, ep)
    rows = []
    for B in cell["tokens"]:
        counts = sample_counts(pop, B, K, ep, n_batches=cell["batches"], kappa=cand["kappa"], seed=seed + 1,
                               router=cand["router"])
        insts = [Instance.from_placement(c, placement, ep) for c in counts]
        options = {"tempo": {"options": cand["preset"]}}
        ms = {p: float(np.mean([model.makespan(i, solve(i, model, p, **options.get(p, {}))) for i in insts]))
              for p in list(FIXED) + ["tempo"]}
        best, gain = tempo_gain(ms)
        rows.append({**cand, "ep": ep, "B": B, "gain_pct": gain, "winner": FIXED[best], "replicated": n_rep,
                     "colocated": n_col})
    return pd.DataFrame(rows)


@experiment("scale_s0_candidates")
def scale_s0_candidates(config: dict) -> pd.DataFrame:
    """Fig. 12 at s = 0, each candidate of :data:`S0_CANDIDATES` (or those named in
    ``config["candidates"]``) on the scale study's cell: per (candidate, EP of ``eps``, B of
    ``tokens``) one row of :func:`s0_cell`; ``batches`` per B, ``seed`` (the scale grid's
    first, 1)."""
    names = config.get("candidates")
    known = [c["candidate"] for c in S0_CANDIDATES]
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise ValueError(f"candidates: unknown {unknown}; known: {known}")
    cands = [c for c in S0_CANDIDATES if names is None or c["candidate"] in names]
    cells = [{"cand": c, "ep": int(ep), "tokens": list(config["tokens"]), "batches": int(config["batches"]),
              "seed": int(config.get("seed", 1))} for c in cands for ep in config.get("eps", [32, 64])]
    return run_grid(s0_cell, cells, workers=config.get("workers"), progress=config.get("progress", True),
                    desc="scale s = 0 candidates")
