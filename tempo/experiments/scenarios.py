"""Instance generators shared by the solver and simulator studies."""
from __future__ import annotations

from ..instance import Instance
from ..placement import drift_corrupt, eplb_placement
from ..workloads import sample_counts, zipf_popularity


def zipf_batches(n_experts: int, n_gpus: int, tokens_per_gpu: int, skew: float, replication: float,
                 n_batches: int, seed: int, top_k: int = 8, kappa: float = 2000.0) -> list[Instance]:
    """Decode batches under Zipf(skew) routing with a fresh EPLB placement built from the
    long-run popularity (Section 3.2)."""
    pop = zipf_popularity(n_experts, skew, seed=seed)
    placement = eplb_placement(pop, n_gpus, replication)
    counts = sample_counts(pop, tokens_per_gpu, top_k, n_gpus, n_batches=n_batches, kappa=kappa, seed=seed + 1)
    return [Instance.from_placement(c, placement, n_gpus) for c in counts]


def drift_batches(pairs_per_gpu: int, n_batches: int, seed: int = 0, drift: int = 16, n_experts: int = 256,
                  n_gpus: int = 8, redundant: int = 64, skew: float = 1.0, top_k: int = 8) -> list[Instance]:
    """The drift-K scenario (Sections 4.2, 5.12): a DSv3-shape proxy (256 experts, top-8,
    EP8, 64 redundant slots) whose EPLB placement is built from a corrupted history (the
    top-K hot experts' statistics swapped with random cold ones) while the batches follow
    the true Zipf-skewed routing.

    ``B`` here is the serving concurrency, which at EP8 with top-8 routes about ``B``
    token-expert pairs to each GPU (Section 5.13), so a batch has ``B / top_k`` tokens per
    GPU.  The paper does not give the proxy router's skew; we use s = 1.0, with which the
    modeled bottleneck is floor-bound at B <= 256 and traffic-bound from B = 512, the
    regimes the paper's Table 3 reports for this scenario.
    """
    if pairs_per_gpu % top_k:
        raise ValueError(f"pairs_per_gpu={pairs_per_gpu} must be a multiple of top_k={top_k}")
    tokens_per_gpu = pairs_per_gpu // top_k
    pop = zipf_popularity(n_experts, skew, seed=seed)
    stale = drift_corrupt(pop, drift, seed=seed + 7)
    replication = (n_experts + redundant) / n_experts
    placement = eplb_placement(stale, n_gpus, replication)
    counts = sample_counts(pop, tokens_per_gpu, top_k, n_gpus, n_batches=n_batches, seed=seed + 1)
    return [Instance.from_placement(c, placement, n_gpus) for c in counts]
