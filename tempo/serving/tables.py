"""Dispatch tables (paper Section 4.4).

A table is two arrays over (layer, logical expert, replica column), in one shape everywhere
(the solver, the refresher, the runtime, the synchronised versions):

* ``prob : float32[N, L, E, R]`` -- the probability of sending a token of expert e, coming
  from source node n, to its r-th replica.  ``N`` is the number of source nodes: 1 for the
  flat topology, one table per node for ``hier`` (Section 4.3).  Columns without a replica
  are 0.  Rows need not be normalised: the kernel renormalises each row at use, and a row
  summing to zero (a torn or idle row) falls back to uniform over the replicas that hold
  the expert.
* ``phys : int32[L, E, R]`` -- the physical expert id (SGLang's global physical slot) of
  each replica column, ``-1`` padding; the same for every source node.

``phys`` is built from SGLang's ``physical_to_logical_map [L, P]`` (every rank holds the full
map), not from the per-rank shrunk ``logical_to_all_physical_map``; replica columns are in
increasing physical-id order, the same order as :meth:`tempo.Instance.from_placement`, so a
solved :class:`tempo.Dispatch` maps onto the table column for column.  The serving runtime
allocates ``R`` once for any later placement (:func:`padded_replica_map`).

Race safety without double buffering: invalid columns are zero in every table ever
published and every entry is finite and non-negative, so a reader that sees any mixture of
old and new entries -- whole rows or single elements -- still gets, after renormalisation or
the uniform fallback, a distribution over replicas that hold the expert.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def replica_map(physical_to_logical_map, n_logical: int | None = None) -> np.ndarray:
    """int32[L, E, R]: physical ids of each logical expert's replicas, ascending, -1 padded.

    Parameters
    ----------
    physical_to_logical_map : int[L, P]
        Logical expert held by each physical slot (SGLang's map; GPU-major slots).
    n_logical : int, optional
        Number of logical experts E (default: largest id + 1).
    """
    p2l = np.asarray(physical_to_logical_map)
    if p2l.ndim == 1:
        p2l = p2l[None]
    if p2l.ndim != 2 or not np.issubdtype(p2l.dtype, np.integer):
        raise ValueError(f"physical_to_logical_map must be an integer [L, P] array, got {p2l.dtype} {p2l.shape}")
    if p2l.size == 0:
        raise ValueError(f"physical_to_logical_map is empty (shape {p2l.shape}): need L >= 1 layers and P >= 1 slots")
    if n_logical is not None and (isinstance(n_logical, bool) or int(n_logical) != n_logical or n_logical < 1):
        raise ValueError(f"n_logical must be a positive integer, got {n_logical!r}")
    if p2l.size and p2l.min() < 0:
        raise ValueError("physical_to_logical_map has negative logical ids")
    L, P = p2l.shape
    E = int(p2l.max()) + 1 if n_logical is None else int(n_logical)
    if p2l.size and p2l.max() >= E:
        raise ValueError(f"physical_to_logical_map has ids >= n_logical={E}")
    from ..world.placement import logical_to_physical

    log2phy, cnt = logical_to_physical(p2l, E)
    if np.any(cnt == 0):
        l, e = np.argwhere(cnt == 0)[0]
        raise ValueError(f"logical expert {e} of layer {l} has no physical replica")
    return log2phy.astype(np.int32)


def padded_replica_map(physical_to_logical_map, n_logical: int | None, width: int) -> np.ndarray:
    """:func:`replica_map` padded with -1 to ``width`` columns (``ValueError`` when an expert
    has more replicas than that)."""
    phys = replica_map(physical_to_logical_map, n_logical)
    if phys.shape[-1] > width:
        raise ValueError(f"an expert has {phys.shape[-1]} replicas, more than the table width {width} "
                         f"allocated at start-up")
    out = np.full(phys.shape[:-1] + (int(width),), -1, np.int32)
    out[..., :phys.shape[-1]] = phys
    return out


def uniform_prob(phys: np.ndarray, n_nodes: int = 1) -> np.ndarray:
    """``float32[n_nodes, L, E, R]``: every expert split evenly over its replicas (what
    ``noop`` keeps forever and a rebalance writes until the next table)."""
    valid = np.asarray(phys) >= 0
    prob = (valid / np.maximum(valid.sum(-1, keepdims=True), 1)).astype(np.float32)
    return np.broadcast_to(prob, (int(n_nodes),) + prob.shape).copy()


def effective_probabilities(prob: np.ndarray, phys: np.ndarray) -> np.ndarray:
    """What the kernel samples from: each row clipped to valid, finite, non-negative
    entries and renormalised; a row summing to zero becomes uniform over the replicas that
    hold the expert.  Shapes ``[..., R]``; the result is float64 and every row sums to 1 over
    ``phys >= 0`` (the kernel's semantics, in numpy, for tests and the refresher)."""
    valid = np.asarray(phys) >= 0
    p = np.asarray(prob, dtype=np.float64)
    p = np.where(valid & np.isfinite(p) & (p > 0), p, 0.0)
    s = p.sum(axis=-1, keepdims=True)
    uni = valid / np.maximum(valid.sum(axis=-1, keepdims=True), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s > 0, p / np.where(s > 0, s, 1.0), uni)


def validate_table(prob: np.ndarray, phys: np.ndarray) -> None:
    """Raise ``ValueError`` unless ``prob`` may be published against ``phys``: same shape,
    finite, non-negative, zero on every padding column."""
    prob, phys = np.asarray(prob), np.asarray(phys)
    if prob.shape != phys.shape:
        raise ValueError(f"prob has shape {prob.shape}, phys has {phys.shape}")
    if not np.all(np.isfinite(prob)):
        raise ValueError("prob has non-finite entries")
    if np.any(prob < 0):
        raise ValueError("prob has negative entries")
    if np.any(prob[phys < 0] != 0):
        raise ValueError("prob is non-zero on a padding column (a replica that does not exist)")


@dataclass
class DispatchTable:
    """A live table: ``prob float32[N, L, E, R]`` (``N`` source nodes, 1 when flat) and
    ``phys int32[L, E, R]`` (see the module docstring)."""

    prob: np.ndarray
    phys: np.ndarray

    def __post_init__(self):
        if np.ndim(self.phys) != 3 or np.ndim(self.prob) != 4 or tuple(np.shape(self.prob))[1:] != tuple(np.shape(self.phys)):
            raise ValueError(f"a table is prob [N, L, E, R] over phys [L, E, R]; got prob {np.shape(self.prob)} and "
                             f"phys {np.shape(self.phys)}")

    @classmethod
    def uniform(cls, phys: np.ndarray, n_nodes: int = 1) -> "DispatchTable":
        """Even split over each expert's replicas (what ``noop`` keeps forever)."""
        phys = np.asarray(phys, np.int32)
        return cls(uniform_prob(phys, n_nodes), phys)

    @classmethod
    def from_placement(cls, physical_to_logical_map, n_logical: int | None = None, n_nodes: int = 1,
                       width: int | None = None) -> "DispatchTable":
        """The uniform table of a placement, ``width`` replica columns (default: the most any
        expert has)."""
        phys = replica_map(physical_to_logical_map, n_logical) if width is None else \
            padded_replica_map(physical_to_logical_map, n_logical, width)
        return cls.uniform(phys, n_nodes)

    @property
    def shape(self) -> tuple:
        return self.prob.shape

    @property
    def n_nodes(self) -> int:
        return self.prob.shape[0]

    def layer(self, layer: int, node: int = 0):
        """(prob [E, R], phys [E, R]) of one layer as seen from one source node, for the kernel."""
        return self.prob[node, layer], self.phys[layer]

    def validate(self) -> None:
        validate_table(self.prob, np.broadcast_to(self.phys, self.prob.shape))


def torn_publication(old: np.ndarray, new: np.ndarray, phys: np.ndarray, order: str = "element"):
    """Simulate publishing ``new`` over ``old`` one element (``"element"``, ``"reverse"``) or
    one row (``"row"``) at a time; yield every intermediate live table.  Used to check the
    race-safety argument of Section 4.4: each state, read through
    :func:`effective_probabilities`, must be a valid table."""
    if old.shape != new.shape or old.shape != phys.shape:
        raise ValueError(f"old {old.shape}, new {new.shape} and phys {phys.shape} must share one shape")
    if order not in ("element", "reverse", "row"):
        raise ValueError(f"order must be 'element', 'reverse' or 'row', got {order!r}")
    live = np.array(old, copy=True)
    idx = list(np.ndindex(*live.shape)) if order != "row" else [i for i in np.ndindex(*live.shape[:-1])]
    if order == "reverse":
        idx = idx[::-1]
    for i in idx:
        live[i] = new[i]
        yield live


def extreme_tables(phys) -> tuple[np.ndarray, np.ndarray]:
    """(old, new) dispatch tables over the replica map ``phys`` [E, width] (-1 padding) that are
    as far apart as tables get: ``old`` puts every expert's mass on its first replica, ``new`` on
    its last -- the worst case for a torn publication (:func:`torn_publication_report`)."""
    phys = np.asarray(phys)
    if phys.ndim != 2 or not (phys[:, 0] >= 0).all():
        raise ValueError("phys must be a [E, width] replica map with at least one replica per expert")
    rows = np.arange(phys.shape[0])
    last = (phys >= 0).sum(axis=1) - 1          # replicas come first, padding after
    old, new = np.zeros(phys.shape, np.float32), np.zeros(phys.shape, np.float32)
    old[rows, 0] = 1.0
    new[rows, last] = 1.0
    return old, new


def torn_publication_report(old, new, phys, order: str = "element") -> dict:
    """Counts over :func:`torn_publication`: states read, invalid reads (a row not summing
    to 1 or with mass on a padding column) and reads that hit the uniform fallback."""
    phys = np.asarray(phys)
    states = invalid = fallbacks = 0
    for live in torn_publication(np.asarray(old), np.asarray(new), phys, order):
        eff = effective_probabilities(live, phys)
        states += 1
        invalid += int(not np.allclose(eff.sum(-1), 1.0) or np.any(eff[phys < 0] != 0))
        fallbacks += int((np.where(phys >= 0, np.clip(live, 0, None), 0).sum(-1) == 0).sum())
    return {"states": states, "invalid": invalid, "fallbacks": fallbacks}
