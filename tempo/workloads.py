"""Synthetic routing (paper Section 3.2): Zipf popularity, Dirichlet batch-to-batch
fluctuation, multinomial token-expert counts."""
from __future__ import annotations

import numpy as np


def zipf_popularity(n_experts: int, skew: float, seed: int | np.random.Generator = 0,
                    shuffle: bool = True) -> np.ndarray:
    """float64[E]: expert popularity ``p_e`` proportional to ``rank^-skew`` (skew 0 = uniform);
    ranks are shuffled over expert ids unless ``shuffle=False``."""
    if n_experts < 1:
        raise ValueError(f"n_experts must be positive, got {n_experts}")
    if skew < 0:
        raise ValueError(f"skew must be non-negative, got {skew}")
    rng = np.random.default_rng(seed)
    p = np.arange(1, n_experts + 1, dtype=np.float64) ** (-float(skew))
    p /= p.sum()
    return rng.permutation(p) if shuffle else p


def sample_counts(popularity, tokens_per_gpu: int, top_k: int, n_gpus: int, n_batches: int = 1,
                  kappa: float | None = 2000.0, seed: int | np.random.Generator = 0) -> np.ndarray:
    """int64[n_batches, E]: per-expert token counts of decode batches.

    Each batch routes ``T = tokens_per_gpu * top_k * n_gpus`` token-expert pairs (the paper's
    ``T = B K n_gpus``).  The batch's popularity is ``Dirichlet(kappa * p)`` (kappa = 2000:
    batch-to-batch fluctuation; ``None`` uses p itself) and counts are multinomial in it.
    We draw pairs independently (a token may pick one expert twice), as the paper's
    ``E_eff`` formula does.
    """
    p = np.asarray(popularity, dtype=np.float64)
    if p.ndim != 1 or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError("popularity must be a 1-d probability vector")
    for name, v in (("tokens_per_gpu", tokens_per_gpu), ("top_k", top_k), ("n_gpus", n_gpus), ("n_batches", n_batches)):
        if int(v) < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    rng = np.random.default_rng(seed)
    T = int(tokens_per_gpu) * int(top_k) * int(n_gpus)
    if kappa is None:
        probs = np.broadcast_to(p, (n_batches, p.size))
    else:
        if kappa <= 0:
            raise ValueError(f"kappa must be positive, got {kappa}")
        alpha = np.maximum(kappa * p, 1e-12)
        probs = rng.dirichlet(alpha, size=n_batches)
    return np.stack([rng.multinomial(T, pr / pr.sum()) for pr in probs]).astype(np.int64)


# ---------------------------------------------------------------------------- routing traces
# Trace I/O lives in tempo.traces (re-exported here for existing callers).
from .traces import (TRACE_VERSION, import_main, import_sglang_dumps, load_dump, read_trace,  # noqa: E402,F401
                     sglang_dump_counts, write_trace)


def synthetic_trace(steps: int, layers: int, n_experts: int, tokens_per_gpu: int, top_k: int = 8,
                    n_gpus: int = 8, skew: float = 1.0, drift: float = 0.05, seed: int = 0):
    """A synthetic routing trace in the :func:`write_trace` layout, for demos and tests: per
    layer a Zipf(skew) popularity that drifts slowly (each step multiplies it by
    ``exp(drift * N(0, 1))`` per expert) and decode batches drawn around it.  Returns
    (counts int64[steps, layers, experts], metadata) with ``source = "synthetic"``."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((steps, layers, n_experts), np.int64)
    for layer in range(layers):
        p = zipf_popularity(n_experts, skew, seed=rng)
        for s in range(steps):
            p = p * np.exp(drift * rng.standard_normal(n_experts))
            p /= p.sum()
            counts[s, layer] = sample_counts(p, tokens_per_gpu, top_k, n_gpus, seed=rng)[0]
    meta = {"source": "synthetic", "top_k": top_k, "n_gpus": n_gpus, "skew": skew, "drift": drift, "seed": seed}
    return counts, meta
