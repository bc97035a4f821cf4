"""Array helpers shared by the policies (compact replica slots, GPU -> slot maps)."""
from __future__ import annotations

import numpy as np

from ..core.instance import Instance


def compact_slots(inst: Instance) -> np.ndarray:
    """int64[E, R]: the valid slot indices of each expert first, in slot order (rest padded
    with the first valid slot, or 0).  ``compact[e, j]`` for ``j < n_replicas[e]`` is the
    j-th valid slot of expert e."""
    order = np.argsort(~inst.valid, axis=1, kind="stable")
    first = order[:, :1]
    j = np.arange(inst.n_slots)[None, :]
    return np.where(j < inst.n_replicas[:, None], order, first)


def slot_on_gpu(inst: Instance) -> np.ndarray:
    """int64[E, n_gpus]: the first slot of expert e on GPU g, or -1 if none."""
    out = np.full((inst.n_experts, inst.n_gpus), -1, dtype=np.int64)
    for r in range(inst.n_slots - 1, -1, -1):
        e = np.flatnonzero(inst.valid[:, r])
        out[e, inst.replica_gpu[e, r]] = r
    return out


def even_integer_split(n: np.ndarray, parts: np.ndarray, offset: np.ndarray, width: int) -> np.ndarray:
    """float64[len(n), width]: ``n`` split into ``parts`` integer pieces differing by at most
    one; the remainder goes to pieces ``offset, offset+1, ...`` (mod parts).  Pieces at
    index >= parts are zero."""
    parts = np.maximum(parts, 1)
    j = np.arange(width)[None, :]
    base = (n // parts)[:, None]
    rem = (n % parts)[:, None]
    extra = ((j - offset[:, None]) % parts[:, None]) < rem
    out = (base + extra).astype(np.float64)
    out[j >= parts[:, None]] = 0.0
    return out


def scatter_compact(inst: Instance, compact_values: np.ndarray) -> np.ndarray:
    """Place values given per compact replica index (float[E, R]) back on slot columns."""
    comp = compact_slots(inst)
    shares = np.zeros(inst.replica_gpu.shape, dtype=np.float64)
    e = np.repeat(np.arange(inst.n_experts), inst.n_slots).reshape(inst.n_experts, inst.n_slots)
    mask = np.arange(inst.n_slots)[None, :] < inst.n_replicas[:, None]
    np.add.at(shares, (e[mask], comp[mask]), compact_values[mask])
    return shares
