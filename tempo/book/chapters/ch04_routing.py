"""Chapter 04's sections on routing: the proxy router's calibrated skew (Sections 5.11, 5.13)
and the public recordings of real routing beside the paper's synthetic skews (Section 3.2's
phase diagram, Section 2.4's mixed batches), as tables the routing lecture displays and the
numbers its prose glues."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...core.cost import CostModel
from ...theory.bounds import flip_boundary
from ...world.placement import eplb_placement
from ...world.profiles import PROFILES, profile
from ...world.skew import max_over_mean, zipf_equivalent_skew, zipf_max_over_mean
from ...studies.scenarios import trace_shape
from ...studies.simulator import SHAPES


def calibration_table(cal: pd.DataFrame) -> pd.DataFrame:
    """The ``proxy_calibration`` result as the chapter shows it: per skew, TEMPO's busiest-GPU G
    (mean and range over batches) and the mean over GPUs, the calibrated rows last."""
    out = cal.assign(busiest_range=[f"{a:.0f}-{b:.0f}" for a, b in zip(cal.busiest_G_min, cal.busiest_G_max)])
    return out[["kind", "skew", "busiest_G", "busiest_range", "mean_G"]].rename(
        columns={"busiest_G": "busiest-GPU G (mean)", "busiest_range": "busiest-GPU G (range)",
                 "mean_G": "G, mean over GPUs"}).set_index(["kind", "skew"])


def profile_boundary(name: str, replication: float = 1.25, n_gpus: int = 8) -> dict:
    """Section 3.2's analytic flip boundary B* (tokens per GPU) on a recorded profile: per
    layer, ``flip_boundary`` with the layer's pair shares and an EPLB placement at
    ``replication`` built from them, priced with ``n*`` of the Table 6 shape of the profile's
    experts and top-k; the median and range over layers."""
    prof = profile(name)
    shape = trace_shape(prof.n_experts, prof.top_k)
    n_star = CostModel.named(SHAPES[shape][2]).n_star
    b = []
    for p in prof.shares():
        reps = np.bincount(eplb_placement(p + 1e-12, n_gpus, replication), minlength=prof.n_experts)
        b.append(flip_boundary(p, reps, n_star, prof.top_k, n_gpus)[0])
    b = np.asarray(b)
    return {"shape": shape, "n_star": n_star, "B_star": float(np.median(b)), "B_star_min": float(b.min()),
            "B_star_max": float(b.max())}


def _winners(phase: pd.DataFrame, shape: str, skew: float, replication: float) -> str:
    sub = phase[(phase["shape"] == shape) & (phase["skew"] == skew) & (phase.replication == replication)
                & (phase.ep == 8)]
    if "seed" in sub:
        sub = sub[sub["seed"] == sub["seed"].min()]
    return " ".join(f"{int(r.B)}:{r.winner}" for r in sub.sort_values("B").itertuples())


def profiles_on_phase_diagram(phase: pd.DataFrame, replication: float = 1.25) -> pd.DataFrame:
    """One row per named routing profile (:data:`tempo.world.profiles.PROFILES`): its model,
    the Table 6 shape of its experts and top-k, its per-layer max/mean pair share and the
    Zipf-equivalent skew of the median layer (:mod:`tempo.world.skew`), the phase grid's
    nearest skew column (``phase``: the ``phase_diagram`` result) and the winners along that
    column's ladder at EP8 and ``replication`` (M = METRO, L = token-LP, E = uniform; the first
    seed), and the paper's prediction for it: the analytic flip boundary B*
    (:func:`profile_boundary`), METRO-like dispatch below it, token-LP above, TEMPO's room in
    the mixed band around it."""
    rows = []
    grid = sorted(phase["skew"].unique())
    for name in PROFILES:
        prof = profile(name)
        mm = max_over_mean(prof.counts.astype(np.float64))
        med = float(np.median(mm))
        s = zipf_equivalent_skew(med, prof.n_experts, prof.top_k)
        bd = profile_boundary(name, replication)
        near = min(grid, key=lambda g: abs(g - s))
        rows.append({"profile": name, "shape": bd["shape"], "experts x top-k": f"{prof.n_experts} x {prof.top_k}",
                     "max/mean (median)": med, "Zipf-equivalent skew": s, "grid column": near,
                     "winners along B (phase grid)": _winners(phase, bd["shape"], near, replication),
                     "B* (paper's rule, median layer)": bd["B_star"],
                     "B* range over layers": f"{bd['B_star_min']:.0f}-{bd['B_star_max']:.0f}"})
    return pd.DataFrame(rows).set_index("profile")


def mixed_by_routing(mixed_all: pd.DataFrame) -> pd.DataFrame:
    """% of mixed batches per tokens per GPU, synthetic and trace side by side (the
    ``mixed_regime`` result; one column without trace rows)."""
    if "routing" not in mixed_all:
        return (mixed_all.groupby("tokens_per_gpu").mixed.mean() * 100).to_frame("synthetic")
    return (mixed_all.groupby(["tokens_per_gpu", "routing"]).mixed.mean() * 100).unstack("routing")


def real_routing_glue(table: pd.DataFrame, mixed: pd.DataFrame, skews) -> tuple[dict, dict]:
    """What the passage under the real-routing table glues, from :func:`profiles_on_phase_diagram`
    (``table``), :func:`mixed_by_routing` (``mixed``) and the phase grid's skews: ``(numbers,
    words)`` for :func:`tempo.book.paper.glue` and :func:`~tempo.book.paper.glue_text`.
    numbers: the profiles' Zipf-equivalent skews and max/mean (lowest, highest), Zipf(1.2)'s
    max/mean over 256 experts, top-8, and the range of their B*; words: the grid's skews, and
    the recorded batches' mixed share per B beside the synthetic."""
    s, mm, bs = table["Zipf-equivalent skew"], table["max/mean (median)"], table["B* (paper's rule, median layer)"]
    numbers = {"real_skew_lo": s.min(), "real_skew_hi": s.max(), "real_mm_lo": mm.min(), "real_mm_hi": mm.max(),
               "real_zipf12_mm": zipf_max_over_mean(1.2, 256, 8), "real_bstar_lo": bs.min(), "real_bstar_hi": bs.max()}
    words = {"real_grid_skews": ", ".join(f"{x:g}" for x in skews), "real_mixed": "no recorded batches in this build"}
    if "trace" in mixed:
        m = mixed["trace"].dropna()
        syn = mixed["synthetic"].reindex(m.index)
        words["real_mixed"] = "; ".join(f"B = {int(b)}: {v:.0f}% (synthetic {w:.0f}%)" for (b, v), w in zip(m.items(), syn))
    return {k: float(v) for k, v in numbers.items()}, words
