"""Bounds and certificates of paper Section 3 and Appendix A."""
from __future__ import annotations

import math

import numpy as np

from ..core import models as _models
from ..core.cost import CostModel
from ..core.instance import Instance


def additive_term(model: CostModel, n_max: float) -> float:
    """Theorem 2's additive term ``max_k phi_k(n_max)``: ``max(b, beta*n_max)`` for Eq. 1,
    ``max(b + b2*(ceil(n_max/tile) - 1), beta*n_max)`` with tiles (Eq. 2), and the traffic
    piece adds ``gamma*n_max`` (Eq. 4)."""
    if n_max <= 0:
        return 0.0
    act = model.b + model.b2 * (math.ceil(n_max / model.tile) - 1)
    term = max(act, model.beta * n_max)
    if model.has_traffic:
        term = max(term, model.gamma * n_max)
    return term


def round_robin_bound(inst: Instance, model: CostModel, opt: float) -> float:
    """Theorem 2: ``M(A3) <= OPT + max_k phi_k(n_max)`` under full replication."""
    return opt + additive_term(model, float(inst.counts.max(initial=0)))


def round_robin_epsilon(inst: Instance, model: CostModel) -> float:
    """The relative certificate ``eps = max(b, beta*n_max) / LB`` of Section 3.1."""
    lb = model.lower_bound(inst)
    return additive_term(model, float(inst.counts.max(initial=0))) / lb if lb > 0 else math.inf


# ---------------------------------------------------------------------------- roofline (Section 2.2)
#: Expert FFN shapes (hidden size d_model, expert intermediate size d_ff) from the models'
#: public configs: an expert holds 3 * d_model * d_ff parameters (gate, up, down).
SHAPES = {label: (_models.model_shape(label).d_model, _models.model_shape(label).d_ff)
          for label in ("DSv3", "DSv2-Lite", "Qwen3-30B")}  # a view of tempo.core.models

#: Peak HBM bandwidth we assume for Testbed A (bytes/s).  The paper anonymizes the GPU; 3.35
#: TB/s (an H100-SXM-class part) is our choice, and it reproduces the paper's 13.1/2.6/1.4 us.
TESTBED_A_HBM = 3.35e12


def expert_bytes(shape: str, bytes_per_param: float = 1.0) -> float:
    """Bytes of one expert's weights (fp8: one byte per parameter)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    return float(_models.model_shape(shape).bytes(bytes_per_param))


def roofline_floor_us(shape: str, hbm_bytes_per_s: float = TESTBED_A_HBM, bytes_per_param: float = 1.0) -> float:
    """The activation floor a pure weight-streaming kernel would pay: bytes / bandwidth (us)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    return _models.roofline_us(shape, hbm_bytes_per_s, bytes_per_param)


# ---------------------------------------------------------------------------- Theorem 1 (Appendix A.1)
def partition_reduction(weights, T: float = 100.0):
    """Theorem 1's reduction from Balanced PARTITION.

    Given positive integers ``w_1..w_m`` (m even, sum 2W), build the dispatch instance: two
    GPUs, one expert per weight with ``n_i = w_i`` tokens and replicas on both GPUs,
    ``a = c = 0``, ``b = T/(m/2)``, ``beta = T/W``.  A dispatch of makespan <= T exists iff
    an index set of size m/2 and weight W exists.

    Returns (Instance, CostModel, T).
    """
    w = np.asarray(weights, dtype=np.int64)
    if w.ndim != 1 or w.size < 2 or w.size % 2:
        raise ValueError("weights must be a 1-d array of even length >= 2")
    if np.any(w <= 0):
        raise ValueError("weights must be positive integers")
    if w.sum() % 2:
        raise ValueError("the weights must sum to an even number 2W")
    if T <= 0:
        raise ValueError("T must be positive")
    m, W = w.size, int(w.sum()) // 2
    inst = Instance.full_replication(w, 2)
    model = CostModel(a=0.0, b=T / (m / 2), c=0.0, beta=T / W)
    return inst, model, float(T)


def has_balanced_partition(weights) -> bool:
    """Exact Balanced PARTITION by dynamic programming over (count, sum): is there a set of
    exactly m/2 weights summing to half the total?"""
    w = [int(v) for v in weights]
    m, total = len(w), sum(w)
    if m % 2 or total % 2:
        return False
    half, k = total // 2, m // 2
    reach = [set() for _ in range(k + 1)]
    reach[0].add(0)
    for v in w:
        for c in range(k, 0, -1):
            reach[c] |= {s + v for s in reach[c - 1] if s + v <= half}
    return half in reach[k]


