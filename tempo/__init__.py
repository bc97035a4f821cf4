"""TEMPO: makespan-aware expert-parallel dispatch (arXiv 2608.13057), as a library.

``import tempo`` needs numpy, scipy, highspy and pandas only.

>>> import tempo
>>> inst = tempo.Instance.full_replication([600, 30, 30, 30, 30, 30, 30], n_gpus=2)
>>> model = tempo.CostModel(a=0, b=15, c=0, beta=0.1)
>>> round(model.makespan(inst, tempo.solve(inst, model, policy="tempo")), 6)
60.0
"""
from __future__ import annotations

from .world import placement, workloads
from .theory import bounds as theory
from .core.cost import CostModel
from .core.instance import Dispatch, Instance
from .policies import available_policies, solve

from .core.version import __version__

__all__ = ["Instance", "Dispatch", "CostModel", "solve", "available_policies", "__version__"]
