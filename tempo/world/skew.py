"""How skewed a routing is, on one scale for Zipf workloads and recorded profiles: the max/mean
pair share (the hottest expert's share of a layer's token-expert pairs times the number of
experts) and the Zipf skew that gives the same statistic under the same distinct top-K router.

Zipf(1.0) over 256 experts, top-8, has max/mean 25.2; the recorded profiles
(:mod:`tempo.world.profiles`) sit far lower (``python -m tempo routing-profiles`` prints them).
"""
from __future__ import annotations

import numpy as np

from .profiles import PROFILES, profile
from .workloads import _int_arg, _popularity, hottest_pair_share, zipf_popularity


def max_over_mean(shares) -> np.ndarray:
    """float64[...]: per row of pair shares (or counts) ``[..., E]``, the hottest expert's share
    times ``E`` (1 when uniform; at most ``E / top_k`` under a top-K router of distinct
    experts)."""
    s = _popularity(shares, "shares", ndim=(1, 2, 3))
    return s.max(axis=-1) / s.sum(axis=-1) * s.shape[-1]


def zipf_max_over_mean(skew: float, n_experts: int, top_k: int) -> float:
    """The max/mean long-run pair share of Zipf(``skew``) routing over ``n_experts`` experts
    under the distinct top-``top_k`` router (Zipf(1.0), 256 experts, top-8: 25.2)."""
    E = _int_arg("n_experts", n_experts)
    return E * hottest_pair_share(zipf_popularity(E, float(skew), shuffle=False), top_k)


def zipf_equivalent_skew(target: float, n_experts: int, top_k: int, tol: float = 1e-6) -> float:
    """The Zipf skew whose max/mean long-run pair share (:func:`zipf_max_over_mean`) equals
    ``target`` over ``n_experts`` experts and top-``top_k`` (bisection; the statistic rises
    with the skew from 1 at skew 0 towards ``E / top_k``).  A ``ValueError`` when ``target`` is
    outside ``[1, E / top_k)``."""
    E, k = _int_arg("n_experts", n_experts), _int_arg("top_k", top_k)
    if not np.isfinite(target) or target < 1.0:
        raise ValueError(f"target max/mean must be >= 1 (uniform), got {target}")
    if target >= E / k:
        raise ValueError(f"target max/mean {target} is at or past the top-{k} ceiling E/top_k = {E / k:g}")
    lo, hi = 0.0, 1.0
    while zipf_max_over_mean(hi, E, k) < target:
        lo, hi = hi, 2 * hi
        if hi > 64:
            raise ValueError(f"target max/mean {target} is too close to the top-{k} ceiling E/top_k = {E / k:g}")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if zipf_max_over_mean(mid, E, k) < target else (lo, mid)
    return 0.5 * (lo + hi)


def profile_summary(name: str) -> dict:
    """The routing statistics of a profile: per-layer max/mean pair share (median, min, max over
    layers) and the Zipf-equivalent skews of the median, min and max."""
    prof = profile(name)
    mm = max_over_mean(prof.counts.astype(np.float64))
    med, lo, hi = float(np.median(mm)), float(mm.min()), float(mm.max())
    eq = {key: zipf_equivalent_skew(v, prof.n_experts, prof.top_k)
          for key, v in (("median", med), ("min", lo), ("max", hi))}
    return {"profile": name, "model": prof.model, "layers": prof.n_layers, "experts": prof.n_experts,
            "top_k": prof.top_k, "max_over_mean_median": med, "max_over_mean_min": lo, "max_over_mean_max": hi,
            "zipf_skew": eq["median"], "zipf_skew_min": eq["min"], "zipf_skew_max": eq["max"]}


def main(argv=None) -> int:
    """``python -m tempo routing-profiles``: the named profiles and their skew statistics."""
    from ..core.argtypes import ArgumentParser

    ArgumentParser(prog="python -m tempo routing-profiles",
                   description="list the named routing profiles (recorded per-layer popularity) with their max/mean "
                               "pair share and Zipf-equivalent skew").parse_args(argv)
    rows = [("profile", "layers x experts", "top-k", "max/mean pair share", "Zipf-equivalent skew")]
    for name in PROFILES:
        s = profile_summary(name)
        rows.append((name, f"{s['layers']} x {s['experts']}", str(s["top_k"]),
                     f"{s['max_over_mean_median']:.2f} ({s['max_over_mean_min']:.2f}-{s['max_over_mean_max']:.2f})",
                     f"{s['zipf_skew']:.2f} ({s['zipf_skew_min']:.2f}-{s['zipf_skew_max']:.2f})"))
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip())
    print("max/mean: the hottest expert's share of a layer's pairs times the experts, median (range) over layers; "
          "the Zipf skew with the same statistic under the same top-k router")
    return 0
