"""Every layer of a model in one call, through the same registry and checks as :func:`solve`
(the serving solver's door, paper Section 4.4: a refresh solves every MoE layer's window).

:func:`solve_batch` validates the counts, the replica layouts, the policy, the model and the
options once for all layers (as :func:`~tempo.policies.registry.solve` does for one), runs the
policy -- through a batched implementation where one is registered (:data:`BATCHED`: tempo's
compiled :func:`~tempo.policies.tempo_fast.solve_layers`), else layer by layer through
:func:`~tempo.policies.registry.solve` -- and validates every layer's shares as
:meth:`~tempo.core.instance.Dispatch.validate` does.  Both paths give the same shares.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.cost import CostModel
from ..core.instance import Instance
from .registry import _check_options, solve, spec


def _tempo_layers(counts, replica_gpu, n_gpus, model, **options):
    """tempo on every layer with :func:`~tempo.policies.tempo_fast.solve_layers` (one compiled
    call per layer, no Instance or Dispatch); None for the layers it would solve differently
    from ``tempo_fast``: full replication (the exchange restarts) or explicit token-LP variants."""
    from .tempo_fast import TempoOptions, solve_layers

    preset = options.pop("options", None)
    o = TempoOptions.resolve(preset, options)
    if o.lp_variants != "auto":
        return None
    valid = replica_gpu >= 0
    full = np.zeros(counts.shape[0], bool)
    for layer in range(counts.shape[0]):  # every expert on every GPU: tempo_fast runs its restarts there
        held = np.zeros((counts.shape[1], n_gpus), bool)
        e, r = np.nonzero(valid[layer])
        held[e, replica_gpu[layer][e, r]] = True
        full[layer] = held.all()
    if full.any() and o.restarts and o.local_search:
        return None
    return solve_layers(counts, replica_gpu, n_gpus, model, preset, **options)


#: policy name -> batched implementation ``(counts [L, E], replica_gpu [L, E, R], n_gpus, model,
#: **options) -> shares [L, E, R]`` (or None: solve layer by layer); it must give the shares the
#: registered policy gives each layer.
BATCHED: dict[str, Callable] = {"tempo": _tempo_layers}


def solve_batch(counts, replica_gpu, n_gpus: int, model: CostModel | None = None, policy: str = "tempo",
                gpus_per_node: int | None = None, rtol: float = 1e-9, atol: float = 1e-6,
                **options) -> np.ndarray:
    """Shares of every layer: ``float64[L, E, R]``, row ``[l, e]`` summing to ``counts[l, e]``.

    Parameters
    ----------
    counts : int[L, E]
        Tokens per layer and logical expert (an integer array: counts never pass through float).
    replica_gpu : int[L, E, R]
        Each layer's replica layout (:attr:`Instance.replica_gpu`, ``-1`` for unused slots).
    n_gpus : int
    model : CostModel
        Needed by the policies whose spec says ``needs_model``.
    policy : str
        A registered policy (:func:`~tempo.policies.registry.select`).
    gpus_per_node : int, optional
        Passed to each layer's :class:`Instance` on the layer-by-layer path.
    rtol, atol : float
        Tolerances of the row-sum check (those of :meth:`Dispatch.validate`).
    **options
        The policy's options, checked against its options dataclass.

    Raises
    ------
    TypeError, ValueError
        Naming the argument (and the layer and expert of a share that is not valid).
    """
    if not isinstance(policy, str):
        raise TypeError(f"policy must be a policy name (str), got {type(policy).__name__}")
    s = spec(policy)
    if model is not None and not isinstance(model, CostModel):
        raise TypeError(f"model must be a tempo.CostModel, got {type(model).__name__}")
    if model is None and s.needs_model:
        raise ValueError(f"policy {policy!r} needs a cost model (model=None given)")
    if options:
        _check_options(s, options)
    c = np.asarray(counts)
    rep = np.asarray(replica_gpu)
    if c.ndim != 2 or rep.ndim != 3 or rep.shape[:2] != c.shape:
        raise ValueError(f"counts must be [L, E] and replica_gpu [L, E, R] with the same L and E; got {c.shape} "
                         f"and {rep.shape}")
    if c.dtype == bool or not np.issubdtype(c.dtype, np.integer):
        raise TypeError(f"counts must be an integer array, got dtype {c.dtype}")
    if rep.dtype == bool or not np.issubdtype(rep.dtype, np.integer):
        raise TypeError(f"replica_gpu must be an integer array, got dtype {rep.dtype}")
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, (int, np.integer)) or n_gpus < 1:
        raise ValueError(f"n_gpus must be a positive integer, got {n_gpus!r}")
    if c.size and c.min() < 0:
        raise ValueError("counts must be non-negative")
    if np.issubdtype(c.dtype, np.unsignedinteger) and c.size and c.max() > np.iinfo(np.int64).max:
        raise ValueError("counts do not fit int64")
    c = c.astype(np.int64)
    rep = rep.astype(np.int64)
    if rep.size and (rep.min() < -1 or rep.max() >= n_gpus):
        raise ValueError(f"replica_gpu entries must lie in [-1, n_gpus={n_gpus})")
    valid = rep >= 0
    orphan = (c > 0) & ~valid.any(axis=2)
    if orphan.any():
        layer, e = np.argwhere(orphan)[0]
        raise ValueError(f"replica_gpu: layer {layer} expert {e} has tokens but no replica")
    shares = None
    batched = BATCHED.get(policy)
    if batched is not None and c.shape[0]:
        shares = batched(c, rep, int(n_gpus), model, **options)
    if shares is None:
        shares = np.zeros(rep.shape)
        for layer in range(c.shape[0]):
            inst = Instance(c[layer], rep[layer], int(n_gpus), gpus_per_node)
            shares[layer] = solve(inst, model, policy, **options).shares
    return _validated(np.asarray(shares, dtype=np.float64), c, valid, rtol, atol)


def _validated(s: np.ndarray, counts: np.ndarray, valid: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """:meth:`Dispatch.validate` over every layer at once: finite, non-negative and zero on
    unused slots up to ``atol``, rows summing to their counts; the noise is then cleared."""
    if s.shape != valid.shape:
        raise ValueError(f"the policy returned shares of shape {s.shape}, expected {valid.shape}")
    if not np.all(np.isfinite(s)):
        layer, e, _ = np.argwhere(~np.isfinite(s))[0]
        raise ValueError(f"shares of layer {layer} expert {e} contain NaN or infinite values")
    if s.size and s.min() < -atol:
        layer, e, _ = np.argwhere(s < -atol)[0]
        raise ValueError(f"shares of layer {layer} expert {e} are negative ({s[layer, e].min():g})")
    if np.any(np.abs(np.where(valid, 0.0, s)) > atol):
        layer, e, _ = np.argwhere(~valid & (np.abs(s) > atol))[0]
        raise ValueError(f"shares of layer {layer} expert {e} are non-zero on unused replica slots")
    s = np.where(valid & (s > 0), s, 0.0)
    rows = s.sum(axis=2)
    bad = ~np.isclose(rows, counts, rtol=rtol, atol=atol)
    if bad.any():
        layer, e = np.argwhere(bad)[0]
        raise ValueError(f"shares of layer {layer} expert {e} sum to {rows[layer, e]:g}, expected "
                         f"counts[{layer}, {e}] = {counts[layer, e]}")
    return s
