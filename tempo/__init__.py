"""TEMPO: makespan-aware expert-parallel dispatch (arXiv 2608.13057), as a library.

``import tempo`` needs numpy, scipy, highspy and pandas only.

>>> import tempo
>>> inst = tempo.Instance.full_replication([600, 30, 30, 30, 30, 30, 30], n_gpus=2)
>>> model = tempo.CostModel(a=0, b=15, c=0, beta=0.1)
>>> round(model.makespan(inst, tempo.solve(inst, model, policy="tempo")), 6)
60.0
"""
from .core.cost import CostModel
from .core.instance import Dispatch, Instance
from .core.version import __version__
from .policies import available_policies, solve

__all__ = ["Instance", "Dispatch", "CostModel", "solve", "available_policies", "__version__"]


def __dir__():
    """The public face only (PEP 562): the layers below are imported by their own names,
    ``tempo.core``, ``tempo.policies``, ``tempo.world`` ..., never through this module."""
    return list(__all__)
