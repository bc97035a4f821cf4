"""Topology-aware dispatch (paper Section 4.3): solve the per-GPU shares first, then pair
token sources with replicas same-node-first.

Every GPU is a token source: expert e's tokens come from all nodes equally (node-uniform
sources, ``n_e / n_nodes`` per node).  Given the solved shares ``x[e, r]``, each node first
serves its own demand (the replicas of e on that node), and only the remainder crosses the
network, spread over the other nodes' leftover demand in proportion.  Per expert this is a
transportation problem whose inter-node volume ``n_e - sum_k min(supply_k, demand_k)`` is the
minimum over all pairings with these marginals.  The result is one dispatch table per source
node; summed over nodes it reproduces ``x`` exactly, so per-GPU loads and the compute
makespan are unchanged -- only which source feeds which replica moves.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .instance import Dispatch, Instance


@dataclass
class NodeTables:
    """Per-source-node dispatch tables.

    Attributes
    ----------
    shares : float64[n_nodes, E, R]
        Tokens from source node k of expert e sent to replica slot r.
    inter_node_tokens : float
        Tokens that cross nodes with these tables.
    flat_inter_node_tokens : float
        Tokens that would cross nodes if every node used the one global table.
    """

    shares: np.ndarray
    inter_node_tokens: float
    flat_inter_node_tokens: float

    def probabilities(self, inst: Instance) -> np.ndarray:
        """float64[n_nodes, E, R]: each node's routing table (rows sum to 1; an idle row is
        uniform over the expert's replicas)."""
        return np.stack([Dispatch(s).probabilities(inst) for s in self.shares])


def _nodes(inst: Instance) -> tuple[int, np.ndarray]:
    if inst.gpus_per_node is None:
        raise ValueError("the instance needs gpus_per_node for a topology-aware split")
    n_nodes = inst.n_gpus // inst.gpus_per_node
    node = np.where(inst.valid, inst.replica_gpu // inst.gpus_per_node, -1)
    return n_nodes, node


def same_node_first(inst: Instance, dispatch: Dispatch) -> NodeTables:
    """Split each expert's node-uniform sources over its replicas same-node-first
    (Section 4.3), keeping the solved per-replica shares exactly."""
    dispatch.validate(inst)
    n_nodes, node = _nodes(inst)
    x = np.where(inst.valid, dispatch.shares, 0.0)
    E, R = x.shape
    e_idx = np.repeat(np.arange(E), R).reshape(E, R)
    demand = np.zeros((E, n_nodes))
    m = inst.valid
    np.add.at(demand, (e_idx[m], node[m]), x[m])
    supply = np.repeat((inst.counts / n_nodes)[:, None], n_nodes, axis=1)
    local = np.minimum(supply, demand)
    rs, rd = supply - local, demand - local
    rd_tot = rd.sum(axis=1, keepdims=True)
    cross = np.where(rd_tot[:, :, None] > 0, rs[:, :, None] * rd[:, None, :] / np.where(rd_tot > 0, rd_tot, 1)[:, :, None], 0.0)
    flow = cross + np.einsum("ek,kj->ekj", local, np.eye(n_nodes))  # [E, source k, replica node j]
    frac = np.where(m, x / np.where(demand[e_idx, np.maximum(node, 0)] > 0, demand[e_idx, np.maximum(node, 0)], 1.0), 0.0)
    shares = np.zeros((n_nodes, E, R))
    for k in range(n_nodes):
        shares[k] = np.where(m, flow[e_idx, k, np.maximum(node, 0)] * frac, 0.0)
    inter = float(inst.counts.sum() - local.sum())
    # flat: every node splits its supply over replicas in proportion to x
    with np.errstate(invalid="ignore", divide="ignore"):
        share_node = np.where(inst.counts[:, None] > 0, demand / np.maximum(inst.counts, 1)[:, None], 0.0)
    flat_local = (supply * share_node).sum()
    return NodeTables(shares, inter, float(inst.counts.sum() - flat_local))
