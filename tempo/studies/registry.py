"""The experiments registry: :func:`experiment` registers ``fn(config) -> DataFrame`` under a
name in :data:`EXPERIMENTS`; :func:`tempo.studies.run` runs one by name.  The experiment
modules (simulator, replay, solver, toy) import this module, and the package imports them, so
nothing imports in a circle."""
from __future__ import annotations

from typing import Callable

import pandas as pd

EXPERIMENTS: dict[str, Callable[[dict], pd.DataFrame]] = {}

#: The paper's "static" baseline: SGLang's static dispatch (each source rank uses its local
#: replica, otherwise a spread over the replicas; ``tempo.policies`` name ``static_sglang``).
#: Every result column, ratio and chart labelled "static" uses it.  The other map, every token
#: of an expert on its first replica (``tempo.policies`` name ``static``), is labelled
#: ``first_replica`` wherever a result shows it.
STATIC = "static_sglang"
FIRST_REPLICA = "static"


def experiment(name: str):
    """Decorator: register an experiment function ``(config: dict) -> pandas.DataFrame`` under ``name``."""
    def deco(fn):
        EXPERIMENTS[name] = fn
        return fn

    return deco
