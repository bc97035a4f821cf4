"""Bounds and certificates of paper Section 3 and Appendix A."""
from __future__ import annotations

import math

import numpy as np

from .cost import CostModel
from .instance import Instance


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
SHAPES = {"DSv3": (7168, 2048), "DSv2-Lite": (2048, 1408), "Qwen3-30B": (2048, 768)}

#: Peak HBM bandwidth we assume for Testbed A (bytes/s).  The paper anonymizes the GPU; 3.35
#: TB/s (an H100-SXM-class part) is our choice, and it reproduces the paper's 13.1/2.6/1.4 us.
TESTBED_A_HBM = 3.35e12


def expert_bytes(shape: str, bytes_per_param: float = 1.0) -> float:
    """Bytes of one expert's weights (fp8: one byte per parameter)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    d_model, d_ff = SHAPES[shape]
    return 3.0 * d_model * d_ff * bytes_per_param


def roofline_floor_us(shape: str, hbm_bytes_per_s: float = TESTBED_A_HBM, bytes_per_param: float = 1.0) -> float:
    """The activation floor a pure weight-streaming kernel would pay: bytes / bandwidth (us)."""
    if hbm_bytes_per_s <= 0:
        raise ValueError("hbm_bytes_per_s must be positive")
    return expert_bytes(shape, bytes_per_param) / hbm_bytes_per_s * 1e6
