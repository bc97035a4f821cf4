"""MoonEP-style weight-moving balancing, replayed in the cost model (paper Section 5.7,
Appendix H).

MoonEP keeps every expert on its home rank and, per batch, prefetches the weights of
remote experts so that each rank processes exactly its share of the batch's token-expert
pairs (NOTES-baselines, "MoonEP").  Moving weights is outside the dispatch problem of
Eq. 3 (a dispatch may only use existing replicas), so this is not a registered policy: it
returns a dispatch over a *full-replication* instance plus the number of experts each GPU
had to fetch.

Choices where the sources are silent (also in the simulator chapter):

* The home assignment is the static map of the placement we are given (each expert whole
  on its first replica).  A rank that already holds a replica of the expert it receives
  needs no prefetch; every other (expert, receiver) pair is one duplicated expert.
* Target per rank: total pairs / g, as a real number (the replay is fluid; the library
  rounds to whole tokens, a difference of under one token per rank).
* Prefetch accounting: ``free`` (fully overlapped, the optimistic bound) or ``charged``: each
  duplicated expert adds ``ratio * b`` microseconds to its receiver's time, ``b`` being the
  model's per-expert weight-streaming cost from HBM and ``ratio`` the HBM-to-interconnect
  bandwidth ratio (4 in the paper).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.cost import CostModel
from ..core.instance import EPS_TOKENS, Instance
from .proxies import static


@dataclass(frozen=True)
class MoonEPResult:
    """``inst`` is the full-replication instance (expert e's slot j lives on GPU j) and
    ``shares`` the tokens per (expert, GPU); ``fetched[g]`` counts the experts GPU g
    prefetched."""

    inst: Instance
    shares: np.ndarray
    fetched: np.ndarray

    def gpu_times(self, model: CostModel, prefetch: str = "free", ratio: float = 4.0) -> np.ndarray:
        if prefetch not in ("free", "charged"):
            raise ValueError(f"prefetch must be 'free' or 'charged', got {prefetch!r}")
        t = model.gpu_times(self.inst, self.shares)
        if prefetch == "charged":
            t = t + ratio * model.b * self.fetched
        return t

    def makespan(self, model: CostModel, prefetch: str = "free", ratio: float = 4.0) -> float:
        return float(self.gpu_times(model, prefetch, ratio).max())


def moonep(inst: Instance) -> MoonEPResult:
    """Balance tokens exactly by moving expert weights (NOTES-baselines, MoonEP): repeatedly
    move tokens from the most over-target rank to the most under-target one, filling the
    receiver exactly (or draining the donor's excess), taking them from the donor's home
    expert with the most tokens left."""
    g, E = inst.n_gpus, inst.n_experts
    home = np.zeros((E, g))
    st = static(inst).shares
    np.add.at(home, (np.repeat(np.arange(E), inst.replica_gpu.shape[1]), np.where(inst.valid, inst.replica_gpu, 0).ravel()),
              np.where(inst.valid, st, 0.0).ravel())
    shares = home.copy()
    holds = np.zeros((E, g), bool)
    rows = np.repeat(np.arange(E), inst.replica_gpu.shape[1])
    holds[rows[inst.valid.ravel()], inst.replica_gpu.ravel()[inst.valid.ravel()]] = True
    load = shares.sum(axis=0)
    target = load.sum() / g
    fetched = np.zeros(g, np.int64)
    left = home.copy()  # tokens each expert still has at its home rank, per home rank
    for _ in range(4 * E * g):
        excess = load - target
        d, r = int(np.argmax(excess)), int(np.argmin(excess))
        if excess[d] <= max(EPS_TOKENS, 1e-9 * target):
            break
        amount = min(excess[d], -excess[r])
        while amount > EPS_TOKENS:
            e = int(np.argmax(left[:, d]))
            if left[e, d] <= EPS_TOKENS:
                break
            x = min(amount, left[e, d])
            if shares[e, r] <= EPS_TOKENS and not holds[e, r]:
                fetched[r] += 1
            left[e, d] -= x
            shares[e, d] -= x
            shares[e, r] += x
            load[d] -= x
            load[r] += x
            amount -= x
    full = Instance.full_replication(inst.counts, g)
    return MoonEPResult(full, shares, fetched)
