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
