"""TEMPO: makespan-aware expert-parallel dispatch (arXiv 2608.13057), as a library.

``import tempo`` needs numpy, scipy, highspy and pandas only.

>>> import tempo
>>> inst = tempo.Instance.full_replication([600, 30, 30, 30, 30, 30, 30], n_gpus=2)
>>> model = tempo.CostModel(a=0, b=15, c=0, beta=0.1)
>>> round(model.makespan(inst, tempo.solve(inst, model, policy="tempo")), 6)
60.0
"""
from __future__ import annotations

import time

from . import placement, theory, workloads
from .cost import CostModel
from .instance import Dispatch, Instance
from . import policies

__version__ = "0.1.0"

__all__ = ["Instance", "Dispatch", "CostModel", "solve", "available_policies", "__version__"]


def available_policies() -> list[str]:
    """Names accepted by :func:`solve`."""
    return policies.available()


def solve(inst: Instance, model: CostModel | None = None, policy: str = "tempo", **options) -> Dispatch:
    """Dispatch one layer's tokens over expert replicas with the named policy.

    Parameters
    ----------
    inst : Instance
    model : CostModel
        Needed by the model-aware policies (``tempo``, ``milp``); proxies ignore it.
    policy : str
        One of :func:`available_policies`.
    **options
        Passed to the policy (e.g. ``time_limit`` for ``milp``, ``vertex`` for ``token_lp``).

    Returns
    -------
    Dispatch
        Validated against ``inst``; ``meta["policy"]`` and ``meta["solve_s"]`` are set.
    """
    if not isinstance(inst, Instance):
        raise TypeError(f"inst must be a tempo.Instance, got {type(inst).__name__}")
    if model is not None and not isinstance(model, CostModel):
        raise TypeError(f"model must be a tempo.CostModel, got {type(model).__name__}")
    fn = policies.get(policy)
    if model is None and policy in ("tempo", "milp"):
        raise ValueError(f"policy {policy!r} needs a cost model (model=None given)")
    t0 = time.perf_counter()
    d = fn(inst, model, **options)
    d.meta.setdefault("solve_s", time.perf_counter() - t0)
    d.meta["policy"] = policy
    return d.validate(inst)
