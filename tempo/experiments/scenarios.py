"""Instance generators shared by the solver and simulator studies."""
from __future__ import annotations

from ..instance import Instance
from ..placement import drift_corrupt, eplb_placement
from ..workloads import popularity_timeline, sample_counts, zipf_popularity


def zipf_batches(n_experts: int, n_gpus: int, tokens_per_gpu: int, skew: float, replication: float,
                 n_batches: int, seed: int, top_k: int = 8, kappa: float = 2000.0) -> list[Instance]:
    """Decode batches under Zipf(skew) routing with a fresh EPLB placement built from the
    long-run popularity (Section 3.2): each batch's router weights are Dirichlet(kappa p)
    around the long-run popularity (the phase diagram's batch fluctuation), tokens routed
    top-``top_k`` to distinct experts (:func:`tempo.workloads.sample_counts`)."""
    pop = zipf_popularity(n_experts, skew, seed=seed)
    placement = eplb_placement(pop, n_gpus, replication)
    counts = sample_counts(pop, tokens_per_gpu, top_k, n_gpus, n_batches=n_batches, kappa=kappa, seed=seed + 1)
    return [Instance.from_placement(c, placement, n_gpus) for c in counts]


def drift_timeline(pop, n_batches: int, seed: int, tau: float = 300.0, sigma: float | None = None,
                   swap_rate: float = 0.0):
    """Router weights of a drifting timeline around ``pop`` (:func:`tempo.workloads.popularity_timeline`
    with its documented defaults; seeded from ``seed + 2``)."""
    return popularity_timeline(pop, n_batches, tau=tau, sigma=sigma, swap_rate=swap_rate, seed=seed + 2)


def drift_batches(pairs_per_gpu: int, n_batches: int, seed: int = 0, drift: int = 16, n_experts: int = 256,
                  n_gpus: int = 8, redundant: int = 64, skew: float = 1.0, top_k: int = 8, tau: float = 300.0,
                  sigma: float | None = None) -> list[Instance]:
    """The drift-K scenario (Sections 4.2, 5.12): a DSv3-shape proxy (256 experts, top-8,
    EP8, 64 redundant slots) whose EPLB placement is built from a corrupted history (the
    top-K hot experts' statistics swapped with random cold ones) while the batches follow
    the true Zipf-skewed routing.

    The batches are consecutive windows of a drifting timeline around the true popularity
    (:func:`tempo.workloads.popularity_timeline`: mean-reverting log-popularity drift with
    correlation time ``tau`` windows, plus the per-batch Dirichlet fluctuation), each routed
    top-``top_k`` to distinct experts (:func:`tempo.workloads.route_tokens`).

    ``B`` here is the serving concurrency, which at EP8 with top-8 routes about ``B``
    token-expert pairs to each GPU (Section 5.13), so a batch has ``B / top_k`` tokens per
    GPU.  The paper does not give the proxy router's skew; we use s = 1.0 (chosen earlier,
    under the independent-pair sampler, because it gave Table 3's regimes; kept, not
    re-tuned, for the top-K router).
    """
    if pairs_per_gpu % top_k:
        raise ValueError(f"pairs_per_gpu={pairs_per_gpu} must be a multiple of top_k={top_k}")
    tokens_per_gpu = pairs_per_gpu // top_k
    pop = zipf_popularity(n_experts, skew, seed=seed)
    stale = drift_corrupt(pop, drift, seed=seed + 7)
    replication = (n_experts + redundant) / n_experts
    placement = eplb_placement(stale, n_gpus, replication)
    weights = drift_timeline(pop, n_batches, seed, tau=tau, sigma=sigma)
    counts = sample_counts(weights, tokens_per_gpu, top_k, n_gpus, seed=seed + 1)
    return [Instance.from_placement(c, placement, n_gpus) for c in counts]