def random_partition_instance(m: int, solvable: bool, seed: int = 0, max_weight: int = 60):
    """Random Balanced PARTITION weights that do (``solvable``) or do not have a balanced
    partition (checked by :func:`has_balanced_partition`)."""
    if m < 2 or m % 2:
        raise ValueError("m must be even and >= 2")
    rng = np.random.default_rng(seed)
    for _ in range(10_000):
        if solvable:
            half = rng.integers(1, max_weight, size=m // 2)
            other = rng.integers(1, max_weight, size=m // 2 - 1)
            last = int(half.sum() - other.sum())
            if last < 1:
                continue
            w = rng.permutation(np.concatenate([half, other, [last]]))
        else:
            w = rng.integers(1, max_weight, size=m)
            if w.sum() % 2:
                w[0] += 1
            if has_balanced_partition(w):
                continue
        assert has_balanced_partition(w) == solvable
        return w.astype(np.int64)
    raise RuntimeError("could not draw a PARTITION instance with the requested answer")


# ---------------------------------------------------------------------------- Theorem 2 probe suite
def probe_suite(n: int = 1296, seed: int = 0, max_experts: int = 512, max_gpus: int = 16, min_gpus: int = 2):
    """Full-replication instances for Theorem 2's tightness probe (Appendix A.4): Zipf and
    uniform token counts, several scales, and adversarial constructions with one giant
    expert, on g GPUs drawn from {1, 2, 4, 8, 16} within [``min_gpus``, ``max_gpus``].
    Yields (kind, params name, Instance, CostModel)."""
    rng = np.random.default_rng(seed)
    kinds = ["zipf", "uniform", "giant", "giant_plus_dust"]
    models = [("dsv3-offline", CostModel.named("dsv3-offline")),
              ("qwen3-30b-offline", CostModel.named("qwen3-30b-offline")),
              ("dsv3-testbedb-tile", CostModel.named("dsv3-testbedb-tile"))]
    for i in range(n):
        kind = kinds[i % len(kinds)]
        g = int(rng.choice([v for v in (1, 2, 4, 8, 16) if min_gpus <= v <= max_gpus] or [max_gpus]))
        E = int(rng.choice(sorted({e for e in (8, 32, 128, 512) if e <= max_experts} | {max_experts})))
        scale = float(rng.choice([16, 64, 256, 1024]))
        if kind == "zipf":
            p = np.arange(1, E + 1) ** -float(rng.uniform(0.5, 1.5))
            counts = rng.multinomial(int(scale * E), p / p.sum())
        elif kind == "uniform":
            counts = rng.integers(0, int(2 * scale) + 1, size=E)
        elif kind == "giant":
            counts = np.zeros(E, np.int64)
            counts[0] = int(scale * E)
            counts[1:] = rng.integers(0, 3, size=E - 1)
        else:
            counts = rng.integers(1, 4, size=E)
            counts[0] = int(scale * g * 4)
        name, model = models[i % len(models)]
        yield kind, name, Instance.full_replication(counts, g), model


def probe_instance(i: int, n: int = 1296, seed: int = 0, max_experts: int = 512, max_gpus: int = 16):
    """Instance ``i`` of :func:`probe_suite` (same arguments): (kind, params name, Instance, CostModel)."""
    if not 0 <= i < n:
        raise ValueError(f"i must be in [0, {n}), got {i}")
    for j, item in enumerate(probe_suite(n, seed=seed, max_experts=max_experts, max_gpus=max_gpus)):
        if j == i:
            return item


# ---------------------------------------------------------------------------- flip boundary (Section 3.2)
def effective_replicas(popularity, replicas, tokens_per_gpu: float, top_k: int, n_gpus: int) -> float:
    """``E_eff = sum_e (1 - (1 - p_e)^T) r_e``: expected activated replicas in a batch of
    ``T = B K n_gpus`` token-expert draws (replicas of an activated expert all counted)."""
    p = np.asarray(popularity, dtype=np.float64)
    r = np.asarray(replicas, dtype=np.float64)
    T = tokens_per_gpu * top_k * n_gpus
    return float(np.sum((1.0 - (1.0 - p) ** T) * r))


def flip_boundary(popularity, replicas, n_star: float, top_k: int, n_gpus: int, iters: int = 50):
    """The analytic flip boundary ``B* = min(B*_avg, B*_hot)`` of Section 3.2, solved as a
    fixed point in B (E_eff depends on B).

    * average mechanism: balanced pieces cross at ``B*_avg = n* E_eff / (K g)``;
    * hot-expert mechanism: the GPU with the hottest expert (popularity p_1) goes linear at
      ``B*_hot = n* E_eff / (p_1 K g^2)``.

    Returns (B*, B*_avg, B*_hot) in tokens per GPU.
    """
    p = np.asarray(popularity, dtype=np.float64)
    p1 = float(p.max())
    B = 1.0
    avg = hot = B
    for _ in range(iters):
        E_eff = effective_replicas(p, replicas, B, top_k, n_gpus)
        avg = n_star * E_eff / (top_k * n_gpus)
        hot = n_star * E_eff / (p1 * top_k * n_gpus**2)
        new = min(avg, hot)
        if abs(new - B) <= 1e-9 * max(1.0, B):
            B = new
            break
        B = new
    return B, avg, hot

