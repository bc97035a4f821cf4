"""The dispatch problem's data: one layer of one batch (:class:`Instance`) and its answer
(:class:`Dispatch`).  Paper Section 3.1: counts ``n_e`` from the router, replica sets ``R(e)``
from the placement layer, token shares ``x_{e,g}`` supported on ``R(e)``.

The replica layout follows SGLang's ``logical_to_all_physical_map``: ``replica_gpu[e, r]`` is
the GPU of replica slot ``r`` of expert ``e`` and ``-1`` marks an unused slot.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Shares below this many tokens count as "not sent" (no activation charged).
EPS_TOKENS = 1e-9


def _as_int_array(value, name: str, ndim: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integers, got {arr.dtype} with fractional or non-finite values")
    return arr.astype(np.int64, copy=True)


class Instance:
    """One MoE layer of one batch: token counts per logical expert and where its replicas live.

    Parameters
    ----------
    counts : int64[E]
        Tokens routed to each logical expert (``n_e``), non-negative.
    replica_gpu : int64[E, R]
        GPU id of every replica slot of every expert, ``-1`` for an unused slot.  Every expert
        with tokens needs at least one replica.
    n_gpus : int
        EP group size; GPU ids lie in ``[0, n_gpus)``.
    gpus_per_node : int, optional
        GPUs per node, for the topology-aware source split (Section 4.3).
    """

    __slots__ = ("counts", "replica_gpu", "n_gpus", "gpus_per_node", "valid", "n_replicas", "_full")

    def __init__(self, counts, replica_gpu, n_gpus: int, gpus_per_node: int | None = None):
        counts = _as_int_array(counts, "counts", 1)
        replica_gpu = _as_int_array(replica_gpu, "replica_gpu", 2)
        if not isinstance(n_gpus, (int, np.integer)) or n_gpus < 1:
            raise ValueError(f"n_gpus must be a positive integer, got {n_gpus!r}")
        n_gpus = int(n_gpus)
        if np.any(counts < 0):
            raise ValueError(f"counts must be non-negative; expert(s) {np.flatnonzero(counts < 0)[:5].tolist()} are negative")
        if replica_gpu.shape[0] != counts.shape[0]:
            raise ValueError(
                f"replica_gpu has {replica_gpu.shape[0]} rows but counts has {counts.shape[0]} experts")
        if replica_gpu.shape[1] < 1:
            raise ValueError("replica_gpu needs at least one replica slot column")
        bad = (replica_gpu < -1) | (replica_gpu >= n_gpus)
        if np.any(bad):
            e, r = np.argwhere(bad)[0]
            raise ValueError(
                f"replica_gpu[{e}, {r}] = {replica_gpu[e, r]} is outside [0, n_gpus={n_gpus}) (use -1 for an unused slot)")
        valid = replica_gpu >= 0
        n_rep = valid.sum(axis=1)
        orphan = (counts > 0) & (n_rep == 0)
        if np.any(orphan):
            raise ValueError(
                f"replica_gpu: expert(s) {np.flatnonzero(orphan)[:5].tolist()} have tokens but no replica")
        if gpus_per_node is not None:
            if not isinstance(gpus_per_node, (int, np.integer)) or gpus_per_node < 1 or n_gpus % gpus_per_node:
                raise ValueError(f"gpus_per_node must be a positive divisor of n_gpus={n_gpus}, got {gpus_per_node!r}")
            gpus_per_node = int(gpus_per_node)
        self.counts = counts
        self.replica_gpu = replica_gpu
        self.n_gpus = n_gpus
        self.gpus_per_node = gpus_per_node
        self.valid = valid
        self.n_replicas = n_rep
        self._full = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def full_replication(cls, counts, n_gpus: int, gpus_per_node: int | None = None) -> "Instance":
        """Every expert has one replica on every GPU (slot ``r`` on GPU ``r``)."""
        counts = np.asarray(counts)
        rep = np.broadcast_to(np.arange(n_gpus, dtype=np.int64), (counts.shape[0], n_gpus))
        return cls(counts, rep, n_gpus, gpus_per_node)

    @classmethod
    def from_placement(cls, counts, phy2log, n_gpus: int, gpus_per_node: int | None = None) -> "Instance":
        """Build replica sets from a physical-slot map.

        Parameters
        ----------
        counts : int64[E]
        phy2log : int64[P]
            Logical expert held by each physical slot; slots are laid out GPU-major,
            ``P / n_gpus`` per GPU (EPLB's ``phy2log`` for one layer).
        n_gpus : int
        """
        counts = np.asarray(counts)
        phy2log = _as_int_array(phy2log, "phy2log", 1)
        if phy2log.size % n_gpus:
            raise ValueError(f"phy2log has {phy2log.size} slots, not a multiple of n_gpus={n_gpus}")
        n_exp = counts.shape[0]
        if phy2log.size and (phy2log.min() < 0 or phy2log.max() >= n_exp):
            raise ValueError(f"phy2log entries must lie in [0, {n_exp})")
        slot_gpu = np.arange(phy2log.size) // (phy2log.size // n_gpus)
        order = np.argsort(phy2log, kind="stable")
        logcnt = np.bincount(phy2log, minlength=n_exp)
        width = max(1, int(logcnt.max(initial=0)))
        rank = np.arange(phy2log.size) - np.repeat(np.cumsum(logcnt) - logcnt, logcnt)
        rep = np.full((n_exp, width), -1, dtype=np.int64)
        rep[phy2log[order], rank] = slot_gpu[order]
        return cls(counts, rep, n_gpus, gpus_per_node)

    # ------------------------------------------------------------------ properties
    @property
    def n_experts(self) -> int:
        return int(self.counts.shape[0])

    @property
    def n_slots(self) -> int:
        return int(self.replica_gpu.shape[1])

    @property
    def total_tokens(self) -> int:
        return int(self.counts.sum())

    @property
    def live(self) -> np.ndarray:
        """bool[E]: experts with at least one token."""
        return self.counts > 0

    def is_full_replication(self) -> bool:
        """True when every live expert has a replica on every GPU."""
        if self._full is None:
            has = np.zeros((self.n_experts, self.n_gpus), dtype=bool)
            e, r = np.nonzero(self.valid)
            has[e, self.replica_gpu[e, r]] = True
            self._full = bool(np.all(has[self.live]))
        return self._full

    def __repr__(self) -> str:
        return (f"Instance(E={self.n_experts}, slots={self.n_slots}, n_gpus={self.n_gpus}, "
                f"tokens={self.total_tokens}, live={int(self.live.sum())})")


@dataclass
class Dispatch:
    """Token shares of every expert over its replica slots (paper Section 3.1, ``x_{e,g}``).

    Parameters
    ----------
    shares : float64[E, R]
        Tokens of expert ``e`` sent to replica slot ``r``.  Valid for an instance when
        non-negative, zero on unused slots, and each row sums to ``counts[e]``.
    meta : dict
        Solver information (policy name, solve time, MILP bound and gap, ...).
    """

    shares: np.ndarray
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.shares = np.asarray(self.shares, dtype=np.float64)
        if self.shares.ndim != 2:
            raise ValueError(f"shares must be a 2-d array [E, R], got shape {self.shares.shape}")

    def validate(self, inst: Instance, rtol: float = 1e-9, atol: float = 1e-6) -> "Dispatch":
        """Raise ``ValueError`` unless the shares are a valid dispatch of ``inst``."""
        s = self.shares
        if s.shape != inst.replica_gpu.shape:
            raise ValueError(f"shares has shape {s.shape}, instance replica_gpu has {inst.replica_gpu.shape}")
        if not np.all(np.isfinite(s)):
            raise ValueError("shares contain NaN or infinite values")
        if np.any(s < -atol):
            raise ValueError(f"shares must be non-negative (min {s.min():g})")
        if np.any(np.abs(s[~inst.valid]) > atol):
            raise ValueError("shares are non-zero on unused replica slots")
        rows = s.sum(axis=1)
        bad = ~np.isclose(rows, inst.counts, rtol=rtol, atol=atol)
        if np.any(bad):
            e = int(np.flatnonzero(bad)[0])
            raise ValueError(f"shares of expert {e} sum to {rows[e]:g}, expected counts[{e}] = {inst.counts[e]}")
        return self

    def probabilities(self, inst: Instance) -> np.ndarray:
        """float64[E, R] routing table a serving kernel samples from.

        Each row sums to 1; an idle expert gets the uniform distribution over its replicas
        (so a token the router sends there later still lands on a replica that holds it).
        """
        s = np.where(inst.valid, np.clip(self.shares, 0.0, None), 0.0)
        rows = s.sum(axis=1, keepdims=True)
        uniform = inst.valid / np.maximum(inst.n_replicas, 1)[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            prob = np.where(rows > 0, s / np.where(rows > 0, rows, 1.0), uniform)
        return prob
